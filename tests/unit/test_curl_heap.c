/*
 * Unit tests of the engine's timer heap: entries come out in (due, insertion)
 * order, removal from the middle keeps the heap valid and every back-index
 * right, against a brute-force model driven by a seeded RNG.
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
#include <stdlib.h>
#include <string.h>

#include "cmocka_all.h"

#include "curl/internal.h"

#define N 2000

typedef struct item {
    int64_t due;
    uint64_t order;
    size_t index;
    bool in;
} item;

static void check_indexes(const stg__heap *h)
{
    for (size_t i = 0; i < h->n; i++) {
        assert_int_equal(*h->v[i].index, i);
        if (i > 0) {
            const stg__timer *p = &h->v[(i - 1) / 2], *c = &h->v[i];
            assert_true(p->due_us < c->due_us || (p->due_us == c->due_us && p->seq < c->seq));
        }
    }
}

static void test_order_and_ties(void **state)
{
    (void)state;
    stg__heap h;
    stg__heap_init(&h);
    static item items[N];
    stg_rng rng;
    stg_rng_seed(&rng, 42);
    for (int i = 0; i < N; i++) {
        items[i].due = stg_rng_range(&rng, 0, 50); /* many ties */
        items[i].order = (uint64_t)i;
        assert_true(stg__heap_push(&h, items[i].due, &items[i], &items[i].index));
    }
    check_indexes(&h);
    int64_t last_due = -1;
    uint64_t last_order = 0;
    for (int i = 0; i < N; i++) {
        const stg__timer *t = stg__heap_top(&h);
        assert_non_null(t);
        item *it = t->item;
        assert_true(it->due > last_due || (it->due == last_due && it->order > last_order));
        last_due = it->due;
        last_order = it->order;
        stg__heap_remove(&h, it->index);
        assert_int_equal(it->index, STG__NOT_IN_HEAP);
    }
    assert_null(stg__heap_top(&h));
    stg__heap_free(&h);
}

static void test_remove_middle(void **state)
{
    (void)state;
    stg__heap h;
    stg__heap_init(&h);
    static item items[N];
    stg_rng rng;
    stg_rng_seed(&rng, 7);
    for (int i = 0; i < N; i++) {
        items[i].due = stg_rng_range(&rng, 0, 1000000);
        items[i].in = true;
        assert_true(stg__heap_push(&h, items[i].due, &items[i], &items[i].index));
    }
    /* Remove half at random positions (a cancel), checking as we go. */
    for (int k = 0; k < N / 2; k++) {
        int i = (int)stg_rng_range(&rng, 0, N - 1);
        if (!items[i].in)
            continue;
        stg__heap_remove(&h, items[i].index);
        items[i].in = false;
        if (k % 97 == 0)
            check_indexes(&h);
    }
    check_indexes(&h);
    size_t left = 0;
    for (int i = 0; i < N; i++)
        left += items[i].in;
    assert_int_equal(h.n, left);
    int64_t last = -1;
    while (h.n) {
        item *it = stg__heap_top(&h)->item;
        assert_true(it->in);
        assert_true(it->due >= last);
        last = it->due;
        it->in = false;
        stg__heap_remove(&h, it->index);
    }
    stg__heap_free(&h);
}

static void test_free_clears_indexes(void **state)
{
    (void)state;
    stg__heap h;
    stg__heap_init(&h);
    item a = {0}, b = {0};
    assert_true(stg__heap_push(&h, 5, &a, &a.index));
    assert_true(stg__heap_push(&h, 1, &b, &b.index));
    assert_int_equal(b.index, 0);
    stg__heap_free(&h);
    assert_int_equal(a.index, STG__NOT_IN_HEAP);
    assert_int_equal(b.index, STG__NOT_IN_HEAP);
    stg__heap_remove(&h, 0); /* out of range: no-op */
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_order_and_ties),
        cmocka_unit_test(test_remove_middle),
        cmocka_unit_test(test_free_clears_indexes),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
#endif
