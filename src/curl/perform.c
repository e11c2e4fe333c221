/*
 * stg_curl_perform(): the blocking call. One prepared easy handle, run
 * attempt after attempt under a policy until stg_decide() says success or
 * give up, the deadline passes, or the cancel token fires.
 *
 * How: attempts run on a private curl_multi whose curl_multi_poll also
 * watches the cancel token's fd, so a cancel ends an attempt in flight at
 * once; waits (backoff, Retry-After, client-side limiter) are a poll on that
 * fd with the wait as timeout, so a cancel ends them at once too.
 *
 * Invariants:
 *  - every decision comes from the attempt step (attempt.c, the same as
 *    the engine's: stg_decide, deterministic failures, redirect hops);
 *    this file only executes it (the budget and breaker are engine
 *    features);
 *  - every request sent passed the limiter first: retries and redirect
 *    hops alike, and libcurl neither resends (xfer.c) nor follows a
 *    redirect by itself (CURLOPT_FOLLOWLOCATION is turned off);
 *  - with cfg.quotas, every send holds a quota reservation of cfg.cost
 *    from its admission to its answer (settled with the answer's quotas,
 *    a refusal's token units given back), or is given back when it never
 *    left; none is held when the call returns;
 *  - each attempt's timeouts are the policy's, bounded by what the
 *    deadline leaves, and no attempt starts at or after the deadline;
 *  - the response buffers are reset when an attempt starts, so the result
 *    carries the last completed attempt's status, headers and body (a 429
 *    or 503 too) and never bytes of a discarded attempt; an attempt
 *    interrupted by a cancel leaves an empty result body;
 *  - the caller's handle gets libcurl's default callbacks back on return
 *    (cfg->tls's options stay set on it: they are the caller's own
 *    choice, as the URL is);
 *  - a body sink's END is its last call, made once, before the final
 *    event and the return (call_result, or the error path).
 */
#include <limits.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>

#include "curl/internal.h"
#include "util/assert.h"

typedef struct call {
    CURL *easy;
    stg_call_config cfg;
    stg_policy pol; /* resolved */
    stg_rng rng;
    CURLM *multi;
    stg__xfer x;
    int64_t now, wall;
    const char *method_name;
    char url[2048];       /* redacted */
    char final_url[2048]; /* redacted */
    char origin[2048];    /* the first URL, whose origin may get secrets */
    char limit_key[512];
    char errtext[256];    /* the call's own failure (the shared limiter) */
    int64_t ticket;       /* the shared limiter's, for its on_response */
    stg__attempt a;       /* the last attempt's end */
    stg_decision d;       /* and what was decided */
    stg_retry_state rs;
    int hops;             /* redirects followed */
    int refused;          /* never-processed resends (attempt.c) */
    bool body_dropped;    /* a redirect turned the request into a GET */
    bool left_origin;     /* a hop went to another origin */
    struct curl_slist *stripped; /* cfg.headers without the secret ones */
    /* The servers' quotas (cfg.quotas): the URL the next send goes to (the
     * caller's, or a hop's copy), its route, and what it reserved. */
    const char *qurl;
    char hop_url[2048];
    char route[512];
    stg_quota_ticket qt;
    bool quota_held;
} call;

static void tick(call *c)
{
    c->now = stg__mono_us(c->cfg.env);
    c->wall = stg__wall_us(c->cfg.env);
    c->x.wall_now_us = c->wall;
}

static void event(call *c, stg_event_type type, stg_event *ev)
{
    stg__event_init(ev, type, c->cfg.request_id, c->now, c->wall);
    ev->method = c->method_name;
    ev->url = c->url;
    ev->final_url = c->final_url[0] ? c->final_url : NULL;
}

static void emit(call *c, const stg_event *ev)
{
    if (c->cfg.on_event)
        c->cfg.on_event(ev, c->cfg.event_data);
}

/* Attempt `attempt` waits wait_us for the limiter or a quota. */
static void emit_limiter_wait(call *c, int attempt, int64_t wait_us)
{
    stg_event ev;
    event(c, STG_EVENT_LIMITER_WAIT, &ev);
    ev.attempt = attempt;
    ev.wait_us = wait_us;
    emit(c, &ev);
}

