/*
 * Integration tests of libstagger-curl's TLS settings (stg_tls_config in
 * stg_call_config.tls and stg_engine_config.tls) against `stagger serve
 * --tls-*` on 127.0.0.1, with a throwaway CA that tls_certs.sh makes here
 * with openssl: a certificate that does not verify ends the call after one
 * attempt even when the policy says to retry TLS errors; ca_file,
 * ca_from_env (SSL_CERT_FILE, as curl reads it) and insecure verify or
 * skip as documented; ATTEMPT_END events say which attempt opened a
 * connection (with a TLS handshake) and which reused it; an engine of
 * concurrency 4 runs 200 requests on at most 4 connections.
 *
 * Needs STAGGER and STG_SOURCE_DIR in the environment. Only loopback.
 */
#define _GNU_SOURCE
#if defined(__has_include) && !__has_include(<curl/curl.h>)
#include <stdio.h>
int main(void);
int main(void)
{
    puts("skipped: libstagger-curl is not built (no libcurl)");
    return 77; /* SKIP_RETURN_CODE: ctest reports it skipped */
}
#else
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cmocka_all.h"

#include <stagger/curl.h>

#include "integration/serve_helper.h"

static char pki[64];
static char ca[128], other_ca[128], cert[128], key[128];

typedef struct conns {
    int attempts, connects, reused, handshakes;
    int connects_of[8]; /* per attempt, the first 8 */
    bool reused_of[8];
} conns;

static void count(const stg_event *ev, void *data)
{
    conns *c = data;
    if (ev->type != STG_EVENT_ATTEMPT_END)
        return;
    if (c->attempts < 8) {
        c->connects_of[c->attempts] = ev->connects;
        c->reused_of[c->attempts] = ev->conn_reused;
    }
    c->attempts++;
    c->connects += ev->connects;
    c->reused += ev->conn_reused;
    c->handshakes += ev->tls_handshake_us > 0;
}

static int setup(void **state)
{
    (void)state;
    unsetenv("CURL_CA_BUNDLE");
    unsetenv("SSL_CERT_FILE");
    unsetenv("SSL_CERT_DIR");
    const char *src = getenv("STG_SOURCE_DIR");
    if (!src)
        return -1;
    snprintf(pki, sizeof pki, "/tmp/stg_tlsapi_XXXXXX");
    if (!mkdtemp(pki))
        return -1;
    char cmd[512];
    snprintf(cmd, sizeof cmd, "sh '%s/tests/integration/tls_certs.sh' '%s'", src, pki);
    if (system(cmd) != 0)
        return -1;
    snprintf(ca, sizeof ca, "%s/ca.pem", pki);
    snprintf(other_ca, sizeof other_ca, "%s/other-ca.pem", pki);
    snprintf(cert, sizeof cert, "%s/server.pem", pki);
    snprintf(key, sizeof key, "%s/server.key", pki);
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", pki);
    return system(cmd) == 0 ? 0 : -1;
}

static void tls_server(server *s)
{
    const char *args[] = {"--tls-cert", cert, "--tls-key", key, NULL};
    server_start(s, args);
}

/* One blocking GET of path under tls, events counted into c. */
static int get(const server *s, const char *path, const stg_tls_config *tls, int max_attempts,
               unsigned retry_errors, conns *c, stg_result *r)
{
    char url[128];
    snprintf(url, sizeof url, "https://127.0.0.1:%d%s", s->port, path);
    CURL *easy = curl_easy_init();
    assert_non_null(easy);
    curl_easy_setopt(easy, CURLOPT_URL, url);
    stg_call_config cfg = {.policy = {.max_attempts = max_attempts,
                                      .retry_errors = retry_errors,
                                      .backoff = {.base_us = STG_MS(5), .cap_us = STG_MS(20)}},
                           .url = url,
                           .on_event = count,
                           .event_data = c,
                           .tls = tls};
    int rc = stg_curl_perform(easy, &cfg, r);
    curl_easy_cleanup(easy);
    return rc;
}

