/*
 * Unit tests for src/core/hints.c: Retry-After, HTTP-date, X-RateLimit-*,
 * RateLimit / RateLimit-Policy and the merging of several hints.
 *
 * Every value goes through a malloc'd copy of exactly its length (no NUL
 * after it), so an over-read by any parser is an ASan report, not luck.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <stagger/hints.h>

/* Sun, 06 Nov 1994 08:49:37 GMT */
#define NOW_S INT64_C(784111777)
#define NOW_US STG_SEC(NOW_S)
#define NO_VALUE INT64_C(-777) /* sentinel: "left unchanged" */

/* An exact-length heap copy of s: reading s[len] is caught by ASan. */
static char *dup_exact(const char *s, size_t len)
{
    char *p = malloc(len ? len : 1);
    assert_non_null(p);
    if (len)
        memcpy(p, s, len);
    return p;
}

static int retry_after(const char *s, int64_t now_us, int64_t *out)
{
    size_t len = strlen(s);
    char *p = dup_exact(s, len);
    int rc = stg_retry_after_parse(p, len, now_us, out);
    free(p);
    return rc;
}

static int date_parse(const char *s, int64_t now_us, int64_t *out)
{
    size_t len = strlen(s);
    char *p = dup_exact(s, len);
    int rc = stg_http_date_parse(p, len, now_us, out);
    free(p);
    return rc;
}

static int reset_parse(const char *s, int64_t now_us, int64_t *out)
{
    size_t len = strlen(s);
    char *p = dup_exact(s, len);
    int rc = stg_ratelimit_reset_parse(p, len, now_us, out);
    free(p);
    return rc;
}

static int header(stg_hints *h, const char *name, const char *value, int64_t now_us)
{
    size_t nlen = strlen(name), vlen = strlen(value);
    char *n = dup_exact(name, nlen);
    char *v = dup_exact(value, vlen);
    int rc = stg_hints_header(h, n, nlen, v, vlen, now_us);
    free(n);
    free(v);
    return rc;
}

static int header_line(stg_hints *h, const char *line, int64_t now_us)
{
    size_t len = strlen(line);
    char *p = dup_exact(line, len);
    int rc = stg_hints_header_line(h, p, len, now_us);
    free(p);
    return rc;
}

#define N_ELEMS(a) (sizeof(a) / sizeof((a)[0]))

/* ------------------------------------------------------------------------ */
/* Retry-After                                                              */

struct ra_case {
    const char *in;
    int rc;
    int64_t wait_us; /* when rc == STG_OK */
};

static void test_retry_after_delta(void **state)
{
    static const struct ra_case cases[] = {
        {"0", STG_OK, 0},
        {"1", STG_OK, STG_SEC(1)},
        {"120", STG_OK, STG_SEC(120)},
        {" 5", STG_OK, STG_SEC(5)},
        {"5 ", STG_OK, STG_SEC(5)},
        {"\t 7 \t", STG_OK, STG_SEC(7)},
        {"0000000000000000000000000000000000000042", STG_OK, STG_SEC(42)},
        {"2147483647", STG_OK, STG_SEC(INT64_C(2147483647))},
        {"2147483648", STG_ERANGE, 0},
        {"9223372036854775807", STG_ERANGE, 0},
        {"9223372036854775808", STG_ERANGE, 0},
        {"1234567890123456789012345678901234567890", STG_ERANGE, 0},
        {"", STG_EPARSE, 0},
        {" ", STG_EPARSE, 0},
        {"\t\t", STG_EPARSE, 0},
        {"-1", STG_EPARSE, 0},
        {"-0", STG_EPARSE, 0},
        /* decimals (Shopify sends "2.0"): seconds, rounded up, never early */
        {"1.5", STG_OK, STG_SEC(2)},
        {"2.0", STG_OK, STG_SEC(2)},
        {"0.001", STG_OK, STG_SEC(1)},
        {"0.0000001", STG_OK, STG_SEC(1)},
        {"0.0", STG_OK, 0},
        {"120.5", STG_OK, STG_SEC(121)},
        {"2147483646.5", STG_OK, STG_SEC(INT64_C(2147483647))},
        {"2147483647.5", STG_ERANGE, 0},
        {"-1.5", STG_EPARSE, 0},
        {"1.5.5", STG_EPARSE, 0},
        {"1.", STG_EPARSE, 0},
        {".5", STG_EPARSE, 0},
        {"abc", STG_EPARSE, 0},
        {"5s", STG_EPARSE, 0},
        {"+5", STG_EPARSE, 0},
        {"0x10", STG_EPARSE, 0},
        {"1e3", STG_EPARSE, 0},
        {"5 5", STG_EPARSE, 0},
        {"5\r", STG_EPARSE, 0},
        {"\xef\xbc\x95", STG_EPARSE, 0}, /* fullwidth digit five */
        {"1234567890123456789012345678901234567890x", STG_EPARSE, 0},
    };
    (void)state;
    for (size_t i = 0; i < N_ELEMS(cases); i++) {
        int64_t w = NO_VALUE;
        int rc = retry_after(cases[i].in, NOW_US, &w);
        if (rc != cases[i].rc)
            fail_msg("case %zu \"%s\": rc %d, want %d", i, cases[i].in, rc, cases[i].rc);
        assert_int_equal(w, rc == STG_OK ? cases[i].wait_us : NO_VALUE);
    }
}

static void test_retry_after_dates(void **state)
{
    static const struct ra_case cases[] = {
        /* 10 s after now, in all three forms */
        {"Sun, 06 Nov 1994 08:49:47 GMT", STG_OK, STG_SEC(10)},
        {"Sunday, 06-Nov-94 08:49:47 GMT", STG_OK, STG_SEC(10)},
        {"Sun Nov  6 08:49:47 1994", STG_OK, STG_SEC(10)},
        {"  Sun, 06 Nov 1994 08:49:47 GMT\t", STG_OK, STG_SEC(10)},
        /* one hour later */
        {"Sun, 06 Nov 1994 09:49:37 GMT", STG_OK, STG_SEC(3600)},
        /* names are matched without case; the weekday is not checked */
        {"SUN, 06 NOV 1994 08:49:47 gmt", STG_OK, STG_SEC(10)},
        {"Mon, 06 Nov 1994 08:49:47 GMT", STG_OK, STG_SEC(10)},
        /* now and the past give 0 */
        {"Sun, 06 Nov 1994 08:49:37 GMT", STG_OK, 0},
        {"Sun, 06 Nov 1994 08:49:36 GMT", STG_OK, 0},
        {"Thu, 01 Jan 1970 00:00:00 GMT", STG_OK, 0},
        {"Sat, 01 Jan 0000 00:00:00 GMT", STG_OK, 0},
        /* absurdly far: more than 2^31-1 s away */
        {"Fri, 31 Dec 9999 23:59:59 GMT", STG_ERANGE, 0},
        {"Wed, 01 Jan 2070 00:00:00 GMT", STG_ERANGE, 0},
        /* garbage */
        {"Sun, 06 Nov 1994 08:49:47 GMT garbage", STG_EPARSE, 0},
        {"Sun, 06 Nov 1994", STG_EPARSE, 0},
        {"tomorrow", STG_EPARSE, 0},
    };
    (void)state;
    for (size_t i = 0; i < N_ELEMS(cases); i++) {
        int64_t w = NO_VALUE;
        int rc = retry_after(cases[i].in, NOW_US, &w);
        if (rc != cases[i].rc)
            fail_msg("case %zu \"%s\": rc %d, want %d", i, cases[i].in, rc, cases[i].rc);
        assert_int_equal(w, rc == STG_OK ? cases[i].wait_us : NO_VALUE);
    }
}

static void test_retry_after_subsecond_now(void **state)
{
    int64_t w = NO_VALUE;
    (void)state;
    /* now is half a second past NOW_S: 10 s later is 9.5 s away */
    assert_int_equal(retry_after("Sun, 06 Nov 1994 08:49:47 GMT", NOW_US + 500000, &w), STG_OK);
    assert_int_equal(w, 9500000);
    /* a wall clock before 1970 works too */
    assert_int_equal(retry_after("Thu, 01 Jan 1970 00:00:05 GMT", STG_SEC(-5), &w), STG_OK);
    assert_int_equal(w, STG_SEC(10));
    /* extreme clocks never overflow */
    assert_int_equal(retry_after("Thu, 01 Jan 1970 00:00:05 GMT", INT64_MAX, &w), STG_OK);
    assert_int_equal(w, 0);
    w = NO_VALUE;
    assert_int_equal(retry_after("Thu, 01 Jan 1970 00:00:05 GMT", INT64_MIN, &w), STG_ERANGE);
    assert_int_equal(w, NO_VALUE);
}

/* ------------------------------------------------------------------------ */
/* HTTP-date                                                                */

struct date_case {
    const char *in;
    int64_t unix_s;
};

