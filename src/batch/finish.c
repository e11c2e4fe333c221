/*
 * How a request's end reaches the store: the engine's done callback
 * (outcome -> state, body, into the runner's group commit), the sent-mark from the
 * ATTEMPT_START event, and the stops the run takes on its own (store,
 * limiter, body file).
 *
 * Invariants:
 *  - Each finished request's outcome is written (into the runner's group
 *    transaction: committed with the next commit, runner.c), then the slot
 *    is freed (a failed store stops every write: the next open recovers
 *    those jobs). commit.c is told of each outcome (an unsafe one is
 *    committed in its step).
 *  - An ATTEMPT_START applies commit.c's rule before the engine goes on:
 *    a request never leaves while its claim is uncommitted, and the
 *    sent-mark of a job that is not replay-safe is committed first,
 *    counting that first attempt: the outcome then adds the others.
 *  - The caller's event callback runs after the batch's own handling, so
 *    what it observes in the store is already written (and, for the
 *    sent-mark, committed).
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "batch/internal.h"
#include "util/assert.h"

void stg__batch_stop_for(stg_batch *b, stg_batch_stop_cause cause, const char *fmt,
                         const char *arg)
{
    b->stopping = true;
    if (cause == STG_BATCH_STORE)
        b->store_failed = true;
    if (b->cause != STG_BATCH_RUNNING && b->cause != STG_BATCH_STOPPED)
        return;
    b->cause = cause;
    snprintf(b->msg, sizeof b->msg, fmt, arg);
}

void stg__batch_store_failed(stg_batch *b)
{
    stg__batch_stop_for(b, STG_BATCH_STORE, "%s", stg__batch_src_errmsg(b));
}

void stg__batch_release(stg_batch *b, stg_batch_slot *sl)
{
    STG_ASSERT(sl->used && b->active > 0);
    stg__job_clear(&sl->job);
    sl->used = false;
    sl->sent = false;
    sl->lost = false;
    sl->committed = sl->n429 = sl->n503 = 0;
    b->active--;
}

/* Write o for the job in sl (into the group: commit.c commits it); the
 * counts follow only a written move. */
void stg__batch_write_outcome(stg_batch *b, stg_batch_slot *sl, stg_job_outcome *o)
{
    if (b->store_failed)
        return; /* stays inflight: the next open recovers it */
    int rc = stg__batch_src_finish(b, &sl->job, o);
    if (rc == STG_EUNAVAIL) {
        /* The source is away and kept nothing: the job stays where it is
         * there (a queue gives it to another worker). */
        stg__batch_stop_for(b, STG_BATCH_LIMITER, "%s", stg__batch_src_errmsg(b));
        return;
    }
    if (rc != STG_OK) {
        stg__batch_store_failed(b);
        return;
    }
    if (!b->source)
        stg__batch_counts_move(&b->counts, STG_JOB_INFLIGHT, o->state);
    stg__batch_outcome_written(b, sl); /* commit.c: unsafe-open */
    if (o->state != STG_JOB_PENDING)
        b->finished++;
}

/* ---- finish: the engine's done callback ---------------------------------------- */

/* A body under out_dir could not be written: the run stops and the job is
 * put back (review when it may have had an effect and is not replay-safe). */
static void body_not_written(stg_batch *b, stg_batch_slot *sl, stg_job_outcome *o,
                             const char *fname, int err, bool in_way)
{
    char what[512];
    if (b->out_dir && in_way)
        snprintf(what, sizeof what,
                 "%s/.%s.tmp is in the way: not a regular file of this user (a symbolic "
                 "link?), and stagger never writes through one; remove it",
                 b->out_dir, fname);
    else if (b->out_dir)
        snprintf(what, sizeof what, "%s/%s: %s", b->out_dir, fname, strerror(err));
    else
        snprintf(what, sizeof what, "a temporary file for %s: %s", fname, strerror(err));
    stg__batch_stop_for(b, STG_BATCH_BODY,
                        "cannot write a response body: %s (the job runs again next time)",
                        what);
    o->state = sl->job.replay_safe ? STG_JOB_PENDING : STG_JOB_REVIEW;
    o->error = b->out_dir ? "the response body could not be written under --out"
                          : "the response body could not be written to a temporary file";
    o->reason = "body_not_written";
}

/* out_dir: a 2xx body was streamed into the slot's temp file (renamed into
 * place now); any other body is in res (written now). */
static void body_to_file(stg_batch *b, stg_batch_slot *sl, const stg_result *res,
                         stg_job_outcome *o, char *fname, size_t fsize)
{
    snprintf(fname, fsize, "%s", sl->body.name);
    bool in_way = false;
    int rc = sl->body.exists ? stg__batch_body_commit(&sl->body)
                             : stg__batch_write_body(b->out_fd, fname,
                                                     res->body ? res->body : "", res->body_len,
                                                     &in_way);
    if (rc == 0)
        o->response_file = fname;
    else
        body_not_written(b, sl, o, fname, errno, in_way);
}

