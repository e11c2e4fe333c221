/*
 * The batch runner: jobs from the store, through the engine, back into the
 * store (see batch.h for the API and the transitions).
 *
 * Loop (stg__batch_step): submit claimed jobs into the free slots, claiming
 * more first when those claimed ahead run short (submit.c: one claim takes
 * the free slots and ahead_max more, marked inflight, uncommitted), run
 * one engine pass, commit when due. When the store's group is committed
 * (claim-open, unsafe-open, the 20 ms flush, the flush before a send) is
 * commit.c's rule, with why it is as safe as a commit before each pass.
 *
 * This file: new, step, stop, progress, end, free.
 *
 * Invariants (asserted where they can be):
 *  - A job's request can leave only after its inflight mark is committed
 *    (at its ATTEMPT_START, if no earlier commit took it); an outcome is
 *    committed before any claim written after it. The claimed and not
 *    finished are at most active + n_ahead <= concurrency + ahead_max
 *    (ahead_max: the slots, at most 64; 0 below 4 slots or with a
 *    source), and between two commits no claim becomes durable, so every
 *    committed state has at most that many jobs inflight, and a kill -9
 *    finds every job that may have been sent inflight (or, not
 *    replay-safe, marked sent): a kill re-runs at most that many
 *    (at-least-once); those claimed ahead were never sent and recover to
 *    pending, never to review.
 *  - At a clean end (drained, stop, store or limiter stop, stg__batch_free
 *    without an end) the claimed-unsent go back to pending in one
 *    statement (stg__store_unclaim), so no job of the run is left inflight.
 *  - A job that is not replay-safe has sent = 1 committed (with its first
 *    attempt counted) from the engine's ATTEMPT_START event, which the
 *    engine emits before the transfer can leave: after a kill it goes to
 *    review, never to pending. (If that one commit fails the run stops at
 *    once; the store refused a write, so nothing more can be promised.)
 *  - The run's counters (calls, retries, 429s, 503s, finished) are added to
 *    its row in the transaction of each outcome and sent-mark: a kill -9
 *    loses only the attempts of the jobs then in flight.
 *  - The in-memory counts move only after the store wrote the same move,
 *    so they equal what the store's connection reads; stg__batch_end checks
 *    it. What the caller is told (b->shown, shown_finished) is their copy
 *    at the last commit: what another connection, or the file after a
 *    kill, holds.
 *  - No signal handling, no output: a stop is a call (stg__batch_stop), and
 *    progress is a snapshot (stg__batch_progress_get).
 *  - Secrets: headers of the config and the secret URLs/headers of
 *    needs_input jobs (from cfg->set, ->secrets or ->cursor) exist only in
 *    memory and in the request; what is stored is the outcome. The engine's events and error
 *    texts are already redacted.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "batch/internal.h"
#include "util/assert.h"
#include "util/clock.h"

/* Claimed ahead: as many as the slots, at most 64; none below 4 slots. */
#define AHEAD_MIN_SLOTS 4
#define AHEAD_MAX 64

static int ahead_for(const stg_batch_config *cfg, int nslots)
{
    if (cfg->source || nslots < AHEAD_MIN_SLOTS)
        return 0;
    return nslots < AHEAD_MAX ? nslots : AHEAD_MAX;
}

const char *stg__batch_cause_name(stg_batch_stop_cause c)
{
    static const char *const names[] = {"running", "drained", "stopped",
                                        "limiter", "store",   "body",
                                        "needs_input"};
    return (unsigned)c < sizeof names / sizeof names[0] ? names[c] : "unknown";
}

/* ---- lifecycle ------------------------------------------------------------------- */

static int fail_new(stg_batch *b, int err, char *buf, size_t len, const char *msg)
{
    if (buf && len)
        snprintf(buf, len, "%s", msg);
    stg__batch_free(b, -1);
    return err;
}

