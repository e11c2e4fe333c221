/*
 * The quota limiter (include/stagger/quota.h): what each host announced,
 * per server key, and admission against all of it.
 *
 * Why one mutex and not atomics like the bucket: an admission reads and
 * charges several quotas at once (all of them or none), and a settle
 * rewrites a host's map; a lock makes both atomic as a whole. Nothing
 * here blocks while holding it, and nothing allocates in acquire.
 *
 * Invariants (asserted):
 *  - a quota's estimate is UNKNOWN or >= 0, and its in-flight count >= 0;
 *    an admission charges a known estimate only when it holds the cost,
 *    so the units admitted before a reset never pass the remaining count
 *    announced (in-flight included); a quota without a count (UNKNOWN,
 *    after its reset) or spent with no reset known admits one probe at a
 *    time, while nothing else of it is in flight;
 *  - a quota never waits for an answer that is not coming: one spent
 *    (0 left) with nothing in flight and no reset known gets a reset at
 *    empty_wait (idle_spent), after which one probe goes; that reset is
 *    marked as ours (probe_reset), never taken for a window the server
 *    told;
 *  - an answer sets a quota's estimate only when it answers an admission
 *    no older than the one whose answer set it last (tickets carry their
 *    admission's sequence number): a late answer's count is older, and
 *    would let more in than the server has left;
 *  - uids are never reused (one counter per limiter), so a ticket naming
 *    a forgotten quota can never settle another one;
 *  - a quota's admitted and refused counts (stg_quota_tally, for display)
 *    only grow, and only for the quotas a ticket charged: they never
 *    change what is admitted;
 *  - a host holds at most max_keys quotas and max_routes routes, and the
 *    limiter at most max_hosts hosts: every insertion past a cap first
 *    forgets the least recently used entry.
 */
#include <math.h>
#include <pthread.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <stagger/quota.h>

#include "util/assert.h"
#include "util/fnv.h"

#define UNKNOWN INT64_C(-1)
#define NEVER INT64_MIN
#define KEY_LEN 64
#define DEFAULT_HOSTS 256
#define DEFAULT_ROUTES 256
#define DEFAULT_MARGIN 0.05
#define DEFAULT_BURST 0.5
#define DEFAULT_PROBE_WAIT_US STG_MS(20)
#define DEFAULT_EMPTY_WAIT_US STG_SEC(1)
#define TIME_MAX (INT64_MAX / 4)

typedef struct qent {
    uint64_t uid; /* 0: a free slot */
    char key[KEY_LEN];
    char unit[STG_QUOTA_UNIT_LEN];
    int64_t window_us;
    int64_t limit;    /* UNKNOWN or the announced limit */
    int64_t est;      /* units admissible now, in-flight excluded; UNKNOWN */
    bool dormant;     /* no count known and none to wait for: no gate */
    int64_t inflight; /* units reserved by tickets not settled yet */
    int64_t reset_at; /* monotonic instant of the announced reset; NEVER */
    int64_t reset_lo; /* the earliest it can be (a reset said in whole
                         seconds is rounded up: up to 1 s earlier); NEVER */
    bool probe_reset; /* reset_at is empty_wait's, for a count spent with
                         no reset said: no window of the server's */
    int64_t tat;      /* pacing: theoretical arrival time (GCRA) of the
                         next unit at the current pace; NEVER: none */
    int64_t refill_us;   /* a bucket whose reset is "until full" (OpenAI,
                            Anthropic): time per unit refilled; 0: none */
    int64_t refilled_at; /* refill credited up to this instant */
    int64_t told_rem;    /* the remaining count last announced; UNKNOWN */
    int64_t told_at;     /* when the current reset was first told */
    int64_t est_seq;     /* the admission whose answer set est (0: none) */
    int64_t est_rem;     /* and the remaining count it told */
    int64_t est_known;   /* the last admission made before that answer
                            came (q->next_seq then) */
    int64_t admitted; /* answered sends that charged it, not refused
                         (stg_quota_tally) */
    int64_t refused;  /* answered 429, 503 or 529 */
    uint64_t tick;    /* last use, for LRU */
} qent;

typedef struct route {
    char *name; /* NULL: a free slot */
    uint64_t uids[STG_QUOTA_TICKET_MAX];
    int n;
    uint64_t tick;
} route;

typedef struct host {
    char *name; /* NULL: a free slot */
    uint64_t hash;
    qent *q;      /* max_keys slots */
    route *r;     /* max_routes slots */
    int64_t pause_until;
    bool answered;         /* an answer came (cold start over) */
    int64_t cold_inflight; /* sends out before any answer: at most 1 */
    uint64_t tick;
} host;

struct stg_quota {
    pthread_mutex_t lock;
    int64_t max_hosts, max_keys, max_routes;
    double margin, burst;
    int64_t probe_wait_us, empty_wait_us;
    bool no_cold_probe;
    host *h; /* max_hosts slots */
    uint64_t tick, next_uid;
    int64_t next_seq; /* admissions, in order (a ticket's sequence number) */
};

/* The ticket's private words. */
typedef struct tview {
    int64_t n;
    int64_t cold; /* bit 0 (T_COLD): the host's first send, before any
                     answer, until its head or its settle; bit 1 (T_HEAD):
                     its head was learned (stg_quota_head); the rest
                     (>> T_SEQ): the admission's sequence number (0: none) */
    struct {
        int64_t uid, amount;
    } e[STG_QUOTA_TICKET_MAX];
} tview;
_Static_assert(sizeof(tview) <= sizeof(stg_quota_ticket), "ticket view outgrew the ticket");

#define T_COLD INT64_C(1)
#define T_HEAD INT64_C(2)
#define T_SEQ 2

static int64_t sat_add(int64_t a, int64_t b)
{
    if (b > 0 && a > TIME_MAX - b)
        return TIME_MAX;
    return a + b;
}

/* ---- lifecycle ------------------------------------------------------------ */

