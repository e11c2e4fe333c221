/*
 * A concurrency learned per host (stg_engine_config.learn, concurrency.h):
 * the engine's side of it. The controller says how many attempts a host
 * may have in flight; this file keeps the host to it.
 *
 * A request takes one of its host's slots when it leaves the new or retry
 * queue to be admitted (stg__eng_conc_gate) and holds it through the
 * limiter's waits and its attempt; it gives it back when it goes to wait
 * anywhere else or finishes (stg__eng_enter and detach call release). A
 * request that finds its host full waits in the host's CONC_Q, a fair queue
 * (core/fairq.h: higher classes first, a floor for the lower, tenants by
 * weight; oldest first within one tenant) holding no
 * engine slot, no reservation and no deadline of its own: it is not
 * admitted yet. A slot given back goes to the queue's next at once (taken
 * for it, then the head joins the retry queue keeping it: conc_woken,
 * until the gate sees it), so the order is kept and a woken request never
 * meets a full host. (Without conc_woken stg__eng_enter gave the slot straight
 * back, which woke the next waiter the same way: one freed slot emptied
 * the queue into the retry queue, all but one queued again at its tail,
 * and behind the proxy some requests waited 8 s for their turn.)
 *
 * Why the slot covers the limiter's waits and not only the attempt: a
 * request admitted by the gate is committed to the host; counting only
 * attempts would let every request past the gate while the limiter holds
 * them, and they would then go together.
 *
 * Invariants: 0 <= conc_out; conc_out <= limit except just after the limit
 * was cut (slots held then are not taken back: those requests are already
 * committed) and by the one slot a pace head back from a quota wait takes
 * (and one a request takes when no memory is left for its turn); a request in CONC_Q holds no slot; the queue is empty when
 * conc_out < limit (a freed slot is handed on before anyone may look).
 */
#include <stdlib.h>

#include "curl/engine.h"

int stg__eng_conc_host_init(stg__host *h, const stg_engine_config *cfg, int64_t now_us)
{
    if (!cfg->learn)
        return STG_OK;
    int rc = stg_concurrency_init(&h->conc, cfg->learn, now_us);
    if (rc != STG_OK)
        return rc;
    h->has_conc = true;
    return STG_OK;
}

static int limit_of(const stg__host *h)
{
    return stg_concurrency_limit(&h->conc);
}

/* r joins its host's queue of waiters, in its class and tenant's turn.
 * False when out of memory (r is then in no queue). */
static bool conc_push(stg__host *h, req *r)
{
    return stg__eng_fq_join(&h->conc_fq, r);
}

void stg__eng_conc_unlink(req *r)
{
    stg__fq_remove(r->host->conc_fq, &r->fq);
}

static bool conc_waiting(const stg__host *h)
{
    return h->conc_fq && h->conc_fq->n;
}

/* Hand the host's free slots to its waiters, in their fair order. */
static void wake(stg_engine *e, stg__host *h)
{
    while (conc_waiting(h) && h->conc_out < limit_of(h)) {
        req *w = fq_req(stg__fq_pop(h->conc_fq));
        stg__eng_leave(w, RQ_CONC_Q);
        w->conc_held = true;
        w->conc_woken = true; /* else stg__eng_enter gave it straight back */
        h->conc_out++;
        stg__eng_requeue(e, w, false);
    }
    STG_ASSERT(!conc_waiting(h) || h->conc_out >= limit_of(h));
}

bool stg__eng_conc_gate(stg_engine *e, req *r)
{
    stg__host *h = r->host;
    r->conc_woken = false;
    if (!h->has_conc || r->conc_held)
        return true;
    /* The pace head never waits for a slot: the followers holding the
     * slots wait for it (a head back from a quota wait has none). */
    if (h->conc_out < limit_of(h) || is_pace_head(r)) {
        r->conc_held = true;
        h->conc_out++;
        return true;
    }
    if (!conc_push(h, r)) { /* no memory for a new tenant's turn: it goes */
        r->conc_held = true;
        h->conc_out++;
        return true;
    }
    e->stats.concurrency_waits++;
    stg__eng_enter(e, r, RQ_CONC_Q);
    return false;
}

void stg__eng_conc_release(stg_engine *e, req *r)
{
    stg__host *h = r->host;
    STG_ASSERT(r->conc_held && h->conc_out > 0);
    r->conc_held = false;
    h->conc_out--;
    wake(e, h);
}

/* What an attempt's end says of the server's load. */
static stg_concurrency_signal signal_of(int status, stg_net_error err)
{
    if (status == 429 || status == 503 || err == STG_NET_TIMEOUT)
        return STG_CONCURRENCY_OVERLOAD;
    if (status > 0)
        return STG_CONCURRENCY_OK;
    return STG_CONCURRENCY_IGNORE; /* refused, reset, DNS, TLS: not load */
}

void stg__eng_conc_sample(stg_engine *e, req *r)
{
    stg__host *h = r->host;
    if (!h->has_conc)
        return;
    int before = limit_of(h);
    stg_concurrency_on_sample(&h->conc, e->now - r->attempt_start_us,
                              signal_of(r->status, r->err), h->conc_out, e->now);
    if (limit_of(h) > before)
        wake(e, h);
}

int stg__eng_conc_sum(const stg_engine *e)
{
    int sum = 0;
    for (size_t i = 0; i < e->hosts.cap; i++)
        for (const stg__host *h = e->hosts.b[i]; h; h = h->next)
            if (h->has_conc)
                sum += stg_concurrency_learned(&h->conc); /* a probe's half is not news */
    return sum;
}
