/*
 * A spent retry budget, with budget_wait (stg_engine_config): the waits of
 * the retries it refuses.
 *
 * The budget refuses retries once failures are more than a small share of
 * a host's answers. Without budget_wait the refused retry gives up
 * (BUDGET_EXHAUSTED). With it the retry waits: after its backoff it goes
 * if the budget has refilled, or with the host's one pass (over_budget):
 * the request holding it keeps it through its own retries and backoffs
 * until it ends (a success, a final failure, its deadline), and then the
 * oldest held request takes it. The others are held until then. A host
 * whose every request failed therefore still makes progress, sending one
 * request per backoff interval of the pass holder (the breaker, when on,
 * stops even that while open), and its retries cannot multiply the load.
 * Held requests sit in the timer heap until their deadline, so a deadline
 * still ends them.
 *
 * Invariants: a held request is in the timer heap as W_BUDGET_HELD and
 * counted in its host's budget_held; at most one over-budget retry per
 * host is out (over_budget_out) while the budget refuses.
 */
#include <stdlib.h>

#include "curl/engine.h"

/* A W_BUDGET or W_BUDGET_HELD request is due, or was woken: send it,
 * hold it, or end it at its deadline. */
void stg__eng_budget_gate(stg_engine *e, req *r)
{
    stg__host *h = r->host;
    int64_t left = stg__eng_remaining(e, r);
    if (left <= 0) {
        stg__eng_finish(e, r, STG_REASON_DEADLINE);
        return;
    }
    if (!stg_budget_allow_retry(&h->budget)) {
        if (h->over_budget_out > 0) {
            h->budget_held++;
            stg__eng_schedule(e, r, W_BUDGET_HELD, left);
            return;
        }
        r->over_budget = true;
        h->over_budget_out++;
    }
    stg__eng_requeue(e, r, false);
}

/* Wake h's held retries: all of them when the budget has refilled, else
 * the oldest (as the over-budget one) when no over-budget retry is out.
 * They go to the retry queue, whose admission checks their deadline: this
 * runs inside stg__eng_finish() and attempt_done(), where finishing another
 * request (and running its callback) is not safe. */
void stg__eng_budget_release(stg_engine *e, stg__host *h)
{
    if (!h->budget_held)
        return;
    bool all = stg_budget_allow_retry(&h->budget);
    if (!all && h->over_budget_out > 0)
        return;
    req **w = malloc(h->budget_held * sizeof *w);
    if (!w)
        return; /* they still end at their deadline */
    size_t n = 0;
    for (size_t i = 0; i < e->timers.n && n < h->budget_held; i++) {
        req *r = e->timers.v[i].item;
        if (r->wait == W_BUDGET_HELD && r->host == h) {
            if (all || !n)
                w[n++] = r;
            else if (r->id < w[0]->id)
                w[0] = r;
        }
    }
    if (!all && n)
        n = 1;
    for (size_t i = 0; i < n; i++) {
        stg__eng_untimer(e, w[i]);
        h->budget_held--;
        if (!all) {
            w[i]->over_budget = true;
            h->over_budget_out++;
        }
        stg__eng_requeue(e, w[i], false);
    }
    free(w);
}

