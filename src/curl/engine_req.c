/*
 * Where a request is: the new and retry queues, the easy-handle pool, the
 * events it emits, and detach (leave whatever place it is in). See
 * engine.h for the one-place rule, engine_state.c for the moves.
 *
 * Invariants: detach leaves r in RQ_NONE with no slot, no reservation, no
 * heap entry, no easy handle and out of its host's pace queue and every
 * fair queue; a pooled
 * easy handle has been curl_easy_reset (no callback or pointer of the
 * request that used it), and at most `concurrency` are kept.
 *
 * Memory (docs/ARCHITECTURE.md): a request holds an easy handle only on
 * the wire (ACTIVE), so one waiting costs its struct, URL and headers; it
 * points at the engine's policy unless it has its own, and has a quota
 * ticket allocated only while one holds something (never in a wait
 * entered without one). Asserted with the places in stg__eng_check.
 */
#include <stdlib.h>
#include <string.h>

#include "curl/engine.h"

/* ---- places --------------------------------------------------------------- */

void stg__eng_check(const stg_engine *e, const req *r)
{
    (void)e;
    (void)r;
    STG_ASSERT((r->where == RQ_TIMER) == (r->heap_index != STG__NOT_IN_HEAP));
    STG_ASSERT((r->where == RQ_ACTIVE) == (r->easy != NULL));
    STG_ASSERT(!r->reserved || r->where == RQ_PACE_Q ||
               (r->where == RQ_TIMER && (r->wait == W_LIMITER || r->wait == W_PACE)));
    STG_ASSERT(r->where != RQ_PACE_Q || (r->pacing && r->reserved));
    STG_ASSERT(r->where != RQ_CONC_Q || (!r->conc_held && !r->reserved && !r->pacing));
    STG_ASSERT(r->where != RQ_TIMER || r->wait != W_QUOTA_Q ||
               (!r->conc_held && !r->reserved && !r->pacing && r->quota_waiting &&
                r->qq->head != r));
    /* Its turn at its host's quotas: in their fair queue exactly while it
     * waits for them, never holding a reservation of them. */
    STG_ASSERT((r->qfq.flow != NULL) == r->quota_waiting);
    STG_ASSERT((r->qq != NULL) == r->quota_waiting);
    STG_ASSERT(!r->quota_waiting || !r->quota_held);
    /* One fair queue at a time (engine.h): its item is in use exactly in
     * NEW_Q, CONC_Q, or while pacing. */
    STG_ASSERT((r->fq.flow != NULL) ==
               (r->where == RQ_NEW_Q || r->where == RQ_CONC_Q || r->pacing));
    STG_ASSERT(!r->conc_held || r->host->conc_out > 0);
    STG_ASSERT(!r->qt || r->quota_held);
    STG_ASSERT(!r->sq || r->quota_held);
    STG_ASSERT(r->pol == &e->pol || r->pol == r->own_pol);
    STG_ASSERT(e->active >= 0 && e->reserved >= 0 &&
               e->active + e->reserved <= e->concurrency);
}

/* ---- queues ------------------------------------------------------------ */

bool stg__eng_fq_join(stg__fairq **fq, req *r)
{
    if (!*fq) {
        if (!(*fq = malloc(sizeof **fq)))
            return false;
        stg__fq_init(*fq, 0);
    }
    stg_class c = req_class(r);
    return stg__fq_push(*fq, &r->fq, &c) == STG_OK;
}

void stg__eng_q_push(queue *q, req *r)
{
    stg__list_push_back(q, &r->q_link);
}

void stg__eng_q_push_front(queue *q, req *r)
{
    stg__list_push_front(q, &r->q_link);
}

void stg__eng_q_unlink(queue *q, req *r)
{
    stg__list_unlink(q, &r->q_link);
}

/* ---- events ------------------------------------------------------------- */

/* ---- where the time goes ------------------------------------------------ */

static const char *const acct_names[] = {
    [ACCT_SLOT] = "slot",       [ACCT_LIMITER] = "limiter",         [ACCT_QUOTA] = "quota",
    [ACCT_PACE] = "pace",       [ACCT_CONCURRENCY] = "concurrency", [ACCT_BREAKER] = "breaker",
    [ACCT_BACKOFF] = "backoff", [ACCT_BUDGET] = "budget",
};

int stg__eng_acct_of(const req *r, rq_where w)
{
    switch (w) {
    case RQ_NONE:
        return ACCT_NONE;
    case RQ_NEW_Q:
    case RQ_RETRY_Q:
        return ACCT_SLOT;
    case RQ_ACTIVE:
        return ACCT_ACTIVE;
    case RQ_PACE_Q:
        return ACCT_PACE;
    case RQ_CONC_Q:
        return ACCT_CONCURRENCY;
    case RQ_TIMER:
        break;
    }
    switch (r->wait) {
    case W_LIMITER:
        return ACCT_LIMITER;
    case W_BREAKER:
        return ACCT_BREAKER;
    case W_PACE:
        return ACCT_PACE;
    case W_BUDGET:
    case W_BUDGET_HELD:
        return ACCT_BUDGET;
    case W_QUOTA:
    case W_QUOTA_Q:
        return ACCT_QUOTA;
    case W_BACKOFF:
        break;
    }
    return ACCT_BACKOFF;
}

