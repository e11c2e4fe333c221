/*
 * Integration tests of the shared quota ledger (stagger/redis/quota.h)
 * against a real redis-server on a free loopback port.
 *
 * What is checked:
 *  - three replicas (threads, each with its own connection and ledger
 *    object) sending through one token quota of a simulated OpenAI-like
 *    server (a bucket of LIMIT tokens refilling LIMIT per WINDOW, counted
 *    at arrival, answering its remaining count and the time until full):
 *    the server refuses nothing, so its admitted tokens are the bucket's
 *    (burst + rate * t as it defines them), and each replica admits some;
 *  - an idle replica gives its lease back when its key has nothing left
 *    to send: another replica can then take the whole quota at once; while
 *    it still holds the lease, the other cannot;
 *  - a replica killed with a lease out (a child process that exits
 *    without freeing): its units lapse with the ttl, and not before;
 *  - a request in flight longer than the ttl with nothing else going on:
 *    the replica's ticks keep its units held;
 *  - Redis down: with a fallback share S a replica admits S of the last
 *    estimate less its own units in flight; without one, STG_EUNAVAIL;
 *  - a cost above a shared quota's limit is STG_ETOOBIG;
 *  - a host with two server keys (GitHub's core and search): once each
 *    route's answer named its key, a spent search quota holds only the
 *    search route (and routes never answered), not core's;
 *  - the ledger is one hash per limit key ("stagger:qs:KEY") naming each
 *    replica that holds units;
 *  - classes: while an interactive replica waits for a quota, a batch (or
 *    normal) replica's request that fits is refused, but for the floor
 *    (one grant of its cost once the interactive ones were granted 19
 *    times its cost); once they stop, the batch has the quota and its
 *    leases back; and two replicas on the simulated bucket: a saturating
 *    batch keeps only its floor while an interactive one asks, has the
 *    whole refill before and after, and the server refuses nothing.
 * The simulated server's clock and Redis's are this machine's; bounds are
 * the protocol's (refusals are 0 because every unit sent was held against
 * the server's own count), never a throughput figure.
 */
#define _GNU_SOURCE
#include <sys/mman.h>

#include "cmocka_all.h"

#include "integration/redis_helper.h"

#include <stagger/redis/quota.h>

#define LIMIT 3000
#define WINDOW_MS 3000

/* ---- the simulated server: an OpenAI-like tokens-per-minute bucket ---- */

typedef struct server {
    pthread_mutex_t mu;
    double level;
    int64_t at;
    int64_t admitted, refused, tokens;
} server;

static void server_init(server *s)
{
    memset(s, 0, sizeof *s);
    pthread_mutex_init(&s->mu, NULL);
    s->level = LIMIT;
    s->at = now_us();
}

/* A request of cost arrives: admitted (counted) or refused; qs gets the
 * answer's quota as the OpenAI dialect reads it. */
static bool server_arrive(server *s, int64_t cost, stg_quota_set *qs)
{
    pthread_mutex_lock(&s->mu);
    int64_t now = now_us();
    double rate_us = (double)LIMIT / (WINDOW_MS * 1000.0);
    s->level += rate_us * (double)(now - s->at);
    if (s->level > LIMIT)
        s->level = LIMIT;
    s->at = now;
    bool ok = (double)cost <= s->level;
    if (ok) {
        s->level -= (double)cost;
        s->admitted++;
        s->tokens += cost;
    } else {
        s->refused++;
    }
    int64_t rem = (int64_t)s->level;
    stg_quota_set_init(qs);
    qs->n = 1;
    stg_quota_obs *o = &qs->q[0];
    memset(o, 0, sizeof *o);
    snprintf(o->unit, sizeof o->unit, "tokens");
    o->limit = LIMIT;
    o->remaining = rem;
    o->reset_us = (int64_t)((double)(LIMIT - rem) / rate_us) + 1;
    o->window_us = STG_UNKNOWN;
    o->dialect = STG_DIALECT_OPENAI;
    pthread_mutex_unlock(&s->mu);
    return ok;
}

/* ---- replicas ---------------------------------------------------------- */

static stg_redis_limiter *limiter_at(int port, double share)
{
    char url[128];
    snprintf(url, sizeof url, "redis://127.0.0.1:%d/quota-test", port);
    stg_redis_limiter_config cfg = {.url = url, .rate = 1000, .fallback_share = share};
    int err;
    return stg_redis_limiter_new(&cfg, &err, NULL, 0);
}

static stg_redis_quota *ledger(stg_redis_limiter *l, const char *name, int64_t ttl_us)
{
    stg_redis_quota_config c = {.replica = name, .ttl_us = ttl_us};
    int err = -1;
    stg_redis_quota *q = stg_redis_quota_new(l, &c, &err);
    assert_non_null(q);
    assert_int_equal(err, STG_OK);
    return q;
}

