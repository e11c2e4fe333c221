/*
 * libstagger-redis: one rate limit (and one circuit breaker) shared by every
 * process on every machine, kept in Redis.
 *
 * Why: a token bucket per worker does not bound the total. Fifty workers
 * each at 80% of a 100/s quota offer 4000/s. Here every admission decision
 * for a key is taken inside Redis by one Lua script, so all clients of the
 * key draw from the same bucket.
 *
 * The limiter is the GCRA of bucket.h run server-side: state per key is the
 * theoretical arrival time (TAT) in a Redis hash, and a take of weight n at
 * Redis time now moves it to max(TAT, now) + n * T (T = 1/rate, whole ns,
 * rounded up) and is admitted when that lies no further than burst * T
 * ahead of now. Semantics are those of stg_bucket_try / stg_bucket_acquire:
 * fractional rates, burst, weights, "admitted" or the exact wait, acquire
 * with a timeout that reserves or takes nothing, weight > burst is
 * STG_ETOOBIG.
 *
 * Invariants:
 *  - Over any interval of length t of REDIS time, the weight admitted for
 *    one key is at most burst + rate * t, whatever the number of clients,
 *    provided they all use the same rate and burst for the key (each call
 *    carries its caller's rate and burst; the script does not store them).
 *  - The clock is Redis's own (TIME inside the script): the machines'
 *    clocks, and any skew between them, do not matter. A wait handed back
 *    is measured from the instant the script ran; the reply arrives about
 *    half a round trip later, so a caller who waits exactly *wait_us comes
 *    back slightly late, never early.
 *  - Keys expire once idle: a limiter key when its bucket would be full
 *    again (it is then equivalent to no key), a breaker key after
 *    breaker_idle_ttl_us without a state change (plus the open time).
 *  - Nothing this library logs or hands back contains the password.
 *  - rediss:// connects over TLS (stg_redis_tls); a Redis Cluster's MOVED,
 *    ASK and TRYAGAIN are followed (every script has one key, KEYS[1], so
 *    it runs in that key's slot); READONLY and other error replies count
 *    as Redis unreachable.
 *
 * Keys: "<prefix>rl:<name>" for the limiter (class calls keep their marks
 * and tenants in the same hash) and "<prefix>br:<name>" for the breaker,
 * prefix "stagger:" by default. <name> is the key argument of each call, or
 * the KEY of the URL when that argument is NULL. Each script touches one
 * key, the one it declares in KEYS.
 *
 * When Redis is unreachable (refused, timed out, an error reply other than
 * NOSCRIPT): without a fallback every call fails with STG_EUNAVAIL; with a
 * fallback share S each process uses a local stg_bucket at S * rate (burst
 * max(1, floor(S * burst))) and a local stg_breaker per key. Either way the
 * log callback says so once, the limiter tries to reconnect at most every
 * reconnect_interval_us (1 s) from inside the calls that come, and once
 * Redis answers again it is used again, which is also logged once.
 * The hand-overs keep burst + rate * t for this process's sends: falling
 * back, the local bucket starts from the debt Redis last reported for the
 * key (scaled to the local rate), not full; coming back, the local debt
 * is added to the key's state in Redis at its first shared decision (a
 * Redis restarted empty would otherwise give a whole burst on top). After
 * a reconnection to a Redis that kept its state this counts the debt
 * twice: a pause of at most burst / rate, erring on the side of sending
 * less.
 *
 * Thread-safety: a stg_redis_limiter may be used from any number of
 * threads; one mutex serialises its calls, each of which holds it for one
 * round trip (or one connection attempt, at most connect_timeout_us, while
 * reconnecting). For more throughput from many threads, give each thread
 * its own limiter (one connection each) or use stg_redis_limiter_acquire_many.
 * A limiter must not be used across fork(): create it in the process that
 * uses it. While a call writes to the socket, SIGPIPE is blocked in the
 * calling thread and a SIGPIPE it raised is discarded, so a Redis that went
 * away cannot kill the process.
 */
#ifndef STAGGER_REDIS_H
#define STAGGER_REDIS_H

