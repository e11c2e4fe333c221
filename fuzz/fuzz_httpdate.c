/*
 * libFuzzer harness for HTTP-date (src/core/httpdate.c), beyond what
 * fuzz_retry_after checks through Retry-After:
 *   - formatting any Unix time in years 0..9999 gives 29 bytes of
 *     IMF-fixdate that parse back to the same second, and times outside
 *     give 0 and an empty string;
 *   - a fuzzed value that parses lies in 0..9999 and, when it was a
 *     strict IMF-fixdate (29 bytes of that shape), formats back to the
 *     same text except for the weekday (decoration, not checked) and the
 *     case of the names;
 *   - an error leaves the output untouched.
 * Input: 8 bytes of Unix seconds, 8 bytes of wall clock, then the value
 * (copied to a buffer of exactly its length).
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <stagger/hints.h>

#include "fuzz_common.h"

#define MIN_DATE_S INT64_C(-62167219200)
#define MAX_DATE_S INT64_C(253402300799)
#define SENTINEL INT64_C(-424242)

static int64_t take64(const uint8_t **d, size_t *n)
{
    uint64_t v = 0;
    for (int i = 0; i < 8 && *n > 0; i++, (*d)++, (*n)--)
        v |= (uint64_t)**d << (8 * i);
    return (int64_t)v;
}

static char lower(char c)
{
    return c >= 'A' && c <= 'Z' ? (char)(c - 'A' + 'a') : c;
}

/* The strict IMF-fixdate shape "Sun, 06 Nov 1994 08:49:37 GMT" (the parser
 * also takes lenient forms of 29 bytes, which format back differently). */
static bool imf_shape(const char *v)
{
    static const char shape[] = "aaa, dd aaa dddd dd:dd:dd gmt";
    for (size_t i = 0; i < 29; i++) {
        char c = shape[i];
        if (c == 'a' ? !((v[i] >= 'a' && v[i] <= 'z') || (v[i] >= 'A' && v[i] <= 'Z'))
            : c == 'd' ? !(v[i] >= '0' && v[i] <= '9')
                       : lower(v[i]) != c)
            return false;
    }
    return true;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    int64_t t = take64(&data, &size);
    int64_t now_us = take64(&data, &size) % (INT64_C(253402300799) * 1000000);
    char buf[30], exact[29];
    int64_t back = SENTINEL;

    /* Spread the seconds over the whole range, edges included. */
    if (t % 3 == 0)
        t = MIN_DATE_S + (int64_t)((uint64_t)t % (uint64_t)(MAX_DATE_S - MIN_DATE_S + 1));
    size_t n = stg_http_date_format(t, buf, sizeof buf);
    if (t < MIN_DATE_S || t > MAX_DATE_S) {
        CHECK(n == 0 && buf[0] == '\0');
    } else {
        CHECK(n == 29 && buf[29] == '\0' && strlen(buf) == 29);
        memcpy(exact, buf, 29);
        CHECK(stg_http_date_parse(exact, 29, now_us, &back) == STG_OK && back == t);
    }
    CHECK(stg_http_date_format(t, buf, 29) == 0); /* too small */

    char *v = malloc(size ? size : 1);
    if (!v)
        return 0;
    if (size)
        memcpy(v, data, size);
    int64_t u = SENTINEL;
    int rc = stg_http_date_parse(v, size, now_us, &u);
    CHECK(rc == STG_OK || rc == STG_EPARSE);
    if (rc != STG_OK) {
        CHECK(u == SENTINEL);
    } else {
        CHECK(u >= MIN_DATE_S && u <= MAX_DATE_S);
        CHECK(stg_http_date_format(u, buf, sizeof buf) == 29);
        if (size == 29 && imf_shape(v) && !(v[23] == '6' && v[24] == '0')) {
            for (size_t i = 3; i < 29; i++)
                CHECK(lower(buf[i]) == lower(v[i]));
        }
    }
    free(v);
    return 0;
}