static void test_http_date_valid(void **state)
{
    static const struct date_case cases[] = {
        {"Thu, 01 Jan 1970 00:00:00 GMT", 0},
        {"Sun, 06 Nov 1994 08:49:37 GMT", NOW_S},
        {"Sunday, 06-Nov-94 08:49:37 GMT", NOW_S},
        {"Sun Nov  6 08:49:37 1994", NOW_S},
        {"Sun Nov 06 08:49:37 1994", NOW_S},
        {" \tSun Nov  6 08:49:37 1994 \t", NOW_S},
        {"Wed, 31 Dec 1969 23:59:59 GMT", -1},
        {"Sat, 01 Jan 2000 00:00:00 GMT", 946684800},
        {"Tue, 29 Feb 2000 00:00:00 GMT", 951782400},       /* 400-year leap */
        {"Thu, 29 Feb 2024 00:00:00 GMT", 1709164800},      /* leap year */
        {"Thu Feb 29 00:00:00 2024", 1709164800},
        {"Thursday, 29-Feb-24 00:00:00 GMT", 1709164800},
        {"Sat, 31 Dec 2016 23:59:60 GMT", 1483228799},      /* leap second: 59 */
        {"Fri, 31 Dec 9999 23:59:59 GMT", INT64_C(253402300799)},
        {"Sat, 01 Jan 0000 00:00:00 GMT", INT64_C(-62167219200)},
        {"Mon, 01 Jan 0001 00:00:00 GMT", INT64_C(-62135596800)},
        {"Wednesday, 06-Nov-94 08:49:37 GMT", NOW_S}, /* weekday not checked */
        {"sunday, 06-nov-94 08:49:37 gmt", NOW_S},
        /* what curl's parser accepts too (#15): the same instant */
        {"Sun, 6 Nov 1994 08:49:37 GMT", NOW_S},          /* one-digit day */
        {"Sun, 06 Nov 1994 8:49:37 GMT", NOW_S - 0},       /* one-digit hour */
        {"06 Nov 1994 08:49:37 GMT", NOW_S},              /* no weekday */
        {"Sunday, 06-Nov-1994 08:49:37 GMT", NOW_S},      /* RFC 850, four-digit year */
        {"Sun, 06-Nov-94 08:49:37 GMT", NOW_S},           /* RFC 850, short weekday */
        {"Sun Nov  6 08:49:37 1994 GMT", NOW_S},          /* asctime + GMT */
        {"Sun Nov 6 08:49:37 1994", NOW_S},               /* asctime, one space */
        {"Sun, Nov  6 08:49:37 1994", NOW_S},
        {"Sun, 06 Nov 1994 08:49:37 UTC", NOW_S},
        {"Sun, 06 Nov 1994 08:49:37 UT", NOW_S},
        {"Sun, 06 Nov 1994 08:49:37 Z", NOW_S},
        {"Sun,  06  Nov  1994  08:49:37  GMT", NOW_S},    /* extra spaces */
        {"Sun,\t06 Nov 1994 08:49:37 GMT", NOW_S},
        {"Sun, 06 Nov 1994 08:49:37 +0000", NOW_S},
        {"Sun, 06 Nov 1994 10:49:37 +0200", NOW_S},       /* zones applied */
        {"Sun, 06 Nov 1994 03:49:37 -0500", NOW_S},
        {"Sat, 05 Nov 1994 23:49:37 -0900", NOW_S},       /* the day before */
        {"Sun, 06 Nov 1994 14:19:37 +0530", NOW_S},
        {"Sun, 06 Nov 1994 08:49:37-0000", NOW_S},
        {"Sun, 06 Nov 1994 03:49:37 EST", NOW_S},
        {"Sun, 06 Nov 1994 00:49:37 PST", NOW_S},
        {"Sun, 06 Nov 1994 01:49:37 PDT", NOW_S},
        {"1994 Nov 6 08:49:37 GMT", NOW_S},               /* another order */
        {"Thu, 01 Jan 1970 00:59:59 +0100", -1},
    };
    (void)state;
    for (size_t i = 0; i < N_ELEMS(cases); i++) {
        int64_t t = NO_VALUE;
        int rc = date_parse(cases[i].in, NOW_US, &t);
        if (rc != STG_OK || t != cases[i].unix_s)
            fail_msg("case %zu \"%s\": rc %d, t %lld, want %lld", i, cases[i].in, rc,
                     (long long)t, (long long)cases[i].unix_s);
    }
}

static void test_http_date_invalid(void **state)
{
    static const char *const cases[] = {
        "",
        "   ",
        "Wed, 29 Feb 2023 00:00:00 GMT", /* not a leap year */
        "Thu, 29 Feb 1900 00:00:00 GMT", /* century, not a leap year */
        "Wed Feb 29 00:00:00 2023",
        "Wednesday, 29-Feb-23 00:00:00 GMT",
        "Thu, 00 Jan 1970 00:00:00 GMT",
        "Thu, 32 Jan 1970 00:00:00 GMT",
        "Thu, 31 Apr 1970 00:00:00 GMT",
        "Thu, 01 Foo 1970 00:00:00 GMT",
        "Thu, 01 Jan 1970 24:00:00 GMT",
        "Thu, 01 Jan 1970 00:60:00 GMT",
        "Thu, 01 Jan 1970 00:00:61 GMT",
        "Thu, 01 Jan 1970 12:00:60 GMT", /* leap second only at 23:59 */
        "Thu, 01 Jan 70 00:00:00 GMT",   /* two-digit year outside RFC 850 */
        "Thu, 01 Jan 19700 00:00:00 GMT",
        "Thu, 01 Jan 1970 00:00:00 GMTx",
        "Thu, 01 Jan 1970 00:00:00 GMT x",
        "Thurs, 01-Jan-70 00:00:00 GMT",
        "Xyz, 01 Jan 1970 00:00:00 GMT",
        "Thu Jan  1 00:00:00 70",
        /* ambiguous: could mean two instants, so no hint (plain backoff) */
        "Thu, 01 Jan 1970 00:00:00 GMT+0100",     /* JavaScript: UTC+1, or GMT? */
        "Thu, 01 Jan 1970 00:00:00",               /* cut before its zone */
        "Thursday, 01-Jan-70 00:00:00",
        "Tue Feb 16 2021 09:02:42 GMT+0100 (Central European Standard Time)",
        "Thu, 01 Jan 1970 00:00:00 IST",          /* India, Ireland or Israel */
        "Thu, 01 Jan 1970 00:00:00 GMT GMT",
        "Thu, 01 Jan 1970 00:00:00 +0100 -0100",
        "Thu, 01 Jan 1970 00:00",                  /* seconds cut off */
        "Thu, 01 Jan 00:00:00 GMT",                /* no year */
        "Thu, 01 1970 00:00:00 GMT",               /* no month */
        "Thu, Jan 1970 00:00:00 GMT",              /* no day */
        "Thu, 01 Jan 1970",                        /* no time */
        "01/01/1970 00:00:00 GMT",                 /* numeric month */
        "Thu, 01 Jan 1970 00:00:00 +01",
        "Thu, 01 Jan 1970 00:00:00 +2400",
        "Thu, 01 Jan 1970 00:00:00 +0060",
        "Thu, 01 Jan 1970 00:00:00 +01000",
        "Thu, 01 Jan Jan 1970 00:00:00 GMT",
        "Thu, Fri, 01 Jan 1970 00:00:00 GMT",
        "Thu, 01 Jan 1970 00:00:00 00:00:00 GMT",
        "Thu, 01 Jan 1970 1970 00:00:00 GMT",
        "Thu, 001 Jan 1970 00:00:00 GMT",
        "Thu, 01 Jan 1970 000:00:00 GMT",
        "Thu, 6Jan 1970 00:00:00 GMT",
        "-Thu, 01 Jan 1970 00:00:00 GMT",
        "Thu; 01 Jan 1970 00:00:00 GMT",
        "Thu, 01 Jan 1970 00:00:0\xff GMT",
        "Thu, 0\xb9 Jan 1970 00:00:00 GMT",
        "1994-11-06T08:49:37Z",
        "784111777",
        ",",
        "Sun",
        "Sunday",
    };
    (void)state;
    for (size_t i = 0; i < N_ELEMS(cases); i++) {
        int64_t t = NO_VALUE;
        int rc = date_parse(cases[i], NOW_US, &t);
        if (rc != STG_EPARSE || t != NO_VALUE)
            fail_msg("case %zu \"%s\": rc %d, want EPARSE", i, cases[i], rc);
    }
    /* an embedded NUL inside the length */
    {
        static const char v[] = "Thu, 01 Jan 1970 00:00:00 GMT\0";
        int64_t t = NO_VALUE;
        char *p = dup_exact(v, sizeof v - 1);
        assert_int_equal(stg_http_date_parse(p, sizeof v - 1, NOW_US, &t), STG_EPARSE);
        free(p);
    }
}

static void test_http_date_truncated(void **state)
{
    static const char *const dates[] = {
        "Sun, 06 Nov 1994 08:49:37 GMT",
        "Sunday, 06-Nov-94 08:49:37 GMT",
        "Sun Nov  6 08:49:37 1994",
        "Sun Nov 16 08:49:37 1994",
        "Sun, 06 Nov 1994 10:49:37 +0200",
        "Sunday, 06-Nov-1994 08:49:37 GMT",
    };
    (void)state;
    for (size_t i = 0; i < N_ELEMS(dates); i++) {
        size_t full = strlen(dates[i]);
        for (size_t n = 0; n < full; n++) {
            int64_t t = NO_VALUE, w = NO_VALUE;
            char *p = dup_exact(dates[i], n);
            int rc1 = stg_http_date_parse(p, n, NOW_US, &t);
            int rc2 = stg_retry_after_parse(p, n, NOW_US, &w);
            free(p);
            if (rc1 != STG_EPARSE || rc2 != STG_EPARSE || t != NO_VALUE || w != NO_VALUE)
                fail_msg("\"%.*s\" (%zu bytes): rc %d/%d, want EPARSE", (int)n, dates[i], n,
                         rc1, rc2);
        }
        /* and the whole thing parses */
        {
            int64_t t = NO_VALUE;
            char *p = dup_exact(dates[i], full);
            assert_int_equal(stg_http_date_parse(p, full, NOW_US, &t), STG_OK);
            free(p);
        }
    }
}

struct century_case {
    int64_t now_s;
    const char *in;
    int64_t unix_s;
};