static stg_quota_cost tokens(int64_t n)
{
    stg_quota_cost c;
    memset(&c, 0, sizeof c);
    snprintf(c.unit, sizeof c.unit, "tokens");
    c.amount = n;
    return c;
}

static int ask(stg_redis_quota *q, const char *key, int priority, int64_t cost, int64_t demand,
               stg_redis_quota_ticket **t, int64_t *w)
{
    stg_class c = {.priority = priority};
    stg_quota_cost cc = tokens(cost);
    return stg_redis_quota_acquire_class(q, key, NULL, &c, &cc, 1, demand, t, w);
}

/* The server's first answer, heard by q: the quota is known to Redis. */
static void announce(stg_redis_quota *q, const char *key, server *s)
{
    stg_redis_quota_ticket *t = NULL;
    int64_t w = 0;
    stg_quota_cost c = tokens(10);
    assert_int_equal(stg_redis_quota_acquire(q, key, NULL, &c, 1, 1, &t, &w), STG_OK);
    stg_quota_set qs;
    assert_true(server_arrive(s, 10, &qs));
    assert_int_equal(stg_redis_quota_settle(q, t, STG_REDIS_QUOTA_ANSWERED, &qs, NULL, 0, 0),
                     STG_OK);
}

/* A fresh server, whose first answer for key an announcer replica heard
 * (and gave its lease back). */
static void announced(server *srv, const char *key)
{
    server_init(srv);
    stg_redis_limiter *l = limiter_at(g_port, 0);
    assert_non_null(l);
    stg_redis_quota *q = ledger(l, "announcer", 0);
    announce(q, key, srv);
    stg_redis_quota_free(q);
    stg_redis_limiter_free(l);
}

typedef struct pending {
    stg_redis_quota_ticket *t;
    int64_t due;
    stg_quota_set qs;
} pending;

typedef struct replica {
    server *srv;
    int port;
    char name[32];
    const char *key;   /* NULL: "api.test" */
    int priority;      /* its requests' class */
    int64_t cost;      /* each request's tokens; 0: 150..299 at random */
    int64_t from, until;
    int64_t admitted, sent_tokens;
    int64_t local, trips;
    int64_t *at;       /* NULL, or when each admission went (at most n_max) */
    int n, n_max;
    int fail;
} replica;

#define INFLIGHT 4

/* A replica sending its requests as fast as the ledger admits them,
 * INFLIGHT at a time, from `from` to `until`; each answer comes 30 ms
 * after its send. */
static void *replica_run(void *arg)
{
    replica *r = arg;
    const char *key = r->key ? r->key : "api.test";
    while (now_us() < r->from)
        sleep_us(1000);
    stg_redis_limiter *l = limiter_at(r->port, 0);
    stg_redis_quota_config c = {.replica = r->name};
    int err;
    stg_redis_quota *q = l ? stg_redis_quota_new(l, &c, &err) : NULL;
    if (!q) {
        r->fail = 1;
        stg_redis_limiter_free(l);
        return NULL;
    }
    pending p[INFLIGHT];
    int np = 0;
    unsigned seed = (unsigned)(uintptr_t)r;
    while (now_us() < r->until || np > 0) {
        int64_t now = now_us();
        for (int i = 0; i < np;) {
            if (p[i].due <= now) {
                if (stg_redis_quota_settle(q, p[i].t, STG_REDIS_QUOTA_ANSWERED, &p[i].qs, NULL, 0,
                                           now < r->until ? INFLIGHT : np - 1) != STG_OK)
                    r->fail = 2;
                p[i] = p[--np];
            } else {
                i++;
            }
        }
        if (np == INFLIGHT || now >= r->until) {
            sleep_us(2000);
            continue;
        }
        int64_t cost = r->cost ? r->cost : 150 + rand_r(&seed) % 150;
        int64_t w = 0;
        int rc = ask(q, key, r->priority, cost, INFLIGHT, &p[np].t, &w);
        if (rc == STG_EAGAIN) {
            sleep_us(w < 20000 ? w : 20000);
            continue;
        }
        if (rc != STG_OK) {
            r->fail = 3;
            break;
        }
        server_arrive(r->srv, cost, &p[np].qs);
        p[np].due = now_us() + 30000; /* the answer comes 30 ms later */
        np++;
        r->admitted++;
        r->sent_tokens += cost;
        if (r->at && r->n < r->n_max)
            r->at[r->n++] = now_us();
    }
    stg_redis_quota_info info;
    stg_redis_quota_info_get(q, key, &info);
    r->local = info.local_admissions;
    r->trips = info.round_trips;
    stg_redis_quota_free(q);
    stg_redis_limiter_free(l);
    return NULL;
}

