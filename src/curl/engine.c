/*
 * stg_engine: many requests driven by one thread on one curl_multi.
 *
 * The loop (one stg_engine_run() call is one pass), on libcurl's
 * multi_socket interface, so a pass touches only the sockets that fired
 * and never walks the idle transfers (curl_multi_perform does, every
 * call: with hundreds of streams in flight that walk was most of a pass):
 *   1. epoll_wait() on the engine's own epoll set: the sockets libcurl
 *      asked for (sock_cb), the engine's wake fd and the caller's fd of
 *      stg_engine_run_fd; for at most the caller's timeout, the time to
 *      the earliest timer or to libcurl's own (timer_cb), or 0 when a
 *      request is ready to start;
 *   2. read the clock (monotonic and wall) ONCE; every decision of the
 *      pass uses that instant;
 *   3. curl_multi_socket_action() for each socket that fired, and for
 *      libcurl's timer when it is due; handle finished attempts:
 *      classify, feed the host's adaptive limiter, breaker and budget, ask
 *      stg_decide(), and either finish the request or put a backoff timer
 *      in the heap;
 *   4. fire due timers (backoff, limiter, breaker waits);
 *   5. start ready requests while a concurrency slot is free: breaker check,
 *      limiter reservation (a wait becomes a timer that keeps the slot),
 *      then the attempt on a pooled easy handle.
 *
 * libcurl's timer is kept on the real monotonic clock (stg__mono_us(NULL)),
 * not the injected one: libcurl measures its own timeouts in real time,
 * and a test's frozen virtual clock must not stall a transfer.
 *
 * A request is in exactly one place (engine.h): the new queue, the retry
 * queue (a request that already made an attempt; served first), the timer
 * heap, the multi (active), or its host's pace queue. Concurrency slots =
 * active attempts + limiter reservations waiting for their instant, so a
 * reserved send always goes at its reserved time and the limiter's bound
 * (burst + rate * t) holds for what is actually sent: every send, libcurl
 * never resending or following a redirect on its own (xfer.c, redirect.c).
 *
 * The files: this one is the API and the loop; engine_ids.c, engine_req.c,
 * engine_state.c, engine_admit.c, engine_done.c and the rest (engine.h says which is which).
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
 *    handles are reset and pooled (at most `concurrency` kept), and a
 *    request holds one only while its attempt is on the wire: accepted
 *    requests waiting anywhere else cost their struct, URL and headers,
 *    about 1 KB (docs/ARCHITECTURE.md, "Memory");
 *  - the epoll set holds the sockets libcurl watches (with the events it
 *    asked for), the wake fd, and the caller's fd of the current
 *    stg_engine_run_fd (ext_fd), and may hold sockets libcurl stopped
 *    watching (sock_cb): those are never handed to libcurl, and leave
 *    the set when they fire or close; libcurl is never called back into
 *    from sock_cb or timer_cb (they only record);
 *  - no global state: two engines never share anything but libcurl's
 *    process-wide init;
 *  - what goes on the wire is framed by libcurl alone: a submitted header
 *    that is not a valid line (token name, no CTL but HTAB in the value)
 *    or that names a field the transport owns (Content-Length,
 *    Transfer-Encoding, Connection, Keep-Alive, Proxy-Connection, TE,
 *    Trailer, Upgrade: util/http_field.h) is refused at submit, so no
 *    request can end early and leave bytes read as another's on a shared
 *    connection.
 */
#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "curl/engine.h"
#include "util/grow.h"
#include "util/http_field.h"

/* How often a pass ticks cfg.shared_quotas (and the longest a pass waits
 * while sends are in flight with it): well inside the ledger's refresh. */
#define SQ_TICK_US STG_SEC(1)

/* ---- libcurl's multi_socket callbacks ------------------------------------- */

/* What the set holds of a socket libcurl had (e->fds, by descriptor). */
#define FD_IN_SET 0x1u /* in ep, with the events below */
#define FD_WANT 0x2u   /* libcurl watches it (no REMOVE since) */
#define FD_EVIN 0x4u
#define FD_EVOUT 0x8u

static bool fds_room(stg_engine *e, curl_socket_t s)
{
    size_t had = e->fds_cap;
    if (!stg__reserve(&e->fds, &e->fds_cap, (size_t)s + 1, 1, 64))
        return false;
    memset(e->fds + had, 0, e->fds_cap - had);
    return true;
}