stg_quota *stg_quota_new(const stg_quota_config *cfg, int *err)
{
    stg_quota_config c = {0};
    if (cfg)
        c = *cfg;
    int e = STG_EINVAL;
    if (c.max_hosts < 0 || c.max_keys < 0 || c.max_keys > STG_QUOTA_TICKET_MAX ||
        c.max_routes < 0 || c.probe_wait_us < 0 || c.empty_wait_us < 0 || isnan(c.margin) || c.margin > 1.0 ||
        isnan(c.burst) || c.burst > 1.0)
        goto fail;
    e = STG_ENOMEM;
    stg_quota *q = calloc(1, sizeof *q);
    if (!q)
        goto fail;
    q->max_hosts = c.max_hosts ? c.max_hosts : DEFAULT_HOSTS;
    q->max_keys = c.max_keys ? c.max_keys : STG_QUOTA_TICKET_MAX;
    q->max_routes = c.max_routes ? c.max_routes : DEFAULT_ROUTES;
    q->margin = c.margin == 0.0 ? DEFAULT_MARGIN : c.margin < 0 ? 0.0 : c.margin;
    q->burst = c.burst == 0.0 ? DEFAULT_BURST : c.burst < 0 ? 0.0 : c.burst;
    q->probe_wait_us = c.probe_wait_us ? c.probe_wait_us : DEFAULT_PROBE_WAIT_US;
    q->empty_wait_us = c.empty_wait_us ? c.empty_wait_us : DEFAULT_EMPTY_WAIT_US;
    q->no_cold_probe = c.no_cold_probe;
    q->next_uid = 1;
    q->h = calloc((size_t)q->max_hosts, sizeof *q->h);
    if (!q->h || pthread_mutex_init(&q->lock, NULL) != 0) {
        free(q->h);
        free(q);
        goto fail;
    }
    return q;
fail:
    if (err)
        *err = e;
    return NULL;
}

static void host_clear(stg_quota *q, host *h)
{
    if (h->r)
        for (int64_t i = 0; i < q->max_routes; i++)
            free(h->r[i].name);
    free(h->r);
    free(h->q);
    free(h->name);
    memset(h, 0, sizeof *h);
}

void stg_quota_free(stg_quota *q)
{
    if (!q)
        return;
    for (int64_t i = 0; i < q->max_hosts; i++)
        host_clear(q, &q->h[i]);
    free(q->h);
    pthread_mutex_destroy(&q->lock);
    free(q);
}

/* ---- lookups --------------------------------------------------------------- */

static host *host_find(stg_quota *q, const char *name)
{
    uint64_t hv = stg__fnv1a64(name);
    for (int64_t i = 0; i < q->max_hosts; i++) {
        host *h = &q->h[i];
        if (h->name && h->hash == hv && !strcmp(h->name, name))
            return h;
    }
    return NULL;
}

/* The index of the slot a new entry takes among the n (> 0) of v, each
 * size bytes with its name (char *, NULL: free) at name_at and its last
 * use (uint64_t) at tick_at: the first free one, else the least recently
 * used. The one rule of the host and route tables. */
static int64_t lru_slot(const void *v, size_t size, int64_t n, size_t name_at, size_t tick_at)
{
    STG_ASSERT(n > 0);
    int64_t best = 0;
    uint64_t best_tick = UINT64_MAX;
    for (int64_t i = 0; i < n; i++) {
        const char *e = (const char *)v + (size_t)i * size;
        const char *name;
        uint64_t tick;
        memcpy(&name, e + name_at, sizeof name);
        if (!name)
            return i;
        memcpy(&tick, e + tick_at, sizeof tick);
        if (tick < best_tick) {
            best = i;
            best_tick = tick;
        }
    }
    return best;
}
#define LRU_SLOT(T, v, n) lru_slot((v), sizeof(T), (n), offsetof(T, name), offsetof(T, tick))

/* A new, empty host (the least recently used one forgotten at the cap). */
static host *host_add(stg_quota *q, const char *name)
{
    host *slot = &q->h[LRU_SLOT(host, q->h, q->max_hosts)];
    host_clear(q, slot);
    slot->name = strdup(name);
    slot->q = calloc((size_t)q->max_keys, sizeof *slot->q);
    slot->r = calloc((size_t)q->max_routes, sizeof *slot->r);
    if (!slot->name || !slot->q || !slot->r) {
        host_clear(q, slot);
        return NULL;
    }
    slot->hash = stg__fnv1a64(name);
    slot->pause_until = NEVER;
    return slot;
}

static qent *by_uid(const stg_quota *q, host *h, int64_t uid)
{
    for (int64_t i = 0; i < q->max_keys; i++)
        if (h->q[i].uid && h->q[i].uid == (uint64_t)uid)
            return &h->q[i];
    return NULL;
}

static route *route_find(const stg_quota *q, host *h, const char *name)
{
    for (int64_t i = 0; i < q->max_routes; i++)
        if (h->r[i].name && !strcmp(h->r[i].name, name))
            return &h->r[i];
    return NULL;
}

static bool route_has(const route *r, uint64_t uid)
{
    for (int i = 0; i < r->n; i++)
        if (r->uids[i] == uid)
            return true;
    return false;
}

/* Is a request of route r (NULL: not mapped) charged to e? A known route:
 * its keys and the host's own (""); an unknown one: every quota. The one
 * rule of acquire and stg_quota_route_ids. */
static bool charged(const route *r, const qent *e)
{
    return e->uid && !(r && e->key[0] && !route_has(r, e->uid));
}

/* Units are compared with "" read as "requests" (the IETF default). */
static const char *unit_of(const char *u)
{
    return u[0] ? u : "requests";
}

/* The quota for (key, unit, window), kept or added; the LRU one (preferring
 * one with nothing in flight) forgotten at the cap. An unknown window
 * matches the same key and unit with any window, and a known one adopts an
 * entry whose window was unknown (a 429 may carry fewer fields than a 200:
 * one quota must not become two). */
