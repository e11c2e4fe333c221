/*
 * The front: libmicrohttpd's callbacks, on the loop thread (relay.c),
 * which runs the commands they queue as soon as MHD_run returns.
 *
 * A request is read whole first (headers, then the body, buffered up to
 * max_request_body), then submitted to the engine thread, and waits for
 * its answer: for its first PX_PARK_RUNS MHD runs unsuspended (park: MHD
 * calls the handler again at each run; on a loaded proxy most answers
 * come within them, and a suspension costs MHD an epoll_ctl DEL, an ADD
 * and a recv that finds nothing at the resume), then with its connection
 * suspended (and watched for a hang-up, watch.c). A larger body is submitted at its first byte and
 * streams (upload_stream): sent once, never retried. It is resumed when there is something to send: a
 * 2xx head (the answer then streams from a content reader, suspending
 * whenever the buffer is empty), or the final answer (any other status, or
 * an error of stagger's own: 502 for a bad or missing upstream answer, 504
 * for a deadline or timeout, 503 when the breaker is open or the shared
 * limiter is down, each with a Stagger-Error field naming the reason).
 *
 * An upstream 429 or 503 that stagger gives back (attempts exhausted, a
 * hint beyond --max-server-wait) is the upstream's answer, with its
 * Retry-After and rate-limit fields unchanged: the program's own logic
 * still sees them.
 *
 * Buffered bodies share one budget (max_buffered, body_put's charge): a
 * body that would pass it streams like one over max_request_body. The
 * connection's px_conn (conns.c) learns when a request line came, when
 * the head is whole (the first handler call) and when the exchange ended,
 * for the head timeout.
 *
 * Invariants: the access handler submits a request at most once (r->
 * submitted) and queues at most one response (r->queued); a client that
 * is gone gets MHD_NO (MHD closes the connection); the completed callback
 * cancels a request still in the engine, so a program that hangs up stops
 * its upstream attempt and every wait of it.
 */
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <unistd.h>

#include <jansson.h>

#include "proxy/internal.h"
#include "util/assert.h"

void *px_uri_cb(void *cls, const char *uri, struct MHD_Connection *c)
{
    stg_proxy *p = cls;
    px_req *r = calloc(1, sizeof *r);
    if (!r)
        return NULL;
    r->p = p;
    r->refs = 1; /* MHD's, until the completed callback */
    r->uri = strdup(uri ? uri : "");
    r->conn = c;
    r->fd = -1;
    px_conn_request_line(c);
    r->start_us = px_mono_us();
    const union MHD_ConnectionInfo *ci = MHD_get_connection_info(c, MHD_CONNECTION_INFO_CONNECTION_FD);
    if (ci)
        r->fd = ci->connect_fd;
    pthread_mutex_lock(&p->mu);
    r->serial = ++p->next_serial;
    p->requests++;
    pthread_mutex_unlock(&p->mu);
    if (!r->uri) {
        free(r);
        return NULL;
    }
    return r;
}

static enum MHD_Result queue(struct MHD_Connection *c, unsigned status, struct MHD_Response *resp)
{
    if (!resp)
        return MHD_NO;
    enum MHD_Result rc = MHD_queue_response(c, status, resp);
    MHD_destroy_response(resp);
    return rc;
}

enum MHD_Result px_answer_error2(struct MHD_Connection *c, unsigned status, const char *msg,
                                 const char *stagger_error, const char *allow, bool close)
{
    json_t *o = json_pack("{s:s}", "error", msg);
    char *body = o ? json_dumps(o, JSON_COMPACT) : NULL;
    json_decref(o);
    size_t len = body ? strlen(body) : 0;
    struct MHD_Response *resp =
        MHD_create_response_from_buffer(len, body ? body : (char *)"", MHD_RESPMEM_MUST_COPY);
    free(body);
    if (!resp)
        return MHD_NO;
    MHD_add_response_header(resp, "Content-Type", "application/json");
    const px_conn *k = px_conn_of(c);
    MHD_add_response_header(resp, "Via", k ? k->p->via : "1.1 stagger");
    if (stagger_error)
        MHD_add_response_header(resp, "Stagger-Error", stagger_error);
    if (allow)
        MHD_add_response_header(resp, "Allow", allow);
    if (close) /* MHD closes after it, and reads nothing more */
        MHD_add_response_header(resp, "Connection", "close");
    return queue(c, status, resp);
}

