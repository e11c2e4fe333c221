/*
 * The batch runner: jobs from the store, through the engine, back into the
 * store (see batch.h for the API and the transitions).
 *
 * Loop (stg_batch_step): claim as many pending jobs as there are free
 * slots (one transaction marks them inflight), submit them, run one engine
 * pass. Each completion is written in its own transaction from the
 * engine's done callback, before the slot is reused.
 *
 * Invariants (asserted where they can be):
 *  - A job is handed to the engine only after its inflight mark is
 *    committed; its slot is freed only after its outcome is committed (or
 *    the store failed, which stops the run). So at any kill -9 the database
 *    knows every job that may have been sent, and at most `concurrency`
 *    jobs are inflight: a kill re-runs at most that many (at-least-once).
 *  - A job that is not replay-safe has sent = 1 committed (with its first
 *    attempt counted) from the engine's ATTEMPT_START event, which the
 *    engine emits before the transfer can leave: after a kill it goes to
 *    review, never to pending. (If that one commit fails the run stops at
 *    once; the store refused a write, so nothing more can be promised.)
 *  - The run's counters (calls, retries, 429s, 503s, finished) are added to
 *    its row in the transaction of each outcome and sent-mark: a kill -9
 *    loses only the attempts of the jobs then in flight.
 *  - The in-memory counts move only after the store committed the same
 *    move, so they equal the store's; stg_batch_end checks it.
 *  - No signal handling, no output: a stop is a call (stg_batch_stop), and
 *    progress is a snapshot (stg_batch_progress_get).
 *  - Secrets: headers of the config and the secret URLs/headers of
 *    needs_input jobs (taken from cfg->set) exist only in memory and in the
 *    request; what is stored is the outcome. The engine's events and error
 *    texts are already redacted.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include "batch/batch.h"
#include "util/assert.h"

#define MAX_REQ_HEADERS 128

typedef struct slot {
    bool used;
    bool sent;             /* an attempt started (recorded for non-replay-safe jobs) */
    int committed;         /* attempts already counted in the store (the sent-mark) */
    int n429, n503;        /* attempts of this run answered so */
    uint64_t req_id;
    stg_job job;
    stg_batch *b;
} slot;

struct stg_batch {
    stg_store *store;
    const stg_job_set *set;
    const char *const *headers;
    size_t n_headers;
    const char *out_dir;
    stg_event_fn user_event;
    void *user_event_data;
    stg_engine *engine;
    slot *slots;
    int nslots, active;
    int64_t run_id;
    stg_batch_counts counts;
    int64_t finished;
    bool drained;        /* no pending job left to claim */
    bool stopping;       /* stop or a fatal cause: no new claims */
    bool cancelled;      /* cancel_all done */
    bool store_failed;   /* no more writes: the next open recovers */
    bool ended;
    stg_batch_stop_cause cause; /* first cause of a stop; RUNNING: none yet */
    char msg[800];
    int64_t start_us, next_save_us;
};

static int64_t mono_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

const char *stg_batch_cause_name(stg_batch_stop_cause c)
{
    static const char *const names[] = {"running", "drained", "stopped",
                                        "limiter", "store",   "body",
                                        "needs_input"};
    return (unsigned)c < sizeof names / sizeof names[0] ? names[c] : "unknown";
}

/* Stop for cause (the first one wins). */
static void stop_for(stg_batch *b, stg_batch_stop_cause cause, const char *fmt, const char *arg)
{
    b->stopping = true;
    if (cause == STG_BATCH_STORE)
        b->store_failed = true;
    if (b->cause != STG_BATCH_RUNNING && b->cause != STG_BATCH_STOPPED)
        return;
    b->cause = cause;
    snprintf(b->msg, sizeof b->msg, fmt, arg);
}

static void store_failed(stg_batch *b)
{
    stop_for(b, STG_BATCH_STORE, "%s", stg_store_errmsg(b->store));
}

static void release(stg_batch *b, slot *sl)
{
    STG_ASSERT(sl->used && b->active > 0);
    stg_job_clear(&sl->job);
    sl->used = false;
    sl->sent = false;
    sl->committed = sl->n429 = sl->n503 = 0;
    b->active--;
}

/* Commit o for the job in sl; the counts follow only a committed move. */
static void commit(stg_batch *b, slot *sl, stg_job_outcome *o)
{
    if (b->store_failed)
        return; /* stays inflight: the next open recovers it */
    o->run_id = b->run_id;
    if (stg_store_finish(b->store, sl->job.id, o, stg__store_now_ms()) != STG_OK) {
        store_failed(b);
        return;
    }
    stg__batch_counts_move(&b->counts, STG_JOB_INFLIGHT, o->state);
    if (o->state != STG_JOB_PENDING)
        b->finished++;
}