static qent *quota_get(stg_quota *q, host *h, const stg_quota_obs *o)
{
    const char *unit = unit_of(o->unit);
    qent *free_slot = NULL, *idle = NULL, *busy = NULL, *loose = NULL;
    for (int64_t i = 0; i < q->max_keys; i++) {
        qent *e = &h->q[i];
        if (!e->uid) {
            if (!free_slot)
                free_slot = e;
            continue;
        }
        bool same = !strncmp(e->key, o->key, KEY_LEN) && !strcmp(e->unit, unit);
        if (same && e->window_us == o->window_us)
            return e;
        if (same && (o->window_us < 0 || e->window_us < 0) && (!loose || e->tick > loose->tick))
            loose = e;
        qent **pick = e->inflight ? &busy : &idle;
        if (!*pick || e->tick < (*pick)->tick)
            *pick = e;
    }
    if (loose) {
        if (o->window_us >= 0)
            loose->window_us = o->window_us;
        return loose;
    }
    qent *e = free_slot ? free_slot : idle ? idle : busy;
    STG_ASSERT(e);
    memset(e, 0, sizeof *e);
    e->uid = q->next_uid++;
    size_t kl = strnlen(o->key, KEY_LEN - 1);
    memcpy(e->key, o->key, kl);
    snprintf(e->unit, sizeof e->unit, "%s", unit);
    e->window_us = o->window_us;
    e->limit = UNKNOWN;
    e->est = UNKNOWN;
    e->dormant = true; /* until a remaining count arrives */
    e->reset_at = NEVER;
    e->reset_lo = NEVER;
    e->probe_reset = false;
    e->tat = NEVER;
    e->told_rem = UNKNOWN;
    return e;
}

/* ---- the rules --------------------------------------------------------------- */

/* No reset pending: none said, or the one said (or ours) passed. */
static void reset_clear(qent *e)
{
    e->reset_at = NEVER;
    e->probe_reset = false;
}

/* Spent with no reset said: our own wait before one probe goes, empty_wait
 * from now (marked as ours: no window of the server's). */
static void probe_wait(const stg_quota *q, qent *e, int64_t now)
{
    e->reset_at = sat_add(now, q->empty_wait_us);
    e->reset_lo = e->reset_at;
    e->probe_reset = true;
}

/* The reset passed. More quota has come, but how much is not said (not
 * necessarily the full limit: the IETF t is when *more* returns), so what
 * the estimate still holds stays (a reset never takes quota away), and a
 * spent one becomes unknown: the next request probes. */
static void renew(qent *e, int64_t now)
{
    if (e->reset_at != NEVER && now >= e->reset_at) {
        reset_clear(e);
        if (!e->dormant && e->est == 0)
            e->est = UNKNOWN;
    }
}

/* Spent (a count of 0), nothing of it in flight, and no reset known: no
 * answer is on its way to say more, and none will come unless something
 * is sent. One probe goes after empty_wait (the rule of a count spent with
 * no reset said, as Shopify's used/size): its reset becomes now +
 * empty_wait, at which renew() makes the count unknown, and one request
 * at a time probes until an answer gives it. Without this, an estimate
 * left at 0 by answers that did not restore it (an older answer's count,
 * an answer without this quota, a send that got no answer) either went
 * out at once into a spent quota or, with nothing in flight, waited for
 * an answer that never came. A reset said (even one that passed) is the
 * server's own word and is kept. A refilling bucket refills on its own. */
static void idle_spent(const stg_quota *q, qent *e, int64_t now)
{
    if (!e->dormant && e->est == 0 && e->inflight == 0 && e->reset_at == NEVER &&
        e->refill_us <= 0)
        probe_wait(q, e, now);
}

/* A refilling bucket: credit the units refilled since the last credit, up
 * to its limit (less what is in flight). */
static void refill(qent *e, int64_t now)
{
    if (e->refill_us <= 0 || e->dormant || e->est == UNKNOWN || now <= e->refilled_at)
        return;
    int64_t k = (now - e->refilled_at) / e->refill_us;
    if (k <= 0)
        return;
    int64_t cap = e->limit != UNKNOWN ? e->limit - e->inflight : TIME_MAX;
    int64_t est = e->est + k;
    if (est > cap)
        est = cap > e->est ? cap : e->est;
    e->est = est;
    e->refilled_at += k * e->refill_us;
}

static int64_t cost_for(const qent *e, const stg_quota_cost *c, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (!strcmp(unit_of(c[i].unit), e->unit))
            return c[i].amount;
    return 1;
}

/* Does e pace a request of cost c when `demand` requests (this one
 * included; <= 0: unknown) wait for it? Only when what waits is more than
 * its remaining count: what fits in the count goes now (spreading it would
 * only make the last window's few requests wait for nothing), and what
 * does not fit is spread, so that the count is not spent at once to meet
 * the wall. An unknown demand paces (the behaviour of stg_quota_acquire). */
static bool pacing(const qent *e, int64_t c, int64_t demand)
{
    if (e->dormant || e->est == UNKNOWN || demand <= 0)
        return true;
    return c > 0 && demand > e->est / c;
}

/* Where the pace of e ends: the earliest instant its reset can be. A
 * reset said in whole seconds (IETF t, Kong's RateLimit-Reset) is rounded
 * up, so the window may turn up to a second before the instant held, and
 * a count spread up to that instant loses what was not sent when it
 * turns: with t = 1 and the window turning 0.5 s later, half of it (the
 * first window of bench_dialects, whose phase is anything). Spreading the
 * count up to the earliest instant spends it all in the window, whatever
 * the phase; the count comes back at the latest instant (reset_at), as
 * before. Never more than the count either way: only the spread moves. */
static int64_t pace_end(const qent *e)
{
    if (e->reset_lo != NEVER && e->reset_lo < e->reset_at)
        return e->reset_lo;
    return e->reset_at;
}