enum MHD_Result px_answer_error(struct MHD_Connection *c, unsigned status, const char *msg,
                                const char *stagger_error)
{
    return px_answer_error2(c, status, msg, stagger_error, NULL, false);
}

/* A random Idempotency-Key for --idempotency-key auto. */
static void auto_key(char *buf, size_t size)
{
    unsigned char b[16];
    size_t got = 0;
    while (got < sizeof b) {
        ssize_t n = getrandom(b + got, sizeof b - got, 0);
        if (n <= 0)
            break;
        got += (size_t)n;
    }
    char *o = buf;
    o += snprintf(o, size, "stagger-");
    for (size_t i = 0; i < sizeof b && (size_t)(o - buf) + 3 < size; i++)
        o += snprintf(o, 3, "%02x", b[i]);
}

/* Answer r from the front, at its first call: nothing goes upstream; the
 * answer is logged with why (it is also the Stagger-Error). */
static enum MHD_Result early(stg_proxy *p, px_req *r, struct MHD_Connection *c, unsigned status,
                             const char *msg, const char *why, const char *allow, bool close)
{
    r->early = true;
    r->why = why;
    px_log_request(p, r, (int)status);
    return px_answer_error2(c, status, msg, why, allow, close);
}

/* Check the head against head_check.c's rules and build what goes
 * upstream from MHD's parsed fields (never from raw bytes): true, or
 * false with the refusal queued in *rc. */
static bool head_ok(stg_proxy *p, px_req *r, struct MHD_Connection *c, const char *method,
                    const char *version, enum MHD_Result *rc)
{
    size_t nf = 0;
    px_field *f = px_request_fields(c, &nf);
    if (!f) {
        *rc = early(p, r, c, 500, "out of memory", "internal", NULL, true);
        return false;
    }
    px_head h = {.method = method, .method_len = strlen(method),
                 .version = version ? version : "", .version_len = version ? strlen(version) : 0,
                 .target = r->uri, .target_len = strlen(r->uri), .fields = f, .n_fields = nf};
    px_verdict v = {.status = 500, .reason = "internal", .msg = "out of memory"};
    bool ok = px_head_check(&h, &v) && px_request_headers(r, f, nf) == 0;
    free(f);
    if (!ok)
        *rc = early(p, r, c, v.status, v.msg, v.reason, NULL, true);
    return ok;
}

/* The first call: the headers are in. Check them; decide where the
 * request goes, or answer at once. */
