/*
 * Admission: what stands between a ready request and its next send: the
 * breaker (a wait or BREAKER_OPEN), the servers' quotas (cfg.quotas: a
 * reservation of the request's cost, or a wait that holds no slot, in
 * the quota queue of its route's group at its host: fair, core/fairq.h,
 * only its head asks), the limiter (a reservation that holds its slot
 * until its instant), the pace queue of a rate reserved a horizon ahead
 * (fair: class, then tenant, core/fairq.h). Then the attempt on a pooled
 * handle. Due timers go to their next state here too. Its moves are made
 * through engine_state.c (whose table they must be rows of); it never
 * calls completion (engine_done.c): a request it ends goes to
 * engine_finish.c.
 *
 * Invariants:
 *  - a send starts only from start_attempt, after the limiter admitted it
 *    (a reservation's timer, or a wait of 0): every attempt, retries and
 *    redirect hops included, passed the limiter;
 *  - with cfg.quotas, every send holds a quota reservation from admission
 *    until its answer (settled in engine_settle.c with the answer's quotas)
 *    or its end without a send (given back), never two at once; with
 *    cfg.shared_quotas too, the shared ledger's reservation of the same
 *    cost is held and settled with it (quota_gate, stg__eng_quota_settle);
 *  - concurrency slots = active attempts + reservations, never more than
 *    `concurrency`, so a reserved send always goes at its reserved time;
 *  - no attempt starts at or after a request's deadline.
 */
#include <stdlib.h>
#include <string.h>
#include <limits.h>

#include "curl/engine.h"

/* ---- pacing: a rate reserved a horizon ahead, one fair queue per host ----
 *
 * A learned rate (the host's adaptive limiter, or a shared limiter with a
 * horizon) is reserved at most a horizon ahead (see admit), and so is a
 * fixed rate (a bucket, a shared limiter without a horizon) once requests
 * of several classes or with tenants have been seen (stg__classes_mixed):
 * reserving up to the deadline hands the future out first come, first
 * served, and an interactive request would wait behind every batch
 * request already holding a slot. Requests whose turn is further out wait,
 * holding their slot, in their host's pace queue, and only its head asks
 * the limiter again (from a W_PACE timer): when every waiter polled on its
 * own, the one that asked at the right instant won, newcomers jumped the
 * queue, and some requests lost hundreds of times in a row (a retry
 * waited 20 s in a 21 s run). The queue is fair (core/fairq.h): when the
 * head gets its reservation or leaves, the next one by class and tenant
 * moves to the front of the retry queue and asks at once; and a head
 * whose W_PACE timer fires while a higher class waits steps back for it
 * (admit). So a higher class waits at most for the reservation already
 * made and the next token: about a horizon plus an emission interval. */

/* A fixed rate's horizon: half an emission interval I (so a higher class
 * waits at most the token reserved ahead, <= I/2, and the next one, I:
 * 1.5 I), at most PACE_HORIZON_US, at least 1 ms. */
static int64_t fixed_horizon(const stg_engine *e)
{
    double rate = e->cfg.rate;
    int64_t h = PACE_HORIZON_US;
    if (rate > 0 && 0.5e6 / rate < (double)h)
        h = (int64_t)(0.5e6 / rate);
    return h < STG_MS(1) ? STG_MS(1) : h;
}

/* How far ahead h's rate may be reserved for a request with left_us to
 * its deadline: left_us when it is not paced. */
static int64_t pace_horizon(const stg_engine *e, const stg__host *h, int64_t left_us)
{
    const stg_shared_limiter *sh = e->cfg.shared;
    int64_t hz = left_us;
    if (sh && sh->acquire) {
        if (sh->horizon_us > 0)
            hz = sh->horizon_us;
        else if (stg__classes_mixed(&e->classes) || h->class_refused)
            hz = fixed_horizon(e);
    } else if (h->has_adaptive) {
        hz = PACE_HORIZON_US;
    } else if (h->has_bucket && stg__classes_mixed(&e->classes)) {
        hz = fixed_horizon(e);
    }
    return hz < left_us ? hz : left_us;
}

static bool paced(const stg_engine *e, const stg__host *h)
{
    return pace_horizon(e, h, INT64_MAX) < INT64_MAX;
}

/* r joins its host's pace queue. False when out of memory. */
static bool pace_push(stg__host *h, req *r)
{
    if (!stg__eng_fq_join(&h->pace_fq, r))
        return false;
    r->pacing = true;
    return true;
}

/* The next head (waiting in PACE_Q) goes to the front of the retry queue,
 * its slot handed back to admission. */
static void pace_next(stg_engine *e, stg__host *h)
{
    req *n = fq_req(stg__fq_peek(h->pace_fq));
    h->pace_head = n;
    if (n && n->where == RQ_PACE_Q) {
        stg__eng_leave(n, RQ_PACE_Q);
        n->reserved = false;
        e->reserved--;
        stg__eng_requeue(e, n, true);
    }
}

/* r leaves its host's pace queue: served (the limiter reserved its send:
 * a pick of the fair queue) or not (it ends, or waits elsewhere); if it
 * was the head, the next one asks. */
static void pace_out(stg_engine *e, req *r, bool served)
{
    if (!r->pacing)
        return;
    stg__host *h = r->host;
    stg__eng_fq_leave(h->pace_fq, &r->fq, served);
    r->pacing = false;
    if (h->pace_head == r)
        pace_next(e, h);
}

