/*
 * The work queue's pick (qpick.h has the order, its bounds and the
 * invariants). Pure: no clock, no I/O, no allocation. Every step is the
 * claim script's (src/redis/queue_lua.c, "pick"), in the same order of
 * floating-point operations, so the two agree to the bit.
 */
#include "core/fairq.h"
#include "core/qpick.h"
#include "util/assert.h"

static unsigned floor_of(const stg__qpick *p)
{
    return p->floor_every ? p->floor_every : STG__FQ_FLOOR_EVERY;
}

static double start_of(const stg__qpick *p, const stg__qpick_lane *l)
{
    double v = p->vtime[l->cls];
    return l->finish > v ? l->finish : v;
}

/* The class the next pick serves: the floor's, else the first waiting. */
static int pick_class(const stg__qpick *p, const int64_t waiting[STG_N_PRIORITIES])
{
    int first = -1, fl = -1;
    for (int i = 0; i < STG_N_PRIORITIES; i++) {
        if (!waiting[i])
            continue;
        if (first < 0)
            first = i;
        else if (p->starved[i] + 1 >= floor_of(p) && (fl < 0 || p->starved[i] > p->starved[fl]))
            fl = i;
    }
    return fl >= 0 ? fl : first;
}

static void waiting_of(const stg__qpick *p, int64_t waiting[STG_N_PRIORITIES])
{
    for (int i = 0; i < STG_N_PRIORITIES; i++)
        waiting[i] = 0;
    for (size_t k = 0; k < p->n; k++) {
        STG_ASSERT(p->lanes[k].unread >= 0);
        if (p->lanes[k].unread > 0 && p->lanes[k].cls >= 0 && p->lanes[k].cls < STG_N_PRIORITIES)
            waiting[p->lanes[k].cls] += p->lanes[k].unread;
    }
}

int stg__qpick_next(const stg__qpick *p)
{
    int64_t waiting[STG_N_PRIORITIES];
    waiting_of(p, waiting);
    int ci = pick_class(p, waiting);
    if (ci < 0)
        return -1;
    int best = -1;
    double bs = 0, bf = 0;
    for (size_t k = 0; k < p->n; k++) {
        const stg__qpick_lane *l = &p->lanes[k];
        if (l->cls != ci || l->unread <= 0)
            continue;
        double s = start_of(p, l);
        double f = s + 1.0 / stg__qpick_weight(l->weight);
        if (best < 0 || s < bs || (s == bs && f < bf)) {
            best = (int)k;
            bs = s;
            bf = f;
        }
    }
    return best;
}

void stg__qpick_take(stg__qpick *p, int l)
{
    STG_ASSERT(l >= 0 && (size_t)l < p->n && p->lanes[l].unread > 0);
    stg__qpick_lane *ln = &p->lanes[l];
    int ci = ln->cls;
    double s = start_of(p, ln);
    ln->finish = s + 1.0 / stg__qpick_weight(ln->weight);
    p->vtime[ci] = s; /* s >= V: V never decreases */
    ln->unread--;
    int64_t waiting[STG_N_PRIORITIES];
    waiting_of(p, waiting);
    for (int i = 0; i < STG_N_PRIORITIES; i++)
        p->starved[i] = i != ci && waiting[i] ? p->starved[i] + 1 : 0;
}
