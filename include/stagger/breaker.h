/*
 * Circuit breaker: stop sending to a host that keeps failing, probe it now
 * and then, and resume when it answers again.
 *
 * One breaker per key (the engine keeps one per host); the breaker itself is
 * just a struct, with time as a parameter.
 *
 * States and transitions:
 *   CLOSED    requests pass. Trips to OPEN when either mode fires:
 *             - consecutive: consecutive_failures failures in a row
 *               (a success resets the run);
 *             - ratio: within the sliding window, at least min_calls
 *               outcomes of which at least failure_ratio failed.
 *   OPEN      requests are rejected with the time left. Lazily becomes
 *             HALF_OPEN at the first call with now_us >= open_until (there
 *             is no timer: whichever call looks first sees the change).
 *   HALF_OPEN admits half_open_probes probes. It CLOSES once that many
 *             successes are recorded (all probes must succeed, so a flaky
 *             host is not declared healthy on one lucky answer); any
 *             failure re-OPENS it at once.
 *
 * Open duration: open_us on a trip from CLOSED; each re-open from HALF_OPEN
 * doubles it, up to max_multiplier * open_us (30 s, 60, 120, 240, 240, ...).
 * Closing resets it to open_us, so a host that recovered and fails again
 * much later is treated as a new incident.
 *
 * What counts (stg_breaker_classify):
 *   FAILURE   a status in failure_statuses (default 500-599), or a transport
 *             error in failure_errors (default: refused, reset, timeout,
 *             connect timeout);
 *   NEUTRAL   429 always (a rate signal for the limiter, not a fault: the
 *             host is alive and asked us to slow down, which the bucket and
 *             Retry-After handle; tripping on it would turn a throttle into
 *             an outage), transport errors outside failure_errors (DNS, TLS:
 *             the host was never reached, so they say nothing of its
 *             health), and a status below 100;
 *   SUCCESS   any other status (2xx, 3xx, and 4xx other than 429: the host
 *             answered sanely).
 * A neutral outcome neither trips, nor resets the consecutive run, nor
 * enters the window, nor closes a half-open breaker; in HALF_OPEN it gives
 * its probe slot back so another probe may go.
 *
 * Probe slots: stg_breaker_allow() in HALF_OPEN claims a slot; the slot is
 * freed by the outcome (success, failure or neutral). A slot whose outcome
 * never comes (a caller that dropped the request without recording) would
 * otherwise keep the breaker half-open forever, so claimed slots lapse
 * probe_timeout_us after the latest claim.
 *
 * Outcomes recorded while OPEN are ignored: they belong to requests admitted
 * before the trip and say nothing new. In HALF_OPEN every outcome counts,
 * whether it came from a probe or from a request admitted earlier.
 *
 * Sliding window: a ring of window_buckets time buckets of
 * window_us / window_buckets each, no allocation. A call is counted until
 * its bucket is window_buckets buckets old, so the window covers between
 * window_us - bucket and window_us of history. The window and the
 * consecutive run restart empty whenever the breaker closes or trips.
 *
 * Thread-safety: between init and destroy, every function that takes a
 * stg_breaker * is thread-safe; a pthread mutex inside the struct
 * serialises them. Chosen over
 * "single-threaded, owned by the loop thread" because a breaker guards a
 * host, not a thread: batch workers and several engines in one process may
 * send to the same host and must see one breaker. The critical sections are
 * a few dozen instructions, far below the cost of the HTTP request they
 * guard, so the lock costs nothing measurable; a lock-free version of a
 * multi-field state machine would cost clarity for no gain. Hence
 * stg_breaker_destroy().
 *
 * Invariants: state is one of the three; in OPEN open_until is set and the
 * current duration is open_us * multiplier with 1 <= multiplier <=
 * max_multiplier; in HALF_OPEN probes in flight + successes <=
 * half_open_probes; on_change fires exactly once per transition, in order.
 */
#ifndef STAGGER_BREAKER_H
#define STAGGER_BREAKER_H

#include <pthread.h>

#include "common.h"
#include "policy.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum stg_breaker_state {
    STG_BREAKER_CLOSED = 0,
    STG_BREAKER_OPEN = 1,
    STG_BREAKER_HALF_OPEN = 2
} stg_breaker_state;

