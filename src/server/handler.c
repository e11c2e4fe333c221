/*
 * The request pipeline: MHD's access handler and completion callback.
 *
 * A request is read first (headers, then the body through upload_data, up
 * to --max-body), then decided once, in this order of gates:
 *   1. outage window        -> 503 + Retry-After (remaining outage)
 *   2. faults (seeded draw) -> reset (close, no answer) / hang (park)
 *   3. --fail-first         -> 429 for the client's first K requests
 *   4. global limiter       -> 429/503 + Retry-After (+ rate-limit headers)
 *   4b. --dialect persona   -> that provider's refusal (dialect.h); on the
 *                              AI personas' API routes (ai.h) first a 400
 *                              for a body not of the API's shape, the drawn
 *                              overload (529 / 503), the billing stop, and
 *                              the quotas charged the body's tokens
 *   5. admitted             -> 413 if the body was too big, else the route's
 *                              answer (replayed for a known Idempotency-Key),
 *                              trickled when the slow-body fault was drawn;
 *                              an API route's completion or stream (failed
 *                              at its first event when that was drawn), the
 *                              unused output given back (Anthropic)
 * /__stats bypasses all of it and is not counted.
 *
 * Invariants: the monotonic clock is read once per request, when it has
 * been read completely (headers and body), and that instant labels it
 * everywhere: limiter, outage windows, log and stats. (Reading it when the
 * headers arrive instead would hand the bucket labels that are stale by the
 * upload time, and GCRA refuses a label older than burst / rate behind the
 * newest.) Every counted request is decided (counted by outcome and logged)
 * exactly once, or counted and logged as "aborted" by the completion
 * callback; a request whose Content-Length is over the limit is decided at
 * once, without reading its body. With the monotonic clock the wall clock
 * is read once too (early retries and the personas' resets are wall-clock
 * instants). Every decided answer records the instant it told its client
 * to wait for (0: none), and every arrival is checked against the last one
 * recorded for the same request first (early.h).
 */
#include <inttypes.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "server/ai.h"
#include "server/internal.h"
#include "server/retry_after.h"
#include "server/routes.h"
#include "server/latency.h"
#include "server/slowbody.h"
#include "util/grow.h"

struct kept_persona {
    srv_dctx dc;
    srv_dout dout;
};

typedef struct srv_req {
    int64_t arrival_us; /* CLOCK_MONOTONIC, read once, at decision */
    bool stats_path;    /* /__stats or /metrics: not client traffic */
    bool metrics_path;  /* /metrics: Prometheus text (stats.c) */
    bool decided;       /* counted by outcome and logged */
    bool hung;          /* parked forever: close when resumed */
    bool in_cap;        /* counted in --capacity's system until completed */
    bool cap_wait;      /* parked until its --capacity turn: answer when resumed */
    bool slow;          /* the slow-body draw, kept across that wait */
    bool too_big;       /* the body is over --max-body */
    bool held;          /* --latency waited already (latency.c) */
    /* --capacity with --dialect: the persona's context and fields, decided
     * at admission, kept for the answer at its turn (NULL: none). */
    struct kept_persona *kept;
    srv_ai_req ai;         /* an AI persona's API request (ai.api NONE: not one) */
    srv_reqlog_ai ailog;   /* its tokens, for the log */
    bool stream_error;     /* the drawn stream error, kept for the answer */
    char *body;
    size_t len, cap;
    int64_t wall_us;      /* CLOCK_REALTIME, read with arrival_us */
    int64_t told_wall_us; /* the answer's told retry instant; 0: none */
    char who[128];        /* early-retry client: X-Client-Id, else peer IP */
    const char *method, *url, *client, *key; /* copies, in text[] */
    char text[];
} srv_req;

static srv_req *req_new(stg_srv *s, struct MHD_Connection *c, const char *method,
                        const char *url)
{
    const char *client = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "X-Client-Id");
    const char *key = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Idempotency-Key");
    if (!client || !*client)
        client = url;
    if (key && !*key)
        key = NULL;
    size_t lm = strlen(method) + 1, lu = strlen(url) + 1, lc = strlen(client) + 1;
    size_t lk = key ? strlen(key) + 1 : 0;
    srv_req *r = calloc(1, sizeof *r + lm + lu + lc + lk);
    if (!r)
        return NULL;
    char *p = r->text;
    r->method = memcpy(p, method, lm);
    p += lm;
    r->url = memcpy(p, url, lu);
    p += lu;
    r->client = memcpy(p, client, lc);
    p += lc;
    r->key = key ? memcpy(p, key, lk) : NULL;
    srv_client_id(c, s->cfg.client_by_addr, r->who, sizeof r->who);
    return r;
}

