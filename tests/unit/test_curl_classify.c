/*
 * Unit tests of CURLcode classification (stg_curl_classify, and with
 * libcurl's error text: stg__classify_text) and of the per-attempt
 * timeouts bounded by the deadline.
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

#include <string.h>

#include <stagger/curl.h>

#include "curl/internal.h"

static void test_classes(void **state)
{
    (void)state;
    assert_int_equal(stg_curl_classify(CURLE_OK, 0), STG_NET_NONE);
    assert_int_equal(stg_curl_classify(CURLE_COULDNT_CONNECT, 0), STG_NET_CONNECT_REFUSED);
    assert_int_equal(stg_curl_classify(CURLE_OPERATION_TIMEDOUT, 0), STG_NET_CONNECT_TIMEOUT);
    assert_int_equal(stg_curl_classify(CURLE_OPERATION_TIMEDOUT, 1), STG_NET_TIMEOUT);
    assert_int_equal(stg_curl_classify(CURLE_OPERATION_TIMEDOUT, 250000), STG_NET_TIMEOUT);
    assert_int_equal(stg_curl_classify(CURLE_RECV_ERROR, 5), STG_NET_RESET);
    assert_int_equal(stg_curl_classify(CURLE_SEND_ERROR, 5), STG_NET_RESET);
    assert_int_equal(stg_curl_classify(CURLE_GOT_NOTHING, 5), STG_NET_RESET);
    assert_int_equal(stg_curl_classify(CURLE_PARTIAL_FILE, 5), STG_NET_RESET);
    assert_int_equal(stg_curl_classify(CURLE_COULDNT_RESOLVE_HOST, 0), STG_NET_DNS);
    assert_int_equal(stg_curl_classify(CURLE_COULDNT_RESOLVE_PROXY, 0), STG_NET_DNS);
    const CURLcode tls[] = {CURLE_SSL_CONNECT_ERROR,     CURLE_PEER_FAILED_VERIFICATION,
                            CURLE_SSL_CERTPROBLEM,       CURLE_SSL_CIPHER,
                            CURLE_SSL_CACERT_BADFILE,    CURLE_SSL_ENGINE_NOTFOUND,
                            CURLE_SSL_ENGINE_SETFAILED,  CURLE_SSL_ENGINE_INITFAILED,
                            CURLE_SSL_SHUTDOWN_FAILED,   CURLE_SSL_CRL_BADFILE,
                            CURLE_SSL_ISSUER_ERROR,      CURLE_SSL_PINNEDPUBKEYNOTMATCH,
                            CURLE_SSL_INVALIDCERTSTATUS, CURLE_SSL_CLIENTCERT,
                            CURLE_USE_SSL_FAILED};
    for (size_t i = 0; i < sizeof tls / sizeof tls[0]; i++)
        assert_int_equal(stg_curl_classify(tls[i], 0), STG_NET_TLS);
    const CURLcode other[] = {CURLE_UNSUPPORTED_PROTOCOL, CURLE_URL_MALFORMAT,
                              CURLE_WRITE_ERROR,          CURLE_ABORTED_BY_CALLBACK,
                              CURLE_TOO_MANY_REDIRECTS,   CURLE_OUT_OF_MEMORY,
                              CURLE_HTTP2,                CURLE_BAD_CONTENT_ENCODING};
    for (size_t i = 0; i < sizeof other / sizeof other[0]; i++)
        assert_int_equal(stg_curl_classify(other[i], 0), STG_NET_OTHER);
}

static void test_every_code_has_one_class(void **state)
{
    (void)state;
    for (int c = 0; c < CURL_LAST; c++) {
        stg_net_error e = stg_curl_classify((CURLcode)c, 0);
        assert_in_range(e, STG_NET_NONE, STG_NET_OTHER);
        assert_true((e == STG_NET_NONE) == (c == CURLE_OK));
    }
}

static void test_attempt_timeouts(void **state)
{
    (void)state;
    stg_policy p;
    stg_policy zero = {0};
    assert_int_equal(stg_policy_resolve(&zero, &p), STG_OK);
    long c, t;
    /* No total time by default (issue #31): without a deadline, none. */
    stg__attempt_timeouts(&p, INT64_MAX, &c, &t);
    assert_int_equal(c, 5000);
    assert_int_equal(t, 0);
    stg__attempt_timeouts(&p, STG_MS(1500), &c, &t); /* bounded by the deadline */
    assert_int_equal(c, 1500);
    assert_int_equal(t, 1500);
    stg__attempt_timeouts(&p, 1, &c, &t); /* never 0: that would mean "no timeout" */
    assert_int_equal(c, 1);
    assert_int_equal(t, 1);
    stg__attempt_timeouts(&p, STG_MS(7000), &c, &t);
    assert_int_equal(c, 5000);
    assert_int_equal(t, 7000);
    /* A total time given (--max-time) is kept, and cut by the deadline. */
    p.attempt_timeout_us = STG_SEC(10);
    stg__attempt_timeouts(&p, INT64_MAX, &c, &t);
    assert_int_equal(t, 10000);
    stg__attempt_timeouts(&p, STG_MS(7000), &c, &t);
    assert_int_equal(t, 7000);
    /* The defaults of the times the transport keeps itself. */
    assert_int_equal(p.first_byte_timeout_us, STG_SEC(300));
    assert_int_equal(p.idle_timeout_us, STG_SEC(120));
    stg_policy bad = {.idle_timeout_us = -1};
    assert_int_equal(stg_policy_resolve(&bad, &p), STG_EINVAL);
    bad = (stg_policy){.first_byte_timeout_us = -1};
    assert_int_equal(stg_policy_resolve(&bad, &p), STG_EINVAL);
}

