/*
 * Server hints: what a response says about when to come back.
 *
 * Parses Retry-After (RFC 9110 section 10.2.3: delta-seconds or an
 * HTTP-date in any of the three forms a recipient must accept), the de-facto
 * X-RateLimit-Limit / -Remaining / -Reset fields, and the IETF RateLimit /
 * RateLimit-Policy structured fields (plus the older RateLimit-Limit /
 * -Remaining / -Reset fields of earlier drafts).
 *
 * Input is untrusted bytes: every parser takes a pointer and a length (the
 * value need not be NUL-terminated), never reads past them, never allocates,
 * and answers "no hint" for anything malformed. A wait is never negative: a
 * date in the past means 0. The HTTP-date forms need the wall clock, so it
 * is a parameter (Unix time in microseconds), never read here.
 */
#ifndef STAGGER_HINTS_H
#define STAGGER_HINTS_H

#include "common.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Marks a field of stg_hints as absent. */
#define STG_UNKNOWN (-1)

/* Bits of stg_hints.seen / stg_hints.malformed. */
#define STG_HINT_RETRY_AFTER 0x01u
#define STG_HINT_X_RATELIMIT 0x02u   /* X-RateLimit-* */
#define STG_HINT_RATELIMIT 0x04u     /* RateLimit, RateLimit-Limit/-Remaining/-Reset */
#define STG_HINT_RATELIMIT_POLICY 0x08u

/* What one response said. Each numeric field is STG_UNKNOWN when absent. */
typedef struct stg_hints {
    int64_t retry_after_us; /* wait asked for by Retry-After, from now */
    int64_t limit;          /* requests allowed per window */
    int64_t remaining;      /* requests left in the current window */
    int64_t reset_us;       /* time until the window resets, from now */
    int64_t window_us;      /* length of the quota window */
    unsigned seen;          /* STG_HINT_* fields that were present and parsed */
    unsigned malformed;     /* STG_HINT_* fields that were present but malformed */
    uint64_t stg__reserved[4]; /* room to grow (docs/ABI.md); leave zero */
} stg_hints;

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
 * Unix seconds. Two-digit RFC 850 years are read as RFC 9110 says: a year
 * more than 50 years in the future is in the past century, judged against
 * wall_now_us (only RFC 850 dates use it). The structure is strict; day and
 * month names match without regard to case; the weekday must be a valid
 * name but is not checked against the date. Years 0000..9999; a leap
 * second (23:59:60) counts as 23:59:59. Returns STG_OK or STG_EPARSE
 * (STG_EINVAL if unix_s is NULL); on error *unix_s is left unchanged.
 * Thread-safe. */
STG_API int stg_http_date_parse(const char *s, size_t len, int64_t wall_now_us,
                                int64_t *unix_s);

/* Format Unix seconds as IMF-fixdate into buf (at least 30 bytes, NUL
 * terminated). Returns the length (29), or 0 if size is too small or the
 * time is outside years 0..9999 (negative times, before 1970, are fine).
 * Thread-safe. */
STG_API size_t stg_http_date_format(int64_t unix_s, char *buf, size_t size);

/* Parse a Retry-After value into a wait from now in microseconds. A date in
 * the past gives 0. Returns STG_OK; STG_EPARSE for empty, negative,
 * fractional or garbage values; STG_ERANGE for delta-seconds above
 * STG_DELTA_SECONDS_MAX, or a date further than that in the future;
 * STG_EINVAL if wait_us is NULL. On error *wait_us is left unchanged. */
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
 * STG_ERANGE); the caller may log it and carry on. A header is applied
 * whole or not at all. When a response carries several rate-limit items
 * (e.g. two RateLimit policies, or the same field twice), the most
 * restrictive one wins: least remaining, then the longest reset; for
 * limits, the lowest limit/window rate (a limit with a window beats one
 * without). Several Retry-After fields: the longest wait. Returns
 * STG_EINVAL if h is NULL. Not thread-safe for the same h. */
STG_API int stg_hints_header(stg_hints *h, const char *name, size_t name_len,
                             const char *value, size_t value_len, int64_t wall_now_us);

/* Feed a raw header line "Name: value" (trailing CR/LF allowed); lines
 * without a colon (e.g. the status line) are ignored. Same returns. */
STG_API int stg_hints_header_line(stg_hints *h, const char *line, size_t len,
                                  int64_t wall_now_us);

/* The wait the server asked for, if any: Retry-After when present, else the
 * reset time when a rate-limit field says 0 requests remain. Returns true
 * and sets *wait_us, or returns false. */
STG_API bool stg_hints_server_wait(const stg_hints *h, int64_t *wait_us);

#ifdef __cplusplus
}
#endif
#endif