#include "common.h"
#include "adaptive.h"
#include "breaker.h"
#include "priority.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- URL ------------------------------------------------------------- */

#define STG_REDIS_DEFAULT_PORT 6379
#define STG_REDIS_HOST_MAX 255
#define STG_REDIS_USER_MAX 127
#define STG_REDIS_PASSWORD_MAX 255
#define STG_REDIS_KEY_MAX 255
#define STG_REDIS_DB_MAX 9999

/* A parsed URL. Plain struct, no resources; treat as read-only. */
typedef struct stg_redis_url {
    char host[STG_REDIS_HOST_MAX + 1];     /* name or address, no brackets */
    int port;                              /* 1..65535; 6379 if absent */
    int db;                                /* 0..STG_REDIS_DB_MAX; 0 if absent */
    char user[STG_REDIS_USER_MAX + 1];     /* "" unless USER:PASSWORD@ given */
    char password[STG_REDIS_PASSWORD_MAX + 1]; /* "" when none */
    char key[STG_REDIS_KEY_MAX + 1];       /* "" when none */
    union { bool tls; uint64_t stg__tls_word; }; /* rediss:// */
    uint64_t stg__reserved[1]; /* room to grow (docs/ABI.md); leave zero */
} stg_redis_url;

/* Parse
 *     redis[s]://[[USER]:PASSWORD@]HOST[:PORT][/[DB/]KEY]
 * HOST is a name, an IPv4 address or an IPv6 address in brackets. A path
 * whose first segment is all digits AND is followed by '/' selects that
 * database: redis://h/2/jobs is DB 2, key "jobs"; redis://h/2 is DB 0,
 * key "2". The KEY may contain '/'. USER, PASSWORD and KEY are
 * percent-decoded (%40 for '@', %2F for '/', %3A for ':'); %00 is refused.
 * Userinfo without a ':' is refused (say ":PASSWORD@" for a password alone,
 * as Redis before 6 has no users). rediss:// sets tls: the connection is
 * TLS (OpenSSL), verified as stg_redis_tls says. Query strings and
 * fragments are refused.
 * Returns STG_OK; STG_EINVAL (url or out NULL); STG_EPARSE (malformed);
 * STG_ERANGE (port, DB or a part's length out of range). On error *why (if
 * not NULL) is a static one-line message naming what is wrong (never the
 * password) and *out is unspecified. Pure; thread-safe. */
STG_API int stg_redis_url_parse(const char *url, stg_redis_url *out, const char **why);

/* Write u back as a URL with the password replaced by "***"
 * ("redis://:***@host:6379/2/jobs", "rediss://..." for TLS), for logs. IPv6 hosts get their
 * brackets back; the key is written as is (not re-encoded). Truncates to
 * len - 1 bytes and always terminates when len > 0. Returns the length
 * the full string would have (snprintf-style), or -1 if u or buf is NULL.
 * Thread-safe. */
STG_API int stg_redis_url_format(const stg_redis_url *u, char *buf, size_t len);

/* Parse a fallback spec: "local:SHARE" with SHARE a decimal in (0, 1]
 * ("local:0.25"), or "none" (share 0). Returns STG_OK, STG_EINVAL (NULL
 * argument), STG_EPARSE or STG_ERANGE; on error *why (if not NULL) is a
 * static message and *share is unchanged. Thread-safe. */
STG_API int stg_redis_fallback_parse(const char *spec, double *share, const char **why);

/* ---- TLS (rediss://) -------------------------------------------------- */

/* How a rediss:// connection verifies the server and presents a client
 * certificate: the same choices as stg_tls_config offers for HTTPS. All
 * NULL/false (or no stg_redis_tls at all): the server's certificate must
 * chain to the system's CA store (OpenSSL's default paths, which honour
 * SSL_CERT_FILE and SSL_CERT_DIR) and name the URL's host (or IP address);
 * no client certificate. Ignored for redis:// URLs. Borrowed: the files are
 * read at each connection attempt, so the strings must outlive the handle
 * (the library copies the pointers, not the strings). */
