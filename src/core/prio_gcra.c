/*
 * The cross-process admission decision by class and tenant: the pure model
 * of the Redis script (src/redis/gcra.c, its prio part). prio_gcra.h states
 * the rules and the numbers; this file implements them in the order the
 * script does, so that a differential test can compare the two call by
 * call.
 *
 * Invariants (asserted where cheap):
 *  - every granted token advances the key's TAT by exactly T and conforms
 *    (TAT - B * T <= now + wait): the bound B + t/T holds for any mix;
 *  - a low caller's tokens conform now (wait 0), except one floor token;
 *  - k <= n; k > 1 only without a wait;
 *  - a refusal changes only the demand marks and the tenant table.
 */
#include "core/prio_gcra.h"

#include <math.h>
#include <string.h>

#include "util/assert.h"

#define SPAN_MAX (INT64_C(1) << 50)
#define INTERVAL_CAP (INT64_C(1) << 51)

static int64_t max64(int64_t a, int64_t b)
{
    return a > b ? a : b;
}

/* ceil(a * b / c) in doubles, capped so that burst * result stays exact. */
static int64_t interval_of(int64_t a, int64_t b, int64_t c, int64_t burst)
{
    double v = ceil((double)a * (double)b / (double)c);
    double cap = floor((double)INTERVAL_CAP / (double)burst);
    if (v > cap)
        v = cap;
    return (int64_t)v;
}

static bool valid(const stg__prio_req *rq)
{
    if (rq->interval_ns < 1 || rq->burst < 1 || rq->burst > SPAN_MAX / rq->interval_ns)
        return false;
    if (rq->priority < STG_PRIORITY_MIN || rq->priority > STG_PRIORITY_MAX)
        return false;
    if (rq->n < 1 || rq->lead_ns < 0 || rq->max_wait_ns < 0 || rq->hold_ns < 0)
        return false;
    if (rq->lead_ns > SPAN_MAX || rq->max_wait_ns > SPAN_MAX || rq->hold_ns > SPAN_MAX)
        return false;
    if (rq->floor_pm < 0 || rq->floor_pm > 1000)
        return false;
    if (rq->weight < 0.0 || rq->weight > 1e6 || rq->weight != rq->weight)
        return false;
    if (rq->tenant && strlen(rq->tenant) > STG_TENANT_MAX)
        return false;
    return true;
}

/* Forget tenants whose mark is stale and whose bucket is full again. */
static void prune(stg__prio_state *st, int64_t now)
{
    for (int i = 0; i < STG__PRIO_TENANTS_MAX; i++) {
        stg__prio_tenant *t = &st->tenants[i];
        if (t->used && t->until_ns <= now && t->tat_ns <= now && t->q_ns <= now)
            memset(t, 0, sizeof *t);
    }
}

/* The tenant's entry, made if absent and room is left; NULL: untracked. */
static stg__prio_tenant *tenant_of(stg__prio_state *st, int cls, const char *name)
{
    stg__prio_tenant *free_slot = NULL;
    for (int i = 0; i < STG__PRIO_TENANTS_MAX; i++) {
        stg__prio_tenant *t = &st->tenants[i];
        if (!t->used) {
            if (!free_slot)
                free_slot = t;
        } else if (t->cls == cls && strcmp(t->name, name) == 0) {
            return t;
        }
    }
    if (!free_slot)
        return NULL;
    memset(free_slot, 0, sizeof *free_slot);
    free_slot->used = true;
    free_slot->cls = cls;
    strcpy(free_slot->name, name); /* length checked by valid() */
    return free_slot;
}

/* Rule 5's lender protection: how many tokens that conform now a borrower
 * (a token beyond its share) must leave behind, over the headroom `nd`.
 * One, as for any low caller, plus the lag of the slowest other tenant of
 * the class that has fresh demand and is within its share: its refused
 * callers come back at its retry slots (rule 7), half its share interval
 * apart, ceil(Tt_t / 2 / T) of the key's tokens; a borrower that took
 * what accrued in between took that tenant's share (seen: a 1:1:2 run
 * where c borrowed 32 tokens that a, within its share, came back for a
 * slot too late, a 0.21 and c 0.54). At most B - 1 - nd, so that a full
 * bucket can still be borrowed from: a share nobody takes is not lost. */