static void req_free(srv_req *r)
{
    free(r->kept);
    free(r->body);
    free(r);
}

static bool body_append(srv_req *r, const char *data, size_t n, size_t max)
{
    if (r->too_big || r->len + n > max) {
        r->too_big = true;
        return false;
    }
    if (!stg__reserve(&r->body, &r->cap, r->len + n + 1, 1, 1024)) {
        r->too_big = true;
        return false;
    }
    memcpy(r->body + r->len, data, n);
    r->len += n;
    r->body[r->len] = '\0';
    return true;
}

/* A response from a malloc'd body (taken). NULL when out of memory. */
static struct MHD_Response *buffer_response(char *body, size_t len)
{
    if (!body || len == 0) {
        free(body);
        return MHD_create_response_from_buffer(0, NULL, MHD_RESPMEM_PERSISTENT);
    }
    struct MHD_Response *resp = MHD_create_response_from_buffer(len, body, MHD_RESPMEM_MUST_FREE);
    if (!resp)
        free(body);
    return resp;
}

/* Count, log and queue a decided answer; takes resp. A body's type is
 * ctype, or JSON when NULL. */
static enum MHD_Result finish_as(stg_srv *s, srv_req *r, struct MHD_Connection *c,
                                 unsigned status, struct MHD_Response *resp, bool has_body,
                                 const char *ctype)
{
    r->decided = true;
    srv_early_answer(&s->early, r->who, r->method, r->url, r->told_wall_us);
    srv_stats_status(&s->stats, status);
    srv_reqlog_write(&s->log, r->arrival_us - s->start_us, r->client, r->method, r->url, status,
                     NULL, r->key, r->ai.api ? &r->ailog : NULL);
    if (r->ai.api)
        srv_dialect_ai_count(&s->dialect, r->ailog.ai, r->ailog.tokens_charged,
                             r->ailog.tokens_out, r->ailog.tokens_refunded);
    if (!resp)
        return MHD_NO;
    if (has_body)
        MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE,
                                ctype ? ctype : "application/json");
    enum MHD_Result ret = MHD_queue_response(c, status, resp);
    MHD_destroy_response(resp);
    return ret;
}

static enum MHD_Result finish(stg_srv *s, srv_req *r, struct MHD_Connection *c, unsigned status,
                              struct MHD_Response *resp, bool has_body)
{
    return finish_as(s, r, c, status, resp, has_body, NULL);
}

/* An AI persona's refusal before its quotas (ai.h): nothing was charged,
 * and no wait is told (the vendors send none with these). */
static enum MHD_Result ai_refuse(stg_srv *s, srv_req *r, struct MHD_Connection *c,
                                 srv_ai_error kind, const char *what)
{
    srv_answer a;
    srv_ai_refusal(r->ai.api, kind, r->ai.error, &a);
    r->ailog.ai = what;
    struct MHD_Response *resp = buffer_response(a.body, a.len);
    return finish(s, r, c, a.status, resp, a.len > 0);
}

typedef struct ai_produce_arg {
    const srv_req *r;
    bool stream_error;
} ai_produce_arg;

static void produce_ai(void *arg, srv_answer *out)
{
    const ai_produce_arg *pa = arg;
    const char *ctype;
    srv_ai_answer(&pa->r->ai, pa->stream_error, (uint64_t)pa->r->arrival_us,
                  pa->r->wall_us / 1000000, out, &ctype);
}

/* A refusal: status, {"error":...,"retry_after_s":N} and Retry-After. */
static enum MHD_Result refuse(stg_srv *s, srv_req *r, struct MHD_Connection *c, unsigned status,
                              const char *error, int64_t wait_us, int64_t min_s, bool rl_headers)
{
    int64_t ra = srv_ceil_seconds(wait_us);
    if (ra < min_s)
        ra = min_s;
    size_t len = 0;
    char *body = srv_json_error(error, "retry_after_s", ra, &len);
    struct MHD_Response *resp = buffer_response(body, len);
    if (resp) {
        int64_t told = srv_retry_after_add(resp, s->cfg.retry_after, wait_us, min_s);
        /* The date form is rounded up from now + wait: told >= that. */
        if (told >= 0)
            r->told_wall_us = r->wall_us + (s->cfg.retry_after == STG_SRV_RA_DATE
                                                ? (wait_us > min_s * 1000000 ? wait_us
                                                                             : min_s * 1000000)
                                                : told * 1000000);
        if (rl_headers && s->cfg.ratelimit_headers)
            srv_limit_add_headers(&s->limit, resp, r->arrival_us, true, s->cfg.dialect != NULL);
    }
    return finish(s, r, c, status, resp, len > 0);
}