/* ---- finish: the engine's done callback ---------------------------------------- */

/* out_dir: the body to a file; on failure the run stops and the job is
 * put back (review when it may have had an effect and is not replay-safe). */
static bool body_to_file(stg_batch *b, slot *sl, const stg_result *res, stg_job_outcome *o,
                         char *fname, size_t fsize)
{
    stg__batch_body_name(&sl->job, fname, fsize);
    if (stg__batch_write_body(b->out_dir, fname, res->body ? res->body : "", res->body_len) == 0) {
        o->response_file = fname;
        return true;
    }
    char what[512];
    snprintf(what, sizeof what, "%s/%s: %s", b->out_dir, fname, strerror(errno));
    stop_for(b, STG_BATCH_BODY, "cannot write a response body: %s (the job runs again next time)",
             what);
    o->state = sl->job.replay_safe ? STG_JOB_PENDING : STG_JOB_REVIEW;
    o->error = "the response body could not be written under --out";
    o->reason = "body_not_written";
    return false;
}

static void on_done(stg_engine *e, uint64_t id, const stg_result *res, void *data)
{
    (void)e;
    (void)id;
    slot *sl = data;
    stg_batch *b = sl->b;
    STG_ASSERT(sl->used && sl->job.id > 0);
    stg_job_state st = stg__batch_state_for(res, sl->job.replay_safe, sl->sent);
    if (res->reason == STG_REASON_LIMITER_UNAVAILABLE)
        stop_for(b, STG_BATCH_LIMITER,
                 "the shared limiter is unavailable (%s); jobs not sent stay pending: run "
                 "again when it is back, or allow --limiter-fallback local:SHARE",
                 res->error_text[0] ? res->error_text : "no answer");
    char error[512] = "", fname[160] = "";
    if (st != STG_JOB_DONE)
        stg__batch_describe(res, error, sizeof error);
    int attempts = res->attempts - sl->committed;
    stg_job_outcome out = {
        .state = st,
        .status = res->status,
        .attempts = attempts > 0 ? attempts : 0,
        .reason = st == STG_JOB_DONE ? NULL : stg_reason_name(res->reason),
        .error = st == STG_JOB_DONE ? NULL : error,
        .retries = res->attempts > 1 ? res->attempts - 1 : 0,
        .status_429 = sl->n429,
        .status_503 = sl->n503,
    };
    bool keep_body = res->status > 0 && st != STG_JOB_PENDING;
    if (keep_body && b->out_dir && !b->store_failed) {
        body_to_file(b, sl, res, &out, fname, sizeof fname);
    } else if (keep_body) {
        out.body = res->body ? res->body : "";
        out.body_len = res->body_len;
    }
    commit(b, sl, &out);
    release(b, sl);
}

/* ---- events: the sent-mark ------------------------------------------------------ */

static slot *slot_of(stg_batch *b, uint64_t req_id)
{
    for (int i = 0; i < b->nslots; i++)
        if (b->slots[i].used && b->slots[i].req_id == req_id)
            return &b->slots[i];
    return NULL;
}

static void on_event(const stg_event *ev, void *data)
{
    stg_batch *b = data;
    slot *sl = NULL;
    if (ev->type == STG_EVENT_ATTEMPT_START || ev->type == STG_EVENT_ATTEMPT_END)
        sl = slot_of(b, ev->request_id);
    if (sl && ev->type == STG_EVENT_ATTEMPT_START) {
        if (!sl->sent && !sl->job.replay_safe && !b->store_failed) {
            /* Committed before the engine goes on to send it. */
            if (stg_store_mark_sent(b->store, sl->job.id, b->run_id) == STG_OK)
                sl->committed = 1;
            else
                store_failed(b);
        }
        sl->sent = true;
    } else if (sl && ev->type == STG_EVENT_ATTEMPT_END) {
        sl->n429 += ev->status == 429;
        sl->n503 += ev->status == 503;
    }
    if (b->user_event)
        b->user_event(ev, b->user_event_data);
}

/* ---- submit ---------------------------------------------------------------------- */

static bool header_named(const char *h, const char *name_of)
{
    const char *c1 = strchr(h, ':'), *c2 = strchr(name_of, ':');
    size_t n1 = c1 ? (size_t)(c1 - h) : strlen(h), n2 = c2 ? (size_t)(c2 - name_of) : strlen(name_of);
    return n1 == n2 && !strncasecmp(h, name_of, n1);
}

