/*
 * libstagger-redis, the work queue: a batch's jobs in a Redis Stream that
 * workers on any number of machines join and leave (consumer group,
 * XREADGROUP, XAUTOCLAIM), each job ending in exactly one terminal state
 * recorded in Redis together with its acknowledgement.
 *
 * Why Streams: a consumer group already is the protocol a queue of this
 * kind needs (deliveries, a pending list per consumer, idle times, delivery
 * counts, claiming another consumer's entries), so nothing here invents
 * one; each state change is one Lua script, so it is atomic in Redis.
 *
 * Keys (prefix "stagger:q:" by default, NAME the URL's key; the braces make
 * every key of a queue one Redis Cluster hash slot):
 *   {NAME}:meta     hash: fp (the job set's fingerprint), total
 *   {NAME}:jobs     stream, one entry per job of the default lane (normal
 *                   class, no tenant; all of a queue an older stagger
 *                   loaded); group "workers"
 *   {NAME}:lane:N   stream, one entry per job of lane N >= 1 (another class
 *                   or a tenant); group "workers", made with the lane
 *   {NAME}:lanes    hash, the pick's state: "n" (the last lane's number),
 *                   "l:C|TENANT" -> N (C the class index, 0 interactive),
 *                   per lane "N:c" class index, "N:w" weight, "N:f" finish
 *                   tag, "N:u" unread entries; per class "v:C" virtual
 *                   time and "s:C" picks it waited through (the floor)
 *   {NAME}:ids      set of the job ids loaded (the idempotent load)
 *   {NAME}:res:ID   hash: a job's outcome (state, status, attempts, ...)
 *   {NAME}:counts   hash: jobs per terminal state, attempts, 429s, 503s
 *   {NAME}:lat      list: each ended job's latency in ms (the report)
 *   {NAME}:workers  hash: "WORKER|STATE" -> jobs, "WORKER|seen" -> ms
 *   {NAME}:sent     hash: ID -> WORKER, non-idempotent jobs whose request
 *                   may have left (the sent-mark)
 *   {NAME}:nb:HOST  string: "not before" (Redis time, ms) for HOST
 *   {NAME}:classes  hash: "CLASS|TENANT|WHAT" -> count, per priority class
 *                   and tenant ("" for none): WHAT is total (loaded), a
 *                   terminal state, admitted, wait_ms or wait_max_ms
 *   {NAME}:cadded   set: the tokens of stg_queue_classes_add calls made
 *
 * Invariants:
 *  - A job is in one lane once: loading adds an entry, to the lane of its
 *    class and tenant (Stagger-Priority, Stagger-Tenant), only when its id
 *    joins {NAME}:ids (SADD in the same script, which also counts it in
 *    "N:u"), and a load whose fingerprint differs from the queue's is
 *    refused, nothing written.
 *  - The order of a claim (docs/queue.md "Order"): first entries taken
 *    over (below), lanes of the higher classes first; then new entries one
 *    pick at a time, as the pure model src/core/qpick.c picks: the highest
 *    class with unread entries, but a lower one that waited through
 *    floor_every - 1 picks (src/core/fairq.h's STG__FQ_FLOOR_EVERY, 20)
 *    gets the next; within a class, lanes by start-time fair queueing on
 *    their weights (the latest weight a loaded job of the tenant gave;
 *    1 when none did). "N:u" is the lane's unread entries: when XREADGROUP
 *    finds none it is set to 0 (a queue without lane state, as an older
 *    stagger loaded it, starts so), and entries no count knows of (an
 *    older stagger's load) are read from {NAME}:jobs when no lane has more.
 *  - An entry handed out is named "ID" in the default lane and "ID@N" in
 *    lane N (stg_queue_job.entry): finish and renew act on that lane.
 *  - A job's terminal state (done, failed, deferred, review) is written by
 *    the script that XACKs its entry, only when that XACK acknowledges it:
 *    the first worker to finish a job records it; a later one (the job was
 *    reclaimed from it as idle) records nothing. So every job ends in
 *    exactly one state, whatever workers die or race.
 *  - An unacknowledged entry stays in its consumer's pending list; after
 *    claim_idle_us without news (a claim or a renewal, stg_queue_renew)
 *    another worker takes it (XAUTOCLAIM). A renewal resets the idle time
 *    only of entries still in the renewing consumer's own list. A
 *    taken entry that was delivered more than max_deliveries times, or a
 *    job that is not replay-safe and carries a sent-mark (it may have been
 *    sent by the worker that lost it), ends in review inside the claim
 *    script, never resent.
 *  - The sent-mark of a job that is not replay-safe is written (one round
 *    trip, stg_queue_mark_sent) before its first attempt may leave.
 *  - The clock of every decision is Redis's (TIME in the scripts): the
 *    machines' clocks do not matter.
 *  - The queue stores what it is given verbatim: a caller must not load a
 *    job whose URL or headers carry a secret (`stagger batch` refuses
 *    them; give secrets to each worker with -H instead).
 *
 * Redis unreachable: every call fails with STG_EUNAVAIL (nothing is
 * retried inside a call); the next call tries to reconnect (at most every
 * reconnect_interval_us). A failure after the command was sent may or may
 * not have run it; every script is written so that running it again is
 * harmless (SADD-guarded load, XACK-guarded finish).
 *
 * Thread-safety: a stg_queue is one connection and NOT thread-safe; use it
 * from one thread, or give each thread its own. Not across fork().
 */
