/*
 * Shared quotas (include/stagger/redis/quota.h): the replica's side of the
 * ledger that quota_lua.c keeps in Redis. Per limit key this replica keeps
 * each shared quota's lease (units granted, not yet given to a request),
 * its units in flight, and what it owes the ledger (units spent without a
 * count, the lowest count heard and when), and goes to Redis only when
 * the lease cannot cover a request, a quota is new, refresh_us has passed
 * while it holds anything, or the key went idle (the lease is given back).
 *
 * Invariants:
 *  - what Redis was last told this replica holds of a quota is lease +
 *    in flight at that instant (the report is absolute, not a delta);
 *  - a lease is used only before lease_end: half the ttl after the last
 *    round trip was SENT (each one reports the lease and renews the
 *    replica's entry, expiry = Redis's now + ttl, taken after the send),
 *    so the entry in Redis outlives it; past lease_end it is dropped
 *    before anything is reported (lapse), never claimed again;
 *  - a ticket charges a quota once and is settled once (its units leave
 *    in-flight exactly then); a ticket of a key forgotten since (its
 *    generation changed) settles nothing;
 *  - by class (quota.h, "Classes"): every grant-asking trip says the
 *    request's class, a plain acquire's is normal; a lease is spent only by
 *    requests of the class it was last granted to or a higher one, and a
 *    refusal's local poll (ask_at) does not hold back a higher class; a
 *    replica refused once (marked) gives back when it goes idle or is
 *    freed, which clears its marks in the ledger;
 *  - every field is guarded by the limiter's mutex (l->mu), and notes are
 *    emitted after it is released, as the limiter's own calls do.
 */
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <stagger/redis/quota.h>

#include "core/fairq.h"
#include "internal.h"
#include "redis/quota_local.h"
#include "util/fnv.h"

#define ID_MAX STG__SQ_ID_MAX
/* The class index of a plain acquire (normal). */
#define SQ_NORMAL STG_PRIORITY_INDEX(STG_PRIORITY_NORMAL)
/* A refused request's class mark lives this long past the wait it is
 * told: it asks again about then (the engine's timer, a poll). */
#define SQ_MARK_MARGIN_US STG_MS(250)

typedef struct sq_quota {
    char id[ID_MAX];   /* server key|unit|window, control bytes as '_' */
    int skey;          /* its server key's index in the host's skey[] */
    char unit[STG_QUOTA_UNIT_LEN];
    int64_t lease;     /* units granted, not yet given to a request */
    int64_t flight;    /* units of requests in flight */
    int64_t spent;     /* spent without a count, not yet told */
    int64_t count;     /* lowest count heard, not yet told; -1: none */
    int64_t count_at;  /* when it was heard */
    int64_t reset_ms;  /* of the count told, -1 unknown */
    bool fresh;        /* Redis has not heard of it from us */
    stg__sq_est e;     /* the estimate (Redis's, lowered by our own
                          answers), its limit and refill: the fallback's
                          base (quota_local.h) */
} sq_quota;

/* A route (METHOD /path) whose answers named server keys: it is charged
 * to those keys' quotas and the host's own ("" key), as stg_quota maps
 * routes; a route never seen (or one whose answers name no key) is
 * charged to every quota of the host. */
#define ROUTES_MAX 64
typedef struct sq_route {
    uint64_t hash;  /* 0: a free slot */
    uint64_t keys;  /* bit i: skey[i] */
    int64_t used_at;
} sq_route;

typedef struct sq_host {
    uint64_t gen;
    char key[STG_REDIS_KEY_MAX + 1];
    int n;
    sq_quota q[STG_QUOTA_TICKET_MAX];
    int n_skeys;
    char skey[STG_QUOTA_TICKET_MAX][ID_MAX]; /* server keys of q[] */
    sq_route routes[ROUTES_MAX];
    bool known;        /* a round trip said which quotas the key has */
    int64_t last_trip; /* when the last round trip was sent */
    int64_t lease_end;
    int64_t ask_at;    /* a refused request asks again from here ... */
    uint64_t ask_keys; /* ... as does one charged to the same keys */
    int ask_cls;       /* ... and of the same class or a lower one */
    int lease_cls;     /* the class (index) the lease was last granted
                          to: a request of a lower class asks Redis */
    bool marked;       /* a refusal left this replica's class marks in
                          the ledger: a give-back clears them */
    int64_t used_at;
} sq_host;