/* Sleep wait_us unless the token fires. Returns false when cancelled. The
 * loop ends at the latest when poll times out after the whole remaining
 * wait, even with a clock that does not move. */
static bool wait_for(call *c, int64_t wait_us)
{
    int64_t until = c->now + wait_us;
    int fd = stg_cancel_fd(c->cfg.cancel);
    for (;;) {
        if (stg_cancel_fired(c->cfg.cancel))
            return false;
        int64_t left = until - c->now;
        if (left <= 0)
            return true;
        int64_t ms = (left + 999) / 1000;
        if (ms > INT_MAX)
            ms = INT_MAX;
        struct pollfd p = {.fd = fd, .events = POLLIN};
        int rc = poll(fd >= 0 ? &p : NULL, fd >= 0 ? 1 : 0, (int)ms);
        tick(c);
        if (rc == 0 && ms * 1000 >= left)
            return !stg_cancel_fired(c->cfg.cancel);
    }
}

/* Run one attempt to its end. Returns its CURLcode; *cancelled when the
 * token fired first (the transfer is then abandoned). */
static CURLcode run_attempt(call *c, bool *cancelled)
{
    *cancelled = false;
    if (curl_multi_add_handle(c->multi, c->easy) != CURLM_OK)
        return CURLE_OUT_OF_MEMORY;
    int fd = stg_cancel_fd(c->cfg.cancel);
    struct curl_waitfd wfd = {.fd = fd, .events = CURL_WAIT_POLLIN};
    CURLcode res = CURLE_OK;
    for (;;) {
        tick(c);
        int running = 0;
        if (curl_multi_perform(c->multi, &running) != CURLM_OK) {
            res = CURLE_FAILED_INIT;
            break;
        }
        CURLMsg *msg;
        int left;
        bool done = false;
        while ((msg = curl_multi_info_read(c->multi, &left)))
            if (msg->msg == CURLMSG_DONE && msg->easy_handle == c->easy) {
                res = msg->data.result;
                done = true;
            }
        if (done)
            break;
        if (stg_cancel_fired(c->cfg.cancel)) {
            *cancelled = true;
            break;
        }
        /* curl bounds the attempt (CURLOPT_TIMEOUT_MS), so this loop ends. */
        if (curl_multi_poll(c->multi, fd >= 0 ? &wfd : NULL, fd >= 0 ? 1 : 0, 1000, NULL) !=
            CURLM_OK) {
            res = CURLE_FAILED_INIT;
            break;
        }
    }
    curl_multi_remove_handle(c->multi, c->easy);
    tick(c);
    return res;
}

static int64_t remaining_us(const call *c, int64_t start_us)
{
    if (c->pol.deadline_us <= 0)
        return INT64_MAX;
    return start_us + c->pol.deadline_us - c->now;
}

/* The client-side limiter before an attempt (the bucket, or the shared
 * limiter with its ticket). Returns STG_OK to go, else sets *reason. */
static int limiter_gate(call *c, int64_t start_us, int attempt, stg_reason *reason)
{
    const stg_shared_limiter *sh = c->cfg.shared && c->cfg.shared->acquire ? c->cfg.shared : NULL;
    if (!c->cfg.bucket && !sh)
        return STG_OK;
    int64_t left = remaining_us(c, start_us), w = 0;
    int brc;
    if (sh) {
        c->ticket = 0;
        if (sh->acquire_class) {
            stg_class cls = {c->cfg.priority, c->cfg.tenant, c->cfg.weight};
            brc = sh->acquire_class(sh->ctx, c->limit_key, &cls, left, &w, &c->ticket);
        } else {
            brc = sh->acquire(sh->ctx, c->limit_key, left, &w, &c->ticket);
        }
        if (brc != STG_OK && brc != STG_ETIMEDOUT) {
            snprintf(c->errtext, sizeof c->errtext, "shared limiter: %s", stg_strerror(brc));
            *reason = STG_REASON_LIMITER_UNAVAILABLE;
            return brc;
        }
    } else {
        brc = stg_bucket_acquire(c->cfg.bucket, 1, c->now, left, &w);
    }
    if (brc == STG_ETIMEDOUT) {
        *reason = STG_REASON_DEADLINE;
        return brc;
    }
    if (brc == STG_OK && w > 0) {
        emit_limiter_wait(c, attempt, w);
        if (!wait_for(c, w)) {
            *reason = STG_REASON_CANCELLED;
            return STG_ECANCELED;
        }
        if (remaining_us(c, start_us) <= 0) {
            *reason = STG_REASON_DEADLINE;
            return STG_ETIMEDOUT;
        }
    }
    return STG_OK;
}