static void set_linger0(struct MHD_Connection *c)
{
    const union MHD_ConnectionInfo *ci =
        MHD_get_connection_info(c, MHD_CONNECTION_INFO_CONNECTION_FD);
    if (!ci)
        return;
    struct linger lg = {.l_onoff = 1, .l_linger = 0};
    setsockopt(ci->connect_fd, SOL_SOCKET, SO_LINGER, &lg, sizeof lg);
}

static void produce_route(void *arg, srv_answer *out)
{
    srv_route(arg, out);
}

static enum MHD_Result answer_stats(stg_srv *s, srv_req *r, struct MHD_Connection *c)
{
    r->decided = true;
    json_t *doc = srv_stats_document(s);
    char *body = doc ? json_dumps(doc, JSON_COMPACT) : NULL;
    json_decref(doc);
    struct MHD_Response *resp = buffer_response(body, body ? strlen(body) : 0);
    if (!resp)
        return MHD_NO;
    MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE, "application/json");
    MHD_add_response_header(resp, MHD_HTTP_HEADER_CACHE_CONTROL, "no-store");
    enum MHD_Result ret = MHD_queue_response(c, body ? 200 : 500, resp);
    MHD_destroy_response(resp);
    return ret;
}

static enum MHD_Result answer_metrics(stg_srv *s, srv_req *r, struct MHD_Connection *c)
{
    r->decided = true;
    size_t len = 0;
    char *body = srv_stats_prometheus(&s->stats, srv_mono_us() - s->start_us, &len);
    struct MHD_Response *resp = buffer_response(body, body ? len : 0);
    if (!resp)
        return MHD_NO;
    MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE,
                            "text/plain; version=0.0.4; charset=utf-8");
    MHD_add_response_header(resp, MHD_HTTP_HEADER_CACHE_CONTROL, "no-store");
    enum MHD_Result ret = MHD_queue_response(c, body ? 200 : 500, resp);
    MHD_destroy_response(resp);
    return ret;
}

/* 5. The admitted request's answer (after its turn with --capacity; dc
 * and dout: the persona's context and the fields its decision made, both
 * NULL without --dialect). */
static enum MHD_Result answer(stg_srv *s, srv_req *r, struct MHD_Connection *c, bool slow,
                              int64_t now, srv_dctx *dc, srv_dout *dout)
{
    bool non_idempotent = !strcmp(r->method, "POST") || !strcmp(r->method, "PATCH");
    srv_answer a = {0};
    srv_route_req rq = {.conn = c, .method = r->method, .url = r->url, .body = r->body,
                        .len = r->len, .retry_after_s = -1};
    bool api = r->ai.api && r->ai.valid && !r->too_big;
    ai_produce_arg pa = {r, r->stream_error && r->ai.stream};
    const char *ctype = NULL;
    if (r->too_big) {
        a.status = 413;
        a.body = srv_json_error("request body too large", "limit", (int64_t)s->cfg.max_body,
                                &a.len);
    } else if (api) {
        if (r->key)
            srv_idem_answer(&s->idem, r->key, r->method, r->url, r->body ? r->body : "", r->len,
                            produce_ai, &pa, &a);
        else
            produce_ai(&pa, &a);
        if (a.status == 200 && r->ai.stream)
            ctype = "text/event-stream";
        /* What it produced, and (Anthropic) the output it did not use. */
        bool failed = a.status != 200 || pa.stream_error;
        r->ailog.ai = failed ? (pa.stream_error ? "stream_error" : "error")
                             : r->ai.stream ? "stream" : "ok";
        r->ailog.tokens_out = failed ? 0 : r->ai.out;
        if (r->ai.api == SRV_AI_ANTHROPIC && dc) {
            r->ailog.tokens_refunded = r->ai.max_out - r->ailog.tokens_out;
            srv_dialect_refund(&s->dialect, dc, r->ailog.tokens_refunded);
        }
        if (!failed)
            atomic_fetch_add_explicit(&s->dialect.ai_answered, 1, memory_order_relaxed);
    } else if (non_idempotent && r->key) {
        srv_idem_answer(&s->idem, r->key, r->method, r->url, r->body ? r->body : "", r->len,
                        produce_route, &rq, &a);
    } else {
        srv_route(&rq, &a);
    }
    if (a.replayed)
        srv_stats_count(&s->stats, SRV_C_REPLAYS);
    bool has_body = a.body && a.len > 0;
    struct MHD_Response *resp;
    if (slow && has_body) {
        srv_stats_count(&s->stats, SRV_C_SLOW);
        resp = srv_slow_response(&s->park, c, a.body, a.len, s->cfg.slow_body_us, now);
    } else {
        resp = buffer_response(a.body, a.len);
    }
    if (resp) {
        if (a.replayed)
            MHD_add_response_header(resp, "Idempotent-Replayed", "true");
        if (rq.retry_after_s >= 0)
            srv_retry_after_add(resp, s->cfg.retry_after, rq.retry_after_s * 1000000,
                                rq.retry_after_s);
        if (s->cfg.ratelimit_headers)
            srv_limit_add_headers(&s->limit, resp, now, false, s->cfg.dialect != NULL);
        if (dc) { /* the persona's fields on a success (dialect.h) */
            srv_dialect_after_route(dc, a.status, dout);
            srv_dout_apply(dout, resp);
        }
    }
    return finish_as(s, r, c, a.status, resp, has_body, ctype);
}
static enum MHD_Result decide(stg_srv *s, srv_req *r, struct MHD_Connection *c)
{
    if (r->stats_path)
        return r->metrics_path ? answer_metrics(s, r, c) : answer_stats(s, r, c);
    if (srv_latency_hold(s, c, &r->held))
        return MHD_YES; /* called again once the latency has passed */
    int64_t now = srv_mono_us();
    r->arrival_us = now;
    r->wall_us = srv_wall_us();
    srv_early_arrive(&s->early, r->who, r->method, r->url, r->wall_us);
    srv_stats_arrival(&s->stats, now - s->start_us);
    bool non_idempotent = !strcmp(r->method, "POST") || !strcmp(r->method, "PATCH");
    if (non_idempotent && !r->key && !r->too_big && /* a cut body is no evidence */
        srv_idem_repeat(&s->idem, r->client, r->url, r->body ? r->body : "", r->len))
        srv_stats_count(&s->stats, SRV_C_DUPS);

