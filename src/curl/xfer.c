/*
 * What one attempt receives: the body (up to max_body bytes), the raw header
 * block of the latest response, and the hints parsed from it. Shared by the
 * blocking call and the engine.
 *
 * Invariants: a status line ("HTTP/...") starts a new response: the header
 * block and hints are reset, so after redirects or a 100 Continue only the
 * final response's headers and hints remain; stg__xfer_reset() at the start
 * of each attempt drops the previous attempt's body and headers, so a
 * discarded attempt never leaks into a result. Buffers are NUL-terminated
 * whenever non-NULL. Hints are parsed with the wall clock the loop stored in
 * wall_now_us (read once per pass), never by reading a clock here.
 *
 * Every byte sent is stagger's decision: libcurl resends a request by
 * itself when a reused keep-alive connection dies before any answer byte
 * (lib/transfer.c Curl_retry_request: "Connection died, retrying a fresh
 * connect", up to 5 times), and that resend would pass no limiter and be
 * counted as no attempt. The pre-request callback runs once before each
 * request libcurl sends (redirects are stagger's own hops, never
 * libcurl's), so a second call within one attempt is such a resend: it is
 * refused (the transfer ends with CURLE_ABORTED_BY_CALLBACK, and
 * resend_blocked tells the attempt step that the first send got no
 * answer), and the retry, if any, is stagger's: limiter, budget, policy.
 * libcurl's other resends are refused the same way: HTTP authentication
 * negotiation (a 401, then the request again with Digest/NTLM/Negotiate
 * credentials) and a 417 to Expect: 100-continue; Basic and bearer
 * credentials go with the first send and are not affected.
 *
 * One of libcurl's resends is of a request the server never processed:
 * an HTTP/2 stream it refused (RST_STREAM REFUSED_STREAM; nghttp2 closes
 * the streams above a GOAWAY's last-stream-id the same way), which
 * libcurl 7.88 retries on a fresh connection (lib/http2.c
 * http2_handle_stream_close sets state.refused_stream and returns
 * CURLE_RECV_ERROR, then Curl_retry_request) without telling its caller.
 * It is told apart from a dead connection's resend by two things libcurl
 * does show: the request went out as HTTP/2 (its header block, seen by
 * the debug callback, which is why every transfer that may speak HTTP/2
 * is VERBOSE into a callback that keeps nothing and prints nothing; one
 * certain to speak HTTP/1.x, h1_only, is not: libcurl formats every info
 * line only for it to be dropped), and no error message
 * was written (a socket that failed writes "Failed receiving HTTP2 data"
 * or a Recv failure; a refusal writes none). That resend is refused here
 * too (refused_stream), and the engine sends it again itself: through the
 * limiter, counted, logged (engine_done.c).
 *
 * A body longer than max_body ends the transfer (truncated): the kept
 * prefix is never passed off as the whole answer.
 *
 * With a body sink, a 2xx body goes to the sink as it arrives and nothing
 * of it stays here, so memory does not grow with the body; another
 * status's body (a 429 or 503 before a retry, a redirect) is not the
 * destination's and stays in `body`, capped at STG__SINK_OTHER_BODY_MAX.
 * max_body counts the bytes of an attempt either way (`received`), so the
 * sink never gets more than max_body. The bytes a sink holds are one
 * attempt's: when an attempt that delivered some is followed by another,
 * RESTART comes before the next delivery (or before END, when none
 * follows). A sink's failure stops the transfer like max_body does.
 *
 * TLS: the caller's stg_tls_config is set on the handle at every attach,
 * because the engine resets pooled handles between attempts (a reset
 * handle would silently verify against the default store again). The CA
 * environment variables are read the way the curl tool reads them
 * (tool_operate.c: CURL_CA_BUNDLE, else SSL_CERT_DIR and SSL_CERT_FILE;
 * only when no CA was given and -k is off), since libcurl itself ignores
 * them and a user who set them for curl expects the same here.
 *
 * The connection an attempt used is read back from libcurl after it
 * (stg__xfer_conn): NUM_CONNECTS counts the connections the transfer
 * opened, so 0 with bytes sent means a kept connection carried it; a TLS
 * handshake happened when a new connection has an APPCONNECT time.
 *
 * libcurl's download buffer (CURLOPT_BUFFERSIZE) is allocated per
 * transfer when it starts (Curl_preconnect) and freed when it ends
 * (multi_done), and it is the largest thing libcurl holds for a transfer
 * on the wire (16 KiB of the ~27 KiB of heap bench_curl_floor counts; the
 * easy handle is 5.3 KiB, the transfer's other structs ~3.5 KiB, the
 * connection ~2.3 KiB). It keeps its
 * 16 KiB default while at most STG__XFER_BUF_MANY (256) transfers are on
 * the wire, and a transfer that starts with more out gets libcurl's
 * minimum, 1 KiB (stg__xfer_buffer_size). Measured (bench_curl_floor, one
 * 200 MB body from stg_hostile big-body, and 1000 at once against serve
 * --latency 3s): 1 KiB saves ~3.5 KB of RSS per transfer; 2 KiB 2.4 KB;
 * 4 and 8 KiB save heap but no RSS (a 16 KiB buffer's untouched middle
 * pages were never resident, a smaller one's pages are shared with its
 * neighbours), so there is no step between. Speed: one body through
 * 1 KiB takes ~4 times as long (8 KiB is as fast as 16), which is why
 * the few-at-a-time case keeps the default; past 256 at once the
 * transfers share the CPU and the link, and 1 KiB still reads ~600 MB/s
 * per transfer on loopback (bulk bodies all at once cost ~3 times the
 * CPU: 300 of 2 MB, 0.65 s against 0.22 s; small answers cost nothing
 * more). The blocking call (one transfer) keeps the
 * default. The size is set before the handle is added (libcurl reads it
 * at Curl_preconnect), at every attach, since pooled handles are
 * curl_easy_reset.
 *
 * With STG_STREAM_HEAD the sink sees a 2xx response's header block before
 * its first body byte (once per response); with STG_STREAM_PAUSE a DATA it
 * did not take pauses the transfer (CURL_WRITEFUNC_PAUSE: libcurl keeps
 * the bytes and delivers them again on resume), and is not counted.
 * `streamed` records that the sink got a HEAD or a byte: with
 * STG_STREAM_FINAL that request is never retried (engine_done.c). With
 * STG_STREAM_OTHER the sink also gets the bytes of other bodies (the proxy
 * gives a final 429 or 500 back whole); they leave `streamed` alone.
 *
 * The answer's head (the final status line and its fields, ended by a
 * blank line) is told to on_head once per attempt, before its body: the
 * quotas it announces are learned then, so a host's cold start ends at
 * the first answer's head, not at the end of a stream (engine_settle.c,
 * perform.c).
 *
 * Per-attempt times (stg__xfer_timeouts): connect and total are
 * libcurl's (the total only with a policy's attempt_timeout_us or a
 * deadline: a body still flowing is never cut otherwise); the first-byte
 * and idle times are kept by on_progress, since libcurl has neither. The
 * first-byte wait starts when the request goes out and ends at the first
 * status line that is not an interim 1xx; after it, any byte either way
 * restarts the idle time, and a transfer paused for a slow reader is
 * never idle. timed_out says which ended the transfer; the attempt step
 * reads it as STG_NET_TIMEOUT. The callback (and libcurl's 1 s re-check
 * timer that drives it) is installed only when one of the two could fire
 * before the attempt's total time (ticking): a total shorter than both
 * always ends the transfer first.
 */
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "curl/internal.h"
#include "util/assert.h"
#include "util/grow.h"

