/*
 * libstagger-batch: the batch runner as a library. Jobs from a store
 * (src/store), through an engine (libstagger-curl), back into the store.
 * `stagger batch` is one caller; a proxy or a Redis work queue are others,
 * so nothing here assumes a terminal, argv, signals or a single input file.
 *
 * Internal, not installed (include as "batch/batch.h"): it is built on the
 * store's internal API (store.h) and on libstagger-curl, neither of which
 * is installed, and its callers live in this tree. A public header would
 * promise an ABI for types (stg_store, stg_job_set) that are not public.
 *
 * Use (one thread; the handle is NOT thread-safe):
 *
 *     stg_batch *b;
 *     stg__batch_new(&cfg, &b, &start, err, sizeof err);  // recover, run row
 *     while (stg__batch_step(b, STG_MS(100))) {           // claim, submit, run
 *         if (signalled) stg__batch_stop(b);
 *         stg__batch_progress_get(b, &p); draw(&p);       // the caller draws
 *     }
 *     stg__batch_end(b, &summary);                        // requeue, counts
 *     stg__batch_free(b, exit_code);                      // run row closed
 *
 * Files, one concern each: runner.c (new, step, stop, progress, end),
 * submit.c (claim and submit), finish.c (the done callback's commit, the
 * sent-mark, stops), outcome.c (state_for: reason -> job state, the error
 * line), body.c (response bodies under out_dir), counts.c (jobs per state,
 * kept in memory beside the store's), source.c (the job source seam: the
 * store, or a stg_batch_source), queue_source.c (the Redis work queue as a
 * source); internal.h holds the handle.
 *
 * Job states and transitions: see store.h. The runner adds:
 *  - claim (pending -> inflight) is committed before the job's request can
 *    leave; with 4 slots or more a claim also takes up to as many jobs
 *    ahead (at most 64), so a kill -9 leaves at most 2 x the slots
 *    inflight (the claimed ahead unsent: recovered to pending), and a
 *    clean end gives them back;
 *  - progress, finished and the summary say only what is committed (what
 *    the file holds after a kill): outcomes of replay-safe jobs are
 *    committed in groups (every 20 ms or with the next claim), those of
 *    other jobs in their step;
 *  - for a job that is not replay-safe, the first ATTEMPT_START commits
 *    sent = 1 before the request can leave (the engine sends it only in a
 *    later pass), so after a kill it goes to review, not pending;
 *  - a stop (caller, shared limiter gone, body file unwritable) cancels
 *    every request; the cancelled jobs go back to pending (review if not
 *    replay-safe and sent). Only a failing store leaves jobs inflight: the
 *    next open's recovery moves them.
 */
#ifndef STAGGER_BATCH_H
#define STAGGER_BATCH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <stagger/curl.h>

#include "store/store.h"

typedef struct stg_batch stg_batch;

/* Where the jobs come from and their outcomes go, when not the store: the
 * seam a work queue (queue_source.h) plugs into. The runner calls these on
 * its thread only. With a source the store is not used at all (no
 * recovery, no run rows): the source keeps its own durable state.
 *
 * Codes: STG_OK; STG_EUNAVAIL (the backend is away: the run stops with
 * cause LIMITER, nothing it could not record is lost, the source says
 * why); anything else: a failing backend (cause STORE). */
typedef struct stg_batch_source {
    void *ctx;
    /* Up to max jobs into out[0..*n) (each owned by the runner, cleared
     * with stg__job_clear). *more: false once nothing more will come. */
    int (*claim)(void *ctx, int max, stg_job *out, int *n, bool *more);
    /* A job that is not replay-safe is about to be sent (before it can). */
    int (*mark_sent)(void *ctx, const stg_job *j);
    /* Whether j is still this worker's to send (no I/O): STG_OK, or
     * anything else once it was found taken over by another worker. Asked
     * before each pass for every job held and at each ATTEMPT_START: a job
     * that is not is cancelled (before the next pass can send it) and ends
     * here as PENDING, which records nothing. May be NULL: always OK. */
    int (*may_send)(void *ctx, const stg_job *j);
    /* The job's end (PENDING: give it back). May keep it to write later
     * (an outage): STG_OK then too. */
    int (*finish)(void *ctx, const stg_job *j, const stg_job_outcome *o);
    /* Jobs per state for the progress (may be cached). */
    void (*counts)(void *ctx, int64_t n[STG_JOB_NSTATES]);
    /* Once per step: flush what finish kept; STG_EUNAVAIL once the outage
     * lasted too long. May be NULL. */
    int (*tick)(void *ctx);
    /* Every engine event, after the runner's own handling. May be NULL. */
    void (*on_event)(void *ctx, const stg_event *ev);
    const char *(*errmsg)(void *ctx);
} stg_batch_source;

