/*
 * stagger's own Redis connection (see rconn.h): a non-blocking socket
 * driven with poll(2) so that every wait has a bound, OpenSSL on top of it
 * for rediss://, hiredis's formatter and reply reader for the protocol.
 *
 * Buffers: out holds the formatted commands not yet written (sent in
 * order, all of them before reading); the reader holds bytes received and
 * not yet parsed. A reply is returned as soon as the reader has one; bytes
 * of later replies stay in the reader for the next call (pipelines).
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#ifdef STG_REDIS_HAVE_TLS
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>
#endif

#include "redis/rconn.h"
#include "util/clock.h"
#include "util/sigpipe.h"

struct stg__rconn {
    int fd;
    int64_t command_us;
    char where[STG_REDIS_HOST_MAX + 10];
    redisReader *reader;
    char *out;
    size_t out_len, out_cap;
    stg__rconn_err err;
    char errstr[256];
#ifdef STG_REDIS_HAVE_TLS
    SSL_CTX *ctx;
    SSL *ssl;
#else
    void *ssl;
#endif
};

bool stg__rconn_have_tls(void)
{
#ifdef STG_REDIS_HAVE_TLS
    return true;
#else
    return false;
#endif
}

static bool set_err(stg__rconn *c, stg__rconn_err e, const char *text)
{
    if (c->err == STG__RC_OK) {
        c->err = e;
        snprintf(c->errstr, sizeof c->errstr, "%s", text);
    }
    return false;
}

static bool set_errno(stg__rconn *c, int e)
{
    if (e == ECONNRESET || e == EPIPE)
        return set_err(c, STG__RC_CLOSED, strerror(e));
    return set_err(c, STG__RC_IO, strerror(e));
}

stg__rconn_err stg__rconn_error(const stg__rconn *c, const char **text)
{
    if (text)
        *text = c->err ? c->errstr : "";
    return c->err;
}

/* ---- waiting ------------------------------------------------------------ */

/* Wait until fd is ready for ev, at most us. 1 ready, 0 timed out, -1
 * error (errno). */
static int wait_fd(int fd, short ev, int64_t us)
{
    int64_t end = stg__clock_mono_us() + us;
    for (;;) {
        int64_t left = end - stg__clock_mono_us();
        if (left < 0)
            left = 0;
        struct pollfd p = {.fd = fd, .events = ev};
        int n = poll(&p, 1, (int)((left + 999) / 1000));
        if (n > 0)
            return 1;
        if (n == 0)
            return 0;
        if (errno != EINTR)
            return -1;
    }
}

/* ---- TCP connect -------------------------------------------------------- */

static int connect_one(const struct addrinfo *ai, int64_t end_us, int *err_no, bool *timed_out)
{
    int fd = socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC | SOCK_NONBLOCK,
                    ai->ai_protocol);
    if (fd < 0) {
        *err_no = errno;
        return -1;
    }
    if (connect(fd, ai->ai_addr, ai->ai_addrlen) == 0)
        return fd;
    if (errno != EINPROGRESS) {
        *err_no = errno;
        close(fd);
        return -1;
    }
    int64_t left = end_us - stg__clock_mono_us();
    int w = left > 0 ? wait_fd(fd, POLLOUT, left) : 0;
    if (w <= 0) {
        if (w == 0)
            *timed_out = true;
        *err_no = w == 0 ? ETIMEDOUT : errno;
        close(fd);
        return -1;
    }
    int so = 0;
    socklen_t sl = sizeof so;
    if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &so, &sl) != 0 || so != 0) {
        *err_no = so ? so : errno;
        close(fd);
        return -1;
    }
    return fd;
}

/* ---- TLS ---------------------------------------------------------------- */

#ifdef STG_REDIS_HAVE_TLS
/* OpenSSL's first queued error as text, the queue cleared. */
static void ssl_text(char *buf, size_t len, const char *dflt)
{
    unsigned long e = ERR_peek_last_error();
    if (e) {
        const char *r = ERR_reason_error_string(e);
        snprintf(buf, len, "%s", r ? r : dflt);
    } else {
        snprintf(buf, len, "%s", dflt);
    }
    ERR_clear_error();
}

