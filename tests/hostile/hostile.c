/*
 * stg_hostile: a deliberately misbehaving HTTP/1.1 server for the tests, on
 * raw sockets, so a test can check exactly what a client sent and how it
 * copes with answers no well-behaved server gives. Test code only: it never
 * listens anywhere but 127.0.0.1.
 *
 * CLI:
 *   stg_hostile --mode MODE [--log FILE] [--target URL] [--size N]
 *               [--status N] [--port N]
 *   Listens on 127.0.0.1 (port 0 = a free one unless --port), prints
 *   "listening on http://127.0.0.1:PORT" as its first stdout line (the
 *   format of `stagger serve`, so serve_helper.h and serve_lib.sh read it),
 *   and runs until SIGTERM/SIGINT. One thread per connection; HTTP/1.1
 *   keep-alive unless the mode closes.
 *
 *   Every request head it reads is counted and, with --log, appended to
 *   FILE as soon as it is read (one write, so a reader never sees half):
 *     "REQ <n> conn=<c> reuse=<k> <METHOD> <target>"  request n (1-based),
 *                        on connection c, the k-th request on it (0: first)
 *     "H <Name>: <value>"   each header line as received
 *     "B <length>"          the body length read (Content-Length)
 *     "END"
 *   so `grep -c '^REQ '` is the number of requests that reached the
 *   server, and `grep -ci '^H x-api-key:'` what carried a header.
 *   `--log -` writes the same lines to stdout, after the listening line.
 *   On SIGTERM or SIGINT it writes "requests: N" to stderr and exits 0.
 *   In the tests its path is in $HOSTILE (tests/integration/CMakeLists.txt);
 *   C tests start it with tests/integration/hostile_helper.h.
 *
 * Modes (a request for a path starting with /landed always gets 200 "ok"):
 *   ok              200 "ok", keep-alive
 *   reset-headers   write half a status line + headers, then reset (RST)
 *   huge-headers    200 with one header of --size bytes (default 200000)
 *   huge-status     a status line of --size bytes (default 200000)
 *   many-headers    200 with --size (default 10000) "X-Rep: n" headers
 *   nul             NUL bytes inside a header value and the body
 *   slowloris       a status line, then one header byte per 200 ms, forever
 *   endless-body    200 with chunked body chunks that never end
 *   big-body        200 with a --size byte body (default 1000000)
 *   pattern-body    200 with a --size byte body (default 1000000) whose byte
 *                   i is i % 251 (order and offsets are checkable)
 *   reset-mid-body  the first request the server reads gets the headers of
 *                   pattern-body and half its body, then a reset (RST);
 *                   every later one the whole pattern-body answer
 *   redirect        --status (default 302) to --target (absolute URL or a
 *                   path), every request not under /landed
 *   redirect-loop   --status (default 302) to /loop/<n+1>, forever
 *   auth            401 with "WWW-Authenticate: Digest ..." to a request
 *                   without an Authorization header, 200 "ok" with one
 *   close-reused    the first request on a connection gets --status
 *                   (default 200; a 503 makes a client retry on the
 *                   same connection) with body "ok", keep-alive; any later
 *                   request on that connection is read, logged and
 *                   answered by closing without a byte
 *   hang-reused     the first request on a connection gets 200 "ok",
 *                   keep-alive; any later request on that connection is
 *                   read, logged and never answered (the client's timeout
 *                   ends it: a request that left on a reused connection)
 *
 * Invariants: the request count is incremented before any answer is
 * written, so a client that sees an answer (or a close) after a request was
 * read can rely on it being in the log; the log is written with O_APPEND
 * and one write() per request.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <unistd.h>

typedef enum mode {
    M_OK, M_RESET_HEADERS, M_HUGE_HEADERS, M_HUGE_STATUS, M_MANY_HEADERS, M_NUL,
    M_SLOWLORIS, M_ENDLESS_BODY, M_BIG_BODY, M_REDIRECT, M_REDIRECT_LOOP, M_CLOSE_REUSED,
    M_AUTH, M_PATTERN_BODY, M_RESET_MID_BODY, M_HANG_REUSED
} mode;

static const char *const mode_names[] = {
    "ok", "reset-headers", "huge-headers", "huge-status", "many-headers", "nul",
    "slowloris", "endless-body", "big-body", "redirect", "redirect-loop", "close-reused",
    "auth", "pattern-body", "reset-mid-body", "hang-reused"};

static mode g_mode = M_OK;
static long g_size = -1;
static int g_status = -1; /* -1: the mode's default */
static const char *g_target = "/landed";
static int g_log = -1;
static atomic_long g_requests;
static atomic_long g_conns;
static pthread_mutex_t g_log_mu = PTHREAD_MUTEX_INITIALIZER;

