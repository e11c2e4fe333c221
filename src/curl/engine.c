/*
 * stg_engine: many requests driven by one thread on one curl_multi.
 *
 * The loop (one stg_engine_run() call is one pass):
 *   1. curl_multi_poll() on the transfers plus the engine's wake fd, for at
 *      most the caller's timeout, the time to the earliest timer, or 0 when
 *      a request is ready to start;
 *   2. read the clock (monotonic and wall) ONCE; every decision of the pass
 *      uses that instant;
 *   3. curl_multi_perform() and handle finished attempts: classify, feed the
 *      host's adaptive limiter, breaker and budget, ask stg_decide(), and
 *      either finish the request or put a backoff timer in the heap;
 *   4. fire due timers (backoff, limiter, breaker waits);
 *   5. start ready requests while a concurrency slot is free: breaker check,
 *      limiter reservation (a wait becomes a timer that keeps the slot),
 *      then the attempt on a pooled easy handle.
 *
 * A request is in exactly one place: the new queue, the retry queue (a
 * request that already made an attempt; served first), the timer heap, or
 * the multi (active). Concurrency slots = active attempts + limiter
 * reservations waiting for their instant, so a reserved send always goes at
 * its reserved time and the limiter's bound (burst + rate * t) holds for
 * what is actually sent.
 *
 * Invariants:
 *  - every accepted request's done callback runs exactly once, after the
 *    request has left every structure (so callbacks may submit and cancel);
 *    a failed submit never calls it;
 *  - every breaker probe slot claimed by stg_breaker_allow() is answered
 *    once: by stg_breaker_record() with the outcome, or on_neutral when the
 *    attempt is abandoned;
 *  - no attempt starts at or after a request's deadline; waits never end
 *    past it (stg_decide clamps; limiter waits are bounded by it);
 *  - a connection is reused through the multi's connection cache; easy
 *    handles are reset and pooled (at most `concurrency` kept);
 *  - no global state: two engines never share anything but libcurl's
 *    process-wide init.
 */
#include <limits.h>
#include <poll.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "curl/internal.h"

#define DEFAULT_CONCURRENCY 30

/* How far ahead a request may reserve an adaptive-rate slot (see admit). */
#define PACE_HORIZON_US STG_MS(50)

typedef enum rq_where {
    RQ_NONE = 0,
    RQ_NEW_Q = 1,
    RQ_RETRY_Q = 2,
    RQ_TIMER = 3,
    RQ_ACTIVE = 4,
    RQ_PACE_Q = 5  /* behind its host's pace head (see "pacing"), holding a
                      slot */
} rq_where;

typedef enum rq_wait {
    W_BACKOFF = 1, /* then through admission again */
    W_LIMITER = 2, /* a reservation: then straight to the attempt */
    W_BREAKER = 3, /* then through admission again */
    W_PACE = 4,    /* the host's pace head, beyond the horizon: holds the
                      slot, then asks the limiter again */
    W_BUDGET = 5,  /* a retry the spent budget refused (budget_wait): its
                      backoff, then budget_gate() */
    W_BUDGET_HELD = 6 /* held by budget_gate() until its host's over-budget
                      retry ends or the budget refills (or its deadline) */
} rq_wait;

typedef struct req {
    uint64_t id;
    stg__host *host;
    char *url;
    char *url_red;
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
    bool pacing;        /* in its host's pace FIFO (p_next, p_prev) */
    struct req *p_next, *p_prev; /* apart from q_*: a promoted head is in
                                    the FIFO and the retry queue at once */
    int64_t ticket;     /* the shared limiter's, for on_response */

    stg__xfer x;
    stg_retry_state rs;
    bool started;
    int64_t attempt_start_us;
    int status;
    stg_net_error err;
    int curl_code;
    int64_t server_wait_us;
    char errtext[256];
} req;

typedef struct queue {
    req *head, *tail;
} queue;

struct stg_engine {
    stg_engine_config cfg;
    stg_policy pol;
    int concurrency;
    CURLM *multi;
    stg_rng rng;
    int64_t now, wall;
    stg__heap timers;
    stg__hosts hosts;
    req **slots; /* id -> request, open addressing */
    size_t slot_cap, count;
    queue new_q, retry_q;
    CURL **pool;
    size_t pool_n;
    int wake_fd;
    atomic_bool stop;
    int active, reserved;
    uint64_t next_id;
    bool in_pass, closing;
    stg_engine_stats stats;
};

/* ---- id map ------------------------------------------------------------ */

static size_t slot_of(uint64_t id, size_t cap)
{
    return (size_t)((id * UINT64_C(0x9E3779B97F4A7C15)) >> 20) & (cap - 1);
}

static bool map_grow(stg_engine *e)
{
    size_t cap = e->slot_cap ? e->slot_cap * 2 : 256;
    req **s = calloc(cap, sizeof *s);
    if (!s)
        return false;
    for (size_t i = 0; i < e->slot_cap; i++) {
        req *r = e->slots[i];
        if (!r)
            continue;
        size_t j = slot_of(r->id, cap);
        while (s[j])
            j = (j + 1) & (cap - 1);
        s[j] = r;
    }
    free(e->slots);
    e->slots = s;
    e->slot_cap = cap;
    return true;
}

static bool map_put(stg_engine *e, req *r)
{
    if ((e->count + 1) * 2 > e->slot_cap && !map_grow(e))
        return false;
    size_t j = slot_of(r->id, e->slot_cap);
    while (e->slots[j])
        j = (j + 1) & (e->slot_cap - 1);
    e->slots[j] = r;
    e->count++;
    return true;
}

static size_t map_find(const stg_engine *e, uint64_t id)
{
    if (!e->slot_cap)
        return SIZE_MAX;
    size_t j = slot_of(id, e->slot_cap);
    while (e->slots[j]) {
        if (e->slots[j]->id == id)
            return j;
        j = (j + 1) & (e->slot_cap - 1);
    }
    return SIZE_MAX;
}