/* How an outcome counts; see the top of this file. */
typedef enum stg_breaker_verdict {
    STG_BREAKER_SUCCESS = 0,
    STG_BREAKER_FAILURE = 1,
    STG_BREAKER_NEUTRAL = 2
} stg_breaker_verdict;

/* Called on every state change, from inside the stg_breaker_* call that
 * caused it, with the breaker's mutex held: calls for one breaker come in
 * transition order. It must not call any stg_breaker_* function on the same
 * breaker (that would deadlock) and should be short: log, count, or queue
 * work for later. now_us is the now_us of the call that saw the change. */
typedef void (*stg_breaker_change_fn)(void *data, stg_breaker_state from, stg_breaker_state to,
                                      int64_t now_us);

/* Defaults applied to zero fields. */
#define STG_BREAKER_DEFAULT_CONSECUTIVE 20
#define STG_BREAKER_DEFAULT_OPEN_US STG_SEC(30)
#define STG_BREAKER_DEFAULT_MAX_MULTIPLIER 8
#define STG_BREAKER_DEFAULT_PROBES 1
#define STG_BREAKER_DEFAULT_PROBE_TIMEOUT_US STG_SEC(30)
#define STG_BREAKER_DEFAULT_FAILURE_RATIO 0.5
#define STG_BREAKER_DEFAULT_WINDOW_US STG_SEC(10)
#define STG_BREAKER_DEFAULT_WINDOW_BUCKETS 10
/* Most buckets a window may have (the ring lives inside the struct). */
#define STG_BREAKER_MAX_BUCKETS 60

/* Configuration. A zeroed struct means: trip after 20 consecutive failures,
 * ratio mode off, open 30 s growing x2 per re-open up to 8x (240 s), one
 * half-open probe whose slot lapses after 30 s, failures = 500-599 and
 * refused/reset/timeout/connect-timeout, no callback. Set min_calls to turn
 * ratio mode on (then 50% over 10 s in 10 buckets unless set). With both
 * modes off (consecutive_failures < 0, min_calls 0) the breaker never
 * trips. */
typedef struct stg_breaker_config {
    int consecutive_failures;  /* failures in a row that trip; 0: 20; < 0: mode off */
    int64_t open_us;           /* base open duration, > 0; 0: 30 s */
    int max_multiplier;        /* cap of the growth, >= 1 (1: no growth); 0: 8 */
    int half_open_probes;      /* probes admitted and successes needed, >= 1; 0: 1 */
    int64_t probe_timeout_us;  /* unanswered probe slots lapse after this; 0: 30 s */
    int min_calls;             /* ratio mode: fewest outcomes in the window; 0: off */
    double failure_ratio;      /* ratio mode: in (0, 1]; 0: 0.5 */
    int64_t window_us;         /* ratio mode: window length; 0: 10 s */
    int window_buckets;        /* ratio mode: 1..STG_BREAKER_MAX_BUCKETS; 0: 10 */
    stg_status_set failure_statuses; /* empty: 500-599 */
    unsigned failure_errors;   /* STG_NET_BIT set; 0: STG_NET_DEFAULT_RETRY */
    stg_breaker_change_fn on_change; /* may be NULL */
    void *data;                /* passed to on_change */
    uint64_t stg__reserved[8]; /* room to grow (docs/ABI.md); leave zero */
} stg_breaker_config;

/* One time bucket of the sliding window. Private. */
typedef struct stg_breaker_bucket {
    int64_t epoch; /* floor(now_us / bucket width) of the counts below */
    uint32_t calls;
    uint32_t failures;
} stg_breaker_bucket;

/* Plain struct owned by the caller; treat the fields as private. Not
 * copyable once initialised (it holds a mutex). */
typedef struct stg_breaker {
    pthread_mutex_t mu;
    stg_breaker_config cfg; /* resolved: no zero fields left */
    int64_t bucket_us;      /* window_us / window_buckets */
    int64_t ratio_ppm;      /* failure_ratio in parts per million */
    stg_breaker_state state;
    int consecutive;           /* CLOSED: current run of failures */
    int multiplier;            /* current open duration / open_us */
    int64_t open_until_us;     /* OPEN: when it becomes HALF_OPEN */
    int probes_out;            /* HALF_OPEN: claimed slots without an outcome */
    int probe_successes;       /* HALF_OPEN: successes so far */
    int64_t probe_lapse_us;    /* HALF_OPEN: when unanswered slots lapse */
    stg_breaker_bucket ring[STG_BREAKER_MAX_BUCKETS];
    uint64_t stg__reserved[8]; /* room to grow (docs/ABI.md); leave zero */
} stg_breaker;