/* ---- the servers' quotas (cfg.quotas) -------------------------------------
 *
 * As the engine's quota_gate (engine_admit.c): before the limiter, so that
 * a send a quota refuses spends no token of the caller's bucket; the demand
 * is this one request, which fits in any count that holds it, so it is
 * never paced, only held while a quota it needs is spent or paused. */

/* Waits this short are the limiter's probe polls: not an event each. */
#define QUOTA_POLL_US STG_MS(20)

/* Reserve the next send's place in every quota of its key, waiting while
 * they say not yet. Returns STG_OK (c->quota_held), else sets *reason. */
static int quota_gate(call *c, stg_method method, int attempt, stg_reason *reason)
{
    stg_quota *q = c->cfg.quotas;
    if (!q)
        return STG_OK;
    STG_ASSERT(!c->quota_held);
    stg__quota_route(method != STG_METHOD_UNKNOWN ? method : STG_METHOD_GET, c->qurl, c->route,
                     sizeof c->route);
    for (;;) {
        int64_t wait = 0;
        int rc = stg_quota_acquire_demand(q, c->limit_key, c->route, c->cfg.cost, c->cfg.n_cost,
                                          1, c->now, &c->qt, &wait);
        if (rc == STG_ETOOBIG) /* an estimate over a limit: the server decides */
            rc = stg_quota_acquire_demand(q, c->limit_key, c->route, NULL, 0, 1, c->now, &c->qt,
                                          &wait);
        if (rc == STG_OK) {
            c->quota_held = true;
            return STG_OK;
        }
        if (rc != STG_EAGAIN) {
            snprintf(c->errtext, sizeof c->errtext, "quota limiter: %s", stg_strerror(rc));
            *reason = STG_REASON_ERROR_NOT_RETRYABLE;
            return rc;
        }
        /* A spent quota's reset is the server's word: beyond what the
         * caller accepts, the answer goes back, as a long Retry-After's. */
        if (c->pol.max_server_wait_us >= 0 && wait > c->pol.max_server_wait_us) {
            c->d.server_wait_us = wait;
            *reason = STG_REASON_SERVER_WAIT_TOO_LONG;
            return STG_ETIMEDOUT;
        }
        if (wait >= remaining_us(c, c->rs.start_us)) {
            *reason = STG_REASON_DEADLINE;
            return STG_ETIMEDOUT;
        }
        if (wait > QUOTA_POLL_US)
            emit_limiter_wait(c, attempt, wait);
        if (!wait_for(c, wait)) {
            *reason = STG_REASON_CANCELLED;
            return STG_ECANCELED;
        }
    }
}

static bool token_unit(const char *u)
{
    return !strcmp(u, "tokens") || !strcmp(u, "input-tokens") || !strcmp(u, "output-tokens");
}

/* What the send used of the token units its cost names, as the answer
 * says: nothing for a refusal (429, 529: the server did not count it),
 * else the usage its body reports (kept, or the tail of one that went to
 * the sink). Returns the count in used[]. */
static size_t used_of(const call *c, int status, stg_quota_cost *used, size_t max)
{
    size_t n = 0;
    bool tokens = false;
    for (size_t i = 0; c->cfg.cost && i < c->cfg.n_cost; i++)
        tokens |= token_unit(c->cfg.cost[i].unit);
    if (!tokens)
        return 0;
    if (status == 429 || status == 529) {
        for (size_t i = 0; i < c->cfg.n_cost && n < max; i++)
            if (token_unit(c->cfg.cost[i].unit)) {
                used[n] = c->cfg.cost[i];
                used[n++].amount = 0;
            }
        return n;
    }
    if (status < 200 || status > 299)
        return 0;
    if (c->x.body.p && c->x.body.len)
        return stg__ai_cost_usage(c->x.body.p, c->x.body.len, used, max);
    return stg__ai_cost_usage(c->x.tail, c->x.tail_len, used, max);
}

