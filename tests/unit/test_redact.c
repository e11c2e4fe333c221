/*
 * Unit tests of the core's redaction (stagger/redact.h): URLs of many
 * shapes (userinfo, IPv6, ports, queries with and without values, fragments, percent-encoding,
 * no scheme, malformed authorities), truncation that must never reveal a
 * secret, free-text redaction, the one list of secret names (headers,
 * query parameters), and whether a URL holds a secret.
 */
#include <stdio.h>
#include <string.h>

#include "cmocka_all.h"

#include <stagger/redact.h>

static void check_url(const char *in, const char *want)
{
    char buf[512];
    size_t n = stg_redact_url(in, buf, sizeof buf);
    if (strcmp(buf, want) != 0)
        fail_msg("redact(%s) = '%s', want '%s'", in ? in : "(null)", buf, want);
    assert_int_equal(n, strlen(want));
}

static void test_url_shapes(void **state)
{
    (void)state;
    check_url("http://user:pass@example.com:8080/p/a?x=1&y=2#frag",
              "http://example.com:8080/p/a?x=1&y=2");
    check_url("http://user:pw@host", "http://host");
    check_url("http://user@host/x", "http://host/x");
    check_url("http://user:p@ss@host/x", "http://host/x"); /* last '@' ends userinfo */
    check_url("http://:@host/", "http://host/");
    check_url("HTTP://Host:80", "HTTP://Host:80");
    check_url("http://host:/p", "http://host:/p");
    check_url("http://host?q=1", "http://host?q=1");
    check_url("http://host#only-fragment", "http://host");
    check_url("http://h/#access_token=SECRET", "http://h/");
    check_url("http://host/p#frag?notquery=1", "http://host/p");
}

static void test_url_ipv6(void **state)
{
    (void)state;
    check_url("https://[::1]:8443/v1?token=abc", "https://[::1]:8443/v1?token=REDACTED");
    check_url("http://[2001:db8::1]/", "http://[2001:db8::1]/");
    check_url("http://u:pw@[::1]/x", "http://[::1]/x");
    check_url("http://[fe80::1%25eth0]:80/", "http://[fe80::1%25eth0]:80/");
    check_url("http://[::1/x?k=v", "http://REDACTED");    /* unclosed bracket */
    check_url("http://[::1]x/y", "http://REDACTED");      /* junk after ']' */
    check_url("http://::1/x", "http://REDACTED");         /* colons outside brackets */
}

static void test_url_query(void **state)
{
    (void)state;
    /* one rule (issue #37): a value is hidden when its name is a secret's,
     * shown otherwise; a bare item (maybe a key) is hidden whole */
    check_url("http://h/p?flag&k=&v=1", "http://h/p?REDACTED&k=&v=1");
    check_url("http://h/p?a=1&&b=2", "http://h/p?a=1&&b=2");
    check_url("http://h/p?", "http://h/p?");
    check_url("http://h/p?a=1;b=2", "http://h/p?a=1;b=2");
    check_url("http://h/p?a=1;token=T", "http://h/p?a=1;token=REDACTED");
    check_url("http://h/p?a=b=c", "http://h/p?a=b=c");
    check_url("http://h/p?=v", "http://h/p?=v");
    check_url("http://h/p?SECRETKEY", "http://h/p?REDACTED");
    check_url("http://h/p?api_key=SECRET&page=2", "http://h/p?api_key=REDACTED&page=2");
    check_url("http://h/p?page=2&limit=50&Signature=S&X-Amz-Credential=C",
              "http://h/p?page=2&limit=50&Signature=REDACTED&X-Amz-Credential=REDACTED");
}

/* Matrix parameters in the path (";name=value", RFC 3986 §3.3): servers
 * put session ids (";jsessionid=") and tokens there; the ones named like
 * a secret lose their value, the rest of the path is kept. */