static bool tls_setup(stg__rconn *c, const char *host, const stg_redis_tls *t, char *why,
                      size_t why_len)
{
    static const stg_redis_tls none;
    if (!t)
        t = &none;
    char text[200];
    ERR_clear_error();
    c->ctx = SSL_CTX_new(TLS_client_method());
    if (!c->ctx) {
        snprintf(why, why_len, "cannot set up TLS for Redis at %s (OpenSSL)", c->where);
        return false;
    }
    SSL_CTX_set_min_proto_version(c->ctx, TLS1_2_VERSION);
    SSL_CTX_set_mode(c->ctx, SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER);
    /* A peer that closes without close_notify is a closed connection
     * (SSL_ERROR_ZERO_RETURN), as on plain TCP, not a TLS error. */
#ifdef SSL_OP_IGNORE_UNEXPECTED_EOF /* OpenSSL 3 */
    SSL_CTX_set_options(c->ctx, SSL_OP_IGNORE_UNEXPECTED_EOF);
#endif
    if (t->ca_file || t->ca_path) {
        if (SSL_CTX_load_verify_locations(c->ctx, t->ca_file, t->ca_path) != 1) {
            ssl_text(text, sizeof text, "unreadable");
            snprintf(why, why_len, "cannot use the CA certificates in %s for Redis at %s: %s",
                     t->ca_file ? t->ca_file : t->ca_path, c->where, text);
            return false;
        }
    } else if (SSL_CTX_set_default_verify_paths(c->ctx) != 1) {
        ssl_text(text, sizeof text, "unreadable");
        snprintf(why, why_len, "cannot read the system's CA certificates: %s", text);
        return false;
    }
    SSL_CTX_set_verify(c->ctx, t->insecure ? SSL_VERIFY_NONE : SSL_VERIFY_PEER, NULL);
    if (t->cert) {
        const char *key = t->key ? t->key : t->cert;
        if (SSL_CTX_use_certificate_chain_file(c->ctx, t->cert) != 1) {
            ssl_text(text, sizeof text, "unreadable");
            snprintf(why, why_len, "cannot use the client certificate %s: %s", t->cert, text);
            return false;
        }
        if (SSL_CTX_use_PrivateKey_file(c->ctx, key, SSL_FILETYPE_PEM) != 1 ||
            SSL_CTX_check_private_key(c->ctx) != 1) {
            ssl_text(text, sizeof text, "unreadable");
            snprintf(why, why_len, "cannot use the client key %s: %s", key, text);
            return false;
        }
    }
    c->ssl = SSL_new(c->ctx);
    if (!c->ssl || SSL_set_fd(c->ssl, c->fd) != 1) {
        snprintf(why, why_len, "cannot set up TLS for Redis at %s (OpenSSL)", c->where);
        return false;
    }
    unsigned char addr[16];
    bool is_ip = inet_pton(AF_INET, host, addr) == 1 || inet_pton(AF_INET6, host, addr) == 1;
    if (is_ip) {
        if (!t->insecure && X509_VERIFY_PARAM_set1_ip_asc(SSL_get0_param(c->ssl), host) != 1) {
            snprintf(why, why_len, "cannot check the address %s in a certificate", host);
            return false;
        }
    } else {
        SSL_set_tlsext_host_name(c->ssl, host);
        if (!t->insecure && SSL_set1_host(c->ssl, host) != 1) {
            snprintf(why, why_len, "cannot check the name %s in a certificate", host);
            return false;
        }
    }
    return true;
}