static void test_rfc850_century(void **state)
{
    static const struct century_case cases[] = {
        /* now 1994: years up to 2044 are ahead, 2045 would be 51 years */
        {NOW_S, "Sunday, 06-Nov-94 08:49:37 GMT", NOW_S},
        {NOW_S, "Sunday, 06-Nov-44 08:49:37 GMT", INT64_C(2362034977)},
        {NOW_S, "Tuesday, 06-Nov-45 08:49:37 GMT", INT64_C(-762189023)},
        /* now 2024-01-01: 74 -> 2074, 75 -> 1975, 94 -> 1994 */
        {1704067200, "Tuesday, 06-Nov-74 08:49:37 GMT", INT64_C(3308719777)},
        {1704067200, "Thursday, 06-Nov-75 08:49:37 GMT", INT64_C(184495777)},
        {1704067200, "Sunday, 06-Nov-94 08:49:37 GMT", NOW_S},
        {1704067200, "Thursday, 29-Feb-24 00:00:00 GMT", 1709164800},
        /* now 2090: 30 -> 2130 (40 years ahead), 90 -> 2090 */
        {INT64_C(3799958400), "Monday, 01-Jun-30 00:00:00 GMT", INT64_C(5062176000)},
        {INT64_C(3799958400), "Thursday, 01-Jun-90 00:00:00 GMT", INT64_C(3799958400)},
    };
    (void)state;
    for (size_t i = 0; i < N_ELEMS(cases); i++) {
        int64_t t = NO_VALUE;
        int rc = date_parse(cases[i].in, STG_SEC(cases[i].now_s), &t);
        if (rc != STG_OK || t != cases[i].unix_s)
            fail_msg("case %zu \"%s\": rc %d, t %lld, want %lld", i, cases[i].in, rc,
                     (long long)t, (long long)cases[i].unix_s);
    }
    /* 29 Feb exists in 2024 but not in 1924 or 2124 */
    {
        int64_t t = NO_VALUE;
        /* now 1980: "24" is 2024 (44 years ahead) */
        assert_int_equal(date_parse("Thursday, 29-Feb-24 00:00:00 GMT", STG_SEC(315532800), &t),
                         STG_OK);
        assert_int_equal(t, 1709164800);
        /* now 2080: "23" is 2123, not a leap year */
        assert_int_equal(date_parse("Monday, 29-Feb-23 00:00:00 GMT", STG_SEC(3471292800), &t),
                         STG_EPARSE);
    }
    /* a clock so early the year would be negative: malformed, no crash */
    {
        int64_t t = NO_VALUE;
        assert_int_equal(date_parse("Sunday, 06-Nov-94 08:49:37 GMT", INT64_MIN, &t),
                         STG_EPARSE);
        assert_int_equal(date_parse("Sunday, 06-Nov-94 08:49:37 GMT", INT64_MAX, &t),
                         STG_EPARSE);
        assert_int_equal(t, NO_VALUE);
    }
}

static void test_http_date_format(void **state)
{
    static const struct date_case cases[] = {
        {"Thu, 01 Jan 1970 00:00:00 GMT", 0},
        {"Sun, 06 Nov 1994 08:49:37 GMT", NOW_S},
        {"Wed, 31 Dec 1969 23:59:59 GMT", -1},
        {"Thu, 29 Feb 2024 00:00:00 GMT", 1709164800},
        {"Tue, 29 Feb 2000 00:00:00 GMT", 951782400},
        {"Sun, 06 Nov 2044 08:49:37 GMT", INT64_C(2362034977)},
        {"Tue, 06 Nov 1945 08:49:37 GMT", INT64_C(-762189023)},
        {"Fri, 31 Dec 9999 23:59:59 GMT", INT64_C(253402300799)},
        {"Sat, 01 Jan 0000 00:00:00 GMT", INT64_C(-62167219200)},
        {"Mon, 01 Jan 0001 00:00:00 GMT", INT64_C(-62135596800)},
    };
    char buf[64];
    (void)state;
    for (size_t i = 0; i < N_ELEMS(cases); i++) {
        memset(buf, 'x', sizeof buf);
        assert_int_equal(stg_http_date_format(cases[i].unix_s, buf, sizeof buf), 29);
        assert_string_equal(buf, cases[i].in);
    }
    /* exactly 30 bytes is enough, 29 is not */
    {
        char *p = malloc(30);
        assert_non_null(p);
        assert_int_equal(stg_http_date_format(0, p, 30), 29);
        assert_int_equal(p[29], '\0');
        assert_int_equal(stg_http_date_format(0, p, 29), 0);
        free(p);
    }
    assert_int_equal(stg_http_date_format(0, NULL, 64), 0);
    assert_int_equal(stg_http_date_format(INT64_C(253402300800), buf, sizeof buf), 0);
    assert_int_equal(stg_http_date_format(INT64_C(-62167219201), buf, sizeof buf), 0);
    assert_int_equal(stg_http_date_format(INT64_MAX, buf, sizeof buf), 0);
    assert_int_equal(stg_http_date_format(INT64_MIN, buf, sizeof buf), 0);
}

static void test_http_date_roundtrip(void **state)
{
    /* ~ every 13 days plus an odd number of seconds, over years 0..9999,
     * and every second around a few edges */
    const int64_t lo = INT64_C(-62167219200), hi = INT64_C(253402300799);
    const int64_t step = INT64_C(13) * 86400 + 4099;
    static const int64_t edges[] = {0, 951782400, 1709164800, 1483228799, NOW_S};
    char buf[30];
    size_t n = 0;
    (void)state;
    for (int64_t t = lo; t <= hi; t += step, n++) {
        int64_t back = NO_VALUE;
        assert_int_equal(stg_http_date_format(t, buf, sizeof buf), 29);
        assert_int_equal(stg_http_date_parse(buf, 29, 0, &back), STG_OK);
        if (back != t)
            fail_msg("%lld -> \"%s\" -> %lld", (long long)t, buf, (long long)back);
    }
    assert_true(n > 250000);
    for (size_t i = 0; i < N_ELEMS(edges); i++) {
        for (int64_t t = edges[i] - 90000; t <= edges[i] + 90000; t += 7) {
            int64_t back = NO_VALUE;
            assert_int_equal(stg_http_date_format(t, buf, sizeof buf), 29);
            assert_int_equal(stg_http_date_parse(buf, 29, 0, &back), STG_OK);
            assert_int_equal(back, t);
        }
    }
    /* the top and bottom seconds */
    {
        int64_t back = NO_VALUE;
        assert_int_equal(stg_http_date_format(hi, buf, sizeof buf), 29);
        assert_int_equal(stg_http_date_parse(buf, 29, 0, &back), STG_OK);
        assert_int_equal(back, hi);
        assert_int_equal(stg_http_date_format(lo, buf, sizeof buf), 29);
        assert_int_equal(stg_http_date_parse(buf, 29, 0, &back), STG_OK);
        assert_int_equal(back, lo);
    }
}

/* ------------------------------------------------------------------------ */
/* Reset values                                                             */

struct reset_case {
    const char *in;
    int64_t now_s;
    int rc;
    int64_t reset_us;
};

static void test_ratelimit_reset(void **state)
{
    static const struct reset_case cases[] = {
        {"0", NOW_S, STG_OK, 0},
        {"30", NOW_S, STG_OK, STG_SEC(30)},
        {" 30 ", NOW_S, STG_OK, STG_SEC(30)},
        {"1.5", NOW_S, STG_OK, 1500000},
        {"0.25", NOW_S, STG_OK, 250000},
        {"2.000001", NOW_S, STG_OK, 2000001},
        {"2.0000019", NOW_S, STG_OK, 2000001}, /* truncated to µs */
        {"999999999", NOW_S, STG_OK, STG_SEC(999999999)}, /* last delta */
        /* at the threshold: a Unix timestamp */
        {"1000000000", NOW_S, STG_OK, STG_SEC(1000000000 - NOW_S)},
        {"1700000030", 1700000000, STG_OK, STG_SEC(30)},
        {"1700000030.5", 1700000000, STG_OK, 30500000},
        {"1700000000", 1700000000, STG_OK, 0},
        {"1699999990", 1700000000, STG_OK, 0}, /* past */
        {"1000000000", 1700000000, STG_OK, 0},
        /* far-future timestamps are absurd */
        {"9000000000000", 1700000000, STG_ERANGE, 0},
        {"9223372036854", 1700000000, STG_ERANGE, 0},
        {"99999999999999999999", 1700000000, STG_ERANGE, 0},
        {"1234567890123456789012345678901234567890", NOW_S, STG_ERANGE, 0},
        {"", NOW_S, STG_EPARSE, 0},
        {"  ", NOW_S, STG_EPARSE, 0},
        {"-1", NOW_S, STG_EPARSE, 0},
        {"+1", NOW_S, STG_EPARSE, 0},
        {"1.", NOW_S, STG_EPARSE, 0},
        {".5", NOW_S, STG_EPARSE, 0},
        {"1..5", NOW_S, STG_EPARSE, 0},
        {"1.5.", NOW_S, STG_EPARSE, 0},
        {"1e3", NOW_S, STG_EPARSE, 0},
        {"abc", NOW_S, STG_EPARSE, 0},
        {"30s", NOW_S, STG_EPARSE, 0},
        {"1,5", NOW_S, STG_EPARSE, 0},
    };
    (void)state;
    for (size_t i = 0; i < N_ELEMS(cases); i++) {
        int64_t r = NO_VALUE;
        int rc = reset_parse(cases[i].in, STG_SEC(cases[i].now_s), &r);
        if (rc != cases[i].rc)
            fail_msg("case %zu \"%s\": rc %d, want %d", i, cases[i].in, rc, cases[i].rc);
        assert_int_equal(r, rc == STG_OK ? cases[i].reset_us : NO_VALUE);
    }
}

/* ------------------------------------------------------------------------ */
/* Headers                                                                  */

#define U STG_UNKNOWN

struct hint_expect {
    int64_t retry_after_us, limit, remaining, reset_us, window_us;
    unsigned seen, malformed;
};

static void check_hints(const stg_hints *h, const struct hint_expect *e, const char *what)
{
    if (h->retry_after_us != e->retry_after_us || h->limit != e->limit ||
        h->remaining != e->remaining || h->reset_us != e->reset_us ||
        h->window_us != e->window_us || h->seen != e->seen || h->malformed != e->malformed)
        fail_msg("%s: got ra=%lld limit=%lld rem=%lld reset=%lld win=%lld seen=%#x bad=%#x; "
                 "want ra=%lld limit=%lld rem=%lld reset=%lld win=%lld seen=%#x bad=%#x",
                 what, (long long)h->retry_after_us, (long long)h->limit,
                 (long long)h->remaining, (long long)h->reset_us, (long long)h->window_us,
                 h->seen, h->malformed, (long long)e->retry_after_us, (long long)e->limit,
                 (long long)e->remaining, (long long)e->reset_us, (long long)e->window_us,
                 e->seen, e->malformed);
}

static void test_hints_init(void **state)
{
    stg_hints h;
    const struct hint_expect e = {U, U, U, U, U, 0, 0};
    int64_t w = NO_VALUE;
    (void)state;
    memset(&h, 0x5a, sizeof h);
    stg_hints_init(&h);
    check_hints(&h, &e, "init");
    assert_false(stg_hints_server_wait(&h, &w));
    assert_int_equal(w, NO_VALUE);
    stg_hints_init(NULL);
}

/* A response: up to 4 header lines fed in order, then the expected result
 * and the return code of the last line. */
struct resp_case {
    const char *lines[4];
    int last_rc;
    struct hint_expect e;
};