static void test_url_path_params(void **state)
{
    (void)state;
    check_url("http://h/app;jsessionid=ABC123/page?x=1",
              "http://h/app;jsessionid=REDACTED/page?x=1");
    check_url("http://h/a;JSESSIONID=s", "http://h/a;JSESSIONID=REDACTED");
    check_url("http://h/a;color=red;token=t;size=2/b;api_key=k",
              "http://h/a;color=red;token=REDACTED;size=2/b;api_key=REDACTED");
    check_url("http://h/a;color=red/b", "http://h/a;color=red/b");
    check_url("http://h/a;session", "http://h/a;session"); /* no value to hide */
    check_url("http://h/a;=x;;/b", "http://h/a;=x;;/b");
    check_url("http://h/a;sig=1=2/c", "http://h/a;sig=REDACTED/c");
    check_url("/rel;sid_token=x", "/rel;sid_token=REDACTED");
    char buf[24]; /* truncated inside the secret: never any of it */
    stg_redact_url("http://h/a;token=SECRETVALUE", buf, sizeof buf);
    assert_null(strstr(buf, "SEC"));
    assert_true(stg_redact_url_has_secret("http://h/app;jsessionid=ABC/x"));
    assert_true(stg_redact_url_has_secret("http://h/a;b=1;password=p"));
    assert_false(stg_redact_url_has_secret("http://h/a;color=red/b"));
    assert_false(stg_redact_url_has_secret("http://h/a;session"));
}

static void test_url_encoding(void **state)
{
    (void)state;
    check_url("http://host/p%20q?a=%41%42", "http://host/p%20q?a=%41%42");
    check_url("http://host/?a%3D=1", "http://host/?a%3D=1");
    check_url("http://u%40x:p%3Aw@host/", "http://host/");
    check_url("http://h/a\nb", "http://h/a%0Ab");
    check_url("http://h/a b", "http://h/a%20b");
    check_url("http://h/\xc3\xa9?x=\xc3\xa9", "http://h/%C3%A9?x=%C3%A9");
    check_url("http://h/p?k\x01=v\x02", "http://h/p?k%01=v%02");
}

static void test_url_no_scheme(void **state)
{
    (void)state;
    check_url("example.com/p?k=v", "example.com/p?k=v");
    check_url("user:pw@example.com:81/x", "example.com:81/x");
    check_url("localhost:8080", "localhost:8080");
    check_url("/relative/path?a=b", "/relative/path?a=b");
    check_url("//host:1/p?token=y", "//host:1/p?token=REDACTED");
    check_url("?only=query", "?only=query");
    check_url("", "");
    check_url("mailto:someone@example.com", "example.com");
}

static void test_url_malformed_authority(void **state)
{
    (void)state;
    /* A password with an unencoded '/', '?' or '#': curl cannot use these
     * either; nothing after the scheme is shown. */
    check_url("http://user:pa/ss@host/", "http://REDACTED");
    check_url("http://user:pa?ss@host/", "http://REDACTED");
    check_url("http://user:pa#ss@host/", "http://REDACTED");
    check_url("http://host:80a/", "http://REDACTED");
}

static void test_url_truncation(void **state)
{
    (void)state;
    const char *url =
        "http://u:SECRETPW@host.example:8080/path/x?token=SECRETQ&api_key=SECRETV&p=1#SECRETF";
    char full[256];
    stg_redact_url(url, full, sizeof full);
    assert_null(strstr(full, "SECRET"));
    for (size_t size = 1; size < 100; size++) {
        char buf[128];
        memset(buf, 'x', sizeof buf);
        size_t n = stg_redact_url(url, buf, size);
        assert_true(n < size);
        assert_int_equal(buf[n], '\0');
        assert_int_equal(strlen(buf), n);
        assert_null(strstr(buf, "SECRET"));
        assert_int_equal(strncmp(buf, full, n), 0); /* a prefix of the full answer */
    }
    char one[1] = {'x'};
    assert_int_equal(stg_redact_url(url, one, 0), 0);
    assert_int_equal(one[0], 'x');
    char buf[8];
    assert_int_equal(stg_redact_url(NULL, buf, sizeof buf), 0);
    assert_string_equal(buf, "");
}

static void test_redact_text(void **state)
{
    (void)state;
    char buf[256];
    stg_redact_text("Failed to connect to http://u:pw@h/x?k=v port 1", buf, sizeof buf);
    assert_string_equal(buf, "Failed to connect to http://h/x?k=v port 1");
    stg_redact_text("bad 'https://a:SECRET@h/?token=SECRET2' end\n", buf, sizeof buf);
    assert_string_equal(buf, "bad 'https://h/?token=REDACTED' end ");
    assert_null(strstr(buf, "SECRET"));
    stg_redact_text("plain\x01text", buf, sizeof buf);
    assert_string_equal(buf, "plain?text");
    stg_redact_text(NULL, buf, sizeof buf);
    assert_string_equal(buf, "");
}

