/*
 * The persona engine of `stagger serve --dialect` (src/server/dialect.h) in
 * virtual time: the monotonic and wall clocks are parameters, moved by hand,
 * so every expectation is exact. For every persona: a window quota admits
 * exactly LIMIT per wall-clock window and a bucket exactly its capacity,
 * then its refill; a refusal's told instant is never earlier than the
 * instant the quota has room again (a request sent then is admitted), and
 * is at most one rounding step later. Plus the value formats (Go durations,
 * RFC 3339, decimal seconds, base64 from RFC 4648's vectors).
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "server/dialect.h"

#define S INT64_C(1000000)
/* A wall-clock origin on a whole minute, and a monotonic one elsewhere. */
#define WALL0 (INT64_C(1796126400) * S)
#define MONO0 (INT64_C(5000) * S + 123)

static void init(srv_dialect *d, const char *name, const char *const *quotas, int64_t cost)
{
    stg_srv_config cfg;
    memset(&cfg, 0, sizeof cfg);
    cfg.dialect = name;
    cfg.token_cost = cost;
    for (size_t i = 0; quotas && quotas[i]; i += 3) {
        stg_srv_quota *q = &cfg.quotas[cfg.n_quotas++];
        snprintf(q->name, sizeof q->name, "%s", quotas[i]);
        q->limit = atoll(quotas[i + 1]);
        q->window_us = atoll(quotas[i + 2]) * S;
    }
    char err[256] = "";
    assert_int_equal(srv_dialect_init(d, &cfg, err, sizeof err), 0);
}

/* Decide one request at `at` us after the origins; frees the body. */
static unsigned ask(srv_dialect *d, const char *url, int64_t at, int64_t *told)
{
    srv_dctx c;
    srv_dout o;
    srv_dialect_decide(d, &c, &o, "c1", url, NULL, NULL, MONO0 + at, WALL0 + at);
    if (told)
        *told = o.told_wall_us ? o.told_wall_us - WALL0 : 0;
    free(o.body);
    return o.status;
}

typedef struct persona_case {
    const char *name;
    const char *quotas[7]; /* name, limit, window_s; NULL-terminated */
    bool window;           /* else bucket */
    bool hint;             /* refusals tell an instant */
    int64_t step;          /* rounding of the told value: at most this late */
} persona_case;

static const persona_case cases[] = {
    {"ietf", {"short", "5", "2", "long", "0", "1", NULL}, true, true, S},      /* Retry-After s */
    {"openai", {"requests", "5", "2", "tokens", "0", "1", NULL}, false, true, 1000}, /* -ms */
    {"anthropic", {"requests", "5", "2", NULL}, false, true, S},              /* retry-after */
    {"github", {"core", "5", "2", NULL}, true, true, 0},                       /* epoch reset */
    {"discord", {"bucket", "5", "2", NULL}, true, true, 1000},                 /* Reset-After */
    {"shopify", {"calls", "5", "2", NULL}, false, true, S / 10},               /* 0.1 s */
    {"x", {"requests", "5", "2", NULL}, true, true, 0},                        /* epoch reset */
    {"azure", {"requests", "5", "2", NULL}, false, true, 1000},                /* ms */
    {"kong", {"minute", "5", "2", "hour", "0", "1", NULL}, true, true, S},     /* Retry-After */
    {"stripe", {"requests", "5", "2", NULL}, false, false, 0},
};

/* 5 per 2 s from a standing start 0.5 s into a window: exactly 5 admitted
 * at once; then the told instant admits, and is at most a rounding step
 * late (1 s for delta-seconds, 1 ms otherwise; epoch seconds: exact here,
 * the windows being whole seconds). */
static void test_every_persona(void **state)
{
    (void)state;
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        const persona_case *pc = &cases[k];
        srv_dialect d;
        init(&d, pc->name, pc->quotas, 0);
        int64_t t = S / 2, told = 0;
        for (int i = 0; i < 5; i++)
            assert_int_equal(ask(&d, "/a", t, NULL), 0);
        unsigned st = ask(&d, "/a", t, &told);
        assert_true(st == 429 || st == 403);
        if (!pc->hint) {
            assert_int_equal(told, 0);
            srv_dialect_destroy(&d);
            continue;
        }
        /* When room comes back: a window's end (2 s), one token's refill
         * (2 s / 5 = 0.4 s after the burst). */
        int64_t room = pc->window ? 2 * S : t + 2 * S / 5;
        if (told < room || told - room > pc->step)
            fail_msg("%s: told %lld us, room at %lld us (step %lld)", pc->name, (long long)told,
                     (long long)room, (long long)pc->step);
        if (told > room)
            assert_int_not_equal(ask(&d, "/z", room - 1, NULL), 0); /* no room before */
        assert_int_equal(ask(&d, "/a", told, NULL), 0);
        srv_dialect_destroy(&d);
    }
}

