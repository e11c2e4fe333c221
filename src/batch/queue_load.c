/*
 * Loading the Redis work queue from a batch input, streamed through a
 * spool database (see queue_load.h for the contract).
 *
 * Why a spool: before its first job is pushed, a queue load needs what
 * only the whole input tells: the job set's fingerprint and size (the
 * queue records both at its first load and refuses another set), each
 * job's id (its place among the accepted jobs, repeats skipped), and
 * whether any line refuses the load. The importer of a batch database
 * finds all of it on disk, repeats by the database's UNIQUE key, one line
 * in memory at a time; this file only reads the spool back in id order
 * (stg__store_claim, a chunk at a time) and pushes each chunk.
 *
 * Invariants:
 *  - The spool is in a directory of its own made by mkdtemp (0700) and
 *    removed with everything in it before return, whatever happened.
 *  - At most one chunk of jobs is in memory; each is freed before the next
 *    is read.
 */
#ifdef STG_BATCH_HAVE_QUEUE

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "batch/queue_load.h"

typedef struct spool {
    char dir[4096];
    char path[4160];
    stg_store *s;
} spool;

static int fail(stg_batch_queue_load_result *res, stg_batch_queue_load_stage stage, int rc,
                const char *fmt, ...) __attribute__((format(printf, 4, 5)));
static int fail(stg_batch_queue_load_result *res, stg_batch_queue_load_stage stage, int rc,
                const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(res->err, sizeof res->err, fmt, ap);
    va_end(ap);
    res->stage = stage;
    return rc;
}

static int spool_open(spool *sp, const char *tmp_dir, stg_batch_queue_load_result *res)
{
    if (!tmp_dir || !*tmp_dir)
        tmp_dir = getenv("TMPDIR");
    if (!tmp_dir || !*tmp_dir)
        tmp_dir = "/tmp";
    snprintf(sp->dir, sizeof sp->dir, "%s/stagger-load.XXXXXX", tmp_dir);
    if (!mkdtemp(sp->dir)) {
        int e = errno;
        sp->dir[0] = '\0';
        return fail(res, STG_QLOAD_SPOOL, STG_EIO, "cannot make a spool directory in %s: %s",
                    tmp_dir, strerror(e));
    }
    snprintf(sp->path, sizeof sp->path, "%s/spool.db", sp->dir);
    stg_store_options so = {.create = true};
    char err[400] = "";
    int rc = stg__store_open(sp->path, &so, &sp->s, err, sizeof err);
    if (rc != STG_OK)
        return fail(res, STG_QLOAD_SPOOL, rc, "spool: %s", err);
    return STG_OK;
}

static void spool_remove(spool *sp)
{
    stg__store_close(sp->s);
    sp->s = NULL;
    if (!sp->dir[0])
        return;
    static const char *const tails[] = {"", "-wal", "-shm", "-journal"};
    char p[4200];
    for (size_t i = 0; i < sizeof tails / sizeof *tails; i++) {
        snprintf(p, sizeof p, "%s%s", sp->path, tails[i]);
        unlink(p);
    }
    rmdir(sp->dir);
}

/* The first job that carries a secret, if any (the spool is read to find
 * it: the load is refused, the spool thrown away). */
static int find_secret(stg_store *s, size_t chunk, stg_job *jobs,
                       stg_batch_queue_load_result *res)
{
    int64_t n_secret = 0;
    int rc = stg__store_count_needs_input(s, ~0u, &n_secret);
    for (int got = 1; rc == STG_OK && n_secret > 0 && !res->secret_line && got > 0;) {
        if ((rc = stg__store_claim(s, (int)chunk, 0, 0, jobs, &got)) != STG_OK)
            break;
        for (int i = 0; i < got; i++) {
            if (jobs[i].needs_input && !res->secret_line) {
                res->secret_line = jobs[i].line > 0 ? jobs[i].line : 1;
                snprintf(res->secret_key, sizeof res->secret_key, "%s", jobs[i].key);
                res->secret_in_url = jobs[i].url == NULL;
            }
            stg__job_clear(&jobs[i]);
        }
    }
    if (rc != STG_OK)
        return fail(res, STG_QLOAD_SPOOL, rc, "spool: %s", stg__store_errmsg(s));
    return STG_OK;
}