static void test_header_names(void **state)
{
    (void)state;
    static const char *const secret[] = {
        "Authorization", "authorization", "PROXY-AUTHORIZATION", "Cookie", " Cookie ",
        "Set-Cookie", "X-Api-Key", "Api-Key", "X-Auth-Token", "X-My-Secret", "Private-Token",
        "my-apikey", "X-Goog-Api-Key", "x-api_key", "X-Amz-Security-Token", "X-Password",
        "X-Session-Id", "X-Signature", NULL};
    for (size_t i = 0; secret[i]; i++)
        if (!stg_redact_header_is_secret(secret[i], strlen(secret[i]), NULL))
            fail_msg("'%s' should be secret", secret[i]);
    static const char *const plain[] = {"Content-Type", "Accept", "Idempotency-Key",
                                        "X-Client-Id", "Retry-After", "User-Agent", "", NULL};
    for (size_t i = 0; plain[i]; i++)
        if (stg_redact_header_is_secret(plain[i], strlen(plain[i]), NULL))
            fail_msg("'%s' should not be secret", plain[i]);
    const char *extra[] = {"X-Custom", "Ocp-Apim-Subscription-Key", NULL};
    assert_true(stg_redact_header_is_secret("x-custom", 8, extra));
    assert_true(stg_redact_header_is_secret("ocp-apim-subscription-key", 25, extra));
    assert_false(stg_redact_header_is_secret("X-Customer", 10, extra));
    assert_false(stg_redact_header_is_secret(NULL, 0, extra));
    /* Only the given length counts: "Cookie" within "Cookies-Allowed". */
    assert_true(stg_redact_header_is_secret("Cookies-Allowed", 6, NULL));
}

static void test_header_lines(void **state)
{
    (void)state;
    char buf[128];
    stg_redact_header_line("Authorization: Bearer SECRET\r\n", NULL, buf, sizeof buf);
    assert_string_equal(buf, "Authorization: REDACTED");
    stg_redact_header_line("Set-Cookie: sid=SECRET; Path=/", NULL, buf, sizeof buf);
    assert_string_equal(buf, "Set-Cookie: REDACTED");
    stg_redact_header_line("Accept: */*", NULL, buf, sizeof buf);
    assert_string_equal(buf, "Accept: */*");
    stg_redact_header_line("HTTP/1.1 200 OK\r\n", NULL, buf, sizeof buf);
    assert_string_equal(buf, "HTTP/1.1 200 OK");
    const char *extra[] = {"X-Custom", NULL};
    stg_redact_header_line("X-Custom: SECRET", extra, buf, sizeof buf);
    assert_string_equal(buf, "X-Custom: REDACTED");
    stg_redact_header_line("X-Odd: a\tb\x01", NULL, buf, sizeof buf);
    assert_string_equal(buf, "X-Odd: a?b?");
    for (size_t size = 1; size < 40; size++) {
        stg_redact_header_line("Cookie: SECRET", NULL, buf, size);
        assert_null(strstr(buf, "SECRET"));
    }
}

/* Names that passed as non-secret while the header list and the query list
 * differed (X-Access-Key, X-Credential, X-Jwt, X-Private): one test each,
 * as a header and as a query parameter. */
static void check_secret_name(const char *name)
{
    char url[128], line[128], buf[256];
    if (!stg_redact_name_is_secret(name, strlen(name)))
        fail_msg("name '%s' should be secret", name);
    if (!stg_redact_header_is_secret(name, strlen(name), NULL))
        fail_msg("header '%s' should be secret", name);
    snprintf(line, sizeof line, "%s: S3CRET", name);
    stg_redact_header_line(line, NULL, buf, sizeof buf);
    if (strstr(buf, "S3CRET"))
        fail_msg("header line '%s' leaked: '%s'", line, buf);
    snprintf(url, sizeof url, "https://h.test/p?page=2&%s=S3CRET", name);
    if (!stg_redact_url_has_secret(url))
        fail_msg("URL '%s' should hold a secret", url);
}