/* The input's spec of a needs_input job, or NULL. */
static const stg_job_spec *spec_of(const stg_batch *b, const stg_job *j)
{
    if (b->set && j->id >= 1 && (size_t)j->id <= b->set->n &&
        !strcmp(b->set->jobs[j->id - 1].key, j->key))
        return &b->set->jobs[j->id - 1];
    return NULL;
}

/* Hand the claimed job in sl to the engine. A job that cannot be sent is
 * committed at once (pending when it may go later, failed when never). */
static void submit(stg_batch *b, slot *sl)
{
    const stg_job *j = &sl->job;
    sl->used = true;
    sl->sent = false;
    sl->committed = sl->n429 = sl->n503 = 0;
    sl->b = b;
    b->active++;
    const stg_job_spec *spec = NULL;
    if (j->needs_input && !(spec = spec_of(b, j))) {
        /* Checked at start; a guard against a database edited by hand. */
        stop_for(b, STG_BATCH_NEEDS_INPUT,
                 "job %s needs its input file (secrets are not stored): give the same input "
                 "again", j->key);
        stg_job_outcome back = {.state = STG_JOB_PENDING};
        commit(b, sl, &back);
        release(b, sl);
        return;
    }
    const char *headers[MAX_REQ_HEADERS + 1];
    size_t nh = 0;
    const char *const *own = spec ? (const char *const *)spec->headers
                                  : (const char *const *)j->headers;
    size_t n_own = spec ? spec->n_headers : SIZE_MAX;
    for (size_t i = 0; own && i < n_own && own[i] && nh < MAX_REQ_HEADERS; i++) {
        bool overridden = false;
        for (size_t k = 0; k < b->n_headers && !overridden; k++)
            overridden = header_named(own[i], b->headers[k]);
        if (!overridden)
            headers[nh++] = own[i];
    }
    for (size_t k = 0; k < b->n_headers && nh < MAX_REQ_HEADERS; k++)
        headers[nh++] = b->headers[k];
    headers[nh] = NULL;
    stg_request req = {
        .url = spec ? spec->url : j->url,
        .method = j->method,
        .headers = headers,
        .body = spec ? spec->body : j->body,
        .body_len = spec ? spec->body_len : j->body_len,
        .idempotency_key = j->idempotency_key,
    };
    int rc = stg_engine_submit(b->engine, &req, on_done, sl, &sl->req_id);
    if (rc == STG_OK)
        return;
    /* Never sent: a final answer about this request, not about the server. */
    char msg[160];
    snprintf(msg, sizeof msg, "the request was refused before sending: %s", stg_strerror(rc));
    stg_job_outcome out = {.state = rc == STG_ENOMEM ? STG_JOB_PENDING : STG_JOB_FAILED,
                           .reason = "invalid_request",
                           .error = msg};
    commit(b, sl, &out);
    if (rc == STG_ENOMEM)
        stop_for(b, STG_BATCH_STORE, "%s", "out of memory");
    release(b, sl);
}

/* Claim pending jobs for the free slots and submit them. */
static void refill(stg_batch *b)
{
    if (b->stopping || b->drained)
        return;
    int free_n = b->nslots - b->active;
    if (free_n <= 0)
        return;
    stg_job *jobs = calloc((size_t)free_n, sizeof *jobs);
    if (!jobs) {
        stop_for(b, STG_BATCH_STORE, "%s", "out of memory");
        return;
    }
    int got = 0;
    if (stg_store_claim(b->store, free_n, b->run_id, stg__store_now_ms(), jobs, &got) != STG_OK) {
        store_failed(b);
        free(jobs);
        return;
    }
    STG_ASSERT(got <= free_n && got <= b->counts.n[STG_JOB_PENDING]);
    if (got < free_n)
        b->drained = true; /* nothing becomes pending during a run, except at a stop */
    for (int i = 0; i < got; i++)
        stg__batch_counts_move(&b->counts, STG_JOB_PENDING, STG_JOB_INFLIGHT);
    int k = 0;
    for (int i = 0; i < b->nslots && k < got; i++) {
        if (b->slots[i].used)
            continue;
        b->slots[i].job = jobs[k++];
        submit(b, &b->slots[i]);
    }
    STG_ASSERT(k == got && b->active <= b->nslots);
    free(jobs);
}

/* ---- lifecycle ------------------------------------------------------------------- */

