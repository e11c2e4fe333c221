/*
 * Server hints: what a response says about when to come back.
 *
 * Parses, from one table of dialects (src/core/dialect.c; docs/libstagger.3
 * lists them): Retry-After (RFC 9110 section 10.2.3: delta-seconds, decimals
 * rounded up, or an HTTP-date in the three forms a recipient must accept and
 * the lenient variants servers send) and its millisecond forms, the
 * de-facto X-RateLimit-* fields and the vendors' quota fields (GitHub,
 * Discord, OpenAI, Anthropic, X, Shopify, Kong), server verdicts
 * (x-should-retry, Stripe-Should-Retry), and the IETF RateLimit /
 * RateLimit-Policy fields of drafts -10, -07 and -06. A response may
 * announce several quotas: stg_hints_feed() collects them in a
 * stg_quota_set, keyed as the server keys them.
 *
 * Input is untrusted bytes: every parser takes a pointer and a length (the
 * value need not be NUL-terminated), never reads past them, never allocates,
 * and answers "no hint" for anything malformed. A wait is never negative: a
 * date in the past means 0; a wait too large to represent is the largest
 * one (STG_WAIT_MAX_US), never "no hint". The dates need the wall clock, so
 * it is a parameter (Unix time in microseconds), never read here.
 */
#ifndef STAGGER_HINTS_H
#define STAGGER_HINTS_H

#include "common.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Marks a field of stg_hints as absent. */
#define STG_UNKNOWN (-1)

/* Bits of stg_hints.seen / .malformed / .oversized: which kind of field. */
#define STG_HINT_RETRY_AFTER 0x01u   /* Retry-After and its millisecond forms */
#define STG_HINT_X_RATELIMIT 0x02u   /* X-RateLimit-* and every vendor quota field */
#define STG_HINT_RATELIMIT 0x04u     /* RateLimit, RateLimit-Limit/-Remaining/-Reset */
#define STG_HINT_RATELIMIT_POLICY 0x08u
#define STG_HINT_VERDICT 0x10u       /* x-should-retry, Stripe-Should-Retry */
#define STG_HINT_SCOPE 0x20u         /* a quota's key or scope: x-ratelimit-resource,
                                        X-RateLimit-Bucket, -Global, -Scope */
#define STG_HINT_BODY 0x40u          /* a fact of the answer's body (stg_hints_body):
                                        Google's RetryInfo wait, a vendor's error
                                        type or code, a quota violation */

/* The dialects stagger reads: one family of header fields each (the rows of
 * the table in src/core/dialect.c). Bit (1u << d) of stg_hints.dialects.
 * Numbers are never reused. */
typedef enum stg_dialect {
    STG_DIALECT_NONE = 0,
    STG_DIALECT_RETRY_AFTER = 1,     /* Retry-After (RFC 9110 10.2.3) */
    STG_DIALECT_RETRY_AFTER_MS = 2,  /* retry-after-ms (OpenAI, Stainless SDKs) */
    STG_DIALECT_AZURE = 3,           /* x-ms-retry-after-ms */
    STG_DIALECT_AWS = 4,             /* x-amz-retry-after (milliseconds) */
    STG_DIALECT_X_RATELIMIT = 5,     /* X-RateLimit-Limit/-Remaining/-Reset, no key */
    STG_DIALECT_GITHUB = 6,          /* the same, keyed by x-ratelimit-resource */
    STG_DIALECT_DISCORD = 7,         /* Reset-After, Bucket (the key), Global, Scope */
    STG_DIALECT_OPENAI = 8,          /* x-ratelimit-*-{requests,tokens}, Go durations */
    STG_DIALECT_ANTHROPIC = 9,       /* anthropic-ratelimit-*, RFC 3339 resets */
    STG_DIALECT_X = 10,              /* x-rate-limit-* (X, formerly Twitter) */
    STG_DIALECT_SHOPIFY = 11,        /* X-Shopify-Shop-Api-Call-Limit: used/size */
    STG_DIALECT_KONG = 12,           /* x-ratelimit-{limit,remaining}-{second..year} */
    STG_DIALECT_SHOULD_RETRY = 13,   /* x-should-retry (Stainless SDKs) */
    STG_DIALECT_STRIPE = 14,         /* Stripe-Should-Retry */
    STG_DIALECT_IETF = 15,           /* RateLimit / RateLimit-Policy, draft -08..-10 */
    STG_DIALECT_IETF_07 = 16,        /* the same fields as draft-07 dictionaries */
    STG_DIALECT_IETF_06 = 17,        /* RateLimit-Limit/-Remaining/-Reset, drafts <= -06 */
    STG_DIALECT_RETRY_AFTER_X = 18,  /* X-RateLimit-Retry-After (Symfony, MailerLite) */
    STG_DIALECT_GOOGLE = 19          /* google.rpc error details in the body (Gemini
                                        API, Vertex AI): RetryInfo, QuotaFailure */
} stg_dialect;
#define STG_DIALECT_COUNT 20