#define DEFAULT_MAX_BODY ((size_t)64 << 20)

bool stg__buf_put(stg__buf *b, const void *data, size_t n)
{
    if (!stg__reserve(&b->p, &b->cap, b->len + n + 1, 1, 256))
        return false;
    if (n)
        memcpy(b->p + b->len, data, n);
    b->len += n;
    b->p[b->len] = '\0';
    return true;
}

void stg__buf_free(stg__buf *b)
{
    free(b->p);
    b->p = NULL;
    b->len = b->cap = 0;
}

static void buf_clear(stg__buf *b)
{
    b->len = 0;
    if (b->p)
        b->p[0] = '\0';
}

void stg__xfer_init(stg__xfer *x, size_t max_body)
{
    memset(x, 0, sizeof *x);
    x->max_body = max_body ? max_body : DEFAULT_MAX_BODY;
    x->errbuf = x->errnone;
    x->lead_in = -1;
    stg_hints_init(&x->hints);
}

void stg__xfer_set_sink(stg__xfer *x, stg_body_fn sink, void *data)
{
    x->sink = sink;
    x->sink_data = data;
}

void stg__xfer_reset(stg__xfer *x)
{
    buf_clear(&x->body);
    x->received = 0;
    x->to_sink = -1;
    x->sink_failed = false;
    if (x->sink_dirty)
        x->sink_restart = true; /* what it holds is the previous attempt's */
    buf_clear(&x->headers);
    stg_hints_init(&x->hints);
    x->truncated = false;
    x->oom = false;
    x->sends = 0;
    x->resend_blocked = false;
    x->sent_h2 = false;
    x->refused_stream = false;
    x->head_sent = false;
    x->sse = -1;
    stg__buf_free(&x->held);
    x->stream_error = 0;
    x->stream_error_type[0] = '\0';
    x->tail_len = 0;
    stg__buf_free(&x->lead);
    x->lead_seen = 0;
    x->lead_in = -1;
    x->errbuf[0] = '\0';
    x->first_byte_us = x->idle_us = 0;
    x->ticking = false;
    x->last_activity_us = 0;
    x->dl_seen = x->ul_seen = 0;
    x->request_sent = x->answer_begun = x->touched = x->paused = false;
    x->timed_out = 0;
    x->head_told = false;
}