static void test_unverified_never_retried(void **state)
{
    (void)state;
    server s;
    tls_server(&s);
    stg_tls_config other = {.ca_file = other_ca};
    const stg_tls_config *cases[] = {NULL, &other};
    for (int i = 0; i < 2; i++) {
        conns c = {0};
        stg_result r;
        /* The policy asks for TLS errors to be retried: a certificate
         * that did not verify is not, all the same. */
        assert_int_equal(get(&s, "/a", cases[i], 4, STG_NET_BIT(STG_NET_TLS), &c, &r), STG_OK);
        assert_int_equal(r.action, STG_ACTION_GIVE_UP);
        assert_int_equal(r.error, STG_NET_TLS);
        assert_int_equal(r.curl_code, CURLE_PEER_FAILED_VERIFICATION);
        assert_int_equal(r.attempts, 1);
        assert_int_equal(r.reason, STG_REASON_ERROR_NOT_RETRYABLE);
        assert_non_null(strstr(r.error_text, "did not verify"));
        stg_result_free(&r);
    }
    server_stop(&s);
}

static void test_verified(void **state)
{
    (void)state;
    server s;
    tls_server(&s);
    stg_tls_config file = {.ca_file = ca}, env = {.ca_from_env = true}, k = {.insecure = true};
    setenv("SSL_CERT_FILE", ca, 1);
    const stg_tls_config *cases[] = {&file, &env, &k};
    for (int i = 0; i < 3; i++) {
        conns c = {0};
        stg_result r;
        assert_int_equal(get(&s, "/a", cases[i], 1, 0, &c, &r), STG_OK);
        assert_int_equal(r.action, STG_ACTION_SUCCESS);
        assert_int_equal(r.status, 200);
        assert_int_equal(c.connects, 1);
        assert_int_equal(c.handshakes, 1);
        stg_result_free(&r);
    }
    /* ca_from_env off: the variable is not read (libcurl's own default). */
    conns c = {0};
    stg_result r;
    stg_tls_config no_env = {0};
    assert_int_equal(get(&s, "/a", &no_env, 1, 0, &c, &r), STG_OK);
    assert_int_equal(r.error, STG_NET_TLS);
    stg_result_free(&r);
    unsetenv("SSL_CERT_FILE");
    server_stop(&s);
}

/* Three attempts of one call (503, retried): one connection, one
 * handshake, then two reuses. */
static void test_reuse_in_events(void **state)
{
    (void)state;
    server s;
    tls_server(&s);
    stg_tls_config file = {.ca_file = ca};
    conns c = {0};
    stg_result r;
    assert_int_equal(get(&s, "/status/503", &file, 3, 0, &c, &r), STG_OK);
    assert_int_equal(r.status, 503);
    assert_int_equal(c.attempts, 3);
    assert_int_equal(c.connects_of[0], 1);
    assert_false(c.reused_of[0]);
    assert_int_equal(c.connects_of[1], 0);
    assert_true(c.reused_of[1]);
    assert_true(c.reused_of[2]);
    assert_int_equal(c.handshakes, 1);
    stg_result_free(&r);
    server_stop(&s);
}

typedef struct tally {
    int ok, done;
} tally;

static void on_done(stg_engine *e, uint64_t id, const stg_result *r, void *data)
{
    (void)e, (void)id;
    tally *t = data;
    t->done++;
    t->ok += r->action == STG_ACTION_SUCCESS && r->status == 200;
}

/* The protocol's bound: with keep-alive, N slots need N connections. */
static void test_engine_connections(void **state)
{
    (void)state;
    server s;
    tls_server(&s);
    stg_tls_config file = {.ca_file = ca};
    conns c = {0};
    enum { N = 200, J = 4 };
    stg_engine_config cfg = {.concurrency = J, .tls = &file, .on_event = count, .event_data = &c};
    stg_engine *e = stg_engine_new(&cfg, NULL);
    assert_non_null(e);
    tally t = {0};
    for (int i = 0; i < N; i++) {
        char url[128];
        snprintf(url, sizeof url, "https://127.0.0.1:%d/job/%d", s.port, i);
        stg_request rq = {.url = url};
        assert_int_equal(stg_engine_submit(e, &rq, on_done, &t, NULL), STG_OK);
    }
    assert_int_equal(stg_engine_drain(e), 0);
    stg_engine_free(e);
    assert_int_equal(t.done, N);
    assert_int_equal(t.ok, N);
    assert_int_equal(c.attempts, N);
    assert_true(c.connects >= 1 && c.connects <= J);
    assert_int_equal(c.handshakes, c.connects);
    assert_int_equal(c.reused, N - c.connects);
    server_stop(&s);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_teardown(test_unverified_never_retried, stop_leftovers),
        cmocka_unit_test_teardown(test_verified, stop_leftovers),
        cmocka_unit_test_teardown(test_reuse_in_events, stop_leftovers),
        cmocka_unit_test_teardown(test_engine_connections, stop_leftovers),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
#endif
