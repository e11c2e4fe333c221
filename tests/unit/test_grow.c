/*
 * Unit tests of util/grow.h, the doubling array of the tree's tables (the
 * engine's timer heap, the metrics' hosts, the proxy's commands, the batch
 * input's jobs and bad lines): room for one more, first size when empty,
 * twice when full, and nothing changed when the size would overflow.
 */
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>

#include "cmocka_all.h"

#include "util/grow.h"

static void test_doubles(void **state)
{
    (void)state;
    int64_t *v = NULL;
    size_t n = 0, cap = 0;
    for (int i = 0; i < 100; i++) {
        assert_true(STG__GROW(v, n, cap, 4));
        assert_true(cap > n);
        v[n++] = i; /* ASan: the element is inside the allocation */
        if (i == 0)
            assert_int_equal(cap, 4);
    }
    assert_int_equal(cap, 128); /* 4, 8, ..., 128 */
    for (int i = 0; i < 100; i++)
        assert_int_equal(v[i], i);
    free(v);
}

static void test_room_left_keeps_array(void **state)
{
    (void)state;
    char *v = malloc(8);
    assert_non_null(v);
    char *before = v;
    size_t cap = 8;
    assert_true(STG__GROW(v, 7, cap, 4));
    assert_ptr_equal(v, before);
    assert_int_equal(cap, 8);
    free(v);
}

static void test_overflow_refused(void **state)
{
    (void)state;
    struct big {
        char b[1024];
    } *v = malloc(sizeof *v);
    assert_non_null(v);
    struct big *before = v;
    size_t cap = SIZE_MAX / 2 + 1, n = cap; /* twice would wrap */
    assert_false(STG__GROW(v, n, cap, 4));
    assert_ptr_equal(v, before);
    assert_int_equal(cap, SIZE_MAX / 2 + 1);
    free(v);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_doubles),
        cmocka_unit_test(test_room_left_keeps_array),
        cmocka_unit_test(test_overflow_refused),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
