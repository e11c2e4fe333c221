/*
 * What a finished request means for its job: the reason -> state mapping
 * (state_for) and the one-line error kept with the job.
 *
 * Invariants:
 *  - A job that may have had an effect at the server and is not safe to
 *    replay never goes back to pending: a cancelled one that was sent, and
 *    one given up on after anything but a 429 (a 429 says "not processed"),
 *    go to review.
 *  - Only answers that say the request itself is wrong fail a job;
 *    everything that may pass with time (attempts, deadline, breaker,
 *    budget, a long Retry-After) defers it.
 *  - Never INFLIGHT: the result is an end of this run for the job.
 */
#include <stdio.h>

#include "batch/batch.h"
#include "util/assert.h"

static stg_job_state map(const stg_result *res, bool replay_safe, bool sent)
{
    if (res->action == STG_ACTION_SUCCESS)
        return STG_JOB_DONE;
    switch (res->reason) {
    case STG_REASON_CANCELLED:
    case STG_REASON_LIMITER_UNAVAILABLE:
        /* Stopped before an answer (a lost limiter stops the run): the job
         * waits for the next run, unless an attempt of it may have had an
         * effect (a retry refused by the limiter after one that left). */
        return !replay_safe && sent ? STG_JOB_REVIEW : STG_JOB_PENDING;
    case STG_REASON_STATUS_NOT_RETRYABLE:
    case STG_REASON_ERROR_NOT_RETRYABLE:
        return STG_JOB_FAILED;
    case STG_REASON_METHOD_NOT_IDEMPOTENT:
        /* A 429 says the request was refused, not processed: safe to defer.
         * Anything else (503, a timeout, a reset) may have had an effect. */
        return res->status == 429 ? STG_JOB_DEFERRED : STG_JOB_REVIEW;
    default:
        /* attempts exhausted, deadline, server wait too long, budget
         * exhausted, breaker open: kept for a later run. */
        return STG_JOB_DEFERRED;
    }
}

stg_job_state stg__batch_state_for(const stg_result *res, bool replay_safe, bool sent)
{
    stg_job_state st = map(res, replay_safe, sent);
    STG_ASSERT(st != STG_JOB_INFLIGHT);
    STG_ASSERT(replay_safe || !sent || st != STG_JOB_PENDING);
    return st;
}

void stg__batch_describe(const stg_result *res, char *buf, size_t size)
{
    const char *why = stg_reason_message(res->reason);
    if (res->status > 0 && res->body_truncated)
        /* Not the server's fault, nor the network's: say what happened. */
        snprintf(buf, size, "HTTP %d: body larger than --max-body (%s)", res->status,
                 res->error_text[0] ? res->error_text : "transfer stopped");
    else if (res->status > 0 && res->error_text[0])
        snprintf(buf, size, "HTTP %d: %s (%s)", res->status, why, res->error_text);
    else if (res->status > 0)
        snprintf(buf, size, "HTTP %d: %s", res->status, why);
    else if (res->error != STG_NET_NONE && res->error_text[0])
        snprintf(buf, size, "%s: %s (%s)", stg_net_error_name(res->error), why,
                 res->error_text);
    else if (res->error != STG_NET_NONE)
        snprintf(buf, size, "%s: %s", stg_net_error_name(res->error), why);
    else if (res->error_text[0]) /* ended before sending, and says why */
        snprintf(buf, size, "%s (%s)", why, res->error_text);
    else
        snprintf(buf, size, "%s", why);
}
