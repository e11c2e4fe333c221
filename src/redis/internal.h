/*
 * Shared internals of libstagger-redis (not installed).
 *
 * Layout: url.c parses URLs and fallback specs; rconn.c is the connection
 * (TCP or TLS, hiredis's reader and formatter); conn.c owns the handle, its
 * connection, script loading and the reconnect/fallback state machine; gcra.c is the limiter script and its API; breaker.c the shared
 * breaker script and its API; fallback.c the process-local buckets and
 * breakers used while Redis is unreachable; lease.c the token leases
 * handed out locally (lease_size.c: their pure sizing rule and meter);
 * quota_share.c the shared quota ledger's replica side (quota_lua.c its
 * script, quota_local.c its pure part: the estimate, the fallback rule).
 *
 * Locking: every field below mu is guarded by mu. Public calls take mu,
 * collect at most one log note, release mu, then emit the note, so the log
 * callback never runs under the lock.
 */
#ifndef STG_REDIS_INTERNAL_H
#define STG_REDIS_INTERNAL_H

#include <pthread.h>

#include <hiredis/hiredis.h>

#include <stagger/adaptive.h>
#include <stagger/bucket.h>
#include <stagger/breaker.h>
#include <stagger/redis.h>

#include "redis/lease.h"
#include "redis/rconn.h"

/* The scripts, by index into stg_redis_limiter.sha. */
enum {
    STG__SCRIPT_GCRA = 0,
    STG__SCRIPT_BREAKER = 1,
    STG__SCRIPT_ADAPTIVE = 2,
    STG__SCRIPT_QUOTA = 3,
    STG__SCRIPT_COUNT = 4
};

/* Source of each script (gcra.c, breaker.c, adaptive.c). */
extern const char stg__redis_gcra_lua[];
extern const char stg__redis_breaker_lua[];
extern const char stg__redis_adaptive_lua[];
extern const char stg__redis_quota_lua[]; /* quota_lua.c: the shared quota ledger */

/* One process-local stand-in per key name, made on first use (in fallback,
 * or, for a fixed rate with a fallback share, at the first shared decision:
 * the local bucket then mirrors the key's debt in Redis).
 *
 * The fixed-rate local bucket is a GCRA of its own rather than an
 * stg_bucket because the hand-overs read and set its TAT: going down it
 * starts from the debt Redis last reported, coming back its debt is carried
 * into Redis (fallback.c). */
typedef struct stg__local {
    struct stg__local *next;
    int64_t origin_us;       /* clock() at creation; tat_ns counts from it */
    int64_t tat_ns;          /* local bucket: full again at this instant */
    int64_t interval_ns;     /* ceil(1e9 / (share * rate)) */
    bool carry;              /* reconnected since Redis last decided for
                                this key: carry the local debt there first */
    stg_breaker breaker;
    int64_t trips;           /* times the local breaker opened */
    /* Adaptive mode: the rate Redis last said the key paces at (0: none
     * yet), and the local limiter, made at the first fallback decision
     * with share * that rate as its ceiling. */
    double learned_rate;
    bool has_adaptive;
    stg_adaptive adaptive;
    char name[]; /* NUL-terminated */
} stg__local;

/* Longest reason text ("Redis at HOST:PORT did not answer ... within N ms"). */
#define STG__REASON_MAX 512

/* A log line to emit once the lock is released. ev 0: nothing. */
typedef struct stg__note {
    stg_redis_event ev;
    char msg[1280];
} stg__note;

/* Another node of a Redis Cluster, learnt from a MOVED or ASK (conn.c). */
#define STG__NODES_MAX 16
typedef struct stg__node {
    char host[STG_REDIS_HOST_MAX + 1];
    int port;
    stg__rconn *c; /* NULL: not connected (made on next use) */
} stg__node;

struct stg_redis_limiter {
    /* Immutable after new. */
    stg_redis_url url;
    char url_shown[704];          /* redacted URL for messages */
    char where[STG_REDIS_HOST_MAX + 10]; /* "HOST:PORT" ("[v6]:PORT"), for messages */
    char prefix[64];
    int64_t connect_timeout_us;
    int64_t command_timeout_us;
    int64_t reconnect_interval_us;
    int64_t breaker_ttl_us;
    double share;                 /* 0: no fallback */
    stg_redis_breaker_config bcfg; /* resolved */
    stg_redis_log_fn log;
    void *log_data;
    stg_redis_clock_fn clock;
    void *clock_data;
    bool adaptive;                /* a learned rate (adaptive.c) */
    stg_adaptive_config acfg;     /* resolved by stg_adaptive_init */
    stg_redis_tls tls;            /* rediss:// verification (strings borrowed) */
    char *sentinels, *sentinel_master; /* owned; NULL: no Sentinel */

