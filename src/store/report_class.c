/*
 * The batch report's section per priority class and tenant (issue #32,
 * docs/priorities.md): the jobs by state, by the class and tenant each
 * stored (its Stagger-Priority / Stagger-Tenant headers, which the input's
 * priority, tenant and weight became), and what the runs admitted of each
 * class and tenant with their waits for admission (the table run_classes,
 * written by the runner at the end of a run, made if missing, so older
 * databases read as "not recorded").
 *
 * The printing (text and JSON) takes rows, not the database: the Redis
 * work queue's report (src/batch/report_queue.c) prints its rows with it, so
 * both reports show the same sections in the same form.
 *
 * Invariants: read-only but for stg__store_run_classes_add; only class
 * names, tenant names (stg_tenant_check's characters) and counts are
 * shown; a job whose headers are not stored (one of them is secret) is
 * counted under no class (its class came from the input at run time).
 */
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <jansson.h>
#include <sqlite3.h>

#include "store/internal.h"

static stg_report_class *row(stg_store_report *r, const char *cls, const char *tenant,
                             bool jobs_row)
{
    for (size_t i = 0; i < r->n_classes; i++) {
        stg_report_class *c = &r->classes[i];
        if (c->jobs_row == jobs_row && !strcmp(c->cls, cls) && !strcmp(c->tenant, tenant))
            return c;
    }
    stg_report_class *v = realloc(r->classes, (r->n_classes + 1) * sizeof *v);
    if (!v)
        return NULL;
    r->classes = v;
    stg_report_class *c = &v[r->n_classes++];
    memset(c, 0, sizeof *c);
    snprintf(c->cls, sizeof c->cls, "%s", cls);
    snprintf(c->tenant, sizeof c->tenant, "%s", tenant);
    c->jobs_row = jobs_row;
    return c;
}

/* The jobs' stored classes: a header's value, trimmed; the tenant's
 * weight (";w=N") left out. */
static const char JOBS_SQL[] =
    "SELECT (SELECT trim(substr(value, 18)) FROM json_each(j.headers) "
    "        WHERE lower(substr(value, 1, 17)) = 'stagger-priority:' LIMIT 1), "
    "       (SELECT trim(substr(value, 16)) FROM json_each(j.headers) "
    "        WHERE lower(substr(value, 1, 15)) = 'stagger-tenant:' LIMIT 1), "
    "       j.state, count(*) "
    "FROM jobs j WHERE j.headers IS NULL OR json_valid(j.headers) "
    "GROUP BY 1, 2, 3";

static const char RUNS_SQL[] = "SELECT class, tenant, sum(admitted), sum(wait_ms), max(wait_max_ms) "
                               "FROM run_classes GROUP BY 1, 2 ORDER BY 1, 2";

int stg__store_report_classes(stg_store *s, stg_store_report *r)
{
    sqlite3_stmt *st = NULL;
    int rc = sqlite3_prepare_v2(s->db, JOBS_SQL, -1, &st, NULL);
    bool any_class = false;
    while (st && (rc = sqlite3_step(st)) == SQLITE_ROW) {
        const char *pv = (const char *)sqlite3_column_text(st, 0);
        const char *tv = (const char *)sqlite3_column_text(st, 1);
        const char *sv = (const char *)sqlite3_column_text(st, 2);
        int p;
        const char *cls = pv && stg_priority_parse(pv, &p) == STG_OK ? stg_priority_name(p) : "";
        char tenant[STG_TENANT_MAX + 2] = "";
        if (tv)
            snprintf(tenant, sizeof tenant, "%.*s", (int)strcspn(tv, "; \t"), tv);
        stg_job_state js;
        if (!sv || stg__job_state_parse(sv, &js) != STG_OK)
            continue;
        any_class |= *cls || *tenant;
        stg_report_class *c = row(r, cls, tenant, true);
        if (!c) {
            rc = SQLITE_NOMEM;
            break;
        }
        c->jobs[js] += sqlite3_column_int64(st, 3);
    }
    sqlite3_finalize(st);
    st = NULL;
    if (rc == SQLITE_DONE)
        rc = SQLITE_OK;
    if (rc == SQLITE_OK && !any_class) { /* no job names one: no section of jobs */
        free(r->classes);
        r->classes = NULL;
        r->n_classes = 0;
    }
    if (rc == SQLITE_OK && stg__store_has_table(s, "run_classes")) {
        rc = sqlite3_prepare_v2(s->db, RUNS_SQL, -1, &st, NULL);
        while (st && (rc = sqlite3_step(st)) == SQLITE_ROW) {
            const char *cv = (const char *)sqlite3_column_text(st, 0);
            const char *tv = (const char *)sqlite3_column_text(st, 1);
            stg_report_class *c = row(r, cv ? cv : "", tv ? tv : "", false);
            if (!c) {
                rc = SQLITE_NOMEM;
                break;
            }
            c->admitted = sqlite3_column_int64(st, 2);
            c->wait_ms = sqlite3_column_int64(st, 3);
            c->wait_max_ms = sqlite3_column_int64(st, 4);
        }
        sqlite3_finalize(st);
        if (rc == SQLITE_DONE)
            rc = SQLITE_OK;
    }
    return rc;
}

