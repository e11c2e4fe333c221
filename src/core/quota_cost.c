/*
 * The Stagger-Cost value (include/stagger/quota.h): "unit=amount, ...",
 * what a request says it costs per quota unit.
 *
 * One parser, of untrusted bytes (a proxy client's header, a stored job's):
 * a cursor that never moves past len, no allocation, no locale, no libc
 * number parser. A value is taken whole or not at all: on an error the
 * output holds nothing the caller may use (*n is 0).
 */
#include <string.h>

#include <stagger/quota.h>

#include "core/internal.h"

#define AMOUNT_MAX INT64_C(1000000000000000)

static bool unit_char(char c)
{
    return stg__is_alpha(c) || stg__is_digit(c) || c == '_' || c == '-' || c == '.';
}

static void skip_ows(const char *s, size_t len, size_t *i)
{
    while (*i < len && stg__is_ows(s[*i]))
        (*i)++;
}

int stg_quota_cost_parse(const char *s, size_t len, stg_quota_cost *costs, size_t max,
                         size_t *n)
{
    if (!n || (!s && len) || (!costs && max))
        return STG_EINVAL;
    *n = 0;
    size_t i = 0, got = 0;
    for (;;) {
        skip_ows(s, len, &i);
        size_t u0 = i;
        while (i < len && unit_char(s[i]))
            i++;
        size_t ulen = i - u0;
        if (ulen == 0 || ulen >= STG_QUOTA_UNIT_LEN)
            return STG_EPARSE;
        skip_ows(s, len, &i);
        if (i >= len || s[i] != '=')
            return STG_EPARSE;
        i++;
        skip_ows(s, len, &i);
        size_t d0 = i;
        int64_t v = 0;
        while (i < len && stg__is_digit(s[i])) {
            if (v > AMOUNT_MAX / 10)
                return STG_ERANGE;
            v = v * 10 + (s[i] - '0');
            i++;
        }
        if (i == d0)
            return STG_EPARSE;
        if (v > AMOUNT_MAX)
            return STG_ERANGE;
        for (size_t k = 0; k < got; k++)
            if (strlen(costs[k].unit) == ulen && !memcmp(costs[k].unit, s + u0, ulen))
                return STG_EPARSE;
        if (got >= max)
            return STG_ERANGE;
        memset(&costs[got], 0, sizeof costs[got]);
        memcpy(costs[got].unit, s + u0, ulen);
        costs[got].amount = v;
        got++;
        skip_ows(s, len, &i);
        if (i == len)
            break;
        if (s[i] != ',')
            return STG_EPARSE;
        i++;
    }
    STG_ASSERT(got >= 1 && got <= max);
    *n = got;
    return STG_OK;
}