void stg__xfer_tail_free(stg__xfer *x)
{
    free(x->tail);
    x->tail = NULL;
    x->tail_len = 0;
    stg__buf_free(&x->lead);
}

void stg__xfer_free(stg__xfer *x)
{
    stg__xfer_tail_free(x); /* and the lead */
    stg__buf_free(&x->body);
    stg__buf_free(&x->headers);
    stg__buf_free(&x->held);
    if (x->errbuf != x->errnone)
        free(x->errbuf);
    x->errbuf = x->errnone;
}

/* Does this response's body go to the sink? Decided at its first byte:
 * only a 2xx body is the destination's. */
static bool body_to_sink(stg__xfer *x)
{
    if (!x->sink)
        return false;
    if (x->to_sink < 0) {
        long http = 0;
        if (x->easy)
            curl_easy_getinfo(x->easy, CURLINFO_RESPONSE_CODE, &http);
        x->to_sink = http >= 200 && http <= 299;
        const char *ct = NULL;
        if (x->easy)
            curl_easy_getinfo(x->easy, CURLINFO_CONTENT_TYPE, &ct);
        x->sse = x->to_sink && (x->stream & STG_STREAM_SSE_HOLD) && ct &&
                 !strncasecmp(ct, "text/event-stream", 17);
    }
    return x->to_sink == 1;
}

static bool sink_restart(stg__xfer *x)
{
    x->sink_restart = false;
    x->sink_dirty = false;
    return x->sink(STG_BODY_RESTART, NULL, 0, x->sink_data) == 0;
}

/* 0: taken; STG_BODY_PAUSE: not taken, pause (STG_STREAM_PAUSE only);
 * anything else: the sink failed. With STG_STREAM_HEAD the response's
 * header block goes first, once. */
static int sink_put(stg__xfer *x, const char *data, size_t n)
{
    if (x->sink_restart && !sink_restart(x))
        return -1;
    if ((x->stream & STG_STREAM_HEAD) && !x->head_sent) {
        x->head_sent = true;
        x->streamed = true;
        if (x->sink(STG_BODY_HEAD, x->headers.p ? x->headers.p : "", x->headers.len,
                    x->sink_data) != 0)
            return -1;
    }
    int rc = x->sink(STG_BODY_DATA, data, n, x->sink_data);
    if (rc == STG_BODY_PAUSE && (x->stream & STG_STREAM_PAUSE))
        return rc;
    if (rc == 0)
        x->sink_dirty = x->streamed = true;
    return rc == 0 ? 0 : -1;
}

bool stg__xfer_sink_end(stg__xfer *x)
{
    if (!x->sink)
        return true;
    bool ok = !x->sink_restart || sink_restart(x);
    ok = x->sink(STG_BODY_END, NULL, 0, x->sink_data) == 0 && ok;
    x->sink = NULL; /* END is the last call */
    x->sink_data = NULL;
    return ok;
}

/* STG_STREAM_OTHER: a body that is not 2xx goes to the sink too (it is
 * also kept, capped, for hints and logs). 0, or the sink failed. */
static int other_put(stg__xfer *x, const char *data, size_t n)
{
    if (!x->sink || !(x->stream & STG_STREAM_OTHER))
        return 0;
    if (x->sink_restart && !sink_restart(x))
        return -1;
    if (x->sink(STG_BODY_OTHER, data, n, x->sink_data) != 0)
        return -1;
    x->sink_dirty = true; /* not `streamed`: a retry may still follow */
    return 0;
}

/* The held stream's first event was an error standing for `status`: the
 * attempt's header block becomes the head's fields with that status and
 * Content-Type application/json, its body the event's data (to the sink
 * too, with STG_STREAM_OTHER, as any non-2xx body), and the transfer
 * stops. False when out of memory. */
