/*
 * Private to src/batch: the runner's handle and its slots, shared by
 * runner.c (lifecycle and the loop), submit.c (claim and submit),
 * finish.c (outcomes, the sent-mark, stops) and commit.c (when the store's
 * group is committed: the only file that touches claim_open, unsafe_open
 * and commit_us). Nothing outside src/batch includes this (but its unit
 * tests).
 *
 * Invariants: a slot is used from the submit of its claimed job until the
 * done callback of its request has written (or skipped, with a failed
 * store) the job's outcome; active counts the used slots; sent, committed,
 * n429 and n503 describe the current request of a used slot only. Jobs
 * claimed and not yet submitted wait in ahead[] (inflight on disk, never
 * sent), owned by the handle until submitted or given back.
 */
#ifndef STAGGER_BATCH_INTERNAL_H
#define STAGGER_BATCH_INTERNAL_H

#include "batch/batch.h"

/* A job's 2xx body as the engine streams it (body.c). With out_dir: into
 * a temp file beside its final name, created on the first byte (0600),
 * removed on a RESTART (a retry) and closed at END; finish renames it into
 * place or removes it. For the database (dir NULL): in memory up to 64 KiB,
 * beyond that in an anonymous temp file the store copies from. */
typedef struct stg__batch_body {
    const char *dir;  /* out_dir; NULL: the body goes to the database */
    int dirfd;        /* out_dir opened (stg__batch_out_open): every name is
                         relative to it; the batch's, not closed here */
    char name[160];   /* the job's file name under dir (its temp file is
                         dir/.name.tmp, built when needed: not 4 KiB kept
                         per slot) */
    int fd;           /* the open temp file; -1 */
    bool exists;      /* the named temp file exists (open, or closed at END) */
    bool tmp_in_way;  /* something not ours is at .name.tmp (body.c) */
    int err;          /* errno of the first failure; 0: none */
    size_t len;       /* bytes in the file */
    char *mem;        /* a small database body; NULL */
    size_t mem_len;
    size_t mem_cap;   /* bytes allocated at mem: grows by doubling */
} stg__batch_body;

/* dir NULL: a database body; else dirfd is dir opened. */
void stg__batch_body_init(stg__batch_body *f, const char *dir, int dirfd, const stg_job *j);
/* A database body into o (body, or body_in_fd); false when f holds none
 * (then the body, if any, is the engine's, in the result). */
bool stg__batch_body_to_outcome(stg__batch_body *f, stg_job_outcome *o);
/* The engine's body sink (stg_body_fn) over a stg__batch_body. */
int stg__batch_body_sink(stg_body_op op, const void *buf, size_t len, void *data);
/* Rename the temp file into place. 0, or -1 with errno (the temp file is
 * then removed). */
int stg__batch_body_commit(stg__batch_body *f);
/* Remove the temp file and memory, if any. */
void stg__batch_body_discard(stg__batch_body *f);

typedef struct stg_batch_slot {
    bool used;
    bool sent;             /* an attempt started (recorded for non-replay-safe jobs) */
    bool lost;             /* the source said the job is not ours to send any more:
                              its started attempt is cancelled after the pass,
                              before it leaves, and it ends as PENDING */
    int committed;         /* attempts already counted in the store (the sent-mark) */
    int n429, n503;        /* attempts of this run answered so */
    uint64_t req_id;
    stg_job job;
    stg_batch *b;
    stg__batch_body body;  /* with out_dir: the body being streamed */
} stg_batch_slot;

struct stg_batch {
    stg_store *store;
    const stg_batch_source *source; /* NULL: the store */
    const stg_job_set *set;
    const stg_input_secrets *secrets;
    stg_input_cursor *cursor;
    const char *const *headers;
    size_t n_headers;
    int priority;        /* the default class and tenant (stg_batch_config) */
    const char *tenant;
    double weight;
    const char *out_dir;
    int out_fd;          /* out_dir opened (stg__batch_out_open); -1: none */
    stg_event_fn user_event;
    void *user_event_data;
    stg_engine *engine;
    stg_batch_slot *slots;
    int nslots, active;
    int64_t run_id;
    stg_batch_counts counts;
    int64_t finished;
    /* Claimed ahead (inflight on disk, sent = 0), not yet submitted, in id
     * order: ahead[0..n_ahead). At most nslots + ahead_max jobs are ever
     * claimed and not finished (active + n_ahead). */
    stg_job *ahead;
    int n_ahead, ahead_max;
    int64_t claims;      /* claim statements of this run */
    /* What the caller is told: the counts and finished as of the last
     * commit (the store: written moves reach these only once committed). */
    stg_batch_counts shown;
    int64_t shown_finished;
    /* The commit rule's state (commit.c, and only there). */
    bool claim_open;     /* a claim written and not yet committed */
    bool unsafe_open;    /* an outcome of a job that is not replay-safe, not
                            yet committed (committed in its step) */
    int64_t commit_us;   /* the last commit (mono) */
    bool exhausted;      /* a claim found fewer than asked: none pending */
    bool drained;        /* stg__batch_drain: no more claims or submits */
    bool stopping;       /* stop or a fatal cause: no new claims */
    bool cancelled;      /* cancel_all done */
    bool store_failed;   /* no more writes: the next open recovers */
    bool ended;
    stg_batch_stop_cause cause; /* first cause of a stop; RUNNING: none yet */
    char msg[800];
    int64_t start_us, next_save_us;
    struct stg__batch_series *series; /* series.c; NULL until an event */
};