static int64_t keep_of(const stg__prio_state *st, const stg__prio_tenant *me, int cls, int64_t now,
                       int64_t T, int64_t B, int64_t S, int nd)
{
    int64_t keep = 1, cap = B - 1 - nd;
    for (int i = 0; i < STG__PRIO_TENANTS_MAX; i++) {
        const stg__prio_tenant *t = &st->tenants[i];
        if (!t->used || t == me || t->cls != cls || t->until_ns <= now)
            continue;
        int64_t Tt = interval_of(T, S, t->weight_m, B);
        if (max64(t->tat_ns, now) + Tt - B * Tt > now)
            continue; /* beyond its share: it has had it */
        int64_t lag = ((Tt + 1) / 2 + T - 1) / T;
        if (1 + lag > keep)
            keep = 1 + lag;
    }
    if (keep > cap)
        keep = cap;
    return keep < 1 ? 1 : keep;
}

/* What one attempt (with or without lead) grants, before it is committed. */
typedef struct attempt {
    int64_t k, wait, g0, g, tt, ft;
    bool floor;
    int64_t hint; /* k == 0: the hint for the first token */
} attempt;

typedef struct ctx {
    int64_t now, T, B, max_wait, res_wait, Tt, Tf, tt0, ft0;
    int need;   /* headroom a low caller leaves: fresh higher classes */
    int64_t keep; /* tokens a borrower leaves for tenants within share */
    bool low;
} ctx;

static void try_take(const ctx *c, int64_t g0, int64_t n, attempt *a)
{
    const int64_t now = c->now, T = c->T, BT = c->B * c->T;
    const int64_t need = c->low ? c->need : 0;
    a->k = 0;
    a->wait = 0;
    a->g0 = g0;
    a->g = g0;
    a->tt = c->tt0;
    a->ft = c->ft0;
    a->floor = false;
    a->hint = 0;
    for (int64_t i = 0; i < n; i++) {
        int64_t gn = a->g + T;
        int64_t wg = gn - BT - now; /* the key's wait for this token */
        int64_t tn = 0;
        bool within = true; /* within the tenant's share now */
        if (c->Tt > 0) {
            tn = max64(a->tt, now) + c->Tt;
            within = tn - c->B * c->Tt <= now;
        }
        /* The ways a token may be granted, in this order: now within the
         * share (a low caller leaving `need` tokens), borrowed beyond the
         * share (now, one more token left), reserved ahead (a caller that
         * may wait: the first token only, within its share now, so that
         * tenants reserve the key's future at their shares' pace), the
         * floor (a low class, the first token only). */
        bool a_now = within && wg <= 0 && (need == 0 || wg + need * T <= 0);
        bool o_now = !within && i == 0 && wg + (need + c->keep) * T <= 0;
        bool a_wait = within && !c->low && i == 0 && wg <= c->res_wait;
        bool f = within && c->low && c->need > 0 && i == 0 && c->ft0 <= now &&
                 wg <= c->max_wait;
        if (a_now || a_wait || f) {
            if (c->Tt > 0)
                a->tt = tn;
            if (!a_now && !a_wait) {
                a->ft = max64(c->ft0, now) + c->Tf;
                a->floor = true;
            }
        } else if (!o_now) {
            if (i == 0) {
                /* When could the first token be granted, all else
                 * unchanged? The earliest of the ways that could open. */
                int64_t lim = c->low ? 0 : c->res_wait;
                int64_t tw = c->Tt > 0 ? tn - c->B * c->Tt - now : 0;
                int64_t h = max64(wg + need * T - lim, tw);
                if (c->Tt > 0 && wg + (need + c->keep) * T < h)
                    h = wg + (need + c->keep) * T;
                if (c->low && c->need > 0) {
                    int64_t hf = max64(max64(c->ft0 - now, wg - c->max_wait), tw);
                    if (hf < h)
                        h = hf;
                }
                a->hint = h < 1 ? 1 : h;
            }
            break;
        }
        a->g = gn;
        a->k++;
        if (wg > 0) {
            a->wait = wg;
            break; /* only a single token may come with a wait */
        }
    }
}