typedef struct stg_redis_tls {
    const char *ca_file;  /* PEM file of CA certificates to trust instead of
                             the system store */
    const char *ca_path;  /* directory of CA certificates, c_rehash'ed */
    const char *cert;     /* client certificate (PEM chain), mutual TLS */
    const char *key;      /* its private key (PEM); NULL: in cert's file */
    /* Do not verify the server's certificate or name: encrypted, but
     * anyone on the path can pose as Redis. For tests only. */
    union { bool insecure; uint64_t stg__insecure_word; };
    uint64_t stg__reserved[3]; /* room to grow (docs/ABI.md); leave zero */
} stg_redis_tls;

/* ---- the limiter ------------------------------------------------------ */

/* What the log callback reports. Each fires once per transition. */
typedef enum stg_redis_event {
    STG_REDIS_EVENT_DOWN = 1,     /* Redis unreachable, no fallback: calls
                                     fail with STG_EUNAVAIL until it is back */
    STG_REDIS_EVENT_FALLBACK = 2, /* Redis unreachable: local bucket at
                                     share * rate from now on */
    STG_REDIS_EVENT_BACK = 3      /* Redis answers again and is used again */
} stg_redis_event;

/* Log callback. msg is one line without a newline, e.g.
 * "redis redis://127.0.0.1:6379/jobs unreachable (Redis at 127.0.0.1:6379
 *  did not answer EVALSHA within 200 ms);
 *  falling back to local bucket at 0.25 x rate (2.5/s, burst 1)".
 * It never contains the password. msg is valid during the call only.
 * Called from the thread whose call saw the transition, after the
 * limiter's mutex is released: it may call stg_redis_* functions. */
typedef void (*stg_redis_log_fn)(void *data, stg_redis_event ev, const char *msg);

/* A monotonic clock in microseconds (for the local fallback and the
 * reconnect pacing only; admission in Redis uses Redis's clock). */
typedef int64_t (*stg_redis_clock_fn)(void *data);

#define STG_REDIS_DEFAULT_CONNECT_TIMEOUT_US STG_MS(200)
#define STG_REDIS_DEFAULT_COMMAND_TIMEOUT_US STG_MS(200)
#define STG_REDIS_DEFAULT_RECONNECT_US STG_SEC(1)
#define STG_REDIS_DEFAULT_BREAKER_TTL_US STG_SEC(3600)
#define STG_REDIS_DEFAULT_PREFIX "stagger:"
/* Largest burst * T, in nanoseconds (2^50 ns, about 13 days). Lower than
 * STG_BUCKET_SPAN_MAX_NS because Lua numbers are doubles: with this bound
 * every value the script computes is an integer below 2^53, hence exact.
 * At 1/s this still allows a burst of more than 10^6. */
#define STG_REDIS_SPAN_MAX_NS (INT64_C(1) << 50)

/* Bound of open_us * max_multiplier, probe_timeout_us and
 * breaker_idle_ttl_us (2^50 us, about 35 years), for the same reason. */
#define STG_REDIS_BREAKER_SPAN_MAX_US (INT64_C(1) << 50)

/* The shared breaker: the consecutive-failure mode of stg_breaker (no
 * ratio mode). Zero fields take stg_breaker's defaults: 20 failures in a
 * row open it for 30 s, each re-open from half-open doubles that up to 8x,
 * 1 half-open probe whose slot lapses after 30 s. */
typedef struct stg_redis_breaker_config {
    int consecutive_failures; /* 0: 20; < 0: never trips */
    int64_t open_us;          /* 0: 30 s */
    int max_multiplier;       /* 0: 8 */
    int half_open_probes;     /* 0: 1 */
    int64_t probe_timeout_us; /* 0: 30 s */
    uint64_t stg__reserved[4]; /* room to grow (docs/ABI.md); leave zero */
} stg_redis_breaker_config;