static void map_del(stg_engine *e, uint64_t id)
{
    size_t i = map_find(e, id);
    if (i == SIZE_MAX)
        return;
    size_t mask = e->slot_cap - 1;
    /* Backward-shift deletion: no tombstones. */
    for (size_t j = (i + 1) & mask; e->slots[j]; j = (j + 1) & mask) {
        size_t k = slot_of(e->slots[j]->id, e->slot_cap);
        bool movable = (j > i) ? (k <= i || k > j) : (k <= i && k > j);
        if (movable) {
            e->slots[i] = e->slots[j];
            i = j;
        }
    }
    e->slots[i] = NULL;
    e->count--;
}

/* ---- queues ------------------------------------------------------------ */

static void q_push(queue *q, req *r)
{
    r->q_next = NULL;
    r->q_prev = q->tail;
    if (q->tail)
        q->tail->q_next = r;
    else
        q->head = r;
    q->tail = r;
}

static void q_push_front(queue *q, req *r)
{
    r->q_prev = NULL;
    r->q_next = q->head;
    if (q->head)
        q->head->q_prev = r;
    else
        q->tail = r;
    q->head = r;
}

static void q_unlink(queue *q, req *r)
{
    if (r->q_prev)
        r->q_prev->q_next = r->q_next;
    else
        q->head = r->q_next;
    if (r->q_next)
        r->q_next->q_prev = r->q_prev;
    else
        q->tail = r->q_prev;
    r->q_next = r->q_prev = NULL;
}

/* ---- events ------------------------------------------------------------- */

static void ev_init(stg_engine *e, req *r, stg_event_type type, stg_event *ev)
{
    stg__event_init(ev, type, r->id, e->now, e->wall);
    ev->method = stg_method_name(r->method);
    ev->url = r->url_red;
    ev->final_url = r->final_url;
    ev->host = r->host->key;
    ev->attempt = r->rs.attempts;
}

static void emit(stg_engine *e, const stg_event *ev)
{
    if (e->cfg.on_event)
        e->cfg.on_event(ev, e->cfg.event_data);
}

/* The breaker of h changed: requests waiting for it (W_BREAKER timers) go
 * back to admission now instead of sleeping until their timer, so a probe
 * that closes the breaker releases them at once. */
static void wake_breaker_waiters(stg_engine *e, stg__host *h)
{
    if (!e->timers.n)
        return;
    req **w = malloc(e->timers.n * sizeof *w);
    if (!w)
        return; /* they still wake at their own timer */
    size_t n = 0;
    for (size_t i = 0; i < e->timers.n; i++) {
        req *r = e->timers.v[i].item;
        if (r->wait == W_BREAKER && r->host == h)
            w[n++] = r;
    }
    for (size_t i = 0; i < n; i++) {
        stg__heap_remove(&e->timers, w[i]->heap_index);
        w[i]->where = RQ_RETRY_Q;
        q_push(&e->retry_q, w[i]);
    }
    free(w);
}

/* Emit the breaker changes queued by the host's on_change. */
static void flush_breaker(stg_engine *e, stg__host *h)
{
    if (h->n_changes)
        wake_breaker_waiters(e, h);
    for (int i = 0; i < h->n_changes; i++) {
        stg_event ev;
        stg__event_init(&ev, STG_EVENT_BREAKER, 0, h->changes[i].now_us, e->wall);
        ev.host = h->key;
        ev.breaker_from = h->changes[i].from;
        ev.breaker_to = h->changes[i].to;
        emit(e, &ev);
    }
    h->n_changes = 0;
}

/* ---- easy handle pool --------------------------------------------------- */

static CURL *pool_get(stg_engine *e)
{
    if (e->pool_n)
        return e->pool[--e->pool_n];
    return curl_easy_init();
}

static void pool_put(stg_engine *e, CURL *easy)
{
    curl_easy_reset(easy);
    if (e->pool_n < (size_t)e->concurrency)
        e->pool[e->pool_n++] = easy;
    else
        curl_easy_cleanup(easy);
}

/* ---- request lifecycle --------------------------------------------------- */

static void req_free(req *r)
{
    free(r->url);
    free(r->url_red);
    free(r->final_url);
    free(r->body);
    curl_slist_free_all(r->headers);
    stg__xfer_free(&r->x);
    free(r);
}

static int64_t remaining(const stg_engine *e, const req *r)
{
    if (!r->started || e->pol.deadline_us <= 0)
        return INT64_MAX;
    return r->rs.start_us + e->pol.deadline_us - e->now;
}

/* ---- pacing: a learned rate, one FIFO per host ---------------------------
 *
 * A learned rate (the host's adaptive limiter, or a shared limiter with a
 * horizon) is reserved at most a horizon ahead (see admit). Requests whose
 * turn is further out wait, holding their slot, in their host's FIFO, and
 * only its head asks the limiter again (from a W_PACE timer): when every
 * waiter polled on its own, the one that asked at the right instant won,
 * newcomers jumped the queue, and some requests lost hundreds of times in
 * a row (a retry waited 20 s in a 21 s run). When the head gets its
 * reservation or leaves, the next one moves to the front of the retry
 * queue and asks at once. */

static bool paced(const stg_engine *e, const stg__host *h)
{
    const stg_shared_limiter *sh = e->cfg.shared;
    if (sh && sh->acquire)
        return sh->horizon_us > 0;
    return h->has_adaptive;
}

static void pace_push(stg__host *h, req *r)
{
    req *tail = h->pace_tail;
    r->p_next = NULL;
    r->p_prev = tail;
    if (tail)
        tail->p_next = r;
    else
        h->pace_head = r;
    h->pace_tail = r;
    r->pacing = true;
}

/* r leaves its host's FIFO; if it was the head, the next one (waiting
 * without a timer) goes to the front of the retry queue, its slot handed
 * back to admission. */