static bool stream_stop(stg__xfer *x, int status, const stg__buf *ev)
{
    stg__buf h = {0};
    char line[64];
    int n = snprintf(line, sizeof line, "HTTP/1.1 %d \r\n", status);
    bool ok = stg__buf_put(&h, line, (size_t)n);
    const char *p = x->headers.p, *end = p ? p + x->headers.len : NULL;
    bool first = true;
    while (ok && p && p < end) {
        const char *eol = memchr(p, '\n', (size_t)(end - p));
        const char *next = eol ? eol + 1 : end;
        size_t len = (size_t)(next - p);
        bool blank = len <= 2 && (*p == '\r' || *p == '\n');
        bool drop = first || blank || !strncasecmp(p, "content-type:", 13) ||
                    !strncasecmp(p, "content-length:", 15) ||
                    !strncasecmp(p, "transfer-encoding:", 18);
        if (!drop)
            ok = stg__buf_put(&h, p, len);
        first = false;
        p = next;
    }
    static const char json_type[] = "Content-Type: application/json\r\n\r\n";
    ok = ok && stg__buf_put(&h, json_type, sizeof json_type - 1);
    if (!ok) {
        stg__buf_free(&h);
        return false;
    }
    stg__buf_free(&x->headers);
    x->headers = h;
    buf_clear(&x->body);
    size_t keep = ev->len < STG__SINK_OTHER_BODY_MAX ? ev->len : STG__SINK_OTHER_BODY_MAX;
    if (keep && !stg__buf_put(&x->body, ev->p, keep))
        return false;
    x->stream_error = status;
    if (x->sink && (x->stream & STG_STREAM_OTHER) && keep) {
        if (x->sink_restart && !sink_restart(x))
            return true; /* the error stands; the sink's copy is best effort */
        if (x->sink(STG_BODY_OTHER, x->body.p, keep, x->sink_data) == 0)
            x->sink_dirty = true;
    }
    return true;
}

enum { SSE_TAKEN = 0, SSE_FAILED = -1, SSE_STOP = -2, SSE_OOM = -3 };

/* A byte run of a held event stream (x->sse == 1): held until the first
 * event is complete, then judged: an error stops the transfer
 * (stream_stop); anything else, or the hold's bound, passes every held
 * byte on to the sink at once, its HEAD first. When the sink pauses that
 * delivery, this run is taken back out of the hold (libcurl delivers it
 * again on resume) and the hold stays. */
static int sse_hold(stg__xfer *x, const char *data, size_t n)
{
    if (!x->held.len)
        x->held_since_us = x->wall_now_us;
    if (!stg__buf_put(&x->held, data, n))
        return SSE_OOM;
    stg__buf ev = {0};
    char name[32];
    int got = stg__sse_first_event(x->held.p, x->held.len, name, sizeof name, &ev);
    if (got < 0) {
        stg__buf_free(&ev);
        return SSE_OOM;
    }
    if (got == 1) {
        int st = stg__sse_error_status(name, ev.p, ev.len, x->stream_error_type,
                                       sizeof x->stream_error_type);
        if (st) {
            bool ok = stream_stop(x, st, &ev);
            stg__buf_free(&ev);
            stg__buf_free(&x->held);
            return ok ? SSE_STOP : SSE_OOM;
        }
    }
    stg__buf_free(&ev);
    if (got != 1 && x->held.len < STG__SSE_HOLD_MAX &&
        x->wall_now_us - x->held_since_us < STG__SSE_HOLD_US)
        return SSE_TAKEN;
    int rc = sink_put(x, x->held.p, x->held.len);
    if (rc == STG_BODY_PAUSE) {
        x->held.len -= n;
        x->held.p[x->held.len] = '\0';
        return rc;
    }
    if (rc != 0)
        return SSE_FAILED;
    x->sse = 2;
    stg__buf_free(&x->held);
    return SSE_TAKEN;
}

/* Keep up to n bytes in memory: up to max_body without a sink, else the
 * capped prefix of a body that is not the sink's. */
static bool keep_in_memory(stg__xfer *x, const char *data, size_t n)
{
    size_t cap = x->max_body;
    if (x->sink && cap > STG__SINK_OTHER_BODY_MAX)
        cap = STG__SINK_OTHER_BODY_MAX;
    size_t room = x->body.len < cap ? cap - x->body.len : 0;
    return stg__buf_put(&x->body, data, n < room ? n : room);
}

/* keep_tail: the body's last STG__XFER_TAIL bytes (an out of memory keeps
 * none: the tail is a hint, never the body). */
static void tail_put(stg__xfer *x, const char *data, size_t n)
{
    if (!x->keep_tail || (!x->tail && !(x->tail = malloc(STG__XFER_TAIL))))
        return;
    if (n >= STG__XFER_TAIL) {
        memcpy(x->tail, data + n - STG__XFER_TAIL, STG__XFER_TAIL);
        x->tail_len = STG__XFER_TAIL;
        return;
    }
    if (x->tail_len + n > STG__XFER_TAIL) {
        size_t drop = x->tail_len + n - STG__XFER_TAIL;
        memmove(x->tail, x->tail + drop, x->tail_len - drop);
        x->tail_len -= drop;
    }
    memcpy(x->tail + x->tail_len, data, n);
    x->tail_len += n;
    STG_ASSERT(x->tail_len <= STG__XFER_TAIL);
}

/* keep_tail: the body's first STG__XFER_LEAD bytes, read a line at a time
 * as they pass for the usage only a stream's start tells (the input
 * tokens of Anthropic's message_start, which a long stream's tail no
 * longer holds). Only the line in progress is kept, and nothing once the
 * count is found or the bytes are read (an out of memory reads no more:
 * the usage is a hint). */