/* The first-byte and idle times' tick is installed only when one of them
 * could end an attempt before its total time (the deadline's or the
 * policy's): the quiet time they measure never exceeds the time since the
 * transfer began. */
static void test_tick_only_when_it_can_fire(void **state)
{
    (void)state;
    CURL *easy = curl_easy_init();
    assert_non_null(easy);
    stg__xfer x;
    stg__xfer_init(&x, 1024);
    stg_policy zero = {0}, p;
    assert_int_equal(stg_policy_resolve(&zero, &p), STG_OK);
    stg__xfer_timeouts(easy, &x, &p, INT64_MAX); /* no total: 300 s and 120 s can fire */
    assert_true(x.ticking);
    stg__xfer_reset(&x);
    stg__xfer_timeouts(easy, &x, &p, STG_SEC(5)); /* a 5 s deadline ends it first */
    assert_false(x.ticking);
    p.attempt_timeout_us = STG_SEC(10); /* --max-time 10s: below both */
    stg__xfer_reset(&x);
    stg__xfer_timeouts(easy, &x, &p, INT64_MAX);
    assert_false(x.ticking);
    p.idle_timeout_us = STG_SEC(2); /* an idle time below the total */
    stg__xfer_reset(&x);
    stg__xfer_timeouts(easy, &x, &p, INT64_MAX);
    assert_true(x.ticking);
    p.idle_timeout_us = STG_SEC(120);
    p.first_byte_timeout_us = STG_SEC(10); /* equal to the total: still installed */
    stg__xfer_reset(&x);
    stg__xfer_timeouts(easy, &x, &p, INT64_MAX);
    assert_true(x.ticking);
    stg__xfer_free(&x);
    curl_easy_cleanup(easy);
}

/* Which attempts go without VERBOSE (xfer.c h1_only): those certain to be
 * HTTP/1.x. https:// may get h2 by ALPN, and a version of 2 or more on
 * http:// asks for h2c (upgrade or prior knowledge): those keep the debug
 * callback that tells a refused HTTP/2 stream from a dead connection. */
static void test_h2_impossible(void **state)
{
    (void)state;
    assert_true(stg__xfer_h2_impossible("http://127.0.0.1:8080/x", 0));
    assert_true(stg__xfer_h2_impossible("HTTP://example.com/", CURL_HTTP_VERSION_1_1));
    assert_false(stg__xfer_h2_impossible("https://example.com/", 0));
    assert_false(stg__xfer_h2_impossible("https://example.com/", CURL_HTTP_VERSION_1_1));
    assert_false(stg__xfer_h2_impossible("http://example.com/", CURL_HTTP_VERSION_2_0));
    assert_false(
        stg__xfer_h2_impossible("http://example.com/", CURL_HTTP_VERSION_2_PRIOR_KNOWLEDGE));
    assert_false(stg__xfer_h2_impossible("http:/x", 0)); /* not a URL it can tell */
    assert_false(stg__xfer_h2_impossible(NULL, 0));
}

/* libcurl 7.x/8.x < 8.6 reports its response-header limit as
 * CURLE_RECV_ERROR "Too large response headers: N > 307200": the server's
 * answer, which another attempt would only repeat (it was retried 6 times
 * as a reset). A plain receive error is still a reset. */
