/*
 * stg_h2srv: a small HTTP/2 server for the tests (libnghttp2 + OpenSSL, h2
 * by ALPN over TLS), that says "never processed" on purpose: it refuses
 * streams with RST_STREAM REFUSED_STREAM, or ends a connection with a
 * GOAWAY whose last-stream-id leaves the streams after it unprocessed
 * (RFC 9113 §8.7). Test code only: it listens on 127.0.0.1 and nowhere
 * else. nghttpd cannot do either on demand, hence this.
 *
 * CLI:
 *   stg_h2srv --cert C.pem --key K.pem --log FILE [--refuse N]
 *             [--refuse-path P] [--goaway-after K]
 *   Prints "listening on https://127.0.0.1:PORT" (a free port) as its first
 *   stdout line and runs until SIGTERM/SIGINT. One thread per connection.
 *   --refuse N        the first N streams it receives (over all
 *                     connections) get RST_STREAM REFUSED_STREAM
 *   --refuse-path P   every stream for path P is refused (a broken server)
 *   --goaway-after K  on each connection, at its K-th stream: GOAWAY with
 *                     last-stream-id = that stream; the streams up to it
 *                     are answered, later ones never processed (nghttp2
 *                     ignores them), then the connection closes
 *   Each request answered is a 200 with body "ok <path>\n".
 *
 * Invariants: the log (--log) has one line per complete request the
 * server took, written whole under one lock: "ANSWER <path>" (processed)
 * or "REFUSE <path>" (RST_STREAM REFUSED_STREAM). A stream above a sent
 * GOAWAY's last-stream-id is dropped by nghttp2 before any callback, so it
 * is in no line: it was never processed. `grep -c '^ANSWER /x$'` is then
 * how often /x was processed: once per job for a correct client.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <nghttp2/nghttp2.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

static int refuse_left;
static const char *refuse_path;
static int goaway_after;
static FILE *logfp;
static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;

typedef struct {
    int32_t id;
    char path[512];
    char body[600];
    size_t len, off;
} stream;

typedef struct {
    SSL *ssl;
    nghttp2_session *s;
    int streams;     /* streams begun on this connection */
    bool goaway;
} conn;

static void logline(const char *what, const char *path)
{
    pthread_mutex_lock(&mu);
    fprintf(logfp, "%s %s\n", what, path);
    fflush(logfp);
    pthread_mutex_unlock(&mu);
}

static ssize_t body_read(nghttp2_session *s, int32_t id, uint8_t *buf, size_t len,
                         uint32_t *flags, nghttp2_data_source *src, void *ud)
{
    (void)s;
    (void)id;
    (void)ud;
    stream *st = src->ptr;
    size_t n = st->len - st->off;
    if (n > len)
        n = len;
    memcpy(buf, st->body + st->off, n);
    st->off += n;
    if (st->off == st->len)
        *flags |= NGHTTP2_DATA_FLAG_EOF;
    return (ssize_t)n;
}

static int on_begin_headers(nghttp2_session *s, const nghttp2_frame *f, void *ud)
{
    (void)ud;
    if (f->hd.type != NGHTTP2_HEADERS || f->headers.cat != NGHTTP2_HCAT_REQUEST)
        return 0;
    stream *st = calloc(1, sizeof *st);
    if (!st)
        return NGHTTP2_ERR_CALLBACK_FAILURE;
    st->id = f->hd.stream_id;
    nghttp2_session_set_stream_user_data(s, f->hd.stream_id, st);
    return 0;
}

static int on_header(nghttp2_session *s, const nghttp2_frame *f, const uint8_t *name,
                     size_t namelen, const uint8_t *value, size_t valuelen, uint8_t flags,
                     void *ud)
{
    (void)flags;
    (void)ud;
    stream *st = nghttp2_session_get_stream_user_data(s, f->hd.stream_id);
    if (st && namelen == 5 && memcmp(name, ":path", 5) == 0 && valuelen < sizeof st->path) {
        memcpy(st->path, value, valuelen);
        st->path[valuelen] = '\0';
    }
    return 0;
}