static void run_resp_cases(const struct resp_case *cases, size_t n, int64_t now_us)
{
    for (size_t i = 0; i < n; i++) {
        stg_hints h;
        int rc = STG_OK;
        char what[160];
        stg_hints_init(&h);
        for (size_t j = 0; j < 4 && cases[i].lines[j]; j++)
            rc = header_line(&h, cases[i].lines[j], now_us);
        snprintf(what, sizeof what, "case %zu (%s)", i, cases[i].lines[0]);
        if (rc != cases[i].last_rc)
            fail_msg("%s: rc %d, want %d", what, rc, cases[i].last_rc);
        check_hints(&h, &cases[i].e, what);
    }
}

#define RA STG_HINT_RETRY_AFTER
#define XRL STG_HINT_X_RATELIMIT
#define RL STG_HINT_RATELIMIT
#define RLP STG_HINT_RATELIMIT_POLICY

static void test_x_ratelimit(void **state)
{
    static const struct resp_case cases[] = {
        {{"X-RateLimit-Limit: 100", "X-RateLimit-Remaining: 0", "X-RateLimit-Reset: 30"},
         STG_OK, {U, 100, 0, STG_SEC(30), U, XRL, 0}},
        /* names are case-insensitive; the reset is a Unix timestamp */
        {{"x-ratelimit-limit: 60", "X-RATELIMIT-REMAINING:7", "x-RateLimit-Reset: 1000000000"},
         STG_OK, {U, 60, 7, STG_SEC(1000000000 - NOW_S), U, XRL, 0}},
        /* a decimal delta reset; below 10^9 is a delta, however large */
        {{"X-RateLimit-Reset: 1.5"}, STG_OK, {U, U, U, 1500000, U, XRL, 0}},
        {{"X-RateLimit-Reset: 784111000"}, STG_OK, {U, U, U, STG_SEC(784111000), U, XRL, 0}},
        /* reset before remaining pairs the same way */
        {{"X-RateLimit-Reset: 30", "X-RateLimit-Remaining: 0"},
         STG_OK, {U, U, 0, STG_SEC(30), U, XRL, 0}},
        /* malformed values leave the field unknown */
        /* a negative count is unknown (Azure OpenAI sends -1), not spent */
        {{"X-RateLimit-Remaining: -1"}, STG_OK, {U, U, U, U, U, XRL, 0}},
        {{"X-RateLimit-Remaining: -x"}, STG_EPARSE, {U, U, U, U, U, 0, XRL}},
        {{"X-RateLimit-Remaining: 1.5"}, STG_EPARSE, {U, U, U, U, U, 0, XRL}},
        {{"X-RateLimit-Limit: lots"}, STG_EPARSE, {U, U, U, U, U, 0, XRL}},
        {{"X-RateLimit-Limit: 99999999999999999999"}, STG_ERANGE, {U, U, U, U, U, 0, XRL}},
        {{"X-RateLimit-Reset: soon"}, STG_EPARSE, {U, U, U, U, U, 0, XRL}},
        /* a reset too far to represent is the largest one (RFC 9111 1.2.2) */
        {{"X-RateLimit-Reset: 99999999999999"}, STG_ERANGE, {U, U, U, STG_WAIT_MAX_US, U, XRL, 0}},
        {{"X-RateLimit-Limit: 100", "X-RateLimit-Remaining: "},
         STG_EPARSE, {U, 100, U, U, U, XRL, XRL}},
        /* headers that are not hints are ignored */
        /* GitHub's used count and resource name carry no quota by themselves */
        {{"X-RateLimit-Used: 5", "X-RateLimit-Resource: core", "Content-Length: 0"},
         STG_OK, {U, U, U, U, U, XRL | STG_HINT_SCOPE, 0}},
        {{"Content-Length: 0", "X-Foo: 1"}, STG_OK, {U, U, U, U, U, 0, 0}},
    };
    (void)state;
    run_resp_cases(cases, N_ELEMS(cases), NOW_US);
}

static void test_ratelimit_items(void **state)
{
    static const struct resp_case cases[] = {
        {{"RateLimit: \"default\";r=0;t=10"}, STG_OK, {U, U, 0, STG_SEC(10), U, RL, 0}},
        {{"ratelimit: default;r=5;t=30"}, STG_OK, {U, U, 5, STG_SEC(30), U, RL, 0}},
        {{"RateLimit:\"default\";r=50"}, STG_OK, {U, U, 50, U, U, RL, 0}},
        {{"RateLimit: \"d\";t=1.5;r=3"}, STG_OK, {U, U, 3, 1500000, U, RL, 0}},
        /* most restrictive: least remaining, then longest reset */
        {{"RateLimit: \"a\";r=5;t=10, \"b\";r=0;t=30, \"c\";r=0;t=20"},
         STG_OK, {U, U, 0, STG_SEC(30), U, RL, 0}},
        {{"RateLimit: \"a\";r=1;t=100,\"b\";r=2;t=5"}, STG_OK, {U, U, 1, STG_SEC(100), U, RL, 0}},
        {{"RateLimit: \"a\";r=2;t=5 ,\t\"b\";r=1;t=100"},
         STG_OK, {U, U, 1, STG_SEC(100), U, RL, 0}},
        /* split over two field lines: the same rule */
        {{"RateLimit: \"a\";r=5;t=10", "RateLimit: \"b\";r=2;t=1"},
         STG_OK, {U, U, 2, STG_SEC(1), U, RL, 0}},
        {{"RateLimit: \"a\";r=2;t=1", "RateLimit: \"b\";r=5;t=10"},
         STG_OK, {U, U, 2, STG_SEC(1), U, RL, 0}},
        /* every kind of structured-field value and unknown parameter */
        {{"RateLimit: \"a\";r=0;t=10;pk=:cHJvamVjdC0xMjM=:;x=?1;y;d=@1659578233;"
          "s=\"a\\\"b\\\\\";ds=%\"caf%c3%a9\";n=-1.5;Tk=foo/bar, (\"x\" 1 ?0);r=3"},
         STG_OK, {U, U, 0, STG_SEC(10), U, RL, 0}},
        /* t is delta-seconds in every draft, however large */
        {{"RateLimit: \"a\";r=0;t=1000000000"},
         STG_OK, {U, U, 0, STG_SEC(1000000000), U, RL, 0}},
        /* too large to represent: the largest wait */
        {{"RateLimit: \"a\";r=0;t=99999999999"},
         STG_ERANGE, {U, U, 0, STG_WAIT_MAX_US, U, RL, 0}},
    };
    (void)state;
    run_resp_cases(cases, N_ELEMS(cases), NOW_US);
}

static void test_ratelimit_policy(void **state)
{
    static const struct resp_case cases[] = {
        {{"RateLimit-Policy: \"default\";q=100;w=60"},
         STG_OK, {U, 100, U, U, STG_SEC(60), RLP, 0}},
        {{"RateLimit-Policy: default;q=100"}, STG_OK, {U, 100, U, U, U, RLP, 0}},
        {{"RateLimit-Policy: \"default\";q=100;w=60;qu=\"requests\";pk=:AAE=:"},
         STG_OK, {U, 100, U, U, STG_SEC(60), RLP, 0}},
        /* lowest rate: 1000/day is stricter than 10/s */
        {{"RateLimit-Policy: \"burst\";q=10;w=1, \"daily\";q=1000;w=86400"},
         STG_OK, {U, 1000, U, U, STG_SEC(86400), RLP, 0}},
        {{"RateLimit-Policy: \"daily\";q=1000;w=86400, \"burst\";q=10;w=1"},
         STG_OK, {U, 1000, U, U, STG_SEC(86400), RLP, 0}},
        /* equal rates: the smaller quota */
        {{"RateLimit-Policy: \"a\";q=20;w=2, \"b\";q=10;w=1"},
         STG_OK, {U, 10, U, U, STG_SEC(1), RLP, 0}},
        /* a window beats none; two bare quotas: the smaller */
        {{"RateLimit-Policy: \"a\";q=5, \"b\";q=100;w=60"},
         STG_OK, {U, 100, U, U, STG_SEC(60), RLP, 0}},
        {{"RateLimit-Policy: \"a\";q=50, \"b\";q=7"}, STG_OK, {U, 7, U, U, U, RLP, 0}},
        /* draft-06/07: the item is the quota */
        {{"RateLimit-Policy: 10;w=1, 50;w=60"}, STG_OK, {U, 50, U, U, STG_SEC(60), RLP, 0}},
        {{"RateLimit-Policy: \"a\";q=10;w=0.5"}, STG_OK, {U, 10, U, U, 500000, RLP, 0}},
        /* with the live RateLimit field */
        {{"RateLimit-Policy: \"default\";q=100;w=60", "RateLimit: \"default\";r=0;t=42"},
         STG_OK, {U, 100, 0, STG_SEC(42), STG_SEC(60), RL | RLP, 0}},
    };
    (void)state;
    run_resp_cases(cases, N_ELEMS(cases), NOW_US);
}

static void test_ratelimit_dictionary_and_old_fields(void **state)
{
    static const struct resp_case cases[] = {
        /* draft-06/07 dictionary */
        {{"RateLimit: limit=100, remaining=50, reset=5"},
         STG_OK, {U, 100, 50, STG_SEC(5), U, RL, 0}},
        {{"RateLimit: reset=5,remaining=0,limit=10,foo=bar,baz"},
         STG_OK, {U, 10, 0, STG_SEC(5), U, RL, 0}},
        {{"RateLimit: remaining=3, remaining=1, reset=2.5"},
         STG_OK, {U, U, 1, 2500000, U, RL, 0}},
        {{"RateLimit: LIMIT=100;w=60, Remaining=0"}, STG_OK, {U, 100, 0, U, U, RL, 0}},
        /* older separate fields */
        {{"RateLimit-Limit: 100", "RateLimit-Remaining: 0", "RateLimit-Reset: 7"},
         STG_OK, {U, 100, 0, STG_SEC(7), U, RL, 0}},
        {{"RateLimit-Limit: 10, 10;w=1, 1000;w=3600"},
         STG_OK, {U, 1000, U, U, STG_SEC(3600), RL, 0}},
        {{"RateLimit-Reset: 1000000000"}, STG_OK, {U, U, U, STG_SEC(1000000000 - NOW_S), U, RL, 0}},
        /* X-RateLimit and RateLimit together: still the most restrictive */
        {{"X-RateLimit-Remaining: 10", "X-RateLimit-Reset: 60", "RateLimit: \"a\";r=0;t=5"},
         STG_OK, {U, U, 0, STG_SEC(5), U, XRL | RL, 0}},
    };
    (void)state;
    run_resp_cases(cases, N_ELEMS(cases), NOW_US);
}

