/*
 * Unit tests of the CSV/TSV batch input (src/store/csv.c, input.c): RFC
 * 4180 quoting, embedded commas, quotes and newlines, strictness, header
 * placeholders in the URL and body templates, ids, bad rows with their
 * line numbers; and stg__store_url_shown, the URL an export shows.
 */
#define _POSIX_C_SOURCE 200809L
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cmocka_all.h"

#include "store/csv.h"
#include "store/store.h"

static int parse(const char *text, const stg_input_options *o, stg_job_set *set, char *err,
                 size_t errlen)
{
    FILE *f = fmemopen((void *)text, strlen(text), "r");
    assert_non_null(f);
    int rc = stg__input_read(f, o, set, err, errlen);
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

static void test_split(void **state)
{
    (void)state;
    char **f;
    const char *why;
    const char rec[] = "a,\"b,c\",\"d \"\"q\"\"\",,\"x\ny\"";
    int n = stg__csv_split(rec, strlen(rec), ',', &f, &why);
    assert_int_equal(n, 5);
    assert_string_equal(f[0], "a");
    assert_string_equal(f[1], "b,c");
    assert_string_equal(f[2], "d \"q\"");
    assert_string_equal(f[3], "");
    assert_string_equal(f[4], "x\ny");
    stg__csv_free(f, n);
    /* trailing separator: one more, empty field */
    n = stg__csv_split("a,", 2, ',', &f, &why);
    assert_int_equal(n, 2);
    assert_string_equal(f[1], "");
    stg__csv_free(f, n);
    /* strict: a stray quote, text after a closing quote, an open quote */
    assert_int_equal(stg__csv_split("a\"b,c", 5, ',', &f, &why), -1);
    assert_non_null(strstr(why, "unquoted"));
    assert_int_equal(stg__csv_split("\"a\"b,c", 6, ',', &f, &why), -1);
    assert_non_null(strstr(why, "after a closing quote"));
    assert_int_equal(stg__csv_split("\"abc", 4, ',', &f, &why), -1);
    assert_true(stg__csv_open_quote("\"abc", 4, ','));
    assert_false(stg__csv_open_quote("\"a\"\"c\"", 6, ','));
    /* TSV: no quoting, quotes are data */
    n = stg__csv_split("a\t\"b\"\"\tc,d", 10, '\t', &f, &why);
    assert_int_equal(n, 3);
    assert_string_equal(f[1], "\"b\"\"");
    assert_string_equal(f[2], "c,d");
    stg__csv_free(f, n);
    assert_false(stg__csv_open_quote("\"", 1, '\t'));
}

static void test_csv_rows(void **state)
{
    (void)state;
    const char *text = "id,page,name\r\n"
                       "1,2,\"a, b\"\r\n"
                       "# a comment\n"
                       "\n"
                       "2,3,\"multi\nline \"\"q\"\"\"\n"
                       "3,x\n"
                       "4,5,bad\"q\n"
                       "5,6,ok\n"
                       "1,7,again\n";
    stg_input_options o = {.format = STG_INPUT_CSV,
                           .url_template = "https://api.test/x/{id}?page={page}&q={name}",
                           .body_template = "{\"name\":\"{name}\"}"};
    stg_job_set set;
    char err[256];
    assert_int_equal(parse(text, &o, &set, err, sizeof err), STG_OK);
    assert_int_equal(set.format, STG_INPUT_CSV);
    assert_int_equal(set.n, 3);
    assert_string_equal(set.jobs[0].key, "1");
    assert_int_equal(set.jobs[0].line, 2);
    assert_string_equal(set.jobs[0].url, "https://api.test/x/1?page=2&q=a%2C%20b");
    assert_string_equal(set.jobs[0].method, "POST");
    assert_int_equal(set.jobs[0].body_len, strlen("{\"name\":\"a, b\"}"));
    assert_memory_equal(set.jobs[0].body, "{\"name\":\"a, b\"}", set.jobs[0].body_len);
    /* the record of lines 5-6 is one job, at its first line */
    assert_string_equal(set.jobs[1].key, "2");
    assert_int_equal(set.jobs[1].line, 5);
    assert_string_equal(set.jobs[1].url,
                        "https://api.test/x/2?page=3&q=multi%0Aline%20%22q%22");
    assert_memory_equal(set.jobs[1].body, "{\"name\":\"multi\nline \"q\"\"}",
                        set.jobs[1].body_len);
    assert_string_equal(set.jobs[2].key, "5");
    assert_int_equal(set.n_bad, 3);
    assert_non_null(strstr(bad_msg(&set, 7), "2 fields, the header has 3"));
    assert_non_null(strstr(bad_msg(&set, 8), "quote"));
    assert_non_null(strstr(bad_msg(&set, 10), "repeated id"));
    assert_int_equal(set.lines, 10);
    stg__job_set_free(&set);
}

static void test_csv_header_and_ids(void **state)
{
    (void)state;
    stg_job_set set;
    char err[256];
    /* no id column: the line number is the id; -X kept; GET without a body */
    stg_input_options o = {.format = STG_INPUT_TSV, .url_template = "http://h.test/{k}/{v}"};
    assert_int_equal(parse("k\tv\n..\ta/b\n", &o, &set, err, sizeof err), STG_OK);
    assert_int_equal(set.n, 1);
    assert_string_equal(set.jobs[0].key, "2");
    assert_string_equal(set.jobs[0].method, "GET");
    /* a dots-only value is encoded whole: never a dot segment */
    assert_string_equal(set.jobs[0].url, "http://h.test/%2E%2E/a%2Fb");
    stg__job_set_free(&set);
    /* a placeholder that names no column: refused, naming the columns */
    o.url_template = "http://h.test/{k}/{naem}";
    assert_int_equal(parse("k\tv\nx\ty\n", &o, &set, err, sizeof err), STG_EINVAL);
    assert_non_null(strstr(err, "{naem}"));
    assert_non_null(strstr(err, "(k, v)"));
    /* JSON braces in a body are text, not placeholders */
    stg_input_options b = {.format = STG_INPUT_CSV,
                           .url_template = "http://h.test/{k}",
                           .body_template = "{\"a\": {\"b\": [1]}, \"k\": \"{k}\"}",
                           .method = "PUT"};
    assert_int_equal(parse("k\nz\n", &b, &set, err, sizeof err), STG_OK);
    assert_int_equal(set.n, 1);
    assert_string_equal(set.jobs[0].method, "PUT");
    assert_memory_equal(set.jobs[0].body, "{\"a\": {\"b\": [1]}, \"k\": \"z\"}",
                        set.jobs[0].body_len);
    stg__job_set_free(&set);
    /* a repeated column name, an empty one */
    assert_int_equal(parse("k,k\n1,2\n", &b, &set, err, sizeof err), STG_EINVAL);
    assert_non_null(strstr(err, "twice"));
    assert_int_equal(parse("k,\n1,2\n", &b, &set, err, sizeof err), STG_EINVAL);
    /* {} is for key files */
    stg_input_options e = {.format = STG_INPUT_CSV, .url_template = "http://h.test/{}"};
    assert_int_equal(parse("k\n1\n", &e, &set, err, sizeof err), STG_EINVAL);
    /* a body template without CSV/TSV */
    stg_input_options u = {.format = STG_INPUT_URLS, .body_template = "x"};
    assert_int_equal(parse("http://h.test/\n", &u, &set, err, sizeof err), STG_EINVAL);
    /* an unclosed quote runs to the end: one bad record, not a job */
    assert_int_equal(parse("k\n\"open\nmore\n", &b, &set, err, sizeof err), STG_OK);
    assert_int_equal(set.n, 0);
    assert_int_equal(set.n_bad, 1);
    assert_non_null(strstr(bad_msg(&set, 2), "not closed"));
    stg__job_set_free(&set);
    /* an id with a secret: the stored form keeps it out */
    stg_input_options s = {.format = STG_INPUT_CSV,
                           .url_template = "https://h.test/{id}?api_key={key}&page={p}"};
    assert_int_equal(parse("id,key,p\n7,s3cret,2\n", &s, &set, err, sizeof err), STG_OK);
    assert_true(set.jobs[0].url_secret);
    assert_string_equal(set.jobs[0].url_shown, "https://h.test/7?api_key=REDACTED&page=2");
    assert_null(strstr(set.jobs[0].url_redacted, "s3cret"));
    stg__job_set_free(&set);
}

static void test_format_for_path(void **state)
{
    (void)state;
    assert_int_equal(stg__input_format_for_path("a/ids.csv", STG_INPUT_AUTO), STG_INPUT_CSV);
    assert_int_equal(stg__input_format_for_path("IDS.TSV", STG_INPUT_AUTO), STG_INPUT_TSV);
    assert_int_equal(stg__input_format_for_path("ids.txt", STG_INPUT_AUTO), STG_INPUT_AUTO);
    assert_int_equal(stg__input_format_for_path("ids.csv", STG_INPUT_URLS), STG_INPUT_URLS);
    assert_int_equal(stg__input_format_for_path("-", STG_INPUT_AUTO), STG_INPUT_AUTO);
}

static void shown(const char *url, const char *want)
{
    char buf[512];
    size_t n = stg__store_url_shown(url, buf, sizeof buf);
    assert_string_equal(buf, want);
    assert_int_equal(n, strlen(want));
}

static void test_url_shown(void **state)
{
    (void)state;
    shown("https://u:pw@api.test:8443/a/b?page=2&token=abc&Signature=x&q=ok#frag",
          "https://api.test:8443/a/b?page=2&token=REDACTED&Signature=REDACTED&q=ok");
    shown("http://api.test/x?bare&id=1", "http://api.test/x?REDACTED&id=1");
    shown("http://api.test/p?password=hunter2", "http://api.test/p?password=REDACTED");
    shown("http://api.test/a b?x=\xc3\xa9", "http://api.test/a%20b?x=%C3%A9");
    shown("http://api.test/", "http://api.test/");
    /* cut short: NUL-terminated, the full length returned */
    char small[12];
    assert_int_equal(stg__store_url_shown("http://api.test/?token=abcdef", small, sizeof small),
                     strlen("http://api.test/?token=REDACTED"));
    assert_string_equal(small, "http://api.");
}

/* Columns named priority, tenant and weight are the job's class and
 * tenant (its Stagger-Priority / Stagger-Tenant headers); an empty field
 * is none; a bad value is a bad line. */
static void test_csv_class_columns(void **state)
{
    (void)state;
    stg_job_set set;
    char err[256];
    stg_input_options o = {.format = STG_INPUT_CSV, .url_template = "http://h.test/{id}"};
    const char *text = "id,priority,tenant,weight\n"
                       "a,batch,acme,3\n"
                       "b,,,\n"
                       "c,interactive,,\n"
                       "d,nope,,\n"
                       "e,,,2\n";
    assert_int_equal(parse(text, &o, &set, err, sizeof err), STG_OK);
    assert_int_equal(set.n, 3);
    assert_int_equal(set.jobs[0].n_headers, 2);
    assert_string_equal(set.jobs[0].headers[0], "Stagger-Priority: batch");
    assert_string_equal(set.jobs[0].headers[1], "Stagger-Tenant: acme;w=3");
    assert_int_equal(set.jobs[1].n_headers, 0);
    assert_string_equal(set.jobs[2].headers[0], "Stagger-Priority: interactive");
    assert_int_equal(set.n_bad, 2);
    assert_non_null(strstr(bad_msg(&set, 5), "priority"));
    assert_non_null(strstr(bad_msg(&set, 6), "tenant"));
    stg__job_set_free(&set);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_split),
        cmocka_unit_test(test_csv_rows),
        cmocka_unit_test(test_csv_header_and_ids),
        cmocka_unit_test(test_format_for_path),
        cmocka_unit_test(test_url_shown),
        cmocka_unit_test(test_csv_class_columns),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