/* Settle the send's reservation: with the answer's quotas when one came
 * (status > 0; the token units it tells no count of at what the answer
 * says was used), as spent when none did (it may have reached the
 * server). */
static void quota_settle(call *c, int status)
{
    if (!c->quota_held)
        return;
    c->quota_held = false;
    if (status <= 0) {
        stg_quota_settle(c->cfg.quotas, c->limit_key, NULL, &c->qt, NULL, c->now);
        return;
    }
    stg_quota_set qs;
    stg__quota_answer(&c->x, status, c->wall, &qs);
    stg_quota_cost used[STG_QUOTA_COSTS_MAX];
    size_t n_used = used_of(c, status, used, STG_QUOTA_COSTS_MAX);
    stg_quota_settle_used(c->cfg.quotas, c->limit_key, c->route, &c->qt, &qs, used, n_used,
                          c->now);
}

/* The send never left: what it reserved returns. */
static void quota_cancel(call *c)
{
    if (!c->quota_held)
        return;
    c->quota_held = false;
    stg_quota_cancel(c->cfg.quotas, c->limit_key, &c->qt);
}

static void report(void *ctx, const stg__attempt *a, const stg_hints *h)
{
    call *c = ctx;
    stg__shared_report(c->cfg.shared, c->limit_key, c->ticket, a->status, h);
}

/* Point the handle at the next hop: its URL, method (a 303 or a POST's
 * 301/302 go on as GET) and, off the origin, headers without secrets and
 * no credentials. Returns false when out of memory. */
static bool take_hop(call *c, const stg__attempt *a, stg_method *method)
{
    CURL *easy = c->easy;
    curl_easy_setopt(easy, CURLOPT_URL, a->redirect_url);
    snprintf(c->hop_url, sizeof c->hop_url, "%s", a->redirect_url);
    c->qurl = c->hop_url;
    if (a->redirect_method != *method) {
        if (a->redirect_method == STG_METHOD_GET) {
            curl_easy_setopt(easy, CURLOPT_CUSTOMREQUEST, (char *)NULL);
            curl_easy_setopt(easy, CURLOPT_HTTPGET, 1L);
            c->body_dropped = true;
        }
        *method = a->redirect_method;
        c->method_name = stg_method_name(*method);
    }
    if (a->redirect_cross_origin && !c->left_origin) {
        c->left_origin = true;
        bool ok = true;
        c->stripped = c->cfg.headers
                          ? stg__headers_without_secrets(c->cfg.headers, c->cfg.secret_headers, &ok)
                          : NULL;
        if (!ok)
            return false;
        curl_easy_setopt(easy, CURLOPT_USERPWD, (char *)NULL);
        curl_easy_setopt(easy, CURLOPT_USERNAME, (char *)NULL);
        curl_easy_setopt(easy, CURLOPT_PASSWORD, (char *)NULL);
        curl_easy_setopt(easy, CURLOPT_XOAUTH2_BEARER, (char *)NULL);
        curl_easy_setopt(easy, CURLOPT_COOKIE, (char *)NULL);
        curl_easy_setopt(easy, CURLOPT_HTTPAUTH, (long)CURLAUTH_BASIC);
    }
    /* Secrets go to the first URL's origin only, hop by hop. */
    if (c->left_origin || c->cfg.headers)
        curl_easy_setopt(easy, CURLOPT_HTTPHEADER,
                         a->redirect_cross_origin ? c->stripped
                                                  : (struct curl_slist *)c->cfg.headers);
    return true;
}

/* Set c up for easy under cfg (NULL: defaults). Returns STG_OK, or
 * STG_EINVAL / STG_ENOMEM with nothing left to release. */