void stg__eng_account(stg_engine *e, req *r, int next)
{
    int was = r->acct;
    int64_t d = e->now - r->acct_since;
    if (was > ACCT_ACTIVE)
        e->waiting_now[was]--;
    if (next > ACCT_ACTIVE)
        e->waiting_now[next]++;
    STG_ASSERT(was <= ACCT_ACTIVE || e->waiting_now[was] >= 0);
    r->acct = next;
    r->acct_since = e->now;
    if (was <= ACCT_ACTIVE || d <= 0)
        return; /* not a wait, or one that took no time */
    stg_event ev;
    stg__eng_ev_init(e, r, STG_EVENT_WAITED, &ev);
    ev.wait_us = d;
    ((stg_event_more *)ev.more)->waited_for = acct_names[was]; /* ours: e->ev_more */
    stg__eng_emit(e, &ev);
}

size_t stg_engine_waiting(const stg_engine *e, const char **names, int64_t *counts, size_t max)
{
    size_t n = 0;
    for (int k = ACCT_SLOT; e && k <= ACCT_BUDGET && n < max; k++, n++) {
        names[n] = acct_names[k];
        counts[n] = e->waiting_now[k];
    }
    return n;
}

void stg__eng_ev_init(stg_engine *e, req *r, stg_event_type type, stg_event *ev)
{
    stg__event_init(ev, type, r->id, e->now, e->wall);
    stg_event_more *more = &e->ev_more[e->ev_more_next++ % EV_MORE_RING];
    memset(more, 0, sizeof *more);
    if (r->host->has_adaptive)
        more->learned_rate = stg_adaptive_rate(&r->host->adaptive);
    ev->more = more;
    ev->method = stg_method_name(r->method);
    ev->url = r->url_red;
    ev->final_url = r->final_url;
    ev->host = r->host->key;
    ev->attempt = r->rs.attempts;
    more->cls = &r->crow->st;
    if (r->host->has_conc)
        ev->concurrency_limit = stg_concurrency_learned(&r->host->conc);
}

void stg__eng_emit(stg_engine *e, const stg_event *ev)
{
    if (e->cfg.on_event)
        e->cfg.on_event(ev, e->cfg.event_data);
}

/* The breaker of h changed: requests waiting for it (W_BREAKER timers) go
 * back to admission now instead of sleeping until their timer, so a probe
 * that closes the breaker releases them at once. */
static void wake_breaker_waiters(stg_engine *e, stg__host *h)
{
    if (!e->timers.n)
        return;
    req **w = malloc(e->timers.n * sizeof *w);
    if (!w)
        return; /* they still wake at their own timer */
    size_t n = 0;
    for (size_t i = 0; i < e->timers.n; i++) {
        req *r = e->timers.v[i].item;
        if (r->wait == W_BREAKER && r->host == h)
            w[n++] = r;
    }
    for (size_t i = 0; i < n; i++) {
        stg__eng_untimer(e, w[i]);
        stg__eng_requeue(e, w[i], false);
    }
    free(w);
}

/* Emit the breaker changes queued by the host's on_change. */
void stg__eng_flush_breaker(stg_engine *e, stg__host *h)
{
    if (h->n_changes)
        wake_breaker_waiters(e, h);
    for (int i = 0; i < h->n_changes; i++) {
        stg_event ev;
        stg__event_init(&ev, STG_EVENT_BREAKER, 0, h->changes[i].now_us, e->wall);
        ev.host = h->key;
        ev.breaker_from = h->changes[i].from;
        ev.breaker_to = h->changes[i].to;
        stg__eng_emit(e, &ev);
    }
    h->n_changes = 0;
}

/* ---- easy handle pool --------------------------------------------------- */

CURL *stg__eng_pool_get(stg_engine *e)
{
    if (e->pool_n)
        return e->pool[--e->pool_n];
    return curl_easy_init();
}

void stg__eng_pool_put(stg_engine *e, CURL *easy)
{
    curl_easy_reset(easy);
    if (e->pool_n < (size_t)e->concurrency)
        e->pool[e->pool_n++] = easy;
    else
        curl_easy_cleanup(easy);
}

/* ---- request lifecycle --------------------------------------------------- */

void stg__eng_req_free(req *r)
{
    STG_ASSERT(r->host->refs > 0);
    r->host->refs--; /* the host may be forgotten from now on (hosts.c) */
    if (r->url != r->origin)
        free(r->url);
    if (r->url_red != r->origin)
        free(r->url_red);
    free(r->final_url);
    free(r->body);
    curl_slist_free_all(r->headers);
    curl_slist_free_all(r->stripped);
    free(r->origin);
    for (size_t i = 0; r->secret && r->secret[i]; i++)
        free(r->secret[i]);
    free(r->secret);
    free(r->cost);
    free(r->parts);
    free(r->qt);
    free(r->own_pol);
    if (r->queued && r->crow) { /* ended while it waited for admission */
        r->crow->st.waiting--;
        r->host->queued--;
        r->queued = false;
    }
    free(r->tenant);
    stg__xfer_free(&r->x);
    free(r);
}