void stg__batch_on_done(stg_engine *e, uint64_t id, const stg_result *res, void *data)
{
    (void)e;
    (void)id;
    stg_batch_slot *sl = data;
    stg_batch *b = sl->b;
    STG_ASSERT(sl->used && sl->job.id > 0);
    stg_job_state st = stg__batch_state_for(res, sl->job.replay_safe, sl->sent);
    if (sl->lost)
        st = STG_JOB_PENDING; /* another worker has it: give back, record nothing */
    if (res->reason == STG_REASON_LIMITER_UNAVAILABLE)
        stg__batch_stop_for(b, STG_BATCH_LIMITER,
                 "the shared limiter is unavailable (%s); jobs not sent stay pending: run "
                 "again when it is back, or allow --limiter-fallback local:SHARE",
                 res->error_text[0] ? res->error_text : "no answer");
    char error[512] = "", fname[160] = "";
    if (st != STG_JOB_DONE)
        stg__batch_describe(res, error, sizeof error);
    int attempts = res->attempts - sl->committed;
    stg_job_outcome out = {
        .state = st,
        .status = res->status,
        .attempts = attempts > 0 ? attempts : 0,
        .reason = st == STG_JOB_DONE ? NULL : stg_reason_name(res->reason),
        .error = st == STG_JOB_DONE ? NULL : error,
        .retries = res->attempts > 1 ? res->attempts - 1 : 0,
        .status_429 = sl->n429,
        .status_503 = sl->n503,
    };
    bool keep_body = res->status > 0 && st != STG_JOB_PENDING;
    if (res->body_sink_failed) {
        /* The body's file failed (disk full): not an answer about the job. */
        body_not_written(b, sl, &out, sl->body.name, sl->body.err ? sl->body.err : EIO,
                         sl->body.tmp_in_way);
    } else if (keep_body && b->out_dir && !b->store_failed) {
        body_to_file(b, sl, res, &out, fname, sizeof fname);
    } else if (keep_body && !stg__batch_body_to_outcome(&sl->body, &out)) {
        out.body = res->body ? res->body : ""; /* not 2xx: the engine kept it */
        out.body_len = res->body_len;
    }
    stg__batch_write_outcome(b, sl, &out);
    stg__batch_body_discard(&sl->body); /* a temp file not renamed, read: gone */
    stg__batch_release(b, sl);
}

/* ---- events: the sent-mark ------------------------------------------------------ */

static stg_batch_slot *slot_of(stg_batch *b, uint64_t req_id)
{
    for (int i = 0; i < b->nslots; i++)
        if (b->slots[i].used && b->slots[i].req_id == req_id)
            return &b->slots[i];
    return NULL;
}

void stg__batch_on_event(const stg_event *ev, void *data)
{
    stg_batch *b = data;
    stg_batch_slot *sl = NULL;
    if (ev->type == STG_EVENT_ATTEMPT_START || ev->type == STG_EVENT_ATTEMPT_END)
        sl = slot_of(b, ev->request_id);
    if (sl && ev->type == STG_EVENT_ATTEMPT_START && !sl->lost &&
        stg__batch_src_may_send(b, &sl->job) != STG_OK)
        sl->lost = true; /* cancelled after the pass, before it leaves (runner.c) */
    if (sl && sl->lost && ev->type == STG_EVENT_ATTEMPT_START) {
        /* Not ours to send: no sent-mark, not counted as sent. */
    } else if (sl && ev->type == STG_EVENT_ATTEMPT_START) {
        /* The job's claim (and, not replay-safe, its sent-mark) is durable
         * before its request can leave: commit.c's rule. A failure stops
         * the run, and the step cancels the started requests before a pass
         * sends them. */
        int rc = stg__batch_before_send(b, sl);
        if (rc == STG_EUNAVAIL) {
            /* Not recorded: the run stops, and the engine sends only in a
             * later pass, so the cancel comes first and the job was never
             * sent: it goes back, not to review. */
            stg__batch_stop_for(b, STG_BATCH_LIMITER, "%s", stg__batch_src_errmsg(b));
            if (b->user_event)
                b->user_event(ev, b->user_event_data);
            return;
        }
        if (rc != STG_OK)
            stg__batch_store_failed(b);
        sl->sent = true;
    } else if (sl && ev->type == STG_EVENT_ATTEMPT_END) {
        sl->n429 += ev->status == 429;
        sl->n503 += ev->status == 503;
    }
    stg__batch_series_see(b, ev);
    if (b->source && b->source->on_event)
        b->source->on_event(b->source->ctx, ev);
    if (b->user_event)
        b->user_event(ev, b->user_event_data);
}
