/*
 * Unit tests of the class and tenant names (stagger/priority.h).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include <stagger/priority.h>

static void test_names_round_trip(void **state)
{
    (void)state;
    for (int p = STG_PRIORITY_MIN; p <= STG_PRIORITY_MAX; p++) {
        int q = 99;
        assert_int_equal(stg_priority_parse(stg_priority_name(p), &q), STG_OK);
        assert_int_equal(q, p);
    }
    assert_int_equal(STG_PRIORITY_INDEX(STG_PRIORITY_INTERACTIVE), 0);
    assert_int_equal(STG_PRIORITY_INDEX(STG_PRIORITY_BATCH), STG_N_PRIORITIES - 1);
}

static void test_parse_aliases_and_errors(void **state)
{
    (void)state;
    int q = 99;
    assert_int_equal(stg_priority_parse("LOW", &q), STG_OK);
    assert_int_equal(q, STG_PRIORITY_BATCH);
    assert_int_equal(stg_priority_parse("High", &q), STG_OK);
    assert_int_equal(q, STG_PRIORITY_INTERACTIVE);
    assert_int_equal(stg_priority_parse("Normal", &q), STG_OK);
    assert_int_equal(q, STG_PRIORITY_NORMAL);
    q = 99;
    assert_int_equal(stg_priority_parse("urgent", &q), STG_EPARSE);
    assert_int_equal(stg_priority_parse("", &q), STG_EPARSE);
    assert_int_equal(stg_priority_parse("batch ", &q), STG_EPARSE);
    assert_int_equal(q, 99);
    assert_int_equal(stg_priority_parse(NULL, &q), STG_EINVAL);
    assert_string_equal(stg_priority_name(7), "normal");
    /* The old ABI's values keep their meaning. */
    assert_int_equal(STG_PRIORITY_LOW, 1);
    assert_int_equal(STG_PRIORITY_NORMAL, 0);
}

static void test_tenant_names(void **state)
{
    (void)state;
    const char *why = "x";
    assert_int_equal(stg_tenant_check("acme-corp.eu:1_a", &why), STG_OK);
    assert_null(why);
    char max[STG_TENANT_MAX + 2];
    memset(max, 'a', sizeof max);
    max[STG_TENANT_MAX] = 0;
    assert_int_equal(stg_tenant_check(max, NULL), STG_OK);
    max[STG_TENANT_MAX] = 'a';
    max[STG_TENANT_MAX + 1] = 0;
    assert_int_equal(stg_tenant_check(max, &why), STG_EPARSE);
    assert_non_null(why);
    assert_int_equal(stg_tenant_check("", &why), STG_EPARSE);
    assert_int_equal(stg_tenant_check("a b", &why), STG_EPARSE);
    assert_int_equal(stg_tenant_check("a\"b", &why), STG_EPARSE);
    assert_int_equal(stg_tenant_check("a{b}", &why), STG_EPARSE); /* no Redis hash tags */
    assert_int_equal(stg_tenant_check("\xc3\xa9", &why), STG_EPARSE);
    assert_int_equal(stg_tenant_check(NULL, &why), STG_EPARSE);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_names_round_trip),
        cmocka_unit_test(test_parse_aliases_and_errors),
        cmocka_unit_test(test_tenant_names),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
