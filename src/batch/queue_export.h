/*
 * Exporting the Redis work queue (<stagger/redis/queue.h>) as a batch
 * database is exported (queue_export.c): what `stagger batch export --queue
 * URL` writes.
 *
 * Internal to the tree (include as "batch/queue_export.h"); built only with
 * libstagger-redis (STG_BATCH_HAVE_QUEUE).
 *
 * Invariants: one row per job, in load order, written by the database
 * export's own row writer (src/store/export_row.c): the same columns in
 * the same order and the same formats as stg__store_export, the queue's own
 * columns (deliveries, worker, latency_ms) after the common ones
 * (tests/integration/test_batch_export_same.sh compares both).
 */
#ifndef STAGGER_BATCH_QUEUE_EXPORT_H
#define STAGGER_BATCH_QUEUE_EXPORT_H

#include <stdio.h>

#include <stagger/redis/queue.h>

#include "store/store.h"

/* Every job of q that opt selects, to out, as opt says (the options of
 * stg__store_export). STG_OK, STG_EIO (a write failed), or the queue's
 * error (STG_EUNAVAIL, STG_ENOMEM: stg_queue_errmsg says why). */
int stg__batch_queue_export(stg_queue *q, const stg_export_options *opt, FILE *out);

#endif
