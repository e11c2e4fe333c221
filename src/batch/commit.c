/*
 * The batch's commit rule: when the store's group transaction is
 * committed, in one place. Every other file of the runner reports what it
 * wrote (a claim, an outcome) and asks here before a send and after a
 * step; only this file opens, reads and clears claim_open, unsafe_open and
 * commit_us. (A queue source, b->source, commits each call itself: none of
 * this applies to it.)
 *
 * The store is in group commit (stg__store_group): claims (submit.c),
 * outcomes (finish.c) and the run's counters join one transaction,
 * committed only where something outside needs it:
 *  - claim-open: a claim written and not yet committed. Before a send
 *    (the engine's ATTEMPT_START, emitted after the handle is added and
 *    before the pass drives libcurl, where a transfer leaves) the group
 *    is committed when a claim is open: a request never leaves while its
 *    claim is uncommitted. A job claimed ahead was committed with the
 *    first start after its claim, so most starts commit nothing;
 *  - the flush before a send of a job that is not replay-safe: its
 *    sent-mark (sent = 1, with its first attempt counted) is written and
 *    committed, with the whole group, before its request can leave, so a
 *    kill sends it to review, never to pending;
 *  - unsafe-open: an outcome of a job that is not replay-safe, written
 *    and not yet committed: its step commits it (a kill would send it to
 *    review);
 *  - the 20 ms flush: at a step's end once FLUSH_EVERY_US passed since
 *    the last commit, and at a stop, a drain and the run's end.
 * Every flush also carries the run's per-second series rows that are due
 * (series.c): never a commit of their own.
 * So a busy run commits about once per claim (a claim of ~2 x the slots)
 * instead of once per pass (about once per job against a fast server).
 *
 * Why that is as safe as a commit before each pass: what a kill -9 must
 * find is every job whose request may have left inflight (or marked
 * sent), and every outcome the caller was told of committed. A request
 * leaves only after its claim's commit; the caller is told only what is
 * committed (progress_get, the summary and the counts read b->shown, a
 * copy taken at each commit). An outcome written but not committed
 * belongs to a job still inflight on disk: a kill re-runs it (replay-safe:
 * as one killed just before its answer), and no claim becomes durable
 * without committing every outcome written before it. A claim written
 * but not committed is pending on disk, and its request has not left.
 *
 * Why the writes stay on the runner's thread, though against a fast
 * server the runner is CPU-bound on one core and the second idles (tried
 * 2026-12-07: 50 000 keys, `stagger serve` unlimited, -j 30, medians of 7
 * turns alternating with the build before): a thread that wrote the
 * outcomes of replay-safe jobs from a queue, sharing the connection under
 * a mutex, saved nothing while every commit held every outcome written
 * before it (1.866 s against 1.890 s, for 9% more CPU: the runner still
 * writes what is queued at each commit, about once per claim). Letting a
 * commit leave the queue out saved 9% (1.891 s against 2.073 s) but
 * changes what a kill -9 finds: a commit no longer holds every answer
 * received before it (a kill re-sends those jobs, and more are inflight on
 * disk than 2 x the slots), and four tests of
 * tests/integration/test_batch_lib.c fail. So this rule stays as it is.
 *
 * Invariants, asserted: after the decision before a send, no claim is
 * open (unless the store or source failed: then the run stops and the
 * step cancels the request unsent); after a step, no unsafe outcome is
 * open (unless the store failed); a commit clears both flags, and what
 * the caller is told (b->shown) is then what was written.
 * tests/unit/test_batch_commit.c checks each decision.
 */
#include "batch/internal.h"
#include "util/assert.h"
#include "util/clock.h"

/* Outcomes of replay-safe jobs are committed at most this long after the
 * last commit when nothing else commits them first (a start whose claim is
 * uncommitted, a sent-mark, an unsafe outcome, the end): what the caller
 * is told (the committed) lags the wire by that much at most. */
#define FLUSH_EVERY_US STG_MS(20)

void stg__batch_committed(stg_batch *b)
{
    b->shown = b->counts;
    b->shown_finished = b->finished;
    b->claim_open = b->unsafe_open = false;
    b->commit_us = stg__clock_mono_us();
}

void stg__batch_flush(stg_batch *b)
{
    if (b->source || b->store_failed)
        return;
    stg__batch_series_write(b); /* series.c: its rows join this commit */
    if (b->store_failed)
        return;
    if (stg__store_flush(b->store) != STG_OK)
        stg__batch_store_failed(b);
    else
        stg__batch_committed(b);
}

void stg__batch_claimed(stg_batch *b, int got)
{
    if (got > 0 && !b->source)
        b->claim_open = true; /* committed at the first start that needs it */
}

void stg__batch_outcome_written(stg_batch *b, const stg_batch_slot *sl)
{
    if (!b->source && !sl->job.replay_safe)
        b->unsafe_open = true; /* a kill would send it to review: the step commits it */
}

stg__batch_send_rule stg__batch_before_send_rule(const stg_batch *b, const stg_batch_slot *sl)
{
    if (b->store_failed)
        return STG__BATCH_SEND_AS_IS; /* nothing more is written: the step cancels */
    if (!sl->sent && !sl->job.replay_safe)
        return STG__BATCH_SEND_MARK; /* its mark's commit takes the claims along */
    if (!b->source && b->claim_open)
        return STG__BATCH_SEND_FLUSH;
    return STG__BATCH_SEND_AS_IS;
}

int stg__batch_before_send(stg_batch *b, stg_batch_slot *sl)
{
    int rc = STG_OK;
    switch (stg__batch_before_send_rule(b, sl)) {
    case STG__BATCH_SEND_FLUSH:
        stg__batch_flush(b);
        break;
    case STG__BATCH_SEND_MARK:
        /* Committed before the engine goes on to send it. */
        rc = stg__batch_src_mark_sent(b, &sl->job);
        if (rc == STG_OK && !b->source) {
            stg__batch_committed(b); /* the mark committed the group */
            sl->committed = 1;       /* its first attempt is counted */
        }
        break;
    case STG__BATCH_SEND_AS_IS:
        break;
    }
    /* A request leaves with its claim durable, or not at all (a failed
     * store or source stops the run, and the step cancels it unsent). */
    STG_ASSERT(!b->claim_open || b->store_failed || rc != STG_OK);
    return rc;
}

bool stg__batch_after_step_rule(const stg_batch *b, int64_t now_us)
{
    return b->unsafe_open || b->stopping || b->drained ||
           now_us - b->commit_us >= FLUSH_EVERY_US;
}

void stg__batch_after_step(stg_batch *b)
{
    if (stg__batch_after_step_rule(b, stg__clock_mono_us()))
        stg__batch_flush(b);
    /* An unsafe outcome is committed in its step (or the store failed,
     * and the next open recovers the job). */
    STG_ASSERT(!b->unsafe_open || b->store_failed);
}
