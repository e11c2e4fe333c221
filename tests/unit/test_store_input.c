/*
 * Unit tests of the batch input parser (src/store/input.c) and the job-set
 * fingerprint: formats, bad lines with their numbers, secret detection,
 * template filling, and what does and does not change the fingerprint.
 */
#define _POSIX_C_SOURCE 200809L
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cmocka_all.h"

#include "store/store.h"

static int parse(const char *text, const stg_input_options *o, stg_job_set *set)
{
    FILE *f = fmemopen((void *)text, strlen(text), "r");
    assert_non_null(f);
    char err[256];
    int rc = stg__input_read(f, o, set, err, sizeof err);
    fclose(f);
    return rc;
}

static const char *bad_msg(const stg_job_set *set, long line)
{
    for (size_t i = 0; i < set->n_bad; i++)
        if (set->bad[i].line == line)
            return set->bad[i].message;
    return NULL;
}

static void test_sha256(void **state)
{
    (void)state;
    static const struct {
        const char *in, *hex;
    } v[] = {
        {"", "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"},
        {"abc", "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"},
        {"abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq",
         "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1"},
    };
    for (size_t i = 0; i < sizeof v / sizeof v[0]; i++) {
        stg_sha256 c;
        unsigned char d[32];
        char hex[65];
        stg__sha256_init(&c);
        /* fed byte by byte to cross block boundaries */
        for (const char *p = v[i].in; *p; p++)
            stg__sha256_update(&c, p, 1);
        stg__sha256_final(&c, d);
        for (int k = 0; k < 32; k++)
            snprintf(hex + 2 * k, 3, "%02x", d[k]);
        assert_string_equal(hex, v[i].hex);
    }
    /* one million 'a' */
    stg_sha256 c;
    unsigned char d[32];
    char hex[65], a[1000];
    memset(a, 'a', sizeof a);
    stg__sha256_init(&c);
    for (int i = 0; i < 1000; i++)
        stg__sha256_update(&c, a, sizeof a);
    stg__sha256_final(&c, d);
    for (int k = 0; k < 32; k++)
        snprintf(hex + 2 * k, 3, "%02x", d[k]);
    assert_string_equal(hex, "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
}

/* --idempotency-key auto: the key is stable over runs and builds (a
 * resumed batch sends the same key), so its value is pinned here: "stg-"
 * and two FNV-1a hashes of id, method, URL and body, computed apart. */
static void test_auto_key_pinned(void **state)
{
    (void)state;
    stg_input_options o = {.idempotency_key = "auto"};
    stg_job_set set;
    assert_int_equal(parse("https://api.example/a?x=1\n", &o, &set), STG_OK);
    assert_int_equal(set.n, 1);
    assert_string_equal(set.jobs[0].idempotency_key, "stg-ce22e1ea0ec9b20e132e29f8b1b7bd5d");
    stg__job_set_free(&set);
}

static void test_urls(void **state)
{
    (void)state;
    stg_job_set set;
    const char *text = "\xEF\xBB\xBFhttp://127.0.0.1:1/a\r\n"
                       "\n"
                       "   # a comment\n"
                       "  https://example.test/b?x=1  \n"
                       "not a url\n"
                       "ftp://example.test/c\n"
                       "http:///nohost\n"
                       "http://127.0.0.1:1/a\n"; /* a repeated URL is a new job */
    assert_int_equal(parse(text, NULL, &set), STG_OK);
    assert_int_equal(set.format, STG_INPUT_URLS);
    assert_int_equal(set.lines, 8);
    assert_int_equal(set.n, 3);
    assert_string_equal(set.jobs[0].url, "http://127.0.0.1:1/a");
    assert_string_equal(set.jobs[0].key, "1");
    assert_int_equal(set.jobs[0].line, 1);
    assert_string_equal(set.jobs[0].method, "GET");
    assert_string_equal(set.jobs[1].url, "https://example.test/b?x=1");
    assert_string_equal(set.jobs[1].key, "4");
    assert_false(set.jobs[1].url_secret);
    assert_string_equal(set.jobs[2].key, "8");
    assert_int_equal(set.n_bad, 3);
    assert_non_null(strstr(bad_msg(&set, 5), "no URL"));
    assert_non_null(bad_msg(&set, 6));
    assert_non_null(bad_msg(&set, 7));
    assert_int_equal(strlen(set.fingerprint), 64);
    stg__job_set_free(&set);

    stg_input_options o = {.method = "BREW"};
    char err[256];
    FILE *f = fmemopen((void *)"http://a.test/\n", 15, "r");
    assert_int_equal(stg__input_read(f, &o, &set, err, sizeof err), STG_EINVAL);
    fclose(f);
    assert_non_null(strstr(err, "unknown method"));
}

static void test_nul_byte(void **state)
{
    (void)state;
    static const char text[] = "http://a.test/x\nhttp://a.test/\0y\nhttp://a.test/z\n";
    FILE *f = fmemopen((void *)text, sizeof text - 1, "r");
    stg_job_set set;
    char err[256];
    assert_int_equal(stg__input_read(f, NULL, &set, err, sizeof err), STG_OK);
    fclose(f);
    assert_int_equal(set.n, 2);
    assert_int_equal(set.n_bad, 1);
    assert_int_equal(set.bad[0].line, 2);
    stg__job_set_free(&set);
}

static void test_template(void **state)
{
    (void)state;
    stg_job_set set;
    stg_input_options o = {.url_template = "http://127.0.0.1:8080/track/{}?k={}"};
    assert_int_equal(parse("AB12\nx y/z\n\nAB12\n", &o, &set), STG_OK);
    assert_int_equal(set.format, STG_INPUT_KEYS);
    assert_int_equal(set.n, 2);
    assert_string_equal(set.jobs[0].key, "AB12");
    assert_string_equal(set.jobs[0].url, "http://127.0.0.1:8080/track/AB12?k=AB12");
    assert_string_equal(set.jobs[1].url, "http://127.0.0.1:8080/track/x%20y%2Fz?k=x%20y%2Fz");
    assert_int_equal(set.n_bad, 1);
    assert_int_equal(set.bad[0].line, 4);
    assert_non_null(strstr(set.bad[0].message, "repeated key (first on line 1)"));
    stg__job_set_free(&set);

    char err[256];
    stg_input_options none = {.url_template = "http://a.test/track"};
    FILE *f = fmemopen((void *)"x\n", 2, "r");
    assert_int_equal(stg__input_read(f, &none, &set, err, sizeof err), STG_EINVAL);
    fclose(f);
    stg_input_options rel = {.url_template = "/track/{}"};
    f = fmemopen((void *)"x\n", 2, "r");
    assert_int_equal(stg__input_read(f, &rel, &set, err, sizeof err), STG_EINVAL);
    fclose(f);
}

static void test_jsonl(void **state)
{
    (void)state;
    stg_job_set set;
    const char *text =
        "{\"id\": \"a\", \"url\": \"http://127.0.0.1:1/a\"}\n"                          /* 1 */
        "{\"id\": 7, \"method\": \"PUT\", \"url\": \"http://127.0.0.1:1/b\", "
        "\"headers\": {\"X-Trace\": \"t1\", \"Idempotency-Key\": \"k-1\"}, \"body\": \"raw\"}\n" /* 2 */
        "{\"url\": \"http://127.0.0.1:1/c\", \"body\": {\"n\": 1}}\n"                  /* 3 */
        "{\"id\": \"d\", \"url\": \"http://127.0.0.1:1/d\", \"headers\": "
        "[\"Authorization: Bearer SECRET\", \"Accept: x/y\"]}\n"                         /* 4 */
        "{\"id\": \"e\", \"url\": \"http://127.0.0.1:1/e\", \"method\": \"get\"}\n"      /* 5 */
        "{\"id\": \"f\", \"method\": \"GET\"}\n"                                          /* 6 */
        "{\"id\": \"g\", \"url\": \"http://127.0.0.1:1/g\"\n"                            /* 7 */
        "[1, 2]\n"                                                                        /* 8 */
        "{\"id\": \"a\", \"url\": \"http://127.0.0.1:1/a2\"}\n"                         /* 9 */
        "{\"id\": \"h\", \"url\": \"http://u:pw@127.0.0.1:1/h\"}\n"                      /* 10 */
        "{\"id\": \"i\", \"url\": \"http://127.0.0.1:1/i\", \"headers\": {\"Bad Name\": \"v\"}}\n"
        "{\"id\": \"j\", \"url\": \"http://127.0.0.1:1/j\", \"idempotency_key\": \"ik\", "
        "\"method\": \"POST\"}\n"                                                         /* 12 */
        "{\"id\": {}, \"url\": \"http://127.0.0.1:1/k\"}\n";                             /* 13 */
    assert_int_equal(parse(text, NULL, &set), STG_OK);
    assert_int_equal(set.format, STG_INPUT_JSONL);
    assert_int_equal(set.n, 6);
    /* 1 */
    assert_string_equal(set.jobs[0].key, "a");
    assert_string_equal(set.jobs[0].method, "GET");
    assert_int_equal(set.jobs[0].n_headers, 0);
    /* 2: the Idempotency-Key header becomes the key, not a header */
    assert_string_equal(set.jobs[1].key, "7");
    assert_string_equal(set.jobs[1].method, "PUT");
    assert_int_equal(set.jobs[1].n_headers, 1);
    assert_string_equal(set.jobs[1].headers[0], "X-Trace: t1");
    assert_string_equal(set.jobs[1].idempotency_key, "k-1");
    assert_int_equal(set.jobs[1].body_len, 3);
    assert_memory_equal(set.jobs[1].body, "raw", 3);
    /* 3: a JSON body: POST, compact, with a Content-Type */
    assert_string_equal(set.jobs[2].key, "3");
    assert_string_equal(set.jobs[2].method, "POST");
    assert_string_equal(set.jobs[2].body, "{\"n\":1}");
    assert_string_equal(set.jobs[2].headers[0], "Content-Type: application/json");
    /* 4: secret header */
    assert_true(set.jobs[3].headers_secret);
    assert_false(set.jobs[3].url_secret);
    assert_int_equal(set.jobs[3].n_headers, 2);
    /* 10: userinfo */
    assert_string_equal(set.jobs[4].key, "h");
    assert_true(set.jobs[4].url_secret);
    assert_null(strstr(set.jobs[4].url_redacted, "pw"));
    /* 12 */
    assert_string_equal(set.jobs[5].idempotency_key, "ik");
    /* bad lines, by number; none quotes the line */
    assert_non_null(strstr(bad_msg(&set, 5), "unknown method 'get'"));
    assert_non_null(strstr(bad_msg(&set, 6), "no URL"));
    assert_non_null(strstr(bad_msg(&set, 7), "bad JSON"));
    assert_non_null(strstr(bad_msg(&set, 8), "not a JSON object"));
    assert_non_null(strstr(bad_msg(&set, 9), "repeated id (first on line 1)"));
    assert_non_null(strstr(bad_msg(&set, 11), "bad header"));
    assert_non_null(bad_msg(&set, 13));
    assert_int_equal(set.n_bad, 7);
    for (size_t i = 0; i < set.n_bad; i++)
        assert_null(strstr(set.bad[i].message, "127.0.0.1"));
    stg__job_set_free(&set);
}

static void test_bad_json_does_not_echo(void **state)
{
    (void)state;
    stg_job_set set;
    assert_int_equal(
        parse("{\"url\": \"http://a.test/\", \"headers\": {\"Authorization\": Bearer SEKRIT}}\n",
              NULL, &set),
        STG_OK);
    assert_int_equal(set.n_bad, 1);
    assert_null(strstr(set.bad[0].message, "SEKRIT"));
    assert_null(strstr(set.bad[0].message, "Bearer"));
    stg__job_set_free(&set);
}

static void test_secret_urls(void **state)
{
    (void)state;
    assert_false(stg__store_url_is_secret("http://a.test/x?id=1&page=2"));
    assert_true(stg__store_url_is_secret("http://a.test/x?id=1&api_key=s"));
    assert_true(stg__store_url_is_secret("http://a.test/x?access_token=s"));
    assert_true(stg__store_url_is_secret("http://a.test/x?X-Amz-Signature=s"));
    assert_true(stg__store_url_is_secret("http://a.test/x?password=s"));
    assert_true(stg__store_url_is_secret("http://user:pw@a.test/x"));
    assert_true(stg__store_url_is_secret("http://a.test/x#access_token=s"));
    assert_false(stg__store_url_is_secret("http://a.test/key/path"));
    assert_true(stg__store_url_valid("http://a.test"));
    assert_true(stg__store_url_valid("HTTPS://a.test:8443/p?q#f"));
    assert_false(stg__store_url_valid("http://"));
    assert_false(stg__store_url_valid("http://a.test/a b"));
    assert_false(stg__store_url_valid("mailto:x@a.test"));
    assert_true(stg__store_method_idempotent("GET"));
    assert_true(stg__store_method_idempotent("PUT"));
    assert_false(stg__store_method_idempotent("POST"));
    assert_false(stg__store_method_idempotent("PATCH"));
}

static void test_fingerprint(void **state)
{
    (void)state;
    stg_job_set a, b, c, d, e;
    const char *one = "{\"id\":\"x\",\"url\":\"http://a.test/x?token=AAA\","
                      "\"headers\":{\"Authorization\":\"Bearer 111\"}}\n"
                      "{\"id\":\"y\",\"url\":\"http://a.test/y\"}\n";
    /* the same jobs: other secrets, a comment, blank lines */
    const char *two = "# same jobs\n\n{\"id\":\"x\",\"url\":\"http://a.test/x?token=BBB\","
                      "\"headers\":{\"Authorization\":\"Bearer 222\"}}\n"
                      "{\"id\":\"y\",\"url\":\"http://a.test/y\"}\n";
    /* another job set: a different non-secret header */
    const char *three = "{\"id\":\"x\",\"url\":\"http://a.test/x?token=AAA\","
                        "\"headers\":{\"Authorization\":\"Bearer 111\",\"Accept\":\"a\"}}\n"
                        "{\"id\":\"y\",\"url\":\"http://a.test/y\"}\n";
    /* another: order */
    const char *four = "{\"id\":\"y\",\"url\":\"http://a.test/y\"}\n"
                       "{\"id\":\"x\",\"url\":\"http://a.test/x?token=AAA\","
                       "\"headers\":{\"Authorization\":\"Bearer 111\"}}\n";
    /* another: a non-secret query value */
    const char *five = "{\"id\":\"x\",\"url\":\"http://a.test/x?token=AAA\","
                       "\"headers\":{\"Authorization\":\"Bearer 111\"}}\n"
                       "{\"id\":\"y\",\"url\":\"http://a.test/y?page=2\"}\n";
    assert_int_equal(parse(one, NULL, &a), STG_OK);
    assert_int_equal(parse(two, NULL, &b), STG_OK);
    assert_int_equal(parse(three, NULL, &c), STG_OK);
    assert_int_equal(parse(four, NULL, &d), STG_OK);
    assert_int_equal(parse(five, NULL, &e), STG_OK);
    assert_string_equal(a.fingerprint, b.fingerprint);
    assert_string_not_equal(a.fingerprint, c.fingerprint);
    assert_string_not_equal(a.fingerprint, d.fingerprint);
    assert_string_not_equal(a.fingerprint, e.fingerprint);
    stg__job_set_free(&a);
    stg__job_set_free(&b);
    stg__job_set_free(&c);
    stg__job_set_free(&d);
    stg__job_set_free(&e);
}

static void test_path_errors(void **state)
{
    (void)state;
    stg_job_set set;
    char err[256];
    assert_int_equal(stg__input_read_path("/nonexistent/in.txt", NULL, &set, err, sizeof err),
                     STG_EIO);
    assert_non_null(strstr(err, "/nonexistent/in.txt"));
    stg__job_set_free(&set);
}

/* True if the path of url (after "scheme://host") has a "." or ".."
 * segment, which curl and servers would resolve away. */
static bool has_dot_segment(const char *url)
{
    const char *p = strstr(url, "://");
    p = p ? strchr(p + 3, '/') : NULL;
    while (p && *p == '/') {
        const char *s = p + 1;
        size_t n = strcspn(s, "/?#");
        if ((n == 1 && s[0] == '.') || (n == 2 && s[0] == '.' && s[1] == '.'))
            return true;
        p = s + n;
    }
    return false;
}

/* Every URL-special key, filled into /ok/{}: never a dot segment, never a
 * new path, query, fragment or authority. */
static void test_template_special_keys(void **state)
{
    (void)state;
    static const struct {
        const char *key, *url;
    } v[] = {
        {".", "http://127.0.0.1:8080/ok/%2E"},
        {"..", "http://127.0.0.1:8080/ok/%2E%2E"},
        {"...", "http://127.0.0.1:8080/ok/%2E%2E%2E"},
        {"a.b", "http://127.0.0.1:8080/ok/a.b"}, /* dots inside a key are harmless */
        {".a", "http://127.0.0.1:8080/ok/.a"},
        {"/", "http://127.0.0.1:8080/ok/%2F"},
        {"../x", "http://127.0.0.1:8080/ok/..%2Fx"},
        {"?", "http://127.0.0.1:8080/ok/%3F"},
        {"a#b", "http://127.0.0.1:8080/ok/a%23b"},
        {"%", "http://127.0.0.1:8080/ok/%25"},
        {"%2E%2E", "http://127.0.0.1:8080/ok/%252E%252E"},
        {"a b", "http://127.0.0.1:8080/ok/a%20b"},
        {"@", "http://127.0.0.1:8080/ok/%40"},
        {":", "http://127.0.0.1:8080/ok/%3A"},
        {"\xc3\xa9\xe2\x82\xac", "http://127.0.0.1:8080/ok/%C3%A9%E2%82%AC"}, /* é€ */
        {"-._~", "http://127.0.0.1:8080/ok/-._~"},
    };
    stg_input_options o = {.url_template = "http://127.0.0.1:8080/ok/{}"};
    for (size_t i = 0; i < sizeof v / sizeof v[0]; i++) {
        char line[64];
        stg_job_set set;
        snprintf(line, sizeof line, "%s\n", v[i].key);
        assert_int_equal(parse(line, &o, &set), STG_OK);
        if (set.n != 1)
            fail_msg("key '%s': %zu jobs, %zu bad", v[i].key, set.n, set.n_bad);
        assert_string_equal(set.jobs[0].key, v[i].key);
        if (strcmp(set.jobs[0].url, v[i].url) != 0)
            fail_msg("key '%s': url '%s', want '%s'", v[i].key, set.jobs[0].url, v[i].url);
        assert_false(has_dot_segment(set.jobs[0].url));
        assert_true(stg__store_url_valid(set.jobs[0].url));
        stg__job_set_free(&set);
    }
    /* The empty key does not exist: a blank line (or one of only blanks) is
     * skipped, and a line starting with '#' is a comment, not the key "#". */
    stg_job_set set;
    assert_int_equal(parse("\n   \n#\n# x\n", &o, &set), STG_OK);
    assert_int_equal(set.n, 0);
    assert_int_equal(set.n_bad, 0);
    assert_int_equal(set.lines, 4);
    stg__job_set_free(&set);
    /* A control character, DEL included, is a bad key: keys are printed in
     * reports (found by fuzz_input: DEL passed). */
    assert_int_equal(parse("a\x7f\nb\x01\nok\n", &o, &set), STG_OK);
    assert_int_equal(set.n, 1);
    assert_int_equal(set.n_bad, 2);
    assert_non_null(strstr(bad_msg(&set, 1), "control character in key"));
    assert_non_null(strstr(bad_msg(&set, 2), "control character in key"));
    stg__job_set_free(&set);
    /* A template that puts the key after a dot of its own still cannot be
     * walked up by a key of dots. */
    stg_input_options dot = {.url_template = "http://127.0.0.1:8080/ok/.{}/x"};
    assert_int_equal(parse(".\n", &dot, &set), STG_OK);
    assert_int_equal(set.n, 1);
    assert_string_equal(set.jobs[0].url, "http://127.0.0.1:8080/ok/.%2E/x");
    assert_false(has_dot_segment(set.jobs[0].url));
    stg__job_set_free(&set);
}

/* CR, LF or NUL in an idempotency_key or a header value would split or cut
 * the header it is sent in (and in an id, forge a report line): a bad line
 * at import, with a reason. */
static void test_jsonl_control_chars(void **state)
{
    (void)state;
    stg_job_set set;
    const char *text =
        "{\"id\": \"1\", \"url\": \"http://a.test/1\", \"idempotency_key\": \"k\\r\\nX: y\"}\n"
        "{\"id\": \"2\", \"url\": \"http://a.test/2\", \"idempotency_key\": \"k\\n\"}\n"
        "{\"id\": \"3\", \"url\": \"http://a.test/3\", \"idempotency_key\": \"k\\u0000x\"}\n"
        "{\"id\": \"4\", \"url\": \"http://a.test/4\", \"headers\": {\"X-T\": \"v\\r\\nX: 1\"}}\n"
        "{\"id\": \"5\", \"url\": \"http://a.test/5\", \"headers\": [\"X-T: v\\nX: 1\"]}\n"
        "{\"id\": \"6\", \"url\": \"http://a.test/6\", \"headers\": {\"Idempotency-Key\": "
        "\"k\\r\"}}\n"
        "{\"id\": \"7\", \"url\": \"http://a.test/7\", \"headers\": [\"Idempotency-Key: k\\rx\"]}\n"
        "{\"id\": \"8\", \"url\": \"http://a.test/8\", \"headers\": {\"X-T\": \"a\\u0000b\"}}\n"
        "{\"id\": \"9\", \"url\": \"http://a.test/9\", \"idempotency_key\": \"a\\tb\", "
        "\"headers\": {\"X-T\": \"a\\tb\"}}\n"
        "{\"id\": \"10\", \"url\": \"http://a.test/10\", \"idempotency_key\": \"k\\r\"}\n"
        "{\"id\": \"a\\nb\", \"url\": \"http://a.test/11\"}\n";
    assert_int_equal(parse(text, NULL, &set), STG_OK);
    assert_int_equal(set.n, 1); /* only line 9: a tab is allowed */
    assert_string_equal(set.jobs[0].key, "9");
    assert_string_equal(set.jobs[0].idempotency_key, "a\tb");
    assert_int_equal(set.n_bad, 10);
    for (long l = 1; l <= 11; l++) {
        if (l == 9)
            continue;
        const char *m = bad_msg(&set, l);
        if (!m)
            fail_msg("line %ld should be a bad line", l);
        if (!strstr(m, "NUL") || (l != 3 && l != 8 && !strstr(m, "CR, LF")))
            fail_msg("line %ld: unclear reason '%s'", l, m);
    }
    assert_non_null(strstr(bad_msg(&set, 1), "idempotency_key"));
    assert_non_null(strstr(bad_msg(&set, 2), "idempotency_key"));
    assert_non_null(strstr(bad_msg(&set, 10), "idempotency_key"));
    assert_non_null(strstr(bad_msg(&set, 11), "\"id\""));
    assert_non_null(strstr(bad_msg(&set, 4), "bad header"));
    assert_non_null(strstr(bad_msg(&set, 5), "bad header"));
    stg__job_set_free(&set);
}

/* A JSONL "cost" becomes the job's Stagger-Cost header (stored with the
 * headers, so a resumed batch still has it); a malformed one, or one
 * given twice, is a bad line. */
static void test_jsonl_cost(void **state)
{
    (void)state;
    stg_job_set set;
    const char *text =
        "{\"id\": \"1\", \"url\": \"http://a.test/1\", \"cost\": {\"tokens\": 1200}}\n"
        "{\"id\": \"2\", \"url\": \"http://a.test/2\", \"cost\": {\"tokens\": -1}}\n"
        "{\"id\": \"3\", \"url\": \"http://a.test/3\", \"cost\": 5}\n"
        "{\"id\": \"4\", \"url\": \"http://a.test/4\", \"cost\": {\"a b\": 1}}\n"
        "{\"id\": \"5\", \"url\": \"http://a.test/5\", \"cost\": {\"tokens\": 1},"
        " \"headers\": {\"Stagger-Cost\": \"tokens=2\"}}\n"
        "{\"id\": \"6\", \"url\": \"http://a.test/6\", \"cost\": {\"tokens\": 7,"
        " \"requests\": 2}}\n";
    assert_int_equal(parse(text, NULL, &set), STG_OK);
    assert_int_equal(set.n, 2);
    assert_string_equal(set.jobs[0].key, "1");
    assert_int_equal(set.jobs[0].n_headers, 1);
    assert_string_equal(set.jobs[0].headers[0], "Stagger-Cost: tokens=1200");
    assert_string_equal(set.jobs[1].key, "6");
    assert_string_equal(set.jobs[1].headers[0], "Stagger-Cost: tokens=7, requests=2");
    assert_int_equal(set.n_bad, 4);
    for (long l = 2; l <= 5; l++)
        assert_non_null(strstr(bad_msg(&set, l), "cost"));
    stg__job_set_free(&set);
}

/* A JSONL job's priority, tenant and weight become its Stagger-Priority
 * and Stagger-Tenant headers (stored, so a resumed run keeps them); bad
 * values are bad lines naming the field. */
static void test_jsonl_class(void **state)
{
    (void)state;
    stg_job_set set;
    const char *text =
        "{\"id\": \"1\", \"url\": \"http://a.test/1\", \"priority\": \"Interactive\"}\n"
        "{\"id\": \"2\", \"url\": \"http://a.test/2\", \"tenant\": \"acme\", \"weight\": 2}\n"
        "{\"id\": \"3\", \"url\": \"http://a.test/3\", \"priority\": \"urgent\"}\n"
        "{\"id\": \"4\", \"url\": \"http://a.test/4\", \"tenant\": \"a b\"}\n"
        "{\"id\": \"5\", \"url\": \"http://a.test/5\", \"weight\": 2}\n"
        "{\"id\": \"6\", \"url\": \"http://a.test/6\", \"tenant\": \"x\", \"weight\": 0}\n"
        "{\"id\": \"7\", \"url\": \"http://a.test/7\", \"tenant\": 7}\n"
        "{\"id\": \"8\", \"url\": \"http://a.test/8\", \"priority\": \"low\", \"tenant\": \"t.1\","
        " \"weight\": null}\n"
        "{\"id\": \"9\", \"url\": \"http://a.test/9\", \"priority\": \"batch\","
        " \"headers\": {\"Stagger-Priority\": \"normal\"}}\n";
    assert_int_equal(parse(text, NULL, &set), STG_OK);
    assert_int_equal(set.n, 3);
    assert_int_equal(set.jobs[0].n_headers, 1);
    assert_string_equal(set.jobs[0].headers[0], "Stagger-Priority: interactive");
    assert_string_equal(set.jobs[1].headers[0], "Stagger-Tenant: acme;w=2");
    assert_int_equal(set.jobs[2].n_headers, 2);
    assert_string_equal(set.jobs[2].headers[0], "Stagger-Priority: batch");
    assert_string_equal(set.jobs[2].headers[1], "Stagger-Tenant: t.1");
    assert_int_equal(set.n_bad, 6);
    assert_non_null(strstr(bad_msg(&set, 3), "priority"));
    assert_non_null(strstr(bad_msg(&set, 4), "tenant"));
    assert_non_null(strstr(bad_msg(&set, 5), "needs a \"tenant\""));
    assert_non_null(strstr(bad_msg(&set, 6), "weight"));
    assert_non_null(strstr(bad_msg(&set, 7), "strings"));
    assert_non_null(strstr(bad_msg(&set, 9), "both"));
    stg__job_set_free(&set);
}

/* The headers that passed as non-secret before the core's one list:
 * a JSONL request carrying one is kept out of the store. */
static void test_jsonl_secret_headers(void **state)
{
    (void)state;
    static const char *const names[] = {"X-Access-Key", "X-Credential", "X-Jwt", "X-Private"};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        char line[256];
        stg_job_set set;
        snprintf(line, sizeof line,
                 "{\"url\": \"http://a.test/x\", \"headers\": {\"%s\": \"S\"}}\n"
                 "{\"url\": \"http://a.test/y?%s=S\"}\n",
                 names[i], names[i]);
        assert_int_equal(parse(line, NULL, &set), STG_OK);
        assert_int_equal(set.n, 2);
        if (!set.jobs[0].headers_secret)
            fail_msg("header %s should be secret", names[i]);
        assert_true(stg__store_header_is_secret(names[i], strlen(names[i])));
        if (!set.jobs[1].url_secret)
            fail_msg("query %s should be secret", names[i]);
        stg__job_set_free(&set);
    }
}

