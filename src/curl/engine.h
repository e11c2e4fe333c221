/*
 * The engine's internals, shared by its files (never installed):
 *   engine.c        the public API and the loop (poll, clock, passes);
 *   engine_state.c  the lifecycle: states, their names, the table of legal
 *                   moves, the moves themselves, the trace, the pump;
 *   engine_ids.c    the id -> request map;
 *   engine_req.c    where a request is: queues, the easy-handle pool,
 *                   events, detach (leave any place);
 *   engine_admit.c  admission: breaker, limiter, pacing of a learned rate,
 *                   quotas, timers, the attempt's start;
 *   engine_budget.c a spent retry budget's waits;
 *   engine_early.c  a backoff after a throttle cut short when the host is
 *                   idle and has answered since;
 *   engine_done.c   completion: an attempt's end (the attempt step shared
 *                   with stg_curl_perform), redirect hops;
 *   engine_settle.c a send's quota reservation settled or given back;
 *   engine_finish.c the last move: report, the done callback, free;
 *   engine_conc.c   a learned per-host concurrency: its slots and waiters;
 *   engine_class.c  the classes and tenants: one row of figures each.
 *
 * Where a request is (req.where) is exactly one place at any time outside
 * the function moving it: the new queue, the retry queue, the timer heap,
 * the multi (ACTIVE), its host's pace queue (PACE_Q), or its host's
 * concurrency queue (CONC_Q, waiting for a learned slot); RQ_NONE only
 * between leaving one place and entering the next, or while finishing.
 * The place and the wait (req.wait, in the timer heap) make its state
 * (rq_state); engine_state.c has the diagram and the table of legal moves,
 * which stg__eng_enter asserts on every move, and stg__eng_check the
 * bookkeeping that goes with a place (heap index, easy handle,
 * reservation). A turn in its host's pace queue (`pacing`,
 * host->pace_fq) is an order, not a place: its head (host->pace_head) is
 * in the retry queue or a W_PACE timer while it asks the limiter, the
 * others are in PACE_Q. A wait for its host's quotas (`quota_waiting`,
 * r->qq, one queue per group of routes that share a quota) is the same:
 * its head (qq->head) asks the quotas (the retry queue, a W_QUOTA timer,
 * anywhere admission takes it),
 * the others wait in a W_QUOTA_Q timer (their deadline) until promoted;
 * its item is r->qfq, not r->fq (a quota waiter may wait in CONC_Q too).
 *
 * Classes and tenants (docs/priorities.md): the new queue, a host's pace
 * queue and a host's concurrency queue are fair queues (core/fairq.h:
 * classes strictly by number with a floor, tenants by weight), and a
 * request is in at most one of them, through its one item r->fq (NEW_Q,
 * CONC_Q and pacing never overlap). A request is `queued` (counted in its
 * class row's waiting) from the moment it is ready (NEW_Q, or the retry
 * queue when it was not queued) until its attempt starts or it ends
 * (stg__eng_enter, start_attempt, stg__eng_req_free).
 *
 * Every move into a place (stg__eng_enter) and the finish close the time
 * spent in the previous one (stg__eng_account): a request's WAITED events
 * and its ACTIVE spans tile its life in the engine, from submit to finish,
 * with no gap and no overlap (RQ_NONE lasts no time on the engine's clock).
 */
#ifndef STAGGER_CURL_ENGINE_H
#define STAGGER_CURL_ENGINE_H

#include <stdatomic.h>
#include <stddef.h>

#include "curl/engine_class.h"
#include "curl/internal.h"
#include "util/assert.h"
#include "util/list.h"

#define DEFAULT_CONCURRENCY 30

/* How far ahead a request may reserve an adaptive-rate slot (see admit). */
#define PACE_HORIZON_US STG_MS(50)

typedef enum rq_where {
    RQ_NONE = 0,
    RQ_NEW_Q = 1,
    RQ_RETRY_Q = 2,
    RQ_TIMER = 3,
    RQ_ACTIVE = 4,
    RQ_PACE_Q = 5, /* behind its host's pace head (see "pacing"), holding a
                      slot */
    RQ_CONC_Q = 6  /* waiting for its host's learned concurrency
                      (engine_conc.c), holding nothing */
} rq_where;

