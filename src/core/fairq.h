/*
 * Internal: a weighted fair queue of requests waiting for one limit
 * (issue #32, docs/priorities.md). Pure: no I/O, no clock (the order is
 * in virtual time, counted in picks), no global state; the caller owns the
 * queue and the items (intrusive nodes inside its own structs).
 *
 * The order of a pick:
 *  1. classes strictly by number (stg_class.priority: interactive, normal,
 *     batch), except
 *  2. the floor: a class below the first that has waited through
 *     floor_every - 1 picks of the others gets the next one, so while it
 *     waits it has at least one pick in every floor_every + N - 2 (N the
 *     number of classes; 1/floor_every of the picks when only one class is
 *     starved: 5% by default). Never starved, whatever the others send.
 *  3. within a class, tenants by weight, by start-time fair queueing (SFQ,
 *     Goyal et al. 1996): an item gets the start tag max(V, F) where V is
 *     its class's virtual time (the start tag of the last item picked) and
 *     F its tenant's last finish tag; its finish tag is start + 1/weight;
 *     the head with the smallest start tag goes first (ties: the smaller
 *     finish tag, i.e. the larger weight, then arrival).
 *     Bounds, with unit costs: over any run of picks in which tenants i
 *     and j both wait, |n_i/w_i - n_j/w_j| <= 1/w_i + 1/w_j (1:1:2 -> 25/
 *     25/50%, within a pick or two); a tenant with nothing waiting takes
 *     nothing (its share goes to the others at once) and keeps no credit;
 *     a tenant that comes back gets a start tag of at most V + 1/w (its
 *     last finish, if not yet passed) while every other waiting head has
 *     one >= V, so it is picked before any tenant j of its class gets more
 *     than 1 + w_j/w more picks; once its last finish is passed (a pause
 *     longer than one of its turns) its tag is V, which only a head at V
 *     with a smaller finish tag (a larger weight, or the same and older)
 *     can tie: at most one pick of each such tenant comes first. Its
 *     share is back from its first pick on.
 *
 * Invariants: an item is in at most one queue; q->n is the sum of the
 * classes' counts and of their flows' counts; a flow with no items is
 * kept only while its finish tag is ahead of its class's virtual time
 * (after that, forgetting it changes no tag), so memory is O(items +
 * recently active tenants). Cost: push, take and remove are O(tenants of
 * the class) (a list scan; tenants per limit are few).
 */
#ifndef STG_CORE_FAIRQ_H
#define STG_CORE_FAIRQ_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "stagger/priority.h"

/* The default floor: one pick in 20 (5%) for a waiting class below the
 * first. */
#define STG__FQ_FLOOR_EVERY 20

struct stg__fq_flow;

/* One waiting item, inside the caller's struct. Zero it before its first
 * push; it is the caller's memory throughout. */
typedef struct stg__fq_item {
    struct stg__fq_item *next, *prev;
    struct stg__fq_flow *flow; /* NULL when in no queue */
    double start;              /* SFQ start tag */
    double finish;             /* start + 1/weight: breaks ties */
    uint64_t seq;              /* arrival, breaks ties */
    int cls;                   /* class index 0..STG_N_PRIORITIES-1 */
} stg__fq_item;

/* One tenant of one class (the queue's own memory). */
typedef struct stg__fq_flow {
    struct stg__fq_flow *next; /* the class's list */
    stg__fq_item *head, *tail;
    size_t n;
    double finish; /* finish tag of its last item */
    char tenant[STG_TENANT_MAX + 1];
} stg__fq_flow;

typedef struct stg__fq_class {
    stg__fq_flow *flows;
    size_t n;         /* items */
    double vtime;     /* start tag of the last pick */
    unsigned starved; /* picks of other classes since it last got one, while it waited */
} stg__fq_class;

typedef struct stg__fairq {
    stg__fq_class c[STG_N_PRIORITIES];
    size_t n;
    uint64_t seq;
    unsigned floor_every; /* 0: no floor */
} stg__fairq;

/* An empty queue. floor_every: a waiting class below the first gets at
 * least one pick in that many (0: STG__FQ_FLOOR_EVERY; 1 would make it
 * plain round robin of classes; UINT32_MAX-ish: practically none). */
void stg__fq_init(stg__fairq *q, unsigned floor_every);

/* Free the flows. The items are the caller's; the queue is empty after. */
void stg__fq_free(stg__fairq *q);

/* Append it for cls (priority out of range reads as normal; tenant NULL or
 * "" is the class's default tenant; weight <= 0 reads as 1). STG_OK, or
 * STG_ENOMEM (a new tenant's flow; it is then in no queue). */
int stg__fq_push(stg__fairq *q, stg__fq_item *it, const stg_class *cls);

/* The item the next pick serves (NULL when empty). Does not change q. */
stg__fq_item *stg__fq_peek(const stg__fairq *q);

/* Serve it (normally stg__fq_peek's; any item in q is accepted, when the
 * caller served it otherwise): it leaves q, and the virtual time and the
 * floor count it as a pick. */
void stg__fq_take(stg__fairq *q, stg__fq_item *it);

/* stg__fq_push for an item that costs cost (> 0; else 1) where
 * stg__fq_push's cost 1: its finish tag is start + cost/weight, so tenants
 * share by weight what the picks cost, not their count (the quota queue:
 * a token quota's grants by tokens). The bounds above hold in cost, with
 * 1/w read as c_max/w (c_max the largest cost of an item of the tenant). */
int stg__fq_push_cost(stg__fairq *q, stg__fq_item *it, const stg_class *cls, double cost);

/* stg__fq_take(q, stg__fq_peek(q)); NULL when empty. */
stg__fq_item *stg__fq_pop(stg__fairq *q);

/* it leaves q without being served (cancelled, a deadline): no pick. */
void stg__fq_remove(stg__fairq *q, stg__fq_item *it);

/* Items waiting in class index ci (0..STG_N_PRIORITIES-1). */
static inline size_t stg__fq_class_len(const stg__fairq *q, int ci)
{
    return q->c[ci].n;
}

/* The class index of a priority (out of range: normal's). */
static inline int stg__fq_class_index(int priority)
{
    if (priority < STG_PRIORITY_MIN || priority > STG_PRIORITY_MAX)
        priority = STG_PRIORITY_NORMAL;
    return STG_PRIORITY_INDEX(priority);
}

#endif /* STG_CORE_FAIRQ_H */