/* Configuration; zero fields take the defaults given. */
typedef struct stg_redis_limiter_config {
    const char *url;            /* required; see stg_redis_url_parse */
    double rate;                /* tokens per second, > 0, fractional ok,
                                   at most STG_BUCKET_RATE_MAX */
    int64_t burst;              /* >= 1; 0: max(1, ceil(rate)) */
    int64_t connect_timeout_us; /* 0: 200 ms */
    int64_t command_timeout_us; /* one round trip; 0: 200 ms */
    double fallback_share;      /* 0: no fallback (STG_EUNAVAIL while Redis
                                   is unreachable); in (0, 1]: local bucket
                                   at share * rate, burst scaled too */
    int64_t reconnect_interval_us; /* fewest us between connection attempts
                                      while unreachable; 0: 1 s */
    const char *prefix;         /* of every Redis key; NULL: "stagger:" */
    stg_redis_breaker_config breaker;
    int64_t breaker_idle_ttl_us; /* breaker keys expire this long after their
                                    last change (plus the open time); 0: 1 h */
    stg_redis_log_fn log;       /* may be NULL */
    void *log_data;
    stg_redis_clock_fn clock;   /* NULL: CLOCK_MONOTONIC */
    void *clock_data;
    /* Added with the shared adaptive rate: */
    bool adaptive;              /* learn the rate instead of being told it
                                   (stg_redis_adaptive_*): rate and burst
                                   must be 0, and try, acquire,
                                   acquire_many and set_rate answer
                                   STG_EINVAL */
    stg_adaptive_config adaptive_config; /* as stg_adaptive; zero fields
                                   take its defaults; hold_spread and
                                   hold_spread_min_us are not used */
    /* Added with token leases (see "Token leases" below): */
    int64_t lease_us;           /* 0: one round trip per acquire (no
                                   leases); > 0: how long a lease should
                                   last at this limiter's own recent
                                   admission rate (40 ms is a good value).
                                   Fixed rate only; ignored when adaptive */
    /* Added with rediss://: how a TLS connection verifies (NULL: the
     * system store, no client certificate). Borrowed, see stg_redis_tls. */
    union { const stg_redis_tls *tls; uint64_t stg__tls_word; };
    /* Added with Sentinel: "HOST[:PORT][,HOST[:PORT]...]" of Redis
     * Sentinels (port 26379 by default), asked at every (re)connection where
     * the primary named sentinel_master is now; the URL's host and port are
     * then not used (its password, DB and key are). A node that is not a
     * primary (ROLE) counts as unreachable. NULL: no Sentinel. Both copied. */
    union { const char *sentinels; uint64_t stg__sentinels_word; };
    union { const char *sentinel_master; uint64_t stg__sentinel_master_word; };
    uint64_t stg__reserved[12]; /* room to grow (docs/ABI.md); leave zero */
} stg_redis_limiter_config;

/* Counters, for status lines and tests. */
typedef struct stg_redis_stats {
    int64_t redis_decisions;  /* limiter and breaker calls answered by Redis */
    int64_t local_decisions;  /* answered by the local fallback */
    int64_t unavailable;      /* calls that failed with STG_EUNAVAIL */
    int64_t script_loads;     /* SCRIPT LOADs after the first (NOSCRIPT) */
    int64_t disconnects;      /* connections dropped after an error */
    int64_t reconnects;       /* connections re-established */
    /* Added with token leases: */
    int64_t leases;           /* leases of more than one token taken */
    int64_t leased;           /* tokens in them */
    int64_t lease_admissions; /* acquires answered from a lease, no round trip */
    int64_t lease_expired;    /* leased tokens that lapsed unspent */
    int64_t lease_returned;   /* unspent leased tokens given back to Redis */
    uint64_t stg__reserved[3]; /* room to grow (docs/ABI.md); leave zero */
} stg_redis_stats;

typedef struct stg_redis_limiter stg_redis_limiter;

/* Create a limiter and connect (AUTH, SELECT, SCRIPT LOAD). cfg and
 * everything it points to are borrowed and copied: they need not outlive
 * the call; log_data and clock_data are kept as given (not owned).
 * Returns the limiter, or NULL with *err (if not NULL) set to:
 *   STG_EINVAL   bad config (URL unparsable: also STG_EPARSE/STG_ERANGE
 *                from stg_redis_url_parse; rate, burst, share, timeouts out
 *                of range; burst * T above STG_REDIS_SPAN_MAX_NS);
 *   STG_EUNAVAIL Redis unreachable or refusing (connect, AUTH, SELECT or
 *                SCRIPT LOAD failed) and no fallback configured;
 *   STG_ENOMEM.
 * why (may be NULL) receives a one-line reason on failure, truncated to
 * why_len, never containing the password. With a fallback an unreachable
 * Redis is not an error: the limiter starts on the local bucket (the log
 * callback fires FALLBACK before this returns). On success *err = STG_OK.
 * Free with stg_redis_limiter_free. Thread-safe (creates a new object). */
