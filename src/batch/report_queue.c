/*
 * The Redis work queue's report read into the batch report's model
 * (report.h): its counts as the jobs by state, its ended jobs' attempts as
 * the calls, its latencies (claim to end) as the durations, its rows per
 * class and tenant as the database report's (stg_report_class), and its
 * workers and job set as its own sections. Printed by report.c like the
 * database's.
 *
 * Invariants: read-only (a few round trips, src/redis/queue_report.c); a
 * queue state is the job state of the same number (asserted below); the
 * class rows follow the database report's rule: the jobs' rows only when a
 * job names a class or tenant, the admissions' only when something tells
 * them apart.
 */
#ifdef STG_BATCH_HAVE_QUEUE

#include <stdlib.h>
#include <string.h>

#include <stagger/redis/queue.h>

#include "batch/report.h"

_Static_assert(STG_QUEUE_NSTATES == STG_JOB_NSTATES && STG_QUEUE_PENDING == (int)STG_JOB_PENDING &&
                   STG_QUEUE_INFLIGHT == (int)STG_JOB_INFLIGHT &&
                   STG_QUEUE_DONE == (int)STG_JOB_DONE && STG_QUEUE_REVIEW == (int)STG_JOB_REVIEW,
               "a queue state is the job state of the same number");

/* The queue's rows per class and tenant as the database report's: the
 * jobs' rows (none when no job names a class or tenant, as there), then
 * the admissions' (none when, besides, every admission was of the default
 * class, normal, no tenant: nothing to tell apart). *v malloc'd. */
static int classes_of(stg_queue *q, stg_report_class **v, size_t *n)
{
    stg_queue_class_row *rows;
    size_t nr;
    *v = NULL;
    *n = 0;
    int rc = stg_queue_classes_get(q, &rows, &nr);
    if (rc != STG_OK)
        return rc;
    bool named = false, other = false;
    for (size_t i = 0; i < nr; i++) {
        named |= rows[i].has_jobs && (rows[i].cls[0] || rows[i].tenant[0]);
        other |= rows[i].has_admitted && (strcmp(rows[i].cls, "normal") || rows[i].tenant[0]);
    }
    if (nr && !(*v = calloc(2 * nr, sizeof **v)))
        rc = STG_ENOMEM;
    for (int pass = 0; *v && pass < 2; pass++)
        for (size_t i = 0; i < nr; i++) {
            const stg_queue_class_row *r = &rows[i];
            if (pass == 0 ? !(named && r->has_jobs) : !((named || other) && r->has_admitted))
                continue;
            stg_report_class *c = &(*v)[(*n)++];
            snprintf(c->cls, sizeof c->cls, "%s", r->cls);
            snprintf(c->tenant, sizeof c->tenant, "%s", r->tenant);
            c->jobs_row = pass == 0;
            for (int s = 0; s < STG_QUEUE_NSTATES; s++)
                c->jobs[s] = c->jobs_row ? r->n[s] : 0;
            if (!c->jobs_row) {
                c->admitted = r->admitted;
                c->wait_ms = r->wait_ms;
                c->wait_max_ms = r->wait_max_ms;
            }
        }
    free(rows);
    return rc;
}

int stg__batch_report_queue(stg_queue *q, const char *url_shown, stg_batch_report *r)
{
    memset(r, 0, sizeof *r);
    stg_queue_report qr;
    int rc = stg_queue_report_get(q, &qr);
    if (rc != STG_OK)
        return rc;
    const stg_queue_counts *c = &qr.counts;
    snprintf(r->queue, sizeof r->queue, "%s", url_shown);
    snprintf(r->fp_buf, sizeof r->fp_buf, "%s", qr.fingerprint);
    r->fingerprint = r->fp_buf;
    r->total = c->total;
    memcpy(r->n, c->n, sizeof r->n);
    r->calls = c->attempts;
    r->status_429 = c->status_429;
    r->status_503 = c->status_503;
    r->retries = -1;
    r->duration = (stg_report_durations){qr.lat_n, qr.lat_p50_ms, qr.lat_p90_ms, qr.lat_p99_ms,
                                         qr.lat_max_ms};
    if (qr.n_workers && !(r->workers = calloc(qr.n_workers, sizeof *r->workers)))
        rc = STG_ENOMEM;
    for (size_t i = 0; rc == STG_OK && i < qr.n_workers; i++) {
        stg_batch_report_worker *w = &r->workers[r->n_workers++];
        w->name = qr.workers[i].name; /* taken over */
        qr.workers[i].name = NULL;
        memcpy(w->n, qr.workers[i].n, sizeof w->n);
        w->seen_ms = qr.workers[i].seen_ms;
    }
    stg_queue_report_free(&qr);
    if (rc == STG_OK && (rc = classes_of(q, &r->queue_classes, &r->n_classes)) == STG_OK)
        r->classes = r->queue_classes;
    if (rc != STG_OK)
        stg__batch_report_free(r);
    return rc;
}

#else
typedef int stg__batch_report_queue_unused;
#endif