static void pace_leave(stg_engine *e, req *r)
{
    if (!r->pacing)
        return;
    stg__host *h = r->host;
    bool was_head = h->pace_head == r;
    if (r->p_prev)
        r->p_prev->p_next = r->p_next;
    else
        h->pace_head = r->p_next;
    if (r->p_next)
        r->p_next->p_prev = r->p_prev;
    else
        h->pace_tail = r->p_prev;
    r->p_next = r->p_prev = NULL;
    r->pacing = false;
    req *n = h->pace_head;
    if (was_head && n && n->where == RQ_PACE_Q) {
        n->reserved = false;
        e->reserved--;
        n->where = RQ_RETRY_Q;
        q_push_front(&e->retry_q, n);
    }
}

/* Take r out of whatever holds it (queue, heap, multi, slot counts). */
static void detach(stg_engine *e, req *r)
{
    switch (r->where) {
    case RQ_NEW_Q:
        q_unlink(&e->new_q, r);
        break;
    case RQ_RETRY_Q:
        q_unlink(&e->retry_q, r);
        break;
    case RQ_TIMER:
        if (r->heap_index != STG__NOT_IN_HEAP)
            stg__heap_remove(&e->timers, r->heap_index);
        if (r->wait == W_BUDGET_HELD)
            r->host->budget_held--;
        break;
    case RQ_ACTIVE:
        curl_multi_remove_handle(e->multi, r->easy);
        pool_put(e, r->easy);
        r->easy = NULL;
        e->active--;
        break;
    case RQ_PACE_Q:
    case RQ_NONE:
        break;
    }
    pace_leave(e, r);
    if (r->reserved) {
        r->reserved = false;
        e->reserved--;
    }
    r->where = RQ_NONE;
}

static void budget_release(stg_engine *e, stg__host *h);

/* Finish r: leave every structure, report, call done once, free. */
static void finish(stg_engine *e, req *r, stg_reason reason)
{
    bool was_active = r->where == RQ_ACTIVE;
    detach(e, r);
    if (was_active) {
        /* Abandoned mid-attempt: its partial answer is not an answer. */
        stg__xfer_reset(&r->x);
        r->status = 0;
        r->err = STG_NET_OTHER;
        r->curl_code = CURLE_ABORTED_BY_CALLBACK;
        snprintf(r->errtext, sizeof r->errtext, "%s", stg_reason_message(reason));
    }
    if (r->probe_claimed) {
        r->probe_claimed = false;
        stg_breaker_on_neutral(&r->host->breaker, e->now);
        flush_breaker(e, r->host);
    }
    if (r->shared_probe) {
        r->shared_probe = false;
        if (e->cfg.shared->breaker_record)
            e->cfg.shared->breaker_record(e->cfg.shared->ctx, r->host->key,
                                          STG_BREAKER_NEUTRAL);
    }
    stg__host *h = r->host;
    bool release = r->over_budget;
    if (release) {
        r->over_budget = false;
        h->over_budget_out--;
    }
    map_del(e, r->id);

    stg_result res;
    memset(&res, 0, sizeof res);
    char empty[1] = "";
    res.action = reason == STG_REASON_SUCCESS ? STG_ACTION_SUCCESS : STG_ACTION_GIVE_UP;
    res.reason = reason;
    res.status = r->status;
    res.error = r->err;
    res.curl_code = r->curl_code;
    snprintf(res.error_text, sizeof res.error_text, "%s", r->errtext);
    res.attempts = r->rs.attempts;
    res.elapsed_us = r->started ? e->now - r->rs.start_us : 0;
    res.server_wait_us = r->server_wait_us;
    res.hints = r->x.hints;
    res.body = r->x.body.p ? r->x.body.p : empty;
    res.body_len = r->x.body.len;
    res.headers = r->x.headers.p ? r->x.headers.p : empty;
    res.headers_len = r->x.headers.len;
    res.final_url = r->final_url ? r->final_url : r->url_red;
    res.body_truncated = r->x.truncated;

    stg_event ev;
    ev_init(e, r, res.action == STG_ACTION_SUCCESS ? STG_EVENT_SUCCESS : STG_EVENT_GIVE_UP, &ev);
    ev.status = r->status;
    ev.error = r->err;
    ev.curl_code = r->curl_code;
    ev.duration_us = res.elapsed_us;
    ev.retry_after_us = r->server_wait_us;
    ev.reason = reason;
    emit(e, &ev);

    e->stats.finished++;
    if (res.action == STG_ACTION_SUCCESS)
        e->stats.succeeded++;
    else
        e->stats.gave_up++;
    if (r->done)
        r->done(e, r->id, &res, r->data);
    req_free(r);
    if (release)
        budget_release(e, h);
}

static void schedule(stg_engine *e, req *r, rq_wait kind, int64_t wait_us)
{
    if (wait_us < 0)
        wait_us = 0;
    int64_t due = e->now > INT64_MAX - wait_us ? INT64_MAX : e->now + wait_us;
    if (!stg__heap_push(&e->timers, due, r, &r->heap_index)) {
        snprintf(r->errtext, sizeof r->errtext, "out of memory");
        finish(e, r, STG_REASON_CANCELLED);
        return;
    }
    r->where = RQ_TIMER;
    r->wait = kind;
}

/* ---- a spent retry budget, with budget_wait ------------------------------
 *
 * The budget refuses retries once failures are more than a small share of
 * a host's answers. Without budget_wait the refused retry gives up
 * (BUDGET_EXHAUSTED). With it the retry waits: after its backoff it goes
 * if the budget has refilled, or with the host's one pass (over_budget):
 * the request holding it keeps it through its own retries and backoffs
 * until it ends (a success, a final failure, its deadline), and then the
 * oldest held request takes it. The others are held until then. A host
 * whose every request failed therefore still makes progress, sending one
 * request per backoff interval of the pass holder (the breaker, when on,
 * stops even that while open), and its retries cannot multiply the load.
 * Held requests sit in the timer heap until their deadline, so a deadline
 * still ends them. */