    /* 1. Outage. */
    int64_t remaining = 0;
    if (srv_faults_outage(&s->faults, now - s->start_us, &remaining)) {
        srv_stats_count(&s->stats, SRV_C_OUTAGE);
        return refuse(s, r, c, 503, "outage", remaining, 1, false);
    }

    /* 2. Faults. */
    srv_fault_draw d = srv_faults_draw(&s->faults);
    if (d.hang) {
        r->decided = true;
        srv_stats_count(&s->stats, SRV_C_HANGS);
        srv_reqlog_write(&s->log, now - s->start_us, r->client, r->method, r->url, 0, "hang",
                         r->key, NULL);
        r->hung = true; /* when resumed: close */
        if (srv_park_conn(&s->park, c, SRV_PARK_FOREVER))
            return MHD_YES;
        return MHD_NO; /* shutting down: close instead */
    }
    if (d.reset) {
        r->decided = true;
        srv_stats_count(&s->stats, SRV_C_RESETS);
        srv_reqlog_write(&s->log, now - s->start_us, r->client, r->method, r->url, 0, "reset",
                         r->key, NULL);
        set_linger0(c);
        return MHD_NO; /* MHD closes the connection without an answer */
    }

    /* 3. Fail-first. */
    int64_t nth = 0;
    if (srv_clients_fail_first(&s->clients, r->client, &nth)) {
        srv_stats_count(&s->stats, SRV_C_FAIL_FIRST);
        int64_t ra = s->cfg.fail_retry_after_s;
        return refuse(s, r, c, 429, "fail-first", ra * 1000000, ra, false);
    }

    /* 4. Global limit. */
    int64_t wait_us = 0;
    if (!srv_limit_take(&s->limit, now, &wait_us)) {
        srv_stats_count(&s->stats, SRV_C_LIMITED);
        return refuse(s, r, c, s->cfg.limit_status, "rate limited", wait_us, 1, true);
    }

