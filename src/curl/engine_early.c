/*
 * A backoff after a throttle, cut short when its host is idle and has
 * answered since.
 *
 * A 429 that gives no hint (no Retry-After, no reset: Stripe's) leaves a
 * retry with nothing to wait for but its own backoff, which doubles with
 * each refusal of that request. On a host with an adaptive rate the pace
 * is the limiter's: the throttle already cut the host's rate, and every
 * send, first or retry, takes its turn at that rate. The backoff then
 * only decides which request goes, except at the end of a batch, when the
 * backoffs are all that is left: the host idles while the unlucky request
 * refused three times sits out 4 s (a 120-job batch against Stripe's
 * bucket ended 1.2-1.5x its ideal time in half the runs, at ~1.01x in the
 * others).
 *
 * So such a wait is cut short, through admission (the limiter paces it),
 * when both hold:
 *  - the host answered another request since this one was refused (not a
 *    throttle, not a 5xx or a transport error): its quota has room again.
 *    A host that refuses everything gives no such answer, and its
 *    refused requests wait their whole backoffs, as a lone request does;
 *  - nothing of the host waits for admission (h->queued is 0): the cut
 *    wait takes a turn of the rate that would otherwise go unused, never
 *    one from another request.
 * One at a time per host, oldest refusal first: the one cut counts as
 * waiting from the instant its timer fires (it goes through the retry
 * queue), and the next is cut only when it has gone and the host is idle
 * again. A throttle with a hint (the server said when) and hosts with a
 * fixed rate or none keep their backoffs whole: the first is the
 * server's word, the others have no learned pace to hand the wait to.
 *
 * The cut moves the timer's instant to now (stg__heap_advance): the
 * request stays in its wait and leaves it as on any expiry (a backoff to
 * the retry queue, a spent budget's to its gate), so the state table has
 * no extra move and a spent budget still holds what it holds.
 *
 * Invariants: r->early exactly when r is in its host's early list, and
 * then r waits in the timer heap in W_BACKOFF or W_BUDGET; h->early_cut,
 * when set, is a request of h in one of those waits whose timer is due;
 * h->queued counts h's requests with r->queued.
 */
#include "curl/engine.h"

void stg__eng_early_note(req *r)
{
    stg__host *h = r->host;
    STG_ASSERT(!r->early && r->where == RQ_NONE);
    r->early = true;
    r->early_mark = h->answered;
    stg__list_push_back(&h->early, &r->early_link);
}

void stg__eng_early_forget(req *r)
{
    stg__host *h = r->host;
    if (r->early) {
        r->early = false;
        stg__list_unlink(&h->early, &r->early_link);
    }
    if (h->early_cut == r)
        h->early_cut = NULL;
}

/* Cut the oldest eligible wait of h short, when h is idle and none is
 * cut already. */
static void cut(stg_engine *e, stg__host *h)
{
    if (h->queued > 0 || h->early_cut || !h->early.head)
        return;
    for (stg__link *l = h->early.head; l; l = l->next) {
        req *r = STG__OWNER(l, req, early_link);
        STG_ASSERT(r->where == RQ_TIMER && (r->wait == W_BACKOFF || r->wait == W_BUDGET));
        if (r->early_mark < h->answered) {
            stg__eng_early_forget(r); /* out of the list: it is the one cut */
            h->early_cut = r;
            stg__heap_advance(&e->timers, r->heap_index, e->now);
            return;
        }
    }
}

void stg__eng_early_answered(stg_engine *e, stg__host *h)
{
    h->answered++;
    cut(e, h);
}

void stg__eng_early_queued(stg_engine *e, stg__host *h, int delta)
{
    h->queued += delta;
    STG_ASSERT(h->queued >= 0);
    if (delta < 0)
        cut(e, h);
}