/* The request is complete (END_STREAM): answer it, or refuse it. */
static int on_request(conn *c, stream *st)
{
    bool refuse = false;
    pthread_mutex_lock(&mu);
    if (refuse_left > 0) {
        refuse_left--;
        refuse = true;
    }
    pthread_mutex_unlock(&mu);
    if (refuse_path && strcmp(st->path, refuse_path) == 0)
        refuse = true;
    if (refuse) {
        logline("REFUSE", st->path);
        return nghttp2_submit_rst_stream(c->s, NGHTTP2_FLAG_NONE, st->id,
                                         NGHTTP2_REFUSED_STREAM);
    }
    logline("ANSWER", st->path);
    st->len = (size_t)snprintf(st->body, sizeof st->body, "ok %s\n", st->path);
    char cl[32];
    snprintf(cl, sizeof cl, "%zu", st->len);
    nghttp2_nv hdr[] = {
        {(uint8_t *)":status", (uint8_t *)"200", 7, 3, NGHTTP2_NV_FLAG_NONE},
        {(uint8_t *)"content-length", (uint8_t *)cl, 14, strlen(cl), NGHTTP2_NV_FLAG_NONE},
    };
    nghttp2_data_provider dp = {.source.ptr = st, .read_callback = body_read};
    return nghttp2_submit_response(c->s, st->id, hdr, 2, &dp);
}

static int on_frame_recv(nghttp2_session *s, const nghttp2_frame *f, void *ud)
{
    conn *c = ud;
    if ((f->hd.type != NGHTTP2_HEADERS && f->hd.type != NGHTTP2_DATA) ||
        !(f->hd.flags & NGHTTP2_FLAG_END_STREAM))
        return 0;
    stream *st = nghttp2_session_get_stream_user_data(s, f->hd.stream_id);
    if (!st)
        return 0;
    c->streams++;
    int rv = on_request(c, st);
    if (rv == 0 && goaway_after > 0 && c->streams == goaway_after && !c->goaway) {
        c->goaway = true;
        rv = nghttp2_submit_goaway(s, NGHTTP2_FLAG_NONE, f->hd.stream_id, NGHTTP2_NO_ERROR,
                                   NULL, 0);
    }
    return rv ? NGHTTP2_ERR_CALLBACK_FAILURE : 0;
}

static int on_close(nghttp2_session *s, int32_t id, uint32_t code, void *ud)
{
    (void)code;
    (void)ud;
    free(nghttp2_session_get_stream_user_data(s, id));
    nghttp2_session_set_stream_user_data(s, id, NULL);
    return 0;
}

static ssize_t on_send(nghttp2_session *s, const uint8_t *data, size_t len, int flags, void *ud)
{
    (void)s;
    (void)flags;
    conn *c = ud;
    int n = SSL_write(c->ssl, data, (int)len);
    return n > 0 ? n : NGHTTP2_ERR_CALLBACK_FAILURE;
}

