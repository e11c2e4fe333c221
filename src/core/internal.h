/*
 * Internal to libstagger (src/core/): the pieces the header parsers share,
 * so that httpdate.c, sfv.c and hints.c each hold one parser and none of
 * them copies another's helpers. Never installed; other parts of the tree
 * use the public headers only (src/core/url.h is the one exception, see
 * there).
 *
 * Invariants of every parser built on these helpers (they parse untrusted
 * bytes):
 *   - a value is (pointer, length), never NUL-terminated, and every read is
 *     bounds-checked against the length (a cursor never moves past len);
 *   - no allocation, no global state, no clock, and no locale-dependent libc
 *     function (no strtol, sscanf, strptime, timegm, tolower): names and
 *     numbers are matched in plain ASCII here.
 */
#ifndef STG_CORE_INTERNAL_H
#define STG_CORE_INTERNAL_H

#include <stagger/common.h>

#include "util/assert.h"

#define STG__US_PER_SEC INT64_C(1000000)

/* Largest whole seconds that still convert to microseconds with a fraction
 * added, without overflowing int64_t. */
#define STG__MAX_SECS_TO_US ((INT64_MAX - (STG__US_PER_SEC - 1)) / STG__US_PER_SEC)

/* ---- ASCII ------------------------------------------------------------- */

static inline bool stg__is_digit(char c)
{
    return c >= '0' && c <= '9';
}

static inline bool stg__is_alpha(char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
}

static inline bool stg__is_ows(char c)
{
    return c == ' ' || c == '\t';
}

static inline char stg__to_lower(char c)
{
    return (c >= 'A' && c <= 'Z') ? (char)(c - 'A' + 'a') : c;
}

/* All of s[0..len) must be digits (at least one): STG_EPARSE otherwise,
 * however long; STG_ERANGE if the value exceeds max (hints.c). */
int stg__parse_digits(const char *s, size_t len, int64_t max, int64_t *out);

/* Strip leading and trailing spaces and tabs; a NULL *s is the empty value
 * (len 0), whatever len says: a header's parser takes NULL for "none". */
static inline void stg__trim_ows(const char **s, size_t *len)
{
    if (!*s)
        *len = 0;
    while (*len > 0 && stg__is_ows((*s)[0])) {
        (*s)++;
        (*len)--;
    }
    while (*len > 0 && stg__is_ows((*s)[*len - 1]))
        (*len)--;
}

/* Does s[0..len) equal the NUL-terminated lower-case lit, ignoring case? */
static inline bool stg__eq_nocase(const char *s, size_t len, const char *lit)
{
    size_t i = 0;
    for (; i < len; i++) {
        if (lit[i] == '\0' || stg__to_lower(s[i]) != lit[i])
            return false;
    }
    return lit[i] == '\0';
}

/* ---- a read position in a value of known length ------------------------- */

typedef struct stg__cursor {
    const char *s;
    size_t len;
    size_t pos; /* invariant: pos <= len */
} stg__cursor;

static inline void stg__cur_init(stg__cursor *c, const char *s, size_t len)
{
    c->s = s;
    c->len = len;
    c->pos = 0;
}

static inline bool stg__cur_end(const stg__cursor *c)
{
    STG_ASSERT(c->pos <= c->len);
    return c->pos >= c->len;
}

static inline bool stg__cur_peek(const stg__cursor *c, char ch)
{
    return c->pos < c->len && c->s[c->pos] == ch;
}

static inline bool stg__cur_char(stg__cursor *c, char ch)
{
    if (!stg__cur_peek(c, ch))
        return false;
    c->pos++;
    return true;
}

/* ---- sfv.c: RFC 8941 / RFC 9651 structured fields ------------------------ */

typedef enum stg__sf_type {
    STG__SF_NONE = 0, /* absent */
    STG__SF_INT,
    STG__SF_DEC,
    STG__SF_STR,
    STG__SF_TOKEN,
    STG__SF_BYTES,
    STG__SF_BOOL,
    STG__SF_DATE,
    STG__SF_DSTR,
    STG__SF_INNER
} stg__sf_type;