static void lead_put(stg__xfer *x, const char *data, size_t n)
{
    if (!x->keep_tail || x->lead_seen >= STG__XFER_LEAD)
        return;
    size_t take = n < STG__XFER_LEAD - x->lead_seen ? n : STG__XFER_LEAD - x->lead_seen;
    x->lead_seen += take;
    if (stg__buf_put(&x->lead, data, take)) {
        size_t done = stg__ai_cost_lead(x->lead.p, x->lead.len, &x->lead_in);
        memmove(x->lead.p, x->lead.p + done, x->lead.len - done);
        x->lead.len -= done;
        x->lead.p[x->lead.len] = '\0';
    } else {
        x->lead_seen = STG__XFER_LEAD;
    }
    if (x->lead_in >= 0 || x->lead_seen >= STG__XFER_LEAD) {
        x->lead_seen = STG__XFER_LEAD;
        stg__buf_free(&x->lead);
    }
}

static size_t on_body(char *data, size_t size, size_t nmemb, void *arg)
{
    stg__xfer *x = arg;
    size_t n = size * nmemb;
    size_t keep = n;
    if (x->received >= x->max_body)
        keep = 0;
    else if (keep > x->max_body - x->received)
        keep = x->max_body - x->received;
    x->touched = true; /* bytes arrived: the answer is not idle */
    x->paused = false;
    if (keep && body_to_sink(x)) {
        int rc = x->sse == 1 ? sse_hold(x, data, keep) : sink_put(x, data, keep);
        if (rc == STG_BODY_PAUSE) {
            x->paused = true; /* the reader is slow: not the server's idleness */
            return CURL_WRITEFUNC_PAUSE; /* the same bytes come again on resume */
        }
        if (rc == SSE_STOP)
            return 0; /* the first event was an error: stop (attempt.c) */
        if (rc == SSE_OOM) {
            x->oom = true;
            return 0;
        }
        if (rc != 0) {
            x->sink_failed = true;
            return 0; /* CURLE_WRITE_ERROR aborts the transfer */
        }
        lead_put(x, data, keep);
        tail_put(x, data, keep);
    } else if (keep && other_put(x, data, keep) != 0) {
        x->sink_failed = true;
        return 0;
    } else if (keep && !keep_in_memory(x, data, keep)) {
        x->oom = true;
        return 0; /* CURLE_WRITE_ERROR aborts the transfer */
    }
    x->received += keep;
    STG_ASSERT(x->received <= x->max_body);
    if (keep < n) {
        x->truncated = true;
        return 0; /* over max_body: stop here (CURLE_WRITE_ERROR) */
    }
    return n;
}

static size_t on_header(char *data, size_t size, size_t nmemb, void *arg)
{
    stg__xfer *x = arg;
    size_t n = size * nmemb;
    x->touched = true;
    if (n >= 5 && memcmp(data, "HTTP/", 5) == 0) {
        /* The answer has begun, unless this is an interim 1xx (a 100
         * Continue comes before the request body: still waiting). */
        const char *sp = memchr(data, ' ', n);
        x->answer_begun = !(sp && (size_t)(sp - data) + 1 < n && sp[1] == '1');
        buf_clear(&x->headers); /* a new response: forget the previous one */
        stg_hints_init(&x->hints);
        x->to_sink = -1;
        x->head_sent = false;
        x->sse = -1;
        stg__buf_free(&x->held);
    }
    if (!stg__buf_put(&x->headers, data, n)) {
        x->oom = true;
        return 0;
    }
    /* Malformed hints are simply absent; the return value is advisory. */
    (void)stg_hints_header_line(&x->hints, data, n, x->wall_now_us);
    /* The blank line ends a head; the final one's is told once (trailers
     * come later, through here too). */
    if (n >= 1 && n <= 2 && (data[0] == '\r' || data[0] == '\n') && x->answer_begun &&
        !x->head_told) {
        x->head_told = true;
        long http = 0;
        if (x->easy)
            curl_easy_getinfo(x->easy, CURLINFO_RESPONSE_CODE, &http);
        if (x->on_head)
            x->on_head(x->head_arg, (int)http);
    }
    return n;
}

static int on_prereq(void *arg, char *conn_primary_ip, char *conn_local_ip, int conn_primary_port,
                     int conn_local_port)
{
    (void)conn_primary_ip;
    (void)conn_local_ip;
    (void)conn_primary_port;
    (void)conn_local_port;
    stg__xfer *x = arg;
    x->request_sent = x->touched = true; /* the first-byte wait starts */
    if (x->sends++ > 0) {
        x->resend_blocked = true; /* libcurl's own resend: not ours to send */
        /* No answer byte (else libcurl would not resend), HTTP/2, and no
         * error written: the stream was refused, never processed. */
        x->refused_stream = x->sent_h2 && !x->errbuf[0];
        return CURL_PREREQFUNC_ABORT;
    }
    return CURL_PREREQFUNC_OK;
}

