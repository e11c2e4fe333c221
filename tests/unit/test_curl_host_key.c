/*
 * Unit tests of libstagger-curl's limiter key (stg__url_host_key in
 * src/curl/redact.c): the host, lower-cased, with its port, and never
 * userinfo, path or query; "" when the host cannot be trusted.
 */
#if defined(__has_include) && !__has_include(<curl/curl.h>)
/* libstagger-curl is not built here (no libcurl): nothing to test. */
#include <stdio.h>
int main(void);
int main(void)
{
    puts("skipped: libstagger-curl is not built (no libcurl)");
    return 77; /* SKIP_RETURN_CODE: ctest reports it skipped */
}
#else
#include <string.h>

#include "cmocka_all.h"

#include "curl/internal.h"

static void check_key(const char *url, const char *want)
{
    char buf[128];
    stg__url_host_key(url, buf, sizeof buf);
    if (strcmp(buf, want) != 0)
        fail_msg("host_key(%s) = '%s', want '%s'", url, buf, want);
}

static void test_host_key(void **state)
{
    (void)state;
    check_key("http://User:pw@Example.COM:8080/x", "example.com:8080");
    check_key("http://[::1]:80/", "[::1]:80");
    check_key("example.com/x", "example.com");
    check_key("http://h", "h");
    check_key("http://h:/x", "h");
    check_key("/x", "");
    check_key("http://user:pa/ss@host/", "");
}

static void test_host_key_truncation(void **state)
{
    (void)state;
    char buf[6];
    stg__url_host_key("http://u:SECRET@Example.com:8080/?k=SECRET", buf, sizeof buf);
    assert_string_equal(buf, "examp");
    stg__url_host_key("http://h\x01x/", buf, sizeof buf);
    assert_string_equal(buf, "h%01x");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_host_key),
        cmocka_unit_test(test_host_key_truncation),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
#endif