static void test_name_x_access_key(void **state)
{
    (void)state;
    check_secret_name("X-Access-Key");
    check_secret_name("access_key");
}

static void test_name_x_credential(void **state)
{
    (void)state;
    check_secret_name("X-Credential");
    check_secret_name("X-Amz-Credential");
}

static void test_name_x_jwt(void **state)
{
    (void)state;
    check_secret_name("X-Jwt");
    check_secret_name("jwt");
}

static void test_name_x_private(void **state)
{
    (void)state;
    check_secret_name("X-Private");
    check_secret_name("private_key");
}

/* The same words for every use: what the query list knew (pwd, sig,
 * session...) is secret as a header too, and the reverse. */
static void test_one_list(void **state)
{
    (void)state;
    static const char *const both[] = {"pwd",    "X-Pwd",         "sig",  "X-Sig",
                                       "passwd", "X-Session",     "key",  "Cookie",
                                       "token",  "client_secret", "auth", NULL};
    for (size_t i = 0; both[i]; i++)
        check_secret_name(both[i]);
    static const char *const plain[] = {"id", "page", "X-Client-Id", "Accept", "q", NULL};
    for (size_t i = 0; plain[i]; i++) {
        char url[128];
        assert_false(stg_redact_name_is_secret(plain[i], strlen(plain[i])));
        snprintf(url, sizeof url, "https://h.test/p?%s=1", plain[i]);
        assert_false(stg_redact_url_has_secret(url));
    }
    /* Idempotency-Key is a retry marker, not a credential, in both forms. */
    assert_false(stg_redact_name_is_secret("Idempotency-Key", 15));
    assert_false(stg_redact_name_is_secret("idempotency_key", 15));
    assert_false(stg_redact_url_has_secret("https://h.test/p?idempotency_key=abc"));
    assert_true(stg_redact_name_is_secret("X-Idempotency-Key", 17));
    assert_false(stg_redact_name_is_secret(NULL, 3));
}

static void test_url_has_secret(void **state)
{
    (void)state;
    assert_false(stg_redact_url_has_secret("http://a.test/x?id=1&page=2"));
    assert_false(stg_redact_url_has_secret("http://a.test/key/path"));
    assert_false(stg_redact_url_has_secret("http://a.test:8080/x?"));
    assert_false(stg_redact_url_has_secret(NULL));
    assert_true(stg_redact_url_has_secret("http://a.test/x?id=1&api_key=s"));
    assert_true(stg_redact_url_has_secret("http://a.test/x?id=1;token=s"));
    assert_true(stg_redact_url_has_secret("http://a.test/x?X-Amz-Signature=s"));
    assert_true(stg_redact_url_has_secret("http://a.test/x?access_token")); /* no '=' */
    assert_true(stg_redact_url_has_secret("http://user:pw@a.test/x"));
    assert_true(stg_redact_url_has_secret("http://user@a.test/x"));
    assert_true(stg_redact_url_has_secret("http://a.test/x#access_token=s"));
    assert_true(stg_redact_url_has_secret("http://a.test/x#"));
    /* A password with an unencoded '/': the authority "user:pa" has a port
     * that is not a number, so what follows cannot be trusted. */
    assert_true(stg_redact_url_has_secret("http://user:pa/ss@a.test/x"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_url_shapes),      cmocka_unit_test(test_url_ipv6),
        cmocka_unit_test(test_url_query),       cmocka_unit_test(test_url_encoding),
        cmocka_unit_test(test_url_no_scheme),   cmocka_unit_test(test_url_malformed_authority),
        cmocka_unit_test(test_url_truncation),
        cmocka_unit_test(test_redact_text),     cmocka_unit_test(test_header_names),
        cmocka_unit_test(test_header_lines),    cmocka_unit_test(test_name_x_access_key),
        cmocka_unit_test(test_name_x_credential), cmocka_unit_test(test_name_x_jwt),
        cmocka_unit_test(test_name_x_private),  cmocka_unit_test(test_one_list),
        cmocka_unit_test(test_url_has_secret),  cmocka_unit_test(test_url_path_params),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