/* Set up a CLOSED breaker. cfg may be NULL (defaults); it is copied, and
 * cfg->data is kept as given (the breaker does not own it).
 * Returns STG_OK; STG_EINVAL (br NULL, a negative duration or count, ratio
 * not in (0, 1], window_buckets above STG_BREAKER_MAX_BUCKETS, window_us
 * shorter than window_buckets microseconds, open_us * max_multiplier
 * overflowing); or STG_ENOMEM when the mutex cannot be created. On error
 * nothing needs destroying. Not thread-safe against other use of br. */
STG_API int stg_breaker_init(stg_breaker *br, const stg_breaker_config *cfg);

/* Release the mutex. br must not be in use; it may be initialised again.
 * Accepts NULL. */
STG_API void stg_breaker_destroy(stg_breaker *br);

/* May a request go now?
 * STG_OK: go. In HALF_OPEN this claims a probe slot, which the request's
 *   outcome (stg_breaker_record or on_*) frees. *retry_in_us = 0.
 * STG_EBREAKER: no. *retry_in_us is the time from now until it is worth
 *   asking again: in OPEN the time until it half-opens (allow at exactly
 *   now_us + *retry_in_us admits a probe); in HALF_OPEN with every slot
 *   taken, the time until unanswered slots lapse.
 * STG_EINVAL: br NULL.
 * retry_in_us may be NULL. May move OPEN to HALF_OPEN (firing on_change).
 * Thread-safe. */
STG_API int stg_breaker_allow(stg_breaker *br, int64_t now_us, int64_t *retry_in_us);

/* Record the outcome of a request that allow() admitted: classify it with
 * stg_breaker_classify() and apply stg_breaker_on_success / on_failure /
 * on_neutral. status is the HTTP status (ignored when err != STG_NET_NONE).
 * Returns the state after the call. Thread-safe. */
STG_API stg_breaker_state stg_breaker_record(stg_breaker *br, int status, stg_net_error err,
                                             int64_t now_us);

/* Lower level: record a success / a failure / a neutral outcome (one that
 * only gives back a half-open probe slot; also the call to make when an
 * admitted request is abandoned without an outcome). Each returns the state
 * after the call and may fire on_change. Thread-safe. */
STG_API stg_breaker_state stg_breaker_on_success(stg_breaker *br, int64_t now_us);
STG_API stg_breaker_state stg_breaker_on_failure(stg_breaker *br, int64_t now_us);
STG_API stg_breaker_state stg_breaker_on_neutral(stg_breaker *br, int64_t now_us);

/* The state at now_us. Not const: an OPEN breaker whose time has come
 * becomes HALF_OPEN here (firing on_change). (Named _at because C gives
 * the type stg_breaker_state and functions one namespace.) Thread-safe. */
STG_API stg_breaker_state stg_breaker_state_at(stg_breaker *br, int64_t now_us);

/* The server said when it will be back (the Retry-After of a 503 during an
 * outage): an OPEN breaker half-opens at now_us + wait_us instead of after
 * its own open time, so the first probe goes out when the server asked,
 * not 30 s later, and not earlier either. The wait is bounded to [1 ms,
 * max_multiplier * open_us]. No effect in other states or for a negative
 * wait. Returns the state after the call. Thread-safe. */
STG_API stg_breaker_state stg_breaker_server_wait(stg_breaker *br, int64_t wait_us,
                                                  int64_t now_us);

/* How an outcome counts under cfg (NULL: defaults); see the top of this
 * file. Pure; thread-safe. */
STG_API stg_breaker_verdict stg_breaker_classify(const stg_breaker_config *cfg, int status,
                                                 stg_net_error err);

/* stg_breaker_classify(cfg, status, err) == STG_BREAKER_FAILURE. */
STG_API bool stg_breaker_is_failure(const stg_breaker_config *cfg, int status,
                                    stg_net_error err);

/* "closed", "open", "half_open", or "unknown". Static string. */
STG_API const char *stg_breaker_state_name(stg_breaker_state s);

#ifdef __cplusplus
}
#endif
#endif