static void test_three_replicas_one_quota(void **state)
{
    (void)state;
    server srv;
    announced(&srv, "api.test");
    replica rs[3];
    pthread_t th[3];
    int64_t t0 = now_us();
    for (int i = 0; i < 3; i++) {
        memset(&rs[i], 0, sizeof rs[i]);
        rs[i].srv = &srv;
        rs[i].port = g_port;
        rs[i].until = t0 + STG_SEC(4);
        snprintf(rs[i].name, sizeof rs[i].name, "replica-%d", i);
        assert_int_equal(pthread_create(&th[i], NULL, replica_run, &rs[i]), 0);
    }
    for (int i = 0; i < 3; i++)
        pthread_join(th[i], NULL);
    int64_t dt = now_us() - t0;
    print_message("three replicas: %lld admitted, %lld tokens in %.2f s (bound %.0f), "
                  "%lld refused; round trips %lld/%lld/%lld, from leases %lld/%lld/%lld\n",
                  (long long)srv.admitted, (long long)srv.tokens, (double)dt / 1e6,
                  LIMIT + (double)LIMIT * (double)dt / (WINDOW_MS * 1000.0),
                  (long long)srv.refused, (long long)rs[0].trips, (long long)rs[1].trips,
                  (long long)rs[2].trips, (long long)rs[0].local, (long long)rs[1].local,
                  (long long)rs[2].local);
    for (int i = 0; i < 3; i++) {
        assert_int_equal(rs[i].fail, 0);
        assert_true(rs[i].admitted > 0);
    }
    /* Every unit sent was held against the server's own count. */
    assert_int_equal(srv.refused, 0);
}

/* B takes a lease; while it holds it A cannot take the rest; once B's key
 * is idle its lease is back and A takes nearly the whole quota. */
static void test_idle_gives_back(void **state)
{
    (void)state;
    server srv;
    server_init(&srv);
    stg_redis_limiter *la = limiter_at(g_port, 0), *lb = limiter_at(g_port, 0);
    assert_non_null(la);
    assert_non_null(lb);
    stg_redis_quota *a = ledger(la, "give-a", 0), *b = ledger(lb, "give-b", 0);
    announce(a, "give.test", &srv); /* E about 2990 */
    stg_redis_quota_ticket *tb = NULL, *ta = NULL;
    int64_t w = 0;
    stg_quota_cost c = tokens(300);
    assert_int_equal(stg_redis_quota_acquire(b, "give.test", NULL, &c, 1, 8, &tb, &w), STG_OK);
    stg_redis_quota_info ib;
    stg_redis_quota_info_get(b, "give.test", &ib);
    assert_true(ib.leased >= 300); /* a lease beyond the request */
    assert_int_equal(ib.in_flight, 300);
    /* A wants all but what B's request really takes: B's lease is in the way. */
    stg_quota_cost big = tokens(LIMIT - 10 - 300 - 50);
    assert_int_equal(stg_redis_quota_acquire(a, "give.test", NULL, &big, 1, 1, &ta, &w),
                     STG_EAGAIN);
    assert_true(w > 0);
    stg_quota_set qs;
    assert_true(server_arrive(&srv, 300, &qs));
    assert_int_equal(stg_redis_quota_settle(b, tb, STG_REDIS_QUOTA_ANSWERED, &qs, NULL, 0, 0),
                     STG_OK);
    stg_redis_quota_info_get(b, "give.test", &ib);
    assert_int_equal(ib.leased, 0);
    assert_int_equal(ib.in_flight, 0);
    sleep_us(30000); /* A's poll interval */
    assert_int_equal(stg_redis_quota_acquire(a, "give.test", NULL, &big, 1, 1, &ta, &w), STG_OK);
    assert_true(server_arrive(&srv, big.amount, &qs));
    stg_redis_quota_settle(a, ta, STG_REDIS_QUOTA_ANSWERED, &qs, NULL, 0, 0);
    stg_redis_quota_free(a);
    stg_redis_quota_free(b);
    stg_redis_limiter_free(la);
    stg_redis_limiter_free(lb);
}

/* A child takes a large lease and dies without a word: its units are held
 * until its ttl has passed, then free for the others. */