/* libcurl wants s watched for `what`, or no more (REMOVE). A REMOVE
 * leaves s in the set (a kept-alive connection comes back for the next
 * request: DEL then ADD was two of the ~10 syscalls a proxied request
 * cost); if it fires while unwanted, the pass takes it out then. A
 * socket libcurl (re)announces (socketp NULL) is always told to the
 * kernel: its number may be a closed socket's, which the kernel already
 * dropped from the set (MOD then fails with ENOENT: ADD). */
static int sock_cb(CURL *easy, curl_socket_t s, int what, void *userp, void *socketp)
{
    (void)easy;
    stg_engine *e = userp;
    bool room = fds_room(e, s);
    uint8_t *st = room ? &e->fds[s] : NULL;
    if (what == CURL_POLL_REMOVE) {
        if (st)
            *st &= (uint8_t)~FD_WANT;
        else
            epoll_ctl(e->ep, EPOLL_CTL_DEL, s, NULL);
        return 0;
    }
    uint8_t ev8 = (uint8_t)((what & CURL_POLL_IN ? FD_EVIN : 0) | (what & CURL_POLL_OUT ? FD_EVOUT : 0));
    if (st && socketp && (*st & FD_IN_SET) && (*st & (FD_EVIN | FD_EVOUT)) == ev8) {
        *st |= FD_WANT;
        return 0;
    }
    struct epoll_event ev = {.events = 0, .data.fd = s};
    if (what & CURL_POLL_IN)
        ev.events |= EPOLLIN;
    if (what & CURL_POLL_OUT)
        ev.events |= EPOLLOUT;
    int op = st && !(*st & FD_IN_SET) ? EPOLL_CTL_ADD : EPOLL_CTL_MOD;
    int rc = epoll_ctl(e->ep, op, s, &ev);
    if (rc != 0 && errno == EEXIST)
        rc = epoll_ctl(e->ep, EPOLL_CTL_MOD, s, &ev);
    else if (rc != 0 && errno == ENOENT)
        rc = epoll_ctl(e->ep, EPOLL_CTL_ADD, s, &ev);
    if (st)
        *st = rc == 0 ? (uint8_t)(FD_IN_SET | FD_WANT | ev8) : 0;
    if (!socketp)
        curl_multi_assign(e->multi, s, e);
    return 0;
}

/* s fired: false when libcurl no longer watches it (taken out of the set
 * here: see sock_cb). */
static bool fd_wanted(stg_engine *e, int s)
{
    if (s < 0 || (size_t)s >= e->fds_cap || (e->fds[s] & FD_WANT))
        return true;
    epoll_ctl(e->ep, EPOLL_CTL_DEL, s, NULL);
    e->fds[s] = 0;
    return false;
}

/* libcurl's one timer: due in ms, or none (-1); 0 (at once) is kept as 0,
 * which curl_due_now() answers without a clock read. */
static int timer_cb(CURLM *multi, long ms, void *userp)
{
    (void)multi;
    stg_engine *e = userp;
    e->curl_due = ms < 0 ? -1 : ms == 0 ? 0 : stg__mono_us(NULL) + (int64_t)ms * 1000;
    return 0;
}

static bool curl_due_now(const stg_engine *e)
{
    return e->curl_due >= 0 && (e->curl_due == 0 || e->curl_due <= stg__mono_us(NULL));
}

/* The caller's fd of this pass: the previous one leaves the set. A
 * descriptor epoll cannot watch (a regular file) is always ready, as
 * poll() says of it. */
