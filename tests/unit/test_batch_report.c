/*
 * Unit tests of the batch report's one printer (src/batch/report.c): a
 * database's report and a queue's with the same common facts print the
 * same common lines and the same common JSON members, each adding only
 * its own sections (the database its runs and rates, the queue its
 * workers). The readers are tested elsewhere: the store's in test_store.c,
 * both end to end in tests/integration/test_batch_export_same.sh.
 */
#define _POSIX_C_SOURCE 200809L
#define _DEFAULT_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "cmocka_all.h"

#include "batch/report.h"

/* The facts both reports below share. */
static void common(stg_batch_report *r)
{
    r->total = 4;
    r->n[STG_JOB_DONE] = 2;
    r->n[STG_JOB_FAILED] = 1;
    r->n[STG_JOB_DEFERRED] = 1;
    r->calls = 12;
    r->status_429 = 7;
    r->status_503 = 1;
    r->duration = (stg_report_durations){.n = 4, .p50 = 120, .p90 = 300, .p99 = 300, .max = 300};
}

static char *printed(const stg_batch_report *r, bool json)
{
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    assert_non_null(f);
    assert_int_equal(json ? stg__batch_report_json(r, f) : stg__batch_report_text(r, f), STG_OK);
    fclose(f);
    return buf;
}

/* The line of text that starts with prefix (without its newline), or NULL. */
static char *line_of(const char *text, const char *prefix)
{
    for (const char *p = text; p && *p; p = strchr(p, '\n') ? strchr(p, '\n') + 1 : NULL)
        if (!strncmp(p, prefix, strlen(prefix)))
            return strndup(p, strcspn(p, "\n"));
    return NULL;
}

static void test_same_common_facts(void **state)
{
    (void)state;
    stg_batch_report db, q;
    memset(&db, 0, sizeof db);
    memset(&q, 0, sizeof q);
    common(&db);
    common(&q);
    db.db = "report.db";
    db.retries = 8;
    db.store.runs = 1;
    db.store.wall_ms = 2000;
    db.store.calls = 12;
    db.store.counts[STG_JOB_DONE] = 2;
    db.store.counts[STG_JOB_FAILED] = 1;
    db.fingerprint = "abcdef0123456789";
    snprintf(q.queue, sizeof q.queue, "redis://127.0.0.1:6379/q");
    q.retries = -1;
    q.fingerprint = "abcdef0123456789";
    stg_batch_report_worker w = {.name = "w1", .n = {[STG_JOB_DONE] = 2, [STG_JOB_FAILED] = 1}};
    q.workers = &w;
    q.n_workers = 1;

    char *tdb = printed(&db, false), *tq = printed(&q, false);
    /* the common lines, word for word but for the database's retries */
    static const char *const prefixes[] = {"  done ", "  failed ", "  deferred ", "  review ",
                                           "  pending ", "  in flight "};
    for (size_t i = 0; i < sizeof prefixes / sizeof prefixes[0]; i++) {
        char *a = line_of(tdb, prefixes[i]), *b = line_of(tq, prefixes[i]);
        assert_non_null(a);
        assert_non_null(b);
        /* the count, at the same column; the notes say what to do with each */
        assert_memory_equal(a, b, strlen(prefixes[i]) + 9);
        free(a), free(b);
    }
    char *cdb = line_of(tdb, "calls "), *cq = line_of(tq, "calls ");
    assert_string_equal(cq, "calls 12: 429 x 7 (58.3%), 503 x 1 (8.3%)");
    assert_string_equal(cdb, "calls 12: 429 x 7 (58.3%), 503 x 1 (8.3%); retries 8");
    free(cdb), free(cq);
    char *ddb = line_of(tdb, "job duration "), *dq = line_of(tq, "job duration ");
    assert_non_null(ddb);
    assert_non_null(dq);
    assert_string_equal(strchr(ddb, ':'), strchr(dq, ':'));
    assert_string_equal(strchr(dq, ':'), ": p50 0.12 s, p90 0.30 s, p99 0.30 s, max 0.30 s (4 jobs)");
    free(ddb), free(dq);
    /* each its own sections only */
    assert_non_null(strstr(tdb, "\nruns 1, wall time 2.00 s\n"));
    assert_non_null(strstr(tdb, "effective rate: 1.5 jobs/s answered"));
    assert_null(strstr(tdb, "workers"));
    assert_non_null(strstr(tq, "\nworkers: 1\n  w1: done 2, failed 1, deferred 0, review 0\n"));
    assert_null(strstr(tq, "runs "));
    assert_null(strstr(tq, "effective rate"));
    assert_true(!strncmp(tdb, "batch report.db: 4 jobs\n", 24));
    assert_true(!strncmp(tq, "queue redis://127.0.0.1:6379/q: 4 jobs (job set abcdef012345...)\n", 64));
    free(tdb), free(tq);

    char *jdb = printed(&db, true), *jq = printed(&q, true);
    json_t *a = json_loads(jdb, 0, NULL), *b = json_loads(jq, 0, NULL);
    assert_non_null(a);
    assert_non_null(b);
    static const char *const names[] = {"jobs",       "ended",      "states",    "calls",
                                        "status_429", "status_503", "share_429", "duration_ms",
                                        "fingerprint", "classes"};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        json_t *x = json_object_get(a, names[i]), *y = json_object_get(b, names[i]);
        if (!x || !y || !json_equal(x, y))
            fail_msg("%s differs: %s vs %s", names[i], jdb, jq);
    }
    assert_int_equal(json_integer_value(json_object_get(a, "ended")), 4);
    assert_int_equal(json_integer_value(json_object_get(json_object_get(a, "states"), "done")), 2);
    assert_int_equal(json_integer_value(json_object_get(json_object_get(a, "duration_ms"), "jobs")),
                     4);
    assert_string_equal(json_string_value(json_object_get(a, "db")), "report.db");
    assert_int_equal(json_integer_value(json_object_get(a, "retries")), 8);
    assert_null(json_object_get(a, "workers"));
    assert_null(json_object_get(a, "queue"));
    assert_string_equal(json_string_value(json_object_get(b, "queue")), "redis://127.0.0.1:6379/q");
    assert_int_equal(json_array_size(json_object_get(b, "workers")), 1);
    assert_null(json_object_get(b, "retries"));
    assert_null(json_object_get(b, "runs"));
    json_decref(a), json_decref(b);
    free(jdb), free(jq);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_same_common_facts),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
