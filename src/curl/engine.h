/*
 * The engine's internals, shared by its files (never installed):
 *   engine.c        the public API and the loop (poll, clock, passes);
 *   engine_ids.c    the id -> request map;
 *   engine_req.c    where a request is: queues, the easy-handle pool,
 *                   events, detach (leave any place);
 *   engine_admit.c  admission: breaker, limiter, pacing of a learned rate,
 *                   a spent budget's waits, timers, the attempt's start;
 *   engine_done.c   completion: an attempt's end (the attempt step shared
 *                   with stg_curl_perform), redirect hops, finish;
 *   engine_conc.c   a learned per-host concurrency: its slots and waiters;
 *   engine_class.c  the classes and tenants: one row of figures each.
 *
 * Where a request is (req.where) is exactly one place at any time outside
 * the function moving it: the new queue, the retry queue, the timer heap,
 * the multi (ACTIVE), its host's pace queue (PACE_Q), or its host's
 * concurrency queue (CONC_Q, waiting for a learned slot); RQ_NONE only
 * between leaving one place and entering the next, or while finishing.
 * rq_enter/rq_leave assert each move and stg__eng_check the bookkeeping
 * that goes with a place (heap index, easy handle, reservation). A turn
 * in its host's pace queue (`pacing`, host->pace_fq) is an order, not a
 * place: its head (host->pace_head) is in the retry queue or a W_PACE
 * timer while it asks the limiter, the others are in PACE_Q.
 *
 * Classes and tenants (docs/priorities.md): the new queue, a host's pace
 * queue and a host's concurrency queue are fair queues (core/fairq.h:
 * classes strictly by number with a floor, tenants by weight), and a
 * request is in at most one of them, through its one item r->fq (NEW_Q,
 * CONC_Q and pacing never overlap). A request is `queued` (counted in its
 * class row's waiting) from the moment it is ready (NEW_Q, or the retry
 * queue when it was not queued) until its attempt starts or it ends.
 */
#ifndef STAGGER_CURL_ENGINE_H
#define STAGGER_CURL_ENGINE_H

#include <stdatomic.h>
#include <stddef.h>

#include "curl/engine_class.h"
#include "curl/internal.h"
#include "util/assert.h"

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
    W_QUOTA = 7    /* a server quota (stg_quota) said not yet: holds no
                      slot, then through admission again */
} rq_wait;

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
    size_t heap_index;
    struct req *q_next, *q_prev;
    CURL *easy;
    bool reserved;      /* holds a limiter reservation and a slot */
    bool probe_claimed; /* the breaker admitted the current attempt */
    bool shared_probe;  /* the shared breaker admitted it: record the outcome */
    bool over_budget;   /* its host's one retry let past a spent budget */
    bool pacing;        /* in its host's pace queue (fq in host->pace_fq):
                           a promoted head is in it and the retry queue */
    int64_t ticket;     /* the shared limiter's, for on_response */
    /* Server quotas (cfg.quotas): the cost copied at submit, and what the
     * current send reserved (held from admission to its answer): qt is
     * allocated only for a ticket that holds something (NULL holds
     * nothing, which settle and cancel accept), and freed when r goes to
     * wait without one (rq_enter): 528 bytes a waiting request need not
     * carry. */
    stg_quota_cost *cost;
    size_t n_cost;
    stg_quota_ticket *qt;
    bool quota_held;
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
} req;

typedef struct queue {
    req *head, *tail;
} queue;

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
    stg_engine_stats stats;
};

/* ---- places (engine_req.c) ----------------------------------------------- */

/* r's bookkeeping matches its place: a heap index exactly in TIMER, an
 * easy handle exactly in ACTIVE, a reservation only in PACE_Q or a
 * W_LIMITER/W_PACE timer, PACE_Q only for a pace FIFO member. */
void stg__eng_check(const stg_engine *e, const req *r);

void stg__eng_conc_release(stg_engine *e, req *r);

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

/* The request whose fair-queue item it is. */
static inline req *fq_req(stg__fq_item *it)
{
    return it ? (req *)(void *)((char *)it - offsetof(req, fq)) : NULL;
}

static inline stg_class req_class(const req *r)
{
    stg_class c = {r->prio, r->tenant, r->weight};
    return c;
}

static inline void rq_enter(stg_engine *e, req *r, rq_where w)
{
    STG_ASSERT(r->where == RQ_NONE);
    r->where = w;
    if ((w == RQ_NEW_Q || w == RQ_RETRY_Q) && !r->queued) {
        r->queued = true; /* ready: waits for admission from now */
        r->ready_us = e->now;
        r->crow->st.waiting++;
    }
    if (r->conc_held && !conc_keeps(r, w))
        stg__eng_conc_release(e, r);
    if (r->qt && !r->quota_held) { /* settled: nothing held until the next send */
        free(r->qt);
        r->qt = NULL;
    }
    stg__eng_check(e, r);
}

static inline void rq_leave(req *r, rq_where w)
{
    STG_ASSERT(r->where == w);
    r->where = RQ_NONE;
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

void stg__eng_pace_leave(stg_engine *e, req *r);
void stg__eng_schedule(stg_engine *e, req *r, rq_wait kind, int64_t wait_us);
void stg__eng_budget_release(stg_engine *e, stg__host *h);
void stg__eng_start_ready(stg_engine *e);
/* A request can leave a queue for admission now: a free slot, and a
 * retry, or a new request whose class's headroom leaves it that slot. */
bool stg__eng_can_start(const stg_engine *e);
void stg__eng_fire_timers(stg_engine *e);

/* ---- learned concurrency (engine_conc.c) --------------------------------- */

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

/* Finish r: leave every structure, report, call done once, free. */
void stg__eng_finish(stg_engine *e, req *r, stg_reason reason);
void stg__eng_process_done(stg_engine *e);

#endif