typedef struct stg_batch_config {
    stg_store *store;          /* open (exclusive), holding the job set; not owned */
    const stg_job_set *set;    /* the parsed input, for jobs whose secrets are not
                                  stored (needs_input); NULL: none. Not owned;
                                  must outlive the batch */
    const stg_input_secrets *secrets; /* or only those jobs' secret parts, as kept
                                  by stg__store_import_stream (what `stagger
                                  batch` gives: memory bounded by how many jobs
                                  carry secrets); NULL: none. Not owned */
    stg_input_cursor *cursor;  /* or a cursor over the input file, which finds
                                  those jobs by reading it again (nothing of
                                  the input in memory); NULL: none. Not owned;
                                  used by the batch only */
    stg_engine_config engine;  /* copied; its on_event is called after the
                                  batch's own handling of each event; its
                                  concurrency is the batch's slot count (0: 30) */
    const char *const *headers; /* "Name: value" added to every request, replacing
                                  a job's header of the same name; never stored.
                                  A field batch input may not set (framing,
                                  connection, Host, Proxy-*: util/http_field.h)
                                  or an invalid line is STG_EINVAL at new.
                                  Not copied: must outlive the batch */
    size_t n_headers;
    const char *out_dir;       /* write bodies to out_dir/<id> (0600) instead of the
                                  database; must exist and be a directory, not a
                                  symbolic link to one (STG_EINVAL at new).
                                  Not copied */
    bool retry_deferred;       /* at start: deferred -> pending */
    bool retry_review;         /* at start: review -> pending */
    const stg_batch_source *source; /* NULL: the store; else jobs from and
                                  outcomes to the source (store may be NULL;
                                  set, secrets, cursor, retry_* unused).
                                  Not owned; must outlive the batch */
    /* The class and tenant of a job that names none (a job's stored
     * Stagger-Priority / Stagger-Tenant, from its input's priority, tenant
     * and weight, wins): stagger/priority.h; zeros: normal, no tenant.
     * tenant not copied: must outlive the batch. Invalid: STG_EINVAL. */
    int priority;
    const char *tenant;
    double weight;
} stg_batch_config;

/* What stg__batch_new found and did before the run. */
typedef struct stg_batch_start {
    int64_t total;             /* jobs in the set */
    int recovered_pending;     /* inflight at the last stop, run again */
    int recovered_review;      /* inflight, not replay-safe and sent: review */
    int requeued_deferred, requeued_review;
    int64_t needs_input;       /* jobs to run that need the input, given none of
                                  cfg->set, cfg->secrets, cfg->cursor */
} stg_batch_start;

/* Why a run ended. */
typedef enum stg_batch_stop_cause {
    STG_BATCH_RUNNING = 0,
    STG_BATCH_DRAINED = 1,     /* nothing left to claim, nothing in flight */
    STG_BATCH_STOPPED = 2,     /* stg__batch_stop() */
    STG_BATCH_LIMITER = 3,     /* the shared limiter became unavailable */
    STG_BATCH_STORE = 4,       /* a store read or write failed */
    STG_BATCH_BODY = 5,        /* a response body could not be written */
    STG_BATCH_NEEDS_INPUT = 6  /* a job needs the input file, not given */
} stg_batch_stop_cause;

/* Jobs per state, and what follows from them. */
typedef struct stg_batch_counts {
    int64_t n[STG_JOB_NSTATES];
    int64_t total;
} stg_batch_counts;

/* Ended: done + failed + deferred + review. */
int64_t stg__batch_counts_ended(const stg_batch_counts *c);
/* Left to run: pending + inflight. */
int64_t stg__batch_counts_left(const stg_batch_counts *c);

/* A snapshot for drawing progress; the library never draws. */
typedef struct stg_batch_progress {
    stg_batch_counts counts;
    int64_t finished;          /* jobs that reached a final state in this run */
    int in_flight;             /* slots in use */
    uint64_t attempts, retries, status_429, status_503; /* this run's engine */
    stg_batch_stop_cause cause; /* RUNNING until the run ends */
    int concurrency_limit;     /* learned: the hosts' limits summed; 0: fixed */
    int64_t claims;            /* claim statements of this run (each claims up to
                                  the free slots and as many again, at most 64
                                  more; none ahead below 4 slots) */
} stg_batch_progress;

/* The end of a run. */
typedef struct stg_batch_summary {
    stg_batch_stop_cause cause;
    stg_batch_counts counts;   /* read back from the store after the run */
    int64_t finished;
    int requeued;              /* inflight jobs put back at the end */
    char message[800];         /* cause != DRAINED/STOPPED: what went wrong */
} stg_batch_summary;