STG_API stg_redis_limiter *stg_redis_limiter_new(const stg_redis_limiter_config *cfg, int *err,
                                                 char *why, size_t why_len);

/* Close the connection and free everything. Accepts NULL. No call may be in
 * progress on l. */
STG_API void stg_redis_limiter_free(stg_redis_limiter *l);

/* Take weight tokens of key now if they are available (key NULL: the URL's
 * key). Same contract as stg_bucket_try:
 * STG_OK: admitted; *wait_us = 0.
 * STG_EAGAIN: not admitted, nothing taken; *wait_us is the wait until this
 *   take would be admitted, rounded up to the microsecond.
 * STG_ETOOBIG: weight > burst (checked locally, no round trip).
 * STG_EINVAL: l NULL, weight < 1, key NULL and the URL has none, or key
 *   longer than STG_REDIS_KEY_MAX.
 * STG_EUNAVAIL: Redis unreachable and no fallback.
 * STG_ENOMEM; STG_EIO: a reply that is not the script's (cannot happen
 *   unless something else answers on that port).
 * wait_us may be NULL; it is left unchanged on every error.
 * In fallback the local bucket answers (its burst is scaled, so a weight
 * above the local burst gets STG_ETOOBIG there). Thread-safe. */
STG_API int stg_redis_limiter_try(stg_redis_limiter *l, const char *key, int64_t weight,
                                  int64_t *wait_us);

/* Reserve weight tokens of key if they will be available within
 * timeout_us. Same contract as stg_bucket_acquire:
 * STG_OK: reserved; *wait_us (may be 0) is how long to wait before sending.
 *   The tokens are spent even if the caller then gives up.
 * STG_ETIMEDOUT: not within timeout_us, nothing taken; *wait_us is the wait
 *   that would have been needed.
 * STG_ETOOBIG / STG_EINVAL / STG_EUNAVAIL as for try.
 * timeout_us <= 0: only what is available now; large values (INT64_MAX)
 * are clamped to STG_REDIS_SPAN_MAX_NS. When a command times out after it
 * was sent, the script may have run: the tokens may be spent although the
 * call reports a failure (it errs on the side of admitting less).
 * Thread-safe. */
STG_API int stg_redis_limiter_acquire(stg_redis_limiter *l, const char *key, int64_t weight,
                                      int64_t timeout_us, int64_t *wait_us);

/* n acquires of the same key, weight and timeout in ONE round trip
 * (pipelined EVALSHA; two, the first alone, when a debt from the fallback
 * is carried into Redis after a reconnection). rcs[i] and waits[i] get what the i-th acquire would
 * have returned, in order (waits may be NULL). Returns STG_OK when every
 * decision was taken (each rcs[i] is then STG_OK or STG_ETIMEDOUT), or the
 * error that stopped them all (STG_EINVAL, STG_ETOOBIG, STG_EUNAVAIL; then
 * rcs[] are all set to it and nothing was reserved in Redis unless the
 * connection broke mid-batch). n = 0 is allowed. Thread-safe. */
STG_API int stg_redis_limiter_acquire_many(stg_redis_limiter *l, const char *key, size_t n,
                                           int64_t weight, int64_t timeout_us, int *rcs,
                                           int64_t *waits);

/* Change the rate this limiter uses from its next call on (the burst is
 * kept). A cut stretches the debt ahead of now as stg_bucket_set_rate does
 * (the script remembers the interval last used per key); a rise keeps the
 * TAT. Other processes keep their own rate until they change it. Also
 * changes the fallback buckets (to share * rate). Returns STG_OK or
 * STG_EINVAL (the rate is refused as by new). Thread-safe. */
