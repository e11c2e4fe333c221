/*
 * A send's quota reservation (cfg.quotas, and cfg.shared_quotas' ledger
 * ticket with it), settled exactly once: with the answer's quotas when an
 * answer came (the count they tell, else the usage the body reports; a
 * refusal, 429 or 529, used nothing), as spent when the attempt ended
 * without one (it may have reached the server), given back when the
 * request ended before sending or the attempt failed before reaching the
 * server (connect, DNS, TLS, a refused HTTP/2 stream). Every send's
 * answer (or failure) is told to its host's cost model, once.
 *
 * A 2xx answer's quotas are learned when its head arrives (stg__eng_head:
 * stg_quota_head), which ends its host's cold probe: a long body, an SSE
 * stream, does not hold the host's other sends, and they are paced by
 * what the head said; what the head told no count of stays reserved
 * until the settle, which does not learn the head again. Another status
 * is learned whole at its end (its body may add to the quotas: a
 * refusal's RetryInfo, a GitHub secondary limit).
 *
 * An answered send is also counted, per quota its ticket charged, as
 * admitted or refused (429, 503, 529: stg_quota_tally), for the live
 * pages' per-key rates.
 *
 * Invariants: 0 <= q_held <= q_alive per host; a request holds a ticket
 * (qt, sq) only while quota_held.
 */
#include <stdlib.h>
#include <string.h>

#include "curl/engine.h"

/* A refusal: the server did not do the work, nor count it (429, and
 * Anthropic's 529 overloaded). */
static bool refusal(int status)
{
    return status == 429 || status == 529;
}

/* What r used of each token unit it reserved, as far as the answer says:
 * nothing for a refusal; the usage its body reports (an AI answer's
 * "usage", JSON or SSE; the kept body, or the tail of one that streamed to
 * a sink) otherwise. Returns the count in used[]. */
static size_t used_of(const req *r, stg_quota_cost *used, size_t max)
{
    if (refusal(r->status)) {
        stg_quota_cost c[STG_QUOTA_COSTS_MAX + 3];
        size_t n = stg__eng_cost_now(r, c, sizeof c / sizeof c[0]), k = 0;
        for (size_t i = 0; i < n && k < max; i++) {
            if (!strcmp(c[i].unit, "tokens") || !strcmp(c[i].unit, "input-tokens") ||
                !strcmp(c[i].unit, "output-tokens")) {
                used[k] = c[i];
                used[k++].amount = 0;
            }
        }
        return k;
    }
    if (!r->parts || r->status < 200 || r->status > 299)
        return 0;
    if (r->x.body.p && r->x.body.len)
        return stg__ai_cost_usage(r->x.body.p, r->x.body.len, used, max);
    /* Streamed on: its tail, and the input its start told. */
    return stg__ai_cost_usage_streamed(r->x.tail, r->x.tail_len, r->x.lead_in, used, max);
}

/* The quotas an answer announced (the latest response's header block,
 * through every dialect stg_hints_feed reads) settle r's reservation, at
 * the count they tell, else at what the body says was used (a refusal
 * used nothing); with no answer (answered false) the reservation stays
 * spent, unless the request never reached the server (unsent): then it
 * is given back. The host's cost model learns from every send's answer. */
void stg__eng_quota_settle(stg_engine *e, req *r, bool answered, bool unsent)
{
    stg_cost_model *cm = r->host->cost_model;
    int64_t seq = r->cost_seq;
    r->cost_seq = 0;
    bool held = r->quota_held;
    if (held) {
        r->quota_held = false;
        r->host->q_held--;
    }
    stg_quota *q = e->hosts.quota;
    const stg_shared_quota *sq = e->cfg.shared_quotas;
    void *sqt = r->sq;
    r->sq = NULL;
    /* The key's requests that still want quota after this one. */
    int64_t later = r->host->q_alive - 1;
    if (!answered) {
        if (held && sq)
            sq->settle(sq->ctx, sqt, unsent ? 2 : 1, NULL, NULL, 0, later);
        if (cm && seq && unsent)
            stg_cost_uncounted(cm, seq);
        else if (cm && seq)
            stg_cost_answer(cm, seq, true, NULL, 0, e->now);
        if (held && q && unsent)
            stg_quota_cancel(q, r->host->key, r->qt);
        else if (held && q)
            stg_quota_settle(q, r->host->key, NULL, r->qt, NULL, e->now);
        return;
    }
    stg_quota_set qs;
    stg__quota_answer(&r->x, r->status, e->wall, &qs);
    if (cm && seq)
        stg_cost_answer(cm, seq, !refusal(r->status), qs.q, qs.n, e->now);
    if (!held)
        return;
    stg_quota_cost used[STG_QUOTA_COSTS_MAX + 3];
    size_t n_used = used_of(r, used, sizeof used / sizeof used[0]);
    stg__xfer_tail_free(&r->x); /* read: a request waiting for a retry holds none */
    if (sq)
        sq->settle(sq->ctx, sqt, 0, &qs, used, n_used, later);
    if (!q)
        return;
    stg_quota_tally(q, r->host->key, r->qt,
                    refusal(r->status) || r->status == 503); /* per key, for the live pages */
    char route[512];
    stg__eng_route(r, route, sizeof route);
    stg_quota_settle_used(q, r->host->key, route, r->qt, &qs, used, n_used, e->now);
}

/* r ends holding a reservation it never sent on (finish, not ACTIVE): the
 * reservation returns, the shared ledger's with it. */
void stg__eng_quota_return(stg_engine *e, req *r)
{
    if (!r->quota_held)
        return;
    r->quota_held = false;
    r->host->q_held--;
    stg_quota_cancel(e->hosts.quota, r->host->key, r->qt);
    if (e->cfg.shared_quotas)
        e->cfg.shared_quotas->settle(e->cfg.shared_quotas->ctx, r->sq, 2, NULL, NULL, 0,
                                     r->host->q_alive - 1);
    r->sq = NULL;
}

void stg__eng_head(void *arg, int status)
{
    req *r = arg;
    stg_engine *e = r->engine;
    if (status < 200 || status > 299 || !r->quota_held || !r->qt || !e->hosts.quota)
        return; /* without a ticket (it holds nothing) the settle learns it */
    stg_quota_set qs;
    stg__quota_answer(&r->x, status, e->wall, &qs);
    char route[512];
    stg__eng_route(r, route, sizeof route);
    stg_quota_head(e->hosts.quota, r->host->key, route, r->qt, &qs, e->now);
}