static void *serve(void *arg)
{
    conn *c = arg;
    nghttp2_session_callbacks *cb;
    nghttp2_session_callbacks_new(&cb);
    nghttp2_session_callbacks_set_send_callback(cb, on_send);
    nghttp2_session_callbacks_set_on_begin_headers_callback(cb, on_begin_headers);
    nghttp2_session_callbacks_set_on_header_callback(cb, on_header);
    nghttp2_session_callbacks_set_on_frame_recv_callback(cb, on_frame_recv);
    nghttp2_session_callbacks_set_on_stream_close_callback(cb, on_close);
    nghttp2_session_server_new(&c->s, cb, c);
    nghttp2_session_callbacks_del(cb);
    nghttp2_settings_entry set[] = {{NGHTTP2_SETTINGS_MAX_CONCURRENT_STREAMS, 100}};
    nghttp2_submit_settings(c->s, NGHTTP2_FLAG_NONE, set, 1);
    uint8_t buf[16384];
    while (nghttp2_session_want_read(c->s) || nghttp2_session_want_write(c->s)) {
        if (nghttp2_session_send(c->s) != 0)
            break;
        if (!nghttp2_session_want_read(c->s))
            break;
        int n = SSL_read(c->ssl, buf, sizeof buf);
        if (n <= 0)
            break;
        if (nghttp2_session_mem_recv(c->s, buf, (size_t)n) < 0)
            break;
    }
    nghttp2_session_send(c->s);
    /* A graceful close (RFC 9113 §6.8): after GOAWAY, read on until the
     * client closes, so its last streams are not cut by a TCP reset (a
     * read timeout is the guard against a client that never closes). */
    struct timeval tv = {.tv_sec = 2};
    setsockopt(SSL_get_fd(c->ssl), SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    while (SSL_read(c->ssl, buf, sizeof buf) > 0)
        nghttp2_session_mem_recv(c->s, buf, 0);
    nghttp2_session_del(c->s);
    SSL_shutdown(c->ssl);
    close(SSL_get_fd(c->ssl));
    SSL_free(c->ssl);
    free(c);
    return NULL;
}

static int alpn(SSL *ssl, const unsigned char **out, unsigned char *outlen,
                const unsigned char *in, unsigned int inlen, void *arg)
{
    (void)ssl;
    (void)arg;
    if (nghttp2_select_next_protocol((unsigned char **)out, outlen, in, inlen) != 1)
        return SSL_TLSEXT_ERR_ALERT_FATAL;
    return SSL_TLSEXT_ERR_OK;
}

static const char *arg_of(int argc, char **argv, const char *name)
{
    for (int i = 1; i + 1 < argc; i++)
        if (strcmp(argv[i], name) == 0)
            return argv[i + 1];
    return NULL;
}

int main(int argc, char **argv)
{
    const char *cert = arg_of(argc, argv, "--cert"), *key = arg_of(argc, argv, "--key");
    const char *log = arg_of(argc, argv, "--log");
    if (!cert || !key || !log) {
        fprintf(stderr, "usage: stg_h2srv --cert C --key K --log FILE [--refuse N] "
                        "[--refuse-path P] [--goaway-after K]\n");
        return 2;
    }
    const char *v;
    if ((v = arg_of(argc, argv, "--refuse")))
        refuse_left = atoi(v);
    if ((v = arg_of(argc, argv, "--goaway-after")))
        goaway_after = atoi(v);
    refuse_path = arg_of(argc, argv, "--refuse-path");
    logfp = fopen(log, "a");
    if (!logfp)
        return 2;
    signal(SIGPIPE, SIG_IGN);

    SSL_CTX *ctx = SSL_CTX_new(TLS_server_method());
    if (!ctx || SSL_CTX_use_certificate_chain_file(ctx, cert) != 1 ||
        SSL_CTX_use_PrivateKey_file(ctx, key, SSL_FILETYPE_PEM) != 1) {
        ERR_print_errors_fp(stderr);
        return 2;
    }
    SSL_CTX_set_alpn_select_cb(ctx, alpn, NULL);

    int ls = socket(AF_INET, SOCK_STREAM, 0);
    int one = 1;
    setsockopt(ls, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    struct sockaddr_in a = {.sin_family = AF_INET};
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t al = sizeof a;
    if (bind(ls, (struct sockaddr *)&a, sizeof a) != 0 || listen(ls, 64) != 0 ||
        getsockname(ls, (struct sockaddr *)&a, &al) != 0) {
        perror("listen");
        return 2;
    }
    printf("listening on https://127.0.0.1:%d\n", ntohs(a.sin_port));
    fflush(stdout);
    for (;;) {
        int fd = accept(ls, NULL, NULL);
        if (fd < 0) {
            if (errno == EINTR)
                continue;
            return 1;
        }
        SSL *ssl = SSL_new(ctx);
        SSL_set_fd(ssl, fd);
        if (SSL_accept(ssl) != 1) {
            SSL_free(ssl);
            close(fd);
            continue;
        }
        conn *c = calloc(1, sizeof *c);
        if (!c)
            return 1;
        c->ssl = ssl;
        pthread_t t;
        if (pthread_create(&t, NULL, serve, c) != 0)
            return 1;
        pthread_detach(t);
    }
}