int stg__store_run_classes_add(stg_store *s, const stg_run_class *v, size_t n)
{
    sqlite3_stmt *st;
    int rc = stg__store_run_table(
        s,
        "CREATE TABLE IF NOT EXISTS run_classes(run_id INTEGER NOT NULL "
        "REFERENCES runs(id), class TEXT NOT NULL, tenant TEXT NOT NULL, "
        "admitted INTEGER NOT NULL, wait_ms INTEGER NOT NULL, "
        "wait_max_ms INTEGER NOT NULL, PRIMARY KEY(run_id, class, tenant))",
        "INSERT INTO run_classes(run_id, class, tenant, admitted, wait_ms, "
        "wait_max_ms) SELECT max(id), ?1, ?2, ?3, ?4, ?5 FROM runs "
        "HAVING max(id) IS NOT NULL ON CONFLICT(run_id, class, tenant) DO "
        "UPDATE SET admitted = admitted + excluded.admitted, "
        "wait_ms = wait_ms + excluded.wait_ms, "
        "wait_max_ms = max(wait_max_ms, excluded.wait_max_ms)",
        &st);
    for (size_t i = 0; rc == SQLITE_OK && i < n; i++) {
        sqlite3_reset(st);
        sqlite3_bind_text(st, 1, v[i].cls, -1, SQLITE_TRANSIENT);
        sqlite3_bind_text(st, 2, v[i].tenant ? v[i].tenant : "", -1, SQLITE_TRANSIENT);
        sqlite3_bind_int64(st, 3, v[i].admitted);
        sqlite3_bind_int64(st, 4, v[i].wait_ms);
        sqlite3_bind_int64(st, 5, v[i].wait_max_ms);
        rc = sqlite3_step(st);
        if (rc == SQLITE_DONE)
            rc = SQLITE_OK;
    }
    sqlite3_finalize(st);
    return rc == SQLITE_OK ? STG_OK
                           : stg__store_fail(s, rc, "cannot record the run's classes");
}

void stg__report_classes_print(const stg_report_class *v, size_t n, FILE *out)
{
    bool head = false;
    for (size_t i = 0; i < n; i++) {
        const stg_report_class *c = &v[i];
        if (!c->jobs_row)
            continue;
        if (!head)
            fputs("jobs by class and tenant:\n", out);
        head = true;
        fprintf(out, "  %-11s %-20s", *c->cls ? c->cls : "(default)",
                *c->tenant ? c->tenant : "-");
        for (int k = 0; k < STG_JOB_NSTATES; k++)
            if (c->jobs[k])
                fprintf(out, " %s %lld", stg__job_state_name((stg_job_state)k),
                        (long long)c->jobs[k]);
        fputc('\n', out);
    }
    head = false;
    for (size_t i = 0; i < n; i++) {
        const stg_report_class *c = &v[i];
        if (c->jobs_row)
            continue;
        if (!head)
            fputs("admitted by class and tenant (every run):\n", out);
        head = true;
        fprintf(out, "  %-11s %-20s %lld admitted, wait for admission avg %.1f ms, max %lld ms\n",
                c->cls, *c->tenant ? c->tenant : "-", (long long)c->admitted,
                c->admitted ? (double)c->wait_ms / (double)c->admitted : 0.0,
                (long long)c->wait_max_ms);
    }
}

void *stg__report_classes_json(const stg_report_class *v, size_t n)
{
    json_t *a = json_array();
    for (size_t i = 0; a && i < n; i++) {
        const stg_report_class *c = &v[i];
        json_t *o = json_object();
        if (!o)
            break;
        json_object_set_new(o, "class", *c->cls ? json_string(c->cls) : json_null());
        json_object_set_new(o, "tenant", *c->tenant ? json_string(c->tenant) : json_null());
        if (c->jobs_row) {
            json_t *states = json_object();
            for (int k = 0; states && k < STG_JOB_NSTATES; k++)
                json_object_set_new(states, stg__job_state_name((stg_job_state)k),
                                    json_integer(c->jobs[k]));
            json_object_set_new(o, "jobs", states ? states : json_null());
        } else {
            json_object_set_new(o, "admitted", json_integer(c->admitted));
            json_object_set_new(o, "wait_ms", json_integer(c->wait_ms));
            json_object_set_new(o, "wait_max_ms", json_integer(c->wait_max_ms));
        }
        json_array_append_new(a, o);
    }
    return a;
}