static int call_open(call *c, CURL *easy, const stg_call_config *cfg)
{
    c->easy = easy;
    if (cfg)
        c->cfg = *cfg;
    if (stg_policy_resolve(&c->cfg.policy, &c->pol) != STG_OK || c->cfg.max_redirects < 0 ||
        (c->cfg.n_cost && !c->cfg.cost) ||
        !stg__class_valid(c->cfg.priority, c->cfg.tenant, c->cfg.weight))
        return STG_EINVAL;
    for (size_t i = 0; i < c->cfg.n_cost; i++)
        if (c->cfg.cost[i].amount < 0 ||
            !memchr(c->cfg.cost[i].unit, 0, sizeof c->cfg.cost[i].unit))
            return STG_EINVAL;
    c->multi = curl_multi_init();
    if (!c->multi)
        return STG_ENOMEM;
    stg__xfer_init(&c->x, c->cfg.max_body);
    stg__xfer_set_sink(&c->x, c->cfg.body_sink, c->cfg.body_sink_data);
    c->x.keep_tail = c->cfg.body_sink && c->cfg.n_cost; /* a streamed answer's usage */
    c->x.tls = c->cfg.tls; /* set on easy by attach */
    stg__xfer_attach(easy, &c->x);
    /* Redirects are hops stagger decides (redirect.c), never libcurl's. */
    curl_easy_setopt(easy, CURLOPT_FOLLOWLOCATION, 0L);
    if (c->cfg.headers)
        curl_easy_setopt(easy, CURLOPT_HTTPHEADER, (struct curl_slist *)c->cfg.headers);
    tick(c);
    stg_rng_seed(&c->rng, c->cfg.seed ? c->cfg.seed : stg__seed(c, c->now));
    if (c->cfg.method != STG_METHOD_UNKNOWN)
        c->method_name = stg_method_name(c->cfg.method);
    if (c->cfg.url) {
        stg_redact_url(c->cfg.url, c->url, sizeof c->url);
        snprintf(c->origin, sizeof c->origin, "%s", c->cfg.url);
    }
    c->qurl = c->cfg.url; /* NULL: the route is "METHOD /" */
    snprintf(c->limit_key, sizeof c->limit_key, "default");
    if (c->cfg.limiter_key)
        snprintf(c->limit_key, sizeof c->limit_key, "%s", c->cfg.limiter_key);
    else if (c->cfg.url)
        stg__url_host_key(c->cfg.url, c->limit_key, sizeof c->limit_key);
    c->a.hint = STG_UNKNOWN;
    c->d.server_wait_us = STG_UNKNOWN;
    return STG_OK;
}

static void call_close(call *c)
{
    stg__xfer_detach(c->easy);
    if (c->cfg.headers || c->left_origin)
        curl_easy_setopt(c->easy, CURLOPT_HTTPHEADER, (struct curl_slist *)NULL);
    curl_slist_free_all(c->stripped);
    curl_multi_cleanup(c->multi);
    stg__xfer_free(&c->x);
}

/* An attempt the cancel token interrupted: no answer, its end event. */
static void attempt_cancelled(call *c, int attempt, int64_t started)
{
    stg__xfer_reset(&c->x); /* a partial answer is not an answer */
    memset(&c->a, 0, sizeof c->a);
    c->a.hint = STG_UNKNOWN;
    c->a.err = STG_NET_OTHER;
    c->a.curl_code = CURLE_ABORTED_BY_CALLBACK;
    snprintf(c->a.errtext, sizeof c->a.errtext, "cancelled");
    stg_event ev;
    event(c, STG_EVENT_ATTEMPT_END, &ev);
    ev.attempt = attempt;
    ev.error = c->a.err;
    ev.curl_code = c->a.curl_code;
    ev.duration_us = c->now - started;
    emit(c, &ev);
}

/* One attempt: limiter, send, the attempt step. Returns true to go on (a
 * retry after c->d's wait, or a redirect hop: *hop), false when the
 * request ended with *reason (or *rc is an error). */