/* Push the spool's jobs into q, chunk by chunk, in id order. */
static int push_all(stg_queue *q, stg_store *s, const char *fp, size_t chunk, stg_job *jobs,
                    stg_queue_spec *specs, stg_batch_queue_load_result *res)
{
    for (;;) {
        int got = 0, rc = stg__store_claim(s, (int)chunk, 0, 0, jobs, &got);
        if (rc != STG_OK)
            return fail(res, STG_QLOAD_SPOOL, rc, "spool: %s", stg__store_errmsg(s));
        if (got == 0)
            return STG_OK;
        for (int i = 0; i < got; i++) {
            const stg_job *j = &jobs[i];
            size_t nh = 0;
            while (j->headers && j->headers[nh])
                nh++;
            specs[i] = (stg_queue_spec){
                .id = j->id,
                .key = j->key,
                .method = j->method,
                .url = j->url,
                .headers = (const char *const *)j->headers,
                .n_headers = nh,
                .body = j->body,
                .body_len = j->body_len,
                .idempotency_key = j->idempotency_key,
                .replay_safe = j->replay_safe,
                .line = j->line,
            };
        }
        int64_t added = 0;
        rc = stg_queue_load(q, fp, (int64_t)res->jobs, specs, (size_t)got, &added);
        res->pushes++;
        res->added += added;
        for (int i = 0; i < got; i++)
            stg__job_clear(&jobs[i]);
        if (rc != STG_OK) {
            res->stage = STG_QLOAD_QUEUE;
            res->err[0] = '\0';
            return rc;
        }
    }
}

int stg__batch_queue_load(stg_queue *q, stg_input_reader *r,
                          const stg_batch_queue_load_options *o,
                          stg_batch_queue_load_result *res)
{
    memset(res, 0, sizeof *res);
    size_t chunk = o && o->chunk ? o->chunk : STG_BATCH_QUEUE_LOAD_CHUNK;
    if (chunk > 400)
        chunk = 400; /* stg_queue_load's limit */
    spool sp = {0};
    stg_job *jobs = calloc(chunk, sizeof *jobs);
    stg_queue_spec *specs = calloc(chunk, sizeof *specs);
    int rc = jobs && specs ? STG_OK : fail(res, STG_QLOAD_SPOOL, STG_ENOMEM, "out of memory");
    if (rc == STG_OK)
        rc = spool_open(&sp, o ? o->tmp_dir : NULL, res);
    stg_store_import_result ir = {0};
    if (rc == STG_OK) {
        stg_store_import_options io = {.input_path = o ? o->input_path : NULL,
                                       .now_ms = stg__store_now_ms(),
                                       .strict = o && o->strict,
                                       .on_bad = o ? o->on_bad : NULL,
                                       .bad_data = o ? o->bad_data : NULL};
        rc = stg__store_import_stream(sp.s, r, &io, &ir);
        res->jobs = ir.jobs;
        res->bad = ir.bad;
        res->lines = ir.lines;
        res->refused = ir.refused;
        if (rc == STG_EIO || rc == STG_ENOMEM || rc == STG_EINVAL)
            fail(res, STG_QLOAD_INPUT, rc, "%s", stg__store_errmsg(sp.s));
        else if (rc != STG_OK)
            fail(res, STG_QLOAD_SPOOL, rc, "spool: %s", stg__store_errmsg(sp.s));
    }
    if (rc == STG_OK && !ir.refused)
        rc = find_secret(sp.s, chunk, jobs, res);
    if (rc == STG_OK && !ir.refused && !res->secret_line) {
        /* find_secret claimed nothing: every job is still pending. */
        rc = push_all(q, sp.s, ir.fingerprint, chunk, jobs, specs, res);
    }
    spool_remove(&sp);
    free(jobs);
    free(specs);
    return rc;
}

#else
typedef int stg__batch_queue_load_unused;
#endif