static void ext_set(stg_engine *e, int fd)
{
    if (fd == e->ext_fd)
        return;
    if (e->ext_fd >= 0 && !e->ext_always)
        epoll_ctl(e->ep, EPOLL_CTL_DEL, e->ext_fd, NULL);
    e->ext_fd = fd;
    e->ext_always = false;
    if (fd >= 0) {
        struct epoll_event ev = {.events = EPOLLIN, .data.fd = fd};
        if (epoll_ctl(e->ep, EPOLL_CTL_ADD, fd, &ev) != 0 && errno != EEXIST)
            e->ext_always = true;
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
    stg__fq_init(&e->new_fq, 0);
    stg__classes_init(&e->classes);
    e->concurrency = c.concurrency ? c.concurrency : DEFAULT_CONCURRENCY;
    if (c.learn) { /* copied: the hosts set up from it later */
        e->learn = *c.learn;
        e->cfg.learn = &e->learn;
        if (!c.concurrency) {
            stg_concurrency_config lr;
            stg_concurrency_resolve(&e->learn, &lr); /* checked by the hosts */
            e->concurrency = lr.max_limit;
        }
    }
    e->now = now;
    e->wall = stg__wall_us(c.env);
    e->next_id = 1;
    e->wake_fd = -1;
    e->ep = -1;
    e->ext_fd = -1;
    e->curl_due = -1;
    atomic_init(&e->stop, false);
    stg__eng_trace_open(e);
    stg__heap_init(&e->timers);
    stg__hosts_init(&e->hosts);
    e->hosts.max = c.max_hosts;
    stg_rng_seed(&e->rng, c.seed ? c.seed : stg__seed(e, now));
    e->pool = calloc((size_t)e->concurrency, sizeof *e->pool);
    /* Made now, not at the first answer: stg_engine_quotas hands it to
     * other threads, so the pointer never changes after this. */
    bool quota_ok = !c.quotas || stg__hosts_quota(&e->hosts);
    e->multi = curl_multi_init();
    e->wake_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    e->ep = epoll_create1(EPOLL_CLOEXEC);
    struct epoll_event wev = {.events = EPOLLIN, .data.fd = e->wake_fd};
    if (!e->pool || !quota_ok || !e->multi || e->wake_fd < 0 || e->ep < 0 ||
        epoll_ctl(e->ep, EPOLL_CTL_ADD, e->wake_fd, &wev) != 0) {
        *err = STG_ENOMEM;
        stg_engine_free(e);
        return NULL;
    }
    curl_multi_setopt(e->multi, CURLMOPT_SOCKETFUNCTION, sock_cb);
    curl_multi_setopt(e->multi, CURLMOPT_SOCKETDATA, e);
    curl_multi_setopt(e->multi, CURLMOPT_TIMERFUNCTION, timer_cb);
    curl_multi_setopt(e->multi, CURLMOPT_TIMERDATA, e);
    long maxconn = e->concurrency > 8 ? e->concurrency : 8;
    curl_multi_setopt(e->multi, CURLMOPT_MAXCONNECTS, maxconn);
    /* HTTP/2: streams share a connection (libcurl keeps within the
     * server's SETTINGS_MAX_CONCURRENT_STREAMS). */
    curl_multi_setopt(e->multi, CURLMOPT_PIPELINING, (long)CURLPIPE_MULTIPLEX);
    return e;
}

static bool header_ok(const char *s)
{
    return s && !strpbrk(s, "\r\n");
}

/* A request header the engine sends (curl.h, stg_request.headers): one of
 * libcurl's line forms with a token name and a clean value, and not a
 * field the transport owns (util/http_field.h). */
static bool request_header_ok(const char *h)
{
    size_t n = h ? stg__http_line_name(h) : 0;
    return n > 0 && !stg__http_transport_field(h, n);
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
    if (rq->max_redirects < 0 || rq->max_attempts < 0 ||
        !stg__class_valid(rq->priority, rq->tenant, rq->weight) || (rq->read_body && rq->body))
        return STG_EINVAL;
    if (rq->idempotency_key &&
        (!*rq->idempotency_key ||
         !stg__http_value_ok(rq->idempotency_key, strlen(rq->idempotency_key))))
        return STG_EINVAL;
    for (size_t i = 0; rq->headers && rq->headers[i]; i++)
        if (!request_header_ok(rq->headers[i]))
            return STG_EINVAL;
    if (stg__eng_cost_check(rq) != STG_OK)
        return STG_EINVAL;
    stg_policy rq_pol;
    if (rq->policy && stg_policy_resolve(rq->policy, &rq_pol) != STG_OK)
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
    r->engine = e;
    r->host = h;
    h->refs++; /* until stg__eng_req_free */
    r->method = m;
    r->done = done;
    r->data = data;
    r->server_wait_us = STG_UNKNOWN;
    stg__xfer_init(&r->x, e->cfg.max_body);
    stg__xfer_set_sink(&r->x, rq->body_sink, rq->body_sink_data);
    if (e->cfg.quotas) {
        r->x.on_head = stg__eng_head; /* the quotas are learned at the head */
        r->x.head_arg = r;
    }
    r->x.tls = e->cfg.tls; /* applied at each attempt's attach */
    r->x.stream = rq->stream;
    r->pol = &e->pol;
    bool ok = true;
    if (rq->policy || rq->deadline_us || rq->max_attempts || rq->read_body) {
        ok = (r->own_pol = malloc(sizeof *r->own_pol)) != NULL;
        if (ok) {
            *r->own_pol = rq->policy ? rq_pol : e->pol;
            if (rq->deadline_us)
                r->own_pol->deadline_us = rq->deadline_us;
            if (rq->max_attempts)
                r->own_pol->max_attempts = rq->max_attempts;
            if (rq->read_body) /* a body read as it is sent cannot be sent again */
                r->own_pol->max_attempts = 1;
            r->pol = r->own_pol;
        }
    }
    r->prio = rq->priority;
    r->weight = rq->weight;
    if (rq->tenant && *rq->tenant)
        ok = ok && (r->tenant = strdup(rq->tenant)) != NULL;
    r->crow = stg__classes_row(&e->classes, r->prio, r->tenant);
    if (rq->read_body) {
        r->read_body = rq->read_body;
        r->read_data = rq->body_sink_data;
        r->body_len = rq->body_len;
    }
    char red[2048];
    stg_redact_url(rq->url, red, sizeof red);
    /* One copy of the URL while nothing differs: the first hop's is the
     * origin, and the redacted one is the same text when there was
     * nothing to redact (engine.h: url, url_red). */
    r->origin = strdup(rq->url);
    r->url = r->origin;
    r->url_red = r->origin && strcmp(red, rq->url) ? strdup(red) : r->origin;
    ok = ok && r->origin && r->url_red;
    r->follow = rq->follow_redirects;
    r->max_redirects = rq->max_redirects > 0 ? rq->max_redirects : 20;
    size_t ns = 0;
    while (rq->secret_headers && rq->secret_headers[ns])
        ns++;
    if (ok && ns) {
        r->secret = calloc(ns + 1, sizeof *r->secret);
        ok = r->secret != NULL;
        for (size_t i = 0; ok && i < ns; i++)
            ok = (r->secret[i] = strdup(rq->secret_headers[i])) != NULL;
    }
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
    ok = ok && stg__eng_cost_copy(r, rq) && stg__eng_cost_parts(e, r, rq);
    r->id = e->next_id++;
    if (!ok || !stg__eng_map_put(e, r)) {
        stg__eng_req_free(r);
        return STG_ENOMEM;
    }
    stg_class cls = req_class(r);
    if (stg__fq_push(&e->new_fq, &r->fq, &cls) != STG_OK) {
        stg__eng_map_del(e, r->id);
        stg__eng_req_free(r);
        return STG_ENOMEM;
    }
    stg__eng_enter(e, r, RQ_NEW_Q);
    h->q_alive++; /* the quotas' demand (engine_admit.c), until finish */
    e->stats.submitted++;
    if (id)
        *id = r->id;
    return STG_OK;
}

/* The request of id, for the calls that name one (cancel, resume): STG_OK
 * with *out, STG_EINVAL without an engine, STG_ENOTFOUND for an id that is
 * not (or no longer) the engine's. */
static int req_of(stg_engine *e, uint64_t id, req **out)
{
    if (!e)
        return STG_EINVAL;
    size_t i = stg__eng_map_find(e, id);
    if (i == SIZE_MAX)
        return STG_ENOTFOUND;
    *out = e->slots[i];
    return STG_OK;
}

int stg_engine_cancel(stg_engine *e, uint64_t id)
{
    req *r;
    int rc = req_of(e, id, &r);
    if (rc == STG_OK)
        stg__eng_finish(e, r, STG_REASON_CANCELLED);
    return rc;
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
                stg__eng_finish(e, e->slots[i], STG_REASON_CANCELLED);
                again = true;
                break;
            }
    }
}