static int fail_new(stg_batch *b, int err, char *buf, size_t len, const char *msg)
{
    if (buf && len)
        snprintf(buf, len, "%s", msg);
    stg_batch_free(b, -1);
    return err;
}

/* Recovery and requeues, then the counts. */
static int start_store(stg_batch *b, const stg_batch_config *cfg, stg_batch_start *st)
{
    int64_t now = stg__store_now_ms();
    int rc = stg_store_recover(b->store, now, &st->recovered_pending, &st->recovered_review);
    if (rc == STG_OK && cfg->retry_deferred)
        rc = stg_store_requeue(b->store, STG_JOB_DEFERRED, now, &st->requeued_deferred);
    if (rc == STG_OK && cfg->retry_review)
        rc = stg_store_requeue(b->store, STG_JOB_REVIEW, now, &st->requeued_review);
    int64_t n[STG_JOB_NSTATES];
    if (rc == STG_OK)
        rc = stg_store_counts(b->store, n);
    if (rc != STG_OK)
        return rc;
    stg__batch_counts_set(&b->counts, n);
    STG_ASSERT(b->counts.n[STG_JOB_INFLIGHT] == 0);
    st->total = b->counts.total;
    return STG_OK;
}

int stg_batch_new(const stg_batch_config *cfg, stg_batch **out, stg_batch_start *start,
                  char *err, size_t errlen)
{
    stg_batch_start scratch;
    stg_batch_start *st = start ? start : &scratch;
    memset(st, 0, sizeof *st);
    if (out)
        *out = NULL;
    if (err && errlen)
        err[0] = '\0';
    if (!cfg || !cfg->store || !out || (cfg->n_headers && !cfg->headers) ||
        cfg->engine.concurrency < 0) {
        if (err && errlen)
            snprintf(err, errlen, "bad batch configuration");
        return STG_EINVAL;
    }
    stg_batch *b = calloc(1, sizeof *b);
    if (!b)
        return fail_new(NULL, STG_ENOMEM, err, errlen, "out of memory");
    b->store = cfg->store;
    b->set = cfg->set;
    b->headers = cfg->headers;
    b->n_headers = cfg->n_headers;
    b->out_dir = cfg->out_dir;
    b->nslots = cfg->engine.concurrency ? cfg->engine.concurrency : 30;
    b->start_us = mono_us();
    b->next_save_us = b->start_us + STG_SEC(1);
    if (!(b->slots = calloc((size_t)b->nslots, sizeof *b->slots)))
        return fail_new(b, STG_ENOMEM, err, errlen, "out of memory");
    for (int i = 0; i < b->nslots; i++)
        b->slots[i].b = b;

    /* Jobs about to run that need the input. */
    unsigned mask = 1u << STG_JOB_PENDING | 1u << STG_JOB_INFLIGHT;
    if (cfg->retry_deferred)
        mask |= 1u << STG_JOB_DEFERRED;
    if (cfg->retry_review)
        mask |= 1u << STG_JOB_REVIEW;
    if (!cfg->set) {
        if (stg_store_count_needs_input(b->store, mask, &st->needs_input) != STG_OK)
            return fail_new(b, STG_EDB, err, errlen, stg_store_errmsg(b->store));
        if (st->needs_input) {
            char msg[160];
            snprintf(msg, sizeof msg, "%lld jobs carry secrets that are not kept in the "
                                      "database: the input is needed",
                     (long long)st->needs_input);
            return fail_new(b, STG_ESTATE, err, errlen, msg);
        }
    }
    if (start_store(b, cfg, st) != STG_OK)
        return fail_new(b, STG_EDB, err, errlen, stg_store_errmsg(b->store));

    stg_engine_config ec = cfg->engine;
    ec.concurrency = b->nslots;
    b->user_event = ec.on_event;
    b->user_event_data = ec.event_data;
    ec.on_event = on_event;
    ec.event_data = b;
    int eerr = 0;
    if (!(b->engine = stg_engine_new(&ec, &eerr))) {
        char msg[160];
        snprintf(msg, sizeof msg, "cannot start the HTTP engine: %s", stg_strerror(eerr));
        return fail_new(b, eerr == STG_EINVAL ? STG_EINVAL : STG_ENOMEM, err, errlen, msg);
    }
    if (stg_store_run_begin(b->store, stg__store_now_ms(), &b->run_id) != STG_OK)
        return fail_new(b, STG_EDB, err, errlen, stg_store_errmsg(b->store));
    *out = b;
    return STG_OK;
}