bool stg__eng_ticket_keep(req *r, const stg_quota_ticket *t)
{
    static const stg_quota_ticket nothing; /* zeroed: holds nothing (quota.h) */
    if (!memcmp(t, &nothing, sizeof *t)) {
        free(r->qt);
        r->qt = NULL;
        return true;
    }
    if (!r->qt && !(r->qt = malloc(sizeof *r->qt)))
        return false;
    *r->qt = *t;
    return true;
}

/* The path of the URL (after the authority, before '?' or '#'). Not the
 * core's splitter: that is internal to libstagger, and a shared
 * libstagger-curl may use only its public symbols. */
void stg__eng_route(const req *r, char *buf, size_t size)
{
    stg__quota_route(r->method, r->url, buf, size);
}

int stg__eng_cost_check(const stg_request *rq)
{
    if (rq->n_cost && !rq->cost)
        return STG_EINVAL;
    for (size_t i = 0; i < rq->n_cost; i++)
        if (rq->cost[i].amount < 0 || !memchr(rq->cost[i].unit, 0, sizeof rq->cost[i].unit))
            return STG_EINVAL;
    return STG_OK;
}

bool stg__eng_cost_copy(req *r, const stg_request *rq)
{
    if (!rq->n_cost)
        return true;
    r->cost = malloc(rq->n_cost * sizeof *r->cost);
    if (!r->cost)
        return false;
    memcpy(r->cost, rq->cost, rq->n_cost * sizeof *r->cost);
    r->n_cost = rq->n_cost;
    return true;
}

bool stg__eng_cost_parts(stg_engine *e, req *r, const stg_request *rq)
{
    if (!e->cfg.quotas || e->cfg.no_cost_estimate || !rq->body)
        return true;
    stg_cost_parts p;
    if (!stg__ai_cost_parts(stg_method_name(r->method), rq->url, rq->body, rq->body_len, &p))
        return true;
    stg__host *h = r->host;
    if (!h->cost_model && !(h->cost_model = stg_cost_model_new(NULL)))
        return false;
    if (!(r->parts = malloc(sizeof *r->parts)))
        return false;
    *r->parts = p;
    r->x.keep_tail = r->x.sink != NULL; /* a streamed answer's usage is at its end */
    return true;
}

static bool stated(const req *r, const char *unit)
{
    for (size_t i = 0; i < r->n_cost; i++)
        if (!strcmp(r->cost[i].unit, unit))
            return true;
    return false;
}

size_t stg__eng_cost_now(const req *r, stg_quota_cost *c, size_t max)
{
    static const char *const units[] = {"tokens", "input-tokens", "output-tokens"};
    size_t n = 0;
    for (size_t i = 0; i < r->n_cost && n < max; i++)
        c[n++] = r->cost[i];
    for (size_t i = 0; r->parts && r->host->cost_model && i < 3 && n < max; i++) {
        if (stated(r, units[i]))
            continue;
        memset(&c[n], 0, sizeof c[n]);
        snprintf(c[n].unit, sizeof c[n].unit, "%s", units[i]);
        c[n++].amount = stg_cost_estimate(r->host->cost_model, units[i], r->parts);
    }
    return n;
}

int64_t stg__eng_remaining(const stg_engine *e, const req *r)
{
    if (!r->started || r->pol->deadline_us <= 0)
        return INT64_MAX;
    return r->rs.start_us + r->pol->deadline_us - e->now;
}

/* Take r out of whatever holds it (queue, heap, multi, slot counts). */
void stg__eng_detach(stg_engine *e, req *r)
{
    switch (r->where) {
    case RQ_NEW_Q:
        stg__fq_remove(&e->new_fq, &r->fq);
        break;
    case RQ_RETRY_Q:
        stg__eng_q_unlink(&e->retry_q, r);
        break;
    case RQ_TIMER:
        if (r->heap_index != STG__NOT_IN_HEAP)
            stg__heap_remove(&e->timers, r->heap_index);
        if (r->wait == W_BUDGET_HELD)
            r->host->budget_held--;
        break;
    case RQ_ACTIVE:
        curl_multi_remove_handle(e->multi, r->easy);
        stg__eng_pool_put(e, r->easy);
        r->easy = NULL;
        e->active--;
        break;
    case RQ_CONC_Q:
        stg__eng_conc_unlink(r);
        break;
    case RQ_PACE_Q:
    case RQ_NONE:
        break;
    }
    stg__eng_early_forget(r);
    stg__eng_pace_leave(e, r);
    stg__eng_quota_unwait(e, r);
    if (r->reserved) {
        r->reserved = false;
        e->reserved--;
    }
    r->where = RQ_NONE;
    if (r->conc_held)
        stg__eng_conc_release(e, r);
}