/* Recovery and requeues, then the counts. */
static int start_store(stg_batch *b, const stg_batch_config *cfg, stg_batch_start *st)
{
    int64_t now = stg__store_now_ms();
    int rc = stg__store_recover(b->store, now, &st->recovered_pending, &st->recovered_review);
    if (rc == STG_OK && cfg->retry_deferred)
        rc = stg__store_requeue(b->store, STG_JOB_DEFERRED, now, &st->requeued_deferred);
    if (rc == STG_OK && cfg->retry_review)
        rc = stg__store_requeue(b->store, STG_JOB_REVIEW, now, &st->requeued_review);
    int64_t n[STG_JOB_NSTATES];
    if (rc == STG_OK)
        rc = stg__store_counts(b->store, n);
    if (rc != STG_OK)
        return rc;
    stg__batch_counts_set(&b->counts, n);
    STG_ASSERT(b->counts.n[STG_JOB_INFLIGHT] == 0);
    st->total = b->counts.total;
    return STG_OK;
}

int stg__batch_new(const stg_batch_config *cfg, stg_batch **out, stg_batch_start *start,
                  char *err, size_t errlen)
{
    stg_batch_start scratch;
    stg_batch_start *st = start ? start : &scratch;
    memset(st, 0, sizeof *st);
    if (out)
        *out = NULL;
    if (err && errlen)
        err[0] = '\0';
    if (!cfg || (!cfg->store && !cfg->source) || !out || (cfg->n_headers && !cfg->headers) ||
        cfg->engine.concurrency < 0) {
        if (err && errlen)
            snprintf(err, errlen, "bad batch configuration");
        return STG_EINVAL;
    }
    for (size_t i = 0; i < cfg->n_headers; i++) {
        const char *why = cfg->headers[i] ? stg__batch_header_refused(cfg->headers[i]) : "";
        if (why) {
            if (err && errlen)
                snprintf(err, errlen, "bad batch configuration: header %zu %s", i + 1, why);
            return STG_EINVAL;
        }
    }
    if (cfg->priority < STG_PRIORITY_MIN || cfg->priority > STG_PRIORITY_MAX ||
        (cfg->tenant && *cfg->tenant && stg_tenant_check(cfg->tenant, NULL) != STG_OK) ||
        !(cfg->weight == 0 || (cfg->weight > 0 && cfg->weight <= 1e6))) {
        if (err && errlen)
            snprintf(err, errlen, "bad batch configuration: priority, tenant or weight");
        return STG_EINVAL;
    }
    stg_batch *b = calloc(1, sizeof *b);
    if (!b)
        return fail_new(NULL, STG_ENOMEM, err, errlen, "out of memory");
    b->store = cfg->store;
    b->source = cfg->source;
    b->set = cfg->set;
    b->secrets = cfg->secrets;
    b->cursor = cfg->cursor;
    b->headers = cfg->headers;
    b->n_headers = cfg->n_headers;
    b->priority = cfg->priority;
    b->tenant = cfg->tenant && *cfg->tenant ? cfg->tenant : NULL;
    b->weight = cfg->weight;
    b->out_dir = cfg->out_dir;
    b->out_fd = -1;
    b->nslots = cfg->engine.concurrency ? cfg->engine.concurrency : 30;
    stg_concurrency_config lr; /* a learned concurrency's ceiling is the slot count */
    if (!cfg->engine.concurrency && cfg->engine.learn &&
        stg_concurrency_resolve(cfg->engine.learn, &lr) == STG_OK)
        b->nslots = lr.max_limit;
    if (b->out_dir && (b->out_fd = stg__batch_out_open(b->out_dir)) < 0) {
        char msg[600];
        int e = errno;
        snprintf(msg, sizeof msg, "%s: %s", b->out_dir,
                 e == ELOOP || e == ENOTDIR ? "not a directory (a symbolic link is refused: "
                                              "give the directory it points to)"
                                            : strerror(e));
        return fail_new(b, STG_EINVAL, err, errlen, msg);
    }
    b->start_us = stg__clock_mono_us();
    b->next_save_us = b->start_us + STG_SEC(1);
    if (!(b->slots = calloc((size_t)b->nslots, sizeof *b->slots)))
        return fail_new(b, STG_ENOMEM, err, errlen, "out of memory");
    b->ahead_max = ahead_for(cfg, b->nslots);
    if (!(b->ahead = calloc((size_t)(b->nslots + b->ahead_max), sizeof *b->ahead)))
        return fail_new(b, STG_ENOMEM, err, errlen, "out of memory");
    for (int i = 0; i < b->nslots; i++)
        b->slots[i].b = b;

    /* Jobs about to run that need the input. */
    unsigned mask = 1u << STG_JOB_PENDING | 1u << STG_JOB_INFLIGHT;
    if (cfg->retry_deferred)
        mask |= 1u << STG_JOB_DEFERRED;
    if (cfg->retry_review)
        mask |= 1u << STG_JOB_REVIEW;
    if (b->source) {
        stg__batch_src_counts(b); /* the queue's: jobs live there */
        st->total = b->counts.total;
    } else if (!cfg->set && !cfg->secrets && !cfg->cursor) {
        if (stg__store_count_needs_input(b->store, mask, &st->needs_input) != STG_OK)
            return fail_new(b, STG_EDB, err, errlen, stg__store_errmsg(b->store));
        if (st->needs_input) {
            char msg[160];
            snprintf(msg, sizeof msg, "%lld jobs carry secrets that are not kept in the "
                                      "database: the input is needed",
                     (long long)st->needs_input);
            return fail_new(b, STG_ESTATE, err, errlen, msg);
        }
    }
    if (!b->source && start_store(b, cfg, st) != STG_OK)
        return fail_new(b, STG_EDB, err, errlen, stg__store_errmsg(b->store));

    stg_engine_config ec = cfg->engine;
    ec.concurrency = b->nslots;
    b->user_event = ec.on_event;
    b->user_event_data = ec.event_data;
    ec.on_event = stg__batch_on_event;
    ec.event_data = b;
    int eerr = 0;
    if (!(b->engine = stg_engine_new(&ec, &eerr))) {
        char msg[160];
        snprintf(msg, sizeof msg, "cannot start the HTTP engine: %s", stg_strerror(eerr));
        return fail_new(b, eerr == STG_EINVAL ? STG_EINVAL : STG_ENOMEM, err, errlen, msg);
    }
    if (!b->source && stg__store_run_begin(b->store, stg__store_now_ms(), &b->run_id) != STG_OK)
        return fail_new(b, STG_EDB, err, errlen, stg__store_errmsg(b->store));
    if (!b->source)
        stg__store_group(b->store, true); /* commits when needed (stg__batch_flush) */
    stg__batch_committed(b); /* what start_store read is what the file holds */
    *out = b;
    return STG_OK;
}