typedef enum rq_wait {
    W_BACKOFF = 1, /* then through admission again */
    W_LIMITER = 2, /* a reservation: then straight to the attempt */
    W_BREAKER = 3, /* then through admission again */
    W_PACE = 4,    /* the host's pace head, beyond the horizon: holds the
                      slot, then asks the limiter again */
    W_BUDGET = 5,  /* a retry the spent budget refused (budget_wait): its
                      backoff, then budget_gate() */
    W_BUDGET_HELD = 6, /* held by budget_gate() until its host's over-budget
                      retry ends or the budget refills (or its deadline) */
    W_QUOTA = 7,   /* a server quota (stg_quota) said not yet: holds no
                      slot, then through admission again (the host's
                      quota head: see "quota_waiting") */
    W_QUOTA_Q = 8  /* behind its host's quota head, holding nothing, until
                      promoted to head (then the retry queue) or its
                      deadline (the timer's instant: it ends) */
} rq_wait;

/* A request's state: its place, and in the timer heap what it waits for
 * (engine_state.c: names, legal moves, trace). SUBMIT is 0: a request just
 * allocated (calloc) has left nothing yet. */
typedef enum rq_state {
    RQ_S_SUBMIT = 0,
    RQ_S_NEW,
    RQ_S_RETRY,
    RQ_S_ACTIVE,
    RQ_S_PACE_Q,
    RQ_S_CONC_Q,
    RQ_S_BACKOFF,     /* RQ_TIMER, W_BACKOFF */
    RQ_S_LIMITER,     /* RQ_TIMER, W_LIMITER */
    RQ_S_BREAKER,     /* RQ_TIMER, W_BREAKER */
    RQ_S_PACE,        /* RQ_TIMER, W_PACE */
    RQ_S_BUDGET,      /* RQ_TIMER, W_BUDGET */
    RQ_S_BUDGET_HELD, /* RQ_TIMER, W_BUDGET_HELD */
    RQ_S_QUOTA,       /* RQ_TIMER, W_QUOTA */
    RQ_S_QUOTA_Q,     /* RQ_TIMER, W_QUOTA_Q */
    RQ_S_FINISHED,
    RQ_S_COUNT
} rq_state;

