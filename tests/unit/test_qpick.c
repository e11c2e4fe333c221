/*
 * Unit tests of the work queue's pick (src/core/qpick.h), in virtual
 * time: a pick is one job handed out. The bounds asserted are the
 * model's: strict classes, the floor (one pick in floor_every for a waiting
 * lower class, fairq.c's constant), shares by weight within one pick per
 * lane (1:1:2 -> 25/25/50% per round of 4), a share nobody uses flows to
 * the others at once, a returning tenant picked at once, and the same
 * order as src/core/fairq.c for backlogs loaded up front.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "fairq.h"
#include "qpick.h"

#define CI(p) STG_PRIORITY_INDEX(p)

static int pick(stg__qpick *p)
{
    int l = stg__qpick_next(p);
    if (l >= 0)
        stg__qpick_take(p, l);
    return l;
}

/* The highest class with waiting jobs first: a later interactive lane is
 * emptied before the batch backlog continues (the floor aside). */
static void test_class_order(void **state)
{
    (void)state;
    stg__qpick_lane lanes[3] = {
        {.cls = CI(STG_PRIORITY_BATCH), .unread = 300},
        {.cls = CI(STG_PRIORITY_NORMAL), .unread = 5},
        {.cls = CI(STG_PRIORITY_INTERACTIVE), .unread = 0},
    };
    stg__qpick p = {.lanes = lanes, .n = 3};
    for (int k = 0; k < 5; k++)
        assert_int_equal(pick(&p), 1);
    for (int k = 0; k < 10; k++)
        assert_int_equal(pick(&p), 0);
    lanes[2].unread = 20; /* interactive jobs loaded behind the backlog */
    int inter = 0, batch = 0, at = 0;
    for (int k = 1; inter < 20; k++) {
        int l = pick(&p);
        inter += l == 2;
        if (l == 0) {
            batch++;
            at = k;
        }
    }
    /* Only the floor's pick: the 20th, after 19 interactive ones. */
    assert_int_equal(batch, 1);
    assert_int_equal(at, STG__FQ_FLOOR_EVERY);
    assert_int_equal(pick(&p), 0);
    lanes[0].unread = 0;
    assert_int_equal(stg__qpick_next(&p), -1);
}

/* The floor: with an endless interactive backlog, batch gets exactly one
 * pick in floor_every; two starved classes each one in floor_every + 1. */
static void test_floor(void **state)
{
    (void)state;
    stg__qpick_lane lanes[3] = {
        {.cls = CI(STG_PRIORITY_INTERACTIVE), .unread = 1000000},
        {.cls = CI(STG_PRIORITY_BATCH), .unread = 1000000},
        {.cls = CI(STG_PRIORITY_NORMAL), .unread = 0},
    };
    stg__qpick p = {.lanes = lanes, .n = 3};
    unsigned since = 0, batch = 0;
    for (int k = 0; k < 20 * STG__FQ_FLOOR_EVERY; k++) {
        if (pick(&p) == 1) {
            assert_int_equal(since, STG__FQ_FLOOR_EVERY - 1);
            since = 0;
            batch++;
        } else {
            since++;
        }
    }
    assert_int_equal(batch, 20);
    lanes[2].unread = 1000000;
    int last[3] = {0, 0, 0};
    for (int k = 1; k <= 2000; k++) {
        int l = pick(&p);
        if (k > 50)
            for (int c = 1; c < 3; c++)
                assert_true(k - last[c] <= STG__FQ_FLOOR_EVERY + 1);
        last[l] = k;
    }
    /* A floor of its own. */
    p.floor_every = 4;
    memset(p.starved, 0, sizeof p.starved);
    lanes[2].unread = 0;
    since = 0;
    for (int k = 0; k < 100; k++) {
        if (pick(&p) == 1) {
            assert_int_equal(since, 3);
            since = 0;
        } else {
            since++;
        }
    }
}

/* Three tenants 1:1:2 with backlogs: every round of 4 picks is within one
 * job of 1/1/2 per tenant, and 200 picks are 50/50/100. */