static enum MHD_Result begin(stg_proxy *p, px_req *r, struct MHD_Connection *c,
                             const char *method, const char *version)
{
    r->begun = true;
    char msg[512];
    size_t mlen = strlen(method);
    enum MHD_Result rc;
    if (stg__http_token(method, mlen) && mlen <= PX_METHOD_MAX && !(r->method = strdup(method)))
        return early(p, r, c, 500, "out of memory", "internal", NULL, true);
    if (!head_ok(p, r, c, method, version, &rc))
        return rc;
    const char *host = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Host");
    if (host && !(r->host = strdup(host)))
        return early(p, r, c, 500, "out of memory", "internal", NULL, true);
    if (!strcmp(method, "TRACE")) /* it would echo Authorization back */
        return early(p, r, c, 405, "stagger proxy does not forward TRACE", "trace-refused", NULL,
                     false);
    if (!strcmp(method, "CONNECT"))
        return early(p, r, c, 405,
                     "stagger proxy does not tunnel (CONNECT): it cannot see inside "
                     "TLS. Use reverse mode: --upstream https://HOST, and point the "
                     "program's base URL at http://ADDRESS:PORT of the proxy",
                     "connect-refused", NULL, false);
    if (!strncmp(r->uri, "/__stagger/", 11)) {
        unsigned status = 500;
        r->early = true;
        rc = px_admin(p, c, r->uri, method, &status);
        r->why = status == 405 ? "method-not-allowed" : status == 404 ? "no-route" : "admin";
        px_log_request(p, r, (int)status);
        return rc;
    }
    pthread_mutex_lock(&p->mu);
    bool draining = p->draining;
    pthread_mutex_unlock(&p->mu);
    if (draining)
        return early(p, r, c, 503, "stagger proxy is shutting down", "draining", NULL, false);
    if (px_via_loop(p, c)) /* its Via holds ours: it has been here (via.c) */
        return early(p, r, c, 508, PX_LOOP_MSG, "loop-detected", NULL, false);
    unsigned status = 400;
    r->url = px_target(p, r->uri, &status, msg, sizeof msg);
    if (!r->url)
        return early(p, r, c, status, msg, status == 404 ? "no-route" : "bad-target", NULL,
                     false);
    if (px_control(r, c, msg, sizeof msg) != 0)
        return early(p, r, c, 400, msg, "bad-control-header", NULL, false);
    if (!r->idem_key[0] && p->cfg.idempotency_auto && !strcmp(method, "POST"))
        auto_key(r->idem_key, sizeof r->idem_key);
    const char *cl = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Content-Length");
    r->body_total = cl ? (int64_t)strtoull(cl, NULL, 10) : -1;
    if (cl && (uint64_t)r->body_total > p->max_request_body)
        r->body_stream = true; /* too large to keep for a resend: sent once */
    return MHD_YES;
}

/* Room for cap bytes of body in the proxy's budget of buffered bodies
 * (max_buffered, all requests together). */
static bool charge(px_req *r, size_t cap)
{
    stg_proxy *p = r->p;
    size_t more = cap - r->body_cap;
    pthread_mutex_lock(&p->mu);
    bool ok = p->buffered + more <= p->max_buffered;
    if (ok) {
        p->buffered += more;
        r->charged += more;
    }
    pthread_mutex_unlock(&p->mu);
    return ok;
}

/* Buffer a piece of the body; past max_request_body, or past what the
 * proxy may buffer for all requests together, it streams from here
 * (body_too_big). */
static bool body_put(px_req *r, const char *data, size_t n)
{
    if (r->body_len + n > r->p->max_request_body) {
        r->body_too_big = true;
        return true;
    }
    if (r->body_len + n > r->body_cap) {
        /* Doubling, as the bytes come (a Content-Length alone reserves
         * nothing), but never past a known length. */
        size_t cap = r->body_cap ? r->body_cap : 4096;
        while (cap < r->body_len + n)
            cap *= 2;
        if (r->body_total >= (int64_t)(r->body_len + n) && cap > (size_t)r->body_total)
            cap = (size_t)r->body_total;
        if (cap > r->p->max_request_body)
            cap = r->p->max_request_body;
        if (!charge(r, cap)) {
            r->body_too_big = true;
            return true;
        }
        char *b = realloc(r->body, cap);
        if (!b)
            return false;
        r->body = b;
        r->body_cap = cap;
    }
    memcpy(r->body + r->body_len, data, n);
    r->body_len += n;
    return true;
}

/* ---- answers -------------------------------------------------------------- */

static ssize_t reader(void *cls, uint64_t pos, char *buf, size_t max)
{
    (void)pos;
    px_req *r = cls;
    stg_proxy *p = r->p;
    ssize_t out;
    pthread_mutex_lock(&p->mu);
    if (r->client_gone) {
        out = MHD_CONTENT_READER_END_WITH_ERROR;
    } else if (r->slen > r->soff) {
        size_t n = r->slen - r->soff;
        if (n > max)
            n = max;
        memcpy(buf, r->sbuf + r->soff, n);
        r->soff += n;
        if (r->upstream_paused && r->slen - r->soff < PX_LOW_WATER) {
            r->upstream_paused = false;
            (void)px_cmd_push(p, PX_RESUME, r);
        }
        out = (ssize_t)n;
    } else if (r->stream_end) {
        out = r->stream_ok ? MHD_CONTENT_READER_END_OF_STREAM : MHD_CONTENT_READER_END_WITH_ERROR;
    } else {
        px_suspend_locked(r); /* the sink resumes us with the next bytes */
        out = 0;
    }
    pthread_mutex_unlock(&p->mu);
    return out;
}