/* A bare item. Numbers keep their value; strings, tokens and byte
 * sequences point at their text in the field (not copied, not unescaped:
 * a String's text may hold \" and \\; a Byte Sequence's is the base64
 * between the colons). */
typedef struct stg__sf_item {
    stg__sf_type type;
    bool neg;
    bool big;        /* integer part above INT64_MAX (saturated) */
    int64_t ipart;   /* magnitude of the integer part; BOOL: 0 or 1 */
    int64_t frac_us; /* DEC: fraction in microseconds, truncated */
    const char *text; /* STR, TOKEN, BYTES: the text, else NULL */
    size_t text_len;
} stg__sf_item;

/* One list or dictionary member with its one-letter parameters (the only
 * ones RateLimit fields define), indexed by lower-case letter. */
typedef struct stg__sf_member {
    bool is_dict;              /* key "=" value */
    const char *key;           /* dictionary key, when is_dict */
    size_t key_len;
    stg__sf_item item;         /* the bare item, or the dictionary value */
    stg__sf_item param[26];    /* ";a=..." .. ";z=..."; type NONE when absent */
    struct {                   /* the first longer-named parameters (pk, qu) */
        const char *key;
        size_t key_len;
        stg__sf_item v;
    } named[8];
    size_t n_named;
} stg__sf_member;

/* The parameter ;name= (lower case, 2 or more letters) of m, or NULL. */
static inline const stg__sf_item *stg__sf_param_named(const stg__sf_member *m, const char *name)
{
    for (size_t i = 0; i < m->n_named; i++)
        if (stg__eq_nocase(m->named[i].key, m->named[i].key_len, name))
            return &m->named[i].v;
    return NULL;
}

/* The parameter ;letter= of m (letter 'a'..'z'). */
static inline const stg__sf_item *stg__sf_param(const stg__sf_member *m, char letter)
{
    STG_ASSERT(letter >= 'a' && letter <= 'z');
    return &m->param[letter - 'a'];
}

/* Called with each member in order; a return other than STG_OK stops the
 * parse and is returned. */
typedef int (*stg__sf_member_fn)(void *ctx, const stg__sf_member *m);

/* Parse s[0..len) as a List or Dictionary (member *(OWS "," OWS member),
 * surrounding OWS trimmed), calling fn for each member. STG_EPARSE for an
 * empty value, a trailing comma or anything not well formed. */
int stg__sf_parse_field(const char *s, size_t len, stg__sf_member_fn fn, void *ctx);

/* ---- httpdate.c: RFC 3339 timestamps --------------------------------- */

/* "2025-08-21T12:40:59Z", "2025-08-21t12:40:59.5+02:00" (RFC 3339 section
 * 5.6; a space may stand for the T, as its note allows) into Unix time in
 * microseconds, a fraction rounded up. Years 0000..9999, a leap second
 * counts as :59. STG_OK or STG_EPARSE. */
int stg__rfc3339_parse(const char *s, size_t len, int64_t *unix_us);

/* ---- dialect_values.c: the value syntaxes only vendors use ------------- */

/* A Go duration ("12ms", "1s", "6m0s", "1h2m3.5s", "0"; units ns, us, µs,
 * ms, s, m, h; no sign) into microseconds, rounded up. STG_OK, STG_EPARSE,
 * STG_ERANGE (above STG_WAIT_MAX_US). */
int stg__go_duration_parse(const char *s, size_t len, int64_t *us);

/* Shopify's "used/size" ("32/40") into the bucket size and what is left
 * (size - used, 0 when used exceeds it). STG_OK, STG_EPARSE, STG_ERANGE. */
int stg__pair_parse(const char *s, size_t len, int64_t *size, int64_t *left);