struct stg_redis_quota_ticket {
    sq_host *h;
    uint64_t gen;
    uint64_t route; /* its route's hash, 0: none */
    int n;
    int idx[STG_QUOTA_TICKET_MAX];
    int64_t amount[STG_QUOTA_TICKET_MAX];
};

struct stg_redis_quota {
    stg_redis_limiter *l;
    int64_t ttl_us, refresh_us, lease_max, max_hosts, poll_us;
    char me[64];
    sq_host **hosts;
    size_t n_hosts;
    uint64_t gen;
    int64_t round_trips, local_adm, fallback_adm;
};

static bool name_ok(const char *s)
{
    size_t n = strlen(s);
    if (n == 0 || n > 63)
        return false;
    for (size_t i = 0; i < n; i++) {
        char c = s[i];
        if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
              c == '_' || c == '.' || c == ':' || c == '-'))
            return false;
    }
    return true;
}

stg_redis_quota *stg_redis_quota_new(stg_redis_limiter *l, const stg_redis_quota_config *cfg,
                                     int *err)
{
    int dummy;
    if (!err)
        err = &dummy;
    stg_redis_quota_config c = {0};
    if (cfg)
        c = *cfg;
    if (!l || c.ttl_us < 0 || c.refresh_us < 0 || c.lease_max < 0 || c.max_hosts < 0 ||
        c.poll_us < 0 || (c.replica && !name_ok(c.replica))) {
        *err = STG_EINVAL;
        return NULL;
    }
    stg_redis_quota *q = calloc(1, sizeof *q);
    if (!q) {
        *err = STG_ENOMEM;
        return NULL;
    }
    q->l = l;
    q->ttl_us = c.ttl_us ? c.ttl_us : STG_SEC(10);
    if (q->ttl_us < STG_MS(100))
        q->ttl_us = STG_MS(100);
    q->refresh_us = c.refresh_us ? c.refresh_us : q->ttl_us / 4;
    if (q->refresh_us > q->ttl_us / 4)
        q->refresh_us = q->ttl_us / 4;
    q->lease_max = c.lease_max ? c.lease_max : 8;
    q->max_hosts = c.max_hosts ? c.max_hosts : 64;
    q->poll_us = c.poll_us ? c.poll_us : STG_MS(25);
    if (c.replica) {
        snprintf(q->me, sizeof q->me, "%s", c.replica);
    } else {
        /* Unique enough among the replicas of one Redis: the machine, the
         * process, the instant and this object's address. */
        char hn[32] = "h";
        gethostname(hn, sizeof hn - 1);
        hn[sizeof hn - 1] = '\0';
        for (char *p = hn; *p; p++)
            if (!name_ok((char[]){*p, 0}))
                *p = '_';
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        uint64_t x = (uint64_t)ts.tv_nsec ^ ((uint64_t)ts.tv_sec << 20) ^ (uint64_t)(uintptr_t)q;
        x ^= x >> 33;
        x *= UINT64_C(0xff51afd7ed558ccd);
        x ^= x >> 33;
        snprintf(q->me, sizeof q->me, "%.24s-%ld-%08" PRIx64, hn, (long)getpid(),
                 x & UINT64_C(0xffffffff));
    }
    q->hosts = calloc((size_t)q->max_hosts, sizeof *q->hosts);
    if (!q->hosts) {
        free(q);
        *err = STG_ENOMEM;
        return NULL;
    }
    *err = STG_OK;
    return q;
}

/* ---- the local table ------------------------------------------------------- */

static bool host_idle(const sq_host *h)
{
    for (int i = 0; i < h->n; i++)
        if (h->q[i].flight > 0)
            return false;
    return true;
}

/* Under mu: key's entry, made on first use (the least recently used idle
 * one forgotten when full). NULL: none can be made. */
static sq_host *host_get(stg_redis_quota *q, const char *key, bool make, int64_t now)
{
    for (size_t i = 0; i < q->n_hosts; i++)
        if (strcmp(q->hosts[i]->key, key) == 0) {
            q->hosts[i]->used_at = now;
            return q->hosts[i];
        }
    if (!make || strlen(key) > STG_REDIS_KEY_MAX)
        return NULL;
    sq_host *h = NULL;
    if (q->n_hosts < (size_t)q->max_hosts) {
        h = calloc(1, sizeof *h);
        if (!h)
            return NULL;
        q->hosts[q->n_hosts++] = h;
    } else {
        for (size_t i = 0; i < q->n_hosts; i++)
            if (host_idle(q->hosts[i]) && (!h || q->hosts[i]->used_at < h->used_at))
                h = q->hosts[i];
        if (!h)
            return NULL;
        /* Its lease lapses in Redis with the ttl (nothing in flight). */
        memset(h, 0, sizeof *h);
    }
    h->gen = ++q->gen;
    h->lease_cls = STG_N_PRIORITIES - 1;
    snprintf(h->key, sizeof h->key, "%s", key);
    h->used_at = now;
    return h;
}