typedef struct req {
    uint64_t id;
    stg__host *host;
    char *url;       /* the current hop's; origin's string until a hop */
    char *url_red;   /* the submitted URL redacted; origin's string when
                        the same */
    char *final_url; /* redacted, of the last attempt */
    stg_method method;
    struct curl_slist *headers;
    char *body;
    size_t body_len;
    bool has_body;
    bool has_key;
    stg_done_fn done;
    void *data;

    rq_where where;
    rq_wait wait;
    rq_state from;      /* the state it left last (stg__eng_leave) */
    size_t heap_index;
    stg__link q_link;   /* in the retry queue (RQ_RETRY_Q) */
    CURL *easy;
    bool reserved;      /* holds a limiter reservation and a slot */
    bool probe_claimed; /* the breaker admitted the current attempt */
    bool shared_probe;  /* the shared breaker admitted it: record the outcome */
    bool over_budget;   /* its host's one retry let past a spent budget */
    /* Backing off after a throttle that gave no hint, on a host with an
     * adaptive rate (engine_early.c): in its host's early list by
     * early_link, since its host's answered count was early_mark. */
    bool early;
    stg__link early_link;
    int64_t early_mark;
    bool pacing;        /* in its host's pace queue (fq in host->pace_fq):
                           a promoted head is in it and the retry queue */
    int64_t ticket;     /* the shared limiter's, for on_response */
    /* Server quotas (cfg.quotas): the cost copied at submit, and what the
     * current send reserved (held from admission to its answer): qt is
     * allocated only for a ticket that holds something (NULL holds
     * nothing, which settle and cancel accept), and freed when r goes to
     * wait without one (stg__eng_enter): 528 bytes a waiting request need not
     * carry. */
    stg_quota_cost *cost;
    size_t n_cost;
    stg_quota_ticket *qt;
    bool quota_held;
    bool quota_waiting; /* in its quota queue (qfq in qq->fq): refused by
                           the quotas, or come while others that share one
                           of its route's quotas wait for them, not yet
                           granted; the queue's head (qq->head) is the one
                           that asks, the others wait in W_QUOTA_Q
                           (engine_admit.c) */
    unsigned char qset; /* its key set in qq->sets (quota_waiting) */
    stg__fq_item qfq;
    struct stg__quota_q *qq; /* the queue qfq is in (quota_waiting) */
    /* With cfg.shared_quotas: the shared ledger's ticket of the current
     * send (held with quota_held, settled with it; NULL: none). */
    void *sq;
    /* An AI API request's parts (ai_cost.c), read from its body at submit
     * when the engine estimates costs (NULL: not one, or not estimating),
     * and its current send's number in its host's cost model (0: none). */
    stg_cost_parts *parts;
    int64_t cost_seq;
    bool conc_held;     /* holds one of its host's learned slots */
    bool conc_woken;    /* handed a slot from its host's CONC_Q: keeps it
                           through the retry queue (engine_conc.c, wake) */

    stg__xfer x;
    stg_retry_state rs;
    bool started;
    int64_t attempt_start_us;
    int status;
    stg_net_error err;
    int curl_code;
    int64_t server_wait_us;
    char errtext[256];

    /* Redirects (engine_done.c): followed as hops through admission. */
    bool follow;
    int max_redirects, hops;
    int refused;                /* never-processed resends (attempt.c): sends, not retries */
    char *origin;               /* the submitted URL: secrets go to its origin only */
    char **secret;              /* extra secret header names, NULL-terminated; may be NULL */
    struct curl_slist *stripped; /* headers without secrets, built on the first
                                    cross-origin hop */
    bool off_origin;            /* the current hop is on another origin */
    struct stg_engine *engine;  /* for the attempt step's report */

    /* Per-request overrides (stg_request): the engine's policy, or its
     * own copy (own_pol, freed with r: the request's policy or the
     * engine's) with the request's deadline and
     * attempts (a pointer: most requests share the engine's 300 bytes);
     * a body read as it is sent (never retried). */
    const stg_policy *pol;
    stg_policy *own_pol;
    /* Its class and tenant (stg_request; tenant copied, NULL: none), its
     * turn in the fair queue it waits in (see the top), its class row,
     * and since when it waits for admission (queued). */
    int prio;
    char *tenant;
    double weight;
    stg__fq_item fq;
    stg__class_row *crow;
    bool queued;
    int64_t ready_us;
    stg_read_fn read_body;
    void *read_data;

    /* Where its time goes (stg__eng_account): what it waits for since
     * acct_since (an ACCT_*), on the engine's clock. */
    int acct;
    int64_t acct_since;
} req;

/* What a request's time in a place is (stg__eng_account): on the wire, or
 * one of the waits a WAITED event names (stg_event_more.waited_for). */
enum {
    ACCT_NONE = 0, /* not submitted yet, or finished */
    ACCT_ACTIVE,   /* an attempt on the wire: not a wait */
    ACCT_SLOT,
    ACCT_LIMITER,
    ACCT_QUOTA,
    ACCT_PACE,
    ACCT_CONCURRENCY,
    ACCT_BREAKER,
    ACCT_BACKOFF,
    ACCT_BUDGET,
};

typedef stg__list queue; /* of req, by q_link */