/* A W_BUDGET or W_BUDGET_HELD request is due, or was woken: send it,
 * hold it, or end it at its deadline. */
static void budget_gate(stg_engine *e, req *r)
{
    stg__host *h = r->host;
    int64_t left = remaining(e, r);
    if (left <= 0) {
        finish(e, r, STG_REASON_DEADLINE);
        return;
    }
    if (!stg_budget_allow_retry(&h->budget)) {
        if (h->over_budget_out > 0) {
            h->budget_held++;
            schedule(e, r, W_BUDGET_HELD, left);
            return;
        }
        r->over_budget = true;
        h->over_budget_out++;
    }
    r->where = RQ_RETRY_Q;
    q_push(&e->retry_q, r);
}

/* Wake h's held retries: all of them when the budget has refilled, else
 * the oldest (as the over-budget one) when no over-budget retry is out.
 * They go to the retry queue, whose admission checks their deadline: this
 * runs inside finish() and attempt_done(), where finishing another
 * request (and running its callback) is not safe. */
static void budget_release(stg_engine *e, stg__host *h)
{
    if (!h->budget_held)
        return;
    bool all = stg_budget_allow_retry(&h->budget);
    if (!all && h->over_budget_out > 0)
        return;
    req **w = malloc(h->budget_held * sizeof *w);
    if (!w)
        return; /* they still end at their deadline */
    size_t n = 0;
    for (size_t i = 0; i < e->timers.n && n < h->budget_held; i++) {
        req *r = e->timers.v[i].item;
        if (r->wait == W_BUDGET_HELD && r->host == h) {
            if (all || !n)
                w[n++] = r;
            else if (r->id < w[0]->id)
                w[0] = r;
        }
    }
    if (!all && n)
        n = 1;
    for (size_t i = 0; i < n; i++) {
        stg__heap_remove(&e->timers, w[i]->heap_index);
        h->budget_held--;
        if (!all) {
            w[i]->over_budget = true;
            h->over_budget_out++;
        }
        w[i]->where = RQ_RETRY_Q;
        q_push(&e->retry_q, w[i]);
    }
    free(w);
}

/* The breaker refused: wait for it (a timer) or give up. */
static void breaker_refused(stg_engine *e, req *r, int64_t retry_in_us)
{
    if (e->cfg.defer_when_open) {
        finish(e, r, STG_REASON_BREAKER_OPEN);
        return;
    }
    if (retry_in_us < STG_MS(1))
        retry_in_us = STG_MS(1);
    if (retry_in_us >= remaining(e, r)) {
        finish(e, r, STG_REASON_DEADLINE);
        return;
    }
    stg_event ev;
    ev_init(e, r, STG_EVENT_WAIT, &ev);
    ev.wait_us = retry_in_us;
    ev.reason = STG_REASON_BREAKER_OPEN;
    ev.status = r->status;
    ev.error = r->rs.attempts ? r->err : STG_NET_NONE;
    emit(e, &ev);
    schedule(e, r, W_BREAKER, retry_in_us);
}

static void set_method(CURL *easy, const req *r)
{
    switch (r->method) {
    case STG_METHOD_GET:
        curl_easy_setopt(easy, CURLOPT_HTTPGET, 1L);
        break;
    case STG_METHOD_HEAD:
        curl_easy_setopt(easy, CURLOPT_NOBODY, 1L);
        break;
    default:
        if (r->method != STG_METHOD_POST)
            curl_easy_setopt(easy, CURLOPT_CUSTOMREQUEST, stg_method_name(r->method));
        if (r->has_body || r->method == STG_METHOD_POST || r->method == STG_METHOD_PUT ||
            r->method == STG_METHOD_PATCH) {
            /* Not copied: r->body lives as long as the request, so every
             * attempt sends the whole body again. */
            curl_easy_setopt(easy, CURLOPT_POSTFIELDS, r->body ? r->body : "");
            curl_easy_setopt(easy, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)r->body_len);
        }
        break;
    }
}

/* Start an attempt now (the limiter has admitted it). */
static void start_attempt(stg_engine *e, req *r)
{
    if (r->reserved) { /* the reservation's slot becomes the active slot */
        r->reserved = false;
        e->reserved--;
    }
    r->where = RQ_NONE;
    if (remaining(e, r) <= 0) {
        finish(e, r, STG_REASON_DEADLINE);
        return;
    }
    const stg_shared_limiter *sh = e->cfg.shared;
    if (sh && sh->breaker_allow) {
        int64_t retry_in = 0;
        if (sh->breaker_allow(sh->ctx, r->host->key, &retry_in) == STG_EBREAKER) {
            breaker_refused(e, r, retry_in);
            return;
        }
        r->shared_probe = true;
    } else if (r->host->has_breaker) {
        int64_t retry_in = 0;
        int rc = stg_breaker_allow(&r->host->breaker, e->now, &retry_in);
        flush_breaker(e, r->host);
        if (rc == STG_EBREAKER) {
            breaker_refused(e, r, retry_in);
            return;
        }
        r->probe_claimed = rc == STG_OK;
    }
    CURL *easy = pool_get(e);
    if (!easy) {
        snprintf(r->errtext, sizeof r->errtext, "out of memory");
        finish(e, r, STG_REASON_ERROR_NOT_RETRYABLE);
        return;
    }
    curl_easy_setopt(easy, CURLOPT_PROTOCOLS_STR, "http,https");
    curl_easy_setopt(easy, CURLOPT_REDIR_PROTOCOLS_STR, "http,https");
    if (e->cfg.setup_easy)
        e->cfg.setup_easy(easy, e->cfg.setup_data);
    curl_easy_setopt(easy, CURLOPT_URL, r->url);
    set_method(easy, r);
    if (r->headers)
        curl_easy_setopt(easy, CURLOPT_HTTPHEADER, r->headers);
    curl_easy_setopt(easy, CURLOPT_PRIVATE, (void *)r);
    stg__xfer_reset(&r->x);
    r->x.wall_now_us = e->wall;
    stg__xfer_attach(easy, &r->x);
    long connect_ms, total_ms;
    stg__attempt_timeouts(&e->pol, remaining(e, r), &connect_ms, &total_ms);
    curl_easy_setopt(easy, CURLOPT_CONNECTTIMEOUT_MS, connect_ms);
    curl_easy_setopt(easy, CURLOPT_TIMEOUT_MS, total_ms);
    if (curl_multi_add_handle(e->multi, easy) != CURLM_OK) {
        pool_put(e, easy);
        snprintf(r->errtext, sizeof r->errtext, "curl_multi_add_handle failed");
        finish(e, r, STG_REASON_ERROR_NOT_RETRYABLE);
        return;
    }
    r->easy = easy;
    r->where = RQ_ACTIVE;
    e->active++;
    r->rs.attempts++;
    r->attempt_start_us = e->now;
    e->stats.attempts++;
    if (r->rs.attempts > 1)
        e->stats.retries++;
    stg_event ev;
    ev_init(e, r, STG_EVENT_ATTEMPT_START, &ev);
    emit(e, &ev);
}

