/*
 * The retry decision: one pure function that says what follows an attempt.
 *
 * Given the policy, the state so far, what the attempt produced (an HTTP
 * status or a transport error class), the request's method and idempotency
 * key, the server's hints and now, stg_decide() answers: success; retry after
 * a wait; or give up, with a reason. It reads no clock and keeps no state;
 * its only side effect is one draw from the caller's RNG when it retries.
 *
 * Rules, in order:
 *  1. cancelled                                   -> give up (CANCELLED)
 *  2. status 1xx/2xx/3xx                          -> success
 *  3. the server's verdict (x-should-retry, Stripe-Should-Retry) "false"
 *                                                 -> give up (SERVER_VERDICT)
 *     a body that says no retry can cure the refusal (STG_HINTS_HARD_STOP,
 *     from stg_hints_body: OpenAI insufficient_quota and its billing codes,
 *     a Google per-day quota, Anthropic billing_error or a spent monthly
 *     limit), even with a verdict "true": the body is the more specific
 *                                                 -> give up (HARD_STOP)
 *     status not in retry_statuses, unless the verdict is "true" or it is
 *     a 403 that is a rate limit (below)          -> give up (STATUS_NOT_RETRYABLE)
 *     transport error not in retry_errors         -> give up (ERROR_NOT_RETRYABLE)
 *     A wait the body gives (Google's RetryInfo, stg_hints_body) is a
 *     server hint like Retry-After in rules 6 and 7.
 *     A 403 is a rate limit, retried as a 429 is (when 429 is in
 *     retry_statuses), when it carries a Retry-After or a quota with 0
 *     remaining (GitHub's primary limit), or STG_HINTS_SECONDARY; a plain
 *     403 stays an authorization error.
 *  4. method not safe to repeat                   -> give up (METHOD_NOT_IDEMPOTENT)
 *     Safe: a method in retry_methods; a method in key_methods when the
 *     request carries an idempotency key; any method when the error proves
 *     the request never left (connection refused, connect timeout, DNS);
 *     any method when the answer is a refusal (unless no_retry_refusals):
 *     a 429, a 403 that is a rate limit (rule 3), a 529 (Anthropic's
 *     overloaded_error), or another 5xx whose body names such a refusal
 *     (STG_HINTS_THROTTLE: overloaded_error, rate_limit_error,
 *     RESOURCE_EXHAUSTED, read by stg_hints_body; a stream's first event
 *     that is one is the 529 or 429 it stands for, STG_STREAM_SSE_HOLD).
 *     Rule 3 comes first, so a hard stop (insufficient_quota, billing)
 *     gives the answer back. A refusal says the server did no work: RFC 6585
 *     section 4 defines 429 as "too many requests" refused by a rate
 *     limit; Anthropic's errors page: 529 "the API is temporarily
 *     overloaded", the request refused, safe to retry; and the official
 *     OpenAI and Anthropic SDKs retry 408, 409, 429 and 5xx for every
 *     method (openai-node and anthropic-sdk-typescript src/client.ts
 *     shouldRetry, x-should-retry first), while the programs behind
 *     `stagger proxy` send their POSTs without an Idempotency-Key. A
 *     verdict "false" (x-should-retry) still gives the answer back (rule
 *     3). Every other status (500, 502, 504, 408) and a transport
 *     failure after the request left (reset, timeout) may have been
 *     processed and keep the method rule; so does a 503, even with a
 *     Retry-After: no vendor documents it as "not processed" (a gateway's
 *     503 may come after the origin did the work).
 *  5. attempts >= max_attempts                    -> give up (ATTEMPTS_EXHAUSTED)
 *  6. the wait: computed backoff, combined with the server's hint according
 *     to retry_after_mode (see below). A GitHub secondary limit (a 429
 *     from GitHub, or a 403/429 flagged STG_HINTS_SECONDARY, with no
 *     Retry-After and no exhausted quota) is a hint of at least
 *     STG_SECONDARY_LIMIT_WAIT_US, as GitHub's documentation asks.
 *     The backoff's base depends on what
 *     kind of failure it is (stg_fault_classify, the AWS SDKs' 2026 split):
 *     a THROTTLE answer (429, 529, a 503 with a hint) backs off from
 *     throttle_base_us (1 s): the server works and says "slower", so a
 *     quick retry only collects another refusal. A TRANSIENT fault (500,
 *     502, 504, 408, a reset, a timeout) backs off from backoff.base_us
 *     (50 ms): most are one bad connection or one bad instance, and the
 *     next try usually succeeds at once.
 *  7. a server hint above max_server_wait, or above what the deadline
 *     leaves, or too large to represent (STG_WAIT_MAX_US: a wait that never
 *     ends, whatever the limits), in HONOR/EXACT mode
 *                                                 -> give up (SERVER_WAIT_TOO_LONG)
 *     at once, so the caller gets the response back without sleeping.
 *  8. deadline reached, or the shortest possible wait ends past it
 *                                                 -> give up (DEADLINE)
 *     otherwise a wait whose range crosses the deadline is drawn uniformly
 *     from the part of the range that ends by it: no wait is ever scheduled
 *     past the deadline, and none piles up on it either.
 *
 * Retry-After modes (the hint is stg_hints_server_wait(): Retry-After or its
 * millisecond forms, else the longest reset of a quota with 0 remaining):
 *   HONOR  (default) wait = hint + uniform(0, spread), spread =
 *          max(hint * honor_spread, backoff.base): never earlier than asked,
 *          and clients told the same value do not return in the same
 *          millisecond.
 *   EXACT  wait = hint (what most clients do; for comparison).
 *   CAP    wait = min(backoff, hint): retries EARLIER than asked; provided
 *          only to reproduce that mistake in `stagger sim quota`.
 *   IGNORE wait = backoff.
 * Without a hint every mode uses the computed backoff.
 */