static void test_text_classes(void **state)
{
    (void)state;
    bool det = true;
    const char *note = NULL;
    assert_int_equal(stg__classify_text(CURLE_RECV_ERROR, 5, "Connection reset by peer", &det, &note),
                     STG_NET_RESET);
    assert_false(det);
    assert_int_equal(stg__classify_text(CURLE_RECV_ERROR, 5,
                                        "Too large response headers: 307211 > 307200", &det, &note),
                     STG_NET_OTHER);
    assert_true(det);
    assert_int_equal(stg__classify_text(CURLE_RECV_ERROR, 5, NULL, &det, &note), STG_NET_RESET);
    assert_false(det);
    assert_int_equal(stg__classify_text(CURLE_OK, 5, "", &det, &note), STG_NET_NONE);
    assert_false(det);
    assert_int_equal(stg__classify_text(CURLE_COULDNT_CONNECT, 0, "Too large response headers",
                                        &det, &note),
                     STG_NET_CONNECT_REFUSED);
    assert_false(det);
}

/* TLS failures, with the messages libcurl 7.88 (OpenSSL 3) writes for
 * them, as seen against loopback servers: a handshake the peer reset or
 * closed is a transport fault (RESET, retryable); a certificate that does
 * not verify, an unloadable CA or client certificate file, and an alert
 * from the server are TLS and deterministic (never retried), and the note
 * says so. */
static void test_tls_classes(void **state)
{
    (void)state;
    bool det = true;
    const char *note = NULL;
    assert_int_equal(stg__classify_text(CURLE_SSL_CONNECT_ERROR, 0,
                                        "Recv failure: Connection reset by peer", &det, &note),
                     STG_NET_RESET);
    assert_false(det);
    assert_non_null(strstr(note, "transport fault"));
    assert_int_equal(stg__classify_text(CURLE_SSL_CONNECT_ERROR, 0,
                                        "OpenSSL SSL_connect: SSL_ERROR_SYSCALL in connection "
                                        "to 127.0.0.1:41731 ",
                                        &det, &note),
                     STG_NET_RESET);
    assert_false(det);
    assert_int_equal(stg__classify_text(CURLE_PEER_FAILED_VERIFICATION, 0,
                                        "SSL certificate problem: self-signed certificate",
                                        &det, &note),
                     STG_NET_TLS);
    assert_true(det);
    assert_non_null(strstr(note, "did not verify"));
    assert_non_null(strstr(note, "never retried"));
    assert_int_equal(stg__classify_text(CURLE_SSL_CERTPROBLEM, 0,
                                        "could not load PEM client certificate from x.pem",
                                        &det, &note),
                     STG_NET_TLS);
    assert_true(det);
    assert_int_equal(stg__classify_text(CURLE_SSL_CACERT_BADFILE, 0, "error setting certificate "
                                        "file: /nonexistent", &det, &note),
                     STG_NET_TLS);
    assert_true(det);
    /* TLS 1.3: a missing client certificate is an alert on the first read. */
    assert_int_equal(stg__classify_text(CURLE_RECV_ERROR, 5,
                                        "OpenSSL SSL_read: OpenSSL/3.0.19: error:0A00045C:SSL "
                                        "routines::tlsv13 alert certificate required, errno 0",
                                        &det, &note),
                     STG_NET_TLS);
    assert_true(det);
    assert_int_equal(stg__classify_text(CURLE_SSL_CONNECT_ERROR, 0,
                                        "error:0A000410:SSL routines::sslv3 alert handshake "
                                        "failure", &det, &note),
                     STG_NET_TLS);
    assert_true(det);
    /* Neither words of a reset nor an alert: TLS, left to the policy
     * (whose default does not retry TLS). */
    assert_int_equal(stg__classify_text(CURLE_SSL_CONNECT_ERROR, 0,
                                        "error:0A00010B:SSL routines::wrong version number",
                                        &det, &note),
                     STG_NET_TLS);
    assert_false(det);
    assert_false(STG_NET_DEFAULT_RETRY & STG_NET_BIT(STG_NET_TLS));
}

/* What a shared limiter hears of an answer (stg__shared_report): a 503
 * that says when to come back is a hold, not a throttle (the engine's own
 * adaptive limiter holds on it too); a 429 stays a throttle with or without
 * Retry-After, and a spent quota adds its reset as a hold. */
typedef struct heard {
    int n;
    bool throttled;
    int64_t hold_us;
} heard;

static int fake_acquire(void *ctx, const char *key, int64_t timeout_us, int64_t *wait_us,
                        int64_t *ticket)
{
    (void)ctx, (void)key, (void)timeout_us, (void)wait_us, (void)ticket;
    return STG_OK;
}