static void test_ratelimit_malformed(void **state)
{
    static const struct resp_case cases[] = {
        {{"RateLimit: "}, STG_EPARSE, {U, U, U, U, U, 0, RL}},
        {{"RateLimit: \"default\";r=-1"}, STG_EPARSE, {U, U, U, U, U, 0, RL}},
        {{"RateLimit: \"default\";r=1.5"}, STG_EPARSE, {U, U, U, U, U, 0, RL}},
        {{"RateLimit: \"default\";r=\"0\""}, STG_EPARSE, {U, U, U, U, U, 0, RL}},
        {{"RateLimit: \"default\";r"}, STG_EPARSE, {U, U, U, U, U, 0, RL}},
        /* draft-10's own example without r=: reset information only */
        {{"RateLimit: \"default\";t=10"}, STG_OK, {U, U, U, STG_SEC(10), U, RL, 0}},
        {{"RateLimit: quota;t=1"}, STG_OK, {U, U, U, STG_SEC(1), U, RL, 0}},
        {{"RateLimit: \"default\""}, STG_EPARSE, {U, U, U, U, U, 0, RL}},
        {{"RateLimit: default;t=10"}, STG_OK, {U, U, U, STG_SEC(10), U, RL, 0}},
        {{"RateLimit: 5;t=10"}, STG_OK, {U, U, U, STG_SEC(10), U, RL, 0}},
        {{"RateLimit: default;t=x"}, STG_EPARSE, {U, U, U, U, U, 0, RL}},
        {{"RateLimit: \"default\";r=0;t=-1"}, STG_EPARSE, {U, U, U, U, U, 0, RL}},
        {{"RateLimit: \"default\";r=0;t=x"}, STG_EPARSE, {U, U, U, U, U, 0, RL}},
        {{"RateLimit: \"default\";r=0,"}, STG_EPARSE, {U, U, U, U, U, 0, RL}},
        {{"RateLimit: ,\"default\";r=0"}, STG_EPARSE, {U, U, U, U, U, 0, RL}},
        {{"RateLimit: \"default;r=0"}, STG_EPARSE, {U, U, U, U, U, 0, RL}},
        {{"RateLimit: \"a\";r=0 \"b\";r=1"}, STG_EPARSE, {U, U, U, U, U, 0, RL}},
        {{"RateLimit: \"a\";r=0;;t=1"}, STG_EPARSE, {U, U, U, U, U, 0, RL}},
        {{"RateLimit: \"a\";r=0;t=1."}, STG_EPARSE, {U, U, U, U, U, 0, RL}},
        {{"RateLimit: \"a\";r=0;k=:abc"}, STG_EPARSE, {U, U, U, U, U, 0, RL}},
        {{"RateLimit: \"a\";r=0;k=?2"}, STG_EPARSE, {U, U, U, U, U, 0, RL}},
        {{"RateLimit: \"a\";r=0;k=%\"%zz\""}, STG_EPARSE, {U, U, U, U, U, 0, RL}},
        {{"RateLimit: \"a\";r=0;k=@1.5"}, STG_EPARSE, {U, U, U, U, U, 0, RL}},
        {{"RateLimit: (\"a\" \"b\";r=0"}, STG_EPARSE, {U, U, U, U, U, 0, RL}},
        {{"RateLimit: \"a\x01\";r=0"}, STG_EPARSE, {U, U, U, U, U, 0, RL}},
        {{"RateLimit: \"a\";r=99999999999999999999999"}, STG_ERANGE, {U, U, U, U, U, 0, RL}},
        {{"RateLimit: limit=-5"}, STG_EPARSE, {U, U, U, U, U, 0, RL}},
        {{"RateLimit: limit=100, remaining=x"}, STG_EPARSE, {U, U, U, U, U, 0, RL}},
        {{"RateLimit: remaining=1, reset=-2"}, STG_EPARSE, {U, U, U, U, U, 0, RL}},
        {{"RateLimit-Policy: \"default\";w=60"}, STG_EPARSE, {U, U, U, U, U, 0, RLP}},
        {{"RateLimit-Policy: \"default\";q=100;w=0"}, STG_EPARSE, {U, U, U, U, U, 0, RLP}},
        {{"RateLimit-Policy: \"default\";q=-1"}, STG_EPARSE, {U, U, U, U, U, 0, RLP}},
        {{"RateLimit-Policy: \"default\";q=1.5"}, STG_EPARSE, {U, U, U, U, U, 0, RLP}},
        {{"RateLimit-Policy: limit=1"}, STG_EPARSE, {U, U, U, U, U, 0, RLP}},
        {{"RateLimit-Policy: \"a\";q=1;w=1, \"b\""}, STG_EPARSE, {U, U, U, U, U, 0, RLP}},
        {{"RateLimit-Limit: many"}, STG_EPARSE, {U, U, U, U, U, 0, RL}},
        {{"RateLimit-Limit: 10;w=-1"}, STG_EPARSE, {U, U, U, U, U, 0, RL}},
        {{"RateLimit-Remaining: -3"}, STG_EPARSE, {U, U, U, U, U, 0, RL}},
        {{"RateLimit-Reset: later"}, STG_EPARSE, {U, U, U, U, U, 0, RL}},
        /* a later malformed field changes nothing that came before */
        {{"RateLimit: \"a\";r=4;t=10", "RateLimit: \"b\";r=0;t=5, \"c\";r=-1"},
         STG_EPARSE, {U, U, 4, STG_SEC(10), U, RL, RL}},
    };
    (void)state;
    run_resp_cases(cases, N_ELEMS(cases), NOW_US);
}

static void test_header_lines(void **state)
{
    static const struct resp_case cases[] = {
        {{"Retry-After: 120\r\n"}, STG_OK, {STG_SEC(120), U, U, U, U, RA, 0}},
        {{"retry-after:120"}, STG_OK, {STG_SEC(120), U, U, U, U, RA, 0}},
        {{"RETRY-AFTER: \t 5 \t\r\n"}, STG_OK, {STG_SEC(5), U, U, U, U, RA, 0}},
        {{"Retry-After : 5\n"}, STG_OK, {STG_SEC(5), U, U, U, U, RA, 0}},
        {{"Retry-After: Sun, 06 Nov 1994 08:49:47 GMT\r\n"},
         STG_OK, {STG_SEC(10), U, U, U, U, RA, 0}},
        /* several Retry-After: the longest wait */
        {{"Retry-After: 5", "Retry-After: 50", "Retry-After: 7"},
         STG_OK, {STG_SEC(50), U, U, U, U, RA, 0}},
        {{"Retry-After: 0"}, STG_OK, {0, U, U, U, U, RA, 0}},
        {{"Retry-After: abc\r\n"}, STG_EPARSE, {U, U, U, U, U, 0, RA}},
        {{"Retry-After: 5", "Retry-After: 1.5"}, STG_OK, {STG_SEC(5), U, U, U, U, RA, 0}},
        {{"Retry-After: 1.5"}, STG_OK, {STG_SEC(2), U, U, U, U, RA, 0}},
        {{"Retry-After: 5", "Retry-After: 1.x"}, STG_EPARSE, {STG_SEC(5), U, U, U, U, RA, RA}},
        /* too large: the largest wait, not garbage (#15) */
        {{"Retry-After: 99999999999"}, STG_ERANGE, {STG_WAIT_MAX_US, U, U, U, U, RA, 0}},
        {{"Retry-After: 2147483648"}, STG_ERANGE, {STG_WAIT_MAX_US, U, U, U, U, RA, 0}},
        {{"Retry-After:"}, STG_EPARSE, {U, U, U, U, U, 0, RA}},
        /* lines that are not hints */
        {{"HTTP/1.1 429 Too Many Requests\r\n", "\r\n", "", "Content-Type: text/plain\r\n"},
         STG_OK, {U, U, U, U, U, 0, 0}},
        {{": 5", "Retry-After", "Retry-After-Not: 5", "X-Retry-After: 5"},
         STG_OK, {U, U, U, U, U, 0, 0}},
        /* the first colon splits; the value may hold more */
        {{"Retry-After: Sun, 06 Nov 1994 08:49:47 GMT"}, STG_OK, {STG_SEC(10), U, U, U, U, RA, 0}},
        {{"X-Foo: Retry-After: 5"}, STG_OK, {U, U, U, U, U, 0, 0}},
    };
    (void)state;
    run_resp_cases(cases, N_ELEMS(cases), NOW_US);
}

static void test_server_wait(void **state)
{
    stg_hints h;
    int64_t w;
    (void)state;

    stg_hints_init(&h);
    assert_false(stg_hints_server_wait(&h, &w));

    /* remaining 0 with a reset: the reset */
    assert_int_equal(header_line(&h, "X-RateLimit-Remaining: 0", NOW_US), STG_OK);
    assert_false(stg_hints_server_wait(&h, &w)); /* no reset yet */
    assert_int_equal(header_line(&h, "X-RateLimit-Reset: 30", NOW_US), STG_OK);
    w = NO_VALUE;
    assert_true(stg_hints_server_wait(&h, &w));
    assert_int_equal(w, STG_SEC(30));

    /* Retry-After wins over the reset, even when shorter */
    assert_int_equal(header_line(&h, "Retry-After: 3", NOW_US), STG_OK);
    assert_true(stg_hints_server_wait(&h, &w));
    assert_int_equal(w, STG_SEC(3));

    /* requests left: no wait asked for */
    stg_hints_init(&h);
    assert_int_equal(header_line(&h, "RateLimit: \"a\";r=1;t=30", NOW_US), STG_OK);
    w = NO_VALUE;
    assert_false(stg_hints_server_wait(&h, &w));
    assert_int_equal(w, NO_VALUE);

    /* RateLimit r=0: its t */
    assert_int_equal(header_line(&h, "RateLimit: \"b\";r=0;t=12", NOW_US), STG_OK);
    assert_true(stg_hints_server_wait(&h, &w));
    assert_int_equal(w, STG_SEC(12));

    /* Retry-After: 0 is a real answer */
    stg_hints_init(&h);
    assert_int_equal(header_line(&h, "Retry-After: 0", NOW_US), STG_OK);
    assert_true(stg_hints_server_wait(&h, &w));
    assert_int_equal(w, 0);
    assert_true(stg_hints_server_wait(&h, NULL));
    assert_false(stg_hints_server_wait(NULL, &w));

    /* a malformed Retry-After is no wait */
    stg_hints_init(&h);
    assert_int_equal(header_line(&h, "Retry-After: soon", NOW_US), STG_EPARSE);
    assert_false(stg_hints_server_wait(&h, &w));
}

