/*
 * The Redis work queue exported (queue_export.h): each stg_queue_row
 * becomes one stg__export_row of the database export's row writer
 * (src/store/export_row.c), with the queue's own columns after the common
 * ones.
 *
 * Invariants: a row shows what the queue holds, as the database export
 * shows its own: the job's URL as loaded (a job with a secret in its URL or
 * headers is never loaded: queue_load.c), a body only when asked; a write
 * error stops the export (STG_EIO), never a half row without a status.
 */
#ifdef STG_BATCH_HAVE_QUEUE

#include "batch/queue_export.h"
#include "store/export_row.h"

/* The queue's own columns, after the ones every export has (export_row.h). */
static const char *const QUEUE_COLUMNS[] = {"deliveries", "worker", "latency_ms"};

/* An error of the writer, told apart from the queue's own errors (which are
 * STG_* codes). */
#define WRITE_FAILED (-1)

static int export_row(void *data, const stg_queue_row *r)
{
    stg__exporter *x = data;
    bool finished = r->finished_ms > 0;
    stg__export_val own[] = {
        {.is_int = true, .i = r->deliveries},
        {.s = r->worker, .is_null = !r->worker},
        {.is_int = true, .i = r->latency_ms, .is_null = !finished},
    };
    stg__export_row row = {
        .key = r->key,
        .job = r->id,
        .has_line = r->line > 0,
        .line = r->line,
        .state = stg_queue_state_name(r->state),
        .has_status = r->status > 0,
        .status = r->status,
        .attempts = r->attempts,
        .error = r->error,
        .reason = r->reason,
        .method = r->method,
        .url = r->url,
        .file = r->file,
        .has_finished = finished,
        .finished_ms = r->finished_ms,
        .has_duration = finished,
        .duration_ms = r->latency_ms,
        .has_body = r->body != NULL,
        .body = r->body,
        .body_len = r->body_len,
        .own = own,
    };
    return stg__export_write(x, &row) == STG_OK ? 0 : WRITE_FAILED;
}

int stg__batch_queue_export(stg_queue *q, const stg_export_options *opt, FILE *out)
{
    stg__exporter x = {.out = out,
                       .format = opt->format,
                       .bodies = opt->bodies,
                       .own = QUEUE_COLUMNS,
                       .n_own = sizeof QUEUE_COLUMNS / sizeof QUEUE_COLUMNS[0]};
    if (stg__export_begin(&x) != STG_OK)
        return STG_EIO;
    int rc = stg_queue_export(q, opt->state_mask, opt->bodies, export_row, &x);
    if (rc == WRITE_FAILED)
        return STG_EIO;
    if (rc == STG_OK && stg__export_end(&x) != STG_OK)
        return STG_EIO;
    return rc;
}

#else
typedef int stg__batch_queue_export_unused;
#endif