/* Create the engine from cfg->engine, recover the jobs left in flight by
 * the last run, requeue what cfg asks for, load the counts and begin a run
 * row. *start (may be NULL) says what was done. Returns STG_OK (*out is the
 * caller's, to stg__batch_free), or STG_EDB (the store; err says why),
 * STG_ESTATE (jobs need the input, and none of cfg->set, cfg->secrets,
 * cfg->cursor is given: start->needs_input),
 * STG_EINVAL (bad config, including an engine that refuses it), STG_ENOMEM. */
int stg__batch_new(const stg_batch_config *cfg, stg_batch **out, stg_batch_start *start,
                  char *err, size_t errlen);

/* One pass: claim pending jobs for the free slots, submit them, and run the
 * engine for at most timeout_us (done callbacks commit outcomes). Returns
 * true while there is more to do; false when the run has ended (see
 * stg__batch_end). */
bool stg__batch_step(stg_batch *b, int64_t timeout_us);

/* Stop: no new claims; the next step cancels what is in flight. Safe to
 * call any time outside the engine's callbacks, and more than once. Not
 * async-signal-safe: from a signal handler set a flag, call this from the
 * loop. */
void stg__batch_stop(stg_batch *b);

/* Drain: no new claims; what is in flight finishes and is recorded, then
 * the run ends (cause DRAINED). Same calling rules as stg__batch_stop. */
void stg__batch_drain(stg_batch *b);

/* The run's engine (for looking only: stg_engine_quotas, stats); valid
 * until stg__batch_free. */
stg_engine *stg__batch_engine(stg_batch *b);

/* The current numbers. Cheap; call it every pass if needed. */
void stg__batch_progress_get(const stg_batch *b, stg_batch_progress *p);

/* After the last step: put back the jobs still inflight (unless the store
 * failed), read the counts back from the store and fill *s. Returns STG_OK,
 * or STG_EDB when the store cannot be read (s->cause is then STORE and
 * s->message says why). */
int stg__batch_end(stg_batch *b, stg_batch_summary *s);

/* What the run's engine admitted per class and tenant (as
 * stg_engine_class_stats): up to max rows into out; returns the count.
 * On the batch's thread, before stg__batch_free. */
size_t stg__batch_class_stats(const stg_batch *b, stg_class_stats *out, size_t max);
/* The same as rows to record, in ms (the database's stg_run_class; the
 * queue's stg_queue_class_add has the same members): *v malloc'd (free
 * it; NULL when none), *n rows, tenants the engine's (valid until its next
 * call). STG_OK or STG_ENOMEM. */
int stg__batch_class_rows(const stg_batch *b, stg_run_class **v, size_t *n);

/* Close the run row with exit_code (the caller's verdict; -1: none), free
 * the engine and everything else; the store stays open. Accepts NULL. */
void stg__batch_free(stg_batch *b, int exit_code);

/* "drained", "stopped", "limiter", "store", "body", "needs_input". */
const char *stg__batch_cause_name(stg_batch_stop_cause c);

/* ---- shared by the files of this part ---------------------------------- */

/* The state a finished request leaves its job in: sent says whether an
 * attempt may have left (recorded for jobs that are not replay-safe). */
stg_job_state stg__batch_state_for(const stg_result *res, bool replay_safe, bool sent);
/* One line about a result that is not a success (redacted already). */
void stg__batch_describe(const stg_result *res, char *buf, size_t size);
/* File name of a job's body under out_dir. */
void stg__batch_body_name(const stg_job *j, char *buf, size_t size);
/* Open out_dir for the bodies: O_DIRECTORY|O_NOFOLLOW (a symbolic link at
 * dir is refused: ELOOP or ENOTDIR). The descriptor, or -1 with errno. */
int stg__batch_out_open(const char *dir);
/* Write body to name under the directory dirfd atomically (temp file
 * .name.tmp created O_EXCL|O_NOFOLLOW, 0600, then renamed; see body.c). 0
 * or -1 with errno; *in_way is set when something not ours (a link, a
 * directory, another user's file) sits at the temp file's name. */
int stg__batch_write_body(int dirfd, const char *name, const void *body, size_t len,
                          bool *in_way);
/* Move one job from -> to in c (asserting from had one). */
void stg__batch_counts_move(stg_batch_counts *c, stg_job_state from, stg_job_state to);
/* Set c from the store's counts. */
void stg__batch_counts_set(stg_batch_counts *c, const int64_t n[STG_JOB_NSTATES]);

#endif