static void test_bad_arguments(void **state)
{
    stg_hints h;
    int64_t v = NO_VALUE;
    (void)state;
    stg_hints_init(&h);
    assert_int_equal(stg_retry_after_parse("5", 1, 0, NULL), STG_EINVAL);
    assert_int_equal(stg_http_date_parse("5", 1, 0, NULL), STG_EINVAL);
    assert_int_equal(stg_ratelimit_reset_parse("5", 1, 0, NULL), STG_EINVAL);
    assert_int_equal(stg_retry_after_parse(NULL, 0, 0, &v), STG_EPARSE);
    assert_int_equal(stg_http_date_parse(NULL, 0, 0, &v), STG_EPARSE);
    assert_int_equal(stg_ratelimit_reset_parse(NULL, 0, 0, &v), STG_EPARSE);
    assert_int_equal(v, NO_VALUE);
    assert_int_equal(stg_hints_header(NULL, "Retry-After", 11, "5", 1, 0), STG_EINVAL);
    assert_int_equal(stg_hints_header_line(NULL, "Retry-After: 5", 14, 0), STG_EINVAL);
    assert_int_equal(stg_hints_header(&h, NULL, 0, "5", 1, 0), STG_OK);
    assert_int_equal(stg_hints_header(&h, "Retry-After", 11, NULL, 0, 0), STG_EPARSE);
    assert_int_equal(stg_hints_header_line(&h, NULL, 0, 0), STG_OK);
    /* the length is honoured, not the NUL */
    stg_hints_init(&h);
    assert_int_equal(stg_hints_header(&h, "Retry-After-X", 11, "52", 1, 0), STG_OK);
    assert_int_equal(h.retry_after_us, STG_SEC(5));
    assert_int_equal(header(&h, "Retry-After", "  9  ", 0), STG_OK);
    assert_int_equal(h.retry_after_us, STG_SEC(9));
}

/* Every kind of value through an exact-size buffer, at every prefix and
 * suffix: ASan reports any read outside it. */
static void test_no_overread(void **state)
{
    static const char *const values[] = {
        "120",
        "Sun, 06 Nov 1994 08:49:47 GMT",
        "Sunday, 06-Nov-94 08:49:47 GMT",
        "Sun Nov  6 08:49:47 1994",
        "1700000030.5",
        "\"a\";r=0;t=10;pk=:cHJvamVjdC0xMjM=:;x=?1;d=@1659578233;ds=%\"caf%c3%a9\", (1 2);r=3",
        "limit=100, remaining=50, reset=5",
        "\"burst\";q=10;w=1, \"daily\";q=1000;w=86400",
        "10, 10;w=1, 1000;w=3600",
        "\"a\\\"b\";r=1",
    };
    static const char *const names[] = {
        "Retry-After",           "X-RateLimit-Limit",   "X-RateLimit-Remaining",
        "X-RateLimit-Reset",     "RateLimit",           "RateLimit-Policy",
        "RateLimit-Limit",       "RateLimit-Remaining", "RateLimit-Reset",
    };
    char line[256];
    (void)state;
    for (size_t i = 0; i < N_ELEMS(values); i++) {
        size_t len = strlen(values[i]);
        for (size_t a = 0; a <= len; a++) {
            for (size_t b = a; b <= len; b++) {
                int64_t v;
                size_t n = b - a;
                char *p = dup_exact(values[i] + a, n);
                (void)stg_retry_after_parse(p, n, NOW_US, &v);
                (void)stg_http_date_parse(p, n, NOW_US, &v);
                (void)stg_ratelimit_reset_parse(p, n, NOW_US, &v);
                for (size_t k = 0; k < N_ELEMS(names); k++) {
                    stg_hints h;
                    stg_hints_init(&h);
                    (void)stg_hints_header(&h, names[k], strlen(names[k]), p, n, NOW_US);
                }
                free(p);
            }
        }
        for (size_t k = 0; k < N_ELEMS(names); k++) {
            int n = snprintf(line, sizeof line, "%s: %s\r\n", names[k], values[i]);
            assert_true(n > 0 && (size_t)n < sizeof line);
            for (size_t m = 0; m <= (size_t)n; m++) {
                stg_hints h;
                char *p = dup_exact(line, m);
                stg_hints_init(&h);
                (void)stg_hints_header_line(&h, p, m, NOW_US);
                free(p);
            }
        }
    }
}

/* Parameters are read by letter (sfv.c keeps every one-letter parameter,
 * case folded): the upper-case spelling counts, another letter never stands
 * in for the one a field needs, and a longer key never counts as a letter. */
static void test_parameter_letters(void **state)
{
    (void)state;
    static const char *const rl_ok = "\"a\";R=3;T=7";
    static const char *const rl_no_r[] = {"\"a\";q=3;tt=7", "\"a\";rr=3", "\"a\";x=3"};
    static const char *const pol_ok = "\"p\";Q=10;W=60;z=1";
    stg_hints h;

    stg_hints_init(&h);
    assert_int_equal(stg_hints_header(&h, "RateLimit", 9, rl_ok, strlen(rl_ok), NOW_US), STG_OK);
    assert_int_equal(h.remaining, 3);
    assert_int_equal(h.reset_us, STG_SEC(7));
    for (size_t i = 0; i < sizeof rl_no_r / sizeof rl_no_r[0]; i++) {
        stg_hints_init(&h);
        assert_int_equal(
            stg_hints_header(&h, "RateLimit", 9, rl_no_r[i], strlen(rl_no_r[i]), NOW_US),
            STG_EPARSE);
        assert_int_equal(h.remaining, STG_UNKNOWN);
        assert_int_equal(h.malformed, STG_HINT_RATELIMIT);
    }
    stg_hints_init(&h);
    assert_int_equal(
        stg_hints_header(&h, "RateLimit-Policy", 16, pol_ok, strlen(pol_ok), NOW_US), STG_OK);
    assert_int_equal(h.limit, 10);
    assert_int_equal(h.window_us, STG_SEC(60));
}

/* ------------------------------------------------------------------------ */
/* Quota sets: several quotas of one response, fed header by header        */

/* Feed "Name: value" lines (each an exact-length copy) into h and qs. */
static void feed_lines(stg_hints *h, stg_quota_set *qs, const char *const *lines, size_t n,
                       int64_t now_us)
{
    for (size_t i = 0; i < n; i++) {
        size_t len = strlen(lines[i]);
        char *p = dup_exact(lines[i], len);
        (void)stg_hints_feed_line(h, qs, p, len, now_us);
        free(p);
    }
}

/* fuzz_feed's finding: an unkeyed count without a unit (IETF -07
 * "remaining=0", no reset) was merged into OpenAI's unkeyed tokens quota,
 * and took its 6 min reset as the server's wait: longer than the wait
 * read without a set. It is a quota of its own (requests), in either
 * order of the fields, and the set's wait is never longer. */
static void test_quota_set_unit_unsaid(void **state)
{
    (void)state;
    static const char *const a[] = {"x-ratelimit-reset-tokens: 6m0s",
                                     "RateLimit: \"day\";r=1;t=36",
                                     "RateLimit: limit=100, remaining=0"};
    static const char *const b[] = {"RateLimit: limit=100, remaining=0",
                                    "RateLimit: \"day\";r=1;t=36",
                                    "x-ratelimit-reset-tokens: 6m0s"};
    const char *const *orders[] = {a, b};
    for (int k = 0; k < 2; k++) {
        stg_hints h, plain;
        stg_quota_set qs;
        stg_hints_init(&h);
        stg_hints_init(&plain);
        stg_quota_set_init(&qs);
        feed_lines(&h, &qs, orders[k], 3, NOW_US);
        feed_lines(&plain, NULL, orders[k], 3, NOW_US);
        assert_int_equal(qs.n, 3);
        int tokens = 0, requests = 0;
        for (size_t i = 0; i < qs.n; i++) {
            if (!qs.q[i].key[0] && !strcmp(qs.q[i].unit, "tokens")) {
                tokens++;
                assert_int_equal(qs.q[i].remaining, STG_UNKNOWN);
                assert_int_equal(qs.q[i].reset_us, STG_SEC(360));
            }
            if (!qs.q[i].key[0] && !strcmp(qs.q[i].unit, "requests")) {
                requests++;
                assert_int_equal(qs.q[i].remaining, 0);
                assert_int_equal(qs.q[i].reset_us, STG_UNKNOWN);
            }
        }
        assert_int_equal(tokens, 1);
        assert_int_equal(requests, 1);
        int64_t ws = -1, wp = -1;
        bool hs = stg_hints_server_wait(&h, &ws), hp = stg_hints_server_wait(&plain, &wp);
        assert_true(!hs || (hp && wp >= ws));
    }
}

/* fuzz_feed's fourth finding: a draft-10 policy with qu="" made a quota
 * whose unit was the empty string. An empty unit names none: the quota is
 * in the default unit, requests, like one without qu. */
static void test_quota_set_empty_unit(void **state)
{
    (void)state;
    static const char *const lines[] = {"RateLimit-Policy: \"user\";q=100;qu=\"\";w=60",
                                        "RateLimit: \"user\";r=0;t=30"};
    stg_hints h;
    stg_quota_set qs;
    stg_hints_init(&h);
    stg_quota_set_init(&qs);
    feed_lines(&h, &qs, lines, N_ELEMS(lines), NOW_US);
    assert_int_equal(qs.n, 1);
    assert_string_equal(qs.q[0].key, "user");
    assert_string_equal(qs.q[0].unit, "requests");
    assert_int_equal(qs.q[0].limit, 100);
    assert_int_equal(qs.q[0].remaining, 0);
    assert_int_equal(qs.q[0].reset_us, STG_SEC(30));
}