/* "retry-after", "github", "openai", ...; "unknown" out of range. Static. */
STG_API const char *stg_dialect_name(int dialect);

/* Values of stg_hints.verdict: what the server said about retrying. */
#define STG_VERDICT_NONE 0  /* no verdict: the status rules decide */
#define STG_VERDICT_RETRY 1 /* "true": retry, even a status that would not be */
#define STG_VERDICT_STOP 2  /* "false": do not retry */

/* Bits of stg_hints.flags. */
#define STG_HINTS_GLOBAL 0x1u /* the wait holds every key of the host (Discord
                                 X-RateLimit-Global / Scope: global) */
#define STG_HINTS_SHARED 0x2u /* Discord Scope: shared (the limit is not yours) */
#define STG_HINTS_SECONDARY 0x4u /* a GitHub secondary rate limit: never set by the
                                    header parser (only the body says so):
                                    stg_hints_message sets it */
#define STG_HINTS_HARD_STOP 0x8u /* the body says no retry can cure the refusal
                                    (OpenAI insufficient_quota, a Google per-day
                                    quota, Anthropic billing): stg_decide gives
                                    the answer back at once (HARD_STOP). Set only
                                    by stg_hints_body */
#define STG_HINTS_THROTTLE 0x10u /* the body names a refusal for load or rate
                                    (Anthropic overloaded_error or rate_limit_error,
                                    Google RESOURCE_EXHAUSTED) on a 429 or 5xx: a
                                    throttle-class fault, like a 429 or 529. Set
                                    only by stg_hints_body */

/* What one response said. Each numeric field is STG_UNKNOWN when absent. */
typedef struct stg_hints {
    int64_t retry_after_us; /* wait asked for by Retry-After, from now */
    int64_t limit;          /* requests allowed per window */
    int64_t remaining;      /* requests left in the current window */
    int64_t reset_us;       /* time until the window resets, from now */
    int64_t window_us;      /* length of the quota window */
    unsigned seen;          /* STG_HINT_* fields that were present and parsed */
    unsigned malformed;     /* STG_HINT_* fields that were present but malformed */
    /* Added in 0.x (zero in an older caller's struct means "none"): */
    int verdict;            /* STG_VERDICT_*: x-should-retry / Stripe-Should-Retry */
    unsigned oversized;     /* STG_HINT_* fields whose wait or reset was too large
                               to represent: read as the largest value
                               (RFC 9111 1.2.2), so the field holds
                               STG_WAIT_MAX_US, and stg_decide() gives up */
    unsigned dialects;      /* bit (1u << stg_dialect) of every dialect seen */
    unsigned flags;         /* STG_HINTS_GLOBAL, _SHARED, _SECONDARY, _HARD_STOP,
                               _THROTTLE */
    uint64_t stg__reserved[2]; /* room to grow (docs/ABI.md); leave zero */
} stg_hints;

/* The largest wait a hint can hold: STG_DELTA_SECONDS_MAX seconds (68
 * years). A larger one is "the largest value": held as this, flagged in
 * stg_hints.oversized, and treated by stg_decide() as a wait that never
 * ends. It is small enough that now + wait never overflows. */
#define STG_WAIT_MAX_US (INT64_C(2147483647) * INT64_C(1000000))

/* One quota a response announced. A response may announce several
 * (requests and tokens; per minute and per day; one per IETF policy), over
 * several header fields (OpenAI's limit, remaining and reset of one quota
 * are three headers): observations of the same quota are merged, where the
 * same quota means the same key, the same unit and the same window (a field
 * that does not state the unit or the window matches any). */
