/*
 * Completion: an attempt's end, through the attempt step shared with
 * stg_curl_perform (attempt.c): classify, redact, report to the host's
 * adaptive limiter, breaker and budget, decide; then a retry's wait, a
 * redirect hop, or finish (the done callback, exactly once).
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
 *  - a request's body sink gets its END in finish, right before done, and
 *    is never called again (stg__xfer_sink_end forgets it);
 *  - a quota reservation (cfg.quotas) is settled exactly once: with the
 *    answer's quotas when an answer came (the count they tell, else the
 *    usage the body reports; a refusal, 429 or 529, used nothing), as
 *    spent when the attempt ended without one (it may have reached the
 *    server), given back when the request ended before sending or the
 *    attempt failed before reaching the server (connect, DNS, TLS, a
 *    refused HTTP/2 stream); every send's answer (or failure) is told to
 *    its host's cost model, once; the shared ledger's ticket of the send
 *    (cfg.shared_quotas) is settled at the same moment, the same way.
 */
#include <stdlib.h>
#include <string.h>

#include "curl/engine.h"


/* A refusal: the server did not do the work, nor count it (429, and
 * Anthropic's 529 overloaded). */
static bool refusal(int status)
{
    return status == 429 || status == 529;
}

/* An attempt that failed before its request reached the server. */
static bool never_sent(const stg__attempt *a, const stg__xfer *x)
{
    return a->status == 0 &&
           (a->err == STG_NET_CONNECT_REFUSED || a->err == STG_NET_CONNECT_TIMEOUT ||
            a->err == STG_NET_DNS || a->err == STG_NET_TLS || x->refused_stream);
}

/* What r used of each token unit it reserved, as far as the answer says:
 * nothing for a refusal; the usage its body reports (an AI answer's
 * "usage", JSON or SSE; the kept body, or the tail of one that streamed to
 * a sink) otherwise. Returns the count in used[]. */
static size_t used_of(const req *r, stg_quota_cost *used, size_t max)
{
    if (refusal(r->status)) {
        stg_quota_cost c[STG_QUOTA_COSTS_MAX + 3];
        size_t n = stg__eng_cost_now(r, c, sizeof c / sizeof c[0]), k = 0;
        for (size_t i = 0; i < n && k < max; i++) {
            if (!strcmp(c[i].unit, "tokens") || !strcmp(c[i].unit, "input-tokens") ||
                !strcmp(c[i].unit, "output-tokens")) {
                used[k] = c[i];
                used[k++].amount = 0;
            }
        }
        return k;
    }
    if (!r->parts || r->status < 200 || r->status > 299)
        return 0;
    if (r->x.body.p && r->x.body.len)
        return stg__ai_cost_usage(r->x.body.p, r->x.body.len, used, max);
    return stg__ai_cost_usage(r->x.tail, r->x.tail_len, used, max); /* streamed on */
}

/* The quotas an answer announced (the latest response's header block,
 * through every dialect stg_hints_feed reads) settle r's reservation, at
 * the count they tell, else at what the body says was used (a refusal
 * used nothing); with no answer (answered false) the reservation stays
 * spent, unless the request never reached the server (unsent): then it
 * is given back. The host's cost model learns from every send's answer. */
static void quota_settle(stg_engine *e, req *r, bool answered, bool unsent)
{
    stg_cost_model *cm = r->host->cost_model;
    int64_t seq = r->cost_seq;
    r->cost_seq = 0;
    bool held = r->quota_held;
    if (held) {
        r->quota_held = false;
        r->host->q_held--;
    }
    stg_quota *q = e->hosts.quota;
    const stg_shared_quota *sq = e->cfg.shared_quotas;
    void *sqt = r->sq;
    r->sq = NULL;
    /* The key's requests that still want quota after this one. */
    int64_t later = r->host->q_alive - 1;
    if (!answered) {
        if (held && sq)
            sq->settle(sq->ctx, sqt, unsent ? 2 : 1, NULL, NULL, 0, later);
        if (cm && seq && unsent)
            stg_cost_uncounted(cm, seq);
        else if (cm && seq)
            stg_cost_answer(cm, seq, true, NULL, 0, e->now);
        if (held && q && unsent)
            stg_quota_cancel(q, r->host->key, r->qt);
        else if (held && q)
            stg_quota_settle(q, r->host->key, NULL, r->qt, NULL, e->now);
        return;
    }
    stg_quota_set qs;
    stg__quota_answer(&r->x, r->status, e->wall, &qs);
    if (cm && seq)
        stg_cost_answer(cm, seq, !refusal(r->status), qs.q, qs.n, e->now);
    if (!held)
        return;
    stg_quota_cost used[STG_QUOTA_COSTS_MAX + 3];
    size_t n_used = used_of(r, used, sizeof used / sizeof used[0]);
    stg__xfer_tail_free(&r->x); /* read: a request waiting for a retry holds none */
    if (sq)
        sq->settle(sq->ctx, sqt, 0, &qs, used, n_used, later);
    if (!q)
        return;
    char route[512];
    stg__eng_route(r, route, sizeof route);
    stg_quota_settle_used(q, r->host->key, route, r->qt, &qs, used, n_used, e->now);
}