static void test_killed_replica_lapses(void **state)
{
    (void)state;
    server srv;
    server_init(&srv);
    stg_redis_limiter *la = limiter_at(g_port, 0);
    assert_non_null(la);
    stg_redis_quota *a = ledger(la, "kill-a", STG_MS(800));
    announce(a, "kill.test", &srv);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        stg_redis_limiter *lc = limiter_at(g_port, 0);
        stg_redis_quota_config c = {.replica = "kill-c", .ttl_us = STG_MS(800)};
        int err;
        stg_redis_quota *qc = lc ? stg_redis_quota_new(lc, &c, &err) : NULL;
        stg_redis_quota_ticket *t = NULL;
        int64_t w;
        stg_quota_cost cc = tokens(1000);
        int rc = qc ? stg_redis_quota_acquire(qc, "kill.test", NULL, &cc, 1, 1, &t, &w) : -1;
        _exit(rc == STG_OK ? 0 : 1); /* killed: nothing settled, nothing freed */
    }
    int st = 0;
    assert_int_equal(waitpid(pid, &st, 0), pid);
    assert_true(WIFEXITED(st) && WEXITSTATUS(st) == 0);
    int64_t dead_at = now_us();
    stg_quota_cost big = tokens(LIMIT - 10 - 500);
    stg_redis_quota_ticket *t = NULL;
    int64_t w = 0;
    assert_int_equal(stg_redis_quota_acquire(a, "kill.test", NULL, &big, 1, 1, &t, &w), STG_EAGAIN);
    int rc;
    while ((rc = stg_redis_quota_acquire(a, "kill.test", NULL, &big, 1, 1, &t, &w)) == STG_EAGAIN) {
        assert_true(now_us() - dead_at < STG_SEC(5)); /* hang guard */
        sleep_us(20000);
    }
    assert_int_equal(rc, STG_OK);
    /* Not before its ttl (from its one round trip, before dead_at). */
    int64_t lapsed_after = now_us() - dead_at;
    print_message("a killed replica's lease lapsed %.0f ms after its death (ttl 800 ms)\n",
                  (double)lapsed_after / 1000);
    stg_quota_set qs;
    assert_true(server_arrive(&srv, big.amount, &qs));
    stg_redis_quota_settle(a, t, STG_REDIS_QUOTA_ANSWERED, &qs, NULL, 0, 0);
    stg_redis_quota_free(a);
    stg_redis_limiter_free(la);
}

/* A quota with room for everything: one replica's requests, 4 in flight,
 * are served from leases (4 requests' worth each, the demand): Redis sees
 * at most one round trip per two admissions. */
static void test_leases_off_the_path(void **state)
{
    (void)state;
    server srv;
    server_init(&srv);
    stg_redis_limiter *la = limiter_at(g_port, 0);
    stg_redis_quota *a = ledger(la, "lease-a", 0);
    announce(a, "lease.test", &srv);
    stg_redis_quota_info before, after;
    stg_redis_quota_info_get(a, "lease.test", &before);
    stg_redis_quota_ticket *t[4];
    int64_t w;
    stg_quota_cost c = tokens(5);
    int admitted = 0;
    for (int round = 0; round < 25; round++) {
        for (int i = 0; i < 4; i++) {
            assert_int_equal(stg_redis_quota_acquire(a, "lease.test", NULL, &c, 1, 4, &t[i], &w),
                             STG_OK);
            admitted++;
        }
        for (int i = 0; i < 4; i++) {
            stg_quota_set qs;
            assert_true(server_arrive(&srv, 5, &qs));
            assert_int_equal(stg_redis_quota_settle(a, t[i], STG_REDIS_QUOTA_ANSWERED, &qs, NULL,
                                                    0, 4 - i - 1 + 4),
                             STG_OK);
        }
    }
    stg_redis_quota_info_get(a, "lease.test", &after);
    int64_t trips = after.round_trips - before.round_trips;
    print_message("leases: %d admitted, %lld round trips, %lld from leases\n", admitted,
                  (long long)trips, (long long)(after.local_admissions - before.local_admissions));
    assert_true(trips * 2 <= admitted);
    assert_int_equal(srv.refused, 0);
    stg_redis_quota_free(a);
    stg_redis_limiter_free(la);
}

/* One answer's quota of server key `key` (GitHub-like: a window's count,
 * its reset in reset_s). */
static void window_obs(stg_quota_set *qs, const char *key, int64_t limit, int64_t rem,
                       int64_t reset_s)
{
    stg_quota_set_init(qs);
    qs->n = 1;
    stg_quota_obs *o = &qs->q[0];
    memset(o, 0, sizeof *o);
    snprintf(o->key, sizeof o->key, "%s", key);
    snprintf(o->unit, sizeof o->unit, "requests");
    o->limit = limit;
    o->remaining = rem;
    o->reset_us = STG_SEC(reset_s);
    o->window_us = STG_UNKNOWN;
    o->dialect = STG_DIALECT_GITHUB;
}

/* Two server keys on one host (GitHub's core and search resources): once
 * each route's answer named its key, a spent search quota holds the
 * search route only; core requests still go. */