/* fuzz_feed's second finding: read without a set, a reset field with no
 * count (X's epoch, 62 days) gave way to a later policy's shorter t, and a
 * remaining=0 after it then waited 1 s where the set's reading waits the
 * 62 days: "least remaining, longest reset" keeps the longer reset. */
static void test_plain_keeps_lone_reset(void **state)
{
    (void)state;
    static const char *const lines[] = {"x-rate-limit-reset: 1705420800",
                                        "RateLimit: \"sliding\";q=12;r=6;t=1",
                                        "X-RateLimit-Remaining: 0"};
    stg_hints h, plain;
    stg_quota_set qs;
    stg_hints_init(&h);
    stg_hints_init(&plain);
    stg_quota_set_init(&qs);
    feed_lines(&h, &qs, lines, N_ELEMS(lines), STG_SEC(1700000000));
    feed_lines(&plain, NULL, lines, N_ELEMS(lines), STG_SEC(1700000000));
    int64_t ws = -1, wp = -1;
    assert_true(stg_hints_server_wait(&plain, &wp));
    assert_int_equal(plain.remaining, 0);
    assert_int_equal(wp, STG_SEC(1705420800 - 1700000000));
    bool hs = stg_hints_server_wait(&h, &ws);
    assert_true(!hs || wp >= ws);

    /* In a set, a quota's own fields pair as they come: a reset another
     * list item left on the unkeyed quota (t=3400) does not outlast the
     * count's own reset (fuzz_feed's third input: 3400 s against 4 s). */
    static const char *const l2[] = {"RateLimit: \"day\";r=10,0;t=3400",
                                     "RateLimit: limit=100, remaining=0, reset=4"};
    stg_hints_init(&h);
    stg_hints_init(&plain);
    stg_quota_set_init(&qs);
    feed_lines(&h, &qs, l2, N_ELEMS(l2), STG_SEC(1700000000));
    feed_lines(&plain, NULL, l2, N_ELEMS(l2), STG_SEC(1700000000));
    assert_true(stg_hints_server_wait(&h, &ws));
    assert_true(stg_hints_server_wait(&plain, &wp));
    assert_int_equal(ws, STG_SEC(4));
    assert_true(wp >= ws);
}

static void test_quota_set_x_ratelimit(void **state)
{
    static const char *const lines[] = {"X-RateLimit-Limit: 60", "X-RateLimit-Remaining: 0",
                                        "X-RateLimit-Reset: 30"};
    stg_hints h;
    stg_quota_set qs;
    (void)state;
    stg_hints_init(&h);
    stg_quota_set_init(&qs);
    feed_lines(&h, &qs, lines, N_ELEMS(lines), NOW_US);
    assert_int_equal(qs.n, 1);
    assert_false(qs.truncated);
    assert_string_equal(qs.q[0].key, "");
    assert_string_equal(qs.q[0].unit, "requests");
    assert_int_equal(qs.q[0].limit, 60);
    assert_int_equal(qs.q[0].remaining, 0);
    assert_int_equal(qs.q[0].reset_us, STG_SEC(30));
    assert_string_equal(stg_dialect_name(qs.q[0].dialect), "x-ratelimit");
    /* The same lines without a set give the same summary. */
    stg_hints h2;
    stg_hints_init(&h2);
    feed_lines(&h2, NULL, lines, N_ELEMS(lines), NOW_US);
    assert_int_equal(h2.remaining, h.remaining);
    assert_int_equal(h2.reset_us, h.reset_us);
    assert_int_equal(h2.limit, h.limit);
}

/* The value syntaxes of the vendor rows, through the feed (quota set). */
struct vendor_case {
    const char *line;
    int rc;
    int64_t reset_us; /* the one quota's reset, or the wait */
};

static void test_vendor_values(void **state)
{
    static const struct vendor_case cases[] = {
        /* Go durations (OpenAI) */
        {"x-ratelimit-reset-requests: 0", STG_OK, 0},
        {"x-ratelimit-reset-requests: 0s", STG_OK, 0},
        {"x-ratelimit-reset-requests: 12ms", STG_OK, STG_MS(12)},
        {"x-ratelimit-reset-requests: 6m0s", STG_OK, STG_SEC(360)},
        {"x-ratelimit-reset-requests: 1h2m3.5s", STG_OK, STG_MS(3723500)},
        {"x-ratelimit-reset-requests: 1.5h", STG_OK, STG_SEC(5400)},
        {"x-ratelimit-reset-requests: 500us", STG_OK, 500},
        {"x-ratelimit-reset-requests: 7\xc2\xb5s", STG_OK, 7},
        {"x-ratelimit-reset-requests: 1ns", STG_OK, 1},    /* rounded up */
        {"x-ratelimit-reset-requests: 1001ns", STG_OK, 2},
        {"x-ratelimit-reset-requests: 0.0000000001s", STG_OK, 1},
        {"x-ratelimit-reset-requests: .5s", STG_OK, STG_MS(500)},
        {"x-ratelimit-reset-requests: 1h1h", STG_OK, STG_SEC(7200)},
        {"x-ratelimit-reset-requests: 99999999h", STG_ERANGE, STG_WAIT_MAX_US},
        {"x-ratelimit-reset-requests: 99999999999999999999999s", STG_ERANGE, STG_WAIT_MAX_US},
        {"x-ratelimit-reset-requests: -1s", STG_EPARSE, U},
        {"x-ratelimit-reset-requests: 1S", STG_EPARSE, U},
        {"x-ratelimit-reset-requests: 1", STG_EPARSE, U},
        {"x-ratelimit-reset-requests: s", STG_EPARSE, U},
        {"x-ratelimit-reset-requests: 1.s", STG_OK, STG_SEC(1)},
        {"x-ratelimit-reset-requests: 1e3s", STG_EPARSE, U},
        {"x-ratelimit-reset-requests: 1d", STG_EPARSE, U},
        {"x-ratelimit-reset-requests:", STG_EPARSE, U},
        /* RFC 3339 (Anthropic); now is 1994-11-06T08:49:37Z */
        {"anthropic-ratelimit-requests-reset: 1994-11-06T08:49:47Z", STG_OK, STG_SEC(10)},
        {"anthropic-ratelimit-requests-reset: 1994-11-06t08:49:47z", STG_OK, STG_SEC(10)},
        {"anthropic-ratelimit-requests-reset: 1994-11-06 08:49:47Z", STG_OK, STG_SEC(10)},
        {"anthropic-ratelimit-requests-reset: 1994-11-06T10:49:47+02:00", STG_OK, STG_SEC(10)},
        {"anthropic-ratelimit-requests-reset: 1994-11-06T03:49:47-05:00", STG_OK, STG_SEC(10)},
        {"anthropic-ratelimit-requests-reset: 1994-11-06T08:49:37.25Z", STG_OK, 250000},
        {"anthropic-ratelimit-requests-reset: 1994-11-06T08:49:37.0000001Z", STG_OK, 1},
        {"anthropic-ratelimit-requests-reset: 1994-11-06T08:49:00Z", STG_OK, 0},
        {"anthropic-ratelimit-requests-reset: 1994-11-06T08:49:47", STG_EPARSE, U},
        {"anthropic-ratelimit-requests-reset: 1994-11-06", STG_EPARSE, U},
        {"anthropic-ratelimit-requests-reset: 1994-13-06T08:49:47Z", STG_EPARSE, U},
        {"anthropic-ratelimit-requests-reset: 1994-02-29T08:49:47Z", STG_EPARSE, U},
        {"anthropic-ratelimit-requests-reset: 1994-11-06T08:49:47+2:00", STG_EPARSE, U},
        {"anthropic-ratelimit-requests-reset: 1994-11-06T08:49:47.Z", STG_EPARSE, U},
        {"anthropic-ratelimit-requests-reset: 784111787", STG_EPARSE, U},
        {"anthropic-ratelimit-requests-reset: 9999-12-31T23:59:59Z", STG_ERANGE, STG_WAIT_MAX_US},
        /* Discord's float seconds */
        {"X-RateLimit-Reset-After: 64.57", STG_OK, 64570000},
        {"X-RateLimit-Reset-After: 1", STG_OK, STG_SEC(1)},
        {"X-RateLimit-Reset-After: -1", STG_EPARSE, U},
        {"X-RateLimit-Reset-After: 1e2", STG_EPARSE, U},
        {"X-RateLimit-Reset-After: 99999999999", STG_ERANGE, STG_WAIT_MAX_US},
    };
    (void)state;
    for (size_t i = 0; i < N_ELEMS(cases); i++) {
        stg_hints h;
        stg_quota_set qs;
        size_t len = strlen(cases[i].line);
        char *p = dup_exact(cases[i].line, len);
        stg_hints_init(&h);
        stg_quota_set_init(&qs);
        int rc = stg_hints_feed_line(&h, &qs, p, len, NOW_US);
        free(p);
        int64_t got = qs.n == 1 ? qs.q[0].reset_us : U;
        if (rc != cases[i].rc || got != cases[i].reset_us || qs.n != (cases[i].reset_us != U))
            fail_msg("case %zu (%s): rc %d reset %lld (%zu quotas), want rc %d reset %lld", i,
                     cases[i].line, rc, (long long)got, qs.n, cases[i].rc,
                     (long long)cases[i].reset_us);
        if (rc == STG_ERANGE)
            assert_int_equal(h.oversized, STG_HINT_X_RATELIMIT);
    }
}

/* Every dialect has a name; header names match their row only as a whole. */
static void test_dialect_names(void **state)
{
    static const char *const not_hints[] = {
        "x-ratelimit-reset-afterwards: 1", "x-ratelimit-limit-tokensx: 5",
        "x-ratelimit-limit-: 5",           "anthropic-ratelimit--limit: 5",
        "anthropic-ratelimit-tokens: 5",   "xx-ratelimit-limit: 5",
        "x-ratelimit-limit-requests-tokens: 5",
    };
    (void)state;
    for (int d = 1; d < STG_DIALECT_COUNT; d++) {
        assert_string_not_equal(stg_dialect_name(d), "unknown");
        for (int e = 1; e < d; e++)
            assert_string_not_equal(stg_dialect_name(d), stg_dialect_name(e));
    }
    assert_string_equal(stg_dialect_name(STG_DIALECT_COUNT), "unknown");
    assert_string_equal(stg_dialect_name(-1), "unknown");
    for (size_t i = 0; i < N_ELEMS(not_hints); i++) {
        stg_hints h;
        stg_quota_set qs;
        stg_hints_init(&h);
        stg_quota_set_init(&qs);
        assert_int_equal(stg_hints_feed_line(&h, &qs, not_hints[i], strlen(not_hints[i]), NOW_US),
                         STG_OK);
        if (h.seen || h.malformed || qs.n)
            fail_msg("%s read as a hint", not_hints[i]);
    }
}