static void reader_free(void *cls)
{
    px_req *r = cls;
    stg_proxy *p = r->p; /* r may be freed by the unref */
    pthread_mutex_lock(&p->mu);
    px_unref_locked(r);
    pthread_mutex_unlock(&p->mu);
}

static enum MHD_Result record_count(void *cls, enum MHD_ValueKind kind, const char *key,
                                    const char *value)
{
    (void)kind, (void)key, (void)value;
    ++*(size_t *)cls;
    return MHD_YES;
}

/* Could MHD send an answer head whose fields take `fields` bytes on c?
 * It builds the head in the connection's pool (PX_CONN_POOL), which
 * still holds the request's head, a record per field, argument and
 * cookie (the Cookie value copied once more), and what the client sent
 * after this request; a head that does not fit was an empty reply. The
 * slack covers MHD's own lines (status, Content-Length or
 * Transfer-Encoding, Connection) and the pool's alignment. */
static bool head_fits(struct MHD_Connection *c, size_t fields)
{
    const size_t record = 64, slack = 2048;
    const union MHD_ConnectionInfo *ci =
        MHD_get_connection_info(c, MHD_CONNECTION_INFO_REQUEST_HEADER_SIZE);
    size_t used = ci ? ci->header_size : PX_CONN_POOL / 2, n = 0;
    MHD_get_connection_values(c, MHD_HEADER_KIND | MHD_GET_ARGUMENT_KIND | MHD_COOKIE_KIND,
                              record_count, &n);
    const char *cookie = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Cookie");
    used += n * record + (cookie ? strlen(cookie) : 0) + slack;
    return used < PX_CONN_POOL && fields <= PX_CONN_POOL - used;
}

/* The upstream's head is too large for the client's connection: a 502
 * instead of an empty reply, logged as such; the upstream transfer, if
 * it still runs, is cancelled. p->mu held. */
static enum MHD_Result head_too_large(px_req *r, struct MHD_Connection *c)
{
    r->queued = true;
    r->head = false; /* nothing streams: the done callback only records */
    r->why = "upstream-head-too-large";
    if (r->submitted && !r->engine_done)
        (void)px_cmd_push(r->p, PX_CANCEL, r);
    px_log_request(r->p, r, 502);
    return px_answer_error2(c, 502,
                            "the upstream's answer head is too large for the proxy to pass on",
                            r->why, NULL, true);
}

/* The 2xx head came: stream the body. p->mu held. */
static enum MHD_Result answer_stream(px_req *r, struct MHD_Connection *c)
{
    if (!head_fits(c, px_response_head_size(r, r->rhdrs, r->rhdrs_len)))
        return head_too_large(r, c);
    int64_t len = px_block_length(r->rhdrs, r->rhdrs_len);
    bool no_body = !strcmp(r->method, "HEAD") || r->status == 204 || r->status == 304;
    uint64_t size = no_body ? 0 : len >= 0 ? (uint64_t)len : MHD_SIZE_UNKNOWN;
    /* MHD callocs the block with the response: sized to the body, as a
     * 32 KiB one per small answer was a tenth of the proxy's CPU. */
    size_t block = len < 0 ? 8192 : len < 1024 ? 1024 : len < 32768 ? (size_t)len : 32768;
    struct MHD_Response *resp;
    if (!no_body && len > 0 && r->stream_end && r->stream_ok && r->soff == 0 &&
        r->slen == (size_t)len) {
        /* The whole body came before the answer (a small one does: its
         * done ran in the same engine pass): handed to MHD as a buffer,
         * which sends head and body in one send, where a reader's answer
         * goes out in two (a third of the proxy's sends, each of which
         * wakes the client once more on loopback). */
        resp = MHD_create_response_from_buffer((size_t)len, r->sbuf, MHD_RESPMEM_MUST_FREE);
        if (!resp)
            return MHD_NO;
        r->sbuf = NULL;
        r->slen = r->scap = 0;
    } else {
        resp = MHD_create_response_from_callback(size, block, reader, r, reader_free);
        if (!resp)
            return MHD_NO;
        r->refs++; /* the reader's */
    }
    px_response_headers(resp, r, r->rhdrs, r->rhdrs_len);
    r->queued = true;
    if (r->stream_end) /* the done came first and left the line to us */
        px_log_request(r->p, r, r->stream_ok ? r->status : 0);
    return queue(c, (unsigned)r->status, resp);
}