static void on_term(int sig)
{
    (void)sig;
    char msg[48];
    long n = atomic_load(&g_requests);
    int len = snprintf(msg, sizeof msg, "requests: %ld\n", n);
    ssize_t w = write(2, msg, (size_t)len);
    (void)w;
    _exit(0);
}

static long size_or(long dflt)
{
    return g_size >= 0 ? g_size : dflt;
}

static bool send_all(int fd, const void *p, size_t n)
{
    const char *c = p;
    while (n) {
        ssize_t w = send(fd, c, n, MSG_NOSIGNAL);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            return false;
        c += w;
        n -= (size_t)w;
    }
    return true;
}

static bool send_str(int fd, const char *s)
{
    return send_all(fd, s, strlen(s));
}

static void reset_close(int fd)
{
    struct linger l = {.l_onoff = 1, .l_linger = 0};
    setsockopt(fd, SOL_SOCKET, SO_LINGER, &l, sizeof l);
    close(fd);
}

/* A connection's read buffer: request heads are read up to the blank line. */
typedef struct conn {
    int fd;
    long id;
    long n; /* the number of the request being answered (server-wide, 1-based) */
    int nreq;
    char buf[65536];
    size_t len;
} conn;

/* Read one request head (and its Content-Length body). Returns the head's
 * length (excluding the blank line's CRLF CRLF) with the head in c->buf, 0 on
 * EOF or error; *body_len the body bytes consumed. */
static size_t read_request(conn *c, long *body_len)
{
    char *end;
    while (!(end = memmem(c->buf, c->len, "\r\n\r\n", 4))) {
        if (c->len == sizeof c->buf)
            return 0;
        ssize_t r = recv(c->fd, c->buf + c->len, sizeof c->buf - c->len, 0);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0)
            return 0;
        c->len += (size_t)r;
    }
    size_t head = (size_t)(end - c->buf);
    size_t used = head + 4;
    long cl = 0;
    for (char *p = c->buf; p < end;) {
        char *nl = memmem(p, (size_t)(end - p), "\r\n", 2);
        if (!nl)
            nl = end;
        if (nl - p > 15 && !strncasecmp(p, "content-length:", 15))
            cl = strtol(p + 15, NULL, 10);
        p = nl + 2;
    }
    *body_len = cl;
    /* Drop the body (buffered or still to come). */
    size_t have = c->len - used;
    size_t take = (size_t)cl < have ? (size_t)cl : have;
    long left = cl - (long)take;
    char tmp[4096];
    while (left > 0) {
        ssize_t r = recv(c->fd, tmp, left < (long)sizeof tmp ? (size_t)left : sizeof tmp, 0);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0)
            return 0;
        left -= r;
    }
    /* Keep the head at the front for the caller, the rest after it. */
    memmove(c->buf + head + 1, c->buf + used + take, have - take);
    c->buf[head] = '\0';
    c->len = head + 1 + (have - take);
    return head;
}

/* Forget the head just handled (the pipelined rest moves to the front). */
static void consume(conn *c, size_t head)
{
    size_t rest = c->len - (head + 1);
    memmove(c->buf, c->buf + head + 1, rest);
    c->len = rest;
}

static void log_request(const conn *c, long n, const char *head, long body_len)
{
    if (g_log < 0)
        return;
    size_t cap = strlen(head) * 2 + 256;
    char *out = malloc(cap);
    if (!out)
        return;
    const char *eol = strstr(head, "\r\n");
    size_t first = eol ? (size_t)(eol - head) : strlen(head);
    size_t len = (size_t)snprintf(out, cap, "REQ %ld conn=%ld reuse=%d %.*s\n", n, c->id,
                                  c->nreq, (int)first, head);
    for (const char *p = eol ? eol + 2 : head + first; *p;) {
        const char *nl = strstr(p, "\r\n");
        size_t l = nl ? (size_t)(nl - p) : strlen(p);
        len += (size_t)snprintf(out + len, cap - len, "H %.*s\n", (int)l, p);
        p += l + (nl ? 2 : 0);
    }
    len += (size_t)snprintf(out + len, cap - len, "B %ld\nEND\n", body_len);
    pthread_mutex_lock(&g_log_mu);
    ssize_t w = write(g_log, out, len);
    (void)w;
    pthread_mutex_unlock(&g_log_mu);
    free(out);
}

static bool answer_ok(int fd)
{
    return send_str(fd, "HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: 2\r\n"
                        "\r\nok");
}