#ifndef STAGGER_POLICY_H
#define STAGGER_POLICY_H

#include "common.h"
#include "rng.h"
#include "backoff.h"
#include "hints.h"

#ifdef __cplusplus
extern "C" {
#endif

/* HTTP methods. Bit (1u << m) of a method set. */
typedef enum stg_method {
    STG_METHOD_UNKNOWN = 0,
    STG_METHOD_GET = 1,
    STG_METHOD_HEAD = 2,
    STG_METHOD_POST = 3,
    STG_METHOD_PUT = 4,
    STG_METHOD_DELETE = 5,
    STG_METHOD_OPTIONS = 6,
    STG_METHOD_TRACE = 7,
    STG_METHOD_PATCH = 8,
    STG_METHOD_CONNECT = 9
} stg_method;

#define STG_METHOD_BIT(m) (1u << (unsigned)(m))
/* Default methods that may be retried: the idempotent ones of RFC 9110. */
#define STG_METHODS_IDEMPOTENT                                                         \
    (STG_METHOD_BIT(STG_METHOD_GET) | STG_METHOD_BIT(STG_METHOD_HEAD) |                \
     STG_METHOD_BIT(STG_METHOD_OPTIONS) | STG_METHOD_BIT(STG_METHOD_TRACE) |           \
     STG_METHOD_BIT(STG_METHOD_PUT) | STG_METHOD_BIT(STG_METHOD_DELETE))
/* Default methods retried only with an idempotency key. */
#define STG_METHODS_WITH_KEY (STG_METHOD_BIT(STG_METHOD_POST) | STG_METHOD_BIT(STG_METHOD_PATCH))

/* Case-sensitive, as RFC 9110 says method names are. UNKNOWN otherwise. */
STG_API stg_method stg_method_parse(const char *name);
STG_API const char *stg_method_name(stg_method m); /* "GET", ..., "UNKNOWN" */

/* Transport outcomes, as classified by the transport (libstagger-curl maps
 * CURLcode to these). Bit (1u << e) of an error set. */
typedef enum stg_net_error {
    STG_NET_NONE = 0, /* an HTTP response arrived */
    STG_NET_CONNECT_REFUSED = 1,
    STG_NET_RESET = 2,           /* connection reset or closed without a response */
    STG_NET_TIMEOUT = 3,         /* the attempt's total/read timeout */
    STG_NET_CONNECT_TIMEOUT = 4,
    STG_NET_DNS = 5,
    STG_NET_TLS = 6,
    STG_NET_OTHER = 7
} stg_net_error;

#define STG_NET_BIT(e) (1u << (unsigned)(e))
#define STG_NET_DEFAULT_RETRY                                                       \
    (STG_NET_BIT(STG_NET_CONNECT_REFUSED) | STG_NET_BIT(STG_NET_RESET) |           \
     STG_NET_BIT(STG_NET_TIMEOUT) | STG_NET_BIT(STG_NET_CONNECT_TIMEOUT))

/* "connect_refused", "reset", "timeout", "connect_timeout", "dns", "tls",
 * "other", "none". */
STG_API const char *stg_net_error_name(stg_net_error e);

/* A set of HTTP status codes 0..639. */
typedef struct stg_status_set {
    uint64_t bits[10];
} stg_status_set;

STG_API void stg_status_set_clear(stg_status_set *s);
STG_API void stg_status_set_add(stg_status_set *s, int status);
STG_API bool stg_status_set_has(const stg_status_set *s, int status);
STG_API bool stg_status_set_empty(const stg_status_set *s);
/* Parse "408,429,500-504" or "429,5xx" into *s (cleared first). Returns
 * STG_OK or STG_EPARSE (then *s is cleared). */
STG_API int stg_status_set_parse(stg_status_set *s, const char *text);
/* The default: 408, 429, 500, 502, 503, 504, 529 (Anthropic's
 * "overloaded"). */
STG_API void stg_status_set_default(stg_status_set *s);

typedef enum stg_retry_after_mode {
    STG_RETRY_AFTER_HONOR = 0, /* default */
    STG_RETRY_AFTER_EXACT = 1,
    STG_RETRY_AFTER_CAP = 2,
    STG_RETRY_AFTER_IGNORE = 3
} stg_retry_after_mode;

/* "honor", "exact", "cap", "ignore"; parse also accepts "honour". */
STG_API const char *stg_retry_after_mode_name(stg_retry_after_mode m);
STG_API int stg_retry_after_mode_parse(const char *text, stg_retry_after_mode *m);

/* What kind of failure an answer is. THROTTLE: the server is up and says
 * "too fast" (429; 529; 503 with a Retry-After, a spent RateLimit or a
 * body's wait; a 5xx whose body names an overload, STG_HINTS_THROTTLE).
 * TRANSIENT: anything else that failed (other 5xx, 408, transport
 * errors). The retry decision backs off from a different base for each,
 * and the retry budget charges them differently (budget.h). */
typedef enum stg_fault_class {
    STG_FAULT_TRANSIENT = 0,
    STG_FAULT_THROTTLE = 1
} stg_fault_class;

/* The class of an answer: status (0 with a transport error), error, and
 * the parsed hints (may be NULL: then a 503 is TRANSIENT). Pure. */
STG_API stg_fault_class stg_fault_classify(int status, stg_net_error error, const stg_hints *h);
/* "transient", "throttle". */
STG_API const char *stg_fault_class_name(stg_fault_class c);

#define STG_POLICY_DEFAULT_TRANSIENT_BASE_US STG_MS(50)
#define STG_POLICY_DEFAULT_THROTTLE_BASE_US STG_SEC(1)
#define STG_POLICY_DEFAULT_MAX_ATTEMPTS 6
#define STG_POLICY_DEFAULT_DEADLINE_US STG_SEC(60)
#define STG_POLICY_DEFAULT_MAX_SERVER_WAIT_US STG_SEC(30)
#define STG_POLICY_DEFAULT_HONOR_SPREAD 0.2
#define STG_POLICY_DEFAULT_CONNECT_TIMEOUT_US STG_SEC(5)
/* GitHub: "Otherwise, wait for at least one minute before retrying." */
#define STG_SECONDARY_LIMIT_WAIT_US STG_SEC(60)
/* The per-attempt times (the transport applies them; see stg_policy).
 * First byte: long enough for an LLM completion that is not streamed
 * (its head comes with the whole answer, often after a minute or more);
 * idle: a stream that sends nothing for this long has stalled (nginx's
 * proxy_read_timeout is 60 s; LLM streams send an event or a ping every
 * few seconds). No total time: a body that still flows is never cut,
 * except by the deadline. */
#define STG_POLICY_DEFAULT_FIRST_BYTE_TIMEOUT_US STG_SEC(300)
#define STG_POLICY_DEFAULT_IDLE_TIMEOUT_US STG_SEC(120)
/* Before issue #31 the default whole-attempt time; now a value the
 * "bounded" preset keeps. */
#define STG_POLICY_DEFAULT_ATTEMPT_TIMEOUT_US STG_SEC(10)

/* A retry policy. Zero fields mean the documented default, so
 * `stg_policy p = {0};` is the project default (preset "default"). */
typedef struct stg_policy {
    stg_backoff_config backoff;  /* the shape of every backoff, and the base
                                    of TRANSIENT faults; zero: full jitter,
                                    base 50 ms, x2, cap 30 s */
    int max_attempts;            /* attempts in all, first included; 0: 6 */
    int64_t deadline_us;         /* overall, from rs.start_us (the first
                                    attempt; the engine: first admission);
                                    0: 60 s; < 0: none */
    int64_t max_server_wait_us;  /* 0: 30 s; < 0: no limit */
    stg_retry_after_mode retry_after_mode; /* 0: HONOR */
    double honor_spread;         /* fraction of the hint; 0: 0.2 */
    stg_status_set retry_statuses; /* empty: stg_status_set_default() */
    unsigned retry_errors;       /* STG_NET_BIT set; 0: STG_NET_DEFAULT_RETRY */
    unsigned retry_methods;      /* STG_METHOD_BIT set; 0: STG_METHODS_IDEMPOTENT */
    unsigned key_methods;        /* 0: STG_METHODS_WITH_KEY */
    /* Per-attempt limits, applied by the transport (the core only carries
     * them), each also cut to what the deadline leaves: connect 0: 5 s;
     * whole attempt 0: none (before issue #31: 10 s), so that a long
     * answer still flowing is not cut; first_byte_timeout_us and
     * idle_timeout_us (below) end an attempt that stalls. */
    int64_t connect_timeout_us;
    int64_t attempt_timeout_us;
    /* Base of the backoff after a THROTTLE answer without a usable hint
     * (same kind, multiplier and cap as backoff; a base above the cap is
     * the cap); 0: backoff.base_us when that is set (one base for both, as
     * before the split), else 1 s. */
    int64_t throttle_base_us;
    /* false (the default): a refusal (a 429, a 403 that is a rate limit,
     * a 529) is retried whatever the method (rule 4); true: a refusal is
     * retried only for a method that may repeat, like any other status. */
    bool no_retry_refusals;
    /* Per-attempt, applied by the transport: the longest wait for the
     * answer's first byte once the request is sent (its last byte out);
     * 0: 5 min. The longest time without a byte either way once the answer
     * has begun (a transfer paused because the reader is slow is not
     * idle); 0: 2 min. A timeout is STG_NET_TIMEOUT: retried for methods
     * that may repeat (the request had left). */
    int64_t first_byte_timeout_us;
    int64_t idle_timeout_us;
    uint64_t stg__reserved[4]; /* room to grow (docs/ABI.md); leave zero */
} stg_policy;

/* Copy *in to *out with defaults filled in and check it. Returns STG_OK or
 * STG_EINVAL (bad backoff, max_attempts < 0, honor_spread < 0 or NaN, mode
 * out of range, negative timeouts or throttle base). attempt_timeout_us
 * stays 0 (none) when it was 0. stg_decide() resolves on its own; call
 * this to validate once and to read the effective values. */
STG_API int stg_policy_resolve(const stg_policy *in, stg_policy *out);

/* Fill *p from a named preset ("default", "full-jitter", "bounded",
 * "batch", "decorrelated"; see stg_policy_preset_describe). Returns STG_OK or
 * STG_ENOTFOUND (then *p is untouched). */
STG_API int stg_policy_preset(stg_policy *p, const char *name);
/* NULL-terminated array of preset names. Static. */
STG_API const char *const *stg_policy_preset_names(void);
/* One-line description of a preset, or NULL. Static. */
STG_API const char *stg_policy_preset_describe(const char *name);

/* What the decision saw of an attempt. */
typedef struct stg_outcome {
    int status;              /* HTTP status, or 0 when error != NONE */
    stg_net_error error;     /* STG_NET_NONE when a response arrived */
    stg_method method;
    bool has_idempotency_key;
    bool cancelled;          /* the caller cancelled the request */
    const stg_hints *hints;  /* parsed response hints; may be NULL */
    uint64_t stg__reserved[4]; /* room to grow (docs/ABI.md); leave zero */
} stg_outcome;

/* State carried between attempts; zero it before the first attempt and set
 * start_us to the instant the first attempt began. */
typedef struct stg_retry_state {
    int attempts;         /* attempts made, including the one just finished */
    int64_t start_us;     /* monotonic start of the first attempt */
    int64_t prev_wait_us; /* the previous wait (0 before the first retry) */
    uint64_t stg__reserved[4]; /* room to grow (docs/ABI.md); leave zero */
} stg_retry_state;

typedef enum stg_action {
    STG_ACTION_SUCCESS = 0,
    STG_ACTION_RETRY = 1,
    STG_ACTION_GIVE_UP = 2
} stg_action;

/* X(name, number, snake_name, message). Numbers never reused. */
#define STG_REASON_MAP(X)                                                                  \
    X(SUCCESS, 0, "success", "the attempt succeeded")                                     \
    X(RETRY_STATUS, 1, "retry_status", "retryable status")                                \
    X(RETRY_ERROR, 2, "retry_error", "retryable transport error")                         \
    X(STATUS_NOT_RETRYABLE, 10, "status_not_retryable", "status not retryable")           \
    X(ERROR_NOT_RETRYABLE, 11, "error_not_retryable", "transport error not retryable")    \
    X(METHOD_NOT_IDEMPOTENT, 12, "method_not_idempotent",                                  \
      "method not idempotent and no idempotency key")                                     \
    X(ATTEMPTS_EXHAUSTED, 13, "attempts_exhausted", "attempts exhausted")                 \
    X(DEADLINE, 14, "deadline", "the overall deadline would pass")                        \
    X(SERVER_WAIT_TOO_LONG, 15, "server_wait_too_long",                                    \
      "server asks to wait longer than allowed")                                          \
    X(CANCELLED, 16, "cancelled", "cancelled")                                            \
    X(BUDGET_EXHAUSTED, 17, "budget_exhausted", "retry budget exhausted")                 \
    X(BREAKER_OPEN, 18, "breaker_open", "circuit breaker open")                           \
    X(LIMITER_UNAVAILABLE, 19, "limiter_unavailable", "shared rate limiter unavailable")   \
    X(SERVER_VERDICT, 20, "server_verdict", "the server said not to retry")                 \
    X(HARD_STOP, 21, "hard_stop",                                                           \
      "the answer's body says no retry can cure it (billing, a per-day quota)")

typedef enum stg_reason {
#define STG__REASON_ENUM(name, num, snake, msg) STG_REASON_##name = num,
    STG_REASON_MAP(STG__REASON_ENUM)
#undef STG__REASON_ENUM
} stg_reason;

STG_API const char *stg_reason_name(stg_reason r);    /* "retry_status", ... */
STG_API const char *stg_reason_message(stg_reason r); /* "retryable status", ... */
STG_API const char *stg_action_name(stg_action a);    /* "success", "retry", "give_up" */

typedef struct stg_decision {
    stg_action action;
    stg_reason reason;
    int64_t wait_us;        /* RETRY: the wait drawn; otherwise 0 */
    int64_t wait_min_us;    /* RETRY: the range the wait was drawn from, after */
    int64_t wait_max_us;    /*        the deadline clamp; otherwise 0 */
    int64_t server_wait_us; /* the hint considered, or STG_UNKNOWN */
    bool used_hint;         /* the wait came from (or was bounded by) the hint */
    uint64_t stg__reserved[4]; /* room to grow (docs/ABI.md); leave zero */
} stg_decision;

/* Decide what follows an attempt. All pointers except out->... inputs are
 * borrowed; rng is drawn from only on RETRY (at most once). Returns STG_OK,
 * or STG_EINVAL for NULL arguments, an invalid policy or state->attempts < 1
 * (then *out is a GIVE_UP with reason ATTEMPTS_EXHAUSTED). Thread-safe as
 * long as rng is not shared. */
/* Is this response the server shedding load (throttle-class), rather than
 * failing? 429; 529 (overloaded); 503 with a Retry-After or a body's wait;
 * a 5xx whose body names an overload (STG_HINTS_THROTTLE); a 403 that is a
 * rate limit (see rule 3). h may be NULL. For the adaptive rate and shared
 * limiters. Thread-safe. */
STG_API bool stg_status_throttled(int status, const stg_hints *h);
/* Is this response a refusal, the server saying it did none of the work
 * (rule 4): 429; 529; a 403 that is a rate limit; a 5xx whose body names a
 * refusal for load or rate (STG_HINTS_THROTTLE). Not a 503 otherwise, even
 * with a Retry-After. h may be NULL. Thread-safe. */
STG_API bool stg_status_refused(int status, const stg_hints *h);

STG_API int stg_decide(const stg_policy *policy, const stg_retry_state *state,
                       const stg_outcome *outcome, int64_t now_us, stg_rng *rng,
                       stg_decision *out);

/* Record a RETRY decision in the state: prev_wait_us = d->wait_us. (The
 * caller increments attempts when the next attempt starts.) */
STG_API void stg_retry_state_note(stg_retry_state *state, const stg_decision *d);

#ifdef __cplusplus
}
#endif
#endif
