/*
 * The export's one row writer (src/store/export_row.c), on a memory
 * stream: CSV quoting reads a field's length (a NUL before a comma is
 * quoted, not cut), CRLF line ends, the back end's own columns before the
 * body, a binary body as "base64:" (CSV) or "body_base64" (JSON), nulls.
 */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cmocka_all.h"

#include "store/export_row.h"

static void test_csv_field_with_nul(void **state)
{
    (void)state;
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    assert_non_null(f);
    stg__export_csv_field(f, "a\0,b", 4); /* the old strpbrk stopped at the NUL */
    stg__export_csv_field(f, "plain", 5);
    stg__export_csv_field(f, " pad", 4);
    fclose(f);
    assert_int_equal(len, 6 + 5 + 6);
    assert_memory_equal(buf, "\"a\0,b\"plain\" pad\"", len);
    free(buf);
}

static char *export_one(stg_export_format fmt, const stg__export_row *r)
{
    static const char *const own[] = {"deliveries", "worker"};
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    assert_non_null(f);
    stg__exporter x = {.out = f, .format = fmt, .bodies = true, .own = own, .n_own = 2};
    assert_int_equal(stg__export_begin(&x), STG_OK);
    assert_int_equal(stg__export_write(&x, r), STG_OK);
    assert_int_equal(stg__export_end(&x), STG_OK);
    fclose(f);
    return buf;
}

static void test_rows(void **state)
{
    (void)state;
    stg__export_val own[] = {{.is_int = true, .i = 2}, {.is_null = true}};
    stg__export_row r = {.key = "k1", .job = 1, .has_line = true, .line = 3, .state = "done",
                         .has_status = true, .status = 200, .attempts = 1, .method = "GET",
                         .url = "http://127.0.0.1/x", .has_finished = true,
                         .finished_ms = 1000, .has_duration = true, .duration_ms = 7,
                         .has_body = true, .body = "\0\xff", .body_len = 2, .own = own};
    char *csv = export_one(STG_EXPORT_CSV, &r);
    assert_string_equal(csv, "id,job,line,state,status,attempts,error,reason,method,url,file,"
                             "finished_at,duration_ms,deliveries,worker,body\r\n"
                             "k1,1,3,done,200,1,,,GET,http://127.0.0.1/x,,"
                             "1970-01-01T00:00:01.000Z,7,2,,base64:AP8=\r\n");
    free(csv);
    r.has_status = false;
    r.has_line = false;
    char *js = export_one(STG_EXPORT_JSONL, &r);
    assert_non_null(strstr(js, "\"line\":null"));
    assert_non_null(strstr(js, "\"status\":null"));
    assert_non_null(strstr(js, "\"deliveries\":2,\"worker\":null,\"body_base64\":\"AP8=\"}\n"));
    free(js);
    r.body = "ok, \"text\"";
    r.body_len = strlen(r.body);
    char *arr = export_one(STG_EXPORT_JSON, &r);
    assert_true(!strncmp(arr, "[\n{", 3));
    assert_non_null(strstr(arr, "\"body\":\"ok, \\\"text\\\"\"}\n]\n"));
    free(arr);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_csv_field_with_nul),
        cmocka_unit_test(test_rows),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