static bool one_attempt(call *c, stg_method *method, bool *hop, stg_reason *reason, int *rc)
{
    stg_retry_state *rs = &c->rs;
    *hop = false;
    if (stg_cancel_fired(c->cfg.cancel)) {
        *reason = STG_REASON_CANCELLED;
        return false;
    }
    if (remaining_us(c, rs->start_us) <= 0) {
        *reason = STG_REASON_DEADLINE;
        return false;
    }
    if (quota_gate(c, *method, rs->attempts + 1, reason) != STG_OK)
        return false;
    if (limiter_gate(c, rs->start_us, rs->attempts + 1, reason) != STG_OK) {
        quota_cancel(c);
        return false;
    }
    if (rs->attempts > 0 && !c->body_dropped && c->cfg.rewind_body &&
        c->cfg.rewind_body(c->cfg.rewind_data) != 0) {
        quota_cancel(c);
        *reason = STG_REASON_ERROR_NOT_RETRYABLE; /* cannot resend the body */
        return false;
    }
    stg__xfer_reset(&c->x);
    stg__xfer_timeouts(c->easy, &c->x, &c->pol, remaining_us(c, rs->start_us));
    rs->attempts++;
    int64_t started = c->now;
    stg_event ev;
    event(c, STG_EVENT_ATTEMPT_START, &ev);
    ev.attempt = rs->attempts;
    emit(c, &ev);

    bool cancelled;
    CURLcode code = run_attempt(c, &cancelled);
    if (*method == STG_METHOD_UNKNOWN) {
        const char *eff_method = NULL;
        curl_easy_getinfo(c->easy, CURLINFO_EFFECTIVE_METHOD, &eff_method);
        *method = stg_method_parse(eff_method);
        c->method_name = stg_method_name(*method);
    }
    if (cancelled) {
        quota_settle(c, 0); /* abandoned mid-send: it may count */
        attempt_cancelled(c, rs->attempts, started);
        *reason = STG_REASON_CANCELLED;
        return false;
    }
    stg__attempt *a = &c->a;
    stg__attempt_end(c->easy, code, &c->x, c->cfg.url, a);
    stg__body_hints(&c->x, a); /* what the refusal's body says */
    quota_settle(c, a->status);
    snprintf(c->final_url, sizeof c->final_url, "%s", a->final_url);
    if (!c->url[0])
        snprintf(c->url, sizeof c->url, "%s", a->final_url);
    if (!c->origin[0]) {
        const char *eff = NULL;
        curl_easy_getinfo(c->easy, CURLINFO_EFFECTIVE_URL, &eff);
        snprintf(c->origin, sizeof c->origin, "%s", eff ? eff : "");
    }

    event(c, STG_EVENT_ATTEMPT_END, &ev);
    ev.attempt = rs->attempts;
    stg__step st = {.pol = &c->pol,
                    .rs = rs,
                    .hops = c->hops,
                    .refused = &c->refused,
                    .rng = &c->rng,
                    .now_us = c->now,
                    .method = *method,
                    .has_key = c->cfg.has_idempotency_key,
                    .origin_url = c->origin,
                    .follow = c->cfg.follow_redirects,
                    .max_redirects = c->cfg.max_redirects ? c->cfg.max_redirects : 20,
                    .report = report,
                    .report_ctx = c,
                    .ev = &ev,
                    .duration_us = c->now - started,
                    .on_event = c->cfg.on_event,
                    .event_data = c->cfg.event_data};
    stg__attempt_step(&st, a, &c->x.hints, &c->d);
    if (c->d.action != STG_ACTION_RETRY) {
        *reason = c->d.reason;
        return false;
    }
    if (a->resend) {
        *hop = true; /* never processed: again at once, no wait */
        return true;
    }
    if (a->redirect) {
        c->hops++;
        *hop = true;
        if (!take_hop(c, a, method)) {
            *rc = STG_ENOMEM;
            return false;
        }
    }
    return true;
}

/* The retry's wait (event, then a wait the token interrupts). */
static bool retry_wait(call *c)
{
    stg_event ev;
    event(c, STG_EVENT_WAIT, &ev);
    ev.attempt = c->rs.attempts;
    ev.status = c->a.status;
    ev.error = c->a.err;
    ev.wait_us = c->d.wait_us;
    ev.retry_after_us = c->d.server_wait_us;
    ev.reason = c->d.reason;
    emit(c, &ev);
    stg_retry_state_note(&c->rs, &c->d);
    return wait_for(c, c->d.wait_us);
}