struct stg_engine {
    stg_engine_config cfg;
    stg_concurrency_config learn; /* cfg.learn points here when set */
    stg_policy pol;
    int concurrency;
    CURLM *multi;
    stg_rng rng;
    int64_t now, wall;
    stg__heap timers;
    stg__hosts hosts;
    req **slots; /* id -> request, open addressing */
    size_t slot_cap, count;
    queue retry_q;
    stg__fairq new_fq;    /* the new queue, in fair order (req.fq) */
    stg__classes classes; /* the classes and tenants (engine_class.c) */
    CURL **pool;
    size_t pool_n;
    int wake_fd;
    int ep;           /* epoll: libcurl's sockets, wake_fd, ext_fd (engine.c) */
    int ext_fd;       /* the caller's fd of stg_engine_run_fd, in ep; -1 none */
    bool ext_always;  /* ext_fd is one epoll cannot watch: always ready */
    int64_t curl_due; /* libcurl's timer, real monotonic us; 0 now, -1 none */
    int64_t sq_tick_at; /* cfg.shared_quotas' last tick (e->now) */
    uint8_t *fds;     /* by descriptor: what ep holds of libcurl's sockets */
    size_t fds_cap;
    atomic_bool stop;
    int active, reserved;
    uint64_t next_id;
    bool in_pass, closing;
    bool done_unread; /* a pass's later round finished a transfer: the next pass reads it at once */
    FILE *trace;      /* STAGGER_TRACE's stream (engine_state.c); NULL: off */
    bool trace_owned; /* trace is a file the engine opened */
    stg_engine_stats stats;
    /* What the events being made point at (stg_event.more), a ring: each
     * stg__eng_ev_init takes the next slot. Events are made on the
     * engine's thread, and between one's making and its emission others
     * may be made and emitted (an attempt's end flushes breaker changes,
     * which wake waiters, whose WAITED events are made then), but never
     * EV_MORE_RING deep; a sink may not call back into the engine. */
    /* Requests in each wait now (by ACCT_*; stg_engine_waiting), kept by
     * stg__eng_account. */
    int64_t waiting_now[ACCT_BUDGET + 1];
#define EV_MORE_RING 8
    stg_event_more ev_more[EV_MORE_RING];
    unsigned ev_more_next;
};

/* ---- the lifecycle (engine_state.c) ------------------------------------- */

/* "new", "timer:limiter", ...: static strings; "unknown" out of range. */
const char *stg__eng_state_name(rq_state s);
/* The name of the move from -> to, NULL when it is not a legal move. */
const char *stg__eng_move_name(rq_state from, rq_state to);
/* The state of a place and a wait (the wait counts in RQ_TIMER only);
 * RQ_S_COUNT for RQ_NONE. */
rq_state stg__eng_state_of(rq_where w, rq_wait wait);
/* STAGGER_TRACE, read when the engine is made; closed with it. */
void stg__eng_trace_open(stg_engine *e);
void stg__eng_trace_close(stg_engine *e);
/* r leaves place w (asserted), remembering its state in r->from. */
void stg__eng_leave(req *r, rq_where w);
/* r (in RQ_NONE) enters place w: the move from r->from is asserted legal
 * and traced; a learned slot r need not keep, and a settled quota ticket,
 * are given back. */
void stg__eng_enter(stg_engine *e, req *r, rq_where w);
/* The last move, called by stg__eng_finish before it detaches r: asserted,
 * traced. */
void stg__eng_finished(stg_engine *e, req *r);
/* r (in RQ_NONE) waits in the timer heap for wait_us; finished when out of
 * memory. */
void stg__eng_schedule(stg_engine *e, req *r, rq_wait kind, int64_t wait_us);
/* r (in RQ_NONE) goes to the retry queue: its tail, or its front. */
void stg__eng_requeue(stg_engine *e, req *r, bool front);
/* r leaves the timer heap (its entry removed). */
void stg__eng_untimer(stg_engine *e, req *r);
/* One pass's work: ended attempts, due timers, then admission. */
void stg__eng_pump(stg_engine *e);

/* ---- places (engine_req.c) ----------------------------------------------- */

/* r's bookkeeping matches its place: a heap index exactly in TIMER, an
 * easy handle exactly in ACTIVE, a reservation only in PACE_Q or a
 * W_LIMITER/W_PACE timer, PACE_Q only for a pace queue member. */
void stg__eng_check(const stg_engine *e, const req *r);

/* A learned slot is held from admission to the end of the attempt: a
 * request that goes to wait anywhere else (a backoff, the breaker, the
 * budget, the retry queue) gives it back. Except the host's pace head
 * handed on from the pace queue to the retry queue (stg__eng_pace_leave):
 * it was admitted, and the followers behind it hold the other slots while
 * they wait for it, so giving its slot back could leave it waiting for a
 * slot that only its own send frees (the demo's batch stopped with 200 in
 * flight, 10 reserved behind a head in the host's CONC_Q). */
