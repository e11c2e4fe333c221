/*
 * Unit tests of the RFC 9110 field rules (src/util/http_field.h): the token
 * and value checks, libcurl's three line forms, the fields the transport
 * owns (refused by stg_engine_submit) and those batch input may not set.
 */
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "cmocka_all.h"

#include "util/http_field.h"

static void test_tchar_table(void **state)
{
    (void)state;
    /* The whole byte range against RFC 9110 §5.6.2, spelled out. */
    const char *extra = "!#$%&'*+-.^_`|~";
    for (int c = 0; c < 256; c++) {
        bool want = (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
                    (c != 0 && strchr(extra, c) != NULL);
        if (stg__http_tchar((unsigned char)c) != want)
            fail_msg("byte 0x%02x: tchar says %d", c, !want);
    }
    assert_true(stg__http_token("X-Api_Key.v2", 12));
    assert_false(stg__http_token("", 0));
    assert_false(stg__http_token("Transfer-Encoding ", 18));
    assert_false(stg__http_token("a(b)", 4));
    assert_false(stg__http_token("caf\xc3\xa9", 5));
    assert_false(stg__http_token("a\0b", 3)); /* the length, not the NUL, ends it */
}

static void test_values(void **state)
{
    (void)state;
    assert_true(stg__http_value_ok("", 0));
    assert_true(stg__http_value_ok("a\tb c", 5));
    assert_true(stg__http_value_ok("caf\xc3\xa9 \x80\xff", 8)); /* obs-text */
    for (int c = 0; c < 0x20; c++) {
        char v[3] = {'a', (char)c, 'b'};
        assert_int_equal(stg__http_value_ok(v, 3), c == '\t');
    }
    assert_false(stg__http_value_ok("a\x7f", 2));
    assert_false(stg__http_value_ok("a\0b", 3));
}

static void test_line_forms(void **state)
{
    (void)state;
    assert_int_equal(stg__http_line_name("X-A: 1"), 3);
    assert_int_equal(stg__http_line_name("X-A:"), 3);
    assert_int_equal(stg__http_line_name("X-A;"), 3);
    assert_int_equal(stg__http_line_name("X-A:1:2"), 3);
    assert_int_equal(stg__http_line_name("X-A: a\tb"), 3);
    static const char *const bad[] = {
        "",          ":",        ";",          "X-A",          "X-A;x",       "X-A; ",
        " X-A: 1",   "X-A : 1",  "X-A\t: 1",   "X A: 1",       "X-A: 1\r\nB: 2", "X-A: 1\n",
        "X-A: \x01", "X\xff: 1", "X-A: a\x7f", "\tTransfer-Encoding: chunked",
    };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++)
        if (stg__http_line_name(bad[i]) != 0)
            fail_msg("'%s' was taken as a header line", bad[i]);
}

static void test_transport_and_batch(void **state)
{
    (void)state;
    static const char *const transport[] = {
        "Content-Length", "content-length", "CONTENT-LENGTH", "Transfer-Encoding",
        "Connection",     "Keep-Alive",     "Proxy-Connection", "TE", "te", "Trailer",
        "Upgrade",
    };
    for (size_t i = 0; i < sizeof transport / sizeof *transport; i++) {
        size_t n = strlen(transport[i]);
        if (!stg__http_transport_field(transport[i], n) ||
            !stg__http_batch_refused(transport[i], n))
            fail_msg("%s is the transport's", transport[i]);
    }
    assert_non_null(strstr(stg__http_transport_field("Content-Length", 14), "frames"));
    assert_non_null(strstr(stg__http_transport_field("Upgrade", 7), "connection"));
    /* Batch input only: Host and every Proxy-* field. */
    static const char *const batch_only[] = {"Host", "HOST", "Proxy-Authorization",
                                             "proxy-authenticate", "Proxy-X"};
    for (size_t i = 0; i < sizeof batch_only / sizeof *batch_only; i++) {
        size_t n = strlen(batch_only[i]);
        assert_null(stg__http_transport_field(batch_only[i], n));
        if (!stg__http_batch_refused(batch_only[i], n))
            fail_msg("batch input may not set %s", batch_only[i]);
    }
    assert_non_null(strstr(stg__http_batch_refused("Host", 4), "URL"));
    assert_non_null(strstr(stg__http_batch_refused("Proxy-Authorization", 19), "proxy"));
    /* Near misses and ordinary fields: allowed everywhere. Lengths are the
     * caller's: "Content-Length" within a longer name is another field. */
    static const char *const fine[] = {"Content-Type", "Content-Length-X", "X-Content-Length",
                                       "Hosts", "Proxy", "Expect", "Authorization",
                                       "Idempotency-Key", "TEX", "T", "Accept-Encoding"};
    for (size_t i = 0; i < sizeof fine / sizeof *fine; i++) {
        size_t n = strlen(fine[i]);
        if (stg__http_transport_field(fine[i], n) || stg__http_batch_refused(fine[i], n))
            fail_msg("%s is an ordinary field", fine[i]);
    }
    assert_non_null(stg__http_transport_field("Content-Length: 1", 14));
    assert_null(stg__http_transport_field("Content-Length", 13));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_tchar_table),
        cmocka_unit_test(test_values),
        cmocka_unit_test(test_line_forms),
        cmocka_unit_test(test_transport_and_batch),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
