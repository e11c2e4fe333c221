/*
 * libstagger-redis, shared quotas: what the servers announced (every quota,
 * in every unit, per server key) and the costs reserved in flight, held in
 * Redis for every replica (proxies, batch workers) that sends on one API
 * key, so that N of them together stay within what the server allows
 * instead of each pacing the server's count as if it were alone.
 *
 * Why not just a shared GCRA: a server's quota is not a rate stagger is
 * told; it is a count the answers report (x-ratelimit-remaining-tokens and
 * its reset), spent by costs known only roughly before the send (an AI
 * request's tokens) and settled by the answer. Each replica keeps its local
 * stg_quota (route -> key mapping, cold probe, pacing, cost learning); this
 * adds one constraint in front of the send that only Redis can judge: the
 * units every replica reserved, against the server's latest word.
 *
 * The ledger, per limit key (a hash "<prefix>qs:<key>"), per quota (server
 * key, unit, window):
 *   E   the estimate of what the server still holds, from the answers'
 *       remaining counts: the lowest word heard, projected on Redis's
 *       clock (a refilling bucket, OpenAI's and Anthropic's, refills at
 *       (limit - remaining) / reset; a window's count stays until its
 *       reset, after which a spent one is unknown), less what answers
 *       without a count say was spent (usage, or the whole reservation
 *       when no answer came);
 *   held[replica]  the units each replica holds: its lease (granted, not
 *       yet given to a request) plus its requests in flight, reported as
 *       an absolute number at each round trip (no drift), with the
 *       replica's expiry (now + ttl, renewed at every round trip).
 * A replica is granted units only while E - sum(held of live replicas)
 * covers them, all of a request's quotas at once or none. An unknown E
 * (no count yet in this window) grants one request's cost, only while no
 * replica holds any: one probe for all replicas.
 *
 * Why the server's bound holds (admitted <= burst + rate * t as it defines
 * them): every unit sent was first held, so the units sent since the
 * server's last word are at most what that word said it had, plus its own
 * refill: a request that reached the server before that word is counted
 * by it and, while still in flight, held too (counted twice, erring on the
 * side of sending less); one after it is held until its answer's word
 * replaces E (the lower word wins: an older, higher count is not news).
 * An estimate that is too high can only come from a cost estimated too
 * low; the next answer's count corrects it.
 *
 * Leases: a replica takes, in one round trip, up to `demand` requests'
 * worth (at most lease_max) of each quota's units, capped at the share
 * E_avail / (active replicas) so that one busy replica cannot starve
 * others, and spends them locally; Redis is not on each request's path. A
 * replica goes back to Redis when its lease cannot cover a request, when
 * it learned a quota Redis did not know, every refresh_us while it holds
 * anything (renewing its expiry), and when it goes idle (no request of the
 * key left): then its lease is given back at once, so another replica can
 * use the whole quota. A replica killed with reservations out: they lapse
 * with its expiry (ttl); a lease is used locally only until half the ttl
 * after the round trip that granted it was sent, so it never outlives
 * the replica's entry in Redis.
 *
 * Classes (docs/priorities.md, "Across processes"): a request says its
 * class (stg_redis_quota_acquire_class; a plain acquire is normal), and
 * the ledger orders the replicas by it, per quota:
 *  - a request refused records "REP waits with class c" on each quota it
 *    is charged to, until the wait it is told plus 250 ms (a field of the
 *    hash in Redis's time, w<ID><c><REP>); a grant that covers what the
 *    replica asked for clears it, a give-back (the key idle) clears all of
 *    the replica's marks; a killed replica's lapse by themselves;
 *  - while another replica's request of a higher class waits on a quota,
 *    a request of a lower class charged to it is refused (told 50 ms, or
 *    the quota's own wait when longer), but for the floor: each unit
 *    granted to a higher class while the lower one waits is a credit of
 *    the lower class (n<ID><c>), and once the credits reach
 *    (STG__FQ_FLOOR_EVERY - 1) times its cost it is granted (its cost
 *    only) and pays them: one grant in 20 when costs are equal, as in
 *    process. Credits are not banked while the class does not wait;
 *  - while another replica's request of a higher class asked within ttl
 *    / 2 (p<ID><c><REP>: the life of a lease it may be spending), or
 *    waits, a lower class gets no lease beyond its request's cost, so
 *    leases do not hoard what the higher class comes back for; a lease
 *    is used locally only by requests of its grant's class or higher.
 * A replica's own marks never hold it back (its engine orders its own
 * requests). Classes only ever refuse: the units granted are still
 * within E - sum(held), so the server's bound holds as above. Redis is
 * still off the path of the highest class asking (its leases); a lower
 * class pays one round trip per request while a higher one is active.
 * Limits: a request that gives up while refused (its deadline) leaves
 * its mark until its told wait plus the margin (the key's quota being
 * short until then anyway, it delays lower classes by the margin at
 * most); a lease granted before the higher class came is spent (at most
 * lease_max requests' worth, within refresh_us); the fallback ignores
 * classes; tenants are not ordered across replicas by the ledger.
 *
 * Redis unreachable: with the limiter's fallback share S each replica
 * grants itself, per quota, S * E (its last known estimate, projected and
 * lowered by its own answers) less its own units in flight (the fallback
 * rule of redis.h); without a fallback acquire fails with STG_EUNAVAIL.
 * Back online, its in-flight units and what it spent are reported at the
 * first round trip.
 *
 * What is charged: a request's cost in each quota's unit (a unit it does
 * not state costs 1), against the quotas of its limit key that its route
 * spends, as stg_quota maps them: once an answer to the route (METHOD and
 * path) named server keys (GitHub's resources, Discord's buckets), the
 * quotas of those keys and the host's own (server key ""); before that,
 * every quota of the key that any replica has learned (the safe guess).
 * The route -> keys map is each replica's own, learned from its answers.
 *
 * Limits (erring the other way, documented rather than hidden):
 *  - a replica whose requests stay in flight longer than the ttl with no
 *    request, answer or tick (stg_redis_quota_tick) in between lets its
 *    entry lapse: until an answer that arrived later tells the server's
 *    count, those units are not held (at most their cost over, once);
 *  - before any answer from a host each replica sends one request alone
 *    (stg_quota's cold start): N replicas, N first requests;
 *  - a cost estimated below what the server charges is spent until the
 *    next answer's count corrects the estimate.
 *
 * Thread-safety: the object uses its limiter's connection and mutex; it
 * may be used from any thread. Nothing here logs or returns the password.
 * The limiter must outlive it.
 */