/* A slot is free for r: breaker check, limiter, then the attempt. */
static void admit(stg_engine *e, req *r)
{
    r->where = RQ_NONE;
    /* The deadline runs from the first admission, not from submission
     * (time in the new queue, waiting for a slot, is the caller's own
     * concurrency, not the host's), and not from the first attempt: a
     * request waiting for an open breaker must still end at its deadline. */
    if (!r->started) {
        r->started = true;
        r->rs.start_us = e->now;
    }
    int64_t left = remaining(e, r);
    if (left <= 0) {
        finish(e, r, STG_REASON_DEADLINE);
        return;
    }
    stg__host *h = r->host;
    if (h->has_breaker) {
        stg_breaker_state st = stg_breaker_state_at(&h->breaker, e->now);
        flush_breaker(e, h);
        if (st == STG_BREAKER_OPEN) {
            int64_t retry_in = 0;
            stg_breaker_allow(&h->breaker, e->now, &retry_in); /* OPEN: claims nothing */
            flush_breaker(e, h);
            pace_leave(e, r);
            breaker_refused(e, r, retry_in);
            return;
        }
    }
    if (paced(e, h) && h->pace_head && !r->pacing) {
        /* Others wait for the rate: behind them, keeping the slot. */
        pace_push(h, r);
        r->reserved = true;
        e->reserved++;
        r->where = RQ_PACE_Q;
        return;
    }
    int64_t wait = 0;
    int rc = STG_OK;
    const stg_shared_limiter *sh = e->cfg.shared;
    /* A learned rate reserves at most a horizon ahead. With many slots the
     * reservations would reach hundreds of ms into the future at the rate
     * of the moment, and a cut (a 429) could not slow the sends already
     * reserved: each of them meets the server's empty bucket. Further out,
     * the request keeps its slot and asks again shortly before its turn,
     * at whatever rate holds then. */
    int64_t horizon = left;
    if (sh && sh->acquire) {
        if (sh->horizon_us > 0 && sh->horizon_us < left)
            horizon = sh->horizon_us;
        r->ticket = 0;
        rc = sh->acquire(sh->ctx, h->key, horizon, &wait, &r->ticket);
        if (rc != STG_OK && rc != STG_ETIMEDOUT) {
            snprintf(r->errtext, sizeof r->errtext, "shared limiter: %s", stg_strerror(rc));
            finish(e, r, STG_REASON_LIMITER_UNAVAILABLE);
            return;
        }
    } else if (h->has_bucket) {
        rc = stg_bucket_acquire(&h->bucket, 1, e->now, left, &wait);
    } else if (h->has_adaptive) {
        if (PACE_HORIZON_US < left)
            horizon = PACE_HORIZON_US;
        rc = stg_adaptive_acquire(&h->adaptive, e->now, horizon, &wait);
    }
    if (rc == STG_ETIMEDOUT && horizon < left && wait < left) {
        if (!r->pacing)
            pace_push(h, r); /* the FIFO was empty: r is its head */
        r->reserved = true;
        e->reserved++;
        schedule(e, r, W_PACE, wait - horizon / 2);
        return;
    }
    pace_leave(e, r); /* reserved (or refused for good): the next one asks */
    if (rc == STG_ETIMEDOUT) {
        finish(e, r, STG_REASON_DEADLINE); /* not admitted before the deadline */
        return;
    }
    if (rc == STG_OK && wait > 0) {
        r->reserved = true;
        e->reserved++;
        e->stats.limiter_wait_us += wait;
        stg_event ev;
        ev_init(e, r, STG_EVENT_LIMITER_WAIT, &ev);
        ev.wait_us = wait;
        emit(e, &ev);
        schedule(e, r, W_LIMITER, wait);
        return;
    }
    start_attempt(e, r);
}

static void start_ready(stg_engine *e)
{
    /* Each iteration takes one request off a queue. Callbacks may submit
     * more; those wait for the next pass (whose poll then does not wait),
     * so a callback that resubmits whatever finishes cannot spin here. */
    size_t budget = e->count;
    while (budget-- > 0 && e->active + e->reserved < e->concurrency) {
        req *r = e->retry_q.head;
        if (r) {
            q_unlink(&e->retry_q, r);
        } else if ((r = e->new_q.head)) {
            q_unlink(&e->new_q, r);
        } else {
            break;
        }
        r->where = RQ_NONE;
        admit(e, r);
    }
}

