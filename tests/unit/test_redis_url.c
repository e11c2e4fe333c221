/*
 * Unit tests of libstagger-redis that need no server: URL and fallback
 * parsing, the redacted URL, and the checks stg_redis_limiter_new makes
 * before it connects anywhere.
 */
#include <string.h>

#include "cmocka_all.h"

#include <stagger/redis.h>

static void url_ok(const char *s, const char *host, int port, int db, const char *user,
                   const char *pass, const char *key)
{
    stg_redis_url u;
    const char *why = NULL;
    int rc = stg_redis_url_parse(s, &u, &why);
    if (rc != STG_OK)
        fail_msg("%s: %s (%s)", s, stg_errname(rc), why ? why : "?");
    assert_string_equal(u.host, host);
    assert_int_equal(u.port, port);
    assert_int_equal(u.db, db);
    assert_string_equal(u.user, user);
    assert_string_equal(u.password, pass);
    assert_string_equal(u.key, key);
}

static void url_bad(const char *s, int want, const char *why_has)
{
    stg_redis_url u;
    const char *why = NULL;
    int rc = stg_redis_url_parse(s, &u, &why);
    if (rc != want)
        fail_msg("%s: got %s, want %s", s, stg_errname(rc), stg_errname(want));
    assert_non_null(why);
    if (!strstr(why, why_has))
        fail_msg("%s: message '%s' lacks '%s'", s, why, why_has);
    /* a bad URL never leaves a password behind */
    assert_string_equal(u.password, "");
}

static void test_url_forms(void **state)
{
    (void)state;
    url_ok("redis://127.0.0.1:6380/jobs", "127.0.0.1", 6380, 0, "", "", "jobs");
    url_ok("redis://localhost", "localhost", 6379, 0, "", "", "");
    url_ok("redis://localhost/", "localhost", 6379, 0, "", "", "");
    url_ok("REDIS://h:1/k", "h", 1, 0, "", "", "k");
    url_ok("redis://h/2/jobs", "h", 6379, 2, "", "", "jobs");
    url_ok("redis://h/2", "h", 6379, 0, "", "", "2"); /* a lone segment is the key */
    url_ok("redis://h/2/", "h", 6379, 2, "", "", "");
    url_ok("redis://h/2/a/b", "h", 6379, 2, "", "", "a/b");
    url_ok("redis://h/x2/a", "h", 6379, 0, "", "", "x2/a");
    url_ok("redis://:s3cret@h:7000/k", "h", 7000, 0, "", "s3cret", "k");
    url_ok("redis://bob:pw@h/k", "h", 6379, 0, "bob", "pw", "k");
    url_ok("redis://:p%40ss%2Fw%3Ard@h/k", "h", 6379, 0, "", "p@ss/w:rd", "k");
    url_ok("redis://:a@b@h/k", "h", 6379, 0, "", "a@b", "k"); /* last '@' ends userinfo */
    url_ok("redis://[::1]:6390/k%20x", "::1", 6390, 0, "", "", "k x");
    url_ok("redis://[::1]/k", "::1", 6379, 0, "", "", "k");
    url_ok("redis://h:65535/9999/api.example.com", "h", 65535, 9999, "", "", "api.example.com");
    url_ok("rediss://:pw@h:6380/k", "h", 6380, 0, "", "pw", "k");
    url_ok("REDISS://h/k", "h", 6379, 0, "", "", "k");

    stg_redis_url u;
    assert_int_equal(stg_redis_url_parse("rediss://h/k", &u, NULL), STG_OK);
    assert_true(u.tls);
    assert_int_equal(stg_redis_url_parse("redis://h/k", &u, NULL), STG_OK);
    assert_false(u.tls);
}

