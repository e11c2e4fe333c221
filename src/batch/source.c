/*
 * The job source seam: where the runner's jobs come from and where their
 * outcomes go. The store (SQLite, one machine), or a stg_batch_source (the
 * Redis work queue, many machines). runner.c, submit.c and finish.c call
 * only these, so the loop, the slots and the states are the same for both.
 *
 * Invariants:
 *  - With the store, the in-memory counts move only after the store
 *    committed the same move (counts.c asserts they add up); with a
 *    source they are the source's (the whole queue, all workers), read
 *    back, never moved here: other workers move them too.
 *  - A source's error codes keep their meaning (STG_EUNAVAIL: the backend
 *    is away; anything else: it failed); the store's are all STG_EDB.
 */
#include <string.h>

#include "batch/internal.h"
#include "util/assert.h"

int stg__batch_src_claim(stg_batch *b, int max, stg_job *out, int *n, bool *more)
{
    *n = 0;
    if (b->source) {
        int rc = b->source->claim(b->source->ctx, max, out, n, more);
        STG_ASSERT(*n >= 0 && *n <= max);
        return rc;
    }
    int rc = stg__store_claim(b->store, max, b->run_id, stg__store_now_ms(), out, n);
    /* Nothing becomes pending during a run, except at a stop. */
    *more = rc == STG_OK && *n == max;
    return rc == STG_OK ? STG_OK : STG_EDB;
}

int stg__batch_src_finish(stg_batch *b, const stg_job *j, stg_job_outcome *o)
{
    if (b->source)
        return b->source->finish(b->source->ctx, j, o);
    o->run_id = b->run_id;
    return stg__store_finish(b->store, j->id, o, stg__store_now_ms()) == STG_OK ? STG_OK : STG_EDB;
}

int stg__batch_src_mark_sent(stg_batch *b, const stg_job *j)
{
    if (b->source)
        return b->source->mark_sent(b->source->ctx, j);
    return stg__store_mark_sent(b->store, j->id, b->run_id) == STG_OK ? STG_OK : STG_EDB;
}

int stg__batch_src_may_send(stg_batch *b, const stg_job *j)
{
    if (b->source && b->source->may_send)
        return b->source->may_send(b->source->ctx, j);
    return STG_OK;
}

const char *stg__batch_src_errmsg(stg_batch *b)
{
    if (b->source)
        return b->source->errmsg(b->source->ctx);
    return stg__store_errmsg(b->store);
}

void stg__batch_src_counts(stg_batch *b)
{
    if (!b->source)
        return;
    int64_t n[STG_JOB_NSTATES];
    memset(n, 0, sizeof n);
    b->source->counts(b->source->ctx, n);
    stg__batch_counts_set(&b->counts, n);
}