/* Batch input may not set the framing or connection-level fields, Host or
 * a Proxy-* field (issue #30: a job's Content-Length smuggled a request
 * onto the connection the next job then used), in either JSONL header form
 * and any case: each is a bad line naming the field and why, and the lines
 * around them are jobs. */
static void test_jsonl_refused_headers(void **state)
{
    (void)state;
    static const struct {
        const char *headers, *reason;
    } v[] = {
        {"{\"Content-Length\": \"1\"}", "Content-Length frames the message"},
        {"[\"content-length: 1\"]", "content-length frames the message"},
        {"{\"Transfer-Encoding\": \"chunked\"}", "Transfer-Encoding frames"},
        {"{\"Connection\": \"close\"}", "Connection is connection-level"},
        {"[\"Upgrade: h2c\"]", "Upgrade is connection-level"},
        {"{\"TE\": \"trailers\"}", "TE is connection-level"},
        {"{\"Trailer\": \"X\"}", "Trailer is connection-level"},
        {"{\"Keep-Alive\": \"300\"}", "Keep-Alive is connection-level"},
        {"{\"Host\": \"admin.internal\"}", "Host comes from the job's URL"},
        {"[\"Proxy-Authorization: Basic eA==\"]", "Proxy-Authorization is meant for a proxy"},
        {"{\"Proxy-Connection\": \"keep-alive\"}", "Proxy-Connection is connection-level"},
        {"[\"Transfer-Encoding : chunked\"]", "invalid name"},
        {"{\"Transfer-Encoding\\t\": \"chunked\"}", "invalid name"},
        {"{\" X-Fold\": \"a\"}", "invalid name"},
        {"{\"X-A\": \"a\\u0001b\"}", "control character"},
    };
    size_t nv = sizeof v / sizeof *v;
    char text[8192];
    size_t off = 0;
    for (size_t i = 0; i < nv; i++) {
        off += (size_t)snprintf(text + off, sizeof text - off,
                                "{\"id\": \"ok%zu\", \"url\": \"http://127.0.0.1/ok\"}\n"
                                "{\"id\": \"bad%zu\", \"url\": \"http://127.0.0.1/b\", "
                                "\"headers\": %s, \"body\": \"x\"}\n",
                                i, i, v[i].headers);
        assert_true(off < sizeof text);
    }
    stg_job_set set;
    assert_int_equal(parse(text, NULL, &set), STG_OK);
    assert_int_equal(set.n, nv);
    assert_int_equal(set.n_bad, nv);
    for (size_t i = 0; i < nv; i++) {
        const char *m = bad_msg(&set, (long)(2 * i + 2));
        if (!m || !strstr(m, v[i].reason))
            fail_msg("line %zu (%s): reason '%s', expected '%s'", 2 * i + 2, v[i].headers,
                     m ? m : "(none)", v[i].reason);
        assert_null(strstr(m, "eA==")); /* never a value */
        char key[16];
        snprintf(key, sizeof key, "ok%zu", i);
        assert_string_equal(set.jobs[i].key, key);
    }
    stg__job_set_free(&set);
    /* Ordinary fields and near misses stay jobs. */
    const char *fine = "{\"url\": \"http://127.0.0.1/\", \"headers\": {\"Content-Type\": "
                       "\"text/plain\", \"X-Content-Length\": \"1\", \"Hosts\": \"h\", "
                       "\"Expect\": \"x\", \"X-Tab\": \"a\\tb\"}}\n";
    assert_int_equal(parse(fine, NULL, &set), STG_OK);
    assert_int_equal(set.n, 1);
    assert_int_equal(set.n_bad, 0);
    assert_int_equal(set.jobs[0].n_headers, 5);
    stg__job_set_free(&set);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_sha256),       cmocka_unit_test(test_urls),
        cmocka_unit_test(test_nul_byte),     cmocka_unit_test(test_template),
        cmocka_unit_test(test_jsonl),        cmocka_unit_test(test_bad_json_does_not_echo),
        cmocka_unit_test(test_secret_urls),  cmocka_unit_test(test_fingerprint),
        cmocka_unit_test(test_path_errors),  cmocka_unit_test(test_template_special_keys),
        cmocka_unit_test(test_jsonl_control_chars), cmocka_unit_test(test_jsonl_secret_headers),
        cmocka_unit_test(test_auto_key_pinned), cmocka_unit_test(test_jsonl_cost), cmocka_unit_test(test_jsonl_class),   cmocka_unit_test(test_jsonl_refused_headers),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