/* How long until e admits cost c (0: now), with `demand` waiting. */
static int64_t need(const stg_quota *q, const qent *e, int64_t c, int64_t demand, int64_t now)
{
    int64_t w = 0;
    if (e->dormant) {
        w = 0;
    } else if (e->est == UNKNOWN || e->est < c) {
        if (e->est != UNKNOWN && e->refill_us > 0) {
            w = e->refilled_at + (c - e->est) * e->refill_us - now; /* > 0: refill() ran */
            if (e->reset_at != NEVER && e->reset_at - now < w)
                w = e->reset_at - now;
        } else if (e->est != UNKNOWN && e->reset_at != NEVER)
            w = e->reset_at - now; /* > 0: renew() ran */
        else {
            /* idle_spent() gave a spent idle quota a reset. */
            STG_ASSERT(e->est == UNKNOWN || e->est > 0 || e->inflight > 0);
            w = e->inflight > 0 ? q->probe_wait_us : 0; /* one probe at a time */
        }
    }
    /* Pacing (GCRA): the pace may run ahead of an instant x by a share b of
     * the time left to the reset R (the burst), no further: admitted at the
     * first x with tat - x <= b * (R - x), that is x - now =
     * (d - b * r) / (1 - b) for d = tat - now, r = R - now. Solved here
     * rather than asked again at now + d - b * r, which the shrinking
     * burst would refuse again and again. */
    if (!e->dormant && e->tat != NEVER && e->tat > now && pacing(e, c, demand)) {
        double d = (double)(e->tat - now), p = d;
        int64_t end = pace_end(e);
        if (e->reset_at != NEVER && end > now) {
            double r = (double)(end - now);
            p = q->burst >= 1.0 ? 0.0 : (d - q->burst * r) / (1.0 - q->burst);
        }
        int64_t pw = p <= 0 ? 0 : p >= (double)TIME_MAX ? TIME_MAX : (int64_t)ceil(p);
        if (pw > w)
            w = pw;
    }
    return w;
}

/* Reserve c units of e at now, and (paced) move its pace on by c units at
 * the pace that spreads the remaining count over the time to the reset
 * (with the margin): c * t * (1 + margin) / r. A send that fits in the
 * count (not paced) leaves the pace where it was: the count it spent
 * already slows the next paced step (r is smaller). */
static void charge(const stg_quota *q, qent *e, int64_t c, bool paced, int64_t now)
{
    int64_t before = e->est;
    if (!e->dormant && before != UNKNOWN) /* a probe leaves it unknown */
        e->est = before <= c ? 0 : before - c;
    e->inflight += c;
    /* A refilling bucket paces itself (its refill): no spreading over its
     * reset, which is when it is full, not when more comes. */
    int64_t end = e->reset_at != NEVER ? pace_end(e) : NEVER;
    if (paced && !e->dormant && before > 0 && e->reset_at != NEVER && end > now &&
        e->refill_us <= 0) {
        double step = (double)(end - now) * (1.0 + q->margin) * (double)c / (double)before;
        int64_t s = step >= (double)TIME_MAX ? TIME_MAX : (int64_t)ceil(step);
        int64_t base = e->tat != NEVER && e->tat > now ? e->tat : now;
        int64_t at = sat_add(base, s);
        /* The reset resets the pace; a pace that would pass it stops short
         * of it, by the margin's share of the time from when the reset was
         * told (at least 1 us), so that what the count still holds is all
         * sent, and arrives, before the reset rather than after it, in the
         * next window (where it would take a unit of that window's count;
         * the reset told is known only to the server's rounding). */
        int64_t from = e->told_at < now ? e->told_at : now;
        int64_t slack = (int64_t)((double)(end - from) * q->margin);
        int64_t cap = end - (slack > 1 ? slack : 1);
        e->tat = at < cap ? at : cap;
    }
    STG_ASSERT(e->est >= 0 || e->est == UNKNOWN);
    STG_ASSERT(e->inflight >= 0);
    STG_ASSERT(!e->probe_reset || e->reset_at != NEVER); /* a probe wait is a wait */
}

int stg_quota_acquire(stg_quota *q, const char *hostname, const char *route_name,
                      const stg_quota_cost *costs, size_t n_costs, int64_t now_us,
                      stg_quota_ticket *t, int64_t *wait_us)
{
    return stg_quota_acquire_demand(q, hostname, route_name, costs, n_costs, 0, now_us, t,
                                    wait_us);
}

/* The view of a caller's ticket; false, with v->n = 0, when its count is
 * out of range: a garbage ticket is never acted on. */
static bool ticket_view(const stg_quota_ticket *t, tview *v)
{
    memcpy(v, t, sizeof *v);
    if (v->n >= 0 && v->n <= STG_QUOTA_TICKET_MAX)
        return true;
    v->n = 0;
    return false;
}

/* A caller's list of costs: present when counted, no amount negative. */
static bool costs_valid(const stg_quota_cost *c, size_t n)
{
    if (n && !c)
        return false;
    for (size_t i = 0; i < n; i++)
        if (c[i].amount < 0)
            return false;
    return true;
}

int stg_quota_acquire_demand(stg_quota *q, const char *hostname, const char *route_name,
                             const stg_quota_cost *costs, size_t n_costs, int64_t demand,
                             int64_t now_us, stg_quota_ticket *t, int64_t *wait_us)
{
    if (!q || !hostname || !t || !costs_valid(costs, n_costs))
        return STG_EINVAL;
    tview v;
    memset(&v, 0, sizeof v);
    int64_t wait = 0;
    int rc = STG_OK;
    pthread_mutex_lock(&q->lock);
    v.cold = ++q->next_seq << T_SEQ; /* the low bits are flags */
    host *h = host_find(q, hostname);
    if (!h && !q->no_cold_probe && !(h = host_add(q, hostname)))
        goto out; /* out of memory: nothing known, nothing to keep */
    if (!h)
        goto out;
    h->tick = ++q->tick;
    if (!h->answered && !q->no_cold_probe) {
        /* Nothing announced yet: one send asks first, the others wait for
         * its answer (a first wave of `concurrency` sends could pass any
         * quota before the server had a chance to say it). */
        if (h->cold_inflight > 0) {
            wait = q->probe_wait_us;
            rc = STG_EAGAIN;
        } else {
            h->cold_inflight++;
            v.cold |= T_COLD;
        }
        goto out;
    }
    if (h->pause_until != NEVER && h->pause_until > now_us) {
        wait = h->pause_until - now_us;
        rc = STG_EAGAIN;
        goto out;
    }
    route *r = route_name ? route_find(q, h, route_name) : NULL;
    if (r)
        r->tick = q->tick;
    int64_t idx[STG_QUOTA_TICKET_MAX], amt[STG_QUOTA_TICKET_MAX];
    bool paced[STG_QUOTA_TICKET_MAX];
    int n = 0;
    for (int64_t i = 0; i < q->max_keys; i++) {
        qent *e = &h->q[i];
        if (!charged(r, e))
            continue;
        renew(e, now_us);
        refill(e, now_us);
        idle_spent(q, e, now_us);
        int64_t c = cost_for(e, costs, n_costs);
        if (c == 0)
            continue;
        if (e->limit != UNKNOWN && c > e->limit) {
            rc = STG_ETOOBIG;
            goto out;
        }
        int64_t w = need(q, e, c, demand, now_us);
        if (w > wait)
            wait = w;
        STG_ASSERT(n < STG_QUOTA_TICKET_MAX);
        paced[n] = pacing(e, c, demand);
        idx[n] = i;
        amt[n++] = c;
    }
    if (wait > 0) {
        rc = STG_EAGAIN;
        goto out;
    }
    for (int i = 0; i < n; i++) {
        qent *e = &h->q[idx[i]];
        charge(q, e, amt[i], paced[i], now_us);
        e->tick = q->tick;
        v.e[v.n].uid = (int64_t)e->uid;
        v.e[v.n++].amount = amt[i];
    }
out:
    pthread_mutex_unlock(&q->lock);
    if (rc == STG_OK || rc == STG_EAGAIN) {
        memcpy(t, &v, sizeof v);
        if (wait_us)
            *wait_us = wait;
    }
    return rc;
}

