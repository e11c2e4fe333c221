/*
 * The report of a batch, one model and one printer of each form for both
 * sources of jobs: the database (src/store/report.c reads it) and the Redis
 * work queue (report_queue.c reads it). `stagger batch report`, `batch
 * report --queue` and the report at the end of a run print it; the CLI
 * only chooses text or JSON.
 *
 * The common facts are the model's fields: the jobs by state, the calls
 * with their 429s and 503s, the jobs' durations (claim to end, waits
 * included) and the sections per class and tenant. Each source adds its
 * own sections only: the database its runs, rates, histograms, reasons,
 * statuses, waits and input (the stg_store_report it was read from), the
 * queue its job set and its workers. Both print the common facts with the
 * same lines and the same JSON names (jobs, ended, states, calls,
 * status_429, status_503, share_429, duration_ms, fingerprint, classes),
 * which tests/integration/test_batch_export_same.sh checks on one input run
 * both ways.
 *
 * Invariants: a report shows only counts, names and the database's path or
 * the queue's URL as given (its password as ***, by the caller), never a
 * job's URL or header. A report owns what it holds; free it with
 * stg__batch_report_free (which accepts a zeroed report).
 */
#ifndef STAGGER_BATCH_REPORT_H
#define STAGGER_BATCH_REPORT_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "store/store.h"

/* One worker of a queue: the jobs it ended, per state, and when it last
 * claimed (Unix ms). */
typedef struct stg_batch_report_worker {
    char *name;
    int64_t n[STG_JOB_NSTATES];
    int64_t seen_ms;
} stg_batch_report_worker;

typedef struct stg_batch_report {
    /* What it reports on: a database (its path) or a queue (its URL). */
    const char *db;          /* NULL: a queue */
    char queue[800];         /* the queue's URL as shown; "" for a database */
    const char *fingerprint; /* the job set's; may be NULL */
    /* The common facts. */
    int64_t total;
    int64_t n[STG_JOB_NSTATES];
    int64_t calls, status_429, status_503;
    int64_t retries; /* -1: not counted (a queue) */
    stg_report_durations duration; /* claim to end */
    const stg_report_class *classes;
    size_t n_classes;
    /* The database's own sections (db != NULL). */
    stg_store_report store;
    /* The queue's own sections (db == NULL). */
    stg_batch_report_worker *workers;
    size_t n_workers;
    char fp_buf[65];                   /* the queue's fingerprint */
    stg_report_class *queue_classes;   /* owned */
} stg_batch_report;

/* Read the report of the database s (path db, kept as a pointer). STG_OK,
 * or the store's error (stg__store_errmsg says why). */
int stg__batch_report_store(stg_store *s, const char *db, stg_batch_report *r);

#ifdef STG_BATCH_HAVE_QUEUE
struct stg_queue;
/* Read the report of the queue q; url_shown: its URL as printed (no
 * password). STG_OK, STG_ENOTFOUND (no such queue), STG_EUNAVAIL,
 * STG_ENOMEM (stg_queue_errmsg says why). report_queue.c. */
int stg__batch_report_queue(struct stg_queue *q, const char *url_shown, stg_batch_report *r);
#endif

void stg__batch_report_free(stg_batch_report *r);

/* Ended: done + failed + deferred + review. */
int64_t stg__batch_report_ended(const stg_batch_report *r);

/* The report as text, or as one JSON object (compact, with a newline).
 * STG_OK, or STG_EIO when out fails, STG_ENOMEM. */
int stg__batch_report_text(const stg_batch_report *r, FILE *out);
int stg__batch_report_json(const stg_batch_report *r, FILE *out);

#endif