static const char *stagger_error(stg_reason reason, stg_net_error err, unsigned *status)
{
    *status = 502;
    if (reason == STG_REASON_DEADLINE || err == STG_NET_TIMEOUT || err == STG_NET_CONNECT_TIMEOUT) {
        *status = 504;
        return reason == STG_REASON_DEADLINE ? "deadline" : "upstream-timeout";
    }
    if (reason == STG_REASON_BREAKER_OPEN) {
        *status = 503;
        return "breaker-open";
    }
    if (reason == STG_REASON_LIMITER_UNAVAILABLE) {
        *status = 503;
        return "limiter-unavailable";
    }
    if (reason == STG_REASON_BUDGET_EXHAUSTED)
        return "budget-exhausted";
    switch (err) {
    case STG_NET_CONNECT_REFUSED:
        return "upstream-refused";
    case STG_NET_RESET:
        return "upstream-reset";
    case STG_NET_DNS:
        return "upstream-dns";
    case STG_NET_TLS:
        return "upstream-tls";
    default:
        return "upstream-error";
    }
}

static ssize_t head_reader(void *cls, uint64_t pos, char *buf, size_t max)
{
    (void)cls, (void)pos, (void)buf, (void)max;
    return MHD_CONTENT_READER_END_WITH_ERROR;
}

/* A spooled non-2xx body (relay.c). After done nothing writes the spool,
 * so it is read without p->mu. */
static ssize_t spool_reader(void *cls, uint64_t pos, char *buf, size_t max)
{
    px_req *r = cls;
    if (pos >= r->ototal)
        return MHD_CONTENT_READER_END_OF_STREAM;
    if (max > r->ototal - pos)
        max = (size_t)(r->ototal - pos);
    if (!r->ofile) {
        memcpy(buf, r->obuf + pos, max);
        return (ssize_t)max;
    }
    ssize_t n = pread(fileno(r->ofile), buf, max, (off_t)pos);
    return n > 0 ? n : MHD_CONTENT_READER_END_WITH_ERROR;
}

/* The done callback's answer. p->mu held. */
static enum MHD_Result answer_final(px_req *r, struct MHD_Connection *c)
{
    r->queued = true;
    if (r->status > 0 && r->error == STG_NET_NONE) {
        /* The upstream's own answer (a 2xx with no body, a 4xx, the 429 or
         * 503 stagger gives back): as it came. */
        if (!head_fits(c, px_response_head_size(r, r->rhdrs, r->rhdrs_len)))
            return head_too_large(r, c);
        bool head = !strcmp(r->method, "HEAD");
        int64_t len = head ? px_block_length(r->rhdrs, r->rhdrs_len) : -1;
        /* HEAD: the upstream's Content-Length, through a reader MHD never
         * calls for a HEAD (it sends no body). */
        struct MHD_Response *resp;
        if (len >= 0) {
            resp = MHD_create_response_from_callback((uint64_t)len, 1024, head_reader, NULL, NULL);
        } else if (r->ototal) { /* the whole body, from the spool */
            resp = MHD_create_response_from_callback(r->ototal, 32 * 1024, spool_reader, r,
                                                     reader_free);
            if (resp)
                r->refs++; /* the reader's */
        } else {
            resp = MHD_create_response_from_buffer(head ? 0 : r->fbody_len,
                                                   r->fbody ? r->fbody : (char *)"",
                                                   MHD_RESPMEM_MUST_COPY);
        }
        if (!resp)
            return MHD_NO;
        px_response_headers(resp, r, r->rhdrs, r->rhdrs_len);
        px_log_request(r->p, r, r->status);
        return queue(c, (unsigned)r->status, resp);
    }
    unsigned status;
    const char *why = stagger_error(r->reason, r->error, &status);
    if (r->otoo_large) /* a 502: the upstream's answer is too big to hold */
        r->why = why = "body-too-large";
    char msg[400];
    snprintf(msg, sizeof msg, "%s after %d attempt%s: %s", stg_reason_message(r->reason),
             r->attempts, r->attempts == 1 ? "" : "s", r->errtext[0] ? r->errtext : why);
    px_log_request(r->p, r, (int)status);
    return px_answer_error(c, status, msg, why);
}

