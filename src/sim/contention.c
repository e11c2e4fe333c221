/*
 * Scenario "contention": the model of the AWS Architecture Blog post
 * "Exponential Backoff and Jitter" (2015). N clients each make one
 * optimistic-concurrency write to one shared row: read the version, write
 * with it; the write succeeds only if the row is still at that version, and
 * then bumps it. Every message leg takes |Normal(10 ms, 2 ms)|. On a failed
 * write (409) the client asks stg_decide, which backs off by the strategy
 * (base 5 ms, cap 2 s, no attempt limit, no deadline), and then sends its
 * next read. "calls" counts writes; "total_ms" is when the last client's
 * write was acknowledged.
 *
 * Events (two per attempt): READ arrives at the row (the version is taken
 * then) and WRITE arrives at the row (judged then). The client's side needs
 * no events of its own: it holds no shared state, so the time its reply
 * arrives is computed where the reply is sent.
 */
#include <stdlib.h>

#include "client.h"
#include "evq.h"
#include "scenario.h"
#include "server.h"

enum { EV_READ = 0, EV_WRITE = 1, EV_KINDS = 2 };

typedef struct occ_client {
    uint64_t version;
    stg_retry_state st;
} occ_client;

int sim_contention_trial(const sim_opts *o, sim_row *row, uint64_t seed, bool chart)
{
    stg_policy p;
    if (sim_strategy_policy(o, row->strategy, -1, &p) != STG_OK)
        return STG_EINVAL;
    size_t n = (size_t)row->clients;
    if (n < 1 || n * EV_KINDS > SIM_EVQ_WHO_MAX)
        return STG_EINVAL;
    sim_net net;
    stg_rng cr;
    sim_net_init(&net, &o->delay, sim_seed_mix(seed, 1));
    stg_rng_seed(&cr, sim_seed_mix(seed, 2));
    occ_client *cl = calloc(n, sizeof *cl);
    sim_evq q = {0};
    sim_log arr = {0};
    sim_occ_row store = {0};
    int rc = STG_ENOMEM;
    if (!cl || sim_evq_init(&q, n, 0) != 0 || sim_log_init(&arr, n * 4 + 16) != 0)
        goto done;
    for (uint32_t i = 0; i < n; i++) {
        cl[i].st.attempts = 1;
        sim_evq_push(&q, sim_net_leg(&net), i * EV_KINDS + EV_READ);
    }
    uint64_t writes = 0, failed = 0;
    int64_t total = 0;
    int64_t t;
    uint32_t who;
    while (sim_run_next(&q, &t, &who, &failed)) {
        occ_client *c = &cl[who / EV_KINDS];
        if (who % EV_KINDS == EV_READ) {
            c->version = sim_occ_read(&store);
            /* reply leg, then the write's leg */
            int64_t w = t + o->server_us + sim_net_leg(&net) +
                        sim_net_leg(&net);
            sim_evq_replace_top(&q, w, who + 1);
            continue;
        }
        writes++;
        if (sim_log_add(&arr, t) != 0)
            goto done;
        bool ok = sim_occ_write(&store, c->version);
        int64_t back = t + o->server_us + sim_net_leg(&net);
        if (ok) {
            if (back > total)
                total = back;
            sim_evq_pop(&q);
            continue;
        }
        stg_decision d;
        sim_decide(&p, &c->st, STG_METHOD_PUT, 409, -1, back, &cr, &d);
        if (d.action != STG_ACTION_RETRY) {
            failed++;
            if (back > total)
                total = back;
            sim_evq_pop(&q);
            continue;
        }
        c->st.attempts++;
        int64_t next = back + d.wait_us + sim_net_leg(&net);
        sim_evq_replace_top(&q, next, who - 1);
    }
    if (q.oom)
        goto done;
    sim_row_add(row, "calls", (double)writes);
    sim_row_add(row, "total_ms", (double)total / 1e3);
    sim_row_add(row, "failed", (double)failed);
    size_t mem = n * sizeof *cl + sim_evq_bytes(&q) + arr.cap * sizeof(int64_t);
    if (mem > row->mem_bytes)
        row->mem_bytes = mem;
    rc = chart ? sim_row_set_bins(row, &arr, o->bin_us) : STG_OK;
done:
    free(cl);
    sim_evq_free(&q);
    sim_log_free(&arr);
    return rc;
}
