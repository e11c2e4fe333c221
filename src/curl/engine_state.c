/*
 * The engine's lifecycle as a state machine: a request's states, their
 * printable names, the one table of legal moves, the functions that make
 * every move (enter, leave, schedule, requeue), a trace of each move on
 * demand, and the pass's pump. curl's CURLMstate and mstate() are the
 * model (lib/multihandle.h, lib/multi.c), and SQLite's pager.c, whose
 * transitions are listed and asserted in one place.
 *
 * A request's state is its place (req.where) and, in the timer heap, what
 * it waits for (req.wait): one rq_state names the pair. The diagram,
 * every arrow a row of `moves` below (any state may also go to FINISHED:
 * a cancel, a deadline, an error):
 *
 *   SUBMIT -> NEW -+-> CONC_Q -----------------------------> RETRY
 *                  |                                           |
 *   RETRY ---------+-> ACTIVE -+-> RETRY (resend, redirect)    |
 *    (admission:   |           +-> BACKOFF / BUDGET timer      |
 *     NEW, RETRY   +-> LIMITER timer -> ACTIVE | BREAKER timer |
 *     and a PACE   +-> PACE timer -> admission again           |
 *     timer)       +-> PACE_Q -> RETRY (promoted to the head)  |
 *                  |   PACE_Q -> admission (a head stepped back) |
 *                  +-> BREAKER / QUOTA timer -> RETRY  <-------+
 *                  +-> QUOTA_Q timer -> RETRY (promoted to quota head)
 *   BUDGET timer -> RETRY | BUDGET_HELD timer -> RETRY
 *
 * Who moves: engine.c submits (SUBMIT -> NEW); engine_admit.c admits
 * (a queue or a PACE timer -> a wait, CONC_Q, PACE_Q or ACTIVE; a due
 * timer -> its next state); engine_done.c ends an attempt (ACTIVE ->
 * RETRY or a timer); engine_conc.c, engine_budget.c and a breaker's change
 * (engine_req.c) wake waiters to RETRY; engine_early.c makes a backoff's
 * timer due now (no move of its own: the timer's expiry makes it);
 * engine_finish.c ends a request
 * (-> FINISHED). Admission and completion never call each other: both make
 * their moves here, and the pump (stg__eng_pump) runs them in turn.
 *
 * Invariants: a move leaves a place (stg__eng_leave, which remembers the
 * state left in req.from) and enters the next (stg__eng_enter), and the
 * pair (from, to) is a row of `moves`: STG_ASSERT stops any other (on in
 * Debug and test builds). Between the two the request is in RQ_NONE, in
 * no structure, touched only by the function moving it. The trace, when
 * on, prints every move exactly once, in order, with its name.
 *
 * The trace: STAGGER_TRACE in the environment when the engine is made:
 * "1" or "stderr" for standard error, "0" or empty for none, anything
 * else a file appended to. One line per move:
 *   stagger-trace t=<engine us> req=<id> <from> -> <to> (<move>)
 * It names states and moves only: no URL, no header, so no secret.
 */
#include <stdlib.h>
#include <string.h>
#include <limits.h>

#include "curl/engine.h"

static const char *const state_names[RQ_S_COUNT] = {
    [RQ_S_SUBMIT] = "submit",
    [RQ_S_NEW] = "new",
    [RQ_S_RETRY] = "retry",
    [RQ_S_ACTIVE] = "active",
    [RQ_S_PACE_Q] = "pace_q",
    [RQ_S_CONC_Q] = "conc_q",
    [RQ_S_BACKOFF] = "timer:backoff",
    [RQ_S_LIMITER] = "timer:limiter",
    [RQ_S_BREAKER] = "timer:breaker",
    [RQ_S_PACE] = "timer:pace",
    [RQ_S_BUDGET] = "timer:budget",
    [RQ_S_BUDGET_HELD] = "timer:budget_held",
    [RQ_S_QUOTA] = "timer:quota",
    [RQ_S_QUOTA_Q] = "timer:quota_q",
    [RQ_S_FINISHED] = "finished",
};

/* Admission's outcomes, from any state it starts from (a queue, or the
 * pace head's timer): a host slot to wait for (queues only), the send, a
 * place behind the pace head, the pace head's or a reservation's timer,
 * an open breaker's or a server quota's wait (the quota head's timer, or a
 * place behind the quota head). */
#define ADMISSION(from)                                                                            \
    [from][RQ_S_ACTIVE] = "send", [from][RQ_S_PACE_Q] = "behind the pace head",                    \
    [from][RQ_S_PACE] = "pace head waits", [from][RQ_S_LIMITER] = "reserve",                       \
    [from][RQ_S_BREAKER] = "breaker open", [from][RQ_S_QUOTA] = "quota wait",                      \
    [from][RQ_S_QUOTA_Q] = "behind the quota head"