/* Drive the handshake until done or end_us. */
static bool tls_handshake(stg__rconn *c, int64_t end_us, int64_t connect_us, char *why,
                          size_t why_len)
{
    for (;;) {
        ERR_clear_error();
        int r = SSL_connect(c->ssl);
        if (r == 1)
            return true;
        int e = SSL_get_error(c->ssl, r);
        short ev = e == SSL_ERROR_WANT_READ ? POLLIN : e == SSL_ERROR_WANT_WRITE ? POLLOUT : 0;
        if (ev) {
            int64_t left = end_us - stg__clock_mono_us();
            int w = left > 0 ? wait_fd(c->fd, ev, left) : 0;
            if (w > 0)
                continue;
            snprintf(why, why_len,
                     "Redis at %s did not complete the TLS handshake within %lld ms "
                     "(is it a TLS port?)",
                     c->where, (long long)(connect_us / 1000));
            return false;
        }
        long v = SSL_get_verify_result(c->ssl);
        char text[200];
        if (v != X509_V_OK) {
            snprintf(why, why_len,
                     "TLS handshake with Redis at %s failed: its certificate did not verify "
                     "(%s); trust its CA with a CA file",
                     c->where, X509_verify_cert_error_string(v));
            ERR_clear_error();
        } else if (e == SSL_ERROR_SYSCALL && ERR_peek_last_error() == 0) {
            snprintf(why, why_len,
                     "TLS handshake with Redis at %s failed: the server closed the connection "
                     "(is it a TLS port?)",
                     c->where);
        } else {
            ssl_text(text, sizeof text, "handshake failure");
            snprintf(why, why_len, "TLS handshake with Redis at %s failed: %s%s", c->where, text,
                     strstr(text, "wrong version") ? " (is it a TLS port?)" : "");
        }
        return false;
    }
}
#endif

/* ---- open / free -------------------------------------------------------- */

stg__rconn *stg__rconn_open(const char *host, int port, const char *where, bool tls,
                            const stg_redis_tls *t, int64_t connect_us, int64_t command_us,
                            stg__rconn_err *err, char *why, size_t why_len)
{
    *err = STG__RC_NOMEM;
    stg__rconn *c = calloc(1, sizeof *c);
    if (!c || !(c->reader = redisReaderCreate())) {
        free(c);
        snprintf(why, why_len, "out of memory connecting to Redis at %s", where);
        return NULL;
    }
    c->fd = -1;
    c->command_us = command_us;
    snprintf(c->where, sizeof c->where, "%s", where);
#ifndef STG_REDIS_HAVE_TLS
    (void)t;
    if (tls) {
        *err = STG__RC_TLS;
        snprintf(why, why_len, "rediss:// (TLS) for Redis at %s: this build has no TLS "
                               "(OpenSSL's libssl-dev was missing at build time)", where);
        stg__rconn_free(c);
        return NULL;
    }
#endif

    int64_t end = stg__clock_mono_us() + connect_us;
    struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM};
    struct addrinfo *res = NULL;
    char ps[8];
    snprintf(ps, sizeof ps, "%d", port);
    int g = getaddrinfo(host, ps, &hints, &res);
    if (g != 0) {
        *err = STG__RC_IO;
        snprintf(why, why_len, "cannot connect to Redis at %s: %s", where, gai_strerror(g));
        stg__rconn_free(c);
        return NULL;
    }
    int err_no = 0;
    bool timed_out = false;
    for (struct addrinfo *ai = res; ai && c->fd < 0; ai = ai->ai_next)
        c->fd = connect_one(ai, end, &err_no, &timed_out);
    freeaddrinfo(res);
    if (c->fd < 0) {
        *err = timed_out ? STG__RC_TIMEOUT : STG__RC_IO;
        if (timed_out)
            snprintf(why, why_len, "Redis at %s did not accept a connection within %lld ms",
                     where, (long long)(connect_us / 1000));
        else
            snprintf(why, why_len, "cannot connect to Redis at %s: %s", where, strerror(err_no));
        stg__rconn_free(c);
        return NULL;
    }
    int one = 1;
    setsockopt(c->fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    setsockopt(c->fd, SOL_SOCKET, SO_KEEPALIVE, &one, sizeof one);
#ifdef STG_REDIS_HAVE_TLS
    if (tls) {
        *err = STG__RC_TLS;
        if (!tls_setup(c, host, t, why, why_len) ||
            !tls_handshake(c, end, connect_us, why, why_len)) {
            stg__rconn_free(c);
            return NULL;
        }
    }
#endif
    *err = STG__RC_OK;
    return c;
}

