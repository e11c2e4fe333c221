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

/* Strip leading and trailing spaces and tabs. */
static inline void stg__trim_ows(const char **s, size_t *len)
{
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

/* A bare item. Only numbers keep their value: no caller needs a string. */
typedef struct stg__sf_item {
    stg__sf_type type;
    bool neg;
    bool big;        /* integer part above INT64_MAX (saturated) */
    int64_t ipart;   /* magnitude of the integer part; BOOL: 0 or 1 */
    int64_t frac_us; /* DEC: fraction in microseconds, truncated */
} stg__sf_item;

/* One list or dictionary member with its one-letter parameters (the only
 * ones RateLimit fields define), indexed by lower-case letter. */
typedef struct stg__sf_member {
    bool is_dict;              /* key "=" value */
    const char *key;           /* dictionary key, when is_dict */
    size_t key_len;
    stg__sf_item item;         /* the bare item, or the dictionary value */
    stg__sf_item param[26];    /* ";a=..." .. ";z=..."; type NONE when absent */
} stg__sf_member;

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

#endif /* STG_CORE_INTERNAL_H */