static void test_shares(void **state)
{
    (void)state;
    stg__qpick_lane lanes[3] = {
        {.cls = 1, .weight = 1, .unread = 1000},
        {.cls = 1, .weight = 1, .unread = 1000},
        {.cls = 1, .weight = 2, .unread = 1000},
    };
    stg__qpick p = {.lanes = lanes, .n = 3};
    int n[3] = {0, 0, 0};
    for (int k = 1; k <= 200; k++) {
        n[pick(&p)]++;
        if (k % 4 == 0) {
            int r = k / 4;
            assert_true(abs(n[0] - r) <= 1 && abs(n[1] - r) <= 1 && abs(n[2] - 2 * r) <= 1);
        }
    }
    assert_int_equal(n[0], 50);
    assert_int_equal(n[1], 50);
    assert_int_equal(n[2], 100);
}

/* A tenant with nothing waiting leaves its share to the others at once,
 * keeps no credit, and is picked at once when it comes back. */
static void test_idle_and_return(void **state)
{
    (void)state;
    stg__qpick_lane lanes[3] = {
        {.cls = 1, .weight = 1, .unread = 1000},
        {.cls = 1, .weight = 1, .unread = 0}, /* idle */
        {.cls = 1, .weight = 2, .unread = 1000},
    };
    stg__qpick p = {.lanes = lanes, .n = 3};
    int n[3] = {0, 0, 0};
    for (int k = 0; k < 300; k++)
        n[pick(&p)]++;
    assert_int_equal(n[1], 0);
    assert_int_equal(n[0], 100); /* 1:2 of everything: b's share flowed */
    assert_int_equal(n[2], 200);
    /* b comes back after 300 picks: picked at once, no credit for the
     * 300 picks it missed (it gets its quarter from then on, not more). */
    lanes[1].unread = 1000;
    assert_int_equal(pick(&p), 1);
    memset(n, 0, sizeof n);
    n[1] = 1;
    for (int k = 1; k < 400; k++)
        n[pick(&p)]++;
    assert_true(abs(n[0] - 100) <= 1 && abs(n[1] - 100) <= 1 && abs(n[2] - 200) <= 1);
    /* A lighter tenant returning ties at V only with heavier ones: picked
     * before 1 + w_j/w picks of any other. */
    lanes[0].unread = 0;
    for (int k = 0; k < 50; k++)
        pick(&p);
    lanes[0].unread = 10;
    int before = 0;
    while (pick(&p) != 0)
        before++;
    assert_true(before <= 3);
}

/* Lanes loaded up front are picked in fairq.c's order (same tags, same
 * floor): the in-process queue and the shared queue agree. */
static void test_same_as_fairq(void **state)
{
    (void)state;
    static const struct { int prio; const char *tenant; double w; int n; } def[] = {
        {STG_PRIORITY_BATCH, "a", 1, 120},  {STG_PRIORITY_BATCH, "b", 3, 200},
        {STG_PRIORITY_NORMAL, "c", 1, 60},  {STG_PRIORITY_NORMAL, "d", 2, 90},
        {STG_PRIORITY_INTERACTIVE, "e", 1, 150},
    };
    enum { NL = sizeof def / sizeof def[0] };
    stg__qpick_lane lanes[NL];
    stg__fairq q;
    stg__fq_init(&q, 0);
    int total = 0;
    for (int l = 0; l < NL; l++)
        total += def[l].n;
    stg__fq_item *items = calloc((size_t)total, sizeof *items);
    int *lane_of = calloc((size_t)total, sizeof *lane_of);
    assert_non_null(items);
    assert_non_null(lane_of);
    int k = 0;
    for (int l = 0; l < NL; l++) {
        lanes[l] = (stg__qpick_lane){.cls = CI(def[l].prio), .weight = def[l].w,
                                     .unread = def[l].n};
        stg_class c = {.priority = def[l].prio, .tenant = def[l].tenant, .weight = def[l].w};
        for (int j = 0; j < def[l].n; j++, k++) {
            lane_of[k] = l;
            assert_int_equal(stg__fq_push(&q, &items[k], &c), STG_OK);
        }
    }
    stg__qpick p = {.lanes = lanes, .n = NL};
    for (int j = 0; j < total; j++) {
        stg__fq_item *it = stg__fq_pop(&q);
        assert_non_null(it);
        assert_int_equal(pick(&p), lane_of[it - items]);
    }
    assert_int_equal(stg__qpick_next(&p), -1);
    stg__fq_free(&q);
    free(items);
    free(lane_of);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_class_order),
        cmocka_unit_test(test_floor),
        cmocka_unit_test(test_shares),
        cmocka_unit_test(test_idle_and_return),
        cmocka_unit_test(test_same_as_fairq),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
