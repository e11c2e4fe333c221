/*
 * Internal: the work queue's pick (issue #32, docs/queue.md "Order"), a
 * pure model of what the claim script of src/redis/queue_lua.c decides,
 * as src/core/prio_gcra.c is the model of the limiter's script: unit tests
 * run it in virtual time (tests/unit/test_qpick.c) and a differential test
 * (tests/integration/test_queue_prio.c) checks, claim by claim against a
 * real redis-server, that the script hands out jobs in exactly the order it
 * says. No I/O, no clock, no allocation: the caller owns the lanes.
 *
 * A lane is the queue's jobs of one (class, tenant) not yet handed out
 * (`unread`, in Redis a stream and its consumer group's unread entries).
 * The order of a pick is src/core/fairq.c's, with the same floor constant
 * (STG__FQ_FLOOR_EVERY), so a worker's own queues and the shared queue
 * agree:
 *  1. classes strictly by number (interactive, normal, batch), except
 *  2. the floor: a class below the first with waiting jobs that has waited
 *     through floor_every - 1 picks of the others gets the next one (the
 *     most starved first): while it waits it has at least one pick in
 *     every floor_every + N - 2 (N the classes; one in floor_every when one
 *     class waits below the first: 5% by default);
 *  3. within a class, lanes (tenants) by start-time fair queueing on their
 *     weight: the head of lane l has the start tag max(V, F_l) (V the
 *     class's virtual time, the start tag of its last pick; F_l the lane's
 *     finish tag, that of its last pick) and the finish tag start + 1/w_l;
 *     the smallest start tag goes first (ties: the smaller finish tag, i.e.
 *     the larger weight, then the lower lane number). A pick sets
 *     V = max(V, start) and F_l = finish. Tags are given when a lane's head
 *     is picked, not when a job is loaded: for a lane with a backlog that is
 *     the same as fairq.c's tags, and a lane that was empty starts at V
 *     (no credit for idle time; picked at once, before any lane at V with a
 *     smaller weight). Over picks in which lanes i and j both wait,
 *     |n_i/w_i - n_j/w_j| <= 1/w_i + 1/w_j: 1:1:2 gives 25/25/50% within
 *     one pick per lane.
 *
 * Invariants: unread >= 0; a lane with unread 0 is never picked; V of a
 * class never decreases, nor F of a lane; a class's `starved` is 0 while it
 * has no waiting job (a pick of it, or of none of its lanes, resets it).
 */
#ifndef STG_CORE_QPICK_H
#define STG_CORE_QPICK_H

#include <stddef.h>
#include <stdint.h>

#include "stagger/priority.h"

typedef struct stg__qpick_lane {
    int cls;        /* class index 0..STG_N_PRIORITIES-1 (interactive 0) */
    double weight;  /* > 0 (<= 0 reads as 1) */
    double finish;  /* F: finish tag of its last pick */
    int64_t unread; /* jobs waiting in it */
} stg__qpick_lane;

typedef struct stg__qpick {
    stg__qpick_lane *lanes; /* the caller's; lane number = index */
    size_t n;
    double vtime[STG_N_PRIORITIES];      /* V per class */
    unsigned starved[STG_N_PRIORITIES];  /* picks of other classes while it waited */
    unsigned floor_every;                /* 0: STG__FQ_FLOOR_EVERY */
} stg__qpick;

/* The lane the next pick takes (-1: nothing waits). Does not change p. */
int stg__qpick_next(const stg__qpick *p);

/* Take one job from lane l (unread > 0): the tags and the floor count it. */
void stg__qpick_take(stg__qpick *p, int l);

/* A lane's weight as the model and the script read it (<= 0: 1). */
static inline double stg__qpick_weight(double w)
{
    return w > 0 ? w : 1.0;
}

#endif