static void test_url_errors(void **state)
{
    (void)state;
    url_bad("http://h/k", STG_EPARSE, "redis://");
    url_bad("redis+tls://h/k", STG_EPARSE, "rediss://");
    url_bad("redis://", STG_EPARSE, "no host");
    url_bad("redis:///k", STG_EPARSE, "no host");
    url_bad("redis://:pw@/k", STG_EPARSE, "no host");
    url_bad("redis://h:0/k", STG_ERANGE, "1-65535");
    url_bad("redis://h:65536/k", STG_ERANGE, "1-65535");
    url_bad("redis://h:abc/k", STG_EPARSE, "port");
    url_bad("redis://h:/k", STG_EPARSE, "port");
    url_bad("redis://h/10000/k", STG_ERANGE, "database");
    url_bad("redis://pw@h/k", STG_EPARSE, "userinfo");
    url_bad("redis://user:@h/k", STG_EPARSE, "empty password");
    url_bad("redis://:p%4@h/k", STG_EPARSE, "percent");
    url_bad("redis://:p%zz@h/k", STG_EPARSE, "percent");
    url_bad("redis://h/k%00", STG_EPARSE, "%00");
    url_bad("redis://h/k?db=1", STG_EPARSE, "query");
    url_bad("redis://h/k#x", STG_EPARSE, "fragment");
    url_bad("redis://h/a b", STG_EPARSE, "spaces");
    url_bad("redis://[::1/k", STG_EPARSE, "IPv6");
    url_bad("redis://[::1]x/k", STG_EPARSE, "after ']'");
    url_bad("redis://h$t/k", STG_EPARSE, "host");

    char longkey[400] = "redis://h/";
    memset(longkey + 10, 'k', 300);
    url_bad(longkey, STG_ERANGE, "key too long");

    stg_redis_url u;
    const char *why = NULL;
    assert_int_equal(stg_redis_url_parse(NULL, &u, &why), STG_EINVAL);
    assert_int_equal(stg_redis_url_parse("redis://h", NULL, NULL), STG_EINVAL);
    assert_int_equal(stg_redis_url_parse("bad", &u, NULL), STG_EPARSE); /* why may be NULL */
}

static void test_url_format_redacts(void **state)
{
    (void)state;
    stg_redis_url u;
    char buf[800];
    assert_int_equal(stg_redis_url_parse("redis://bob:hunter2@h:7000/3/jobs", &u, NULL), STG_OK);
    stg_redis_url_format(&u, buf, sizeof buf);
    assert_string_equal(buf, "redis://bob:***@h:7000/3/jobs");
    assert_null(strstr(buf, "hunter2"));
    assert_int_equal(stg_redis_url_parse("redis://[::1]/k", &u, NULL), STG_OK);
    stg_redis_url_format(&u, buf, sizeof buf);
    assert_string_equal(buf, "redis://[::1]:6379/k");
    assert_int_equal(stg_redis_url_parse("rediss://u:hunter2@h/k", &u, NULL), STG_OK);
    stg_redis_url_format(&u, buf, sizeof buf);
    assert_string_equal(buf, "rediss://u:***@h:6379/k");
    assert_int_equal(stg_redis_url_parse("redis://[::1]/k", &u, NULL), STG_OK);
    /* truncation is snprintf-style */
    char small[8];
    int n = stg_redis_url_format(&u, small, sizeof small);
    assert_int_equal(n, (int)strlen("redis://[::1]:6379/k"));
    assert_string_equal(small, "redis:/");
    assert_int_equal(stg_redis_url_format(NULL, buf, sizeof buf), -1);
}