/* Finish r: leave every structure, report, call done once, free. */
void stg__eng_finish(stg_engine *e, req *r, stg_reason reason)
{
    bool was_active = r->where == RQ_ACTIVE;
    stg__eng_detach(e, r);
    stg__eng_account(e, r, ACCT_NONE); /* its last wait, before its final event */
    if (r->quota_held && was_active) {
        quota_settle(e, r, false, false); /* abandoned mid-send: it may count */
    } else if (r->quota_held) {
        r->quota_held = false; /* it never left: the reservation returns */
        r->host->q_held--;
        stg_quota_cancel(e->hosts.quota, r->host->key, r->qt);
        if (e->cfg.shared_quotas)
            e->cfg.shared_quotas->settle(e->cfg.shared_quotas->ctx, r->sq, 2, NULL, NULL, 0,
                                         r->host->q_alive - 1);
        r->sq = NULL;
    }
    r->host->q_alive--;
    STG_ASSERT(r->host->q_alive >= r->host->q_held && r->host->q_held >= 0);
    if (was_active) {
        /* Abandoned mid-attempt: its partial answer is not an answer. */
        stg__xfer_reset(&r->x);
        r->status = 0;
        r->err = STG_NET_OTHER;
        r->curl_code = CURLE_ABORTED_BY_CALLBACK;
        snprintf(r->errtext, sizeof r->errtext, "%s", stg_reason_message(reason));
    }
    if (r->probe_claimed) {
        r->probe_claimed = false;
        stg_breaker_on_neutral(&r->host->breaker, e->now);
        stg__eng_flush_breaker(e, r->host);
    }
    if (r->shared_probe) {
        r->shared_probe = false;
        if (e->cfg.shared->breaker_record)
            e->cfg.shared->breaker_record(e->cfg.shared->ctx, r->host->key,
                                          STG_BREAKER_NEUTRAL);
    }
    stg__host *h = r->host;
    bool release = r->over_budget;
    if (release) {
        r->over_budget = false;
        h->over_budget_out--;
    }
    stg__eng_map_del(e, r->id);
    /* The body sink's last call, before done: a sink that fails at its
     * END has no complete body, so a success becomes its failure. */
    if (!stg__xfer_sink_end(&r->x) && reason == STG_REASON_SUCCESS) {
        reason = STG_REASON_ERROR_NOT_RETRYABLE;
        r->x.sink_failed = true;
        r->err = STG_NET_OTHER;
        snprintf(r->errtext, sizeof r->errtext,
                 "the body sink failed at the end of the body (flush or close)");
    }

    stg_result res;
    memset(&res, 0, sizeof res);
    char empty[1] = "";
    res.action = reason == STG_REASON_SUCCESS ? STG_ACTION_SUCCESS : STG_ACTION_GIVE_UP;
    res.reason = reason;
    res.status = r->status;
    res.error = r->err;
    res.curl_code = r->curl_code;
    snprintf(res.error_text, sizeof res.error_text, "%s", r->errtext);
    res.attempts = r->rs.attempts;
    res.elapsed_us = r->started ? e->now - r->rs.start_us : 0;
    res.server_wait_us = r->server_wait_us;
    res.hints = r->x.hints;
    res.body = r->x.body.p ? r->x.body.p : empty;
    res.body_len = r->x.body.len;
    res.headers = r->x.headers.p ? r->x.headers.p : empty;
    res.headers_len = r->x.headers.len;
    res.final_url = r->final_url ? r->final_url : r->url_red;
    res.body_truncated = r->x.truncated;
    res.body_sink_failed = r->x.sink_failed;

    stg_event ev;
    stg__eng_ev_init(e, r, res.action == STG_ACTION_SUCCESS ? STG_EVENT_SUCCESS : STG_EVENT_GIVE_UP, &ev);
    ev.status = r->status;
    ev.error = r->err;
    ev.curl_code = r->curl_code;
    ev.duration_us = res.elapsed_us;
    ev.retry_after_us = r->server_wait_us;
    ev.reason = reason;
    stg__eng_emit(e, &ev);

    e->stats.finished++;
    if (res.action == STG_ACTION_SUCCESS)
        e->stats.succeeded++;
    else
        e->stats.gave_up++;
    if (r->done)
        r->done(e, r->id, &res, r->data);
    stg__eng_req_free(r);
    if (release)
        stg__eng_budget_release(e, h);
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
    rq_leave(r, RQ_ACTIVE);
    e->active--;

    r->err = a.err;
    r->status = a.status;
    r->server_wait_us = a.hint;
    count_status(e, r->status, r->err);
    quota_settle(e, r, a.status > 0, never_sent(&a, &r->x));
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
        rq_enter(e, r, RQ_RETRY_Q);
        stg__eng_q_push(&e->retry_q, r);
        return;
    }
    if (a.redirect) {
        if (!take_hop(r, &a)) {
            snprintf(r->errtext, sizeof r->errtext, "out of memory");
            stg__eng_finish(e, r, STG_REASON_ERROR_NOT_RETRYABLE);
            return;
        }
        /* Through admission again (breaker, limiter), with no backoff. */
        rq_enter(e, r, RQ_RETRY_Q);
        stg__eng_q_push(&e->retry_q, r);
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