/* Queue r's submission. p->mu held; no wake-up: the loop runs the
 * commands right after MHD_run returns (relay.c). */
static bool submit_locked(stg_proxy *p, px_req *r)
{
    STG_ASSERT(!r->submitted); /* a request is submitted at most once */
    r->submitted = true;
    r->refs++; /* the engine's, until done */
    p->in_flight++;
    p->open++;
    if (px_cmd_push(p, PX_SUBMIT, r))
        return true;
    r->refs--;
    p->in_flight--;
    p->open--;
    return false;
}

/* A piece of a body that streams (over max_request_body): submitted at
 * its first byte, buffered up to PX_HIGH_WATER, the upload suspended while
 * the buffer is full (the engine's read resumes it). */
static enum MHD_Result upload_stream(stg_proxy *p, px_req *r, struct MHD_Connection *c,
                                     const char *data, size_t *size)
{
    enum MHD_Result rc = MHD_YES;
    pthread_mutex_lock(&p->mu);
    if (r->client_gone) {
        rc = MHD_NO;
    } else if (r->queued) {
        *size = 0; /* answered: the rest is dropped */
    } else if (r->head) {
        rc = answer_stream(r, c);
    } else if (r->final) {
        rc = answer_final(r, c);
    } else {
        if (!r->submitted) {
            if (!submit_locked(p, r)) {
                pthread_mutex_unlock(&p->mu);
                return MHD_NO;
            }
        }
        if (r->body_off) {
            memmove(r->body, r->body + r->body_off, r->body_len - r->body_off);
            r->body_len -= r->body_off;
            r->body_off = 0;
        }
        size_t room = r->body_len < PX_HIGH_WATER ? PX_HIGH_WATER - r->body_len : 0;
        size_t n = *size < room ? *size : room;
        if (n && r->body_len + n > r->body_cap) {
            char *b = realloc(r->body, PX_HIGH_WATER);
            if (!b) {
                pthread_mutex_unlock(&p->mu);
                return MHD_NO;
            }
            r->body = b;
            r->body_cap = PX_HIGH_WATER;
        }
        if (n) {
            memcpy(r->body + r->body_len, data, n);
            r->body_len += n;
            *size -= n;
            if (r->read_paused) {
                r->read_paused = false;
                (void)px_cmd_push(p, PX_RESUME, r);
            }
        }
        if (*size) {
            r->upload_blocked = true;
            px_suspend_locked(r);
        }
    }
    pthread_mutex_unlock(&p->mu);
    return rc;
}

/* Nothing to answer yet: wait. For its first PX_PARK_RUNS calls a
 * request waits unsuspended: MHD keeps the connection in its ready list
 * and calls the handler again at its next run (MHD_get_timeout is then 0,
 * so the loop does not block meanwhile); after that, or once it has been
 * suspended, it is suspended (and watched for a hang-up). p->mu held. */
static void park(px_req *r)
{
    if (r->park_runs > 0 && !r->suspended) {
        r->park_runs--;
        return;
    }
    px_suspend_locked(r);
}

/* The whole 2xx body is in but its done has not come yet (it comes in
 * the engine's next pass, which does not wait): waited for, so that
 * answer_stream hands head and body to MHD as one buffer (relay.c's sink
 * does not resume for it either). p->mu held. */
static bool whole_unfinished(const px_req *r)
{
    return r->head && !r->stream_end && r->soff == 0 && r->rlen > 0 &&
           r->slen == (size_t)r->rlen;
}

