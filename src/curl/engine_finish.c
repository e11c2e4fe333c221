/*
 * The last move of a request's life (engine_state.c's FINISHED), from any
 * state: leave every structure, answer what it holds (a quota reservation,
 * a breaker probe, the budget's pass), report the result, call done
 * exactly once, free. Admission, completion, the budget's waits and
 * stg_engine_cancel all end a request here.
 *
 * Invariants:
 *  - done is called exactly once, after every slot, handle and
 *    reservation of the request was given back (a callback may submit
 *    and cancel);
 *  - every breaker probe slot claimed is answered once: on_neutral here
 *    when the attempt is abandoned;
 *  - a request's body sink gets its END here, right before done, and is
 *    never called again (stg__xfer_sink_end forgets it).
 */
#include <stdlib.h>
#include <string.h>

#include "curl/engine.h"

/* Finish r: leave every structure, report, call done once, free. */
void stg__eng_finish(stg_engine *e, req *r, stg_reason reason)
{
    bool was_active = r->where == RQ_ACTIVE;
    stg__eng_finished(e, r); /* the move to FINISHED: asserted, traced */
    stg__eng_detach(e, r);
    stg__eng_account(e, r, ACCT_NONE); /* its last wait, before its final event */
    if (r->quota_held && was_active)
        stg__eng_quota_settle(e, r, false, false); /* abandoned mid-send: it may count */
    else
        stg__eng_quota_return(e, r); /* it never left: the reservation returns */
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