/* What an answer says of one quota. */
/* The dialects whose reset is the instant the bucket is full again (their
 * providers' documentation), so that more quota comes long before it. */
static bool refills(int dialect)
{
    return dialect == STG_DIALECT_OPENAI || dialect == STG_DIALECT_ANTHROPIC;
}

/* The dialects whose reset is an epoch in whole seconds (GitHub's and
 * X's x-*-reset), rounded up as a delta in seconds is: the instant it
 * names can be up to a second after the window turns, though the delta
 * to it is no whole number of seconds. */
static bool epoch_reset(int dialect)
{
    return dialect == STG_DIALECT_GITHUB || dialect == STG_DIALECT_X;
}

/* Whether a reset at `at` is, as far as can be told, the one held: that
 * has not passed, and `at` is within the second of rounding of it. */
static bool held_window(const qent *e, int64_t at, int64_t now)
{
    if (e->reset_at == NEVER || e->reset_at <= now)
        return false;
    int64_t d = at - e->reset_at;
    return d > -STG_SEC(1) && d < STG_SEC(1);
}

/* What an answer says of one quota. */
static void update(const stg_quota *q, qent *e, const stg_quota_obs *o, int64_t seq, int64_t amount,
                   int64_t now)
{
    if (o->limit >= 0)
        e->limit = o->limit;
    /* Answers come back out of order. One to a request admitted before the
     * one whose answer set the estimate (older) tells a count at least as
     * high when the server counted it first: that count is not taken (it
     * would let more in than the server has left); only the older
     * request's own amount comes back (the newer count had it, and the
     * estimate took it off a second time, as in flight), never more than
     * the newer count less what is in flight now. A lower count is the
     * newer one. */
    bool older = seq != 0 && seq < e->est_seq && e->est != UNKNOWN && !e->dormant;
    /* Nor is the order of admission the order in which the server
     * counted: a request admitted later may arrive first, and its answer,
     * coming after one with a lower count, tells an older count too (the
     * server had counted fewer then). Within one window a count never
     * grows, so a higher count of the same window is older news, whatever
     * the ticket's number: taken, it let one more in than the window had
     * left (bench_dialects' ietf, 41 of 40). Same window, as far as can be
     * told: the reset held has not passed, and the answer's is within the
     * second of rounding of it. A window of 1 s cannot be told from the
     * next one that way; then the higher count waits for the reset held
     * (renew() makes a spent count unknown, and the next answer's count
     * is taken), which costs at most that second of rounding, where
     * taking a stale count costs a refusal. */
    if (!older && seq != 0 && e->est != UNKNOWN && !e->dormant && o->remaining >= 0 &&
        o->remaining > e->est_rem && o->reset_us >= 0 && !refills(o->dialect))
        older = held_window(e, sat_add(now, o->reset_us), now);
    /* Without a reset (Azure's x-ratelimit-remaining-*, a bucket), the
     * window cannot tell a stale count from a refill; but a request that
     * was in flight when the estimate's answer came may have been counted
     * before it: its higher count is older news too (taken, it let one
     * more in than the server had left: bench_dialects' azure at 1.11x).
     * A request admitted after that answer came was counted after it,
     * and its count (a refill) is taken. The wait for a probe that a
     * spent count starts (empty_wait) is no reset of the server's: the
     * rule holds through it (taken then, a count of 1 counted before the
     * 0 that started the wait let one more into a full leaky bucket). */
    if (!older && seq != 0 && e->est != UNKNOWN && !e->dormant && o->remaining >= 0 &&
        o->remaining > e->est_rem && o->reset_us < 0 &&
        (e->reset_at == NEVER || e->probe_reset) && seq <= e->est_known)
        older = true;
    if (o->remaining >= 0 && older && o->remaining >= e->est_rem) {
        int64_t back = e->est_rem > e->inflight ? e->est_rem - e->inflight : 0;
        int64_t est = e->est + amount;
        e->est = est < back ? est : back;
        if (e->est < 0)
            e->est = 0;
    } else if (o->remaining >= 0) {
        e->est = o->remaining > e->inflight ? o->remaining - e->inflight : 0;
        e->est_rem = o->remaining;
        e->est_known = q->next_seq;
        e->dormant = false;
        if (!older)
            e->est_seq = seq;
    }
    if (o->reset_us >= 0) {
        /* The same window told again, a little later: its count went
         * down (an equal count may be the next window's first answer: a
         * limit of 1 always says 0) and the new reset, in whole seconds,
         * is less than a second after the one held (a bucket's "until
         * full" is no window: it moves on as the bucket is spent). A reset
         * said in whole seconds is rounded up, so each answer bounds the
         * instant from above, and the earliest bound holds (the pace then
         * ends, and a spent count probes, when the window really turns,
         * not up to a second after). */
        int64_t at = sat_add(now, o->reset_us);
        bool same = o->reset_us % STG_SEC(1) == 0 && !refills(o->dialect) &&
                    e->reset_at != NEVER && e->reset_at > now && at > e->reset_at &&
                    at - e->reset_at < STG_SEC(1) && o->remaining >= 0 &&
                    e->told_rem != UNKNOWN && o->remaining < e->told_rem;
        /* A late answer's reset is older news too: it may bring the bound
         * earlier, never later. */
        if (older && !refills(o->dialect) && e->reset_at != NEVER && at > e->reset_at)
            same = true;
        /* Whole seconds (and at least one): the window may turn up to a
         * second before; each such answer bounds the instant from below
         * too, and the latest lower bound holds. */
        bool whole = (o->reset_us % STG_SEC(1) == 0 || epoch_reset(o->dialect)) &&
                     o->reset_us >= STG_SEC(1) && !refills(o->dialect);
        int64_t lo = whole ? at - STG_SEC(1) : at;
        /* The instant held, told again (an epoch reset names the same
         * instant in every answer of its window; a delta, the same less
         * the time gone): it was told when it was first told. Taken as
         * told now, the pace's stop short of it (a share of the time since
         * it was told) shrank with every answer, and a window's last sends
         * went ever closer to its end, the last one landing in the next
         * window (bench_dialects' x, 3.6 s into its window: a fourth
         * window for the last job). A count that grew is a new window's,
         * told now. */
        bool again = !refills(o->dialect) && held_window(e, at, now) &&
                     (o->remaining < 0 || e->told_rem == UNKNOWN || o->remaining <= e->told_rem);
        if (!same) {
            e->reset_at = at;
            e->reset_lo = lo;
            e->probe_reset = false;
            if (!again)
                e->told_at = now;
        } else if (!older && (e->reset_lo == NEVER || lo > e->reset_lo)) {
            e->reset_lo = lo < e->reset_at ? lo : e->reset_at;
        }
    } else if (o->remaining == 0) {
        /* Spent, and no word of when more comes (a leaky bucket's
         * used/size): probe again after a while, not at once. */
        probe_wait(q, e, now);
    } else if (e->reset_at != NEVER && e->reset_at <= now) {
        reset_clear(e);
    }
    if (o->remaining >= 0 && !older)
        e->told_rem = o->remaining;
    /* Until full in t with limit - remaining missing: one unit per
     * t / (limit - remaining), rounded up (a reset rounded up to the
     * second only makes it slower). */
    if (refills(o->dialect) && o->remaining >= 0 && o->reset_us >= 0 && e->limit > 0) {
        if (e->limit > o->remaining) {
            int64_t missing = e->limit - o->remaining;
            e->refill_us = o->reset_us / missing + (o->reset_us % missing != 0);
            if (e->refill_us < 1)
                e->refill_us = 1;
        }
        e->refilled_at = now;
    }
}

