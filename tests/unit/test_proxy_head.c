/*
 * Unit tests of the proxy's request-head rules (src/proxy/head_check.c) and
 * of the fields it builds for the upstream (headers.c px_forward_fields):
 * each refusal with its status and reason, the well-formed shapes that must
 * pass (HTTP/1.0 without Host, "Chunked", equal Content-Lengths, OWS), and
 * hop-by-hop removal over every Connection field, whatever the name's length.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cmocka_all.h"

#include "proxy/internal.h"

#define F(n, v) {.name = n, .name_len = sizeof(n) - 1, .value = v, .value_len = sizeof(v) - 1}

/* Check method/version/target with fields; want 0 = accepted. */
static void check(const char *method, const char *version, const px_field *f, size_t n,
                  unsigned want, const char *reason)
{
    px_head h = {.method = method, .method_len = strlen(method), .version = version,
                 .version_len = strlen(version), .target = "/x", .target_len = 2,
                 .fields = f, .n_fields = n};
    px_verdict v = {0};
    bool ok = px_head_check(&h, &v);
    if (want == 0 && !ok)
        fail_msg("%s %s refused: %u %s", method, version, v.status, v.reason);
    if (want && ok)
        fail_msg("%s %s accepted, want %u %s", method, version, want, reason);
    if (want) {
        assert_int_equal(v.status, want);
        assert_string_equal(v.reason, reason);
    }
}

#define CHECK(m, ver, want, reason, ...)                                                  \
    do {                                                                                  \
        const px_field f_[] = {__VA_ARGS__};                                              \
        check(m, ver, f_, sizeof f_ / sizeof f_[0], want, reason);                        \
    } while (0)

static void test_accepted(void **state)
{
    (void)state;
    CHECK("GET", "HTTP/1.1", 0, NULL, F("Host", "a.example:8080"));
    CHECK("GET", "HTTP/1.1", 0, NULL, F("Host", "")); /* a target without authority */
    CHECK("GET", "HTTP/1.1", 0, NULL, F("Host", "[::1]:80"), F("X-Tab", "a\tb"),
          F("X-Utf8", "caf\xc3\xa9"));
    CHECK("GET", "HTTP/1.0", 0, NULL, F("Accept", "*/*")); /* no Host in HTTP/1.0 */
    CHECK("POST", "HTTP/1.1", 0, NULL, F("Host", "a"), F("Transfer-Encoding", "Chunked"));
    CHECK("POST", "HTTP/1.1", 0, NULL, F("Host", "a"), F("Content-Length", "5"),
          F("content-length", "005"));
    CHECK("PROPPATCH", "HTTP/1.1", 0, NULL, F("Host", "a"));
}

static void test_refused(void **state)
{
    (void)state;
    CHECK("G(T", "HTTP/1.1", 400, "bad-method", F("Host", "a"));
    CHECK("", "HTTP/1.1", 400, "bad-method", F("Host", "a"));
    char longm[40];
    memset(longm, 'A', sizeof longm - 1);
    longm[sizeof longm - 1] = '\0';
    CHECK(longm, "HTTP/1.1", 501, "method-too-long", F("Host", "a"));
    CHECK("GET", "HTTP/2.0", 400, "bad-version", F("Host", "a"));
    CHECK("GET", "HTTP/1.1", 400, "bad-field-name", F("Host", "a"), F("Transfer-Encoding ", "x"));
    CHECK("GET", "HTTP/1.1", 400, "bad-field-name", F("Host", "a"), F("Transfer-Encoding\t", "x"));
    CHECK("GET", "HTTP/1.1", 400, "bad-field-name", F("Host", "a"),
          F("X-FoldTransfer-Encoding: chunked", "a")); /* MHD's obs-fold */
    CHECK("GET", "HTTP/1.1", 400, "bad-field-name", F("Host", "a"), F(" X", "a"));
    CHECK("GET", "HTTP/1.1", 400, "bad-field-name", F("Host", "a"), F("X\x01", "a"));
    CHECK("GET", "HTTP/1.1", 400, "bad-field-name", F("Host", "a"), F("X\xff", "a"));
    CHECK("GET", "HTTP/1.1", 400, "bad-field-name", F("Host", "a"), F("", "a"));
    CHECK("GET", "HTTP/1.1", 400, "bad-field-value", F("Host", "a"), F("X", "a\rb"));
    CHECK("GET", "HTTP/1.1", 400, "bad-field-value", F("Host", "a"), F("X", "a\x7f"));
    CHECK("GET", "HTTP/1.1", 400, "no-host", F("Accept", "*/*"));
    CHECK("GET", "HTTP/1.1", 400, "several-hosts", F("Host", "a"), F("host", "a"));
    CHECK("GET", "HTTP/1.0", 400, "several-hosts", F("Host", "a"), F("Host", "b"));
    CHECK("GET", "HTTP/1.1", 400, "bad-host", F("Host", "a b"));
    CHECK("GET", "HTTP/1.1", 400, "bad-host", F("Host", "a/b@c"));
    CHECK("POST", "HTTP/1.1", 400, "bad-content-length", F("Host", "a"), F("Content-Length", "+5"));
    CHECK("POST", "HTTP/1.1", 400, "bad-content-length", F("Host", "a"), F("Content-Length", ""));
    CHECK("POST", "HTTP/1.1", 400, "bad-content-length", F("Host", "a"),
          F("Content-Length", "5, 5"));
    CHECK("POST", "HTTP/1.1", 400, "several-content-lengths", F("Host", "a"),
          F("Content-Length", "5"), F("Content-Length", "6"));
    CHECK("POST", "HTTP/1.1", 400, "cl-and-te", F("Host", "a"), F("Content-Length", "5"),
          F("Transfer-Encoding", "chunked"));
    CHECK("POST", "HTTP/1.0", 400, "te-in-http10", F("Transfer-Encoding", "chunked"));
    CHECK("POST", "HTTP/1.1", 400, "te-not-chunked", F("Host", "a"),
          F("Transfer-Encoding", "xchunked"));
    CHECK("POST", "HTTP/1.1", 400, "te-not-chunked", F("Host", "a"),
          F("Transfer-Encoding", "chunked, identity"));
    CHECK("POST", "HTTP/1.1", 400, "te-not-chunked", F("Host", "a"),
          F("Transfer-Encoding", "chunked"), F("Transfer-Encoding", "x"));
    CHECK("POST", "HTTP/1.1", 400, "te-not-chunked", F("Host", "a"),
          F("Transfer-Encoding", "chunked"), F("Transfer-Encoding", "chunked"));
    CHECK("POST", "HTTP/1.1", 400, "bad-transfer-encoding", F("Host", "a"),
          F("Transfer-Encoding", ""));
    CHECK("POST", "HTTP/1.1", 400, "bad-transfer-encoding", F("Host", "a"),
          F("Transfer-Encoding", "chunked,,"));
    CHECK("POST", "HTTP/1.1", 501, "te-unsupported", F("Host", "a"),
          F("Transfer-Encoding", "gzip, chunked"));
}