static int quota_find(const sq_host *h, const char *id)
{
    for (int i = 0; i < h->n; i++)
        if (strcmp(h->q[i].id, id) == 0)
            return i;
    return -1;
}

static int skey_index(sq_host *h, const char *key)
{
    for (int i = 0; i < h->n_skeys; i++)
        if (strcmp(h->skey[i], key) == 0)
            return i;
    if (h->n_skeys >= STG_QUOTA_TICKET_MAX)
        return -1;
    snprintf(h->skey[h->n_skeys], ID_MAX, "%s", key);
    return h->n_skeys++;
}

static int quota_add(sq_host *h, const char *id, const char *unit)
{
    if (h->n >= STG_QUOTA_TICKET_MAX)
        return -1;
    char key[ID_MAX];
    stg__sq_skey(id, key);
    int k = skey_index(h, key);
    if (k < 0)
        return -1;
    sq_quota *s = &h->q[h->n];
    memset(s, 0, sizeof *s);
    s->skey = k;
    snprintf(s->id, sizeof s->id, "%s", id);
    snprintf(s->unit, sizeof s->unit, "%s", unit);
    for (char *p = s->unit; *p; p++) /* the ledger's lines are split by them */
        if ((unsigned char)*p < 0x20 || *p == 0x7f)
            *p = '_';
    s->count = -1;
    s->reset_ms = -1;
    s->e.est = -1;
    s->e.limit = -1;
    return h->n++;
}

static uint64_t route_hash(const char *route)
{
    if (!route || !*route)
        return 0;
    uint64_t x = stg__fnv1a64(route);
    return x ? x : 1;
}

static sq_route *route_find(sq_host *h, uint64_t hash)
{
    for (int i = 0; hash && i < ROUTES_MAX; i++)
        if (h->routes[i].hash == hash)
            return &h->routes[i];
    return NULL;
}

/* The server keys a request of route is charged to: a mask over skey[],
 * all ones for a route not mapped. */
static uint64_t route_keys(sq_host *h, uint64_t hash, int64_t now)
{
    sq_route *r = route_find(h, hash);
    if (!r)
        return ~UINT64_C(0);
    r->used_at = now;
    return r->keys;
}

/* Whether quota s is charged by a request with route mask keys: the
 * route's keys, and the host's own quotas (server key ""). */
static bool charged(const sq_host *h, const sq_quota *s, uint64_t keys)
{
    return h->skey[s->skey][0] == '\0' || (keys >> s->skey & 1);
}

/* The non-empty server keys an answer named with a count, as a mask over
 * h's skey[] (made known to h). */
static uint64_t named_keys(sq_host *h, const stg_quota_set *qs)
{
    uint64_t keys = 0;
    for (size_t i = 0; qs && i < qs->n; i++) {
        const stg_quota_obs *o = &qs->q[i];
        if (!o->key[0] || o->global || o->remaining == STG_UNKNOWN)
            continue;
        char id[ID_MAX], key[ID_MAX];
        stg__sq_id(o, id);
        stg__sq_skey(id, key);
        int k = skey_index(h, key);
        if (k >= 0)
            keys |= UINT64_C(1) << k;
    }
    return keys;
}

/* Map route to the keys an answer named (none named: left as it was). */
static void route_learn(sq_host *h, uint64_t hash, uint64_t keys, int64_t now)
{
    if (!hash || !keys)
        return;
    sq_route *r = route_find(h, hash);
    for (int i = 0; !r && i < ROUTES_MAX; i++) /* a free slot, else the least recently used */
        if (!h->routes[i].hash)
            r = &h->routes[i];
    if (!r) {
        r = &h->routes[0];
        for (int i = 1; i < ROUTES_MAX; i++)
            if (h->routes[i].used_at < r->used_at)
                r = &h->routes[i];
    }
    r->hash = hash;
    r->keys = keys;
    r->used_at = now;
}


/* What a request of costs costs in unit (a unit not listed: 1). */
static int64_t need_of(const stg_quota_cost *costs, size_t n, const char *unit)
{
    for (size_t i = 0; i < n; i++)
        if (strcmp(costs[i].unit, unit) == 0)
            return costs[i].amount;
    return 1;
}