void stg__eng_pace_leave(stg_engine *e, req *r)
{
    pace_out(e, r, false);
}

/* The breaker refused: wait for it (a timer) or give up. */
static void breaker_refused(stg_engine *e, req *r, int64_t retry_in_us)
{
    if (e->cfg.defer_when_open) {
        stg__eng_finish(e, r, STG_REASON_BREAKER_OPEN);
        return;
    }
    if (retry_in_us < STG_MS(1))
        retry_in_us = STG_MS(1);
    if (retry_in_us >= stg__eng_remaining(e, r)) {
        stg__eng_finish(e, r, STG_REASON_DEADLINE);
        return;
    }
    stg_event ev;
    stg__eng_ev_init(e, r, STG_EVENT_WAIT, &ev);
    ev.wait_us = retry_in_us;
    ev.reason = STG_REASON_BREAKER_OPEN;
    ev.status = r->status;
    ev.error = r->rs.attempts ? r->err : STG_NET_NONE;
    stg__eng_emit(e, &ev);
    stg__eng_schedule(e, r, W_BREAKER, retry_in_us);
}

/* A body read as it is sent (stg_request.read_body). */
static size_t read_cb(char *buf, size_t size, size_t nitems, void *arg)
{
    const req *r = arg;
    size_t n = r->read_body(buf, size * nitems, r->read_data);
    if (n == STG_READ_PAUSE)
        return CURL_READFUNC_PAUSE;
    if (n == STG_READ_ABORT || n > size * nitems)
        return CURL_READFUNC_ABORT;
    return n;
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
        if (r->read_body) {
            /* Read as it is sent: one attempt only (submit set it). */
            curl_easy_setopt(easy, CURLOPT_POST, 1L);
            curl_easy_setopt(easy, CURLOPT_READFUNCTION, read_cb);
            curl_easy_setopt(easy, CURLOPT_READDATA, (void *)r);
            curl_easy_setopt(easy, CURLOPT_POSTFIELDSIZE_LARGE,
                             r->body_len == (size_t)-1 ? (curl_off_t)-1 : (curl_off_t)r->body_len);
            if (r->method != STG_METHOD_POST)
                curl_easy_setopt(easy, CURLOPT_CUSTOMREQUEST, stg_method_name(r->method));
        } else if (r->has_body || r->method == STG_METHOD_POST || r->method == STG_METHOD_PUT ||
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
    STG_ASSERT(r->where == RQ_NONE);
    if (stg__eng_remaining(e, r) <= 0) {
        stg__eng_finish(e, r, STG_REASON_DEADLINE);
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
        stg__eng_flush_breaker(e, r->host);
        if (rc == STG_EBREAKER) {
            breaker_refused(e, r, retry_in);
            return;
        }
        r->probe_claimed = rc == STG_OK;
    }
    CURL *easy = stg__eng_pool_get(e);
    if (!easy) {
        snprintf(r->errtext, sizeof r->errtext, "out of memory");
        stg__eng_finish(e, r, STG_REASON_ERROR_NOT_RETRYABLE);
        return;
    }
    curl_easy_setopt(easy, CURLOPT_PROTOCOLS_STR, "http,https");
    curl_easy_setopt(easy, CURLOPT_REDIR_PROTOCOLS_STR, "http,https");
    /* Small when thousands are on the wire (xfer.c); setup_easy may override. */
    curl_easy_setopt(easy, CURLOPT_BUFFERSIZE, stg__xfer_buffer_size(e->active + 1));
    if (e->cfg.setup_easy)
        e->cfg.setup_easy(easy, e->cfg.setup_data);
    stg__http_version_apply(easy, e->cfg.http_version); /* PIPEWAIT with h2 */
    /* Redirects are hops through admission (engine_done.c), never libcurl's. */
    curl_easy_setopt(easy, CURLOPT_FOLLOWLOCATION, 0L);
    curl_easy_setopt(easy, CURLOPT_URL, r->url);
    set_method(easy, r);
    /* Secret headers only to the first URL's origin (engine_done.c). */
    struct curl_slist *hdrs = r->off_origin ? r->stripped : r->headers;
    if (hdrs)
        curl_easy_setopt(easy, CURLOPT_HTTPHEADER, hdrs);
    curl_easy_setopt(easy, CURLOPT_PRIVATE, (void *)r);
    stg__xfer_reset(&r->x);
    r->x.wall_now_us = e->wall;
    /* No VERBOSE where HTTP/2 cannot be spoken (xfer.c); a setup_easy
     * hook may set any version, so not with one. */
    r->x.h1_only = !e->cfg.setup_easy && stg__xfer_h2_impossible(r->url, e->cfg.http_version);
    stg__xfer_attach(easy, &r->x);
    stg__xfer_timeouts(easy, &r->x, r->pol, stg__eng_remaining(e, r));
    if (curl_multi_add_handle(e->multi, easy) != CURLM_OK) {
        stg__eng_pool_put(e, easy);
        snprintf(r->errtext, sizeof r->errtext, "curl_multi_add_handle failed");
        stg__eng_finish(e, r, STG_REASON_ERROR_NOT_RETRYABLE);
        return;
    }
    r->easy = easy;
    stg__eng_enter(e, r, RQ_ACTIVE);
    e->active++;
    r->rs.attempts++;
    r->attempt_start_us = e->now;
    e->stats.attempts++;
    /* Its host's cost model learns from the answers of every send, in
     * the order they left (stagger/cost.h). */
    r->cost_seq = r->host->cost_model
                      ? stg_cost_sent(r->host->cost_model, r->quota_held ? r->parts : NULL, e->now)
                      : 0;
    if (r->rs.attempts - r->hops - r->refused > 1)
        e->stats.retries++; /* a redirect hop or a never-processed resend is not a retry */
    stg_event ev;
    stg__eng_ev_init(e, r, STG_EVENT_ATTEMPT_START, &ev);
    if (r->queued) { /* admitted: its wait for admission ends here */
        int64_t w = e->now - r->ready_us;
        stg_class_stats *cs = &r->crow->st;
        r->queued = false;
        cs->waiting--;
        stg__eng_early_queued(e, r->host, -1); /* it may leave the host idle */
        cs->admitted++;
        cs->wait_us += w;
        if (w > cs->wait_max_us)
            cs->wait_max_us = w;
        ev.wait_us = w;
    }
    stg__eng_emit(e, &ev);
}

/* ---- the servers' quotas (cfg.quotas) -------------------------------------
 *
 * Checked before the limiter, so that a send the server's quota refuses
 * spends no token of our own bucket. The key is the request's limit key;
 * the route is its method and path (never the query: secrets live there,
 * and a route is a place in the API, not one call), which the quota
 * limiter maps to the keys the server named for it. */

/* The quota limiter's default probe wait (stg_quota_config.probe_wait_us). */
#define QUOTA_POLL_US STG_MS(20)

/* ---- the quotas' waiters: one fair queue per group of routes that share
 * a quota --------------------------------------------------------------
 *
 * A request the quotas refused, and one that comes while others that
 * share one of its route's quotas wait for them, waits in their quota
 * queue at its host (stg__quota_q, internal.h; core/fairq.h: classes
 * strictly by number with the floor, then tenants by weight), and only
 * its pick, the head, asks the quotas: from a W_QUOTA timer (the quota's
 * wait, or QUOTA_POLL_US behind a probe), the others in a W_QUOTA_Q timer
 * at their deadline (the instant they end if never promoted), holding
 * nothing. When the head is granted (a pick) or leaves, the next pick goes
 * to the front of the retry queue and asks at once; a head whose turn
 * comes while a better pick waits (a higher class, a tenant's turn, the
 * floor's) steps back for it. So what a quota frees goes by class and
 * tenant weight (in cost: quota_share_cost), not to whoever polls first,
 * and nobody polls between two grants.
 *
 * Which queue: the quotas are per route (the quota limiter maps a route to
 * the keys the server named for it, an unknown route to all of them), so
 * the queues are per group of routes that share one: a request joins the
 * queue some of whose waiters are charged to a quota its route is charged
 * to (stg_quota_route_ids; none known, the host's cold probe or global
 * pause, counts as all), else it asks alone. Routes that share a key are
 * ordered together, whatever route a higher class came by; a request
 * whose route's quotas are all free of waiters never waits behind another
 * group's head (an embeddings call does not wait for a chat route's token
 * reset when the server keys them apart).
 *
 * A route's keys are learned from answers and change while requests wait
 * (an unknown route is charged to every key, a known one to its own). A
 * member keeps the keys it joined with (sets[r->qset]) until it asks; the
 * head's are taken again each time it asks (quota_regroup), and then the
 * queue splits and merges: the members whose keys no longer connect to
 * the head's (through the queue's other sets) leave it and ask again as
 * newcomers, each finding its own group; any other queue of the host
 * sharing a quota with what is left moves in, its members keeping their
 * class and tenant (their tags are taken anew), its head waiting behind
 * like the others. Keys kept old only ever group more, never less. The
 * price of a group: a member waits for its head's turn even when the
 * quotas its own route does not share with the head's would admit it (as
 * members of one route always did, for a larger cost).
 *
 * Invariants: r->quota_waiting exactly while r->qfq is in r->qq's fair
 * queue, counted in r->qq->sets[r->qset]; the head is a member, and every
 * other member is in a W_QUOTA_Q timer or on its way to quota_gate (the
 * retry queue: a head whose queue was merged into another); a queue in
 * its host's list has a head (quota_out promotes the next whenever the
 * head leaves, and frees a queue left empty); a member holds no quota
 * reservation. */

/* What r's turn costs its tenant in the quota queue: its largest amount
 * in any unit (stated, or estimated for an AI API request: its tokens),
 * at least 1 (a request that states nothing: one request). So tenants
 * share a token quota by tokens, and requests that cost the same by
 * count. */
static double quota_share_cost(const req *r)
{
    stg_quota_cost c[STG_QUOTA_COSTS_MAX + 3];
    size_t n = stg__eng_cost_now(r, c, sizeof c / sizeof c[0]);
    int64_t most = 1;
    for (size_t i = 0; i < n; i++)
        if (c[i].amount > most)
            most = c[i].amount;
    return (double)most;
}

/* The quotas a request of route at h is charged to now (no id: none
 * announced yet, which stands for all of them). */
static void quota_keys_of(stg_quota *lim, const stg__host *h, const char *route,
                          stg__quota_keys *k)
{
    size_t n = 0;
    if (stg_quota_route_ids(lim, h->key, route, k->id, STG_QUOTA_TICKET_MAX, &n) != STG_OK)
        n = 0;
    k->n = (unsigned)n;
    k->members = 0;
}

static bool keys_has(const stg__quota_keys *k, uint64_t id)
{
    for (unsigned i = 0; i < k->n; i++)
        if (k->id[i] == id)
            return true;
    return false;
}

/* Do a and b share a quota? No id stands for every quota. */
static bool keys_meet(const stg__quota_keys *a, const stg__quota_keys *b)
{
    if (!a->n || !b->n)
        return true;
    for (unsigned i = 0; i < a->n; i++)
        if (keys_has(b, a->id[i]))
            return true;
    return false;
}

static bool keys_same(const stg__quota_keys *a, const stg__quota_keys *b)
{
    if (a->n != b->n)
        return false;
    for (unsigned i = 0; i < a->n; i++)
        if (!keys_has(b, a->id[i]))
            return false;
    return true;
}

/* a takes b's ids too (past STG_QUOTA_TICKET_MAX, or b none: every
 * quota). */
static void keys_add(stg__quota_keys *a, const stg__quota_keys *b)
{
    if (!b->n)
        a->n = 0;
    for (unsigned i = 0; a->n && i < b->n; i++) {
        if (keys_has(a, b->id[i]))
            continue;
        if (a->n == STG_QUOTA_TICKET_MAX)
            a->n = 0;
        else
            a->id[a->n++] = b->id[i];
    }
}

/* Do some of q's waiters share a quota with k? */
static bool quota_q_meets(const stg__quota_q *q, const stg__quota_keys *k)
{
    for (int i = 0; i < STG__QUOTA_Q_SETS; i++)
        if (q->sets[i].members && keys_meet(&q->sets[i], k))
            return true;
    return false;
}

/* The slot of q a member with keys k counts in: the one with the same
 * ids, else a free one, else the last one, widened to k's too. */
static int quota_q_slot(stg__quota_q *q, const stg__quota_keys *k)
{
    int free_i = -1;
    for (int i = 0; i < STG__QUOTA_Q_SETS; i++) {
        if (q->sets[i].members && keys_same(&q->sets[i], k))
            return i;
        if (!q->sets[i].members && free_i < 0)
            free_i = i;
    }
    if (free_i < 0) {
        keys_add(&q->sets[STG__QUOTA_Q_SETS - 1], k);
        return STG__QUOTA_Q_SETS - 1;
    }
    q->sets[free_i] = *k;
    q->sets[free_i].members = 0;
    return free_i;
}

void stg__eng_quota_q_free(stg__quota_q *q)
{
    stg__fq_free(q->fq);
    free(q->fq);
    free(q);
}

/* A new, empty queue at h (NULL when out of memory). */
static stg__quota_q *quota_q_new(stg__host *h)
{
    stg__quota_q *q = calloc(1, sizeof *q);
    if (!q)
        return NULL;
    if (!(q->fq = malloc(sizeof *q->fq))) {
        free(q);
        return NULL;
    }
    stg__fq_init(q->fq, 0);
    q->next = h->quota_qs;
    h->quota_qs = q;
    return q;
}

/* q (empty) leaves h's list and is freed. */
static void quota_q_drop(stg__host *h, stg__quota_q *q)
{
    STG_ASSERT(!q->fq->n);
    stg__quota_q **pp = &h->quota_qs;
    while (*pp != q)
        pp = &(*pp)->next;
    *pp = q->next;
    stg__eng_quota_q_free(q);
}

/* The queue at h some of whose waiters share a quota with k (the first:
 * the others that do are merged into it when its head asks), NULL when
 * none. */
static stg__quota_q *quota_q_of(const stg__host *h, const stg__quota_keys *k)
{
    for (stg__quota_q *q = h->quota_qs; q; q = q->next)
        if (quota_q_meets(q, k))
            return q;
    return NULL;
}

/* r joins q with its keys k (q NULL: a new queue). False when out of
 * memory (then r is in none). */
static bool quota_join(stg__host *h, stg__quota_q *q, const stg__quota_keys *k, req *r)
{
    bool made = !q;
    if (!q && !(q = quota_q_new(h)))
        return false;
    stg_class c = req_class(r);
    if (stg__fq_push_cost(q->fq, &r->qfq, &c, quota_share_cost(r)) != STG_OK) {
        if (made)
            quota_q_drop(h, q);
        return false;
    }
    int i = quota_q_slot(q, k);
    q->sets[i].members++;
    r->qset = (unsigned char)i;
    r->quota_waiting = true;
    r->qq = q;
    return true;
}

/* r leaves its queue's fair queue and key sets: served (a pick) or not.
 * Its queue's head is the caller's to see to. */
static void quota_unlink(req *r, bool served)
{
    stg__quota_q *q = r->qq;
    stg__eng_fq_leave(q->fq, &r->qfq, served);
    STG_ASSERT(q->sets[r->qset].members > 0);
    q->sets[r->qset].members--;
    r->quota_waiting = false;
    r->qq = NULL;
}

/* The queue's next pick becomes its head: from its W_QUOTA_Q timer to the
 * front of the retry queue, to ask at once (NULL: none waits). */
static void quota_next(stg_engine *e, stg__quota_q *q)
{
    req *n = qfq_req(stg__fq_peek(q->fq));
    q->head = n;
    if (n && n->where == RQ_TIMER && n->wait == W_QUOTA_Q) {
        stg__eng_untimer(e, n);
        stg__eng_requeue(e, n, true);
    }
}

/* r leaves its quota queue: granted (a pick of the fair queue) or not (it
 * ends); if it was the head, the next one asks; a queue left empty is
 * freed. */
static void quota_out(stg_engine *e, req *r, bool served)
{
    if (!r->quota_waiting)
        return;
    stg__quota_q *q = r->qq;
    quota_unlink(r, served);
    if (q->head == r)
        quota_next(e, q);
    if (!q->head) {
        STG_ASSERT(!q->fq->n); /* a queue with waiters has a head */
        quota_q_drop(r->host, q);
    }
}

void stg__eng_quota_unwait(stg_engine *e, req *r)
{
    quota_out(e, r, false);
}

/* m, out of its quota queue, asks again as one that comes now: from a
 * quota timer (W_QUOTA_Q, or a head's W_QUOTA) to the front of the retry
 * queue; from anywhere else it is on its way to admission already. */
static void quota_again(stg_engine *e, req *m)
{
    if (m->where == RQ_TIMER && (m->wait == W_QUOTA_Q || m->wait == W_QUOTA)) {
        stg__eng_untimer(e, m);
        stg__eng_requeue(e, m, true);
    }
}

static int by_arrival(const void *a, const void *b)
{
    const req *x = *(req *const *)a, *y = *(req *const *)b;
    return x->qfq.seq < y->qfq.seq ? -1 : x->qfq.seq > y->qfq.seq;
}

/* q's members in their order of arrival: a new array of q->fq->n (NULL
 * when out of memory). */
static req **quota_members(const stg__quota_q *q)
{
    size_t n = q->fq->n, k = 0;
    req **v = malloc((n ? n : 1) * sizeof *v);
    if (!v)
        return NULL;
    for (int ci = 0; ci < STG_N_PRIORITIES; ci++)
        for (stg__fq_flow *f = q->fq->c[ci].flows; f; f = f->next)
            for (stg__fq_item *it = f->head; it; it = it->next)
                v[k++] = qfq_req(it);
    STG_ASSERT(k == n);
    qsort(v, n, sizeof *v, by_arrival);
    return v;
}

/* Every member of o moves into q, in o's order of arrival, keeping its
 * class, tenant and keys; o's head waits behind q's (it asks again and
 * finds itself a member), and o is freed. A member that cannot move (out
 * of memory) asks again as a newcomer. False, nothing moved, when out of
 * memory. */
static bool quota_merge(stg_engine *e, stg__host *h, stg__quota_q *q, stg__quota_q *o)
{
    req **v = quota_members(o);
    if (!v)
        return false;
    size_t n = o->fq->n;
    req *oh = o->head;
    for (size_t j = 0; j < n; j++) {
        req *m = v[j];
        stg__quota_keys k = o->sets[m->qset];
        quota_unlink(m, false);
        if (!quota_join(h, q, &k, m) || m == oh)
            quota_again(e, m);
    }
    free(v);
    o->head = NULL;
    quota_q_drop(h, o);
    return true;
}

/* r, q's head, asks the quotas with the keys its route has now (k): its
 * queue is made to fit them. Members whose keys no longer connect to r's,
 * through the keys of the others, leave and ask again, each to find its
 * own group; then any other queue of h that shares a quota with what is
 * left moves in (quota_merge). */
static void quota_regroup(stg_engine *e, stg__host *h, stg__quota_q *q, req *r,
                          const stg__quota_keys *k)
{
    if (!keys_same(&q->sets[r->qset], k)) {
        q->sets[r->qset].members--;
        int i = quota_q_slot(q, k);
        q->sets[i].members++;
        r->qset = (unsigned char)i;
    }
    /* The sets connected to r's, and every quota they hold. */
    bool in[STG__QUOTA_Q_SETS] = {false};
    in[r->qset] = true;
    stg__quota_keys all = q->sets[r->qset];
    bool grew = true, apart = false;
    while (grew) {
        grew = apart = false;
        for (int i = 0; i < STG__QUOTA_Q_SETS; i++) {
            if (!q->sets[i].members || in[i])
                continue;
            if (keys_meet(&all, &q->sets[i])) {
                in[i] = grew = true;
                keys_add(&all, &q->sets[i]);
            } else {
                apart = true;
            }
        }
    }
    req **v = apart ? quota_members(q) : NULL;
    if (v) {
        /* Backwards: each goes to the front of the retry queue, so they
         * ask again in their order of arrival. */
        for (size_t j = q->fq->n; j-- > 0;)
            if (!in[v[j]->qset]) {
                STG_ASSERT(v[j] != r);
                quota_unlink(v[j], false);
                quota_again(e, v[j]);
            }
        free(v);
    }
    for (bool merged = true; merged;) {
        merged = false;
        for (stg__quota_q *o = h->quota_qs; o; o = o->next) {
            if (o == q || !quota_q_meets(o, &all))
                continue;
            for (int i = 0; i < STG__QUOTA_Q_SETS; i++)
                if (o->sets[i].members)
                    keys_add(&all, &o->sets[i]);
            merged = quota_merge(e, h, q, o);
            break; /* o is gone: the list again */
        }
    }
}

/* r (in RQ_NONE, not the head) waits behind the head, until promoted or
 * its deadline (left: the time to it). */
static void quota_behind(stg_engine *e, req *r, int64_t left)
{
    stg__eng_pace_leave(e, r);
    stg__eng_schedule(e, r, W_QUOTA_Q, left);
}

/* Reserve r's cost against every quota of its key, or wait for them.
 * Returns true when r may go on to the limiter.
 *
 * Classes and tenants (docs/priorities.md): while others wait for the
 * host's quotas r waits with them, and only the head of their fair queue
 * asks (above). */
static bool quota_gate(stg_engine *e, req *r, int64_t left)
{
    if (!e->cfg.quotas || r->quota_held)
        return true;
    stg_quota *q = stg__hosts_quota(&e->hosts);
    if (!q) {
        stg__eng_pace_leave(e, r);
        snprintf(r->errtext, sizeof r->errtext, "out of memory");
        stg__eng_finish(e, r, STG_REASON_ERROR_NOT_RETRYABLE);
        return false;
    }
    stg__host *h = r->host;
    char route[512];
    stg__eng_route(r, route, sizeof route);
    /* The quotas its route is charged to now: asked only when others wait
     * (to find their group), or to start one. */
    stg__quota_keys k;
    k.n = 0;
    bool have_k = r->quota_waiting || h->quota_qs;
    if (have_k)
        quota_keys_of(q, h, route, &k);
    stg__quota_q *wq = r->quota_waiting ? r->qq : h->quota_qs ? quota_q_of(h, &k) : NULL;
    STG_ASSERT(!wq || wq->head); /* a queue in the list has a head */
    STG_ASSERT(!r->quota_waiting || wq->sets[r->qset].members > 0);
    if (wq && wq->head == r)
        quota_regroup(e, h, wq, r, &k); /* its keys may have changed */
    if (wq && wq->head != r) {
        /* Others wait for quotas its route shares: with them, in their
         * fair order. */
        if (!r->quota_waiting && !quota_join(h, wq, &k, r)) {
            stg__eng_pace_leave(e, r);
            snprintf(r->errtext, sizeof r->errtext, "out of memory");
            stg__eng_finish(e, r, STG_REASON_CANCELLED);
            return false;
        }
        quota_behind(e, r, left);
        return false;
    }
    if (wq && qfq_req(stg__fq_peek(wq->fq)) != r) {
        /* A higher class (or a tenant's, or the floor's turn) came while r
         * waited: r steps back, and that one asks at once. */
        quota_next(e, wq); /* the head is that one from now */
        quota_behind(e, r, left);
        return false;
    }
    /* The demand: the host's requests that wait for its quotas, r among
     * them. What fits in a quota's remaining count goes now; only more
     * than that is paced over its reset. */
    int64_t demand = h->q_alive - h->q_held;
    STG_ASSERT(demand >= 1);
    int64_t wait = 0;
    stg_quota_ticket t;
    memset(&t, 0, sizeof t);
    /* Its cost: what it states, and what its body is estimated to cost
     * in each token unit it does not state (cfg.no_cost_estimate off). */
    stg_quota_cost cost[STG_QUOTA_COSTS_MAX + 3];
    size_t n_cost = stg__eng_cost_now(r, cost, sizeof cost / sizeof cost[0]);
    int rc = stg_quota_acquire_demand(q, h->key, route, cost, n_cost, demand, e->now, &t, &wait);
    const stg_quota_cost *took = cost; /* the cost admitted, for the shared ledger */
    size_t n_took = n_cost;
    if (rc == STG_ETOOBIG && n_cost > r->n_cost) {
        took = r->cost;
        n_took = r->n_cost;
        /* An estimate over a quota's limit may be the estimate's fault
         * (max_tokens added where the server takes the larger): the
         * server decides, with the cost stated alone as before. */
        rc = stg_quota_acquire_demand(q, h->key, route, r->cost, r->n_cost, demand, e->now, &t,
                                      &wait);
    }
    if (rc == STG_OK && !stg__eng_ticket_keep(r, &t)) {
        stg_quota_cancel(q, h->key, &t);
        rc = STG_ENOMEM;
    }
    /* The quotas held with other processes (cfg.shared_quotas): the same
     * cost, after the local quotas admitted it; a refusal there gives the
     * local reservation back and waits as a local one would. */
    const stg_shared_quota *sq = e->cfg.shared_quotas;
    if (rc == STG_OK && sq) {
        int src;
        if (sq->acquire_class) { /* the ledger orders the processes by class */
            stg_class c = req_class(r);
            src = sq->acquire_class(sq->ctx, h->key, route, &c, took, n_took, demand, &r->sq,
                                    &wait);
        } else {
            src = sq->acquire(sq->ctx, h->key, route, took, n_took, demand, &r->sq, &wait);
        }
        if (src != STG_OK) {
            r->sq = NULL;
            stg_quota_cancel(q, h->key, r->qt);
            rc = src;
        }
    }
    if (rc == STG_OK) {
        r->quota_held = true;
        h->q_held++;
        quota_out(e, r, true); /* a pick: the next one asks */
        return true;
    }
    stg__eng_pace_leave(e, r);
    if (rc == STG_EUNAVAIL) {
        snprintf(r->errtext, sizeof r->errtext, "the shared quota ledger cannot answer");
        stg__eng_finish(e, r, STG_REASON_LIMITER_UNAVAILABLE);
        return false;
    }
    if (rc != STG_EAGAIN) {
        snprintf(r->errtext, sizeof r->errtext, "%s",
                 rc == STG_ETOOBIG ? "the request's cost is over a quota the server announced"
                                   : stg_strerror(rc));
        stg__eng_finish(e, r, STG_REASON_ERROR_NOT_RETRYABLE);
        return false;
    }
    if (wait >= left) {
        stg__eng_finish(e, r, STG_REASON_DEADLINE); /* the quota returns too late */
        return false;
    }
    /* Behind a probe (a first send, or one after a reset) the wait is a
     * short poll until its answer: not an event each time. */
    if (wait > QUOTA_POLL_US) {
        stg_event ev;
        stg__eng_ev_init(e, r, STG_EVENT_LIMITER_WAIT, &ev);
        ev.wait_us = wait;
        stg__eng_emit(e, &ev);
    }
    /* r is the head: it was, or none waited (then it is alone). */
    if (!have_k)
        quota_keys_of(q, h, route, &k);
    if (!r->quota_waiting && !quota_join(h, NULL, &k, r)) {
        snprintf(r->errtext, sizeof r->errtext, "out of memory");
        stg__eng_finish(e, r, STG_REASON_CANCELLED);
        return false;
    }
    STG_ASSERT(!r->qq->head || r->qq->head == r);
    r->qq->head = r;
    stg__eng_schedule(e, r, W_QUOTA, wait);
    return false;
}

/* A slot is free for r: breaker check, quotas, limiter, then the attempt. */
static void admit(stg_engine *e, req *r)
{
    STG_ASSERT(r->where == RQ_NONE);
    /* The deadline runs from the first admission, not from submission
     * (time in the new queue, waiting for a slot, is the caller's own
     * concurrency, not the host's), and not from the first attempt: a
     * request waiting for an open breaker must still end at its deadline. */
    if (!r->started) {
        r->started = true;
        r->rs.start_us = e->now;
    }
    int64_t left = stg__eng_remaining(e, r);
    if (left <= 0) {
        stg__eng_finish(e, r, STG_REASON_DEADLINE);
        return;
    }
    stg__host *h = r->host;
    if (h->has_breaker) {
        stg_breaker_state st = stg_breaker_state_at(&h->breaker, e->now);
        stg__eng_flush_breaker(e, h);
        if (st == STG_BREAKER_OPEN) {
            int64_t retry_in = 0;
            stg_breaker_allow(&h->breaker, e->now, &retry_in); /* OPEN: claims nothing */
            stg__eng_flush_breaker(e, h);
            stg__eng_pace_leave(e, r);
            breaker_refused(e, r, retry_in);
            return;
        }
    }
    if (!quota_gate(e, r, left))
        return;
    if (paced(e, h) && h->pace_head && !r->pacing) {
        /* Others wait for the rate: with them, in their fair order,
         * keeping the slot. */
        if (!pace_push(h, r)) {
            snprintf(r->errtext, sizeof r->errtext, "out of memory");
            stg__eng_finish(e, r, STG_REASON_CANCELLED);
            return;
        }
        r->reserved = true;
        e->reserved++;
        stg__eng_enter(e, r, RQ_PACE_Q);
        return;
    }
    if (r->pacing && h->pace_head == r) {
        req *best = fq_req(stg__fq_peek(h->pace_fq));
        if (best != r && best->where == RQ_PACE_Q) {
            /* A higher class (or a tenant's, or the floor's turn) came
             * while r waited: r steps back, keeping its slot, and that
             * one asks (its slot is admission's again). */
            r->reserved = true;
            e->reserved++;
            stg__eng_enter(e, r, RQ_PACE_Q);
            stg__eng_leave(best, RQ_PACE_Q);
            best->reserved = false;
            e->reserved--;
            h->pace_head = best;
            admit(e, best);
            return;
        }
    }
    int64_t wait = 0;
    int rc = STG_OK;
    const stg_shared_limiter *sh = e->cfg.shared;
    /* A learned rate reserves at most a horizon ahead. With many slots the
     * reservations would reach hundreds of ms into the future at the rate
     * of the moment, and a cut (a 429) could not slow the sends already
     * reserved: each of them meets the server's empty bucket. Further out,
     * the request keeps its slot and asks again shortly before its turn,
     * at whatever rate holds then. A fixed rate does the same once
     * classes are in play (pace_horizon), so the future goes by class. */
    int64_t horizon = pace_horizon(e, h, left);
    if (sh && sh->acquire) {
        r->ticket = 0;
        if (sh->acquire_class) { /* PRIO.md Join 1: the limiter orders by class too */
            stg_class c = req_class(r);
            rc = sh->acquire_class(sh->ctx, h->key, &c, horizon, &wait, &r->ticket);
        } else {
            rc = sh->acquire(sh->ctx, h->key, horizon, &wait, &r->ticket);
        }
        if (rc != STG_OK && rc != STG_ETIMEDOUT) {
            stg__eng_pace_leave(e, r);
            snprintf(r->errtext, sizeof r->errtext, "shared limiter: %s", stg_strerror(rc));
            stg__eng_finish(e, r, STG_REASON_LIMITER_UNAVAILABLE);
            return;
        }
    } else if (h->has_bucket) {
        rc = stg_bucket_acquire(&h->bucket, 1, e->now, horizon, &wait);
    } else if (h->has_adaptive) {
        rc = stg_adaptive_acquire(&h->adaptive, e->now, horizon, &wait);
    }
    if (rc == STG_ETIMEDOUT && horizon >= left && wait < left && sh && sh->acquire_class &&
        !h->class_refused) {
        /* Refused before the deadline with the whole of it to reserve in:
         * not a matter of time but of class (another process's higher
         * class asks). This key is paced from now on, and r asks again. */
        h->class_refused = true;
        horizon = pace_horizon(e, h, left);
    }
    if (rc == STG_ETIMEDOUT && horizon < left && wait < left) {
        if (!r->pacing && !pace_push(h, r)) {
            snprintf(r->errtext, sizeof r->errtext, "out of memory");
            stg__eng_finish(e, r, STG_REASON_CANCELLED);
            return;
        }
        h->pace_head = r; /* it was the head, or the queue was empty */
        r->reserved = true;
        e->reserved++;
        /* A reservation a horizon ahead is asked for half a horizon before
         * its turn; a class's refusal (no token ahead for it) is asked again
         * when its wait is over, not before: earlier it is refused again. */
        int64_t at = sh && sh->acquire_class ? wait : wait - horizon / 2;
        stg__eng_schedule(e, r, W_PACE, at > STG_MS(1) ? at : STG_MS(1));
        return;
    }
    pace_out(e, r, rc == STG_OK); /* reserved (or refused for good): the next one asks */
    if (rc == STG_ETIMEDOUT) {
        stg__eng_finish(e, r, STG_REASON_DEADLINE); /* not admitted before the deadline */
        return;
    }
    if (rc == STG_OK && wait > 0) {
        r->reserved = true;
        e->reserved++;
        e->stats.limiter_wait_us += wait;
        stg_event ev;
        stg__eng_ev_init(e, r, STG_EVENT_LIMITER_WAIT, &ev);
        ev.wait_us = wait;
        stg__eng_emit(e, &ev);
        stg__eng_schedule(e, r, W_LIMITER, wait);
        return;
    }
    start_attempt(e, r);
}

/* The engine's slots a class leaves free for the classes above it (one
 * each: normal 1, batch 2), so that a higher class arriving while a lower
 * one fills the concurrency finds a slot at once; never all of them. None
 * until a class other than normal or a tenant is seen (the old behaviour
 * of an engine of normal requests). */
static int headroom(const stg_engine *e, int prio)
{
    if (!stg__classes_mixed(&e->classes))
        return 0;
    int n = stg__fq_class_index(prio);
    return n < e->concurrency ? n : e->concurrency - 1;
}

bool stg__eng_can_start(const stg_engine *e)
{
    int free_slots = e->concurrency - e->active - e->reserved;
    if (free_slots <= 0)
        return false;
    if (e->retry_q.head)
        return true; /* retries keep their turn */
    const req *r = fq_req(stg__fq_peek(&e->new_fq));
    return r && free_slots > headroom(e, r->prio);
}

void stg__eng_start_ready(stg_engine *e)
{
    /* Each iteration takes one request off a queue. Callbacks may submit
     * more; those wait for the next pass (whose poll then does not wait),
     * so a callback that resubmits whatever finishes cannot spin here.
     * Retries first (they keep their turn), then the new queue's fair
     * order (the next by class, floor and tenant), which stops at a class
     * that would take a slot its headroom leaves to the higher ones. */
    size_t budget = e->count;
    while (budget-- > 0 && stg__eng_can_start(e)) {
        req *r = STG__OWNER(e->retry_q.head, req, q_link);
        if (r) {
            stg__eng_q_unlink(&e->retry_q, r);
            stg__eng_leave(r, RQ_RETRY_Q);
        } else {
            r = fq_req(stg__fq_pop(&e->new_fq));
            stg__eng_leave(r, RQ_NEW_Q);
        }
        if (stg__eng_conc_gate(e, r)) /* else it waits for its host's slot */
            admit(e, r);
    }
}

void stg__eng_fire_timers(stg_engine *e)
{
    /* Bounded: each step removes one entry that was due; new entries are
     * due strictly later than now (waits >= 1 ms) or are bounded by the
     * count taken at the start. */
    size_t budget = e->timers.n;
    const stg__timer *t;
    while (budget-- > 0 && (t = stg__heap_top(&e->timers)) && t->due_us <= e->now) {
        req *r = t->item;
        stg__eng_untimer(e, r);
        if (r->wait == W_LIMITER) {
            start_attempt(e, r); /* the slot was held by the reservation */
        } else if (r->wait == W_PACE) {
            r->reserved = false; /* admission takes the slot again */
            e->reserved--;
            admit(e, r);
        } else if (r->wait == W_QUOTA_Q) {
            stg__eng_finish(e, r, STG_REASON_DEADLINE); /* never promoted in time */
        } else if (r->wait == W_BUDGET || r->wait == W_BUDGET_HELD) {
            if (r->wait == W_BUDGET_HELD)
                r->host->budget_held--;
            stg__eng_budget_gate(e, r);
        } else {
            stg__eng_requeue(e, r, false);
        }
    }
}