/* The body is in: submit, or (resumed) answer. */
static enum MHD_Result end(stg_proxy *p, px_req *r, struct MHD_Connection *c)
{
    enum MHD_Result rc = MHD_YES;
    pthread_mutex_lock(&p->mu);
    if (r->body_stream && !r->body_done) {
        r->body_done = true;
        if (r->read_paused) {
            r->read_paused = false;
            (void)px_cmd_push(p, PX_RESUME, r);
        }
    }
    if (r->client_gone || r->queued) {
        rc = r->client_gone ? MHD_NO : MHD_YES;
    } else if (!r->submitted) {
        if (p->draining) {
            pthread_mutex_unlock(&p->mu);
            return px_answer_error(c, 503, "stagger proxy is shutting down", "draining");
        }
        if (!submit_locked(p, r)) {
            pthread_mutex_unlock(&p->mu);
            return px_answer_error(c, 500, "out of memory", "internal");
        }
        r->park_runs = PX_PARK_RUNS;
        park(r);
    } else if (r->head && !whole_unfinished(r)) {
        rc = answer_stream(r, c); /* logged at its end (relay.c), or there */
    } else if (r->final) {
        rc = answer_final(r, c);
    } else {
        park(r); /* parked, or resumed, with nothing to say yet */
    }
    pthread_mutex_unlock(&p->mu);
    return rc;
}

enum MHD_Result px_on_request(void *cls, struct MHD_Connection *c, const char *url,
                              const char *method, const char *version, const char *upload_data,
                              size_t *upload_data_size, void **req_cls)
{
    (void)url;
    stg_proxy *p = cls;
    px_req *r = *req_cls;
    if (!r)
        return MHD_NO; /* out of memory in the URI callback */
    if (!r->begun) {
        px_conn_head_done(c);
        return begin(p, r, c, method, version);
    }
    if (r->early) {
        *upload_data_size = 0; /* already answered: the body is dropped */
        return MHD_YES;
    }
    if (*upload_data_size) {
        if (r->body_stream)
            return upload_stream(p, r, c, upload_data, upload_data_size);
        if (!body_put(r, upload_data, *upload_data_size))
            return MHD_NO;
        if (r->body_too_big) { /* past a limit (a chunked body): stream from here */
            r->body_too_big = false;
            r->body_stream = true;
            return upload_stream(p, r, c, upload_data, upload_data_size);
        }
        *upload_data_size = 0;
        return MHD_YES;
    }
    return end(p, r, c);
}

void px_on_completed(void *cls, struct MHD_Connection *c, void **req_cls,
                     enum MHD_RequestTerminationCode toe)
{
    stg_proxy *p = cls;
    px_req *r = *req_cls;
    if (!r)
        return;
    *req_cls = NULL;
    if (!r->begun) {
        /* libmicrohttpd refused the head itself, before our handler (a
         * line without a colon, a bad Content-Length, a head over the
         * pool: head_check.c), or the client left mid-head: logged. */
        const union MHD_ConnectionInfo *ci =
            MHD_get_connection_info(c, MHD_CONNECTION_INFO_HTTP_STATUS);
        r->why = ci ? "malformed-request" : "incomplete-request";
        px_log_request(p, r, ci ? (int)ci->http_status : 0);
    }
    px_conn_request_done(c);
    pthread_mutex_lock(&p->mu);
    if (toe != MHD_REQUEST_TERMINATED_COMPLETED_OK && !r->client_gone && r->begun) {
        r->client_gone = true;
        p->client_gone++;
    }
    if (r->submitted && !r->engine_done && r->client_gone)
        (void)px_cmd_push(p, PX_CANCEL, r);
    if (r->suspended) { /* cannot happen for a finished request; be safe */
        r->suspended = false;
        px_watch_remove_locked(r);
    }
    r->conn = NULL;
    if (r->submitted) {
        p->open--;
        pthread_cond_broadcast(&p->cv);
    }
    px_unref_locked(r);
    pthread_mutex_unlock(&p->mu);
}