static bool answer_big(int fd, long extra, char fill, const char *prefix, const char *suffix)
{
    if (!send_str(fd, prefix))
        return false;
    char chunk[4096];
    memset(chunk, fill, sizeof chunk);
    while (extra > 0) {
        size_t n = extra < (long)sizeof chunk ? (size_t)extra : sizeof chunk;
        if (!send_all(fd, chunk, n))
            return false;
        extra -= (long)n;
    }
    return send_str(fd, suffix);
}

/* pattern-body's answer: headers for n bytes, then bytes [0, upto) of the
 * pattern (byte i is i % 251). */
static bool answer_pattern(int fd, long n, long upto)
{
    char head[128];
    snprintf(head, sizeof head, "HTTP/1.1 200 OK\r\nContent-Length: %ld\r\n\r\n", n);
    if (!send_str(fd, head))
        return false;
    unsigned char chunk[4096];
    for (long off = 0; off < upto;) {
        size_t k = upto - off < (long)sizeof chunk ? (size_t)(upto - off) : sizeof chunk;
        for (size_t i = 0; i < k; i++)
            chunk[i] = (unsigned char)((off + (long)i) % 251);
        if (!send_all(fd, chunk, k))
            return false;
        off += (long)k;
    }
    return true;
}

/* Answer one request per the mode. Returns false to close the connection. */
static bool answer(conn *c, const char *head)
{
    int fd = c->fd;
    char line[1024];
    if (!strncmp(strchr(head, ' ') ? strchr(head, ' ') + 1 : "", "/landed", 7))
        return answer_ok(fd);
    switch (g_mode) {
    case M_OK:
        return answer_ok(fd);
    case M_RESET_HEADERS:
        send_str(fd, "HTTP/1.1 200 OK\r\nContent-Type: te");
        usleep(20000);
        reset_close(fd);
        c->fd = -1;
        return false;
    case M_HUGE_HEADERS:
        return answer_big(fd, size_or(200000), 'a', "HTTP/1.1 200 OK\r\nX-Huge: ",
                          "\r\nContent-Length: 2\r\n\r\nok");
    case M_HUGE_STATUS:
        return answer_big(fd, size_or(200000), 'A', "HTTP/1.1 200 O",
                          "\r\nContent-Length: 2\r\n\r\nok");
    case M_MANY_HEADERS: {
        if (!send_str(fd, "HTTP/1.1 200 OK\r\n"))
            return false;
        for (long i = 0; i < size_or(10000); i++) {
            snprintf(line, sizeof line, "X-Rep: %ld\r\n", i);
            if (!send_str(fd, line))
                return false;
        }
        return send_str(fd, "Content-Length: 2\r\n\r\nok");
    }
    case M_NUL: {
        static const char r[] = "HTTP/1.1 200 OK\r\nX-Nul: a\0b\r\nContent-Length: 5\r\n\r\nok\0ok";
        return send_all(fd, r, sizeof r - 1);
    }
    case M_SLOWLORIS:
        if (!send_str(fd, "HTTP/1.1 200 OK\r\nX-Slow: "))
            return false;
        for (;;) {
            usleep(200000);
            if (!send_str(fd, "z"))
                return false;
        }
        return false;
    case M_ENDLESS_BODY:
        if (!send_str(fd, "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"))
            return false;
        for (;;) {
            char chunk[4096 + 16];
            int n = snprintf(chunk, sizeof chunk, "1000\r\n");
            memset(chunk + n, 'e', 4096);
            memcpy(chunk + n + 4096, "\r\n", 2);
            if (!send_all(fd, chunk, (size_t)n + 4096 + 2))
                return false;
        }
        return false;
    case M_BIG_BODY: {
        long n = size_or(1000000);
        snprintf(line, sizeof line, "HTTP/1.1 200 OK\r\nContent-Length: %ld\r\n\r\n", n);
        return answer_big(fd, n, 'b', line, "");
    }
    case M_REDIRECT:
        snprintf(line, sizeof line,
                 "HTTP/1.1 %d Moved\r\nLocation: %s\r\nContent-Length: 0\r\n\r\n",
                 g_status > 0 ? g_status : 302,
                 g_target);
        return send_str(fd, line);
    case M_REDIRECT_LOOP: {
        long n = 0;
        const char *p = strstr(head, "/loop/");
        if (p)
            n = strtol(p + 6, NULL, 10);
        snprintf(line, sizeof line,
                 "HTTP/1.1 %d Moved\r\nLocation: /loop/%ld\r\nContent-Length: 0\r\n\r\n",
                 g_status > 0 ? g_status : 302, n + 1);
        return send_str(fd, line);
    }
    case M_AUTH:
        if (strcasestr(head, "\r\nAuthorization:"))
            return answer_ok(fd);
        return send_str(fd, "HTTP/1.1 401 Unauthorized\r\nWWW-Authenticate: Digest "
                            "realm=\"r\", nonce=\"n1\", qop=\"auth\"\r\n"
                            "Content-Length: 0\r\n\r\n");
    case M_PATTERN_BODY:
        return answer_pattern(fd, size_or(1000000), size_or(1000000));
    case M_RESET_MID_BODY:
        if (c->n == 1) {
            answer_pattern(fd, size_or(1000000), size_or(1000000) / 2);
            usleep(200000); /* the client reads the half first */
            reset_close(fd);
            c->fd = -1;
            return false;
        }
        return answer_pattern(fd, size_or(1000000), size_or(1000000));
    case M_CLOSE_REUSED:
        if (c->nreq == 0) {
            snprintf(line, sizeof line,
                     "HTTP/1.1 %d Answer\r\nContent-Length: 2\r\n\r\nok",
                     g_status > 0 ? g_status : 200);
            return send_str(fd, line);
        }
        return false; /* read it, then close without a byte */
    case M_HANG_REUSED:
        if (c->nreq == 0)
            return answer_ok(fd);
        while (recv(fd, line, sizeof line, 0) > 0) /* until the client gives up */
            ;
        return false;
    }
    return false;
}