void stg__rconn_free(stg__rconn *c)
{
    if (!c)
        return;
#ifdef STG_REDIS_HAVE_TLS
    if (c->ssl)
        SSL_free(c->ssl); /* no close_notify: the peer may be gone; TCP's FIN says it */
    if (c->ctx)
        SSL_CTX_free(c->ctx);
#endif
    if (c->fd >= 0)
        close(c->fd);
    if (c->reader)
        redisReaderFree(c->reader);
    if (c->out) {
        /* The buffer may hold an AUTH with the password: wipe it. */
        memset(c->out, 0, c->out_cap);
        free(c->out);
    }
    free(c);
}

/* ---- commands ----------------------------------------------------------- */

bool stg__rconn_append(stg__rconn *c, int argc, const char *const *argv, const size_t *lens)
{
    if (c->err)
        return false;
    size_t tmp[64];
    size_t *ln = (size_t *)lens;
    size_t *heap = NULL;
    if (!lens) {
        ln = argc <= 64 ? tmp : (heap = malloc((size_t)argc * sizeof *heap));
        if (!ln)
            return set_err(c, STG__RC_NOMEM, "out of memory");
        for (int i = 0; i < argc; i++)
            ln[i] = strlen(argv[i]);
    }
    char *cmd = NULL;
    int n = redisFormatCommandArgv(&cmd, argc, (const char **)argv, ln);
    free(heap);
    if (n < 0 || !cmd)
        return set_err(c, STG__RC_NOMEM, "out of memory");
    if (c->out_len + (size_t)n > c->out_cap) {
        size_t cap = c->out_cap ? c->out_cap : 1024;
        while (cap < c->out_len + (size_t)n)
            cap *= 2;
        char *b = malloc(cap);
        if (!b) {
            memset(cmd, 0, (size_t)n);
            redisFreeCommand(cmd);
            return set_err(c, STG__RC_NOMEM, "out of memory");
        }
        if (c->out_len)
            memcpy(b, c->out, c->out_len);
        if (c->out) {
            memset(c->out, 0, c->out_cap);
            free(c->out);
        }
        c->out = b;
        c->out_cap = cap;
    }
    memcpy(c->out + c->out_len, cmd, (size_t)n);
    c->out_len += (size_t)n;
    memset(cmd, 0, (size_t)n);
    redisFreeCommand(cmd);
    return true;
}

static bool timeout(stg__rconn *c)
{
    return set_err(c, STG__RC_TIMEOUT, "no answer in time");
}

/* Write all of out. */
static bool flush_out(stg__rconn *c)
{
    size_t off = 0;
    bool ok = true;
    stg__sigpipe_guard g; /* TLS writes go through write(2) */
    stg__sigpipe_block(&g);
    while (ok && off < c->out_len) {
#ifdef STG_REDIS_HAVE_TLS
        if (c->ssl) {
            ERR_clear_error();
            int n = SSL_write(c->ssl, c->out + off, (int)(c->out_len - off));
            if (n > 0) {
                off += (size_t)n;
                continue;
            }
            int e = SSL_get_error(c->ssl, n);
            short ev = e == SSL_ERROR_WANT_READ ? POLLIN : e == SSL_ERROR_WANT_WRITE ? POLLOUT : 0;
            if (ev) {
                int w = wait_fd(c->fd, ev, c->command_us);
                if (w <= 0)
                    ok = w == 0 ? timeout(c) : set_errno(c, errno);
                continue;
            }
            if (e == SSL_ERROR_ZERO_RETURN ||
                (e == SSL_ERROR_SYSCALL && (errno == 0 || errno == EPIPE || errno == ECONNRESET))) {
                ERR_clear_error();
                ok = set_err(c, STG__RC_CLOSED, "connection closed");
            } else {
                char text[200];
                ssl_text(text, sizeof text, "TLS write error");
                ok = set_err(c, STG__RC_TLS, text);
            }
            continue;
        }
#endif
        ssize_t n = send(c->fd, c->out + off, c->out_len - off, MSG_NOSIGNAL);
        if (n > 0) {
            off += (size_t)n;
        } else if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
            int w = wait_fd(c->fd, POLLOUT, c->command_us);
            if (w <= 0)
                ok = w == 0 ? timeout(c) : set_errno(c, errno);
        } else if (n < 0 && errno != EINTR) {
            ok = set_errno(c, errno);
        }
    }
    stg__sigpipe_restore(&g);
    memset(c->out, 0, c->out_len);
    c->out_len = 0;
    return ok;
}