int stg__prio_decide(stg__prio_state *st, const stg__prio_req *rq, stg__prio_grant *out)
{
    if (!st || !rq || !out || !valid(rq))
        return -1;
    const int64_t now = rq->now_ns, T = rq->interval_ns, B = rq->burst;
    const int cls = STG_PRIORITY_INDEX(rq->priority);
    const char *name = rq->tenant ? rq->tenant : "";
    const int64_t wm = stg__prio_weight_m(rq->weight);
    const int floor_pm = rq->floor_pm ? rq->floor_pm : STG__PRIO_FLOOR_PM_DEFAULT;
    memset(out, 0, sizeof *out);

    /* The key's TAT, stretched by a longer T as the plain script does. */
    int64_t tat = st->has_tat ? st->tat_ns : now;
    if (tat < now)
        tat = now;
    if (st->last_interval_ns > 0 && T > st->last_interval_ns && tat > now) {
        double d = ceil((double)(tat - now) * ((double)T / (double)st->last_interval_ns));
        if (d > (double)INTERVAL_CAP)
            d = (double)INTERVAL_CAP;
        tat = now + (int64_t)d;
    }

    /* Marks: this class, then this tenant. */
    if (st->demand_ns[cls] < now + rq->hold_ns)
        st->demand_ns[cls] = now + rq->hold_ns;
    if (rq->priority == STG_PRIORITY_INTERACTIVE)
        st->seen_ns = now + STG__PRIO_SEEN_NS;
    prune(st, now);
    stg__prio_tenant *me = tenant_of(st, cls, name);
    int64_t S = wm;
    if (me) {
        if (me->until_ns < now + rq->hold_ns)
            me->until_ns = now + rq->hold_ns;
        me->weight_m = wm;
        for (int i = 0; i < STG__PRIO_TENANTS_MAX; i++) {
            const stg__prio_tenant *t = &st->tenants[i];
            if (t->used && t != me && t->cls == cls && t->until_ns > now)
                S += t->weight_m;
        }
    }
    out->tracked = me != NULL;

    ctx c = {.now = now, .T = T, .B = B, .max_wait = rq->max_wait_ns};
    for (int h = 0; h < cls; h++)
        if (st->demand_ns[h] > now)
            c.need++;
    c.low = rq->priority == STG_PRIORITY_BATCH ||
            (rq->priority == STG_PRIORITY_NORMAL && c.need > 0);
    /* Rule 3: normal reserves at most one interval ahead while the key
     * has interactive callers (so one after a pause finds at most one
     * normal reservation ahead); as far as it may otherwise. */
    c.res_wait = rq->priority == STG_PRIORITY_NORMAL && st->seen_ns > now && T < c.max_wait
                     ? T
                     : c.max_wait;
    c.Tt = me && S > wm ? interval_of(T, S, wm, B) : 0;
    c.keep = c.Tt > 0 ? keep_of(st, me, cls, now, T, B, S, c.low ? c.need : 0) : 1;
    c.Tf = interval_of(T, 1000, floor_pm, 1);
    c.tt0 = me ? me->tat_ns : 0;
    c.ft0 = st->floor_tat_ns[cls];

    attempt a;
    int64_t g0 = tat;
    bool lease = rq->lead_ns > 0;
    if (lease && g0 < now + rq->lead_ns)
        g0 = now + rq->lead_ns;
    try_take(&c, g0, rq->n, &a);
    if (a.k == 0 && lease) {
        lease = false; /* a plain take of one, used at once */
        try_take(&c, tat, 1, &a);
    }
    if (a.k == 0) {
        /* Rule 7: the refused callers of a tenant come back one per share
         * interval, each told the next free retry slot; their marks last
         * until they are back. */
        int64_t h = a.hint;
        if (me) {
            int64_t slot = max64(now + h, me->q_ns);
            me->q_ns = slot + ((c.Tt > 0 ? c.Tt : T) + 1) / 2;
            h = slot - now;
        }
        out->wait_ns = h;
        return 0;
    }
    STG_ASSERT(a.k <= rq->n && (a.k == 1 || a.wait == 0));
    STG_ASSERT(a.g - B * T <= now + a.wait);
    STG_ASSERT(!c.low || a.floor || a.wait == 0);
    st->has_tat = true;
    st->tat_ns = a.g;
    st->last_interval_ns = T;
    if (me)
        me->tat_ns = a.tt;
    st->floor_tat_ns[cls] = a.ft;
    out->k = a.k;
    out->wait_ns = a.wait;
    out->lease = lease;
    out->end_ns = lease ? a.g0 : 0;
    out->floor = a.floor;
    return 0;
}