static void test_routes_spend_their_keys(void **state)
{
    (void)state;
    stg_redis_limiter *la = limiter_at(g_port, 0);
    assert_non_null(la);
    stg_redis_quota *a = ledger(la, "route-a", 0);
    stg_redis_quota_ticket *t = NULL;
    int64_t w = 0;
    stg_quota_set qs;
    /* The first answers name each route's key. */
    assert_int_equal(stg_redis_quota_acquire(a, "gh.test", "GET /repos", NULL, 0, 1, &t, &w),
                     STG_OK);
    window_obs(&qs, "core", 5000, 4999, 3600);
    stg_redis_quota_settle(a, t, STG_REDIS_QUOTA_ANSWERED, &qs, NULL, 0, 0);
    assert_int_equal(stg_redis_quota_acquire(a, "gh.test", "GET /search", NULL, 0, 1, &t, &w),
                     STG_OK);
    window_obs(&qs, "search", 30, 0, 60); /* search is spent for a minute */
    stg_redis_quota_settle(a, t, STG_REDIS_QUOTA_ANSWERED, &qs, NULL, 0, 0);
    stg_redis_quota_info info;
    stg_redis_quota_info_get(a, "gh.test", &info);
    assert_int_equal(info.quotas, 2);
    sleep_us(30000); /* past the poll interval of a refusal */
    /* Search waits for its reset; core goes, again and again. */
    assert_int_equal(stg_redis_quota_acquire(a, "gh.test", "GET /search", NULL, 0, 1, &t, &w),
                     STG_EAGAIN);
    assert_true(w > STG_SEC(30));
    for (int i = 0; i < 5; i++) {
        sleep_us(30000);
        assert_int_equal(stg_redis_quota_acquire(a, "gh.test", "GET /repos", NULL, 0, 1, &t, &w),
                         STG_OK);
        window_obs(&qs, "core", 5000, 4998 - i, 3600);
        stg_redis_quota_settle(a, t, STG_REDIS_QUOTA_ANSWERED, &qs, NULL, 0, 0);
    }
    /* A route never answered is charged to every key: it waits too. */
    assert_int_equal(stg_redis_quota_acquire(a, "gh.test", "GET /other", NULL, 0, 1, &t, &w),
                     STG_EAGAIN);
    stg_redis_quota_free(a);
    stg_redis_limiter_free(la);
}

/* A request in flight longer than the ttl, nothing else going on: the
 * replica's ticks renew what it holds, so another replica cannot take
 * those units meanwhile (without the ticks its entry lapses after 800 ms). */
static void test_tick_keeps_long_request(void **state)
{
    (void)state;
    server srv;
    server_init(&srv);
    stg_redis_limiter *la = limiter_at(g_port, 0), *lb = limiter_at(g_port, 0);
    stg_redis_quota *a = ledger(la, "tick-a", STG_MS(800)), *b = ledger(lb, "tick-b", STG_MS(800));
    announce(a, "tick.test", &srv);
    stg_redis_quota_ticket *ta = NULL, *tb = NULL;
    int64_t w = 0;
    stg_quota_cost c = tokens(1500);
    assert_int_equal(stg_redis_quota_acquire(a, "tick.test", NULL, &c, 1, 1, &ta, &w), STG_OK);
    stg_quota_set qs;
    assert_true(server_arrive(&srv, 1500, &qs)); /* arrived; its answer takes 2 s */
    /* B wants more than what is left beside A's request (about 1490 plus
     * refill): refused for as long as A's request is in flight. */
    stg_quota_cost big = tokens(2900);
    int64_t t0 = now_us();
    while (now_us() - t0 < STG_MS(1200)) {
        stg_redis_quota_tick(a);
        assert_int_equal(stg_redis_quota_acquire(b, "tick.test", NULL, &big, 1, 1, &tb, &w),
                         STG_EAGAIN);
        sleep_us(STG_MS(100));
    }
    stg_redis_quota_settle(a, ta, STG_REDIS_QUOTA_ANSWERED, &qs, NULL, 0, 0);
    stg_redis_quota_free(a);
    stg_redis_quota_free(b);
    stg_redis_limiter_free(la);
    stg_redis_limiter_free(lb);
}

static void test_too_big(void **state)
{
    (void)state;
    server srv;
    server_init(&srv);
    stg_redis_limiter *la = limiter_at(g_port, 0);
    stg_redis_quota *a = ledger(la, "big-a", 0);
    announce(a, "big.test", &srv);
    stg_quota_cost c = tokens(LIMIT + 1);
    stg_redis_quota_ticket *t = NULL;
    int64_t w = 0;
    assert_int_equal(stg_redis_quota_acquire(a, "big.test", NULL, &c, 1, 1, &t, &w), STG_ETOOBIG);
    assert_null(t);
    stg_redis_quota_free(a);
    stg_redis_limiter_free(la);
}