static inline bool is_pace_head(const req *r)
{
    return r->pacing && r->host->pace_head == r;
}

static inline bool conc_keeps(const req *r, rq_where w)
{
    return w == RQ_ACTIVE || w == RQ_PACE_Q ||
           (w == RQ_RETRY_Q && (is_pace_head(r) || r->conc_woken)) ||
           (w == RQ_TIMER && (r->wait == W_LIMITER || r->wait == W_PACE));
}

/* r goes to w (ACCT_NONE: it finishes): the time since its last move is
 * what it spent where it was, a WAITED event when that was a wait and
 * lasted (engine_req.c). */
void stg__eng_account(stg_engine *e, req *r, int next);
int stg__eng_acct_of(const req *r, rq_where w);

/* The request whose fair-queue item it is. */
static inline req *fq_req(stg__fq_item *it)
{
    return STG__OWNER(it, req, fq);
}

/* The request whose quota-queue item (r->qfq) it is. */
static inline req *qfq_req(stg__fq_item *it)
{
    return STG__OWNER(it, req, qfq);
}

static inline stg_class req_class(const req *r)
{
    stg_class c = {r->prio, r->tenant, r->weight};
    return c;
}

/* r joins a host's fair queue *fq (its pace or concurrency queue, made on
 * first use) by its item r->fq, in its class and tenant's turn. False when
 * out of memory (r is then in no queue). */
bool stg__eng_fq_join(stg__fairq **fq, req *r);

/* An item leaves its fair queue: served (a pick: its tenant's turn moves
 * on) or not (its request ends, or waits elsewhere). */
static inline void stg__eng_fq_leave(stg__fairq *fq, stg__fq_item *it, bool served)
{
    if (served)
        stg__fq_take(fq, it);
    else
        stg__fq_remove(fq, it);
}

void stg__eng_q_push(queue *q, req *r);
void stg__eng_q_push_front(queue *q, req *r);
void stg__eng_q_unlink(queue *q, req *r);
void stg__eng_ev_init(stg_engine *e, req *r, stg_event_type type, stg_event *ev);
void stg__eng_emit(stg_engine *e, const stg_event *ev);
/* Emit the breaker changes queued by the host's on_change. */
void stg__eng_flush_breaker(stg_engine *e, stg__host *h);
CURL *stg__eng_pool_get(stg_engine *e);
void stg__eng_pool_put(stg_engine *e, CURL *easy);
void stg__eng_req_free(req *r);
/* Keep the ticket t an admission reserved as r's (r->qt; NULL when t holds
 * nothing). False when out of memory (t is then still the caller's). */
bool stg__eng_ticket_keep(req *r, const stg_quota_ticket *t);
/* rq's cost: valid (STG_EINVAL otherwise), and copied into r (false when
 * out of memory). */
int stg__eng_cost_check(const stg_request *rq);
/* r's route for the quota limiter: "METHOD /path" of its current URL,
 * never the query (secrets live there); paths cut at 400 bytes. */
void stg__eng_route(const req *r, char *buf, size_t size);
bool stg__eng_cost_copy(req *r, const stg_request *rq);
/* With cfg.quotas and estimation on: rq's parts when it is an AI API
 * request, into r->parts, and its host's cost model made (false when out
 * of memory). engine_req.c. */
bool stg__eng_cost_parts(stg_engine *e, req *r, const stg_request *rq);
/* What r costs now, per unit, into c[0..max): its stated costs, and for
 * each token unit it does not state, its host's model's estimate of its
 * parts. Returns the count. engine_req.c. */
size_t stg__eng_cost_now(const req *r, stg_quota_cost *c, size_t max);
int64_t stg__eng_remaining(const stg_engine *e, const req *r);
/* Take r out of whatever holds it (queue, heap, multi, slot counts). */
void stg__eng_detach(stg_engine *e, req *r);

/* ---- ids (engine_ids.c) -------------------------------------------------- */