void stg__batch_stop(stg_batch *b)
{
    if (!b || b->stopping)
        return;
    b->stopping = true;
    if (b->cause == STG_BATCH_RUNNING)
        b->cause = STG_BATCH_STOPPED;
}

void stg__batch_drain(stg_batch *b)
{
    if (b)
        b->drained = true; /* refill claims nothing more; step ends at active == 0 */
}

bool stg__batch_step(stg_batch *b, int64_t timeout_us)
{
    if (b->ended)
        return false;
    if (b->stopping && !b->cancelled && b->active > 0) {
        b->cancelled = true;
        stg_engine_cancel_all(b->engine); /* done callbacks put the jobs back */
    }
    if (b->source && b->source->tick && !b->stopping) {
        int trc = b->source->tick(b->source->ctx);
        if (trc != STG_OK)
            stg__batch_stop_for(b, trc == STG_EUNAVAIL ? STG_BATCH_LIMITER : STG_BATCH_STORE,
                                "%s", stg__batch_src_errmsg(b));
    }
    stg__batch_refill(b);
    if (b->stopping && !b->cancelled && b->active > 0) {
        b->cancelled = true; /* a stop raised while submitting */
        stg_engine_cancel_all(b->engine);
    }
    if (b->active == 0 && (b->drained || b->stopping || (b->exhausted && b->n_ahead == 0))) {
        b->ended = true;
        if (b->cause == STG_BATCH_RUNNING)
            b->cause = STG_BATCH_DRAINED;
        stg__batch_unclaim_ahead(b); /* never sent: pending again */
        stg__batch_flush(b);
        return false;
    }
    /* Jobs the source found taken over by another worker: cancelled
     * before a pass can send them again (their admission waits meanwhile,
     * queue_source.c). */
    for (int i = 0; i < b->nslots && b->active > 0 && b->source; i++)
        if (b->slots[i].used && (b->slots[i].lost ||
                                 stg__batch_src_may_send(b, &b->slots[i].job) != STG_OK)) {
            b->slots[i].lost = true;
            stg_engine_cancel(b->engine, b->slots[i].req_id);
        }
    /* The claims just written are committed before the first send of one
     * of them (commit.c, from finish.c's ATTEMPT_START), with every write
     * before it. */
    stg_engine_run(b->engine, timeout_us);
    stg__batch_after_step(b); /* commit.c: unsafe outcomes, the 20 ms flush */
    /* Attempts started in the pass for jobs the source says are no longer
     * ours (finish.c): still unsent, cancelled now, before a pass sends them. */
    for (int i = 0; i < b->nslots && b->active > 0; i++)
        if (b->slots[i].used && b->slots[i].lost)
            stg_engine_cancel(b->engine, b->slots[i].req_id);
    if (b->stopping && !b->cancelled && b->active > 0) {
        /* A store that failed in the pass (the claims' commit at a start):
         * the requests started are still unsent, and go back unsent. */
        b->cancelled = true;
        stg_engine_cancel_all(b->engine);
    }
    int64_t now = stg__clock_mono_us();
    if (now >= b->next_save_us && b->source) {
        stg__batch_src_counts(b); /* the whole queue, for the progress */
        b->next_save_us = now + STG_MS(500);
    } else if (now >= b->next_save_us && !b->store_failed) {
        /* The wall time, so a killed run still has one; the counters are
         * committed with the outcomes. A failure here is not fatal: the
         * next outcome's commit says what is wrong. */
        stg_engine_stats es;
        stg_engine_stats_get(b->engine, &es);
        stg_run_stats rs = {.wall_ms = (now - b->start_us) / 1000,
                            .exit_code = -1,
                            .concurrency = es.concurrency_limit};
        (void)stg__store_run_update(b->store, b->run_id, &rs);
        b->next_save_us = now + STG_SEC(1);
    }
    return true;
}