typedef struct stg_quota_obs {
    char key[64];      /* the server's scope, NUL-terminated: the GitHub
                          x-ratelimit-resource, the Discord bucket, the IETF
                          policy name (with ";pk=:...:" when a partition key
                          is given); "" = the host. Longer keys are cut. */
    char unit[24];     /* "requests" (the default), "tokens", "input-tokens",
                          "output-tokens", or the IETF qu= value */
    int64_t limit;     /* units per window, or STG_UNKNOWN */
    int64_t remaining; /* units left, or STG_UNKNOWN */
    int64_t reset_us;  /* until (more) quota returns, from now; at most
                          STG_WAIT_MAX_US; or STG_UNKNOWN */
    int64_t window_us; /* the window's length, or STG_UNKNOWN */
    int dialect;       /* stg_dialect of the fields it came from */
    bool global;       /* pause the whole host (Discord global) */
    bool stg__unit_stated; /* private: a field named the unit */
    uint64_t stg__reserved[4]; /* room to grow (docs/ABI.md); leave zero */
} stg_quota_obs;

#define STG_QUOTAS_MAX 16

/* Every quota one response announced. Set it up with stg_quota_set_init(),
 * feed it every header of one response with stg_hints_feed(), then read
 * q[0..n). Plain memory the caller owns; copyable. */
typedef struct stg_quota_set {
    size_t n;                     /* quotas in q[] */
    bool truncated;               /* more than STG_QUOTAS_MAX were announced;
                                     the rest still count in stg_hints */
    bool stg__global;             /* private: a global flag was seen */
    int stg__scope_dialect;       /* private: where stg__scope came from */
    char stg__scope[64];          /* private: the response's key field */
    stg_quota_obs q[STG_QUOTAS_MAX];
    stg_quota_obs stg__rest;      /* private: what did not fit, merged */
    uint64_t stg__reserved[4];    /* room to grow (docs/ABI.md); leave zero */
} stg_quota_set;

/* Empty the set. Thread-safe for distinct sets. */
STG_API void stg_quota_set_init(stg_quota_set *qs);

/* Values of X-RateLimit-Reset / RateLimit-Reset at or above this are Unix
 * timestamps in seconds; below it, delta-seconds. 10^9 s is 2001-09-09:
 * no API has a window of 31 years, and no reset lies before 2001. */
#define STG_RESET_EPOCH_THRESHOLD INT64_C(1000000000)

/* Largest delta-seconds accepted (2^31 - 1, as RFC 9111 bounds
 * delta-seconds); a larger number is an overflow: STG_ERANGE. */
#define STG_DELTA_SECONDS_MAX INT64_C(2147483647)

/* Parse an HTTP-date in IMF-fixdate ("Sun, 06 Nov 1994 08:49:37 GMT"),
 * obsolete RFC 850 ("Sunday, 06-Nov-94 08:49:37 GMT") or asctime
 * ("Sun Nov  6 08:49:37 1994") form, surrounding whitespace allowed, into
 * Unix seconds; and, as curl's parser does, the variants servers send: no
 * weekday, one-digit day or hour, extra spaces, RFC 850 with a four-digit
 * year, asctime followed by GMT, the zones GMT, UT, UTC, Z, the US zones of
 * RFC 5322 and numeric offsets (+hhmm), which are applied. What could mean
 * two instants is STG_EPARSE: two zones ("GMT+0100"), an unknown word, a
 * numeric month, a missing year, time or seconds, an IMF/RFC 850 date
 * without its zone. Two-digit RFC 850 years are read as RFC 9110 says: a
 * year more than 50 years in the future is in the past century, judged
 * against wall_now_us (only they use it). Names match without regard to
 * case; the weekday must be a valid name but is not checked against the
 * date. Years 0000..9999; a leap second (23:59:60) counts as 23:59:59.
 * Returns STG_OK or STG_EPARSE (STG_EINVAL if unix_s is NULL); on error
 * *unix_s is left unchanged. Thread-safe. */
STG_API int stg_http_date_parse(const char *s, size_t len, int64_t wall_now_us,
                                int64_t *unix_s);

/* Format Unix seconds as IMF-fixdate into buf (at least 30 bytes, NUL
 * terminated). Returns the length (29), or 0 if size is too small or the
 * time is outside years 0..9999 (negative times, before 1970, are fine).
 * Thread-safe. */