bool stg__eng_map_put(stg_engine *e, req *r);
size_t stg__eng_map_find(const stg_engine *e, uint64_t id);
void stg__eng_map_del(stg_engine *e, uint64_t id);

/* ---- admission (engine_admit.c) ------------------------------------------ */

/* r no longer waits for its host's quotas (it ends): it leaves their fair
 * queue; if it was the head, the next one goes to the front of the retry
 * queue to ask. */
void stg__eng_quota_unwait(stg_engine *e, req *r);
/* r leaves its host's pace queue (not served); the next one, if r was the
 * head, goes to the front of the retry queue. */
void stg__eng_pace_leave(stg_engine *e, req *r);
/* The queues, while slots are free: each request through admission. */
void stg__eng_start_ready(stg_engine *e);
/* A request can leave a queue for admission now: a free slot, and a
 * retry, or a new request whose class's headroom leaves it that slot. */
bool stg__eng_can_start(const stg_engine *e);
/* Due timers: each request to its next state. */
void stg__eng_fire_timers(stg_engine *e);

/* ---- a spent retry budget (engine_budget.c) ------------------------------ */

/* A W_BUDGET or W_BUDGET_HELD request (in RQ_NONE) is due or woken: to
 * the retry queue, held again, or finished at its deadline. */
void stg__eng_budget_gate(stg_engine *e, req *r);
/* Wake h's held retries when its budget allows. */
void stg__eng_budget_release(stg_engine *e, stg__host *h);

/* ---- a throttle's backoff cut short (engine_early.c) --------------------- */

/* r (in RQ_NONE), refused by a throttle with no hint on a host with an
 * adaptive rate, is about to back off (W_BACKOFF or W_BUDGET): its wait
 * may be cut short once its host has answered another request. */
void stg__eng_early_note(req *r);
/* r leaves its backoff (or ends): out of its host's early list. */
void stg__eng_early_forget(req *r);
/* h answered a request (not a throttle, not a fault): count it, and cut
 * a wait short if h is idle. */
void stg__eng_early_answered(stg_engine *e, stg__host *h);
/* h's requests waiting for admission: one more (r became queued), or one
 * fewer (r was admitted or ended); at none, cut a wait short. */
void stg__eng_early_queued(stg_engine *e, stg__host *h, int delta);

/* ---- learned concurrency (engine_conc.c) --------------------------------- */

/* r gives its learned slot back; the host's oldest waiter takes it. */
void stg__eng_conc_release(stg_engine *e, req *r);

/* The sum of the hosts' learned limits (stats). */
int stg__eng_conc_sum(const stg_engine *e);
/* r leaves a queue to be admitted: true when it may (it then holds a slot
 * of its host's), false when it waits in its host's CONC_Q. */
bool stg__eng_conc_gate(stg_engine *e, req *r);
/* r's attempt ended: a sample for its host's controller. */
void stg__eng_conc_sample(stg_engine *e, req *r);
/* Take r off its host's CONC_Q (detach). */
void stg__eng_conc_unlink(req *r);

/* ---- completion (engine_done.c) ------------------------------------------ */

/* The attempts libcurl reports ended: each to its next state. */
void stg__eng_process_done(stg_engine *e);

/* ---- quota settling (engine_settle.c) ------------------------------------ */

/* Settle the reservation of r's send with its answer (answered), as spent
 * (no answer), or give it back (unsent: it never reached the server); its
 * host's cost model learns of the send either way. */
void stg__eng_quota_settle(stg_engine *e, req *r, bool answered, bool unsent);
/* r ends holding a reservation it never sent on: given back. */
void stg__eng_quota_return(stg_engine *e, req *r);
/* The head of r's answer (arg) with this status arrived (xfer.c on_head,
 * from inside libcurl's header callback): a 2xx's quotas are learned now
 * (stg_quota_head). Touches the quota limiter only. */
void stg__eng_head(void *arg, int status);

/* ---- the last move (engine_finish.c) ------------------------------------- */

/* Finish r: leave every structure, report, call done once, free. */
void stg__eng_finish(stg_engine *e, req *r, stg_reason reason);

#endif