    pthread_mutex_t mu;
    /* Guarded by mu. */
    double rate;
    int64_t burst;
    int64_t interval_ns;          /* ceil(1e9 / rate) */
    int64_t local_burst;          /* max(1, floor(share * burst)) */
    stg__rconn *ctx;              /* NULL while disconnected */
    /* Redis Cluster (cluster.h): the nodes other than the URL's, and which
     * one serves each slot (0: the URL's node; i + 1: nodes[i]), as the
     * last MOVED said. slot_node is NULL until the first MOVED. */
    stg__node nodes[STG__NODES_MAX];
    int n_nodes;
    unsigned char *slot_node;
    char sha[STG__SCRIPT_COUNT][41];
    bool down;                    /* considered unreachable */
    bool attempted;               /* a connection was ever attempted */
    int64_t last_attempt_us;      /* clock() of the last connection attempt */
    stg__local *locals;
    stg_redis_stats stats;
    /* Token leases (lease.c): lease_us immutable after new, the rest
     * guarded by mu. */
    int64_t lease_us;             /* 0: no leases */
    int64_t rtt_us;               /* the last script call's round trip */
    struct stg__lease *leases;
    /* Classes (prio.c), guarded by mu; zero (from new's calloc): defaults. */
    int class_floor_pm;           /* 0: STG__PRIO_FLOOR_PM_DEFAULT */
};

/* ---- url.c ---- */
int stg__redis_interval_ns(double rate, int64_t *interval_ns);

/* ---- conn.c ---- */
int64_t stg__redis_now(stg_redis_limiter *l);

/* The Redis key "<prefix><kind><name>" for name (NULL: the URL's key) into
 * buf (at least STG__KEYBUF bytes). STG_OK or STG_EINVAL. */
#define STG__KEYBUF (64 + 4 + STG_REDIS_KEY_MAX + 1)
int stg__redis_key(const stg_redis_limiter *l, const char *kind, const char *name, char *buf);

/* Under mu: make sure there is a connection, attempting one if none and the
 * reconnect interval has passed. true when connected. May set a note
 * (FALLBACK/DOWN on the first failure, BACK on recovery). */
bool stg__redis_ready(stg_redis_limiter *l, stg__note *note);

/* Under mu, connected: run script `which` n times in one round trip with
 * KEYS[1] = key and argv (argc values), reloading it on NOSCRIPT. On success
 * returns STG_OK and replies[0..n-1] (each an array reply; caller frees
 * with freeReplyObject). On failure the connection is dropped (a note is
 * set), every replies[i] is NULL and STG_EUNAVAIL is returned. */
int stg__redis_eval(stg_redis_limiter *l, int which, const char *key, int argc,
                    const char *const *argv, size_t n, redisReply **replies, stg__note *note);

/* As stg__redis_eval, but when the connection had been closed by the
 * server and a new one was made at once, the commands are not run on it:
 * STG_EAGAIN, so that the caller builds them anew for a fresh connection
 * (the limiter carries local debts into it, see fallback.c). */
int stg__redis_eval_fresh(stg_redis_limiter *l, int which, const char *key, int argc,
                          const char *const *argv, size_t n, redisReply **replies,
                          stg__note *note);

/* Emit a note (not under mu). */
void stg__redis_emit(stg_redis_limiter *l, const stg__note *note);

/* Integer element i of an array reply, or false if it is not one. */
bool stg__reply_int(const redisReply *r, size_t i, long long *out);

/* ---- gcra.c ---- */
/* The most ARGV the limiter script takes (see gcra.c, prio_lua.h). */
#define STG__GCRA_ARGC_MAX 11
/* timeout_us as the script's timeout in ns: <= 0 -> 0, clamped to the span
 * (also any other span the scripts take in ns: the adaptive hold). */
int64_t stg__gcra_timeout_ns(int64_t timeout_us);
/* Under mu: answer n takes of weight from the local bucket of name. */
int stg__gcra_local_takes(stg_redis_limiter *l, const char *name, size_t n, int64_t weight,
                          int64_t timeout_us, bool is_try, int *rcs, int64_t *waits);
/* Under mu, connected: n calls of the limiter script on rkey (the key of
 * name) in one round trip, with args[0..argc) = T, burst, weight, timeout,
 * lead and the rest of ARGV from ARGV[7] on (the carry, ARGV[5], is put in
 * by this call). With a fallback, the first carries the local debt when
 * the key was last decided before a (re)connection (fallback.c), alone in
 * its round trip when n > 1 so that the others do not carry it again; that
 * includes a connection the server closed and that was made again inside
 * this call. rcs[i] and waits[i] get each answer (STG_OK, or STG_ETIMEDOUT
 * / STG_EAGAIN for is_try, with the wait the reply gave); first (may be
 * NULL) sees the first reply before it is freed. On success the local
 * bucket mirrors the last reply's debt. STG_OK, STG_EUNAVAIL (nothing
 * decided), STG_EIO, STG_ENOMEM, STG_EINVAL (argc). */