static void fake_on_response(void *ctx, const char *key, int64_t ticket, bool throttled,
                             int64_t hold_us)
{
    heard *h = ctx;
    assert_string_equal(key, "k");
    assert_int_equal(ticket, 7);
    h->n++;
    h->throttled = throttled;
    h->hold_us = hold_us;
}

static heard report_of(int status, int64_t retry_after_us, int64_t remaining, int64_t reset_us)
{
    heard h = {0};
    stg_shared_limiter sh = {.ctx = &h, .acquire = fake_acquire, .on_response = fake_on_response};
    stg_hints hints;
    stg_hints_init(&hints);
    hints.retry_after_us = retry_after_us;
    hints.remaining = remaining;
    hints.reset_us = reset_us;
    stg__shared_report(&sh, "k", 7, status, &hints);
    assert_int_equal(h.n, 1);
    return h;
}

static void test_shared_report(void **state)
{
    (void)state;
    heard h = report_of(503, 2000000, STG_UNKNOWN, STG_UNKNOWN);
    assert_false(h.throttled);
    assert_int_equal(h.hold_us, 2000000);
    /* a spent quota's longer reset wins */
    h = report_of(503, 2000000, 0, 5000000);
    assert_false(h.throttled);
    assert_int_equal(h.hold_us, 5000000);
    /* a 503 without a hint is a fault, neither throttle nor hold */
    h = report_of(503, STG_UNKNOWN, STG_UNKNOWN, STG_UNKNOWN);
    assert_false(h.throttled);
    assert_int_equal(h.hold_us, 0);
    /* 429: a throttle, with or without Retry-After (not a hold) */
    h = report_of(429, 2000000, STG_UNKNOWN, STG_UNKNOWN);
    assert_true(h.throttled);
    assert_int_equal(h.hold_us, 0);
    h = report_of(429, STG_UNKNOWN, STG_UNKNOWN, STG_UNKNOWN);
    assert_true(h.throttled);
    /* 429 with a spent quota: a throttle and a hold */
    h = report_of(429, STG_UNKNOWN, 0, 3000000);
    assert_true(h.throttled);
    assert_int_equal(h.hold_us, 3000000);
    h = report_of(200, STG_UNKNOWN, STG_UNKNOWN, STG_UNKNOWN);
    assert_false(h.throttled);
    assert_int_equal(h.hold_us, 0);
}

/* RFC 9113 §8.7 as libcurl 7.88 shows it (classify.c): only an HTTP/2
 * request with no answer and no error message of libcurl's. */
static void test_never_processed(void **state)
{
    (void)state;
    /* libcurl's own resend after REFUSED_STREAM (xfer.c marks it). */
    assert_true(stg__never_processed(CURLE_ABORTED_BY_CALLBACK, 0, true, true, ""));
    /* The refusal that ended the session (GOAWAY): CURLE_HTTP2, no text. */
    assert_true(stg__never_processed(CURLE_HTTP2, 0, true, false, ""));
    /* CURLE_HTTP2 with a message is a framing failure: it keeps its class. */
    assert_false(stg__never_processed(CURLE_HTTP2, 0, true, false,
                                      "nghttp2_session_mem_recv() returned -505"));
    /* A stream reset with another code, a cut connection: maybe processed. */
    assert_false(stg__never_processed(CURLE_HTTP2_STREAM, 0, true, false,
                                      "HTTP/2 stream 3 was not closed cleanly: "
                                      "INTERNAL_ERROR (err 2)"));
    assert_false(stg__never_processed(CURLE_PARTIAL_FILE, 0, true, false, ""));
    /* HTTP/1.1: a resend is a dead keep-alive connection, not a refusal. */
    assert_false(stg__never_processed(CURLE_ABORTED_BY_CALLBACK, 0, false, false, ""));
    assert_false(stg__never_processed(CURLE_HTTP2, 0, false, false, ""));
    /* An answer came: processed. */
    assert_false(stg__never_processed(CURLE_ABORTED_BY_CALLBACK, 401, true, true, ""));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_never_processed),
        cmocka_unit_test(test_classes),
        cmocka_unit_test(test_text_classes),
        cmocka_unit_test(test_tls_classes),
        cmocka_unit_test(test_every_code_has_one_class),
        cmocka_unit_test(test_attempt_timeouts),
        cmocka_unit_test(test_h2_impossible),
        cmocka_unit_test(test_tick_only_when_it_can_fire),
        cmocka_unit_test(test_shared_report),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
#endif