STG_API int stg_redis_limiter_set_rate(stg_redis_limiter *l, double rate);

/* ---- token leases (cfg.lease_us > 0) -----------------------------------
 *
 * At a high rate one round trip per acquire is most of the cost (and most
 * of Redis's load: N processes at R/s make N * R script calls). With
 * lease_us set, a fixed-rate limiter takes k tokens of a key in one script
 * call and hands them out locally, k sized from its own recent admission
 * rate so that a lease lasts about lease_us; at a low rate (fewer than 2
 * tokens per lease_us) k = 1 and every acquire is one round trip, as
 * without leases.
 *
 * Why the bound burst + rate * t still holds at the server: a lease is a
 * take of weight k (the leased tokens count as spent in Redis when they
 * are leased), and its tokens may only be used inside a window that the
 * script hands back with them: from when all k conform (TAT + k * T -
 * burst * T) to when the first of them would have been due (the TAT before
 * the lease). Any send inside that window is a send the GCRA would have
 * admitted at that instant, so unspent tokens can neither pile up nor be
 * spent late; they lapse at the window's end. The script places a lease
 * at least as far ahead as it should last (the bucket's slots in between
 * are skipped, erring on the side of sending less), and k is capped so
 * that the window is long enough to spend it: k / own_rate + k * T <=
 * burst * T. So a lease can only be useful when burst / rate is longer
 * than lease_us; otherwise k is 1.
 * A lease is given back (its unspent tokens returned to the key, one round
 * trip) by stg_redis_limiter_free, when no other process has taken tokens
 * of the key since; the tokens of a process that dies lapse with their
 * window, at most burst / rate after they were leased.
 * Only acquire and try of weight 1 use leases; acquire_many and weights
 * above 1 take from Redis as without them. A lease whose reply comes back
 * after its window closed (a round trip far longer than the last one) is
 * not used and is asked for again; after three such the acquire answers
 * STG_ETIMEDOUT (STG_EAGAIN for try) with the tokens spent, the side of
 * sending less, as for a command that timed out. The counters of
 * stg_redis_stats (leases, leased, lease_admissions, lease_expired,
 * lease_returned) show what leases did. */

/* ---- classes and tenants (issue #32; docs/priorities.md) ---------------
 *
 * Several processes sharing a key often serve different users: a website's
 * calls, a nightly batch, the jobs of several customers. With
 * stg_redis_limiter_acquire_class each call says its class (interactive,
 * normal, batch) and tenant (with a weight), and the script decides on the
 * key's one hash (the plain GCRA's, "<prefix>rl:<name>": plain and class
 * callers share one TAT, so the bound burst + rate * t holds for any mix):
 *  - a higher class is admitted first: a batch (and a normal request while
 *    interactive ones are asking) is granted only tokens available now, and
 *    leaves one token per higher class that asked within the last hold
 *    (hold: twice lease_us or 8 intervals, whichever is longer, within
 *    20 ms..1 s). So an interactive request waits at most one interval
 *    behind a saturating batch (plus the round trip);
 *  - the floor: each class below interactive still gets a floor share of
 *    the rate while it asks, 5% unless stg_redis_limiter_set_class_floor
 *    says otherwise (one token per 1 / (floor * rate) may be reserved
 *    ahead like an interactive one);
 *  - tenants of one class share what the class gets by weight among those
 *    that asked within the hold: beyond its share a tenant gets only what
 *    is free now with one more token left over; a share nobody asks for
 *    flows to the others when its hold ends; a tenant that comes back has
 *    its share from its first call on.
 * The rules are those of a pure model (src/core/prio_gcra.h) that the
 * project's tests compare with the script call by call. The script keeps
 * at most 64 tenants per key (a tenant beyond that is admitted by class
 * only). With leases (cfg.lease_us) each class and tenant of a process has
 * a lease of its own; a batch's lease only holds tokens available now, and
 * under saturation shrinks to one token (one round trip per request). In
 * fallback the local bucket answers, by class no more.
 * A shared adaptive rate (cfg.adaptive) is ordered the same way, on its own
 * hash ("<prefix>ad:<name>"), once a throttle or a hold has turned its
 * pacing on: the same rules and numbers at the interval of the rate learned
 * at that instant, with a hold of 8 intervals within 20 ms..1 s (no
 * leases); before that nothing is paced and every call is admitted, as
 * stg_redis_adaptive_acquire (stg_redis_adaptive_acquire_class). */