static void fire_timers(stg_engine *e)
{
    /* Bounded: each step removes one entry that was due; new entries are
     * due strictly later than now (waits >= 1 ms) or are bounded by the
     * count taken at the start. */
    size_t budget = e->timers.n;
    const stg__timer *t;
    while (budget-- > 0 && (t = stg__heap_top(&e->timers)) && t->due_us <= e->now) {
        req *r = t->item;
        stg__heap_remove(&e->timers, r->heap_index);
        r->where = RQ_NONE;
        if (r->wait == W_LIMITER) {
            start_attempt(e, r); /* the slot was held by the reservation */
        } else if (r->wait == W_PACE) {
            r->reserved = false; /* admission takes the slot again */
            e->reserved--;
            admit(e, r);
        } else if (r->wait == W_BUDGET || r->wait == W_BUDGET_HELD) {
            if (r->wait == W_BUDGET_HELD)
                r->host->budget_held--;
            budget_gate(e, r);
        } else {
            r->where = RQ_RETRY_Q;
            q_push(&e->retry_q, r);
        }
    }
}

/* Does this outcome cost the retry budget? A failure the policy would
 * retry, except 429, which is a rate signal (the limiter's and
 * Retry-After's business), not a fault. */
static bool budget_failure(const stg_policy *p, int status, stg_net_error err)
{
    if (err != STG_NET_NONE)
        return (unsigned)err < 32 && (p->retry_errors & STG_NET_BIT(err));
    return status != 429 && status >= 400 && stg_status_set_has(&p->retry_statuses, status);
}

static void count_status(stg_engine *e, int status, stg_net_error err)
{
    if (err != STG_NET_NONE)
        e->stats.transport_errors++;
    else if (status == 429)
        e->stats.status_429++;
    else if (status == 503)
        e->stats.status_503++;
    else if (status >= 500)
        e->stats.status_5xx_other++;
    else if (status >= 400)
        e->stats.status_4xx_other++;
}

static void attempt_done(stg_engine *e, req *r, CURLcode code)
{
    CURL *easy = r->easy;
    long http = 0;
    curl_off_t connect_us = 0;
    const char *eff = NULL;
    curl_easy_getinfo(easy, CURLINFO_RESPONSE_CODE, &http);
    curl_easy_getinfo(easy, CURLINFO_CONNECT_TIME_T, &connect_us);
    curl_easy_getinfo(easy, CURLINFO_EFFECTIVE_URL, &eff);
    char red[2048];
    stg_redact_url(eff && *eff ? eff : r->url, red, sizeof red);
    char *fu = strdup(red);
    if (fu) {
        free(r->final_url);
        r->final_url = fu;
    }
    r->curl_code = (int)code;
    if (code != CURLE_OK)
        stg__redact_text(r->x.errbuf[0] ? r->x.errbuf : curl_easy_strerror(code), r->errtext,
                         sizeof r->errtext);
    else
        r->errtext[0] = '\0';
    if (r->x.oom)
        snprintf(r->errtext, sizeof r->errtext, "out of memory");

    /* The attempt is over: free its slot and handle before any callback. */
    curl_multi_remove_handle(e->multi, easy);
    pool_put(e, easy);
    r->easy = NULL;
    r->where = RQ_NONE;
    e->active--;

    r->err = r->x.oom ? STG_NET_OTHER : stg_curl_classify(code, (int64_t)connect_us);
    r->status = r->err == STG_NET_NONE ? (int)http : 0;
    if (r->err == STG_NET_NONE && r->status == 0)
        r->err = STG_NET_OTHER;
    count_status(e, r->status, r->err);
    int64_t hint = STG_UNKNOWN;
    if (!stg_hints_server_wait(&r->x.hints, &hint))
        hint = STG_UNKNOWN;
    r->server_wait_us = hint;

    stg__host *h = r->host;
    if (h->has_adaptive && r->status > 0) {
        stg_adaptive_on_response(&h->adaptive, stg__throttled(r->status, &r->x.hints), e->now);
        stg_adaptive_on_hints(&h->adaptive, &r->x.hints, e->now, &e->rng);
    }
    stg__shared_report(e->cfg.shared, h->key, r->ticket, r->status, &r->x.hints);
    if (r->shared_probe) {
        r->shared_probe = false;
        if (e->cfg.shared->breaker_record)
            e->cfg.shared->breaker_record(
                e->cfg.shared->ctx, h->key,
                stg_breaker_classify(&e->cfg.breaker_config, r->status, r->err));
    }
    if (h->has_breaker && r->probe_claimed) {
        r->probe_claimed = false;
        stg_breaker_record(&h->breaker, r->status, r->err, e->now);
        flush_breaker(e, h);
    }
    /* A failure that says when the server will be back (a 503 with
     * Retry-After) sets when an open breaker probes again. */
    if (h->has_breaker && hint != STG_UNKNOWN &&
        stg_breaker_classify(&e->cfg.breaker_config, r->status, r->err) == STG_BREAKER_FAILURE)
        stg_breaker_server_wait(&h->breaker, hint, e->now);
    if (h->has_budget) {
        if (budget_failure(&e->pol, r->status, r->err))
            stg_budget_on_failure(&h->budget);
        else if (r->err == STG_NET_NONE && r->status != 429)
            stg_budget_on_success(&h->budget);
        budget_release(e, h);
    }

    stg_outcome o = {.status = r->status,
                     .error = r->err,
                     .method = r->method,
                     .has_idempotency_key = r->has_key,
                     .cancelled = false,
                     .hints = &r->x.hints};
    stg_decision d;
    stg_decide(&e->pol, &r->rs, &o, e->now, &e->rng, &d);
    if (d.server_wait_us != STG_UNKNOWN)
        r->server_wait_us = d.server_wait_us;

    stg_event ev;
    ev_init(e, r, STG_EVENT_ATTEMPT_END, &ev);
    ev.status = r->status;
    ev.error = r->err;
    ev.curl_code = r->curl_code;
    ev.duration_us = e->now - r->attempt_start_us;
    ev.retry_after_us = hint;
    emit(e, &ev);

    if (d.action != STG_ACTION_RETRY) {
        finish(e, r, d.reason);
        return;
    }
    rq_wait kind = W_BACKOFF;
    if (h->has_budget && !stg_budget_allow_retry(&h->budget)) {
        if (r->over_budget) {
            /* It keeps the pass through its own backoff: while the host
             * keeps failing it sends one request per backoff interval. */
        } else if (e->cfg.budget_wait) {
            kind = W_BUDGET;
        } else {
            finish(e, r, STG_REASON_BUDGET_EXHAUSTED);
            return;
        }
    } else if (r->over_budget) {
        r->over_budget = false; /* the budget has refilled */
        h->over_budget_out--;
    }
    stg_retry_state_note(&r->rs, &d);
    ev_init(e, r, STG_EVENT_WAIT, &ev);
    ev.status = r->status;
    ev.error = r->err;
    ev.wait_us = d.wait_us;
    ev.retry_after_us = d.server_wait_us;
    ev.reason = kind == W_BUDGET ? STG_REASON_BUDGET_EXHAUSTED : d.reason;
    emit(e, &ev);
    schedule(e, r, kind, d.wait_us);
}

