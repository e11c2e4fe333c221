/*
 * The one row writer of `batch export`: the SQLite store's export
 * (export.c) and the work queue's (src/batch/queue_export.c) write their rows
 * through it, so both give the same columns in the same formats and a
 * user's script reads either. See export_row.c for the formats.
 *
 * Columns, in order: id, job, line, state, status, attempts, error,
 * reason, method, url, file, finished_at, duration_ms; then the back end's
 * own columns (the queue's: deliveries, worker, latency_ms); then body
 * (with bodies).
 */
#ifndef STG_STORE_EXPORT_ROW_H
#define STG_STORE_EXPORT_ROW_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "store/store.h"

/* A back end's own column's value: an integer or a string; null when
 * is_null (or a NULL string). */
typedef struct stg__export_val {
    bool is_int, is_null;
    int64_t i;
    const char *s;
} stg__export_val;

/* One job. Borrowed strings; NULL is null (JSON) or empty (CSV). */
typedef struct stg__export_row {
    const char *key;      /* "id": the job's name */
    int64_t job;          /* its number */
    bool has_line;        /* the input line it came from, when known */
    int64_t line;
    const char *state;
    bool has_status;      /* an HTTP status was answered */
    int64_t status;
    int64_t attempts;
    const char *error, *reason, *method, *url, *file;
    bool has_finished;    /* finished_at: Unix ms, written ISO 8601 UTC */
    int64_t finished_ms;
    bool has_duration;    /* duration_ms: the last run, claimed to final */
    int64_t duration_ms;
    bool has_body;        /* with bodies: the stored response body */
    const void *body;     /* body_len bytes, may hold NUL */
    size_t body_len;
    const stg__export_val *own; /* the writer's n_own columns' values */
} stg__export_row;

typedef struct stg__exporter {
    FILE *out;
    stg_export_format format;
    bool bodies;
    const char *const *own; /* the back end's own column names; NULL: none */
    size_t n_own;
    size_t rows;            /* written so far */
} stg__exporter;

/* The header: CSV's line, JSON's '['. STG_OK or STG_EIO. */
int stg__export_begin(stg__exporter *x);
/* One row. STG_OK, STG_EIO (write error) or STG_ENOMEM. */
int stg__export_write(stg__exporter *x, const stg__export_row *r);
/* The end: JSON's ']', then a flush. STG_OK or STG_EIO. */
int stg__export_end(stg__exporter *x);
/* The field s[0..n) as an RFC 4180 CSV field, quoted when it holds a
 * comma, a quote, CR, LF or NUL, or starts or ends with a space (n bytes
 * are read: a NUL does not end it). */
void stg__export_csv_field(FILE *out, const char *s, size_t n);

#endif
