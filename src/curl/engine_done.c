/*
 * Completion: an attempt's end, through the attempt step shared with
 * stg_curl_perform (attempt.c): classify, redact, report to the host's
 * adaptive limiter, breaker and budget, decide; then a retry's wait, a
 * redirect hop, or finish (engine_finish.c). Its moves are made through
 * engine_state.c; it never calls admission (engine_admit.c): a request it
 * sends again goes to the retry queue, which the pump admits next.
 *
 * Invariants:
 *  - an attempt's slot and easy handle are given back before any callback
 *    runs, so a callback may submit and cancel;
 *  - every breaker probe slot claimed is answered once: recorded here, or
 *    on_neutral in finish when the attempt is abandoned;
 *  - a redirect hop goes back through admission (the limiter) like a
 *    retry; a secret header reaches another origin never;
 *  - so does a request the server never processed (HTTP/2 REFUSED_STREAM
 *    or GOAWAY, attempt.c), at once and on a new connection (libcurl
 *    closed the refusing one, and one that sent GOAWAY takes no stream):
 *    it tells the adaptive limiter, budget and breaker nothing (a breaker
 *    probe it held is answered neutral), since the server did nothing;
 *  - the send's quota reservation is settled once, at the attempt's end
 *    (engine_settle.c says how).
 */
#include <stdlib.h>
#include <string.h>

#include "curl/engine.h"

/* An attempt that failed before its request reached the server. */
static bool never_sent(const stg__attempt *a, const stg__xfer *x)
{
    return a->status == 0 &&
           (a->err == STG_NET_CONNECT_REFUSED || a->err == STG_NET_CONNECT_TIMEOUT ||
            a->err == STG_NET_DNS || a->err == STG_NET_TLS || x->refused_stream);
}

/* Does this outcome cost the retry budget? A failure the policy would
 * retry. What it costs depends on its class (budget.h): a throttle is a
 * rate signal and costs less than a fault. */
static bool budget_failure(const stg_policy *p, int status, stg_net_error err)
{
    if (err != STG_NET_NONE)
        return (unsigned)err < 32 && (p->retry_errors & STG_NET_BIT(err));
    return status >= 400 && stg_status_set_has(&p->retry_statuses, status);
}

static void count_status(stg_engine *e, int status, stg_net_error err)
{
    if (err != STG_NET_NONE)
        e->stats.transport_errors++;
    else if (status == 429)
        e->stats.status_429++;
    else if (status == 503)
        e->stats.status_503++;
    else if (status >= 500)
        e->stats.status_5xx_other++;
    else if (status >= 400)
        e->stats.status_4xx_other++;
}

/* The answer, to the host's adaptive limiter, breaker and budget, and to
 * a shared limiter (the attempt step's report). */