static void test_fallback_parse(void **state)
{
    (void)state;
    double s = -1;
    const char *why = NULL;
    assert_int_equal(stg_redis_fallback_parse("local:0.25", &s, &why), STG_OK);
    assert_true(s == 0.25);
    assert_int_equal(stg_redis_fallback_parse("local:1", &s, &why), STG_OK);
    assert_true(s == 1.0);
    assert_int_equal(stg_redis_fallback_parse("local:.5", &s, &why), STG_OK);
    assert_true(s == 0.5);
    assert_int_equal(stg_redis_fallback_parse("none", &s, &why), STG_OK);
    assert_true(s == 0.0);
    s = 7;
    assert_int_equal(stg_redis_fallback_parse("local:0", &s, &why), STG_ERANGE);
    assert_non_null(strstr(why, "(0, 1]"));
    assert_int_equal(stg_redis_fallback_parse("local:1.5", &s, &why), STG_ERANGE);
    assert_int_equal(stg_redis_fallback_parse("local:-0.5", &s, &why), STG_EPARSE);
    assert_int_equal(stg_redis_fallback_parse("local:", &s, &why), STG_EPARSE);
    assert_int_equal(stg_redis_fallback_parse("local:0.5x", &s, &why), STG_EPARSE);
    assert_int_equal(stg_redis_fallback_parse("local:nan", &s, &why), STG_EPARSE);
    assert_int_equal(stg_redis_fallback_parse("local:inf", &s, &why), STG_EPARSE);
    assert_int_equal(stg_redis_fallback_parse("remote:0.5", &s, &why), STG_EPARSE);
    assert_non_null(strstr(why, "local:SHARE"));
    assert_true(s == 7); /* unchanged on error */
    assert_int_equal(stg_redis_fallback_parse(NULL, &s, &why), STG_EINVAL);
}

/* Config errors are caught before any connection is attempted (the URL
 * points at a port nothing should listen on; none of these get that far). */
static void expect_new_fails(const stg_redis_limiter_config *cfg, int want, const char *why_has)
{
    int err = -1;
    char why[256] = "x";
    stg_redis_limiter *l = stg_redis_limiter_new(cfg, &err, why, sizeof why);
    assert_null(l);
    if (err != want)
        fail_msg("got %s (%s), want %s", stg_errname(err), why, stg_errname(want));
    if (!strstr(why, why_has))
        fail_msg("message '%s' lacks '%s'", why, why_has);
    assert_null(strstr(why, "hunter2"));
}

static void test_new_config_errors(void **state)
{
    (void)state;
    const char *url = "redis://:hunter2@127.0.0.1:1/k";
    expect_new_fails(NULL, STG_EINVAL, "URL");
    expect_new_fails(&(stg_redis_limiter_config){.rate = 1}, STG_EINVAL, "URL");
    expect_new_fails(&(stg_redis_limiter_config){.url = "redis://:hunter2@h:0/k", .rate = 1},
                     STG_ERANGE, "port");
    expect_new_fails(&(stg_redis_limiter_config){.url = url, .rate = 0}, STG_EINVAL, "rate");
    expect_new_fails(&(stg_redis_limiter_config){.url = url, .rate = -1}, STG_EINVAL, "rate");
    expect_new_fails(&(stg_redis_limiter_config){.url = url, .rate = 2e9}, STG_EINVAL, "rate");
    expect_new_fails(&(stg_redis_limiter_config){.url = url, .rate = 1, .burst = -1}, STG_EINVAL,
                     "burst");
    /* burst / rate above 2^50 ns: 1/s with a burst of 2^21 is 24 days */
    expect_new_fails(&(stg_redis_limiter_config){.url = url, .rate = 1, .burst = 1 << 21},
                     STG_EINVAL, "burst");
    expect_new_fails(&(stg_redis_limiter_config){.url = url, .rate = 1, .fallback_share = 1.5},
                     STG_EINVAL, "share");
    expect_new_fails(
        &(stg_redis_limiter_config){.url = url, .rate = 1, .connect_timeout_us = -1},
        STG_EINVAL, "negative");
    expect_new_fails(
        &(stg_redis_limiter_config){
            .url = url, .rate = 1, .prefix = "0123456789012345678901234567890123456789"
                                             "012345678901234567890123456789"},
        STG_EINVAL, "prefix");
    expect_new_fails(&(stg_redis_limiter_config){.url = url,
                                                 .rate = 1,
                                                 .breaker = {.open_us = INT64_C(1) << 48,
                                                             .max_multiplier = 8}},
                     STG_EINVAL, "breaker");
    stg_redis_limiter_free(NULL); /* accepts NULL */
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_url_forms),
        cmocka_unit_test(test_url_errors),
        cmocka_unit_test(test_url_format_redacts),
        cmocka_unit_test(test_fallback_parse),
        cmocka_unit_test(test_new_config_errors),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