static int64_t poll_timeout_us(const stg_engine *e, int64_t timeout_us)
{
    int64_t t = timeout_us < 0 ? 0 : timeout_us;
    if (stg__eng_can_start(e))
        return 0;
    if (e->ext_always || e->done_unread)
        return 0;
    if (e->curl_due >= 0) {
        int64_t until = e->curl_due - stg__mono_us(NULL);
        if (until < t)
            t = until < 0 ? 0 : until;
    }
    const stg__timer *top = stg__heap_top(&e->timers);
    if (top) {
        int64_t until = top->due_us - e->now;
        if (until < t)
            t = until < 0 ? 0 : until;
    }
    /* Sends in flight hold units in the shared quota ledger, whose entry
     * must be renewed even while nothing else happens (SQ_TICK_US). */
    if (e->cfg.shared_quotas && e->cfg.shared_quotas->tick && e->active > 0 && t > SQ_TICK_US)
        t = SQ_TICK_US;
    return t;
}

int stg_engine_run(stg_engine *e, int64_t timeout_us)
{
    return stg_engine_run_fd(e, timeout_us, -1);
}

int stg_engine_run_fd(stg_engine *e, int64_t timeout_us, int fd)
{
    if (!e)
        return 0;
    if (e->in_pass)
        return (int)e->count;
    e->in_pass = true;

    ext_set(e, fd);
    int64_t t = poll_timeout_us(e, timeout_us);
    int64_t ms = (t + 999) / 1000;
    if (ms > INT_MAX)
        ms = INT_MAX;
    struct epoll_event ev[64];
    int n = epoll_wait(e->ep, ev, 64, (int)ms);

    /* The one clock read of this pass. */
    e->now = stg__mono_us(e->cfg.env);
    e->wall = stg__wall_us(e->cfg.env);

    int running = 0;
    for (int i = 0; i < n; i++) {
        int s = ev[i].data.fd;
        uint32_t got = ev[i].events;
        if (s == e->wake_fd) {
            uint64_t v;
            ssize_t rd = read(e->wake_fd, &v, sizeof v);
            (void)rd;
        } else if (s != e->ext_fd && fd_wanted(e, s)) { /* the caller's fd only ends the wait */
            /* An error or hang-up goes to libcurl as readable (and
             * writable): its recv/send then reports what happened, as
             * with poll/perform, rather than a bare "select error". */
            int bits = 0;
            if (got & (EPOLLIN | EPOLLERR | EPOLLHUP))
                bits |= CURL_CSELECT_IN;
            if (got & (EPOLLOUT | EPOLLERR | EPOLLHUP))
                bits |= CURL_CSELECT_OUT;
            curl_multi_socket_action(e->multi, s, bits, &running);
        }
    }
    if (curl_due_now(e)) {
        e->curl_due = -1; /* timer_cb may set it again from within */
        curl_multi_socket_action(e->multi, CURL_SOCKET_TIMEOUT, 0, &running);
    }
    e->done_unread = false;
    stg__eng_pump(e);
    const stg_shared_quota *sq = e->cfg.shared_quotas;
    if (sq && sq->tick && e->now - e->sq_tick_at >= SQ_TICK_US) {
        e->sq_tick_at = e->now;
        sq->tick(sq->ctx);
    }
    /* Handles just added set libcurl's timer to 0 (timer_cb): they are
     * run in this pass (a few rounds at most), so a new request's send
     * costs no extra pass, no extra wait and no extra turn of the
     * caller's loop (the proxy's MHD_run). A transfer that finishes in
     * such a round is read in the next pass, which then does not wait
     * (done_unread): a pass hands over its finished attempts before it
     * starts any, so a caller that writes outcomes and claims in one
     * transaction (the batch runner's one commit per pass) sees them in
     * that order. */
    for (int round = 0; round < 3 && curl_due_now(e); round++) {
        e->curl_due = -1;
        curl_multi_socket_action(e->multi, CURL_SOCKET_TIMEOUT, 0, &running);
        if (running < (int)e->active)
            e->done_unread = true;
    }
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

int stg_engine_resume(stg_engine *e, uint64_t id)
{
    req *r;
    int rc = req_of(e, id, &r);
    if (rc != STG_OK)
        return rc;
    if (r->where == RQ_ACTIVE && r->easy) {
        /* libcurl calls timer_cb from here (due now): the next pass
         * runs the transfer, with its paused bytes, at once. */
        curl_easy_pause(r->easy, CURLPAUSE_CONT);
    }
    return STG_OK;
}

void stg_engine_wake(stg_engine *e)
{
    if (e && e->wake_fd >= 0) {
        uint64_t one = 1;
        ssize_t w = write(e->wake_fd, &one, sizeof one);
        (void)w;
    }
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

stg_quota *stg_engine_quotas(const stg_engine *e)
{
    return e && e->cfg.quotas ? e->hosts.quota : NULL;
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
    out->concurrency_limit = stg__eng_conc_sum(e);
    out->hosts = e->hosts.n;
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
    stg__fq_free(&e->new_fq);
    stg__classes_free(&e->classes);
    free(e->slots);
    if (e->wake_fd >= 0)
        close(e->wake_fd);
    if (e->ep >= 0) /* after the multi: its cleanup calls sock_cb */
        close(e->ep);
    free(e->fds);
    stg__eng_trace_close(e);
    free(e);
}