static void report(void *ctx, const stg__attempt *a, const stg_hints *hints)
{
    req *r = ctx;
    stg_engine *e = r->engine;
    stg__host *h = r->host;
    if (a->resend) {
        /* Never processed: no answer to learn from. */
        if (r->shared_probe) {
            r->shared_probe = false;
            if (e->cfg.shared->breaker_record)
                e->cfg.shared->breaker_record(e->cfg.shared->ctx, h->key, STG_BREAKER_NEUTRAL);
        }
        if (h->has_breaker && r->probe_claimed) {
            r->probe_claimed = false;
            stg_breaker_on_neutral(&h->breaker, e->now);
            stg__eng_flush_breaker(e, h);
        }
        return;
    }
    int64_t hold;
    /* With cfg.quotas the announced quotas are the quota limiter's, kept
     * per key with their windows' resets: the adaptive rate learns from
     * throttles only, not a limit / window rate of its own (which spreads
     * a fixed window's count evenly and so never sends a window's count
     * at its start). */
    bool learn_hints = !e->cfg.quotas;
    if (h->has_adaptive && a->status == 503 && stg_hints_server_wait(hints, &hold) &&
        (r->pol->max_server_wait_us < 0 || hold <= r->pol->max_server_wait_us)) {
        /* Unavailable until a stated time: a hold, not a congestion cut.
         * Not past the longest server wait honoured: such a request gives
         * up at once (SERVER_WAIT_TOO_LONG), and so must the others, not
         * sit out the hint in the limiter. */
        stg_adaptive_on_hold(&h->adaptive, hold, e->now, &e->rng);
        if (learn_hints)
            stg_adaptive_on_hints(&h->adaptive, hints, e->now, &e->rng);
    } else if (h->has_adaptive && a->status > 0) {
        stg_adaptive_on_response(&h->adaptive, stg__throttled(a->status, hints), e->now);
        if (learn_hints)
            stg_adaptive_on_hints(&h->adaptive, hints, e->now, &e->rng);
    }
    if (a->err == STG_NET_NONE && a->status > 0 && a->status < 500 &&
        !stg__throttled(a->status, hints))
        stg__eng_early_answered(e, h); /* its quota had room for this one */
    stg__shared_report(e->cfg.shared, h->key, r->ticket, a->status, hints);
    if (r->shared_probe) {
        r->shared_probe = false;
        if (e->cfg.shared->breaker_record)
            e->cfg.shared->breaker_record(
                e->cfg.shared->ctx, h->key,
                stg_breaker_classify(&e->cfg.breaker_config, a->status, a->err));
    }
    if (h->has_breaker && r->probe_claimed) {
        r->probe_claimed = false;
        stg_breaker_record(&h->breaker, a->status, a->err, e->now);
        stg__eng_flush_breaker(e, h);
    }
    /* A failure that says when the server will be back (a 503 with
     * Retry-After) sets when an open breaker probes again. */
    if (h->has_breaker && a->hint != STG_UNKNOWN &&
        stg_breaker_classify(&e->cfg.breaker_config, a->status, a->err) == STG_BREAKER_FAILURE)
        stg_breaker_server_wait(&h->breaker, a->hint, e->now);
    if (h->has_budget) {
        if (!budget_failure(&e->pol, a->status, a->err)) {
            if (a->err == STG_NET_NONE && stg_fault_classify(a->status, a->err, hints) !=
                                              STG_FAULT_THROTTLE)
                stg_budget_on_success(&h->budget);
        } else if (stg_fault_classify(a->status, a->err, hints) == STG_FAULT_THROTTLE) {
            /* With an adaptive rate a throttle costs nothing: the rate is
             * cut on it, and every retry waits its turn at that rate, so
             * retries cannot add load. Charged, 30 refusals of a first
             * burst held every retry behind one (the budget's pass) for
             * seconds after the rate had settled. */
            if (!h->has_adaptive)
                stg_budget_on_throttle(&h->budget);
        } else {
            stg_budget_on_failure(&h->budget);
        }
        stg__eng_budget_release(e, h);
    }
}

/* Point r at its next hop: the URL it sends to, method (a body dropped with a turn to
 * GET), and whether it is off the first URL's origin (then start_attempt
 * sends the headers without secrets). Returns false when out of memory. */
static bool take_hop(req *r, const stg__attempt *a)
{
    /* Events keep the submitted URL (url_red); the hop's is final_url. */
    char *url = strdup(a->redirect_url);
    if (!url)
        return false;
    if (r->url != r->origin) /* the first hop's is the origin's string */
        free(r->url);
    r->url = url;
    if (a->redirect_method != r->method && a->redirect_method == STG_METHOD_GET) {
        free(r->body);
        r->body = NULL;
        r->body_len = 0;
        r->has_body = false;
    }
    r->method = a->redirect_method;
    r->off_origin = a->redirect_cross_origin;
    if (r->off_origin && !r->stripped && r->headers) {
        bool ok = true;
        r->stripped = stg__headers_without_secrets(r->headers, (const char *const *)r->secret, &ok);
        if (!ok)
            return false;
    }
    r->hops++;
    return true;
}

