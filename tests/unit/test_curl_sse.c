/*
 * The first event of an event stream (src/curl/sse.c): its framing as the
 * WHATWG standard reads it (CRLF, LF and CR line ends, comments, a block
 * without data dispatches nothing, a CR at the end of the input may be
 * half a CRLF), and which events are errors, with the status the vendor
 * gives the same error outside a stream (the bodies are the vendors'
 * documented shapes: Anthropic's streaming errors, OpenAI's error object).
 */
#if defined(__has_include) && !__has_include(<curl/curl.h>)
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

/* Anthropic's streaming error (docs.anthropic.com, "Streaming Messages",
 * Error events), and OpenAI's error object inside a stream. */
#define ANTHROPIC_OVERLOADED                                                                  \
    "event: error\n"                                                                          \
    "data: {\"type\": \"error\", \"error\": {\"type\": \"overloaded_error\", \"message\": "   \
    "\"Overloaded\"}}\n\n"
#define ANTHROPIC_START                                                                       \
    "event: message_start\n"                                                                  \
    "data: {\"type\": \"message_start\", \"message\": {\"id\": \"msg_1\"}}\n\n"
#define OPENAI_ERROR                                                                          \
    "data: {\"error\": {\"message\": \"Rate limit reached\", \"type\": \"tokens\", "          \
    "\"code\": \"rate_limit_exceeded\"}}\n\n"

static int first(const char *s, size_t len, char *name, stg__buf *data)
{
    return stg__sse_first_event(s, len, name, 32, data);
}

static void test_framing(void **state)
{
    (void)state;
    char name[32];
    stg__buf d = {0};
    /* Whole Anthropic event. */
    const char *a = ANTHROPIC_OVERLOADED;
    assert_int_equal(first(a, strlen(a), name, &d), 1);
    assert_string_equal(name, "error");
    assert_string_equal(d.p, "{\"type\": \"error\", \"error\": {\"type\": \"overloaded_error\", "
                             "\"message\": \"Overloaded\"}}");
    /* Every prefix of it is incomplete: no event is misread early. */
    for (size_t n = 0; n < strlen(a) - 1; n++)
        assert_int_equal(first(a, n, name, &d), 0);
    /* CRLF and lone CR line ends; several data lines join with \n; one
     * leading space dropped, a second kept; no space after the colon. */
    const char *crlf = "event:x\r\ndata: one\r\ndata:  two\r\n\r\n";
    assert_int_equal(first(crlf, strlen(crlf), name, &d), 1);
    assert_string_equal(name, "x");
    assert_string_equal(d.p, "one\n two");
    const char *cr = "data: a\rdata: b\r\r";
    /* The last CR may be half a CRLF: not yet an event ... */
    assert_int_equal(first(cr, strlen(cr), name, &d), 0);
    /* ... and is one once anything follows it. */
    const char *cr2 = "data: a\rdata: b\r\rx";
    assert_int_equal(first(cr2, strlen(cr2), name, &d), 1);
    assert_string_equal(d.p, "a\nb");
    /* Comments and a block without data dispatch nothing; the event type
     * of a block that did not dispatch is forgotten. */
    const char *keep = ": keep-alive\n\nevent: ping\n\n: x\ndata: real\n\n";
    assert_int_equal(first(keep, strlen(keep), name, &d), 1);
    assert_string_equal(name, "");
    assert_string_equal(d.p, "real");
    const char *only = ": keep-alive\n\n: again\n\n";
    assert_int_equal(first(only, strlen(only), name, &d), 0);
    /* A field name with no colon is the whole line, value empty. */
    const char *bare = "data\n\n";
    assert_int_equal(first(bare, strlen(bare), name, &d), 1);
    assert_string_equal(d.p, "");
    /* A NUL inside is data, not an end. */
    static const char nul[] = "data: a\0b\n\n";
    assert_int_equal(first(nul, sizeof nul - 1, name, &d), 1);
    assert_int_equal(d.len, 3);
    stg__buf_free(&d);
}

static int status_of(const char *ev)
{
    char name[32], type[48];
    stg__buf d = {0};
    int st = -1;
    if (first(ev, strlen(ev), name, &d) == 1)
        st = stg__sse_error_status(name, d.p, d.len, type, sizeof type);
    stg__buf_free(&d);
    return st;
}

static void test_errors(void **state)
{
    (void)state;
    assert_int_equal(status_of(ANTHROPIC_OVERLOADED), 529);
    assert_int_equal(status_of(OPENAI_ERROR), 429);
    assert_int_equal(status_of("event: error\ndata: {\"type\":\"error\",\"error\":{\"type\":"
                               "\"rate_limit_error\"}}\n\n"),
                     429);
    assert_int_equal(status_of("event: error\ndata: {\"error\":{\"type\":\"api_error\"}}\n\n"),
                     500);
    assert_int_equal(
        status_of("data: {\"error\":{\"type\":\"invalid_request_error\",\"code\":null}}\n\n"),
        400);
    /* An error event whose data is not JSON, or of an unknown kind: the
     * upstream failed (502). */
    assert_int_equal(status_of("event: error\ndata: boom\n\n"), 502);
    assert_int_equal(status_of("data: {\"error\":{\"type\":\"mystery\"}}\n\n"), 502);
    assert_int_equal(status_of("data: {\"error\":\"plain text\"}\n\n"), 502);
    /* Not errors: the first event of a good stream, OpenAI's chunks, the
     * end marker, an "error" that is not the object's member. */
    assert_int_equal(status_of(ANTHROPIC_START), 0);
    assert_int_equal(status_of("data: {\"id\":\"c1\",\"choices\":[{\"delta\":{\"content\":"
                               "\"error\"}}]}\n\n"),
                     0);
    assert_int_equal(status_of("data: [DONE]\n\n"), 0);
    assert_int_equal(status_of("data: {\"choices\":[{\"error\":{}}]}\n\n"), 0);
}

static void test_error_type_is_a_word(void **state)
{
    (void)state;
    char name[32], type[48];
    stg__buf d = {0};
    const char *ev = ANTHROPIC_OVERLOADED;
    assert_int_equal(first(ev, strlen(ev), name, &d), 1);
    assert_int_equal(stg__sse_error_status(name, d.p, d.len, type, sizeof type), 529);
    assert_string_equal(type, "overloaded_error");
    /* A type that is prose (or could be anything) is not copied. */
    const char *odd = "data: {\"error\":{\"type\":\"Bearer sk-secret value\"}}\n\n";
    assert_int_equal(first(odd, strlen(odd), name, &d), 1);
    assert_int_equal(stg__sse_error_status(name, d.p, d.len, type, sizeof type), 502);
    assert_string_equal(type, "");
    stg__buf_free(&d);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_framing),
        cmocka_unit_test(test_errors),
        cmocka_unit_test(test_error_type_is_a_word),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
#endif