static void route_map(stg_quota *q, host *h, const char *name, const uint64_t *uids, int n)
{
    route *r = route_find(q, h, name);
    if (!r) {
        route *slot = &h->r[LRU_SLOT(route, h->r, q->max_routes)];
        char *copy = strdup(name);
        if (!copy)
            return; /* unmapped: the route stays charged to every key */
        free(slot->name);
        slot->name = copy;
        r = slot;
    }
    memcpy(r->uids, uids, (size_t)n * sizeof *uids);
    r->n = n;
    r->tick = q->tick;
}

/* idle_spent() for every quota a settled ticket charged. */
static void ticket_idle(const stg_quota *q, host *h, const tview *v, int64_t now)
{
    for (int64_t i = 0; i < v->n; i++) {
        qent *e = by_uid(q, h, v->e[i].uid);
        if (e)
            idle_spent(q, e, now);
    }
}

/* What used[] says unit u cost (-1: not said). */
static int64_t used_for(const char *u, const stg_quota_cost *used, size_t n_used)
{
    for (size_t i = 0; i < n_used; i++)
        if (!strcmp(unit_of(used[i].unit), u))
            return used[i].amount;
    return -1;
}

/* Take what v holds out of its quotas' in-flight counts (never below 0);
 * each entry's amount becomes what was taken. */
static void release(const stg_quota *q, host *h, tview *v)
{
    for (int64_t i = 0; i < v->n; i++) {
        qent *e = by_uid(q, h, v->e[i].uid);
        int64_t a = v->e[i].amount;
        if (!e || a <= 0) {
            v->e[i].amount = 0;
            continue;
        }
        if (a > e->inflight)
            a = e->inflight;
        e->inflight -= a;
        v->e[i].amount = a;
    }
}

/* A request of e that reserved `amount` used u (< 0: not said): the
 * estimate takes back what was reserved beyond it, or gives up what it
 * passed it by, within the limit. False when nothing was said, or e has
 * no count to correct. */
static bool refund_used(qent *e, int64_t amount, int64_t u)
{
    if (u < 0 || e->dormant || e->est == UNKNOWN)
        return false;
    int64_t est = e->est + amount - u;
    if (e->limit != UNKNOWN && est > e->limit - e->inflight)
        est = e->limit - e->inflight > e->est ? e->limit - e->inflight : e->est;
    e->est = est < 0 ? 0 : est;
    return true;
}

/* Learn an answer's quotas qs for the send of v (released: its amounts
 * are out of the in-flight counts): every quota in qs is kept or updated,
 * a global one pauses the host, route is mapped to the keys qs names, and
 * what v charged that qs does not mention is settled: a key the answer
 * shows the route does not spend is refunded (its entry's amount becomes
 * 0), one the body says how much was used of (used) is corrected, a probe
 * that got no count goes dormant. The uids of the quotas qs told go to
 * seen[0..return) (STG_QUOTA_TICKET_MAX). */