static void test_target(void **state)
{
    (void)state;
    const px_field host[] = {F("Host", "a")};
    const char *bad[] = {"", "/a b", "/a\rb", "/a\x7f", "/a\tb"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        px_head h = {.method = "GET", .method_len = 3, .version = "HTTP/1.1", .version_len = 8,
                     .target = bad[i], .target_len = strlen(bad[i]), .fields = host,
                     .n_fields = 1};
        px_verdict v;
        assert_false(px_head_check(&h, &v));
        assert_string_equal(v.reason, "bad-target");
    }
}

static bool has_line(char **lines, const char *want)
{
    for (size_t i = 0; lines[i]; i++)
        if (!strcmp(lines[i], want))
            return true;
    return false;
}

static void test_forward(void **state)
{
    (void)state;
    char longname[201];
    memset(longname, 'L', 200);
    longname[200] = '\0';
    char conn2[256];
    snprintf(conn2, sizeof conn2, "X-B , %s", longname);
    px_field f[] = {
        F("Host", "a"), F("Connection", "keep-alive, X-A"), F("X-A", "1"),
        F("Content-Length", "3"), F("Expect", "100-continue"), F("Stagger-Retries", "0"),
        F("Upgrade", "h2c"), F("Proxy-Authorization", "Basic x"), F("X-B", "2"),
        {.name = longname, .name_len = 200, .value = "3", .value_len = 1},
        {.name = "Connection", .name_len = 10, .value = conn2, .value_len = strlen(conn2)},
        F("Authorization", "Bearer t"), F("X-Empty", ""), F("Idempotency-Key", "k1"),
        F("Keep-Alive", "timeout=5")};
    char **lines = NULL;
    size_t n = 0;
    char idem[64];
    assert_int_equal(px_forward_fields(f, sizeof f / sizeof f[0], &lines, &n, idem, sizeof idem),
                     0);
    const char *want[] = {"Authorization: Bearer t", "X-Empty;", "Accept:", "Expect:",
                          "Via: 1.1 stagger"};
    assert_int_equal(n, sizeof want / sizeof want[0]);
    for (size_t i = 0; i < n; i++)
        assert_string_equal(lines[i], want[i]);
    assert_null(lines[n]);
    assert_string_equal(idem, "k1");
    assert_false(has_line(lines, "X-A: 1"));
    for (size_t i = 0; i < n; i++)
        free(lines[i]);
    free(lines);
}

/* The answer's fields: every Connection field's names, Content-Length,
 * a non-token name and a CTL in a value are left out of the head (and of
 * its size); nothing is cut for its length. */
static void test_answer_head(void **state)
{
    (void)state;
    px_req r = {0};
    const char block[] = "HTTP/1.1 200 OK\r\nConnection: X-A\r\nX-A: 1\r\nConnection: X-B\r\n"
                         "X-B: 2\r\nX-Keep: 3\r\nContent-Length: 5\r\nBad Name: x\r\n"
                         "X-Ctl: a\x01b\r\n\r\n";
    size_t via = sizeof "Via: 1.1 stagger\r\n" - 1;
    assert_int_equal(px_response_head_size(&r, block, sizeof block - 1),
                     sizeof "X-Keep: 3\r\n" - 1 + via);
    char big[40100];
    int n = snprintf(big, sizeof big, "HTTP/1.1 200 OK\r\nX-Big: ");
    memset(big + n, 'b', 40000);
    memcpy(big + n + 40000, "\r\n\r\n", 5);
    assert_int_equal(px_response_head_size(&r, big, (size_t)n + 40004),
                     sizeof "X-Big: \r\n" - 1 + 40000 + via);
}

static void test_conn_lists(void **state)
{
    (void)state;
    assert_true(px_conn_lists("close, X-A", 10, "x-a", 3));
    assert_true(px_conn_lists(" X-A ,", 6, "X-A", 3));
    assert_false(px_conn_lists("X-AB", 4, "X-A", 3));
    assert_false(px_conn_lists(",,", 2, "", 0));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_accepted), cmocka_unit_test(test_refused),
        cmocka_unit_test(test_target),   cmocka_unit_test(test_forward),
        cmocka_unit_test(test_answer_head), cmocka_unit_test(test_conn_lists),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