#ifndef STAGGER_REDIS_QUOTA_H
#define STAGGER_REDIS_QUOTA_H

#include "../common.h"
#include "../hints.h"
#include "../quota.h"
#include "../redis.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Zeroed fields take the defaults given. */
typedef struct stg_redis_quota_config {
    int64_t ttl_us;      /* a replica's reservations lapse this long after
                            its last round trip; 0: 10 s */
    int64_t refresh_us;  /* a replica holding units goes back to Redis at
                            least this often; 0: ttl / 4 */
    int64_t lease_max;   /* most requests' worth of units per lease; 0: 8 */
    int64_t max_hosts;   /* limit keys kept; 0: 64 (past it, least
                            recently used idle key forgotten) */
    int64_t poll_us;     /* a refused key asks Redis again at most this
                            often; 0: 25 ms */
    const char *replica; /* this replica's name in Redis (1..63 bytes of
                            [A-Za-z0-9_.:-]); NULL: host-pid-random */
    uint64_t stg__reserved[6]; /* room to grow (docs/ABI.md); leave zero */
} stg_redis_quota_config;

typedef struct stg_redis_quota stg_redis_quota;

/* What one admitted request holds; handed back once to settle. Opaque. */
typedef struct stg_redis_quota_ticket stg_redis_quota_ticket;

/* How a request ended, for stg_redis_quota_settle. */
typedef enum stg_redis_quota_end {
    STG_REDIS_QUOTA_ANSWERED = 0, /* an answer came: its quotas, its usage */
    STG_REDIS_QUOTA_NO_ANSWER = 1, /* sent, no answer: it may have counted */
    STG_REDIS_QUOTA_UNSENT = 2     /* it never reached the server */
} stg_redis_quota_end;

/* Counters and what one key holds, for tests and status lines. */
typedef struct stg_redis_quota_info {
    int64_t round_trips;      /* script calls (all keys) */
    int64_t local_admissions; /* admitted from a lease, no round trip */
    int64_t fallback_admissions; /* admitted by the local fallback rule */
    int64_t quotas;           /* quotas known for the key */
    int64_t leased;           /* units of the key's lease not yet used
                                 (all quotas summed) */
    int64_t in_flight;        /* units of requests in flight (summed) */
    int64_t estimate;         /* the lowest estimate of the key's quotas
                                 as last heard from Redis, -1: unknown */
    uint64_t stg__reserved[5];
} stg_redis_quota_info;

