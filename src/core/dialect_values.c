/*
 * The value syntaxes only vendors use (the rows of dialect.c name them):
 * Go durations (OpenAI's "6m0s"), Shopify's "used/size" pair, and the
 * millisecond waits of OpenAI, Azure and AWS.
 *
 * Invariants (besides those of every parser, see core/internal.h): a wait
 * is rounded UP to the next microsecond, never down, so a client that
 * obeys it is never early by a rounding; integer maths never overflows (a
 * value past STG_WAIT_MAX_US is STG_ERANGE, which the caller reads as the
 * largest wait); the whole value must parse, or nothing is returned.
 */
#include <stagger/hints.h>

#include "core/internal.h"

#define NS_PER_US INT64_C(1000)
#define MAX_NS (STG_WAIT_MAX_US * NS_PER_US) /* 2.1e18 < INT64_MAX */

/* ---- Go durations ----------------------------------------------------- */

static const struct {
    const char *name;
    size_t len;
    int64_t ns;
    int exact_digits; /* fraction digits that still give whole nanoseconds */
} go_units[] = {
    /* Longest spelling first: "ms" before "m", "ns" before none. */
    {"ns", 2, 1, 0},
    {"us", 2, 1000, 3},
    {"\xc2\xb5s", 3, 1000, 3}, /* U+00B5 micro sign */
    {"\xce\xbcs", 3, 1000, 3}, /* U+03BC Greek mu */
    {"ms", 2, 1000000, 6},
    {"s", 1, INT64_C(1000000000), 9},
    {"m", 1, INT64_C(60000000000), 10},
    {"h", 1, INT64_C(3600000000000), 11},
};

/* One "1.5h" component at c; adds its nanoseconds (rounded up) to *ns. */
static int go_component(stg__cursor *c, int64_t *ns)
{
    int64_t ipart = 0, frac = 0, scale = 1;
    size_t start = c->pos, nfrac = 0;
    bool big = false, rest = false;
    while (c->pos < c->len && stg__is_digit(c->s[c->pos])) {
        int d = c->s[c->pos++] - '0';
        if (big || ipart > (INT64_MAX - d) / 10)
            big = true;
        else
            ipart = ipart * 10 + d;
    }
    size_t idigits = c->pos - start;
    const char *fs = NULL;
    if (stg__cur_char(c, '.')) {
        fs = c->s + c->pos;
        while (c->pos < c->len && stg__is_digit(c->s[c->pos]))
            c->pos++, nfrac++;
    }
    if (idigits + nfrac == 0)
        return STG_EPARSE; /* "." or a unit without a number */
    for (size_t u = 0; u < sizeof go_units / sizeof go_units[0]; u++) {
        if (c->len - c->pos < go_units[u].len ||
            !stg__eq_nocase(c->s + c->pos, go_units[u].len, go_units[u].name))
            continue;
        /* Go's units are case-sensitive and lower case. */
        for (size_t k = 0; k < go_units[u].len; k++)
            if (c->s[c->pos + k] >= 'A' && c->s[c->pos + k] <= 'Z')
                return STG_EPARSE;
        c->pos += go_units[u].len;
        int64_t unit = go_units[u].ns;
        /* The fraction: the digits that give whole nanoseconds, exactly;
         * any further non-zero digit rounds up by one nanosecond. */
        for (size_t k = 0; k < nfrac; k++) {
            int d = fs[k] - '0';
            if ((int)k < go_units[u].exact_digits) {
                frac = frac * 10 + d;
                scale *= 10;
            } else if (d) {
                rest = true;
            }
        }
        if (big || ipart > MAX_NS / unit)
            return STG_ERANGE;
        int64_t v = ipart * unit + frac * (unit / scale) + (rest ? 1 : 0);
        if (v > MAX_NS - *ns)
            return STG_ERANGE;
        *ns += v;
        return STG_OK;
    }
    return STG_EPARSE;
}

int stg__go_duration_parse(const char *s, size_t len, int64_t *us)
{
    stg__cursor c;
    int64_t ns = 0;
    int rc;
    stg__trim_ows(&s, &len);
    if (len == 0)
        return STG_EPARSE;
    if (len == 1 && s[0] == '0') { /* Go's one unitless duration */
        *us = 0;
        return STG_OK;
    }
    stg__cur_init(&c, s, len);
    while (!stg__cur_end(&c)) {
        if ((rc = go_component(&c, &ns)) != STG_OK)
            return rc;
    }
    STG_ASSERT(ns >= 0 && ns <= MAX_NS);
    *us = ns / NS_PER_US + (ns % NS_PER_US ? 1 : 0);
    return STG_OK;
}

/* ---- Shopify's used/size ---------------------------------------------- */

static int count(const char *s, size_t len, int64_t *out)
{
    stg__trim_ows(&s, &len);
    return stg__parse_digits(s, len, INT64_MAX, out);
}

int stg__pair_parse(const char *s, size_t len, int64_t *size, int64_t *left)
{
    size_t slash = 0;
    int64_t used, sz;
    int rc, rc2;
    if (!s)
        len = 0;
    while (slash < len && s[slash] != '/')
        slash++;
    if (slash == len)
        return STG_EPARSE;
    rc = count(s, slash, &used);
    rc2 = count(s + slash + 1, len - slash - 1, &sz);
    if (rc == STG_EPARSE || rc2 == STG_EPARSE)
        return STG_EPARSE;
    if (rc != STG_OK || rc2 != STG_OK)
        return STG_ERANGE;
    *size = sz;
    *left = used >= sz ? 0 : sz - used;
    return STG_OK;
}

/* ---- milliseconds ----------------------------------------------------- */

int stg__ms_parse(const char *s, size_t len, int64_t *us)
{
    int64_t ms = 0, frac = 0, scale = 1;
    size_t i = 0, start;
    bool neg = false, big = false, rest = false;
    stg__trim_ows(&s, &len);
    if (len > 0 && s[0] == '-') {
        neg = true;
        i = 1;
    }
    start = i;
    for (; i < len && stg__is_digit(s[i]); i++) {
        int d = s[i] - '0';
        if (big || ms > (INT64_MAX - d) / 10)
            big = true;
        else
            ms = ms * 10 + d;
    }
    if (i == start)
        return STG_EPARSE;
    if (i < len && s[i] == '.') {
        size_t f0 = ++i;
        for (; i < len && stg__is_digit(s[i]); i++) {
            if (i - f0 < 3) {
                frac = frac * 10 + (s[i] - '0');
                scale *= 10;
            } else if (s[i] != '0') {
                rest = true;
            }
        }
        if (i == f0)
            return STG_EPARSE;
    }
    if (i != len)
        return STG_EPARSE;
    if (neg)
        return STG_ENOTFOUND; /* "-1": the server does not know */
    if (big || ms > STG_WAIT_MAX_US / 1000)
        return STG_ERANGE;
    int64_t v = ms * 1000 + frac * (1000 / scale) + (rest ? 1 : 0);
    if (v > STG_WAIT_MAX_US)
        return STG_ERANGE;
    *us = v;
    return STG_OK;
}