/* As stg_redis_limiter_acquire with weight 1, for a request of class cls
 * (not NULL; cls->tenant NULL or "" for none; cls->weight 0 means 1).
 * STG_OK: reserved, *wait_us (may be 0) before sending. STG_ETIMEDOUT:
 * not now (a batch is never given a token ahead, whatever timeout_us) or
 * not within timeout_us, nothing reserved: *wait_us is how long until
 * asking again may succeed, if nothing else changes. STG_EINVAL: l NULL,
 * cls invalid (priority out of range, bad tenant name, weight < 0 or >
 * 1e6), bad key. STG_EUNAVAIL, STG_ENOMEM, STG_EIO as for acquire. cls and
 * its tenant are borrowed for the call. wait_us may be NULL. With an
 * adaptive limiter this is stg_redis_adaptive_acquire_class without the
 * ticket (whose responses then cannot be reported: use that one).
 * Thread-safe. */
STG_API int stg_redis_limiter_acquire_class(stg_redis_limiter *l, const char *key,
                                            const stg_class *cls, int64_t timeout_us,
                                            int64_t *wait_us);

/* Set the floor of this limiter's class calls: the share of the rate (0 <
 * floor <= 1, kept in thousandths, at least 0.001) each class below
 * interactive gets at least while it asks. Every process sharing a key
 * should set the same (each call carries its own). STG_OK or STG_EINVAL.
 * Thread-safe. */
STG_API int stg_redis_limiter_set_class_floor(stg_redis_limiter *l, double floor);

/* ---- the shared breaker ----------------------------------------------- */

/* May a request to key go now? (key NULL: the URL's key.)
 * STG_OK: go; in HALF_OPEN this claims a probe slot, freed by the outcome
 *   (stg_redis_breaker_record). *retry_in_us = 0.
 * STG_EBREAKER: open (or half-open with its probe slots taken);
 *   *retry_in_us is the time until it is worth asking again (Redis time).
 * STG_EINVAL, STG_EUNAVAIL as for the limiter; in fallback a local
 * stg_breaker per key answers. retry_in_us may be NULL. All processes
 * sharing the Redis see the same breaker at once. Thread-safe. */
STG_API int stg_redis_breaker_allow(stg_redis_limiter *l, const char *key, int64_t *retry_in_us);

/* Record the outcome of a request to key, classified with
 * stg_breaker_classify (FAILURE counts towards the trip, SUCCESS resets the
 * run or closes a half-open breaker once half_open_probes succeeded,
 * NEUTRAL only frees a probe slot). Outcomes while OPEN are ignored, as in
 * stg_breaker. *state (may be NULL) gets the state after the call.
 * Returns STG_OK, STG_EINVAL, STG_EUNAVAIL. A success on a closed breaker
 * with no failures pending writes nothing. Thread-safe. */
STG_API int stg_redis_breaker_record(stg_redis_limiter *l, const char *key,
                                     stg_breaker_verdict verdict, stg_breaker_state *state);

/* The breaker's state for key now, the time until it half-opens (OPEN; 0
 * otherwise) and how many times it has tripped (re-opens included) since
 * its key was created. Any out pointer may be NULL. Returns STG_OK,
 * STG_EINVAL, STG_EUNAVAIL. Thread-safe. */
STG_API int stg_redis_breaker_state(stg_redis_limiter *l, const char *key,
                                    stg_breaker_state *state, int64_t *retry_in_us,
                                    int64_t *trips);