#ifndef STAGGER_REDIS_QUEUE_H
#define STAGGER_REDIS_QUEUE_H

#include "../common.h"
#include "../priority.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct stg_queue stg_queue;
struct stg_redis_tls; /* <stagger/redis.h> */

#define STG_QUEUE_DEFAULT_CLAIM_IDLE_US STG_SEC(360)
#define STG_QUEUE_DEFAULT_MAX_DELIVERIES 5
#define STG_QUEUE_DEFAULT_PREFIX "stagger:q:"

typedef struct stg_queue_config {
    const char *url;            /* redis://[[USER]:PW@]HOST[:PORT]/[DB/]NAME;
                                   required, NAME too (stg_redis_url_parse) */
    const char *worker;         /* this consumer's name (at most 200 bytes);
                                   NULL: "HOST:PID" */
    int64_t connect_timeout_us; /* 0: 1 s */
    int64_t command_timeout_us; /* one round trip; 0: 5 s */
    int64_t reconnect_interval_us; /* fewest us between attempts; 0: 250 ms */
    int64_t claim_idle_us;      /* an entry idle this long (not claimed or
                                   renewed, stg_queue_renew) is taken from
                                   its consumer; 0: 6 min (a library default
                                   for holders that do not renew; stagger
                                   batch renews and uses 20 s) */
    int max_deliveries;         /* a job delivered more often goes to review;
                                   0: 5 */
    const char *prefix;         /* NULL: "stagger:q:" */
    /* Added with rediss://: TLS verification (NULL: the system store);
     * borrowed for the queue's life, see stg_redis_tls in redis.h. */
    union { const struct stg_redis_tls *tls; uint64_t stg__tls_word; };
    /* Added with Sentinel: as stg_redis_limiter_config.sentinels and
     * .sentinel_master (NULL: none; copied). */
    union { const char *sentinels; uint64_t stg__sentinels_word; };
    union { const char *sentinel_master; uint64_t stg__sentinel_master_word; };
    uint64_t stg__reserved[5];  /* room to grow (docs/ABI.md); leave zero */
} stg_queue_config;

/* Job states, numbered as stagger batch numbers them. */
typedef enum stg_queue_state {
    STG_QUEUE_PENDING = 0,  /* not delivered yet (or given back) */
    STG_QUEUE_INFLIGHT = 1, /* delivered, not acknowledged */
    STG_QUEUE_DONE = 2,
    STG_QUEUE_FAILED = 3,
    STG_QUEUE_DEFERRED = 4,
    STG_QUEUE_REVIEW = 5
} stg_queue_state;
#define STG_QUEUE_NSTATES 6

/* "pending", "inflight", "done", "failed", "deferred", "review". */
STG_API const char *stg_queue_state_name(stg_queue_state s);