static void process_done(stg_engine *e)
{
    CURLMsg *m;
    int left;
    /* One message at a time: handling one may remove other handles (a
     * callback cancelling a request), which also drops their messages. */
    while ((m = curl_multi_info_read(e->multi, &left))) {
        if (m->msg != CURLMSG_DONE)
            continue;
        CURL *easy = m->easy_handle;
        CURLcode code = m->data.result;
        char *priv = NULL;
        curl_easy_getinfo(easy, CURLINFO_PRIVATE, &priv);
        req *r = (req *)(void *)priv;
        if (r && r->easy == easy && r->where == RQ_ACTIVE)
            attempt_done(e, r, code);
    }
}

/* ---- public API ----------------------------------------------------------- */

stg_engine *stg_engine_new(const stg_engine_config *cfg, int *err)
{
    int dummy;
    if (!err)
        err = &dummy;
    *err = STG_OK;
    stg_engine_config c;
    memset(&c, 0, sizeof c);
    if (cfg)
        c = *cfg;
    stg_policy pol;
    if (stg_policy_resolve(&c.policy, &pol) != STG_OK || c.concurrency < 0 ||
        (unsigned)c.limiter > STG_LIMITER_ADAPTIVE) {
        *err = STG_EINVAL;
        return NULL;
    }
    if (stg__curl_global_init() != CURLE_OK) {
        *err = STG_ENOMEM;
        return NULL;
    }
    int64_t now = stg__mono_us(c.env);
    int rc = stg__hosts_check_config(&c, now);
    if (rc != STG_OK) {
        *err = rc;
        return NULL;
    }
    stg_engine *e = calloc(1, sizeof *e);
    if (!e) {
        *err = STG_ENOMEM;
        return NULL;
    }
    e->cfg = c;
    e->pol = pol;
    e->concurrency = c.concurrency ? c.concurrency : DEFAULT_CONCURRENCY;
    e->now = now;
    e->wall = stg__wall_us(c.env);
    e->next_id = 1;
    e->wake_fd = -1;
    atomic_init(&e->stop, false);
    stg__heap_init(&e->timers);
    stg__hosts_init(&e->hosts);
    stg_rng_seed(&e->rng, c.seed ? c.seed : stg__seed(e, now));
    e->pool = calloc((size_t)e->concurrency, sizeof *e->pool);
    e->multi = curl_multi_init();
    e->wake_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    if (!e->pool || !e->multi || e->wake_fd < 0) {
        *err = STG_ENOMEM;
        stg_engine_free(e);
        return NULL;
    }
    long maxconn = e->concurrency > 8 ? e->concurrency : 8;
    curl_multi_setopt(e->multi, CURLMOPT_MAXCONNECTS, maxconn);
    return e;
}

static bool header_ok(const char *s)
{
    return s && !strpbrk(s, "\r\n");
}

int stg_engine_submit(stg_engine *e, const stg_request *rq, stg_done_fn done, void *data,
                      uint64_t *id)
{
    if (!e || !rq || !rq->url || !*rq->url || !header_ok(rq->url))
        return STG_EINVAL;
    if (e->closing)
        return STG_ESTATE;
    stg_method m = rq->method ? stg_method_parse(rq->method)
                              : (rq->body ? STG_METHOD_POST : STG_METHOD_GET);
    if (m == STG_METHOD_UNKNOWN || m == STG_METHOD_CONNECT)
        return STG_EINVAL;
    if (rq->idempotency_key && (!*rq->idempotency_key || !header_ok(rq->idempotency_key)))
        return STG_EINVAL;
    for (size_t i = 0; rq->headers && rq->headers[i]; i++)
        if (!header_ok(rq->headers[i]))
            return STG_EINVAL;

    char key[512];
    if (rq->limit_key)
        snprintf(key, sizeof key, "%s", rq->limit_key);
    else
        stg__url_host_key(rq->url, key, sizeof key);
    int err = STG_OK;
    stg__host *h = stg__hosts_get(&e->hosts, key, &e->cfg, e->now, &err);
    if (!h)
        return err;

    req *r = calloc(1, sizeof *r);
    if (!r)
        return STG_ENOMEM;
    r->heap_index = STG__NOT_IN_HEAP;
    r->host = h;
    r->method = m;
    r->done = done;
    r->data = data;
    r->server_wait_us = STG_UNKNOWN;
    stg__xfer_init(&r->x, e->cfg.max_body);
    char red[2048];
    stg_redact_url(rq->url, red, sizeof red);
    r->url = strdup(rq->url);
    r->url_red = strdup(red);
    bool ok = r->url && r->url_red;
    if (ok && rq->body) {
        r->has_body = true;
        r->body = malloc(rq->body_len ? rq->body_len : 1);
        ok = r->body != NULL;
        if (ok && rq->body_len)
            memcpy(r->body, rq->body, rq->body_len);
        r->body_len = rq->body_len;
    }
    for (size_t i = 0; ok && rq->headers && rq->headers[i]; i++) {
        struct curl_slist *s = curl_slist_append(r->headers, rq->headers[i]);
        ok = s != NULL;
        if (ok)
            r->headers = s;
    }
    if (ok && rq->idempotency_key) {
        size_t n = strlen(rq->idempotency_key) + sizeof "Idempotency-Key: ";
        char *line = malloc(n);
        ok = line != NULL;
        if (ok) {
            snprintf(line, n, "Idempotency-Key: %s", rq->idempotency_key);
            struct curl_slist *s = curl_slist_append(r->headers, line);
            free(line);
            ok = s != NULL;
            if (ok)
                r->headers = s;
        }
        r->has_key = true;
    }
    r->id = e->next_id++;
    if (!ok || !map_put(e, r)) {
        req_free(r);
        return STG_ENOMEM;
    }
    r->where = RQ_NEW_Q;
    q_push(&e->new_q, r);
    e->stats.submitted++;
    if (id)
        *id = r->id;
    return STG_OK;
}