/* ---- the shared adaptive rate (cfg.adaptive) ---------------------------
 *
 * The model of stagger/adaptive.h (AWS's adaptive mode with the recovery
 * rule and slow start), run inside Redis by one Lua script on Redis's
 * clock, so every process of every machine paces at the one rate the key
 * has learned, and a 429 seen by any of them cuts it for all. The state of
 * a key is a hash "<prefix>ad:<name>" (expires after 10 min idle, which
 * forgets the learned rate). What differs from the in-process limiter:
 *  - the measured rate counts admissions (all processes' sends, as Redis
 *    sees them) instead of responses, and the curve is evaluated at each
 *    acquire: responses that are not throttles need no round trip;
 *  - the recovery rule is exact: each admission gets a ticket (the key's
 *    admission count), and a throttle cuts only when its ticket is newer
 *    than the last cut (or recovery_us has passed since it);
 *  - a hold (the server said the quota is spent until a reset) applies to
 *    every process.
 * In fallback (Redis unreachable, fallback_share > 0) each process runs a
 * local stg_adaptive per key, capped at share * the rate last learned from
 * Redis for that key (no cap when none was). */

/* Reserve one send of key (NULL: the URL's key) within timeout_us. As
 * stg_redis_limiter_acquire with weight 1: STG_OK with *wait_us (0 while
 * the key has seen no throttle and no hold), or STG_ETIMEDOUT with the
 * wait that would have been needed, nothing reserved. *ticket (may be
 * NULL) gets the admission's number, for stg_redis_adaptive_response.
 * STG_EINVAL (not an adaptive limiter, bad key), STG_EUNAVAIL, STG_ENOMEM,
 * STG_EIO as for the limiter. Thread-safe. */
STG_API int stg_redis_adaptive_acquire(stg_redis_limiter *l, const char *key, int64_t timeout_us,
                                       int64_t *wait_us, int64_t *ticket);

/* As stg_redis_adaptive_acquire, for a request of class cls (as
 * stg_redis_limiter_acquire_class): while the key paces, decided by class
 * and tenant (see "classes and tenants" above; a refusal's *wait_us is how
 * long until asking again may succeed), else admitted as
 * stg_redis_adaptive_acquire. Plain and class callers of a key share its
 * pacing. In fallback the local adaptive rate answers, by class no more.
 * STG_EINVAL also for a limiter that is not adaptive or an invalid cls.
 * Thread-safe. */
STG_API int stg_redis_adaptive_acquire_class(stg_redis_limiter *l, const char *key,
                                             const stg_class *cls, int64_t timeout_us,
                                             int64_t *wait_us, int64_t *ticket);

/* Report the answer to a send admitted with ticket. throttled: the server
 * said "too fast" (a 429): the key's rate is cut (recovery rule above).
 * hold_us > 0: no process may send to key for that long (the server said
 * its quota is spent until a reset, or, a 503 with Retry-After, when it is
 * back: report that one with throttled false, as libstagger-curl
 * does). A hold never cuts: like stg_adaptive_on_hold it pauses the
 * learned curve and the measurement for its length, so sending resumes at
 * the rate found before. Only a throttle or a hold costs a round trip;
 * other answers only feed the local fallback. Returns STG_OK, STG_EINVAL,
 * STG_EUNAVAIL. Thread-safe. */
STG_API int stg_redis_adaptive_response(stg_redis_limiter *l, const char *key, int64_t ticket,
                                        bool throttled, int64_t hold_us);

/* The key's shared state now: whether it paces (a throttle or hold was
 * seen), the fill rate it paces at (req/s), and admissions so far. Any out
 * pointer may be NULL. STG_OK, STG_EINVAL, STG_EUNAVAIL (also in
 * fallback: this reads Redis only). Thread-safe. */
STG_API int stg_redis_adaptive_state(stg_redis_limiter *l, const char *key, bool *enabled,
                                     double *rate, int64_t *admissions);

/* ---- status ----------------------------------------------------------- */

/* true while Redis is considered unreachable (calls answered locally or
 * failing with STG_EUNAVAIL). Thread-safe. */
STG_API bool stg_redis_limiter_degraded(stg_redis_limiter *l);

/* Copy the counters. Thread-safe. */
STG_API void stg_redis_limiter_stats(stg_redis_limiter *l, stg_redis_stats *out);

#ifdef __cplusplus
}
#endif
#endif
