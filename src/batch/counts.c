/*
 * Jobs per state, as the runner keeps them in memory beside the store.
 *
 * Invariants:
 *  - The counts always add up to total: a job only moves, it never appears
 *    or vanishes (the store's job count check says the same of the file).
 *  - A move takes a job from a state that has one: the runner moves a job
 *    only after the store committed that very move, so the in-memory
 *    counts equal the store's at every commit (stg__batch_end asserts it).
 */
#include <string.h>

#include "batch/batch.h"
#include "util/assert.h"

static int64_t sum(const stg_batch_counts *c)
{
    int64_t t = 0;
    for (int i = 0; i < STG_JOB_NSTATES; i++)
        t += c->n[i];
    return t;
}

int64_t stg__batch_counts_ended(const stg_batch_counts *c)
{
    return c->n[STG_JOB_DONE] + c->n[STG_JOB_FAILED] + c->n[STG_JOB_DEFERRED] +
           c->n[STG_JOB_REVIEW];
}

int64_t stg__batch_counts_left(const stg_batch_counts *c)
{
    return c->n[STG_JOB_PENDING] + c->n[STG_JOB_INFLIGHT];
}

void stg__batch_counts_move(stg_batch_counts *c, stg_job_state from, stg_job_state to)
{
    STG_ASSERT((unsigned)from < STG_JOB_NSTATES && (unsigned)to < STG_JOB_NSTATES);
    STG_ASSERT(c->n[from] > 0);
    c->n[from]--;
    c->n[to]++;
    STG_ASSERT(sum(c) == c->total);
}

void stg__batch_counts_set(stg_batch_counts *c, const int64_t n[STG_JOB_NSTATES])
{
    memcpy(c->n, n, sizeof c->n);
    c->total = sum(c);
}