/* More quotas than the set holds: flagged, and they still count. */
static void test_quota_set_full(void **state)
{
    stg_hints h;
    stg_quota_set qs;
    char line[128];
    (void)state;
    stg_hints_init(&h);
    stg_quota_set_init(&qs);
    for (int i = 0; i < STG_QUOTAS_MAX + 3; i++) {
        snprintf(line, sizeof line, "RateLimit: \"p%d\";r=%d;t=%d", i,
                 i == STG_QUOTAS_MAX + 1 ? 0 : 5, 10 + i);
        assert_int_equal(stg_hints_feed_line(&h, &qs, line, strlen(line), NOW_US), STG_OK);
    }
    assert_int_equal(qs.n, STG_QUOTAS_MAX);
    assert_true(qs.truncated);
    /* the spent one did not fit, yet it is the server's wait */
    assert_int_equal(h.remaining, 0);
    int64_t w = -1;
    assert_true(stg_hints_server_wait(&h, &w));
    assert_int_equal(w, STG_SEC(10 + STG_QUOTAS_MAX + 1));
}

/* stg_hints_body: Google's RetryInfo durations (each value an exact-length
 * copy), the per-day quota names, the vendors' words, and what is left
 * alone. */
static int body(stg_hints *h, int status, int dialect, stg_body_field f, const char *v)
{
    char *p = dup_exact(v, strlen(v));
    int rc = stg_hints_body(h, status, dialect, f, p, strlen(v));
    free(p);
    return rc;
}

static void test_hints_body(void **state)
{
    (void)state;
    static const struct {
        const char *v;
        int rc;
        int64_t us;
    } delays[] = {
        {"37s", STG_OK, STG_SEC(37)},
        {"0s", STG_OK, 0},
        {"1.5s", STG_OK, STG_MS(1500)},
        {"0.250s", STG_OK, STG_MS(250)},
        {"0.000000001s", STG_OK, 1}, /* rounded up, never down */
        {"3.000001999s", STG_OK, STG_SEC(3) + 2},
        {"2147483647s", STG_OK, INT64_C(2147483647) * 1000000},
        {"2147483648s", STG_ERANGE, STG_WAIT_MAX_US},
        {"315576000000.999999999s", STG_ERANGE, STG_WAIT_MAX_US},
        {"-1s", STG_EPARSE, STG_UNKNOWN},
        {"37", STG_EPARSE, STG_UNKNOWN},
        {"s", STG_EPARSE, STG_UNKNOWN},
        {"", STG_EPARSE, STG_UNKNOWN},
        {".5s", STG_EPARSE, STG_UNKNOWN},
        {"1.s", STG_EPARSE, STG_UNKNOWN},
        {"1.0000000001s", STG_EPARSE, STG_UNKNOWN}, /* 10 fraction digits */
        {"1e3s", STG_EPARSE, STG_UNKNOWN},
        {" 1s", STG_EPARSE, STG_UNKNOWN},
        {"1s ", STG_EPARSE, STG_UNKNOWN},
        {"1m", STG_EPARSE, STG_UNKNOWN},
    };
    for (size_t i = 0; i < N_ELEMS(delays); i++) {
        stg_hints h;
        stg_hints_init(&h);
        assert_int_equal(body(&h, 429, STG_DIALECT_GOOGLE, STG_BODY_RETRY_DELAY, delays[i].v),
                         delays[i].rc);
        assert_int_equal(h.retry_after_us, delays[i].us);
        assert_int_equal((h.malformed & STG_HINT_BODY) != 0, delays[i].rc == STG_EPARSE);
        assert_int_equal((h.oversized & STG_HINT_BODY) != 0, delays[i].rc == STG_ERANGE);
        assert_int_equal((h.seen & STG_HINT_BODY) != 0, delays[i].rc != STG_EPARSE);
    }
    /* Merged like a second Retry-After: the longer wait. */
    stg_hints h;
    stg_hints_init(&h);
    assert_int_equal(stg_hints_header_line(&h, "Retry-After: 9", 14, 0), STG_OK);
    assert_int_equal(body(&h, 429, STG_DIALECT_GOOGLE, STG_BODY_RETRY_DELAY, "3s"), STG_OK);
    assert_int_equal(h.retry_after_us, STG_SEC(9));
    assert_int_equal(body(&h, 429, STG_DIALECT_GOOGLE, STG_BODY_RETRY_DELAY, "12.5s"), STG_OK);
    assert_int_equal(h.retry_after_us, STG_MS(12500));
    assert_true(h.dialects & (1u << STG_DIALECT_GOOGLE));

    /* Per-day quota names: a hard stop; per minute: none. */
    static const char *const per_day[] = {"GenerateRequestsPerDayPerProjectPerModel-FreeTier",
                                          "aiplatform.googleapis.com/requests_per_day",
                                          "generate-content-per-day", "PERDAY"};
    static const char *const not_day[] = {"GenerateContentInputTokensPerModelPerMinute-FreeTier",
                                          "generate_content_requests_per_minute_per_project",
                                          "PerDa", "dayPer", "Per Day", ""};
    for (size_t i = 0; i < N_ELEMS(per_day); i++) {
        stg_hints_init(&h);
        assert_int_equal(body(&h, 429, STG_DIALECT_GOOGLE, STG_BODY_QUOTA_ID, per_day[i]), STG_OK);
        assert_true(h.flags & STG_HINTS_HARD_STOP);
    }
    for (size_t i = 0; i < N_ELEMS(not_day); i++) {
        stg_hints_init(&h);
        assert_int_equal(body(&h, 429, STG_DIALECT_GOOGLE, STG_BODY_QUOTA_ID, not_day[i]), STG_OK);
        assert_int_equal(h.flags, 0);
    }

    /* The vendors' words, each in its own dialect and field only. */
    stg_hints_init(&h);
    body(&h, 429, STG_DIALECT_OPENAI, STG_BODY_ERROR_CODE, "insufficient_quota");
    assert_int_equal(h.flags, STG_HINTS_HARD_STOP);
    assert_true(h.seen & STG_HINT_BODY);
    stg_hints_init(&h);
    body(&h, 429, STG_DIALECT_ANTHROPIC, STG_BODY_ERROR_CODE, "insufficient_quota");
    body(&h, 429, STG_DIALECT_OPENAI, STG_BODY_ERROR_STATUS, "insufficient_quota");
    body(&h, 429, STG_DIALECT_OPENAI, STG_BODY_ERROR_TYPE, "Insufficient_quota");
    body(&h, 429, STG_DIALECT_OPENAI, STG_BODY_ERROR_TYPE, "insufficient_quota_x");
    body(&h, 429, STG_DIALECT_GOOGLE, STG_BODY_ERROR_TYPE, "RESOURCE_EXHAUSTED");
    body(&h, 429, STG_DIALECT_X, STG_BODY_ERROR_TYPE, "insufficient_quota");
    body(&h, 200, STG_DIALECT_OPENAI, STG_BODY_ERROR_TYPE, "insufficient_quota");
    assert_int_equal(h.flags, 0);
    assert_int_equal(h.seen, 0);
    body(&h, 529, STG_DIALECT_ANTHROPIC, STG_BODY_ERROR_TYPE, "overloaded_error");
    assert_int_equal(h.flags, STG_HINTS_THROTTLE);
    /* A throttle's words on a 400 are not a refusal to wait out. */
    stg_hints_init(&h);
    body(&h, 400, STG_DIALECT_ANTHROPIC, STG_BODY_ERROR_TYPE, "overloaded_error");
    assert_int_equal(h.flags, 0);
    body(&h, 402, STG_DIALECT_ANTHROPIC, STG_BODY_ERROR_TYPE, "billing_error");
    assert_int_equal(h.flags, STG_HINTS_HARD_STOP);
    assert_int_equal(stg_hints_body(NULL, 429, STG_DIALECT_OPENAI, STG_BODY_ERROR_TYPE, "x", 1),
                     STG_EINVAL);
    assert_int_equal(stg_hints_body(&h, 429, STG_DIALECT_OPENAI, STG_BODY_ERROR_TYPE, NULL, 1),
                     STG_EINVAL);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_retry_after_delta),
        cmocka_unit_test(test_retry_after_dates),
        cmocka_unit_test(test_retry_after_subsecond_now),
        cmocka_unit_test(test_http_date_valid),
        cmocka_unit_test(test_http_date_invalid),
        cmocka_unit_test(test_http_date_truncated),
        cmocka_unit_test(test_rfc850_century),
        cmocka_unit_test(test_http_date_format),
        cmocka_unit_test(test_http_date_roundtrip),
        cmocka_unit_test(test_ratelimit_reset),
        cmocka_unit_test(test_hints_init),
        cmocka_unit_test(test_x_ratelimit),
        cmocka_unit_test(test_ratelimit_items),
        cmocka_unit_test(test_ratelimit_policy),
        cmocka_unit_test(test_ratelimit_dictionary_and_old_fields),
        cmocka_unit_test(test_ratelimit_malformed),
        cmocka_unit_test(test_header_lines),
        cmocka_unit_test(test_server_wait),
        cmocka_unit_test(test_bad_arguments),
        cmocka_unit_test(test_no_overread),
        cmocka_unit_test(test_parameter_letters),
        cmocka_unit_test(test_quota_set_x_ratelimit),
        cmocka_unit_test(test_quota_set_unit_unsaid),
        cmocka_unit_test(test_quota_set_empty_unit),
        cmocka_unit_test(test_plain_keeps_lone_reset),
        cmocka_unit_test(test_vendor_values),
        cmocka_unit_test(test_dialect_names),
        cmocka_unit_test(test_quota_set_full),
        cmocka_unit_test(test_hints_body),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