/* Stop for cause (the first cause wins; STORE also stops all writes). */
void stg__batch_stop_for(stg_batch *b, stg_batch_stop_cause cause, const char *fmt,
                         const char *arg);
/* Stop because the store failed (its message). */
void stg__batch_store_failed(stg_batch *b);
/* Write o for the slot's job (skipped once the store failed; committed
 * as commit.c says); the counts follow only a written move. */
void stg__batch_write_outcome(stg_batch *b, stg_batch_slot *sl, stg_job_outcome *o);
/* Free the slot. */
void stg__batch_release(stg_batch *b, stg_batch_slot *sl);
/* The engine's callbacks (finish.c). */
void stg__batch_on_done(stg_engine *e, uint64_t id, const stg_result *res, void *data);
void stg__batch_on_event(const stg_event *ev, void *data);
/* The run's per-second series (series.c): count an event; write the
 * seconds that are over into the open group (from stg__batch_flush only);
 * free it. */
void stg__batch_series_see(stg_batch *b, const stg_event *ev);
void stg__batch_series_write(stg_batch *b);
void stg__batch_series_free(stg_batch *b);
/* The job source seam (source.c): the store, or b->source. The counts
 * follow a committed move only with the store (a source's counts are the
 * whole queue's, read back: source_counts). */
int stg__batch_src_claim(stg_batch *b, int max, stg_job *out, int *n, bool *more);
int stg__batch_src_finish(stg_batch *b, const stg_job *j, stg_job_outcome *o);
int stg__batch_src_mark_sent(stg_batch *b, const stg_job *j);
int stg__batch_src_may_send(stg_batch *b, const stg_job *j);
const char *stg__batch_src_errmsg(stg_batch *b);
void stg__batch_src_counts(stg_batch *b);
/* Why the header line h may not be sent for a batch job (a line the engine
 * would refuse, or a field batch input may not set: util/http_field.h), or
 * NULL (submit.c). */
const char *stg__batch_header_refused(const char *h);
/* Claim pending jobs for the free slots and submit them (submit.c). */
void stg__batch_refill(stg_batch *b);
/* Give the claimed-ahead jobs back to the store (pending, as if never
 * claimed), at a stop or the end; skipped once the store failed (the next
 * open recovers them: inflight, unsent, to pending). */
void stg__batch_unclaim_ahead(stg_batch *b);
/* ---- the commit rule (commit.c) ---------------------------------------- */

/* Commit the store's group (if open), then what the caller is told
 * follows. A failure stops the run (STORE). */
void stg__batch_flush(stg_batch *b);
/* The group was committed (by a flush or a sent-mark): the shown counts
 * catch up with the written ones. */
void stg__batch_committed(stg_batch *b);
/* A claim of got jobs was written (claim-open). */
void stg__batch_claimed(stg_batch *b, int got);
/* The outcome of sl's job was written (unsafe-open when not replay-safe). */
void stg__batch_outcome_written(stg_batch *b, const stg_batch_slot *sl);
/* What must be durable before sl's request is sent. */
typedef enum stg__batch_send_rule {
    STG__BATCH_SEND_AS_IS = 0, /* nothing open, or the store failed */
    STG__BATCH_SEND_FLUSH = 1, /* a claim is open: commit the group */
    STG__BATCH_SEND_MARK = 2   /* not replay-safe, first send: write and
                                  commit its sent-mark (the group with it) */
} stg__batch_send_rule;
stg__batch_send_rule stg__batch_before_send_rule(const stg_batch *b, const stg_batch_slot *sl);
/* Apply the rule at sl's ATTEMPT_START: STG_OK, or the sent-mark's error
 * (the caller stops the run). */
int stg__batch_before_send(stg_batch *b, stg_batch_slot *sl);
/* After a step's engine pass at now_us: commit? (an unsafe outcome open,
 * a stop, a drain, or FLUSH_EVERY_US since the last commit) */
bool stg__batch_after_step_rule(const stg_batch *b, int64_t now_us);
/* Commit when the rule says so. */
void stg__batch_after_step(stg_batch *b);

#endif