/* Connect (AUTH, SELECT, SCRIPT LOAD) and create the consumer group if it
 * is missing. cfg is copied. NULL on failure with *err (may be NULL):
 * STG_EINVAL (bad config or URL, no NAME), STG_EUNAVAIL (unreachable or
 * refused), STG_ENOMEM; why (may be NULL) gets one line without the
 * password. Free with stg_queue_free (accepts NULL). */
STG_API stg_queue *stg_queue_new(const stg_queue_config *cfg, int *err, char *why,
                                 size_t why_len);
STG_API void stg_queue_free(stg_queue *q);

/* The last error, one line, never the password; "" if none. Owned by q. */
STG_API const char *stg_queue_errmsg(const stg_queue *q);
/* This consumer's name. Owned by q. */
STG_API const char *stg_queue_worker(const stg_queue *q);

/* ---- loading ---------------------------------------------------------- */

/* One job as loaded; borrowed for the call. */
typedef struct stg_queue_spec {
    int64_t id;                 /* 1..total, the job's place in the input */
    const char *key;            /* its name (JSONL "id", the key, the line) */
    const char *method, *url;   /* no secrets (see above) */
    const char *const *headers; /* "Name: value", n_headers (no secrets) */
    size_t n_headers;
    const void *body;           /* NULL: none */
    size_t body_len;
    const char *idempotency_key; /* NULL: none */
    bool replay_safe;           /* idempotent method or an idempotency key */
    /* The input line it came from (1-based; 0: unknown), shown by export. */
    union { int64_t line; uint64_t stg__line_word; };
    uint64_t stg__reserved[3];  /* room to grow (docs/ABI.md); leave zero */
} stg_queue_spec;

/* Add jobs[0..n) to the queue whose job set has this fingerprint (64 hex
 * digits) and size; call it in chunks, in any order, from any number of
 * loaders at once. The first load of a queue records fingerprint and total;
 * a job already loaded is skipped (*added, may be NULL, counts the new
 * ones). STG_ESTATE: the queue holds another job set (nothing written; the
 * message names both). STG_EUNAVAIL, STG_EINVAL, STG_ENOMEM, STG_EIO. */
STG_API int stg_queue_load(stg_queue *q, const char *fingerprint, int64_t total,
                           const stg_queue_spec *jobs, size_t n, int64_t *added);

/* ---- working ---------------------------------------------------------- */

/* Jobs per state for the whole queue (all workers), and its size. */
typedef struct stg_queue_counts {
    int64_t n[STG_QUEUE_NSTATES];
    int64_t total;              /* 0: nothing loaded yet */
    int64_t attempts, status_429, status_503; /* of the ended jobs */
    uint64_t stg__reserved[4];  /* room to grow (docs/ABI.md); leave zero */
} stg_queue_counts;

/* A delivered job. Owned by the caller; release with stg_queue_job_clear. */
typedef struct stg_queue_job {
    int64_t id;
    char entry[48];             /* the stream entry's id, "@N" after it in
                                   lane N >= 1 (see the keys above) */
    int deliveries;             /* 1: first delivery */
    char *key, *method, *url;
    char **headers;             /* NULL-terminated; NULL: none */
    char *body;                 /* NULL: none */
    size_t body_len;
    char *idempotency_key;      /* NULL: none */
    bool replay_safe;
    uint64_t stg__reserved[4];  /* room to grow (docs/ABI.md); leave zero */
} stg_queue_job;

STG_API void stg_queue_job_clear(stg_queue_job *j);

/* One round trip: take up to max entries idle longer than claim_idle_us
 * from other consumers (XAUTOCLAIM on every lane; those over
 * max_deliveries, and those not replay-safe with a sent-mark, end in review
 * instead: *to_review, may be NULL), then new ones (XREADGROUP) in the
 * order of classes and tenants above, into out[0..*n). *counts (may be
 * NULL) gets the queue's counts after the claim. STG_OK (*n may be 0),
 * STG_EUNAVAIL, STG_ENOMEM, STG_EIO. */
