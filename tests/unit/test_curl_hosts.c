/*
 * Unit tests of the engine's per-key host table (curl/hosts.c) and its
 * bound: past max_hosts a new key forgets the least recently used host
 * that no request holds (refs), never one that a request holds; a key
 * that comes back starts afresh; 3000 keys through a table of 16 leave
 * 16 hosts, each in the LRU list once (a forward proxy that sees endless
 * hosts: memory follows the count). The metrics' per-host series are bounded the same way
 * (stg_metrics_set_max_hosts).
 */
#if defined(__has_include) && !__has_include(<curl/curl.h>)
/* libstagger-curl is not built here (no libcurl): nothing to test. */
int main(void);
int main(void)
{
    return 0;
}
#else
#define _GNU_SOURCE /* open_memstream */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cmocka_all.h"

#include "curl/internal.h"

static stg__host *get(stg__hosts *t, const stg_engine_config *cfg, const char *key)
{
    int err = STG_OK;
    stg__host *h = stg__hosts_get(t, key, cfg, 0, &err);
    assert_non_null(h);
    assert_int_equal(err, STG_OK);
    return h;
}

static bool has(const stg__hosts *t, const char *key)
{
    for (size_t i = 0; i < t->cap; i++)
        for (const stg__host *h = t->b[i]; h; h = h->next)
            if (!strcmp(h->key, key))
                return true;
    return false;
}

static stg_engine_config config(void)
{
    stg_engine_config c;
    memset(&c, 0, sizeof c);
    c.limiter = STG_LIMITER_FIXED;
    c.rate = 10;
    c.breaker = true;
    c.budget = true;
    return c;
}

static void test_lru_order(void **state)
{
    (void)state;
    stg_engine_config c = config();
    stg__hosts t;
    stg__hosts_init(&t);
    t.max = 3;
    get(&t, &c, "a");
    get(&t, &c, "b");
    get(&t, &c, "c");
    get(&t, &c, "a"); /* a is now the most recent: b the least */
    get(&t, &c, "d");
    assert_int_equal(t.n, 3);
    assert_false(has(&t, "b"));
    assert_true(has(&t, "a") && has(&t, "c") && has(&t, "d"));
    stg__hosts_free(&t);
}

static void test_held_never_forgotten(void **state)
{
    (void)state;
    stg_engine_config c = config();
    stg__hosts t;
    stg__hosts_init(&t);
    t.max = 2;
    stg__host *a = get(&t, &c, "a");
    a->refs++; /* a request holds it */
    stg_breaker_record(&a->breaker, 503, STG_NET_NONE, 0);
    stg__host *b = get(&t, &c, "b");
    b->refs++;
    get(&t, &c, "c"); /* both held: the table grows past max */
    assert_int_equal(t.n, 3);
    assert_true(has(&t, "a") && has(&t, "b"));
    assert_ptr_equal(get(&t, &c, "a"), a); /* never moved */
    a->refs--;
    b->refs--;
    get(&t, &c, "d"); /* the least recently used free one goes: b */
    assert_false(has(&t, "b"));
    assert_int_equal(t.n, 3);
    stg__hosts_free(&t);
}

static void test_many_keys_bounded(void **state)
{
    (void)state;
    stg_engine_config c = config();
    stg__hosts t;
    stg__hosts_init(&t);
    t.max = 16;
    char key[32];
    for (int i = 0; i < 3000; i++) {
        snprintf(key, sizeof key, "127.0.0.%d:%d", 1 + i % 250, 1000 + i);
        stg__host *h = get(&t, &c, key);
        assert_true(t.n <= 16);
        assert_string_equal(h->key, key);
        assert_int_equal(h->refs, 0);
    }
    assert_int_equal(t.n, 16);
    size_t in_lru = 0;
    for (const stg__link *l = t.lru.head; l; l = l->next)
        in_lru++;
    assert_int_equal(in_lru, 16);
    /* A forgotten key comes back afresh: its limiter full again. */
    stg__host *h = get(&t, &c, "127.0.0.1:1000");
    assert_true(h->has_bucket);
    stg__hosts_free(&t);
}

static void test_default_cap(void **state)
{
    (void)state;
    stg_engine_config c = config();
    c.limiter = STG_LIMITER_NONE;
    c.breaker = c.budget = false;
    stg__hosts t;
    stg__hosts_init(&t); /* max 0: the default */
    char key[32];
    for (int i = 0; i < STG__DEFAULT_MAX_HOSTS + 100; i++) {
        snprintf(key, sizeof key, "h%d", i);
        get(&t, &c, key);
    }
    assert_int_equal(t.n, STG__DEFAULT_MAX_HOSTS);
    stg__hosts_free(&t);
}

static size_t series(stg_metrics *m)
{
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    assert_non_null(f);
    stg_metrics_print(m, f);
    fclose(f);
    size_t n = 0;
    for (const char *s = buf; (s = strstr(s, "\nstagger_concurrency_limit{")); s++)
        n++;
    free(buf);
    return n;
}

static void test_metrics_series_bounded(void **state)
{
    (void)state;
    stg_metrics *m = stg_metrics_new();
    assert_non_null(m);
    stg_metrics_set_max_hosts(m, 10);
    char host[32];
    for (int i = 0; i < 3000; i++) {
        snprintf(host, sizeof host, "127.0.0.1:%d", 1000 + i);
        stg_event ev;
        memset(&ev, 0, sizeof ev);
        ev.type = STG_EVENT_ATTEMPT_START;
        ev.host = host;
        ev.concurrency_limit = 4;
        stg_metrics_event(&ev, m);
    }
    assert_int_equal(series(m), 10);
    stg_metrics_set_max_hosts(m, 3); /* shrinking drops the oldest */
    assert_int_equal(series(m), 3);
    stg_metrics_free(m);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_lru_order),
        cmocka_unit_test(test_held_never_forgotten),
        cmocka_unit_test(test_many_keys_bounded),
        cmocka_unit_test(test_default_cap),
        cmocka_unit_test(test_metrics_series_bounded),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
#endif