/* Redis stops: with a share of 0.5 the replica admits up to half of its
 * last estimate less its own in flight; without a share, STG_EUNAVAIL. */
static void test_redis_down(void **state)
{
    (void)state;
    int port = free_port();
    pid_t pid = server_start(port);
    server srv;
    server_init(&srv);
    stg_redis_limiter *lf = limiter_at(port, 0.5), *ln = limiter_at(port, 0);
    assert_non_null(lf);
    assert_non_null(ln);
    stg_redis_quota *f = ledger(lf, "down-f", 0), *n = ledger(ln, "down-n", 0);
    announce(f, "down.test", &srv);
    announce(n, "down.test", &srv);
    server_stop(pid, SIGKILL);
    sleep_us(STG_MS(1100)); /* past the reconnect interval: each notices at once */
    stg_quota_cost c = tokens(1000);
    stg_redis_quota_ticket *t1 = NULL, *t2 = NULL;
    int64_t w = 0;
    /* Half of about 2980 (plus refill): 1000 goes, a second 1000 does not. */
    assert_int_equal(stg_redis_quota_acquire(f, "down.test", NULL, &c, 1, 1, &t1, &w), STG_OK);
    assert_int_equal(stg_redis_quota_acquire(f, "down.test", NULL, &c, 1, 1, &t2, &w), STG_EAGAIN);
    assert_true(w > 0);
    assert_true(stg_redis_limiter_degraded(lf));
    stg_redis_quota_info info;
    stg_redis_quota_info_get(f, "down.test", &info);
    assert_int_equal(info.fallback_admissions, 1);
    stg_redis_quota_ticket *tn = NULL;
    assert_int_equal(stg_redis_quota_acquire(n, "down.test", NULL, &c, 1, 1, &tn, &w),
                     STG_EUNAVAIL);
    assert_null(tn);
    stg_redis_quota_settle(f, t1, STG_REDIS_QUOTA_NO_ANSWER, NULL, NULL, 0, 0);
    stg_redis_quota_free(f);
    stg_redis_quota_free(n);
    stg_redis_limiter_free(lf);
    stg_redis_limiter_free(ln);
}

/* The ledger's hash names the replica that reported to it. */
static void test_ledger_in_redis(void **state)
{
    (void)state;
    server srv;
    server_init(&srv);
    stg_redis_limiter *la = limiter_at(g_port, 0);
    stg_redis_quota *a = ledger(la, "secret-a", 0);
    announce(a, "secret.test", &srv);
    redisContext *c = raw_connect(g_port);
    assert_non_null(c);
    redisReply *r = redisCommand(c, "HGETALL stagger:qs:secret.test");
    assert_non_null(r);
    assert_int_equal(r->type, REDIS_REPLY_ARRAY);
    assert_true(r->elements > 0);
    bool mine = false;
    for (size_t i = 0; i < r->elements; i++)
        mine |= strstr(r->element[i]->str, "secret-a") != NULL;
    assert_true(mine);
    freeReplyObject(r);
    redisFree(c);
    stg_redis_quota_free(a);
    stg_redis_limiter_free(la);
}

/* ---- classes (docs/priorities.md, "Across processes") -------------------- */

/* One answer's token quota of the host's own key (a window's count, its
 * reset in reset_s: no refill, so the test needs no clock). */
static void window_tokens(stg_quota_set *qs, int64_t limit, int64_t rem, int64_t reset_s)
{
    window_obs(qs, "", limit, rem, reset_s);
    snprintf(qs->q[0].unit, sizeof qs->q[0].unit, "tokens");
}


/* An interactive replica waits for a token window: a batch replica's
 * request is refused though the window holds it (main's ledger granted
 * it), until the interactive ones were granted 19 times its cost (the
 * floor: its one grant in 20, of its cost only); then refused again.
 * Once the interactive replicas stop, the batch takes the quota, leases
 * included. No clock but Redis's marks (300 ms) between the steps. */
