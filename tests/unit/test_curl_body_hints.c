/*
 * The body reader (src/curl/body_hints.c): a 403 or 429 JSON body whose
 * top-level "message" is a GitHub secondary limit sets STG_HINTS_SECONDARY;
 * anything else (another status, no JSON, no such message, a body over the
 * cap, a message that is not a string or not at the top) leaves the hints
 * alone. The vendors' error objects (Google, OpenAI, Anthropic) are read
 * for 403, 429 and 5xx only, told apart by their shape (the bodies
 * themselves are in tests/vectors/bodies/).
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
#include "cmocka_all.h"

#include <stdlib.h>
#include <string.h>

#include <stagger/curl.h>

#include "curl/internal.h"

/* The persona's body (src/server/dialect_table.c), as GitHub sends it. */
#define GH_SECONDARY                                                                          \
    "{\"message\":\"You have exceeded a secondary rate limit. Please wait a few minutes "    \
    "before you try again.\",\"documentation_url\":\"https://docs.github.com/rest/overview/" \
    "rate-limits-for-the-rest-api#about-secondary-rate-limits\"}"

static bool read_body(int status, const char *body, size_t len, stg_hints *h)
{
    stg_hints_init(h);
    return stg__body_hints_read(status, body, len, h);
}

static void test_secondary_body(void **state)
{
    (void)state;
    stg_hints h;
    assert_true(read_body(403, GH_SECONDARY, strlen(GH_SECONDARY), &h));
    assert_true(h.flags & STG_HINTS_SECONDARY);
    assert_true(read_body(429, GH_SECONDARY, strlen(GH_SECONDARY), &h));
    /* Whitespace and other members around it: still the message. */
    static const char spaced[] = " {\"documentation_url\": \"x\",\n \"message\" : "
                                 "\"You have triggered an abuse detection mechanism.\" } ";
    assert_true(read_body(403, spaced, sizeof spaced - 1, &h));
}

static void test_not_secondary(void **state)
{
    (void)state;
    stg_hints h;
    static const char *const bodies[] = {
        "{\"message\":\"Bad credentials\",\"documentation_url\":\"https://docs.github.com/rest\"}",
        "{\"message\":[\"You have exceeded a secondary rate limit\"]}", /* not a string */
        "{\"error\":{\"message\":\"You have exceeded a secondary rate limit\"}}", /* not top */
        "[\"You have exceeded a secondary rate limit\"]",
        "\"You have exceeded a secondary rate limit\"",
        "You have exceeded a secondary rate limit", /* not JSON */
        "{\"message\":\"You have exceeded a secondary rate limit\"", /* cut */
        "{\"message\":\"You have exceeded a secondary rate limit\"} trailing",
        /* a name twice: jansson keeps the last, a number */
        "{\"message\":\"You have exceeded a secondary rate limit\",\"message\":1}",
        ""};
    for (size_t i = 0; i < sizeof bodies / sizeof *bodies; i++) {
        assert_false(read_body(403, bodies[i], strlen(bodies[i]), &h));
        assert_int_equal(h.flags, 0);
    }
    /* Another status, or no body at all. */
    assert_false(read_body(200, GH_SECONDARY, strlen(GH_SECONDARY), &h));
    assert_false(read_body(401, GH_SECONDARY, strlen(GH_SECONDARY), &h));
    assert_false(read_body(500, GH_SECONDARY, strlen(GH_SECONDARY), &h));
    assert_false(read_body(403, NULL, 0, &h));
    assert_int_equal(h.flags, 0);
}

/* Over the cap: not read, even when it would say so. */
static void test_body_cap(void **state)
{
    (void)state;
    size_t n = STG__BODY_HINTS_MAX + 1;
    char *big = malloc(n + 1);
    assert_non_null(big);
    const char *head = "{\"message\":\"You have exceeded a secondary rate limit\",\"pad\":\"";
    size_t hl = strlen(head);
    memcpy(big, head, hl);
    memset(big + hl, 'x', n - hl - 2);
    memcpy(big + n - 2, "\"}", 2);
    big[n] = '\0';
    stg_hints h;
    assert_false(read_body(403, big, n, &h));
    /* One byte less of padding: at the cap, read. */
    memmove(big + n - 3, "\"}", 2);
    assert_true(read_body(403, big, n - 1, &h));
    free(big);
}

/* Which statuses are read, and whose body is whose. */
static void test_vendor_bodies(void **state)
{
    (void)state;
    stg_hints h;
    static const char oa[] = "{\"error\":{\"message\":\"You exceeded your current quota\","
                             "\"type\":\"insufficient_quota\",\"param\":null,"
                             "\"code\":\"insufficient_quota\"}}";
    static const char an[] = "{\"type\":\"error\",\"error\":{\"type\":\"overloaded_error\","
                             "\"message\":\"Overloaded\"}}";
    static const char go[] = "{\"error\":{\"code\":503,\"status\":\"UNAVAILABLE\",\"details\":"
                             "[{\"@type\":\"type.googleapis.com/google.rpc.RetryInfo\","
                             "\"retryDelay\":\"2s\"}]}}";
    static const int read[] = {403, 429, 500, 503, 529, 599};
    static const int unread[] = {200, 302, 400, 401, 402, 404, 408, 499, 600};
    for (size_t i = 0; i < sizeof read / sizeof *read; i++) {
        assert_true(read_body(read[i], oa, sizeof oa - 1, &h));
        assert_int_equal(h.flags, STG_HINTS_HARD_STOP);
        assert_int_equal(h.dialects, 1u << STG_DIALECT_OPENAI);
        assert_true(read_body(read[i], go, sizeof go - 1, &h));
        assert_int_equal(h.retry_after_us, STG_SEC(2));
        assert_int_equal(h.dialects, 1u << STG_DIALECT_GOOGLE);
    }
    for (size_t i = 0; i < sizeof unread / sizeof *unread; i++) {
        assert_false(read_body(unread[i], oa, sizeof oa - 1, &h));
        assert_false(read_body(unread[i], go, sizeof go - 1, &h));
        assert_int_equal(h.flags, 0);
        assert_int_equal(h.retry_after_us, STG_UNKNOWN);
    }
    assert_true(read_body(529, an, sizeof an - 1, &h));
    assert_int_equal(h.flags, STG_HINTS_THROTTLE);
    assert_int_equal(h.dialects, 1u << STG_DIALECT_ANTHROPIC);
    /* Anthropic's words in OpenAI's shape (no top-level type): OpenAI's
     * table, where they mean nothing. */
    static const char mixed[] = "{\"error\":{\"type\":\"overloaded_error\"}}";
    assert_false(read_body(529, mixed, sizeof mixed - 1, &h));
    /* A detail type that only ends like RetryInfo is not one. */
    static const char fake[] = "{\"error\":{\"status\":\"X\",\"details\":[{\"@type\":"
                               "\"x.NotGoogle.rpc.RetryInfo\",\"retryDelay\":\"2s\"}]}}";
    assert_false(read_body(429, fake, sizeof fake - 1, &h));
    /* Facts are only added: a header's longer wait stays. */
    stg_hints_init(&h);
    assert_int_equal(stg_hints_header_line(&h, "Retry-After: 9", 14, 0), STG_OK);
    assert_true(stg__body_hints_read(503, go, sizeof go - 1, &h));
    assert_int_equal(h.retry_after_us, STG_SEC(9));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_secondary_body),
        cmocka_unit_test(test_not_secondary),
        cmocka_unit_test(test_body_cap),
        cmocka_unit_test(test_vendor_bodies),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
#endif