/* The legal moves: moves[from][to] names the move, NULL when illegal.
 * FINISHED is reached from every state (see stg__eng_move_name). */
static const char *const moves[RQ_S_COUNT][RQ_S_COUNT] = {
    [RQ_S_SUBMIT][RQ_S_NEW] = "submit",
    ADMISSION(RQ_S_NEW),
    [RQ_S_NEW][RQ_S_CONC_Q] = "wait for a host slot",
    ADMISSION(RQ_S_RETRY),
    [RQ_S_RETRY][RQ_S_CONC_Q] = "wait for a host slot",
    /* the pace head asks again, or steps back for a higher class (or a
     * tenant's turn) that came meanwhile, which then asks at once */
    [RQ_S_PACE][RQ_S_PACE_Q] = "step back for a higher class",
    [RQ_S_PACE_Q][RQ_S_ACTIVE] = "send (the head stepped back)",
    [RQ_S_PACE_Q][RQ_S_LIMITER] = "reserve (the head stepped back)",
    [RQ_S_PACE_Q][RQ_S_PACE] = "pace head waits (the head stepped back)",
    [RQ_S_PACE_Q][RQ_S_BREAKER] = "breaker open",
    [RQ_S_PACE_Q][RQ_S_QUOTA] = "quota wait",
    [RQ_S_PACE_Q][RQ_S_QUOTA_Q] = "behind the quota head",
    [RQ_S_PACE][RQ_S_ACTIVE] = "send",
    [RQ_S_PACE][RQ_S_PACE] = "pace head waits",
    [RQ_S_PACE][RQ_S_LIMITER] = "reserve",
    [RQ_S_PACE][RQ_S_BREAKER] = "breaker open",
    [RQ_S_PACE][RQ_S_QUOTA] = "quota wait",
    [RQ_S_PACE][RQ_S_QUOTA_Q] = "behind the quota head",
    /* a reservation's instant: the send, unless a shared breaker refuses */
    [RQ_S_LIMITER][RQ_S_ACTIVE] = "send",
    [RQ_S_LIMITER][RQ_S_BREAKER] = "breaker open",
    /* an attempt's end */
    [RQ_S_ACTIVE][RQ_S_RETRY] = "resend or redirect",
    [RQ_S_ACTIVE][RQ_S_BACKOFF] = "backoff",
    [RQ_S_ACTIVE][RQ_S_BUDGET] = "budget spent: backoff",
    /* waits that end in admission again */
    [RQ_S_BACKOFF][RQ_S_RETRY] = "backoff over",
    [RQ_S_BREAKER][RQ_S_RETRY] = "breaker wait over",
    [RQ_S_QUOTA][RQ_S_RETRY] = "quota wait over",
    [RQ_S_PACE_Q][RQ_S_RETRY] = "promoted to pace head",
    [RQ_S_QUOTA_Q][RQ_S_RETRY] = "promoted to quota head",
    [RQ_S_CONC_Q][RQ_S_RETRY] = "host slot given",
    [RQ_S_BUDGET][RQ_S_RETRY] = "budget allows",
    [RQ_S_BUDGET][RQ_S_BUDGET_HELD] = "held for the budget",
    [RQ_S_BUDGET_HELD][RQ_S_RETRY] = "budget allows",
    [RQ_S_BUDGET_HELD][RQ_S_BUDGET_HELD] = "held for the budget",
};

const char *stg__eng_state_name(rq_state s)
{
    return (unsigned)s < RQ_S_COUNT ? state_names[s] : "unknown";
}

const char *stg__eng_move_name(rq_state from, rq_state to)
{
    if ((unsigned)from >= RQ_S_COUNT || (unsigned)to >= RQ_S_COUNT)
        return NULL;
    if (to == RQ_S_FINISHED)
        return from == RQ_S_FINISHED ? NULL : "finish";
    return moves[from][to];
}

rq_state stg__eng_state_of(rq_where w, rq_wait wait)
{
    switch (w) {
    case RQ_NEW_Q: return RQ_S_NEW;
    case RQ_RETRY_Q: return RQ_S_RETRY;
    case RQ_ACTIVE: return RQ_S_ACTIVE;
    case RQ_PACE_Q: return RQ_S_PACE_Q;
    case RQ_CONC_Q: return RQ_S_CONC_Q;
    case RQ_TIMER:
        switch (wait) {
        case W_BACKOFF: return RQ_S_BACKOFF;
        case W_LIMITER: return RQ_S_LIMITER;
        case W_BREAKER: return RQ_S_BREAKER;
        case W_PACE: return RQ_S_PACE;
        case W_BUDGET: return RQ_S_BUDGET;
        case W_BUDGET_HELD: return RQ_S_BUDGET_HELD;
        case W_QUOTA: return RQ_S_QUOTA;
        case W_QUOTA_Q: return RQ_S_QUOTA_Q;
        }
        break;
    case RQ_NONE: break;
    }
    return RQ_S_COUNT; /* not a state */
}