void stg__batch_progress_get(const stg_batch *b, stg_batch_progress *p)
{
    memset(p, 0, sizeof *p);
    /* The store: as of the last commit, what a kill -9 would leave. */
    p->counts = b->source ? b->counts : b->shown;
    p->finished = b->source ? b->finished : b->shown_finished;
    p->claims = b->claims;
    p->in_flight = b->active;
    p->cause = b->ended ? b->cause : STG_BATCH_RUNNING;
    stg_engine_stats es;
    stg_engine_stats_get(b->engine, &es);
    p->attempts = es.attempts;
    p->retries = es.retries;
    p->status_429 = es.status_429;
    p->status_503 = es.status_503;
    p->concurrency_limit = es.concurrency_limit;
}

size_t stg__batch_class_stats(const stg_batch *b, stg_class_stats *out, size_t max)
{
    return b && b->engine ? stg_engine_class_stats(b->engine, out, max) : 0;
}

int stg__batch_class_rows(const stg_batch *b, stg_run_class **v, size_t *n)
{
    *v = NULL;
    *n = stg__batch_class_stats(b, NULL, 0);
    if (!*n)
        return STG_OK;
    stg_class_stats *st = calloc(*n, sizeof *st);
    if (st && !(*v = calloc(*n, sizeof **v)))
        free(st), st = NULL;
    if (!st) {
        *n = 0;
        return STG_ENOMEM;
    }
    *n = stg__batch_class_stats(b, st, *n);
    for (size_t i = 0; i < *n; i++)
        (*v)[i] = (stg_run_class){stg_priority_name(st[i].priority), st[i].tenant,
                                  (int64_t)st[i].admitted, st[i].wait_us / 1000,
                                  st[i].wait_max_us / 1000};
    free(st);
    return STG_OK;
}