int stg__gcra_takes(stg_redis_limiter *l, const char *name, const char *rkey,
                    const char *const *args, int argc, size_t n, int64_t weight,
                    int64_t timeout_us, bool is_try, int *rcs, int64_t *waits,
                    redisReply **replies, stg__note *note,
                    void (*first)(const redisReply *, void *), void *first_data);

/* ---- fallback.c ---- */
/* Under mu: the local stand-in for name (created, full, on first use), or
 * NULL when out of memory. */
stg__local *stg__local_get(stg_redis_limiter *l, const char *name);
void stg__local_free_all(stg_redis_limiter *l);
/* Under mu, on every (re)connection: Redis may have lost its state or not
 * seen the fallback's sends, so every key carries its local debt into its
 * next shared decision. */
void stg__local_mark_carry(stg_redis_limiter *l);
/* Under mu: apply a new rate to every local bucket (debts are kept as
 * tokens, as stg_bucket_set_rate does). */
void stg__local_set_rate(stg_redis_limiter *l, double rate);
/* Under mu, fixed rate with a share: a take from loc's local bucket at
 * now_us, with the contract of stg_bucket_try (timeout_us < 0) or
 * stg_bucket_acquire. */
int stg__local_take(stg_redis_limiter *l, stg__local *loc, int64_t weight, int64_t now_us,
                    int64_t timeout_us, int64_t *wait_us);
/* Under mu: loc's local debt as Redis time (ns), to carry into the key's
 * state: the local tokens not yet paid back, each worth T of the shared
 * bucket. 0 when the local bucket is full. */
int64_t stg__local_carry_ns(const stg_redis_limiter *l, const stg__local *loc, int64_t now_us);
/* Under mu: set loc's local bucket to the debt Redis just reported for the
 * key (shared_debt_ns of the shared bucket, i.e. that many tokens at the
 * local interval), so that a fall-back starts where the shared bucket is. */
void stg__local_mirror(const stg_redis_limiter *l, stg__local *loc, int64_t now_us,
                       int64_t shared_debt_ns);
/* Under mu, adaptive mode: loc's local adaptive limiter, made on first use
 * (ceiling share * learned_rate when one is known). NULL when it cannot be
 * made (no mutex). */
stg_adaptive *stg__local_adaptive(stg_redis_limiter *l, stg__local *loc);

/* adaptive.c: an acquire of the shared adaptive rate; spec NULL (plain) or
 * a class part "cls weight_m hold_ns floor_pm" with its tenant, decided by
 * class and tenant while the key paces (prio_lua.h). As
 * stg_redis_adaptive_acquire otherwise; takes mu. */
int stg__redis_adaptive_acquire_spec(stg_redis_limiter *l, const char *key, const char *spec,
                                     const char *tenant, int64_t timeout_us, int64_t *wait_us,
                                     int64_t *ticket);

/* ---- lease.c ---- */
/* One key's lease and admission meter (made on first use, kept for the
 * life of the limiter, like the fallback's stand-ins). Times are the
 * limiter's clock. The unspent tokens may be used from start_us to end_us:
 * the window the script gave, narrowed by the round trip (start measured
 * from after the call, end from before it), so it holds on Redis's clock. */
typedef struct stg__lease {
    struct stg__lease *next;
    stg__lease_meter meter;
    int64_t left;        /* unspent tokens */
    int64_t start_us;    /* usable from */
    int64_t end_us;      /* ... to (lapse after) */
    int64_t interval_ns; /* T when leased; base/tat where it left the key */
    long long base, tat;
    size_t key_len;      /* the key's name is name[0..key_len) (a class's
                            lease: name is "key\x1fclass\x1ftenant"); 0: all */
    char name[];
} stg__lease;

/* Under mu: the lease state of name (created on first use), NULL when
 * out of memory. */
stg__lease *stg__lease_get(stg_redis_limiter *l, const char *name);
/* Under mu: answer one acquire (timeout_us; < 0 for try) from ls at
 * now_us if it holds a token usable then: true with *rc (STG_OK,
 * STG_ETIMEDOUT or STG_EAGAIN) and *wait_us. false: a new lease (or a
 * plain take) is needed; unspent tokens that lapsed are counted. */
bool stg__lease_draw(stg_redis_limiter *l, stg__lease *ls, int64_t now_us, int64_t timeout_us,
                     int *rc, int64_t *wait_us);
/* Under mu: record a lease of k tokens (one of them is the current
 * acquire's) granted by a call made at t0_us and answered at t1_us. */
void stg__lease_grant(stg_redis_limiter *l, stg__lease *ls, int64_t k, int64_t t0_us,
                      int64_t t1_us, int64_t wait_us, int64_t end_us, long long base,
                      long long tat);
/* Give every unspent, unexpired lease back to Redis (one round trip per
 * key) and free the lease states. No other call may be in progress. */
void stg__lease_close(stg_redis_limiter *l);

#endif