int stg_engine_cancel(stg_engine *e, uint64_t id)
{
    if (!e)
        return STG_EINVAL;
    size_t i = map_find(e, id);
    if (i == SIZE_MAX)
        return STG_ENOTFOUND;
    finish(e, e->slots[i], STG_REASON_CANCELLED);
    return STG_OK;
}

void stg_engine_cancel_all(stg_engine *e)
{
    if (!e || !e->count)
        return;
    /* Snapshot the ids: callbacks may submit (those are kept) or cancel. */
    size_t n = 0;
    uint64_t *ids = malloc(e->count * sizeof *ids);
    if (ids) {
        for (size_t i = 0; i < e->slot_cap; i++)
            if (e->slots[i])
                ids[n++] = e->slots[i]->id;
        for (size_t i = 0; i < n; i++)
            stg_engine_cancel(e, ids[i]);
        free(ids);
        return;
    }
    /* Out of memory: cancel everything older than now, one scan at a time. */
    uint64_t limit = e->next_id;
    for (bool again = true; again;) {
        again = false;
        for (size_t i = 0; i < e->slot_cap; i++)
            if (e->slots[i] && e->slots[i]->id < limit) {
                finish(e, e->slots[i], STG_REASON_CANCELLED);
                again = true;
                break;
            }
    }
}

static int64_t poll_timeout_us(const stg_engine *e, int64_t timeout_us)
{
    int64_t t = timeout_us < 0 ? 0 : timeout_us;
    if ((e->retry_q.head || e->new_q.head) && e->active + e->reserved < e->concurrency)
        return 0;
    const stg__timer *top = stg__heap_top(&e->timers);
    if (top) {
        int64_t until = top->due_us - e->now;
        if (until < t)
            t = until < 0 ? 0 : until;
    }
    return t;
}

int stg_engine_run(stg_engine *e, int64_t timeout_us)
{
    if (!e)
        return 0;
    if (e->in_pass)
        return (int)e->count;
    e->in_pass = true;

    int64_t t = poll_timeout_us(e, timeout_us);
    int64_t ms = (t + 999) / 1000;
    if (ms > INT_MAX)
        ms = INT_MAX;
    struct curl_waitfd wfd = {.fd = e->wake_fd, .events = CURL_WAIT_POLLIN};
    curl_multi_poll(e->multi, &wfd, 1, (int)ms, NULL);
    if (wfd.revents) {
        uint64_t v;
        ssize_t rd = read(e->wake_fd, &v, sizeof v);
        (void)rd;
    }

    /* The one clock read of this pass. */
    e->now = stg__mono_us(e->cfg.env);
    e->wall = stg__wall_us(e->cfg.env);

    int running = 0;
    curl_multi_perform(e->multi, &running);
    process_done(e);
    fire_timers(e);
    start_ready(e);
    /* No curl_multi_perform here: a transfer it finished would sit in the
     * message queue while the next poll sleeps. Handles just added make
     * libcurl's own timeout 0, so the next poll returns at once. */
    e->in_pass = false;
    return (int)e->count;
}

int stg_engine_drain(stg_engine *e)
{
    if (!e)
        return 0;
    if (e->in_pass)
        return (int)e->count;
    /* A stop() wakes the poll through wake_fd; the flag is consumed here,
     * after the pass (one left over from before makes this drain return
     * after its first pass). */
    while (e->count > 0) {
        stg_engine_run(e, STG_SEC(1));
        if (atomic_exchange(&e->stop, false))
            break;
    }
    return (int)e->count;
}

void stg_engine_stop(stg_engine *e)
{
    if (!e)
        return;
    atomic_store(&e->stop, true);
    if (e->wake_fd >= 0) {
        uint64_t one = 1;
        ssize_t w = write(e->wake_fd, &one, sizeof one);
        (void)w;
    }
}

void stg_engine_stats_get(const stg_engine *e, stg_engine_stats *out)
{
    if (!out)
        return;
    memset(out, 0, sizeof *out);
    if (!e)
        return;
    *out = e->stats;
    out->in_flight = e->active;
    out->waiting = (int)e->count - e->active;
}

void stg_engine_free(stg_engine *e)
{
    if (!e)
        return;
    e->closing = true;
    e->in_pass = true; /* callbacks cannot run the loop any more */
    stg_engine_cancel_all(e);
    if (e->multi)
        curl_multi_cleanup(e->multi);
    for (size_t i = 0; i < e->pool_n; i++)
        curl_easy_cleanup(e->pool[i]);
    free(e->pool);
    stg__heap_free(&e->timers);
    stg__hosts_free(&e->hosts);
    free(e->slots);
    if (e->wake_fd >= 0)
        close(e->wake_fd);
    free(e);
}