static void attempt_done(stg_engine *e, req *r, CURLcode code)
{
    CURL *easy = r->easy;
    stg__attempt a;
    stg__attempt_end(easy, code, &r->x, r->url, &a);
    stg__body_hints(&r->x, &a); /* what the refusal's body says, before the quotas */
    char *fu = strdup(a.final_url);
    if (fu) {
        free(r->final_url);
        r->final_url = fu;
    }
    r->curl_code = a.curl_code;
    snprintf(r->errtext, sizeof r->errtext, "%s", a.errtext);

    /* The attempt is over: free its slot and handle before any callback. */
    curl_multi_remove_handle(e->multi, easy);
    stg__eng_pool_put(e, easy);
    r->easy = NULL;
    stg__eng_leave(r, RQ_ACTIVE);
    e->active--;

    r->err = a.err;
    r->status = a.status;
    r->server_wait_us = a.hint;
    count_status(e, r->status, r->err);
    stg__eng_quota_settle(e, r, a.status > 0, never_sent(&a, &r->x));
    stg__eng_conc_sample(e, r);

    stg__host *h = r->host;
    stg_event ev;
    stg__eng_ev_init(e, r, STG_EVENT_ATTEMPT_END, &ev);
    stg__step st = {.pol = r->pol,
                    .rs = &r->rs,
                    .hops = r->hops,
                    .refused = &r->refused,
                    .rng = &e->rng,
                    .now_us = e->now,
                    .method = r->method,
                    .has_key = r->has_key,
                    .origin_url = r->origin,
                    .follow = r->follow,
                    .max_redirects = r->max_redirects,
                    .report = report,
                    .report_ctx = r,
                    .ev = &ev,
                    .duration_us = e->now - r->attempt_start_us,
                    .on_event = e->cfg.on_event,
                    .event_data = e->cfg.event_data};
    stg_decision d;
    stg__attempt_step(&st, &a, &r->x.hints, &d);
    r->err = a.err; /* the step may have ended a redirect loop */
    snprintf(r->errtext, sizeof r->errtext, "%s", a.errtext);
    if (d.server_wait_us != STG_UNKNOWN)
        r->server_wait_us = d.server_wait_us;

    if (d.action != STG_ACTION_RETRY) {
        stg__eng_finish(e, r, d.reason);
        return;
    }
    if ((r->x.stream & STG_STREAM_FINAL) && r->x.streamed) {
        /* Its sink already passed part of an answer on: never resent. */
        stg__eng_finish(e, r, STG_REASON_ERROR_NOT_RETRYABLE);
        return;
    }
    if (a.resend) {
        /* Never processed: again at once, through admission (limiter). */
        stg__eng_requeue(e, r, false);
        return;
    }
    if (a.redirect) {
        if (!take_hop(r, &a)) {
            snprintf(r->errtext, sizeof r->errtext, "out of memory");
            stg__eng_finish(e, r, STG_REASON_ERROR_NOT_RETRYABLE);
            return;
        }
        /* Through admission again (breaker, limiter), with no backoff. */
        stg__eng_requeue(e, r, false);
        return;
    }
    rq_wait kind = W_BACKOFF;
    if (h->has_budget && !stg_budget_allow_retry(&h->budget)) {
        if (r->over_budget) {
            /* It keeps the pass through its own backoff: while the host
             * keeps failing it sends one request per backoff interval. */
        } else if (e->cfg.budget_wait) {
            kind = W_BUDGET;
        } else {
            stg__eng_finish(e, r, STG_REASON_BUDGET_EXHAUSTED);
            return;
        }
    } else if (r->over_budget) {
        r->over_budget = false; /* the budget has refilled */
        h->over_budget_out--;
    }
    stg_retry_state_note(&r->rs, &d);
    /* A throttle that said nothing of when: the wait is ours, and the
     * host's adaptive rate already paces the retry (engine_early.c). */
    if (h->has_adaptive && d.server_wait_us == STG_UNKNOWN &&
        stg_fault_classify(r->status, r->err, &r->x.hints) == STG_FAULT_THROTTLE)
        stg__eng_early_note(r);
    stg__eng_ev_init(e, r, STG_EVENT_WAIT, &ev);
    ev.status = r->status;
    ev.error = r->err;
    ev.wait_us = d.wait_us;
    ev.retry_after_us = d.server_wait_us;
    ev.reason = kind == W_BUDGET ? STG_REASON_BUDGET_EXHAUSTED : d.reason;
    stg__eng_emit(e, &ev);
    stg__eng_schedule(e, r, kind, d.wait_us);
}

void stg__eng_process_done(stg_engine *e)
{
    CURLMsg *m;
    int left;
    /* One message at a time: handling one may remove other handles (a
     * callback cancelling a request), which also drops their messages. */
    while ((m = curl_multi_info_read(e->multi, &left))) {
        if (m->msg != CURLMSG_DONE)
            continue;
        CURL *easy = m->easy_handle;
        CURLcode code = m->data.result;
        char *priv = NULL;
        curl_easy_getinfo(easy, CURLINFO_PRIVATE, &priv);
        req *r = (req *)(void *)priv;
        if (r && r->easy == easy && r->where == RQ_ACTIVE)
            attempt_done(e, r, code);
    }
}
