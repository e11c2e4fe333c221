/*
 * Private to src/batch: the runner's handle and its slots, shared by
 * runner.c (lifecycle and the loop), submit.c (claim and submit) and
 * finish.c (outcomes, the sent-mark, stops). Nothing outside src/batch
 * includes this.
 *
 * Invariants: a slot is used from the submit of its claimed job until the
 * done callback of its request has committed (or skipped, with a failed
 * store) the job's outcome; active counts the used slots; sent, committed,
 * n429 and n503 describe the current request of a used slot only.
 */
#ifndef STAGGER_BATCH_INTERNAL_H
#define STAGGER_BATCH_INTERNAL_H

#include "batch/batch.h"
typedef struct stg_batch_slot {
    bool used;
    bool sent;             /* an attempt started (recorded for non-replay-safe jobs) */
    int committed;         /* attempts already counted in the store (the sent-mark) */
    int n429, n503;        /* attempts of this run answered so */
    uint64_t req_id;
    stg_job job;
    stg_batch *b;
} stg_batch_slot;

struct stg_batch {
    stg_store *store;
    const stg_job_set *set;
    const stg_input_secrets *secrets;
    stg_input_cursor *cursor;
    const char *const *headers;
    size_t n_headers;
    const char *out_dir;
    stg_event_fn user_event;
    void *user_event_data;
    stg_engine *engine;
    stg_batch_slot *slots;
    int nslots, active;
    int64_t run_id;
    stg_batch_counts counts;
    int64_t finished;
    bool drained;        /* no pending job left to claim */
    bool stopping;       /* stop or a fatal cause: no new claims */
    bool cancelled;      /* cancel_all done */
    bool store_failed;   /* no more writes: the next open recovers */
    bool ended;
    stg_batch_stop_cause cause; /* first cause of a stop; RUNNING: none yet */
    char msg[800];
    int64_t start_us, next_save_us;
};

/* Stop for cause (the first cause wins; STORE also stops all writes). */
void stg__batch_stop_for(stg_batch *b, stg_batch_stop_cause cause, const char *fmt,
                         const char *arg);
/* Stop because the store failed (its message). */
void stg__batch_store_failed(stg_batch *b);
/* Commit o for the slot's job (skipped once the store failed); the counts
 * follow only a committed move. */
void stg__batch_commit(stg_batch *b, stg_batch_slot *sl, stg_job_outcome *o);
/* Free the slot. */
void stg__batch_release(stg_batch *b, stg_batch_slot *sl);
/* The engine's callbacks (finish.c). */
void stg__batch_on_done(stg_engine *e, uint64_t id, const stg_result *res, void *data);
void stg__batch_on_event(const stg_event *ev, void *data);
/* Claim pending jobs for the free slots and submit them (submit.c). */
void stg__batch_refill(stg_batch *b);

#endif
