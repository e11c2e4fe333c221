/*
 * The body reader of a GitHub secondary rate limit (src/curl/body_hints.c):
 * a 403 or 429 JSON body whose top-level "message" says so sets
 * STG_HINTS_SECONDARY; anything else (another status, no JSON, no such
 * message, a body over the cap, a message that is not a string or not at
 * the top) leaves the hints alone.
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

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_secondary_body),
        cmocka_unit_test(test_not_secondary),
        cmocka_unit_test(test_body_cap),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
#endif
