/*
 * The run's per-second series (issue #36), gathered from the engine's
 * events and written to the store (store/series.c) at the commits the
 * batch makes anyway, for `stagger batch report --html`.
 *
 * Invariants:
 *  - no commit of its own, no write on the send path beyond the rows a
 *    flush already commits: stg__batch_series_write runs inside
 *    stg__batch_flush, just before its commit, writes only when the group
 *    holds other writes to commit (stg__store_pending) and only seconds
 *    that are over (all of them once the run stops, drains or ends);
 *    a run with nothing else to commit for SERIES_PENDING / 2 seconds
 *    (all of them waits) commits its rows then, once;
 *  - the memory is bounded: one open row plus at most SERIES_PENDING
 *    closed rows not yet written (a store that failed writes nothing
 *    more; rows beyond that are dropped, never grown);
 *  - a row's second is the event's wall clock second (a wait is counted
 *    in the second it ended, all of it); a queue source (b->source) has no
 *    database: nothing is kept.
 */
#include <stdlib.h>
#include <string.h>

#include "batch/internal.h"
#include "store/store.h"

#define SERIES_PENDING 64

struct stg__batch_series {
    stg_store_second open;            /* the second being gathered (t_s 0: none) */
    stg_store_second done[SERIES_PENDING];
    int n_done;
};

static int reason_of(const char *why)
{
    for (int k = 0; why && k < STG_STORE_WAIT_REASONS; k++)
        if (!strcmp(why, stg_store_wait_reasons[k]))
            return k;
    return -1;
}

static void close_open(struct stg__batch_series *z)
{
    if (z->open.t_s && z->n_done < SERIES_PENDING)
        z->done[z->n_done++] = z->open;
    memset(&z->open, 0, sizeof z->open);
}

void stg__batch_series_see(stg_batch *b, const stg_event *ev)
{
    if (b->source || b->store_failed || ev->type == STG_EVENT_BREAKER)
        return;
    if (!b->series && !(b->series = calloc(1, sizeof *b->series)))
        return; /* out of memory: the run goes on without its series */
    struct stg__batch_series *z = b->series;
    int64_t t = (ev->wall_us > 0 ? ev->wall_us / 1000 : stg__store_now_ms()) / 1000;
    if (z->open.t_s && t > z->open.t_s)
        close_open(z);
    if (!z->open.t_s)
        z->open.t_s = t;
    /* An event of an earlier second than the open one (clocks of threads,
     * a wall clock set back) is counted in the open second. */
    stg_store_second *r = &z->open;
    if (ev->type == STG_EVENT_ATTEMPT_START)
        r->attempts++;
    else if (ev->type == STG_EVENT_ATTEMPT_END) {
        r->n429 += ev->status == 429;
        r->n503 += ev->status == 503;
    } else if (ev->type == STG_EVENT_WAITED && ev->more) {
        int k = reason_of(ev->more->waited_for);
        if (k >= 0 && ev->wait_us > 0)
            r->wait_us[k] += ev->wait_us;
    }
    /* The largest of the second's events (of any host: one series a run). */
    if (ev->more && ev->more->learned_rate > r->learned_rate)
        r->learned_rate = ev->more->learned_rate;
    if (ev->concurrency_limit > r->concurrency)
        r->concurrency = ev->concurrency_limit;
}

void stg__batch_series_write(stg_batch *b)
{
    struct stg__batch_series *z = b->series;
    if (!z || b->source || b->store_failed || b->run_id <= 0)
        return;
    /* The open second is written once the run stops adding to it. */
    if (b->ended || b->stopping || b->drained ||
        (z->open.t_s && stg__store_now_ms() / 1000 > z->open.t_s))
        close_open(z);
    if (!z->n_done)
        return;
    /* Only with a commit that happens anyway (the group holds other
     * writes), or at the end, or once half the room is used (a run with
     * nothing else to commit for 32 s: one commit then). */
    if (!stg__store_pending(b->store) && !(b->ended || b->stopping || b->drained) &&
        z->n_done < SERIES_PENDING / 2)
        return;
    if (stg__store_series_add(b->store, b->run_id, z->done, (size_t)z->n_done, NULL) != STG_OK) {
        stg__batch_store_failed(b);
        return;
    }
    z->n_done = 0;
}

void stg__batch_series_free(stg_batch *b)
{
    free(b->series);
    b->series = NULL;
}