int stg__batch_end(stg_batch *b, stg_batch_summary *s)
{
    memset(s, 0, sizeof *s);
    if (!b->ended) {
        /* Called early: stop, and let the engine put everything back. */
        stg__batch_stop(b);
        while (stg__batch_step(b, STG_MS(100)))
            ;
    }
    STG_ASSERT(b->active == 0);
    if (!b->source && !b->store_failed && stg__store_group(b->store, false) != STG_OK)
        stg__batch_store_failed(b);
    if (!b->source && !b->store_failed)
        stg__batch_committed(b);
    s->cause = b->cause;
    s->finished = b->source ? b->finished : b->shown_finished;
    snprintf(s->message, sizeof s->message, "%s", b->msg);
    if (b->store_failed) {
        s->counts = b->shown; /* what the last commit holds */
        return STG_EDB;
    }
    if (b->source) {
        stg__batch_src_counts(b); /* read back: what the queue holds now */
        s->counts = b->counts;
        return STG_OK;
    }
    /* Every request ended and its outcome is committed: nothing of this run
     * is inflight. A job still so (a bug, or an edit) is put back. */
    int back = 0, review = 0;
    int rc = STG_OK;
    if (b->counts.n[STG_JOB_INFLIGHT] > 0)
        rc = stg__store_recover(b->store, stg__store_now_ms(), &back, &review);
    int64_t n[STG_JOB_NSTATES];
    if (rc == STG_OK)
        rc = stg__store_counts(b->store, n);
    if (rc != STG_OK) {
        s->cause = STG_BATCH_STORE;
        snprintf(s->message, sizeof s->message, "%s", stg__store_errmsg(b->store));
        s->counts = b->counts;
        return STG_EDB;
    }
    s->requeued = back + review;
    stg__batch_counts_set(&s->counts, n);
    STG_ASSERT(s->counts.total == b->counts.total);
    STG_ASSERT(s->counts.n[STG_JOB_INFLIGHT] == 0);
    STG_ASSERT(back + review > 0 ||
               !memcmp(s->counts.n, b->counts.n, sizeof s->counts.n));
    b->counts = s->counts;
    return STG_OK;
}

void stg__batch_free(stg_batch *b, int exit_code)
{
    if (!b)
        return;
    /* Where a learned concurrency ended, for the run's row (report). */
    stg_engine_stats es = {0};
    if (b->engine)
        stg_engine_stats_get(b->engine, &es);
    /* Cancels what is left: the done callbacks put those jobs back (or,
     * with a failed store, leave them inflight for the next open). */
    stg_engine_free(b->engine);
    b->engine = NULL;
    if (b->ahead)
        stg__batch_unclaim_ahead(b); /* freed without an end: never sent, back */
    /* The outcomes of the cancelled requests (after a failure: nothing is
     * open, the failure rolled the group back). */
    if (!b->source && stg__store_group(b->store, false) != STG_OK)
        b->store_failed = true;
    if (b->run_id > 0 && !b->source) {
        stg_run_stats rs = {.wall_ms = (stg__clock_mono_us() - b->start_us) / 1000,
                            .exit_code = exit_code,
                            .concurrency = es.concurrency_limit};
        (void)stg__store_run_update(b->store, b->run_id, &rs); /* the counters are in already */
    }
    for (int i = 0; b->slots && i < b->nslots; i++)
        stg__job_clear(&b->slots[i].job);
    stg__batch_series_free(b);
    free(b->slots);
    free(b->ahead);
    if (b->out_fd >= 0)
        close(b->out_fd);
    free(b);
}

stg_engine *stg__batch_engine(stg_batch *b)
{
    return b ? b->engine : NULL;
}