/* Milliseconds, integer or decimal ("1500", "1500.5"), into microseconds
 * rounded up. A negative value ("-1") is STG_ENOTFOUND: "unknown", not
 * "now". STG_OK, STG_EPARSE, STG_ERANGE (above STG_WAIT_MAX_US). */
int stg__ms_parse(const char *s, size_t len, int64_t *us);

/* ---- dialect.c: the table of every header stagger reads ---------------- */

typedef enum stg__meaning {
    STG__M_WAIT = 1,       /* the server's wait before a retry */
    STG__M_LIMIT,          /* a quota's size */
    STG__M_REMAINING,      /* what is left of it */
    STG__M_RESET,          /* when (more of) it returns */
    STG__M_PAIR,           /* size and what is left, in one value */
    STG__M_NOTE,           /* read and checked, carries nothing new */
    STG__M_KEY,            /* the key of this response's quotas */
    STG__M_GLOBAL,         /* true: the wait holds the whole host */
    STG__M_SCOPE,          /* Discord's user / global / shared */
    STG__M_VERDICT,        /* true / false: retry or not */
    STG__M_IETF_RATELIMIT, /* the RateLimit structured field */
    STG__M_IETF_POLICY,    /* RateLimit-Policy */
    STG__M_IETF_LIMIT,     /* RateLimit-Limit (drafts <= -06) */
    STG__M_IETF_REMAINING  /* RateLimit-Remaining (drafts <= -06) */
} stg__meaning;

typedef enum stg__syntax {
    STG__S_RETRY_AFTER = 1, /* delta-seconds (decimals rounded up) or HTTP-date */
    STG__S_MS,              /* milliseconds; negative = unknown */
    STG__S_SECONDS,         /* delta seconds, decimals kept */
    STG__S_RESET,           /* seconds or a Unix time (STG_RESET_EPOCH_THRESHOLD) */
    STG__S_GO_DURATION,     /* "6m0s" */
    STG__S_RFC3339,         /* "2025-08-21T12:40:59Z" */
    STG__S_COUNT,           /* a non-negative integer */
    STG__S_PAIR,            /* "32/40" */
    STG__S_BOOL,            /* true / false, any case */
    STG__S_TEXT,            /* visible ASCII, the key or scope */
    STG__S_SFV              /* a structured field (sfv.c) */
} stg__syntax;

typedef enum stg__keysrc {
    STG__K_HOST = 1, /* the quota is the host's: key "" */
    STG__K_SCOPE,    /* keyed by the response's key field, if any */
    STG__K_NAMED     /* keyed by the name the field itself gives (IETF) */
} stg__keysrc;

typedef struct stg__dialect_word {
    const char *word;  /* what the '*' of the pattern matches */
    const char *unit;  /* the quota unit it names, or NULL */
    int64_t window_us; /* the window it names, or 0 */
} stg__dialect_word;

typedef struct stg__dialect_row {
    const char *pattern;             /* lower case; at most one '*' */
    const stg__dialect_word *words;  /* what '*' may be; NULL without '*' */
    int dialect;                     /* stg_dialect */
    stg__meaning meaning;
    stg__syntax syntax;
    stg__keysrc key;
    unsigned bit;                    /* STG_HINT_* of stg_hints.seen */
    const char *unit;                /* the unit, when the name does not say */
} stg__dialect_row;

typedef struct stg__dialect_match {
    const stg__dialect_row *row;
    const char *unit;  /* from the name or the row; NULL: not stated */
    int64_t window_us; /* from the name, or STG_UNKNOWN */
} stg__dialect_match;

/* The row for a header name (matched case-insensitively), or false. */
bool stg__dialect_lookup(const char *name, size_t len, stg__dialect_match *m);

/* All rows (for tests and `stagger plan`); returns their number. */
size_t stg__dialect_rows(const stg__dialect_row **rows);

#endif /* STG_CORE_INTERNAL_H */