/* ---- the trace ----------------------------------------------------------- */

void stg__eng_trace_open(stg_engine *e)
{
    const char *v = getenv("STAGGER_TRACE");
    e->trace = NULL;
    e->trace_owned = false;
    if (!v || !*v || !strcmp(v, "0"))
        return;
    if (!strcmp(v, "1") || !strcmp(v, "stderr")) {
        e->trace = stderr;
        return;
    }
    e->trace = fopen(v, "a");
    if (!e->trace) {
        fprintf(stderr, "stagger: STAGGER_TRACE: cannot open %s for the trace\n", v);
        return;
    }
    e->trace_owned = true;
}

void stg__eng_trace_close(stg_engine *e)
{
    if (e->trace_owned)
        fclose(e->trace);
    e->trace = NULL;
    e->trace_owned = false;
}

static void trace(const stg_engine *e, const req *r, rq_state from, rq_state to, const char *move)
{
    if (!e->trace)
        return;
    fprintf(e->trace, "stagger-trace t=%lld req=%llu %s -> %s (%s)\n", (long long)e->now,
            (unsigned long long)r->id, stg__eng_state_name(from), stg__eng_state_name(to), move);
    fflush(e->trace);
}

/* ---- the moves ----------------------------------------------------------- */

void stg__eng_leave(req *r, rq_where w)
{
    STG_ASSERT(r->where == w);
    if (w == RQ_TIMER)
        stg__eng_early_forget(r); /* its backoff ends, cut short or not */
    r->from = stg__eng_state_of(w, r->wait);
    r->where = RQ_NONE;
}

void stg__eng_enter(stg_engine *e, req *r, rq_where w)
{
    STG_ASSERT(r->where == RQ_NONE);
    rq_state to = stg__eng_state_of(w, r->wait);
    const char *move = stg__eng_move_name(r->from, to);
    STG_ASSERT(move != NULL); /* a row of `moves` */
    trace(e, r, r->from, to, move ? move : "ILLEGAL");
    stg__eng_account(e, r, stg__eng_acct_of(r, w)); /* the time it spent where it was */
    r->where = w;
    if ((w == RQ_NEW_Q || w == RQ_RETRY_Q) && !r->queued) {
        r->queued = true; /* ready: waits for admission from now (engine.h) */
        r->ready_us = e->now;
        r->crow->st.waiting++;
        stg__eng_early_queued(e, r->host, 1);
    }
    if (r->conc_held && !conc_keeps(r, w))
        stg__eng_conc_release(e, r);
    if (r->qt && !r->quota_held) { /* settled: nothing held until the next send */
        free(r->qt);
        r->qt = NULL;
    }
    stg__eng_check(e, r);
}

void stg__eng_finished(stg_engine *e, req *r)
{
    /* Before detach takes r out of its place (without a leave): its state
     * is the place it is in, or the one it left when it is between two. */
    rq_state from = r->where != RQ_NONE ? stg__eng_state_of(r->where, r->wait) : r->from;
    STG_ASSERT(stg__eng_move_name(from, RQ_S_FINISHED) != NULL);
    trace(e, r, from, RQ_S_FINISHED, "finish");
    r->from = RQ_S_FINISHED;
}

void stg__eng_schedule(stg_engine *e, req *r, rq_wait kind, int64_t wait_us)
{
    if (wait_us < 0)
        wait_us = 0;
    int64_t due = e->now > INT64_MAX - wait_us ? INT64_MAX : e->now + wait_us;
    if (!stg__heap_push(&e->timers, due, r, &r->heap_index)) {
        snprintf(r->errtext, sizeof r->errtext, "out of memory");
        stg__eng_finish(e, r, STG_REASON_CANCELLED);
        return;
    }
    r->wait = kind;
    stg__eng_enter(e, r, RQ_TIMER);
}

void stg__eng_requeue(stg_engine *e, req *r, bool front)
{
    stg__eng_enter(e, r, RQ_RETRY_Q);
    if (front)
        stg__eng_q_push_front(&e->retry_q, r);
    else
        stg__eng_q_push(&e->retry_q, r);
}

void stg__eng_untimer(stg_engine *e, req *r)
{
    stg__heap_remove(&e->timers, r->heap_index);
    stg__eng_leave(r, RQ_TIMER);
}

/* ---- the pump ------------------------------------------------------------ */

void stg__eng_pump(stg_engine *e)
{
    stg__eng_process_done(e); /* attempts that ended: completion's moves */
    stg__eng_fire_timers(e);  /* waits that are due: their next state */
    stg__eng_start_ready(e);  /* the queues, while slots are free: admission */
}