/* libcurl's trace, read only for the request line of the header block it
 * sends ("GET /p HTTP/2"): nothing is kept or written (secrets pass here). */
static int on_debug(CURL *easy, curl_infotype type, char *data, size_t size, void *arg)
{
    (void)easy;
    stg__xfer *x = arg;
    if (type != CURLINFO_HEADER_OUT)
        return 0;
    const char *nl = memchr(data, '\n', size);
    size_t n = nl ? (size_t)(nl - data) : size;
    if (n && data[n - 1] == '\r')
        n--;
    x->sent_h2 = n >= 7 && memcmp(data + n - 7, " HTTP/2", 7) == 0;
    return 0;
}

long stg__xfer_buffer_size(int on_wire)
{
    return on_wire <= STG__XFER_BUF_MANY ? STG__XFER_BUF_MAX : STG__XFER_BUF_MIN;
}

/* curl's getenv: an empty variable is unset. */
static const char *env(const char *name)
{
    const char *v = getenv(name);
    return v && *v ? v : NULL;
}

void stg__tls_apply(CURL *easy, const stg_tls_config *t)
{
    if (!t)
        return;
    const char *file = t->ca_file, *dir = t->ca_path;
    if (!file && !dir && t->ca_from_env && !t->insecure) {
        file = env("CURL_CA_BUNDLE");
        if (!file) {
            dir = env("SSL_CERT_DIR");
            file = env("SSL_CERT_FILE");
        }
    }
    if (file)
        curl_easy_setopt(easy, CURLOPT_CAINFO, file);
    if (dir)
        curl_easy_setopt(easy, CURLOPT_CAPATH, dir);
    if (t->cert) {
        curl_easy_setopt(easy, CURLOPT_SSLCERT, t->cert);
        curl_easy_setopt(easy, CURLOPT_SSLCERTTYPE, "PEM");
    }
    if (t->key) {
        curl_easy_setopt(easy, CURLOPT_SSLKEY, t->key);
        curl_easy_setopt(easy, CURLOPT_SSLKEYTYPE, "PEM");
    }
    if (t->insecure) {
        curl_easy_setopt(easy, CURLOPT_SSL_VERIFYPEER, 0L);
        curl_easy_setopt(easy, CURLOPT_SSL_VERIFYHOST, 0L);
    }
}

/* libcurl 7.88.0 and 7.88.1 break h2c with prior knowledge on a kept
 * connection: every request after the first on it ends in CURLE_HTTP2
 * "Error in the HTTP2 framing layer" (Curl_http2_may_switch switched a
 * second HTTP/2 filter in on reuse; curl issue #10634, fixed in 8.0.0 by
 * cbe9d82c22 "http2: fix for http2-prior-knowledge when reusing
 * connections"; 7.87 had no such code). The curl tool fails the same way.
 * There stagger gives each request its own connection: correct answers,
 * no multiplexing (a later libcurl multiplexes). */
static bool h2c_reuse_broken(void)
{
    unsigned v = curl_version_info(CURLVERSION_NOW)->version_num;
    return v >= 0x075800 && v < 0x080000;
}

void stg__http_version_apply(CURL *easy, long version)
{
    if (!version)
        return;
    curl_easy_setopt(easy, CURLOPT_HTTP_VERSION, version);
    if (version == CURL_HTTP_VERSION_2_PRIOR_KNOWLEDGE && h2c_reuse_broken()) {
        /* Neither reuse one nor leave one for reuse: a transfer added
         * while another's connection is up would multiplex onto it. */
        curl_easy_setopt(easy, CURLOPT_FRESH_CONNECT, 1L);
        curl_easy_setopt(easy, CURLOPT_FORBID_REUSE, 1L);
        return;
    }
    if (version >= CURL_HTTP_VERSION_2_0)
        curl_easy_setopt(easy, CURLOPT_PIPEWAIT, 1L); /* multiplex, not connect */
}

void stg__xfer_conn(CURL *easy, stg__conn *out)
{
    memset(out, 0, sizeof *out);
    long connects = 0, sent = 0, http = 0;
    curl_off_t connect_us = 0, app_us = 0;
    curl_easy_getinfo(easy, CURLINFO_NUM_CONNECTS, &connects);
    curl_easy_getinfo(easy, CURLINFO_REQUEST_SIZE, &sent);
    curl_easy_getinfo(easy, CURLINFO_RESPONSE_CODE, &http);
    curl_easy_getinfo(easy, CURLINFO_CONNECT_TIME_T, &connect_us);
    curl_easy_getinfo(easy, CURLINFO_APPCONNECT_TIME_T, &app_us);
    out->connects = connects > 0 ? (int)connects : 0;
    out->reused = connects <= 0 && (sent > 0 || http > 0);
    if (connects > 0 && app_us > 0)
        out->tls_handshake_us = app_us > connect_us ? (int64_t)(app_us - connect_us) : 1;
}