    /* 4b. The persona's quotas. */
    srv_dctx dc;
    srv_dout dout;
    bool persona = s->dialect.p != NULL;
    srv_ai_api api = persona && !r->too_big ? srv_ai_route(s->dialect.p->name, r->method, r->url)
                                            : SRV_AI_NONE;
    srv_dcost cost = {0, 0, 0};
    if (api) {
        /* An AI persona's API request: its body says what it costs. */
        srv_ai_parse(api, r->body, r->len, &s->cfg, &r->ai);
        r->ailog = (srv_reqlog_ai){.ai = "refused", .tokens_in = r->ai.in,
                                   .tokens_max_out = r->ai.max_out};
        r->stream_error = d.stream_error;
        if (!r->ai.valid)
            return ai_refuse(s, r, c, SRV_AI_INVALID, "invalid");
        if (d.overload)
            return ai_refuse(s, r, c, SRV_AI_OVERLOADED, "overloaded");
        if (s->cfg.insufficient_quota_after > 0 &&
            atomic_load_explicit(&s->dialect.ai_answered, memory_order_relaxed) >=
                (uint64_t)s->cfg.insufficient_quota_after)
            return ai_refuse(s, r, c, SRV_AI_BILLING, "insufficient_quota");
        cost = (srv_dcost){srv_ai_total(&r->ai, &s->cfg), r->ai.in, r->ai.max_out};
    }
    if (persona) {
        srv_dialect_decide(&s->dialect, &dc, &dout, r->who, r->url,
                           MHD_lookup_connection_value(c, MHD_HEADER_KIND, "X-Token-Cost"),
                           api ? &cost : NULL, now, r->wall_us);
        if (api && !dout.status)
            r->ailog.tokens_charged = cost.total;
        if (dout.status) {
            srv_stats_count(&s->stats, SRV_C_LIMITED);
            r->told_wall_us = dout.told_wall_us;
            struct MHD_Response *resp = buffer_response(dout.body, dout.len);
            if (resp) {
                srv_dout_apply(&dout, resp);
                if (dout.len)
                    MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE, dout.ctype);
            }
            return finish(s, r, c, dout.status, resp, false);
        }
    }

    /* 5. Admitted: answered now, or when its turn comes (capacity.h). */
    srv_stats_count(&s->stats, SRV_C_ADMITTED);
    if (s->cap.n) {
        r->in_cap = true;
        int64_t due = srv_capacity_admit(&s->cap, now);
        if (due > now) {
            if (persona && !(r->kept = malloc(sizeof *r->kept)))
                return MHD_NO; /* out of memory: close */
            if (persona) {
                r->kept->dc = dc; /* its pointers: the persona's, and r's own strings */
                r->kept->dout = dout;
            }
            r->cap_wait = true;
            r->slow = d.slow;
            if (srv_park_conn(&s->park, c, due))
                return MHD_YES;
            r->cap_wait = false; /* shutting down: answer at once */
        }
    }
    return answer(s, r, c, d.slow, now, persona ? &dc : NULL, persona ? &dout : NULL);
}

enum MHD_Result srv_on_request(void *cls, struct MHD_Connection *c, const char *url,
                               const char *method, const char *version, const char *upload_data,
                               size_t *upload_size, void **con_cls)
{
    (void)version;
    stg_srv *s = cls;
    srv_req *r = *con_cls;
    if (!r) {
        r = req_new(s, c, method, url);
        if (!r)
            return MHD_NO;
        r->metrics_path = !strcmp(url, "/metrics");
        r->stats_path = r->metrics_path || !strcmp(url, "/__stats");
        *con_cls = r;
        if (r->stats_path)
            return MHD_YES;
        const char *cl =
            MHD_lookup_connection_value(c, MHD_HEADER_KIND, MHD_HTTP_HEADER_CONTENT_LENGTH);
        if (cl && strtoull(cl, NULL, 10) > s->cfg.max_body) {
            r->too_big = true;
            return decide(s, r, c); /* answer without reading the body */
        }
        return MHD_YES;
    }
    if (r->hung)
        return MHD_NO; /* resumed: the client left or the server is stopping */
    if (r->cap_wait) { /* resumed: its --capacity turn has come */
        r->cap_wait = false;
        struct kept_persona *k = r->kept;
        return answer(s, r, c, r->slow, r->arrival_us, k ? &k->dc : NULL, k ? &k->dout : NULL);
    }
    if (*upload_size) {
        if (!r->decided)
            body_append(r, upload_data, *upload_size, s->cfg.max_body);
        *upload_size = 0;
        return MHD_YES;
    }
    if (r->decided)
        return MHD_YES;
    return decide(s, r, c);
}

void srv_on_completed(void *cls, struct MHD_Connection *c, void **con_cls,
                      enum MHD_RequestTerminationCode toe)
{
    (void)c;
    (void)toe;
    stg_srv *s = cls;
    srv_req *r = *con_cls;
    if (!r)
        return;
    if (r->in_cap)
        srv_capacity_leave(&s->cap);
    if (!r->decided && !r->stats_path) {
        int64_t rel = srv_mono_us() - s->start_us;
        srv_stats_arrival(&s->stats, rel);
        srv_stats_count(&s->stats, SRV_C_ABORTED);
        srv_reqlog_write(&s->log, rel, r->client, r->method, r->url, 0,
                         "aborted", r->key, NULL);
    }
    req_free(r);
    *con_cls = NULL;
}