STG_API int stg_queue_claim(stg_queue *q, int max, stg_queue_job *out, int *n, int *to_review,
                            stg_queue_counts *counts);

/* Renew this consumer's claim on the stream entries entries[0..n) (each a
 * stg_queue_job.entry it was given), in one round trip: each one still in
 * this consumer's pending list has its idle time reset to 0, so no other
 * worker takes it for claim_idle_us more, and mine[i] is true; one that is
 * not (another worker took it over after claim_idle_us without a renewal,
 * or it ended) is left alone and mine[i] is false: the job is no longer
 * this worker's, and it must not be sent (again) from here. Also marks the
 * worker as seen. A holder renews at least every claim_idle_us / 2 while
 * it holds jobs (stagger batch: every claim_idle / 4, and again before an
 * attempt whose last confirmation is older than claim_idle / 2), so a
 * short claim_idle_us takes over a dead worker's jobs quickly without
 * robbing a live one. n at most 4000. STG_OK, STG_EINVAL, STG_EUNAVAIL,
 * STG_ENOMEM, STG_EIO. */
STG_API int stg_queue_renew(stg_queue *q, const char *const *entries, size_t n, bool *mine);

/* Before the first attempt of a job that is not replay-safe may leave:
 * record that it may be sent (one round trip). STG_OK, STG_EUNAVAIL. */
STG_API int stg_queue_mark_sent(stg_queue *q, const stg_queue_job *j);

/* How a job ended here. Strings and body are borrowed for the call. */
typedef struct stg_queue_outcome {
    stg_queue_state state;      /* DONE, FAILED, DEFERRED, REVIEW; PENDING
                                   gives the job back (others may take it at
                                   once) */
    int status;                 /* last HTTP status; 0: none */
    int attempts;               /* attempts made in this delivery */
    int status_429, status_503;
    const char *reason, *error; /* NULL: none; redacted */
    const void *body;           /* kept in Redis; NULL: none */
    size_t body_len;
    const char *file;           /* the body's file on the worker; NULL: none */
    int64_t latency_us;         /* claim to end */
    uint64_t stg__reserved[6];  /* room to grow (docs/ABI.md); leave zero */
} stg_queue_outcome;

/* Record o for j and acknowledge its entry, atomically (one script). When
 * another worker had already finished the job (it took the entry from this
 * one), nothing is written and *recorded (may be NULL) is false. PENDING
 * gives the entry back instead (its idle time is set past claim_idle_us).
 * STG_OK, STG_EINVAL, STG_EUNAVAIL, STG_EIO. */
STG_API int stg_queue_finish(stg_queue *q, const stg_queue_job *j, const stg_queue_outcome *o,
                             bool *recorded);

/* The queue's counts now (one round trip). STG_OK, STG_EUNAVAIL. */
STG_API int stg_queue_counts_get(stg_queue *q, stg_queue_counts *c);

/* A server-mandated wait for host (the limiter key): no worker sends to it
 * before Redis time now + wait_us (a later instant already set wins).
 * STG_OK, STG_EINVAL, STG_EUNAVAIL. */
STG_API int stg_queue_hold(stg_queue *q, const char *host, int64_t wait_us);
/* How long host is still held (0: not held). STG_OK, STG_EUNAVAIL. */
STG_API int stg_queue_hold_left(stg_queue *q, const char *host, int64_t *left_us);

/* ---- reading ---------------------------------------------------------- */

typedef struct stg_queue_worker_row {
    char *name;
    int64_t n[STG_QUEUE_NSTATES]; /* jobs it ended, per state */
    int64_t seen_ms;              /* Unix ms of its last claim */
    uint64_t stg__reserved[2];    /* room to grow (docs/ABI.md) */
} stg_queue_worker_row;

typedef struct stg_queue_report {
    stg_queue_counts counts;
    char fingerprint[65];
    int64_t lat_n, lat_p50_ms, lat_p90_ms, lat_p99_ms, lat_max_ms;
    stg_queue_worker_row *workers;
    size_t n_workers;
    uint64_t stg__reserved[8];  /* room to grow (docs/ABI.md); leave zero */
} stg_queue_report;