bool stg__xfer_h2_impossible(const char *url, long http_version)
{
    return url && strncasecmp(url, "http://", 7) == 0 && http_version < CURL_HTTP_VERSION_2_0;
}

void stg__xfer_attach(CURL *easy, stg__xfer *x)
{
    stg__tls_apply(easy, x->tls);
    x->easy = easy;
    curl_easy_setopt(easy, CURLOPT_PREREQFUNCTION, on_prereq);
    curl_easy_setopt(easy, CURLOPT_PREREQDATA, x);
    /* VERBOSE makes libcurl format every info line it has (a few per
     * transfer, ~3% of an engine's CPU per small request) only for the
     * debug callback to drop them: off when no HTTP/2 request line can
     * come. */
    if (!x->h1_only) {
        curl_easy_setopt(easy, CURLOPT_DEBUGFUNCTION, on_debug);
        curl_easy_setopt(easy, CURLOPT_DEBUGDATA, x);
        curl_easy_setopt(easy, CURLOPT_VERBOSE, 1L);
    } else {
        curl_easy_setopt(easy, CURLOPT_VERBOSE, 0L);
    }
    curl_easy_setopt(easy, CURLOPT_WRITEFUNCTION, on_body);
    curl_easy_setopt(easy, CURLOPT_WRITEDATA, x);
    curl_easy_setopt(easy, CURLOPT_HEADERFUNCTION, on_header);
    curl_easy_setopt(easy, CURLOPT_HEADERDATA, x);
    if (x->errbuf == x->errnone) { /* the first send: its error buffer */
        char *p = malloc(CURL_ERROR_SIZE);
        if (p) {
            p[0] = '\0';
            x->errbuf = p;
        }
    }
    /* Without memory for it: no text, libcurl's code still classifies. */
    curl_easy_setopt(easy, CURLOPT_ERRORBUFFER, x->errbuf != x->errnone ? x->errbuf : NULL);
    curl_easy_setopt(easy, CURLOPT_NOSIGNAL, 1L);
}

void stg__xfer_detach(CURL *easy)
{
    curl_easy_setopt(easy, CURLOPT_PREREQFUNCTION, (curl_prereq_callback)NULL);
    curl_easy_setopt(easy, CURLOPT_PREREQDATA, (void *)NULL);
    curl_easy_setopt(easy, CURLOPT_VERBOSE, 0L);
    curl_easy_setopt(easy, CURLOPT_DEBUGFUNCTION, (curl_debug_callback)NULL);
    curl_easy_setopt(easy, CURLOPT_DEBUGDATA, (void *)NULL);
    curl_easy_setopt(easy, CURLOPT_WRITEFUNCTION, (curl_write_callback)NULL);
    curl_easy_setopt(easy, CURLOPT_WRITEDATA, (void *)stdout);
    curl_easy_setopt(easy, CURLOPT_HEADERFUNCTION, (curl_write_callback)NULL);
    curl_easy_setopt(easy, CURLOPT_HEADERDATA, (void *)NULL);
    curl_easy_setopt(easy, CURLOPT_XFERINFOFUNCTION, (curl_xferinfo_callback)NULL);
    curl_easy_setopt(easy, CURLOPT_XFERINFODATA, (void *)NULL);
    curl_easy_setopt(easy, CURLOPT_NOPROGRESS, 1L);
    curl_easy_setopt(easy, CURLOPT_LOW_SPEED_LIMIT, 0L);
    curl_easy_setopt(easy, CURLOPT_LOW_SPEED_TIME, 0L);
    curl_easy_setopt(easy, CURLOPT_ERRORBUFFER, (char *)NULL);
}

static char *take(stg__buf *b, size_t *len)
{
    char *p = b->p;
    *len = b->len;
    if (!p) {
        p = calloc(1, 1);
        *len = 0;
    }
    b->p = NULL;
    b->len = b->cap = 0;
    return p;
}

void stg__xfer_move_to(stg__xfer *x, stg_result *r)
{
    r->body = take(&x->body, &r->body_len);
    r->headers = take(&x->headers, &r->headers_len);
    r->hints = x->hints;
    r->body_truncated = x->truncated;
    r->body_sink_failed = x->sink_failed;
}

static long to_ms(int64_t us)
{
    if (us <= 0)
        return 1;
    int64_t ms = (us + 999) / 1000;
    if (ms > (int64_t)(LONG_MAX / 2))
        ms = (int64_t)(LONG_MAX / 2);
    return ms < 1 ? 1 : (long)ms;
}