STG_API size_t stg_http_date_format(int64_t unix_s, char *buf, size_t size);

/* Parse a Retry-After value into a wait from now in microseconds. Decimal
 * seconds ("2.0", "1.5") are rounded up to whole seconds; a date in the
 * past gives 0. Returns STG_OK; STG_EPARSE for empty, negative or garbage
 * values; STG_ERANGE for delta-seconds above STG_DELTA_SECONDS_MAX, or a
 * date further than that in the future (stg_hints_feed then holds the
 * largest wait); STG_EINVAL if wait_us is NULL. On error *wait_us is left
 * unchanged. */
STG_API int stg_retry_after_parse(const char *value, size_t len, int64_t wall_now_us,
                                  int64_t *wait_us);

/* Parse an X-RateLimit-Reset / RateLimit-Reset value (non-negative integer,
 * or decimal such as "1.5", truncated to whole microseconds) into the time
 * until the reset, using STG_RESET_EPOCH_THRESHOLD to tell delta-seconds
 * from a Unix timestamp. A timestamp in the past gives 0. Returns STG_OK,
 * STG_EPARSE, or STG_ERANGE (a reset more than STG_DELTA_SECONDS_MAX
 * seconds away); on error *reset_us is left unchanged. */
STG_API int stg_ratelimit_reset_parse(const char *value, size_t len, int64_t wall_now_us,
                                      int64_t *reset_us);

/* Set every field to STG_UNKNOWN and the bitmasks to 0. */
STG_API void stg_hints_init(stg_hints *h);

/* Feed one response header (name matched case-insensitively). Headers that
 * carry no hint are ignored and return STG_OK. A malformed hint leaves the
 * field unknown, sets its bit in h->malformed and returns STG_EPARSE (or
 * STG_ERANGE for a count too large); the caller may log it and carry on. A
 * wait or reset too large to represent is applied as STG_WAIT_MAX_US, sets
 * its bit in h->oversized and returns STG_ERANGE. A header is applied
 * whole or not at all. When a response carries several rate-limit items
 * (e.g. two RateLimit policies, or the same field twice), the most
 * restrictive one wins: least remaining, then the longest reset; for
 * limits, the lowest limit/window rate (a limit with a window beats one
 * without). Several Retry-After fields: the longest wait. Returns
 * STG_EINVAL if h is NULL. Not thread-safe for the same h. */
STG_API int stg_hints_header(stg_hints *h, const char *name, size_t name_len,
                             const char *value, size_t value_len, int64_t wall_now_us);

/* stg_hints_header, and the quotas into qs (may be NULL). Every dialect of
 * the table in src/core/dialect.c is read: see docs/libstagger.3 for the
 * list. With qs, h's limit/remaining/reset/window become the most
 * restrictive of qs's quotas, each with its own reset (OpenAI's requests
 * and tokens are paired right); without it, a remaining count and a reset
 * from two different fields pair as "least remaining, longest reset",
 * which never errs early. Feed one response's headers to one (h, qs) pair.
 * Same returns as stg_hints_header; STG_ERANGE also for a wait too large to
 * represent, which is then held as STG_WAIT_MAX_US (h->oversized). */
STG_API int stg_hints_feed(stg_hints *h, stg_quota_set *qs, const char *name, size_t name_len,
                           const char *value, size_t value_len, int64_t wall_now_us);

/* stg_hints_feed on a raw header line "Name: value" (as stg_hints_header_line). */
STG_API int stg_hints_feed_line(stg_hints *h, stg_quota_set *qs, const char *line, size_t len,
                                int64_t wall_now_us);

/* Feed a raw header line "Name: value" (trailing CR/LF allowed); lines
 * without a colon (e.g. the status line) are ignored. Same returns. */
STG_API int stg_hints_header_line(stg_hints *h, const char *line, size_t len,
                                  int64_t wall_now_us);

/* The wait the server asked for, if any: Retry-After (or its millisecond
 * forms) when present, else the longest reset of the quotas with 0
 * remaining. STG_WAIT_MAX_US means "longer than can be said": never retry
 * early. Returns true and sets *wait_us, or returns false. */
STG_API bool stg_hints_server_wait(const stg_hints *h, int64_t *wait_us);