/* ---- the round trip ----------------------------------------------------------- */

typedef struct buf {
    char *p;
    size_t len, cap;
    bool oom;
} buf;

static void bprintf(buf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void bprintf(buf *b, const char *fmt, ...)
{
    if (b->oom)
        return;
    for (;;) {
        va_list ap;
        va_start(ap, fmt);
        int n = vsnprintf(b->p ? b->p + b->len : NULL, b->p ? b->cap - b->len : 0, fmt, ap);
        va_end(ap);
        if (n < 0) {
            b->oom = true;
            return;
        }
        if (b->p && b->len + (size_t)n < b->cap) {
            b->len += (size_t)n;
            return;
        }
        size_t cap = (b->cap ? b->cap * 2 : 512) + (size_t)n;
        char *p = realloc(b->p, cap);
        if (!p) {
            b->oom = true;
            return;
        }
        if (!b->p)
            p[0] = '\0';
        b->p = p;
        b->cap = cap;
    }
}

/* Under mu: a lease past lease_end may already be another replica's (our
 * entry in Redis may have expired): it is dropped, never reported again.
 * Units in flight are real and stay reported. */
static void lapse(sq_host *h, int64_t now)
{
    if (now < h->lease_end)
        return;
    for (int i = 0; i < h->n; i++)
        h->q[i].lease = 0;
}

/* Under mu: one round trip for h at now: report every quota (giving the
 * lease back when give_back), and with grant, ask for a lease covering
 * costs, `mult` requests' worth. Returns STG_OK with *status (1 granted,
 * 0 refused with *wait_us, 2 too big, 3 reported), STG_EUNAVAIL (nothing
 * changed locally, what was to be told is still pending) or STG_ENOMEM. */
static int trip(stg_redis_quota *q, sq_host *h, bool grant, bool give_back, int cls,
                const stg_quota_cost *costs, size_t n_costs, uint64_t keys, int64_t mult,
                int64_t now, int *status, int64_t *wait_us, stg__note *note)
{
    stg_redis_limiter *l = q->l;
    char rkey[STG__KEYBUF];
    if (stg__redis_key(l, "qs:", h->key, rkey) != STG_OK)
        return STG_EINVAL;
    if (!stg__redis_ready(l, note))
        return STG_EUNAVAIL;
    lapse(h, now);
    buf rep = {0}, want = {0};
    bprintf(&rep, "%s", "");
    bprintf(&want, "%s", "");
    for (int i = 0; i < h->n; i++) {
        sq_quota *s = &h->q[i];
        int64_t held = s->flight + (give_back ? 0 : s->lease);
        int64_t age = s->count >= 0 ? (now - s->count_at) / 1000 : 0;
        bprintf(&rep, "%s\t%s\t%" PRId64 "\t%" PRId64 "\t%" PRId64 "\t%" PRId64 "\t%" PRId64
                      "\t%" PRId64 "\t%d\n",
                s->id, s->unit, held, s->spent, s->count, age < 0 ? 0 : age, s->e.limit,
                s->reset_ms, s->e.fill ? 1 : 0);
    }
    for (size_t i = 0; grant && i < n_costs; i++)
        if (costs[i].unit[0] && !strpbrk(costs[i].unit, "\t\n"))
            bprintf(&want, "%s\t%" PRId64 "\t%" PRId64 "\n", costs[i].unit, costs[i].amount,
                    costs[i].amount * mult);
    /* The server keys the request is charged to (the script charges those
     * and the host's own quotas): "*" for all, else one a line. */
    buf ks = {0};
    bprintf(&ks, "%s", keys == ~UINT64_C(0) ? "*" : "");
    for (int i = 0; keys != ~UINT64_C(0) && i < h->n_skeys; i++)
        if ((keys >> i & 1) && h->skey[i][0])
            bprintf(&ks, "%s\n", h->skey[i]);
    if (rep.oom || want.oom || ks.oom) {
        free(rep.p);
        free(want.p);
        free(ks.p);
        return STG_ENOMEM;
    }
    char a_ttl[24], a_k[24], a_exp[24], a_cls[8], a_fev[16], a_margin[24], a_hold[24];
    snprintf(a_ttl, sizeof a_ttl, "%" PRId64, q->ttl_us / 1000);
    snprintf(a_k, sizeof a_k, "%" PRId64, mult);
    /* The key outlives its replicas' entries; an idle key is forgotten
     * after an hour (it is relearned from the next answer). */
    snprintf(a_exp, sizeof a_exp, "%" PRId64, (int64_t)3600 * 1000 + q->ttl_us / 1000);
    /* By class: this request's (an index, 0 interactive), the floor (one
     * grant in STG__FQ_FLOOR_EVERY, as in process), how long a refused
     * request's mark outlives the wait it is told, and how long a class
     * that asked caps the leases of the classes below it (the life of
     * the lease it may still be spending). */
    snprintf(a_cls, sizeof a_cls, "%d", cls);
    snprintf(a_fev, sizeof a_fev, "%d", STG__FQ_FLOOR_EVERY);
    snprintf(a_margin, sizeof a_margin, "%" PRId64, SQ_MARK_MARGIN_US / 1000);
    snprintf(a_hold, sizeof a_hold, "%" PRId64, q->ttl_us / 2000);
    const char *argv[12] = {q->me, a_ttl, rep.p, want.p, grant ? "1" : give_back ? "2" : "0",
                            a_k,   a_exp, ks.p,  a_cls,  a_fev, a_margin, a_hold};
    redisReply *r = NULL;
    int rc = stg__redis_eval(l, STG__SCRIPT_QUOTA, rkey, 12, argv, 1, &r, note);
    free(rep.p);
    free(want.p);
    free(ks.p);
    if (rc != STG_OK)
        return STG_EUNAVAIL;
    q->round_trips++;
    l->stats.redis_decisions++;
    long long st = 0, w = 0;
    if (!stg__reply_int(r, 0, &st) || !stg__reply_int(r, 1, &w) || (r->elements - 2) % 6) {
        freeReplyObject(r);
        return STG_EIO;
    }
    /* Told: what was pending is in the ledger now. */
    for (int i = 0; i < h->n; i++) {
        sq_quota *s = &h->q[i];
        s->spent = 0;
        s->count = -1;
        s->fresh = false;
        if (give_back)
            s->lease = 0;
    }
    if (give_back && !grant)
        h->marked = false; /* the script cleared our marks */
    if (grant && st == 0)
        h->marked = true;
    if (grant && st == 1)
        h->lease_cls = cls;
    for (size_t k = 2; k + 6 <= r->elements; k += 6) {
        const redisReply *id = r->element[k], *unit = r->element[k + 1];
        long long g = 0, e = -1, rate = 0, lim = -1;
        if (id->type != REDIS_REPLY_STRING || unit->type != REDIS_REPLY_STRING ||
            !stg__reply_int(r, k + 2, &g) || !stg__reply_int(r, k + 3, &e) ||
            !stg__reply_int(r, k + 4, &rate) || !stg__reply_int(r, k + 5, &lim))
            continue;
        int i = quota_find(h, id->str);
        if (i < 0)
            i = quota_add(h, id->str, unit->str);
        if (i < 0)
            continue; /* more than we keep: its grant lapses with the ttl */
        sq_quota *s = &h->q[i];
        s->lease += g;
        s->e.est = (double)e;
        s->e.at = now;
        s->e.rate_ms = (double)rate / 1e6; /* the script says per s * 1000 */
        s->e.limit = lim;
    }
    freeReplyObject(r);
    h->known = true;
    h->last_trip = now;
    /* Every trip reported the lease and renewed our entry's expiry. */
    h->lease_end = now + q->ttl_us / 2;
    *status = (int)st;
    *wait_us = w > 0 ? (int64_t)w * 1000 : 0;
    return STG_OK;
}

/* Under mu: a round trip that asks for nothing, reporting h's quotas (and
 * giving its lease back when give_back): trip()'s codes. */
static int report(stg_redis_quota *q, sq_host *h, bool give_back, int64_t now,
                  stg__note *note)
{
    int status;
    int64_t wait_us;
    return trip(q, h, false, give_back, SQ_NORMAL, NULL, 0, ~UINT64_C(0), 1, now, &status,
                &wait_us, note);
}

/* ---- acquire ------------------------------------------------------------------ */

static stg_redis_quota_ticket *take(sq_host *h, const stg_quota_cost *costs, size_t n,
                                    uint64_t route, uint64_t keys, bool from_lease)
{
    stg_redis_quota_ticket *t = calloc(1, sizeof *t);
    if (!t)
        return NULL;
    t->h = h;
    t->gen = h->gen;
    t->route = route;
    for (int i = 0; i < h->n; i++) {
        sq_quota *s = &h->q[i];
        if (!charged(h, s, keys))
            continue;
        int64_t c = need_of(costs, n, s->unit);
        if (from_lease)
            s->lease = s->lease > c ? s->lease - c : 0;
        s->flight += c;
        t->idx[t->n] = i;
        t->amount[t->n++] = c;
    }
    return t;
}

static bool lease_covers(const stg_redis_quota *q, const sq_host *h, const stg_quota_cost *costs,
                         size_t n, uint64_t keys, int cls, int64_t now)
{
    if (!h->known || now - h->last_trip >= q->refresh_us)
        return false;
    if (h->n > 0 && now >= h->lease_end)
        return false;
    for (int i = 0; i < h->n; i++) {
        if (h->q[i].fresh)
            return false;
        if (!charged(h, &h->q[i], keys))
            continue;
        if (h->q[i].lease < need_of(costs, n, h->q[i].unit))
            return false;
        if (cls > h->lease_cls)
            return false; /* a lease granted to a higher class is not ours */
    }
    return true;
}

/* Under mu, Redis unreachable with a fallback share: each quota's share
 * of its last estimate, less this replica's own units in flight. */
static int fallback_take(stg_redis_quota *q, sq_host *h, const stg_quota_cost *costs, size_t n,
                         uint64_t route, uint64_t keys, int64_t now, stg_redis_quota_ticket **t,
                         int64_t *wait_us)
{
    int64_t wait = 0;
    for (int i = 0; i < h->n; i++) {
        sq_quota *s = &h->q[i];
        if (!charged(h, s, keys))
            continue;
        int64_t w = stg__sq_fallback_wait(&s->e, q->l->share, s->flight,
                                          need_of(costs, n, s->unit), s->reset_ms, q->poll_us,
                                          now);
        if (w > wait)
            wait = w;
    }
    if (wait > 0) {
        *wait_us = wait;
        return STG_EAGAIN;
    }
    *t = take(h, costs, n, route, keys, false);
    if (!*t)
        return STG_ENOMEM;
    q->fallback_adm++;
    q->l->stats.local_decisions++;
    return STG_OK;
}

/* The class index (0: interactive) of a valid class; -1: not valid. */
static int class_index(const stg_class *cls)
{
    if (!cls || cls->priority < STG_PRIORITY_MIN || cls->priority > STG_PRIORITY_MAX)
        return -1;
    return STG_PRIORITY_INDEX(cls->priority);
}

int stg_redis_quota_acquire(stg_redis_quota *q, const char *key, const char *route,
                            const stg_quota_cost *costs, size_t n_costs, int64_t demand,
                            stg_redis_quota_ticket **t, int64_t *wait_us)
{
    const stg_class normal = {.priority = STG_PRIORITY_NORMAL};
    return stg_redis_quota_acquire_class(q, key, route, &normal, costs, n_costs, demand, t,
                                         wait_us);
}

int stg_redis_quota_acquire_class(stg_redis_quota *q, const char *key, const char *route,
                                  const stg_class *cls, const stg_quota_cost *costs,
                                  size_t n_costs, int64_t demand, stg_redis_quota_ticket **t,
                                  int64_t *wait_us)
{
    int ci = class_index(cls);
    if (!q || !key || !t || !wait_us || (n_costs && !costs) || ci < 0)
        return STG_EINVAL;
    for (size_t i = 0; i < n_costs; i++)
        if (costs[i].amount < 0)
            return STG_EINVAL;
    *t = NULL;
    *wait_us = 0;
    stg_redis_limiter *l = q->l;
    stg__note note = {0};
    int rc = STG_OK;
    pthread_mutex_lock(&l->mu);
    int64_t now = stg__redis_now(l);
    sq_host *h = host_get(q, key, true, now);
    if (!h) {
        rc = STG_ENOMEM;
        goto out;
    }
    uint64_t rh = route_hash(route);
    uint64_t keys = route_keys(h, rh, now);
    for (int i = 0; i < h->n; i++)
        if (charged(h, &h->q[i], keys) && h->q[i].e.limit >= 0 &&
            need_of(costs, n_costs, h->q[i].unit) > h->q[i].e.limit) {
            rc = STG_ETOOBIG;
            goto out;
        }
    if (lease_covers(q, h, costs, n_costs, keys, ci, now)) {
        *t = take(h, costs, n_costs, rh, keys, true);
        rc = *t ? STG_OK : STG_ENOMEM;
        q->local_adm += *t != NULL;
        goto out;
    }
    if (h->ask_at > now && h->ask_keys == keys && ci >= h->ask_cls) {
        *wait_us = h->ask_at - now;
        rc = STG_EAGAIN;
        goto out;
    }
    int64_t mult = demand < 1 ? 1 : demand > q->lease_max ? q->lease_max : demand;
    int status = 0;
    int64_t wait = 0;
    rc = trip(q, h, true, false, ci, costs, n_costs, keys, mult, now, &status, &wait, &note);
    if (rc == STG_EUNAVAIL && l->share > 0) {
        rc = fallback_take(q, h, costs, n_costs, rh, keys, now, t, wait_us);
        goto out;
    }
    if (rc == STG_EUNAVAIL)
        l->stats.unavailable++;
    if (rc != STG_OK)
        goto out;
    if (status == 2) {
        rc = STG_ETOOBIG;
    } else if (status == 1) {
        *t = take(h, costs, n_costs, rh, keys, true);
        rc = *t ? STG_OK : STG_ENOMEM;
    } else {
        if (wait < 1000)
            wait = 1000;
        *wait_us = wait;
        h->ask_at = now + (wait < q->poll_us ? wait : q->poll_us);
        h->ask_keys = keys;
        h->ask_cls = ci;
        rc = STG_EAGAIN;
    }
out:
    pthread_mutex_unlock(&l->mu);
    stg__redis_emit(l, &note);
    return rc;
}

/* ---- settle ------------------------------------------------------------------- */

/* Under mu: an answer's count for h's quota i (or a new quota). */
static void hear(stg_redis_quota *q, sq_host *h, const stg_quota_obs *o, int64_t now)
{
    (void)q;
    if (o->global || o->remaining == STG_UNKNOWN || o->remaining < 0)
        return;
    char id[ID_MAX];
    stg__sq_id(o, id);
    int i = quota_find(h, id);
    if (i < 0) {
        i = quota_add(h, id, o->unit[0] ? o->unit : "requests");
        if (i < 0)
            return;
        h->q[i].fresh = true;
    }
    sq_quota *s = &h->q[i];
    if (s->count < 0 || o->remaining <= s->count) {
        s->count = o->remaining;
        s->count_at = now;
    }
    s->e.limit = o->limit == STG_UNKNOWN ? s->e.limit : o->limit;
    s->reset_ms = o->reset_us == STG_UNKNOWN ? -1 : (o->reset_us + 999) / 1000;
    s->e.fill = stg__sq_fills(o->dialect);
    if (s->e.fill && o->reset_us > 0 && o->limit != STG_UNKNOWN && o->limit > o->remaining)
        s->e.rate_ms = (double)(o->limit - o->remaining) / ((double)o->reset_us / 1000.0);
    stg__sq_est_learn(&s->e, o->remaining, 0, now);
}

static const stg_quota_obs *obs_of(const stg_quota_set *qs, const char *id)
{
    char oid[ID_MAX];
    for (size_t i = 0; qs && i < qs->n; i++) {
        stg__sq_id(&qs->q[i], oid);
        if (strcmp(oid, id) == 0 && qs->q[i].remaining != STG_UNKNOWN && !qs->q[i].global)
            return &qs->q[i];
    }
    return NULL;
}

int stg_redis_quota_settle(stg_redis_quota *q, stg_redis_quota_ticket *t,
                           stg_redis_quota_end how, const stg_quota_set *qs,
                           const stg_quota_cost *used, size_t n_used, int64_t demand)
{
    if (!q || (n_used && !used))
        return STG_EINVAL;
    if (!t)
        return STG_OK;
    stg_redis_limiter *l = q->l;
    stg__note note = {0};
    pthread_mutex_lock(&l->mu);
    int64_t now = stg__redis_now(l);
    sq_host *h = t->h;
    bool alive = false;
    for (size_t i = 0; i < q->n_hosts; i++)
        alive |= q->hosts[i] == h;
    if (!alive || h->gen != t->gen)
        goto out;
    /* The server keys the answer named: a charged quota of another key
     * (the route was not mapped yet) was not spent by it, as stg_quota
     * refunds it. */
    uint64_t named = how == STG_REDIS_QUOTA_ANSWERED ? named_keys(h, qs) : 0;
    for (int k = 0; k < t->n; k++) {
        sq_quota *s = &h->q[t->idx[k]];
        int64_t c = t->amount[k];
        s->flight = s->flight > c ? s->flight - c : 0;
        if (how == STG_REDIS_QUOTA_UNSENT)
            continue;
        if (named && h->skey[s->skey][0] && !(named >> s->skey & 1))
            continue; /* another key's quota: refunded */
        const stg_quota_obs *o = how == STG_REDIS_QUOTA_ANSWERED ? obs_of(qs, s->id) : NULL;
        if (o)
            continue; /* the count (heard below) includes it */
        int64_t sp = c;
        for (size_t u = 0; how == STG_REDIS_QUOTA_ANSWERED && u < n_used; u++)
            if (strcmp(used[u].unit, s->unit) == 0 && used[u].amount >= 0)
                sp = used[u].amount;
        s->spent += sp;
        stg__sq_est_learn(&s->e, -1, sp, now);
    }
    bool fresh = false;
    for (size_t i = 0; how == STG_REDIS_QUOTA_ANSWERED && qs && i < qs->n; i++)
        hear(q, h, &qs->q[i], now);
    route_learn(h, t->route, named, now);
    bool pending = false, holds = false;
    for (int i = 0; i < h->n; i++) {
        fresh |= h->q[i].fresh;
        pending |= h->q[i].spent > 0 || h->q[i].count >= 0;
        holds |= h->q[i].lease > 0 || h->q[i].flight > 0;
    }
    bool idle = demand <= 0 && host_idle(h);
    bool give_back = idle && (holds || pending || h->marked);
    if (fresh || give_back || ((pending || holds) && now - h->last_trip >= q->refresh_us)) {
        if (report(q, h, idle, now, &note) == STG_OK && fresh)
            h->ask_at = 0; /* a quota learned: the next acquire asks */
    }
out:
    pthread_mutex_unlock(&l->mu);
    stg__redis_emit(l, &note);
    free(t);
    return STG_OK;
}

/* Under the lock, at one clock reading, visit each host in turn until
 * visit returns false; what the visits note is in *note. */
static void each_host(stg_redis_quota *q,
                      bool (*visit)(stg_redis_quota *q, sq_host *h, int64_t now, stg__note *note),
                      stg__note *note)
{
    pthread_mutex_lock(&q->l->mu);
    int64_t now = stg__redis_now(q->l);
    for (size_t i = 0; i < q->n_hosts; i++)
        if (!visit(q, q->hosts[i], now, note))
            break;
    pthread_mutex_unlock(&q->l->mu);
}

/* A tick: renew what a busy host holds once its last trip is refresh_us
 * old; false (stop) when Redis is unreachable: the next tick tries again. */
static bool tick_host(stg_redis_quota *q, sq_host *h, int64_t now, stg__note *note)
{
    if (host_idle(h) || now - h->last_trip < q->refresh_us)
        return true;
    return report(q, h, false, now, note) != STG_EUNAVAIL;
}

void stg_redis_quota_tick(stg_redis_quota *q)
{
    if (!q)
        return;
    stg__note note = {0};
    each_host(q, tick_host, &note);
    stg__redis_emit(q->l, &note);
}

int stg_redis_quota_info_get(stg_redis_quota *q, const char *key, stg_redis_quota_info *out)
{
    if (!q || !key || !out)
        return STG_EINVAL;
    memset(out, 0, sizeof *out);
    out->estimate = -1;
    pthread_mutex_lock(&q->l->mu);
    out->round_trips = q->round_trips;
    out->local_admissions = q->local_adm;
    out->fallback_admissions = q->fallback_adm;
    sq_host *h = host_get(q, key, false, stg__redis_now(q->l));
    for (int i = 0; h && i < h->n; i++) {
        const sq_quota *s = &h->q[i];
        out->quotas++;
        out->leased += s->lease;
        out->in_flight += s->flight;
        if (s->e.est >= 0 && (out->estimate < 0 || (int64_t)s->e.est < out->estimate))
            out->estimate = (int64_t)s->e.est;
    }
    pthread_mutex_unlock(&q->l->mu);
    return STG_OK;
}

/* At free: give back what a host holds (when connected), and free it. */
static bool close_host(stg_redis_quota *q, sq_host *h, int64_t now, stg__note *note)
{
    bool holds = false;
    for (int k = 0; k < h->n; k++)
        holds |= h->q[k].lease > 0 || h->q[k].spent > 0 || h->q[k].count >= 0;
    if ((holds || h->marked) && q->l->ctx)
        (void)report(q, h, true, now, note);
    free(h);
    return true;
}

void stg_redis_quota_free(stg_redis_quota *q)
{
    if (!q)
        return;
    stg__note note = {0}; /* not emitted: as before, free logs nothing */
    each_host(q, close_host, &note);
    free(q->hosts);
    free(q);
}
