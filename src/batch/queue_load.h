/*
 * Loading the Redis work queue (<stagger/redis/queue.h>) from a batch
 * input, streamed (queue_load.c): what `stagger batch --queue URL INPUT`
 * does before it works.
 *
 * Internal to the tree (include as "batch/queue_load.h"); built only with
 * libstagger-redis (STG_BATCH_HAVE_QUEUE).
 *
 * Invariants:
 *  - Memory stays bounded whatever the input's size: one input line, one
 *    chunk of jobs and SQLite's page cache. The input goes through the
 *    reader and importer a batch database uses (stg__store_import_stream)
 *    into a private spool database in a temporary directory (disk: about
 *    the input's size, removed before return), then from the spool into the
 *    queue, `chunk` jobs per stg_queue_load call.
 *  - So the queue's job ids (positions among the accepted jobs), keys,
 *    fingerprint, bad lines and repeats are those of a database loaded from
 *    the same input, by construction.
 *  - Nothing is pushed unless the whole input was read and accepted: a read
 *    error, no jobs, bad lines with strict, or a job whose URL or headers
 *    carry a secret (the queue is a database other machines read) loads
 *    nothing.
 */
#ifndef STAGGER_BATCH_QUEUE_LOAD_H
#define STAGGER_BATCH_QUEUE_LOAD_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <stagger/redis/queue.h>

#include "store/store.h"

/* Jobs per stg_queue_load call by default (the call takes at most 400). */
#define STG_BATCH_QUEUE_LOAD_CHUNK 200

typedef struct stg_batch_queue_load_options {
    const char *input_path; /* recorded in the spool only; NULL: "-" */
    bool strict;            /* a bad line refuses the load */
    /* Every bad line, in line order (repeats included); may be NULL. */
    void (*on_bad)(void *data, long line, const char *message);
    void *bad_data;
    size_t chunk;        /* jobs per push; 0: STG_BATCH_QUEUE_LOAD_CHUNK */
    const char *tmp_dir; /* the spool's parent; NULL: $TMPDIR, else /tmp */
} stg_batch_queue_load_options;

typedef enum stg_batch_queue_load_stage {
    STG_QLOAD_INPUT, /* reading the input (STG_EIO, STG_ENOMEM; STG_EINVAL: a CSV
                        header the templates do not fit) */
    STG_QLOAD_SPOOL, /* the temporary database (STG_EDB, STG_EIO, STG_ENOMEM) */
    STG_QLOAD_QUEUE, /* stg_queue_load (its codes, stg_queue_errmsg) */
} stg_batch_queue_load_stage;

typedef struct stg_batch_queue_load_result {
    size_t jobs, bad; /* accepted jobs; bad lines (repeats included) */
    long lines;
    bool refused;     /* no jobs, or bad lines with strict: nothing pushed */
    /* The first job that carries a secret (nothing pushed): its line (0:
     * none), key (truncated to fit) and whether the secret is in its URL
     * (else in its headers). */
    long secret_line;
    char secret_key[256];
    bool secret_in_url;
    int64_t added;    /* jobs the queue did not hold yet */
    int64_t pushes;   /* stg_queue_load calls made */
    stg_batch_queue_load_stage stage; /* where an error came from */
    char err[512];    /* its message ("" for a queue error: stg_queue_errmsg) */
} stg_batch_queue_load_result;

/* Stream r into q (see the invariants). STG_OK: look at res->refused and
 * res->secret_line; otherwise res->stage says what failed. */
int stg__batch_queue_load(stg_queue *q, stg_input_reader *r,
                          const stg_batch_queue_load_options *o,
                          stg_batch_queue_load_result *res);

#endif /* STAGGER_BATCH_QUEUE_LOAD_H */