static int learn(stg_quota *q, host *h, const char *route_name, tview *v,
                 const stg_quota_set *qs, const stg_quota_cost *used, size_t n_used,
                 uint64_t *seen, int64_t now_us)
{
    uint64_t named[STG_QUOTA_TICKET_MAX];
    int n_named = 0, n_seen = 0;
    size_t nq = qs->n < STG_QUOTAS_MAX ? qs->n : STG_QUOTAS_MAX;
    for (size_t i = 0; i < nq; i++) {
        const stg_quota_obs *o = &qs->q[i];
        if (o->global) {
            if (o->reset_us > 0) {
                int64_t until = sat_add(now_us, o->reset_us);
                if (h->pause_until == NEVER || until > h->pause_until)
                    h->pause_until = until;
            }
            continue;
        }
        qent *e = quota_get(q, h, o);
        int64_t amount = 0; /* what the ticket charged this quota */
        for (int64_t j = 0; j < v->n; j++)
            if (v->e[j].uid == (int64_t)e->uid)
                amount += v->e[j].amount;
        update(q, e, o, v->cold >> T_SEQ, amount, now_us);
        e->tick = q->tick;
        if (n_seen < STG_QUOTA_TICKET_MAX)
            seen[n_seen++] = e->uid;
        if (o->key[0] && n_named < STG_QUOTA_TICKET_MAX) {
            bool dup = false;
            for (int j = 0; j < n_named; j++)
                dup |= named[j] == e->uid;
            if (!dup)
                named[n_named++] = e->uid;
        }
    }
    if (route_name && n_named > 0)
        route_map(q, h, route_name, named, n_named);
    /* What the ticket charged that this answer did not mention: a key the
     * answer shows the route does not spend is refunded; a quota that had
     * no count (a probe) and got none stays without a gate. */
    for (int64_t i = 0; i < v->n; i++) {
        qent *e = by_uid(q, h, v->e[i].uid);
        bool got = false;
        for (int j = 0; e && j < n_seen; j++)
            got |= seen[j] == e->uid;
        if (!e || got)
            continue;
        /* What the request really used (an AI answer's usage; nothing, for
         * a refusal). The answer's count, when it told one, was the
         * server's word and was taken above instead. */
        if (refund_used(e, v->e[i].amount, used_for(e->unit, used, n_used)))
            continue;
        bool other_key = false;
        if (e->key[0] && n_named > 0) {
            other_key = true;
            for (int j = 0; j < n_named; j++) {
                qent *k = by_uid(q, h, (int64_t)named[j]);
                if (k && !strcmp(k->key, e->key))
                    other_key = false;
            }
        }
        if (other_key && e->est != UNKNOWN && !e->dormant) {
            e->est += v->e[i].amount;
            if (e->limit != UNKNOWN && e->est > e->limit)
                e->est = e->limit;
            v->e[i].amount = 0; /* given back */
        } else if (e->est == UNKNOWN && !e->dormant) {
            e->dormant = true;
        }
    }
    return n_seen;
}

static int settle(stg_quota *q, const char *hostname, const char *route_name, stg_quota_ticket *t,
                  const stg_quota_set *qs, const stg_quota_cost *used, size_t n_used,
                  int64_t now_us)
{
    if (!q || !hostname || !costs_valid(used, n_used))
        return STG_EINVAL;
    tview v;
    memset(&v, 0, sizeof v);
    if (t) {
        ticket_view(t, &v); /* never settles a garbage ticket */
        memset(t, 0, sizeof *t);
    }
    /* A ticket whose head was learned (stg_quota_head) settles what it
     * still holds, at the body's usage: the quotas qs tells were the
     * head's, learned then (taken again now, an old count and a reset
     * told minutes ago would pass for news). */
    bool head = (v.cold & T_HEAD) != 0;
    int rc = STG_OK;
    pthread_mutex_lock(&q->lock);
    host *h = host_find(q, hostname);
    if (!h && !head && qs && qs->n > 0 && !(h = host_add(q, hostname)))
        rc = STG_ENOMEM;
    if (!h)
        goto out;
    h->tick = ++q->tick;
    if ((v.cold & T_COLD) && h->cold_inflight > 0)
        h->cold_inflight--;
    if (qs && !head)
        h->answered = true; /* a head did it when it came */
    release(q, h, &v);
    if (qs && head) {
        for (int64_t i = 0; i < v.n; i++) {
            qent *e = by_uid(q, h, v.e[i].uid);
            if (e && v.e[i].amount > 0)
                refund_used(e, v.e[i].amount, used_for(e->unit, used, n_used));
        }
    } else if (qs) {
        uint64_t seen[STG_QUOTA_TICKET_MAX];
        int n_seen = learn(q, h, route_name, &v, qs, used, n_used, seen, now_us);
        for (int j = 0; j < n_seen; j++) {
            qent *e = by_uid(q, h, (int64_t)seen[j]);
            if (e)
                idle_spent(q, e, now_us);
        }
    }
    /* What this settle left spent and idle probes after empty_wait; with
     * no answer, nothing more will come. */
    ticket_idle(q, h, &v, now_us);
out:
    pthread_mutex_unlock(&q->lock);
    return rc;
}