/* Read the queue's state (a few round trips). Free with
 * stg_queue_report_free. STG_OK, STG_ENOTFOUND (no such queue),
 * STG_EUNAVAIL, STG_ENOMEM. */
STG_API int stg_queue_report_get(stg_queue *q, stg_queue_report *r);
STG_API void stg_queue_report_free(stg_queue_report *r);

/* One priority class and tenant of the queue (docs/priorities.md): its
 * jobs by state (a job's class and tenant are its Stagger-Priority and
 * Stagger-Tenant headers when it was loaded; a job loaded by a stagger
 * without them counts as the default class, no tenant) and what the
 * workers admitted of it, with the waits for admission they added
 * (stg_queue_classes_add). */
typedef struct stg_queue_class_row {
    char cls[16];                      /* a class name; "": none (default) */
    char tenant[STG_TENANT_MAX + 2];   /* "": none */
    bool has_jobs, has_admitted;
    int64_t n[STG_QUEUE_NSTATES];      /* has_jobs: jobs per state */
    int64_t admitted, wait_ms, wait_max_ms; /* has_admitted */
    uint64_t stg__reserved[2];         /* room to grow (docs/ABI.md) */
} stg_queue_class_row;

/* The queue's rows per class and tenant, sorted by class then tenant, into
 * *rows (malloc'd, free() it; NULL when none), *n of them. Pending counts
 * the loaded jobs of a class neither ended nor in flight. A few round
 * trips (one more per job in flight). STG_OK, STG_EUNAVAIL, STG_ENOMEM. */
STG_API int stg_queue_classes_get(stg_queue *q, stg_queue_class_row **rows, size_t *n);

/* A worker's admissions of one class and tenant, for stg_queue_classes_add. */
typedef struct stg_queue_class_add {
    const char *cls;    /* a class name */
    const char *tenant; /* NULL: none */
    int64_t admitted, wait_ms, wait_max_ms;
} stg_queue_class_add;

/* Add a worker's admissions per class and tenant to the queue's counters
 * (HINCRBY: many workers add up; the max wait is the max), once: a call is
 * one script under a token of this worker and call, so a retry of it after
 * a lost reply adds nothing twice. n at most 800. STG_OK, STG_EINVAL,
 * STG_EUNAVAIL, STG_EIO. */
STG_API int stg_queue_classes_add(stg_queue *q, const stg_queue_class_add *v, size_t n);

/* One job of the queue, for export. Borrowed for the callback. */
typedef struct stg_queue_row {
    int64_t id;
    const char *key, *method, *url;
    stg_queue_state state;
    int status, attempts, deliveries;
    const char *reason, *error, *file, *worker; /* NULL: none */
    const char *body;           /* NULL: none */
    size_t body_len;
    int64_t latency_ms, finished_ms;
    /* The input line the job came from (stg_queue_spec.line; 0: unknown,
     * as for jobs loaded by an older stagger). */
    union { int64_t line; uint64_t stg__line_word; };
    uint64_t stg__reserved[3];  /* room to grow (docs/ABI.md); leave zero */
} stg_queue_row;

/* Call fn for every job in load order (the lanes merged by job id: input
 * order for a queue loaded in id order; nonzero from fn stops: returned).
 * state_mask: bit 1 << state, 0: all. STG_OK, STG_EUNAVAIL, STG_ENOMEM. */
STG_API int stg_queue_export(stg_queue *q, unsigned state_mask, bool bodies,
                             int (*fn)(void *data, const stg_queue_row *row), void *data);

/* ---- counters ---------------------------------------------------------- */

typedef struct stg_queue_stats {
    int64_t round_trips;        /* commands and scripts sent */
    int64_t reconnects;
    int64_t failures;           /* calls that failed with STG_EUNAVAIL */
    uint64_t stg__reserved[4];  /* room to grow (docs/ABI.md); leave zero */
} stg_queue_stats;

STG_API void stg_queue_stats_get(const stg_queue *q, stg_queue_stats *s);

#ifdef __cplusplus
}
#endif
#endif