static void *serve_conn(void *arg)
{
    conn *c = arg;
    for (;;) {
        long body_len = 0;
        size_t head = read_request(c, &body_len);
        if (!head)
            break;
        long n = atomic_fetch_add(&g_requests, 1) + 1;
        log_request(c, n, c->buf, body_len);
        c->n = n;
        bool keep = answer(c, c->buf);
        c->nreq++;
        if (!keep)
            break;
        consume(c, head);
    }
    if (c->fd >= 0)
        close(c->fd);
    free(c);
    return NULL;
}

static void usage(void)
{
    fprintf(stderr, "usage: stg_hostile --mode MODE [--log FILE] [--target URL] [--size N]"
                    " [--status N] [--port N]\nmodes:");
    for (size_t i = 0; i < sizeof mode_names / sizeof *mode_names; i++)
        fprintf(stderr, " %s", mode_names[i]);
    fprintf(stderr, "\n");
    exit(2);
}

int main(int argc, char **argv)
{
    int port = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!v)
            usage();
        i++;
        if (!strcmp(a, "--mode")) {
            size_t k = 0;
            while (k < sizeof mode_names / sizeof *mode_names && strcmp(mode_names[k], v))
                k++;
            if (k == sizeof mode_names / sizeof *mode_names)
                usage();
            g_mode = (mode)k;
        } else if (!strcmp(a, "--log")) {
            g_log = !strcmp(v, "-") ? 1 : open(v, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
            if (g_log < 0) {
                perror(v);
                return 1;
            }
        } else if (!strcmp(a, "--target")) {
            g_target = v;
        } else if (!strcmp(a, "--size")) {
            g_size = strtol(v, NULL, 10);
        } else if (!strcmp(a, "--status")) {
            g_status = (int)strtol(v, NULL, 10);
        } else if (!strcmp(a, "--port")) {
            port = (int)strtol(v, NULL, 10);
        } else {
            usage();
        }
    }
    signal(SIGPIPE, SIG_IGN);
    signal(SIGTERM, on_term);
    signal(SIGINT, on_term);
    int ls = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    int one = 1;
    setsockopt(ls, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (ls < 0 || bind(ls, (struct sockaddr *)&sa, sizeof sa) != 0 || listen(ls, 128) != 0) {
        perror("stg_hostile: listen");
        return 1;
    }
    socklen_t sl = sizeof sa;
    getsockname(ls, (struct sockaddr *)&sa, &sl);
    printf("listening on http://127.0.0.1:%d\n", ntohs(sa.sin_port));
    fflush(stdout);
    for (;;) {
        int fd = accept4(ls, NULL, NULL, SOCK_CLOEXEC);
        if (fd < 0) {
            if (errno == EINTR || errno == ECONNABORTED || errno == EMFILE)
                continue;
            return 1;
        }
        conn *c = calloc(1, sizeof *c);
        if (!c) {
            close(fd);
            continue;
        }
        c->fd = fd;
        c->id = atomic_fetch_add(&g_conns, 1) + 1;
        pthread_t t;
        if (pthread_create(&t, NULL, serve_conn, c) != 0) {
            close(fd);
            free(c);
            continue;
        }
        pthread_detach(t);
    }
}