int stg_quota_head(stg_quota *q, const char *hostname, const char *route_name,
                   stg_quota_ticket *t, const stg_quota_set *qs, int64_t now_us)
{
    if (!q || !hostname || !t)
        return STG_EINVAL;
    tview v;
    ticket_view(t, &v); /* never learns for a garbage ticket */
    if (v.cold & T_HEAD)
        return STG_OK; /* told once: a second head is not news */
    stg_quota_set none;
    if (!qs) {
        stg_quota_set_init(&none);
        qs = &none;
    }
    int rc = STG_OK;
    pthread_mutex_lock(&q->lock);
    host *h = host_find(q, hostname);
    if (!h && qs->n > 0 && !(h = host_add(q, hostname)))
        rc = STG_ENOMEM;
    if (h) {
        h->tick = ++q->tick;
        if ((v.cold & T_COLD) && h->cold_inflight > 0)
            h->cold_inflight--; /* the probe is answered: the others may go */
        h->answered = true;
        /* Learned as settle() learns (its send out of the in-flight
         * counts: the count told has it already, and the estimate is that
         * count less what else is in flight); then what the head told the
         * count of is settled for good (the server's word), and the rest
         * (a quota the head did not mention, a token unit whose use only
         * the body says) goes back in flight until the settle. */
        release(q, h, &v);
        uint64_t seen[STG_QUOTA_TICKET_MAX];
        int n_seen = learn(q, h, route_name, &v, qs, NULL, 0, seen, now_us);
        for (int64_t i = 0; i < v.n; i++) {
            qent *e = by_uid(q, h, v.e[i].uid);
            for (int j = 0; e && j < n_seen; j++)
                if (seen[j] == e->uid)
                    e = NULL;
            if (!e)
                v.e[i].amount = 0;
            else
                e->inflight += v.e[i].amount;
        }
        for (int j = 0; j < n_seen; j++) {
            qent *e = by_uid(q, h, (int64_t)seen[j]);
            if (e)
                idle_spent(q, e, now_us);
        }
    }
    v.cold = (v.cold & ~T_COLD) | T_HEAD;
    pthread_mutex_unlock(&q->lock);
    memcpy(t, &v, sizeof v);
    return rc;
}

int stg_quota_settle(stg_quota *q, const char *hostname, const char *route_name,
                     stg_quota_ticket *t, const stg_quota_set *qs, int64_t now_us)
{
    return settle(q, hostname, route_name, t, qs, NULL, 0, now_us);
}

int stg_quota_settle_used(stg_quota *q, const char *hostname, const char *route_name,
                          stg_quota_ticket *t, const stg_quota_set *qs, const stg_quota_cost *used,
                          size_t n_used, int64_t now_us)
{
    return settle(q, hostname, route_name, t, qs, used, n_used, now_us);
}

int stg_quota_cancel(stg_quota *q, const char *hostname, stg_quota_ticket *t)
{
    if (!q || !hostname)
        return STG_EINVAL;
    if (!t)
        return STG_OK;
    tview v;
    bool valid = ticket_view(t, &v);
    memset(t, 0, sizeof *t);
    if (!valid)
        return STG_OK;
    pthread_mutex_lock(&q->lock);
    host *h = host_find(q, hostname);
    if (h && (v.cold & T_COLD) && h->cold_inflight > 0)
        h->cold_inflight--;
    for (int64_t i = 0; h && i < v.n; i++) {
        qent *e = by_uid(q, h, v.e[i].uid);
        if (!e)
            continue;
        int64_t a = v.e[i].amount < e->inflight ? v.e[i].amount : e->inflight;
        e->inflight -= a;
        if (!e->dormant && e->est != UNKNOWN) {
            e->est += a;
            if (e->limit != UNKNOWN && e->est > e->limit)
                e->est = e->limit;
        }
    }
    pthread_mutex_unlock(&q->lock);
    return STG_OK;
}

int stg_quota_tally(stg_quota *q, const char *hostname, const stg_quota_ticket *t, bool refused)
{
    if (!q || !hostname)
        return STG_EINVAL;
    if (!t)
        return STG_OK;
    tview v;
    if (!ticket_view(t, &v))
        return STG_OK;
    pthread_mutex_lock(&q->lock);
    host *h = host_find(q, hostname);
    for (int64_t i = 0; h && i < v.n; i++) {
        qent *e = by_uid(q, h, v.e[i].uid);
        if (e && refused)
            e->refused++;
        else if (e)
            e->admitted++;
    }
    pthread_mutex_unlock(&q->lock);
    return STG_OK;
}

int stg_quota_host_get(stg_quota *q, const char *hostname, int64_t now_us,
                       stg_quota_host_info *info)
{
    if (!q || !hostname || !info)
        return STG_EINVAL;
    memset(info, 0, sizeof *info);
    pthread_mutex_lock(&q->lock);
    host *h = host_find(q, hostname);
    if (h) {
        for (int64_t i = 0; i < q->max_keys; i++)
            info->quotas += h->q[i].uid != 0;
        for (int64_t i = 0; i < q->max_routes; i++)
            info->routes += h->r[i].name != NULL;
        if (h->pause_until != NEVER && h->pause_until > now_us)
            info->paused_for_us = h->pause_until - now_us;
    }
    pthread_mutex_unlock(&q->lock);
    return STG_OK;
}

int stg_quota_route_ids(stg_quota *q, const char *hostname, const char *route_name,
                        uint64_t *ids, size_t max, size_t *n)
{
    if (!q || !hostname || !n || (!ids && max > 0))
        return STG_EINVAL;
    *n = 0;
    pthread_mutex_lock(&q->lock);
    host *h = host_find(q, hostname);
    const route *r = h && route_name ? route_find(q, h, route_name) : NULL;
    for (int64_t i = 0; h && i < q->max_keys && *n < max; i++) {
        if (charged(r, &h->q[i]))
            ids[(*n)++] = h->q[i].uid;
    }
    pthread_mutex_unlock(&q->lock);
    return STG_OK;
}

int stg_quota_each(stg_quota *q, int64_t now_us, stg_quota_each_fn fn, void *data)
{
    if (!q || !fn)
        return STG_EINVAL;
    pthread_mutex_lock(&q->lock);
    for (int64_t i = 0; i < q->max_hosts; i++) {
        const host *h = &q->h[i];
        if (!h->name)
            continue;
        for (int64_t k = 0; k < q->max_keys; k++) {
            const qent *e = &h->q[k];
            if (!e->uid)
                continue;
            stg_quota_view v;
            memset(&v, 0, sizeof v);
            memcpy(v.key, e->key, sizeof v.key);
            memcpy(v.unit, e->unit, sizeof v.unit);
            v.window_us = e->window_us;
            v.limit = e->limit;
            v.told_remaining = e->told_rem;
            v.estimate = e->est;
            v.inflight = e->inflight;
            v.reset_in_us = e->reset_at == NEVER ? -1 : e->reset_at > now_us ? e->reset_at - now_us : 0;
            v.admitted = e->admitted;
            v.refused = e->refused;
            fn(h->name, &v, data);
        }
    }
    pthread_mutex_unlock(&q->lock);
    return STG_OK;
}
