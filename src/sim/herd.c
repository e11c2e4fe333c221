/*
 * Scenario "herd": N clients start together; the server answers each
 * client's first K attempts with 429 (no Retry-After), then 200. Every
 * client retries by its strategy's backoff through stg_decide.
 *
 * Figures per strategy: the span of each round (first to last arrival of
 * attempt r + 1; round 0 is the first attempt, round r the r-th retry), the
 * most retries arriving in any `window` (half-open, sliding; the first
 * attempts are left out: they coincide by construction), the time until
 * every client has its 200 (or gave up), and the calls.
 *
 * Hot loop: the server is stateless per client and the client's decision
 * depends only on its own state, so one event per attempt suffices: at a
 * request's arrival the reply, the decision and the next arrival are all
 * computed, and the next arrival replaces the current event. The client's
 * attempt count rides in the event itself (who = client << 5 | attempts),
 * so the only per-client memory is the previous wait, read only by
 * decorrelated jitter (the one kind whose bounds use it: backoff.h).
 * Arrivals come out of the queue in time order, so every figure is kept
 * online (round spans, a sliding window, chart bins): no arrival log.
 */
#include <stdlib.h>
#include <string.h>

#include "client.h"
#include "evq.h"
#include "scenario.h"
#include "server.h"

#define ROUND_BITS 5
#define ROUND_MASK ((1u << ROUND_BITS) - 1)

/* Largest herd: the client number shares `who` with the attempt count. */
#define HERD_MAX_CLIENTS ((int)(SIM_EVQ_WHO_MAX >> ROUND_BITS))
_Static_assert(HERD_MAX_CLIENTS == SIM_HERD_MAX_CLIENTS, "herd client limit");

int sim_herd_trial(const sim_opts *o, sim_row *row, uint64_t seed, bool chart)
{
    stg_policy p;
    if (sim_strategy_policy(o, row->strategy, -1, &p) != STG_OK)
        return STG_EINVAL;
    size_t n = (size_t)row->clients;
    int k = o->fail_first;
    if (n < 1 || n > (size_t)HERD_MAX_CLIENTS || k < 0 || k + 1 > (int)ROUND_MASK)
        return STG_EINVAL;
    int rounds = k + 1;
    bool need_prev = p.backoff.kind == STG_BACKOFF_DECORRELATED;
    sim_net net;
    stg_rng cr;
    sim_net_init(&net, &o->delay, sim_seed_mix(seed, 1));
    stg_rng_seed(&cr, sim_seed_mix(seed, 2));

    int64_t rmin[SIM_MAX_ROUNDS], rmax[SIM_MAX_ROUNDS];
    for (int r = 0; r < rounds; r++) {
        rmin[r] = INT64_MAX;
        rmax[r] = INT64_MIN;
    }
    int64_t *prev = need_prev ? calloc(n, sizeof *prev) : NULL;
    sim_evq q = {0};
    sim_window win = {0};
    sim_bins bins = {0};
    int rc = STG_ENOMEM;
    if ((need_prev && !prev) || sim_evq_init(&q, n, 0) != 0 ||
        sim_window_init(&win, o->window_us, 256) != 0 ||
        (chart && sim_bins_init(&bins, o->bin_us, 1024) != 0))
        goto done;

    for (uint32_t i = 0; i < n; i++)
        sim_evq_push(&q, sim_net_leg(&net), i << ROUND_BITS | 1u);
    uint64_t calls = 0, failed = 0;
    int64_t total = 0;
    int64_t t;
    uint32_t who;
    while (sim_run_next(&q, &t, &who, &failed)) {
        uint32_t i = who >> ROUND_BITS;
        int attempts = (int)(who & ROUND_MASK);
        int round = attempts - 1;
        if ((round > 0 && sim_window_add(&win, t) != 0) || (chart && sim_bins_add(&bins, t) != 0))
            goto done;
        calls++;
        if (t < rmin[round])
            rmin[round] = t;
        if (t > rmax[round])
            rmax[round] = t;
        int64_t back = t + o->server_us + sim_net_leg(&net);
        int status = sim_herd_server_status(round, k);
        stg_decision d;
        if (status != 200) {
            stg_retry_state st = {.attempts = attempts, .start_us = 0,
                                  .prev_wait_us = need_prev ? prev[i] : 0};
            sim_decide(&p, &st, STG_METHOD_GET, status, -1, back, &cr, &d);
            if (d.action == STG_ACTION_RETRY && attempts < (int)ROUND_MASK) {
                if (need_prev)
                    prev[i] = st.prev_wait_us;
                sim_evq_replace_top(&q, back + d.wait_us + sim_net_leg(&net),
                                    i << ROUND_BITS | (uint32_t)(attempts + 1));
                continue;
            }
            failed++;
        }
        if (back > total)
            total = back;
        sim_evq_pop(&q);
    }
    if (q.oom)
        goto done;

    sim_row_add(row, "calls", (double)calls);
    sim_row_add(row, "total_ms", (double)total / 1e3);
    sim_row_add(row, "max_in_window", (double)win.best);
    sim_row_add(row, "failed", (double)failed);
    if (row->nrounds < rounds)
        row->nrounds = rounds;
    for (int r = 0; r < rounds; r++)
        sim_stat_add(&row->rounds[r], rmax[r] >= rmin[r] ? (double)(rmax[r] - rmin[r]) / 1e3 : 0.0);
    size_t mem = (need_prev ? n * sizeof *prev : 0) + sim_evq_bytes(&q) +
                 win.cap * sizeof *win.v + bins.cap * sizeof *bins.b;
    if (mem > row->mem_bytes)
        row->mem_bytes = mem;
    if (chart)
        sim_row_take_bins(row, &bins);
    rc = STG_OK;
done:
    free(prev);
    sim_evq_free(&q);
    sim_window_free(&win);
    sim_bins_free(&bins);
    return rc;
}