/* A bucket over 10 s of steady demand: admitted units never exceed
 * LIMIT + LIMIT/W * t, and the refill is exact (no drift). */
static void test_bucket_bound(void **state)
{
    (void)state;
    srv_dialect d;
    static const char *const q[] = {"requests", "10", "1", NULL};
    init(&d, "openai", q, 0);
    int64_t admitted = 0;
    for (int64_t t = 0; t <= 10 * S; t += 7919) { /* ~126 offers per second */
        if (ask(&d, "/b", t, NULL) == 0)
            admitted++;
        assert_true(admitted <= 10 + 10 * t / S);
    }
    /* 10 at once, then one per 100 ms: 10 + 100 over 10 s, give or take
     * the last offer's phase. */
    assert_true(admitted >= 10 + 99 && admitted <= 110);
    srv_dialect_destroy(&d);
}

/* Windows are wall-clock aligned: 5 per 2 s admits 5 in [0, 2 s) and 5
 * more right at 2 s, whatever the monotonic clock says. */
static void test_window_alignment(void **state)
{
    (void)state;
    srv_dialect d;
    static const char *const q[] = {"requests", "5", "2", NULL};
    init(&d, "x", q, 0);
    for (int i = 0; i < 5; i++)
        assert_int_equal(ask(&d, "/c", 2 * S - 1, NULL), 0);
    assert_int_equal(ask(&d, "/c", 2 * S - 1, NULL), 429);
    for (int i = 0; i < 5; i++)
        assert_int_equal(ask(&d, "/c", 2 * S, NULL), 0);
    assert_int_equal(ask(&d, "/c", 2 * S, NULL), 429);
    srv_dialect_destroy(&d);
}

/* Several quotas: all or nothing. Tokens 100 per 1 s at 60 per request:
 * the second request is refused by tokens, and the requests quota is not
 * charged for it. */
static void test_all_or_nothing(void **state)
{
    (void)state;
    srv_dialect d;
    static const char *const q[] = {"requests", "2", "60", "tokens", "100", "1", NULL};
    init(&d, "openai", q, 60);
    srv_dctx c;
    srv_dout o;
    srv_dialect_decide(&d, &c, &o, "c1", "/d", NULL, NULL, MONO0, WALL0);
    assert_int_equal(o.status, 0);
    free(o.body);
    srv_dialect_decide(&d, &c, &o, "c1", "/d", NULL, NULL, MONO0, WALL0);
    assert_int_equal(o.status, 429);
    assert_true(c.v[1].refused && !c.v[0].refused);
    assert_int_equal(c.v[0].remaining, 1);
    free(o.body);
    srv_dialect_decide(&d, &c, &o, "c1", "/d", "10", NULL, MONO0, WALL0); /* X-Token-Cost: 10 */
    assert_int_equal(o.status, 0);
    assert_int_equal(c.v[0].remaining, 0);
    assert_int_equal(c.v[1].remaining, 30);
    free(o.body);
    srv_dialect_destroy(&d);
}

static void test_formats(void **state)
{
    (void)state;
    char b[64];
    static const struct {
        int64_t us;
        const char *want;
    } go[] = {{0, "0s"},         {1, "1ms"},         {12000, "12ms"},
              {999001, "1s"},    {1500000, "1.5s"},  {360 * S, "6m0s"},
              {3723 * S + 500000, "1h2m3.5s"}, {61 * S + 10000, "1m1.01s"}};
    for (size_t i = 0; i < sizeof go / sizeof go[0]; i++) {
        srv_fmt_go_duration(go[i].us, b, sizeof b);
        assert_string_equal(b, go[i].want);
    }
    srv_fmt_rfc3339(1755780059, b, sizeof b);
    assert_string_equal(b, "2025-08-21T12:40:59Z");
    srv_fmt_dec_seconds(64570000, 3, b, sizeof b);
    assert_string_equal(b, "64.570");
    srv_fmt_dec_seconds(572001, 3, b, sizeof b);
    assert_string_equal(b, "0.573");
    srv_fmt_dec_seconds(2 * S, 1, b, sizeof b);
    assert_string_equal(b, "2.0");
    static const char *const b64[][2] = {{"", ""},         {"f", "Zg=="},       {"fo", "Zm8="},
                                         {"foo", "Zm9v"},  {"foob", "Zm9vYg=="}, {"fooba", "Zm9vYmE="},
                                         {"foobar", "Zm9vYmFy"}};
    for (size_t i = 0; i < sizeof b64 / sizeof b64[0]; i++) {
        srv_fmt_base64(b64[i][0], b, sizeof b);
        assert_string_equal(b, b64[i][1]);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_every_persona),    cmocka_unit_test(test_bucket_bound),
        cmocka_unit_test(test_window_alignment), cmocka_unit_test(test_all_or_nothing),
        cmocka_unit_test(test_formats),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