/* What an answer's body said, for the one hint no header carries: a
 * GitHub secondary rate limit answers 403 or 429 with a JSON body whose
 * "message" says "You have exceeded a secondary rate limit" (before 2022:
 * "... abuse detection mechanism"). The transport reads the body (core
 * parses no JSON) and passes the message (msg[0..len), untrusted, not
 * NUL-terminated; matched without regard to case); for such a message
 * with status 403 or 429 this sets STG_HINTS_SECONDARY (and the GitHub
 * dialect bit) in h->flags and returns true: stg_decide then treats the
 * answer as a throttle, waiting its Retry-After, else a spent quota's
 * reset, else at least STG_SECONDARY_LIMIT_WAIT_US, and a quota limiter
 * pauses the whole host as long. Any other status or message: false, h
 * unchanged. Not thread-safe for the same h. */
STG_API bool stg_hints_message(stg_hints *h, int status, const char *msg, size_t len);

/* What stg_hints_body is told: one fact the transport read from a refusal's
 * JSON body (core parses no JSON; libstagger-curl reads the body with
 * jansson, src/curl/body_hints.c). Numbers are never reused. */
typedef enum stg_body_field {
    STG_BODY_ERROR_TYPE = 1,   /* OpenAI and Anthropic error.type
                                  ("insufficient_quota", "overloaded_error") */
    STG_BODY_ERROR_CODE = 2,   /* OpenAI error.code ("insufficient_quota",
                                  "rate_limit_exceeded"); Anthropic
                                  error.details.error_code */
    STG_BODY_ERROR_STATUS = 3, /* Google error.status ("RESOURCE_EXHAUSTED") */
    STG_BODY_RETRY_DELAY = 4,  /* Google google.rpc.RetryInfo retryDelay: a
                                  protobuf Duration in JSON ("37s", "0.250s") */
    STG_BODY_QUOTA_ID = 5      /* Google google.rpc.QuotaFailure violation's
                                  quotaId or quotaMetric */
} stg_body_field;

/* Apply one fact of a refusal's body (status >= 400; value[0..len),
 * untrusted, not NUL-terminated) to h, as the vendor's documentation
 * means it; dialect is STG_DIALECT_OPENAI, _ANTHROPIC or _GOOGLE, which
 * says whose words value is in (its bit is set in h->dialects when the
 * fact meant something). The rules (src/core/hints_body.c has the table
 * and the sources):
 *  - RETRY_DELAY (Google): a server wait, merged like a second Retry-After
 *    (the longer wait wins): h->retry_after_us, so stg_hints_server_wait
 *    and stg_decide honour it. Rounded up to whole microseconds; negative or
 *    garbage is STG_EPARSE (h->malformed gets STG_HINT_BODY); more than
 *    STG_DELTA_SECONDS_MAX seconds is held as STG_WAIT_MAX_US (h->oversized,
 *    STG_ERANGE).
 *  - QUOTA_ID (Google): a name saying "per day" (PerDay, per_day) is a
 *    quota whose reset is hours away, past any max server wait:
 *    STG_HINTS_HARD_STOP. Per minute (or a name without a window): no
 *    change, the refusal is the throttle its status says.
 *  - ERROR_TYPE / ERROR_CODE: OpenAI insufficient_quota and the billing
 *    codes (credit_balance_exhausted, organization_spend_limit_exceeded,
 *    project_spend_limit_exceeded, organization_usage_limit_exceeded),
 *    Anthropic billing_error and enforced_spend_limit_reached:
 *    STG_HINTS_HARD_STOP. Anthropic overloaded_error and rate_limit_error,
 *    OpenAI rate_limit_exceeded, Google RESOURCE_EXHAUSTED (ERROR_STATUS):
 *    on a 429 or 5xx, STG_HINTS_THROTTLE.
 * Every fact that meant something sets STG_HINT_BODY in h->seen. Words are
 * matched exactly (case-sensitive, as the vendors write them); an unknown
 * word or dialect, or a status below 400, changes nothing and returns
 * STG_OK. Returns STG_EINVAL if h is NULL or value is NULL with len > 0.
 * Not thread-safe for the same h. */
STG_API int stg_hints_body(stg_hints *h, int status, int dialect, stg_body_field field,
                           const char *value, size_t len);

#ifdef __cplusplus
}
#endif
#endif