/* The body sink's END (stg__xfer_sink_end): a sink that fails there has
 * no complete body, so a success becomes the sink's failure. */
static stg_reason sink_end(call *c, stg_reason reason)
{
    if (stg__xfer_sink_end(&c->x) || reason != STG_REASON_SUCCESS)
        return reason;
    c->x.sink_failed = true;
    c->a.err = STG_NET_OTHER;
    snprintf(c->a.errtext, sizeof c->a.errtext,
             "the body sink failed at the end of the body (flush or close)");
    return STG_REASON_ERROR_NOT_RETRYABLE;
}

/* Fill out from the last attempt and emit the final event. */
static int call_result(call *c, stg_reason reason, stg_result *out)
{
    reason = sink_end(c, reason);
    const stg__attempt *a = &c->a;
    out->action = reason == STG_REASON_SUCCESS ? STG_ACTION_SUCCESS : STG_ACTION_GIVE_UP;
    out->reason = reason;
    out->status = a->status;
    out->error = a->err;
    out->curl_code = a->curl_code;
    snprintf(out->error_text, sizeof out->error_text, "%s", c->errtext[0] ? c->errtext : a->errtext);
    out->attempts = c->rs.attempts;
    out->elapsed_us = c->now - c->rs.start_us;
    out->server_wait_us = c->d.server_wait_us;
    stg__xfer_move_to(&c->x, out);
    if (out->server_wait_us == STG_UNKNOWN &&
        !stg_hints_server_wait(&out->hints, &out->server_wait_us))
        out->server_wait_us = STG_UNKNOWN;
    out->final_url = strdup(c->final_url[0] ? c->final_url : c->url);
    if (!out->body || !out->headers || !out->final_url) {
        stg_result_free(out);
        return STG_ENOMEM;
    }
    stg_event ev;
    event(c, out->action == STG_ACTION_SUCCESS ? STG_EVENT_SUCCESS : STG_EVENT_GIVE_UP, &ev);
    ev.attempt = c->rs.attempts;
    ev.status = out->status;
    ev.error = out->error;
    ev.curl_code = out->curl_code;
    ev.duration_us = out->elapsed_us;
    ev.retry_after_us = out->server_wait_us;
    ev.reason = reason;
    emit(c, &ev);
    return STG_OK;
}

int stg_curl_perform(CURL *easy, const stg_call_config *cfg, stg_result *out)
{
    if (!out)
        return STG_EINVAL;
    memset(out, 0, sizeof *out);
    out->action = STG_ACTION_GIVE_UP;
    out->reason = STG_REASON_CANCELLED;
    out->server_wait_us = STG_UNKNOWN;
    stg_hints_init(&out->hints);
    if (!easy)
        return STG_EINVAL;
    if (stg__curl_global_init() != CURLE_OK)
        return STG_ENOMEM;
    call *c = calloc(1, sizeof *c); /* ~10 KB of URL buffers: not the stack */
    if (!c)
        return STG_ENOMEM;
    int rc = call_open(c, easy, cfg);
    if (rc != STG_OK) {
        if (c->multi)
            call_close(c);
        free(c);
        return rc;
    }
    c->rs.start_us = c->now;
    stg_method method = c->cfg.method;
    stg_reason reason = STG_REASON_CANCELLED;
    bool hop;
    while (one_attempt(c, &method, &hop, &reason, &rc))
        if (!hop && !retry_wait(c)) {
            reason = STG_REASON_CANCELLED;
            break;
        }
    if (rc == STG_OK)
        rc = call_result(c, reason, out);
    else
        (void)stg__xfer_sink_end(&c->x); /* the call failed: END all the same */
    call_close(c);
    free(c);
    return rc;
}

void stg_result_free(stg_result *r)
{
    if (!r)
        return;
    free(r->body);
    free(r->headers);
    free(r->final_url);
    r->body = r->headers = r->final_url = NULL;
    r->body_len = r->headers_len = 0;
}