/* A shared quota ledger on l's connection (l is borrowed and must outlive
 * it; cfg may be NULL). Returns NULL with *err (if not NULL) STG_EINVAL
 * (l NULL, a bad replica name, a negative field) or STG_ENOMEM. Nothing is
 * sent to Redis until the first acquire. Thread-safe. */
STG_API stg_redis_quota *stg_redis_quota_new(stg_redis_limiter *l,
                                             const stg_redis_quota_config *cfg, int *err);

/* Give every lease back (one round trip per key holding one, best effort)
 * and free. Accepts NULL. Tickets still out must have been settled. */
STG_API void stg_redis_quota_free(stg_redis_quota *q);

/* Reserve a request's costs[0..n_costs) (a unit not listed costs 1)
 * against the shared quotas of key that its route (METHOD /path, NULL:
 * unknown) spends (see "What is charged" above), knowing that `demand` requests of
 * the key (this one included) want quota (sizes the lease; <= 0: 1).
 * STG_OK: admitted; *t (never NULL after it; settle it once) holds what
 *   was reserved. A key no replica has learned a quota of admits with an
 *   empty ticket.
 * STG_EAGAIN: not now; *wait_us (> 0) is when to ask again.
 * STG_ETOOBIG: a cost above a shared quota's limit.
 * STG_EUNAVAIL: Redis unreachable and no fallback share.
 * STG_EINVAL: NULL arguments, a negative amount; STG_ENOMEM.
 * Strings are borrowed. Thread-safe. */
STG_API int stg_redis_quota_acquire(stg_redis_quota *q, const char *key, const char *route,
                                    const stg_quota_cost *costs, size_t n_costs, int64_t demand,
                                    stg_redis_quota_ticket **t, int64_t *wait_us);

/* As stg_redis_quota_acquire (which is this with the class normal), for a
 * request of class cls (its priority; the tenant and weight are not used
 * by the ledger). See "Classes" above: while a replica's request of a
 * higher class waits for a quota this request is charged to, it is
 * refused (STG_EAGAIN) but for the floor's turn, and while a higher class
 * asks, its grant is its own cost, no lease beyond it. STG_EINVAL also
 * for cls NULL or a priority out of STG_PRIORITY_MIN..MAX. Thread-safe. */
STG_API int stg_redis_quota_acquire_class(stg_redis_quota *q, const char *key, const char *route,
                                          const stg_class *cls, const stg_quota_cost *costs,
                                          size_t n_costs, int64_t demand,
                                          stg_redis_quota_ticket **t, int64_t *wait_us);

/* Settle t (NULL: nothing) and free it: how it ended; the answer's quotas
 * qs (ANSWERED; may be NULL), learned for every replica; used[0..n_used)
 * what the answer's body says was used per unit (for quotas qs tells no
 * count of; a unit not in used, with no count, stays spent as reserved).
 * demand: the key's requests still wanting quota after this one; at 0
 * with nothing in flight the key's lease is given back. May go to Redis
 * (a new quota, a refresh, a give-back). Returns STG_OK or STG_EINVAL.
 * Thread-safe. */
STG_API int stg_redis_quota_settle(stg_redis_quota *q, stg_redis_quota_ticket *t,
                                   stg_redis_quota_end how, const stg_quota_set *qs,
                                   const stg_quota_cost *used, size_t n_used, int64_t demand);

/* Renew what this replica holds in Redis for every key with requests in
 * flight, when refresh_us has passed since its last round trip (a report,
 * no grant), so that long requests with nothing else going on do not let
 * its entry lapse; call it about once a second (the engine's tick does).
 * Cheap when nothing is due. Accepts NULL. Thread-safe. */
STG_API void stg_redis_quota_tick(stg_redis_quota *q);

/* What this replica holds for key (all zero, estimate -1, when unknown),
 * and the counters. Returns STG_OK or STG_EINVAL. Thread-safe. */
STG_API int stg_redis_quota_info_get(stg_redis_quota *q, const char *key,
                                     stg_redis_quota_info *out);

#ifdef __cplusplus
}
#endif
#endif