void stg_batch_stop(stg_batch *b)
{
    if (!b || b->stopping)
        return;
    b->stopping = true;
    if (b->cause == STG_BATCH_RUNNING)
        b->cause = STG_BATCH_STOPPED;
}

bool stg_batch_step(stg_batch *b, int64_t timeout_us)
{
    if (b->ended)
        return false;
    if (b->stopping && !b->cancelled && b->active > 0) {
        b->cancelled = true;
        stg_engine_cancel_all(b->engine); /* done callbacks put the jobs back */
    }
    refill(b);
    if (b->stopping && !b->cancelled && b->active > 0) {
        b->cancelled = true; /* a stop raised while submitting */
        stg_engine_cancel_all(b->engine);
    }
    if (b->active == 0 && (b->drained || b->stopping)) {
        b->ended = true;
        if (b->cause == STG_BATCH_RUNNING)
            b->cause = STG_BATCH_DRAINED;
        return false;
    }
    stg_engine_run(b->engine, timeout_us);
    int64_t now = mono_us();
    if (now >= b->next_save_us && !b->store_failed) {
        /* The wall time, so a killed run still has one; the counters are
         * committed with the outcomes. A failure here is not fatal: the
         * next outcome's commit says what is wrong. */
        stg_run_stats rs = {.wall_ms = (now - b->start_us) / 1000, .exit_code = -1};
        (void)stg_store_run_update(b->store, b->run_id, &rs);
        b->next_save_us = now + STG_SEC(1);
    }
    return true;
}

void stg_batch_progress_get(const stg_batch *b, stg_batch_progress *p)
{
    memset(p, 0, sizeof *p);
    p->counts = b->counts;
    p->finished = b->finished;
    p->in_flight = b->active;
    p->cause = b->ended ? b->cause : STG_BATCH_RUNNING;
    stg_engine_stats es;
    stg_engine_stats_get(b->engine, &es);
    p->attempts = es.attempts;
    p->retries = es.retries;
    p->status_429 = es.status_429;
    p->status_503 = es.status_503;
}

int stg_batch_end(stg_batch *b, stg_batch_summary *s)
{
    memset(s, 0, sizeof *s);
    if (!b->ended) {
        /* Called early: stop, and let the engine put everything back. */
        stg_batch_stop(b);
        while (stg_batch_step(b, STG_MS(100)))
            ;
    }
    STG_ASSERT(b->active == 0);
    s->cause = b->cause;
    s->finished = b->finished;
    snprintf(s->message, sizeof s->message, "%s", b->msg);
    if (b->store_failed) {
        s->counts = b->counts;
        return STG_EDB;
    }
    /* Every request ended and its outcome is committed: nothing of this run
     * is inflight. A job still so (a bug, or an edit) is put back. */
    int back = 0, review = 0;
    int rc = STG_OK;
    if (b->counts.n[STG_JOB_INFLIGHT] > 0)
        rc = stg_store_recover(b->store, stg__store_now_ms(), &back, &review);
    int64_t n[STG_JOB_NSTATES];
    if (rc == STG_OK)
        rc = stg_store_counts(b->store, n);
    if (rc != STG_OK) {
        s->cause = STG_BATCH_STORE;
        snprintf(s->message, sizeof s->message, "%s", stg_store_errmsg(b->store));
        s->counts = b->counts;
        return STG_EDB;
    }
    s->requeued = back + review;
    stg__batch_counts_set(&s->counts, n);
    STG_ASSERT(s->counts.total == b->counts.total);
    STG_ASSERT(s->counts.n[STG_JOB_INFLIGHT] == 0);
    STG_ASSERT(back + review > 0 ||
               !memcmp(s->counts.n, b->counts.n, sizeof s->counts.n));
    b->counts = s->counts;
    return STG_OK;
}

void stg_batch_free(stg_batch *b, int exit_code)
{
    if (!b)
        return;
    /* Cancels what is left: the done callbacks put those jobs back (or,
     * with a failed store, leave them inflight for the next open). */
    stg_engine_free(b->engine);
    b->engine = NULL;
    if (b->run_id > 0) {
        stg_run_stats rs = {.wall_ms = (mono_us() - b->start_us) / 1000, .exit_code = exit_code};
        (void)stg_store_run_update(b->store, b->run_id, &rs); /* the counters are in already */
    }
    for (int i = 0; b->slots && i < b->nslots; i++)
        stg_job_clear(&b->slots[i].job);
    free(b->slots);
    free(b);
}