static void test_class_waits_first_and_floor(void **state)
{
    (void)state;
    stg_redis_limiter *la = limiter_at(g_port, 0), *la2 = limiter_at(g_port, 0),
                      *lb = limiter_at(g_port, 0);
    assert_non_null(la);
    assert_non_null(la2);
    assert_non_null(lb);
    stg_redis_quota *a = ledger(la, "cls-a", 0), *a2 = ledger(la2, "cls-a2", 0),
                    *b = ledger(lb, "cls-b", 0);
    const char *key = "cls.test";
    stg_redis_quota_ticket *t = NULL;
    int64_t w = 0;
    stg_quota_set qs;
    /* The first answer: 1000 tokens left until a reset a minute away. */
    assert_int_equal(ask(a, key, STG_PRIORITY_INTERACTIVE, 10, 1, &t, &w), STG_OK);
    window_tokens(&qs, 5000, 1000, 60);
    stg_redis_quota_settle(a, t, STG_REDIS_QUOTA_ANSWERED, &qs, NULL, 0, 1);
    /* A wants more than the window holds: it waits (for the reset). */
    assert_int_equal(ask(a, key, STG_PRIORITY_INTERACTIVE, 1100, 1, &t, &w), STG_EAGAIN);
    assert_true(w > STG_SEC(1));
    /* B's 10 tokens fit, but A waits with a higher class: refused, told
     * to ask again shortly (main's ledger granted it). */
    assert_int_equal(ask(b, key, STG_PRIORITY_BATCH, 10, 8, &t, &w), STG_EAGAIN);
    assert_null(t);
    assert_true(w > 0 && w < STG_MS(200));
    /* A normal request is below interactive too. */
    stg_redis_limiter *ln = limiter_at(g_port, 0);
    stg_redis_quota *n = ledger(ln, "cls-n", 0);
    assert_int_equal(ask(n, key, STG_PRIORITY_NORMAL, 10, 1, &t, &w), STG_EAGAIN);
    stg_redis_quota_free(n);
    stg_redis_limiter_free(ln);
    /* Another interactive replica is granted: 18 times B's cost... */
    for (int i = 0; i < 18; i++) {
        assert_int_equal(ask(a2, key, STG_PRIORITY_INTERACTIVE, 10, 1, &t, &w), STG_OK);
        stg_redis_quota_settle(a2, t, STG_REDIS_QUOTA_ANSWERED, NULL, NULL, 0, 1);
    }
    sleep_us(STG_MS(30)); /* past B's poll */
    assert_int_equal(ask(b, key, STG_PRIORITY_BATCH, 10, 8, &t, &w), STG_EAGAIN);
    /* ... and the 19th: B's floor. */
    assert_int_equal(ask(a2, key, STG_PRIORITY_INTERACTIVE, 10, 1, &t, &w), STG_OK);
    stg_redis_quota_settle(a2, t, STG_REDIS_QUOTA_ANSWERED, NULL, NULL, 0, 1);
    sleep_us(STG_MS(30));
    stg_redis_quota_ticket *tb = NULL;
    assert_int_equal(ask(b, key, STG_PRIORITY_BATCH, 10, 8, &tb, &w), STG_OK);
    stg_redis_quota_info ib;
    stg_redis_quota_info_get(b, key, &ib);
    assert_int_equal(ib.leased, 0); /* its cost, no lease beyond it */
    assert_int_equal(ib.in_flight, 10);
    sleep_us(STG_MS(30));
    stg_redis_quota_ticket *tb2 = NULL;
    assert_int_equal(ask(b, key, STG_PRIORITY_BATCH, 10, 8, &tb2, &w), STG_EAGAIN);
    stg_redis_quota_settle(b, tb, STG_REDIS_QUOTA_ANSWERED, NULL, NULL, 0, 8);
    /* A stops (its marks go with its give-back), then A2: B has it all. */
    stg_redis_quota_free(a);
    sleep_us(STG_MS(30));
    assert_int_equal(ask(b, key, STG_PRIORITY_BATCH, 10, 8, &tb, &w), STG_OK);
    stg_redis_quota_info_get(b, key, &ib);
    assert_int_equal(ib.leased, 0); /* A2 asked lately: still no lease */
    stg_redis_quota_settle(b, tb, STG_REDIS_QUOTA_ANSWERED, NULL, NULL, 0, 8);
    stg_redis_quota_free(a2);
    assert_int_equal(ask(b, key, STG_PRIORITY_BATCH, 10, 8, &tb, &w), STG_OK);
    stg_redis_quota_info_get(b, key, &ib);
    assert_true(ib.leased >= 70); /* 8 requests' worth: the lease is back */
    stg_redis_quota_settle(b, tb, STG_REDIS_QUOTA_ANSWERED, NULL, NULL, 0, 0);
    stg_redis_quota_free(b);
    stg_redis_limiter_free(la);
    stg_redis_limiter_free(la2);
    stg_redis_limiter_free(lb);
}

#define CLS_COST 25
#define CLS_MAX 8192

static int cls_count(const replica *r, int64_t from, int64_t to)
{
    int n = 0;
    for (int i = 0; i < r->n; i++)
        n += r->at[i] >= from && r->at[i] < to;
    return n;
}

