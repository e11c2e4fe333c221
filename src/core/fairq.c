/*
 * The weighted fair queue of requests waiting for one limit (fairq.h has
 * the order, its bounds and the invariants). Pure: no clock, no I/O.
 */
#include <stdlib.h>
#include <string.h>

#include "core/fairq.h"

void stg__fq_init(stg__fairq *q, unsigned floor_every)
{
    memset(q, 0, sizeof *q);
    q->floor_every = floor_every ? floor_every : STG__FQ_FLOOR_EVERY;
}

void stg__fq_free(stg__fairq *q)
{
    for (int i = 0; i < STG_N_PRIORITIES; i++) {
        stg__fq_flow *f = q->c[i].flows;
        while (f) {
            stg__fq_flow *n = f->next;
            for (stg__fq_item *it = f->head; it; it = it->next)
                it->flow = NULL;
            free(f);
            f = n;
        }
        q->c[i].flows = NULL;
        q->c[i].n = 0;
    }
    q->n = 0;
}

static stg__fq_flow *flow_get(stg__fq_class *c, const char *tenant)
{
    for (stg__fq_flow *f = c->flows; f; f = f->next)
        if (strcmp(f->tenant, tenant) == 0)
            return f;
    stg__fq_flow *f = calloc(1, sizeof *f);
    if (!f)
        return NULL;
    size_t n = strlen(tenant);
    if (n > STG_TENANT_MAX)
        n = STG_TENANT_MAX;
    memcpy(f->tenant, tenant, n);
    f->finish = c->vtime; /* a new tenant starts at the class's time */
    f->next = c->flows;
    c->flows = f;
    return f;
}

/* Forget the flows with nothing waiting whose finish tag the class's time
 * has passed: a new flow of the same tenant would get the same tags. */
static void flows_sweep(stg__fq_class *c)
{
    stg__fq_flow **pp = &c->flows;
    while (*pp) {
        stg__fq_flow *f = *pp;
        if (!f->n && f->finish <= c->vtime) {
            *pp = f->next;
            free(f);
        } else {
            pp = &f->next;
        }
    }
}

int stg__fq_push(stg__fairq *q, stg__fq_item *it, const stg_class *cls)
{
    return stg__fq_push_cost(q, it, cls, 1.0);
}

int stg__fq_push_cost(stg__fairq *q, stg__fq_item *it, const stg_class *cls, double cost)
{
    int ci = stg__fq_class_index(cls ? cls->priority : STG_PRIORITY_NORMAL);
    const char *tenant = cls && cls->tenant ? cls->tenant : "";
    double w = cls && cls->weight > 0 ? cls->weight : 1.0;
    stg__fq_class *c = &q->c[ci];
    stg__fq_flow *f = flow_get(c, tenant);
    if (!f) {
        it->flow = NULL;
        return STG_ENOMEM;
    }
    it->cls = ci;
    it->flow = f;
    it->seq = q->seq++;
    it->start = f->finish > c->vtime ? f->finish : c->vtime;
    it->finish = it->start + (cost > 0 ? cost : 1.0) / w;
    f->finish = it->finish;
    it->next = NULL;
    it->prev = f->tail;
    if (f->tail)
        f->tail->next = it;
    else
        f->head = it;
    f->tail = it;
    f->n++;
    if (!c->n)
        c->starved = 0; /* the floor counts picks while it waits */
    c->n++;
    q->n++;
    return STG_OK;
}

/* a goes before b: the smaller start tag, then finish tag, then arrival. */
static bool before(const stg__fq_item *a, const stg__fq_item *b)
{
    if (a->start != b->start)
        return a->start < b->start;
    if (a->finish != b->finish)
        return a->finish < b->finish;
    return a->seq < b->seq;
}

/* The head of class c that goes first. */
static stg__fq_item *class_head(const stg__fq_class *c)
{
    stg__fq_item *best = NULL;
    for (const stg__fq_flow *f = c->flows; f; f = f->next)
        if (f->head && (!best || before(f->head, best)))
            best = f->head;
    return best;
}

/* The class the next pick serves: the floor's, else the first waiting. */
static int pick_class(const stg__fairq *q)
{
    int first = -1, floor = -1;
    for (int i = 0; i < STG_N_PRIORITIES; i++) {
        const stg__fq_class *c = &q->c[i];
        if (!c->n)
            continue;
        if (first < 0)
            first = i;
        else if (c->starved + 1 >= q->floor_every &&
                 (floor < 0 || c->starved > q->c[floor].starved))
            floor = i;
    }
    return floor >= 0 ? floor : first;
}

stg__fq_item *stg__fq_peek(const stg__fairq *q)
{
    int ci = pick_class(q);
    return ci < 0 ? NULL : class_head(&q->c[ci]);
}

static void unlink_item(stg__fairq *q, stg__fq_item *it)
{
    stg__fq_flow *f = it->flow;
    stg__fq_class *c = &q->c[it->cls];
    if (it->prev)
        it->prev->next = it->next;
    else
        f->head = it->next;
    if (it->next)
        it->next->prev = it->prev;
    else
        f->tail = it->prev;
    it->next = it->prev = NULL;
    it->flow = NULL;
    f->n--;
    c->n--;
    q->n--;
    if (!c->n)
        c->starved = 0;
}

void stg__fq_take(stg__fairq *q, stg__fq_item *it)
{
    if (!it || !it->flow)
        return;
    int ci = it->cls;
    stg__fq_class *c = &q->c[ci];
    if (it->start > c->vtime)
        c->vtime = it->start; /* SFQ: V is the start tag in service */
    unlink_item(q, it);
    for (int i = 0; i < STG_N_PRIORITIES; i++)
        if (i != ci && q->c[i].n)
            q->c[i].starved++;
    c->starved = 0;
    flows_sweep(c);
}

stg__fq_item *stg__fq_pop(stg__fairq *q)
{
    stg__fq_item *it = stg__fq_peek(q);
    stg__fq_take(q, it);
    return it;
}

void stg__fq_remove(stg__fairq *q, stg__fq_item *it)
{
    if (!it || !it->flow)
        return;
    stg__fq_flow *f = it->flow;
    stg__fq_class *c = &q->c[it->cls];
    if (f->tail == it) /* the last one: its tenant is not charged for it */
        f->finish = it->start;
    unlink_item(q, it);
    flows_sweep(c);
}