void stg__attempt_timeouts(const stg_policy *p, int64_t remaining_us, long *connect_ms,
                           long *total_ms)
{
    int64_t c = p->connect_timeout_us, t = p->attempt_timeout_us;
    if (remaining_us < c)
        c = remaining_us;
    if (t <= 0 || remaining_us < t)
        t = remaining_us; /* no total time: the deadline's, if any */
    *connect_ms = to_ms(c);
    *total_ms = t == INT64_MAX ? 0 : to_ms(t);
}

/* The first-byte and idle times, kept here because libcurl has neither:
 * CURLOPT_TIMEOUT cuts a body that still flows, and CURLOPT_LOW_SPEED_*
 * counts the wait for the answer's head as slowness and averages bytes
 * over a window. libcurl calls this after every read or write of the
 * transfer and, since a low-speed limit is set (below), at least once a
 * second while nothing moves (lib/speedcheck.c re-arms a 1 s timer on
 * every check). `now` is libcurl's time since the transfer began
 * (CURLINFO_TOTAL_TIME_T, updated just before the call), so no clock is
 * read here. Activity: the request going out (the pre-request callback),
 * a header line or body byte in, a byte of the request body out; a
 * transfer the sink paused is not idle (the reader is slow, not the
 * server: libcurl 7.88 makes no call while a transfer is paused, as
 * lib/speedcheck.c re-arms no timer then, and the bytes it delivers on
 * resume count as activity; `paused` keeps that true should a call come). Nonzero ends the transfer (CURLE_ABORTED_BY_CALLBACK), which
 * the attempt step reads as a timeout through timed_out. */
static int on_progress(void *arg, curl_off_t dltotal, curl_off_t dlnow, curl_off_t ultotal,
                       curl_off_t ulnow)
{
    (void)dltotal, (void)ultotal;
    stg__xfer *x = arg;
    curl_off_t t = 0;
    if (!x->easy || curl_easy_getinfo(x->easy, CURLINFO_TOTAL_TIME_T, &t) != CURLE_OK)
        return 0;
    int64_t now = (int64_t)t;
    if ((int64_t)dlnow != x->dl_seen || (int64_t)ulnow != x->ul_seen) {
        x->dl_seen = (int64_t)dlnow;
        x->ul_seen = (int64_t)ulnow;
        x->touched = true;
    }
    if (x->touched || x->paused) {
        x->touched = false;
        x->last_activity_us = now;
    }
    if (!x->request_sent)
        return 0; /* connecting: CURLOPT_CONNECTTIMEOUT's */
    int64_t quiet = now - x->last_activity_us;
    if (!x->answer_begun && x->first_byte_us > 0 && quiet >= x->first_byte_us)
        x->timed_out = STG__XFER_FIRST_BYTE;
    else if (x->answer_begun && x->idle_us > 0 && quiet >= x->idle_us)
        x->timed_out = STG__XFER_IDLE;
    return x->timed_out ? 1 : 0;
}

/* libcurl's LOW_SPEED_TIME is in seconds and multiplied by 1000 in a
 * long: the largest value that cannot overflow a 32-bit long (24 days),
 * so the low-speed check itself never fires and only its 1 s re-check
 * timer is used (to call on_progress while nothing moves). */
#define TICK_ONLY_LOW_SPEED_TIME 2147483L

void stg__xfer_timeouts(CURL *easy, stg__xfer *x, const stg_policy *p, int64_t remaining_us)
{
    long connect_ms, total_ms;
    stg__attempt_timeouts(p, remaining_us, &connect_ms, &total_ms);
    curl_easy_setopt(easy, CURLOPT_CONNECTTIMEOUT_MS, connect_ms);
    curl_easy_setopt(easy, CURLOPT_TIMEOUT_MS, total_ms);
    x->first_byte_us = p->first_byte_timeout_us;
    x->idle_us = p->idle_timeout_us;
    /* The quiet time either one measures never exceeds the time since the
     * transfer began, so a total time shorter than both ends the transfer
     * first (CURLOPT_TIMEOUT): then the tick, which costs every transfer a
     * callback per read and write and a 1 s timer, is not installed. */
    int64_t total_us = total_ms ? (int64_t)total_ms * 1000 : INT64_MAX;
    x->ticking = (x->first_byte_us > 0 && x->first_byte_us <= total_us) ||
                 (x->idle_us > 0 && x->idle_us <= total_us);
    if (!x->ticking)
        return;
    curl_easy_setopt(easy, CURLOPT_XFERINFOFUNCTION, on_progress);
    curl_easy_setopt(easy, CURLOPT_XFERINFODATA, x);
    curl_easy_setopt(easy, CURLOPT_NOPROGRESS, 0L);
    curl_easy_setopt(easy, CURLOPT_LOW_SPEED_LIMIT, 1L);
    curl_easy_setopt(easy, CURLOPT_LOW_SPEED_TIME, TICK_ONLY_LOW_SPEED_TIME);
}