/* Two replicas on one simulated OpenAI token quota (1000 tokens/s): B
 * saturates it with batch requests throughout; A sends interactive ones
 * as fast as it is admitted from 1.5 s to 3.5 s. While A asks, B keeps
 * only its floor (about one grant in 20; at most one in 8 asserted, at
 * least one); before and after, B has the whole quota; the server never
 * refuses (every unit was held against its count). Main's ledger gave
 * B about half while A asked. */
static void test_class_two_replicas(void **state)
{
    (void)state;
    server srv;
    announced(&srv, "cls.fleet");
    static int64_t at[2][CLS_MAX];
    replica rs[2];
    memset(rs, 0, sizeof rs);
    int64_t t0 = now_us();
    for (int i = 0; i < 2; i++) {
        rs[i].srv = &srv;
        rs[i].port = g_port;
        rs[i].key = "cls.fleet";
        rs[i].cost = CLS_COST;
        rs[i].at = at[i];
        rs[i].n_max = CLS_MAX;
    }
    snprintf(rs[0].name, sizeof rs[0].name, "cls-A");
    rs[0].priority = STG_PRIORITY_INTERACTIVE;
    rs[0].from = t0 + STG_MS(1500);
    rs[0].until = t0 + STG_MS(3500);
    snprintf(rs[1].name, sizeof rs[1].name, "cls-B");
    rs[1].priority = STG_PRIORITY_BATCH;
    rs[1].from = t0;
    rs[1].until = t0 + STG_MS(5000);
    pthread_t th[2];
    for (int i = 0; i < 2; i++)
        assert_int_equal(pthread_create(&th[i], NULL, replica_run, &rs[i]), 0);
    for (int i = 0; i < 2; i++)
        pthread_join(th[i], NULL);
    int64_t dt = now_us() - t0;
    /* Phases, 200 ms after each change: B alone, A asking, B alone. */
    int b1 = cls_count(&rs[1], t0 + STG_MS(500), t0 + STG_MS(1500));
    int a2 = cls_count(&rs[0], t0 + STG_MS(1700), t0 + STG_MS(3500));
    int b2 = cls_count(&rs[1], t0 + STG_MS(1700), t0 + STG_MS(3500));
    int b3 = cls_count(&rs[1], t0 + STG_MS(3700), t0 + STG_MS(5000));
    double rate = (double)LIMIT / WINDOW_MS; /* tokens per ms */
    print_message("classes: B alone %d grants in 1.0 s (%.0f tokens/s); A asking: A %d, B %d "
                  "(%.1f%%) in 1.8 s; B alone again %d in 1.3 s (%.0f tokens/s); server %lld "
                  "tokens in %.2f s (bound %.0f), %lld refused; trips A %lld B %lld, from "
                  "leases A %lld B %lld\n",
                  b1, (double)b1 * CLS_COST, a2, b2, 100.0 * b2 / (a2 + b2 ? a2 + b2 : 1), b3,
                  b3 * CLS_COST / 1.3, (long long)srv.tokens, (double)dt / 1e6,
                  LIMIT + rate * (double)dt / 1000.0, (long long)srv.refused,
                  (long long)rs[0].trips, (long long)rs[1].trips, (long long)rs[0].local,
                  (long long)rs[1].local);
    for (int i = 0; i < 2; i++)
        assert_int_equal(rs[i].fail, 0);
    /* The bound: every unit sent was held against the server's count. */
    assert_int_equal(srv.refused, 0);
    assert_true((double)srv.tokens <= LIMIT + rate * (double)dt / 1000.0);
    /* A first: B keeps its floor only (one in 20 expected). */
    assert_true(a2 > 0);
    assert_true(b2 * 8 <= a2 + b2);
    assert_true(b2 >= 1);
    /* Alone, B has the quota: at least 70% of the refill each time. */
    assert_true(b1 * CLS_COST >= 0.7 * rate * 1000.0);
    assert_true(b3 * CLS_COST >= 0.7 * rate * 1300.0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_too_big),
        cmocka_unit_test(test_routes_spend_their_keys),
        cmocka_unit_test(test_leases_off_the_path),
        cmocka_unit_test(test_idle_gives_back),
        cmocka_unit_test(test_killed_replica_lapses),
        cmocka_unit_test(test_tick_keeps_long_request),
        cmocka_unit_test(test_redis_down),
        cmocka_unit_test(test_ledger_in_redis),
        cmocka_unit_test(test_three_replicas_one_quota),
        cmocka_unit_test(test_class_waits_first_and_floor),
        cmocka_unit_test(test_class_two_replicas),
    };
    return cmocka_run_group_tests(tests, redis_group_setup, redis_group_teardown);
}