/* Read some bytes into the reader. */
static bool fill(stg__rconn *c)
{
    char buf[16384];
    for (;;) {
#ifdef STG_REDIS_HAVE_TLS
        if (c->ssl) {
            ERR_clear_error();
            int n = SSL_read(c->ssl, buf, sizeof buf);
            if (n > 0) {
                redisReaderFeed(c->reader, buf, (size_t)n);
                return true;
            }
            int e = SSL_get_error(c->ssl, n);
            short ev = e == SSL_ERROR_WANT_READ ? POLLIN : e == SSL_ERROR_WANT_WRITE ? POLLOUT : 0;
            if (ev) {
                int w = wait_fd(c->fd, ev, c->command_us);
                if (w <= 0)
                    return w == 0 ? timeout(c) : set_errno(c, errno);
                continue;
            }
            if (e == SSL_ERROR_ZERO_RETURN ||
                (e == SSL_ERROR_SYSCALL && ERR_peek_last_error() == 0 &&
                 (n == 0 || errno == 0 || errno == ECONNRESET))) {
                ERR_clear_error();
                return set_err(c, STG__RC_CLOSED, "connection closed");
            }
            char text[200];
            ssl_text(text, sizeof text, "TLS read error");
            return set_err(c, STG__RC_TLS, text);
        }
#endif
        ssize_t n = recv(c->fd, buf, sizeof buf, 0);
        if (n > 0) {
            redisReaderFeed(c->reader, buf, (size_t)n);
            return true;
        }
        if (n == 0)
            return set_err(c, STG__RC_CLOSED, "connection closed");
        if (errno == EAGAIN || errno == EWOULDBLOCK) {
            int w = wait_fd(c->fd, POLLIN, c->command_us);
            if (w <= 0)
                return w == 0 ? timeout(c) : set_errno(c, errno);
        } else if (errno != EINTR) {
            return set_errno(c, errno);
        }
    }
}

redisReply *stg__rconn_reply(stg__rconn *c)
{
    if (c->err)
        return NULL;
    if (c->out_len && !flush_out(c))
        return NULL;
    for (;;) {
        void *r = NULL;
        if (redisReaderGetReply(c->reader, &r) != REDIS_OK) {
            set_err(c, STG__RC_PROTOCOL, c->reader->errstr[0] ? c->reader->errstr
                                                                : "protocol error");
            return NULL;
        }
        if (r)
            return r;
        if (!fill(c))
            return NULL;
    }
}

redisReply *stg__rconn_command(stg__rconn *c, int argc, const char *const *argv,
                               const size_t *lens)
{
    if (!stg__rconn_append(c, argc, argv, lens))
        return NULL;
    return stg__rconn_reply(c);
}

bool stg__rconn_is_primary(stg__rconn *c)
{
    const char *argv[] = {"ROLE"};
    redisReply *r = stg__rconn_command(c, 1, argv, NULL);
    bool yes = r && r->type == REDIS_REPLY_ARRAY && r->elements > 0 &&
               r->element[0]->type == REDIS_REPLY_STRING && !strcmp(r->element[0]->str, "master");
    freeReplyObject(r);
    return yes;
}
