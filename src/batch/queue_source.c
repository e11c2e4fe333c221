/*
 * The Redis work queue as the runner's job source (see queue_source.h for
 * the contract): claims become stg_jobs, outcomes become one finish script
 * each, an outage keeps outcomes until Redis is back, and the limiter
 * wrapper holds hosts another worker was told to wait for.
 *
 * Invariants:
 *  - Every job handed to the runner is tracked (its stream entry, its
 *    delivery, the instant it was claimed) until its outcome is written or
 *    kept; a kept outcome owns copies of everything it needs.
 *  - Nothing is claimed while outcomes are kept (Redis away): a worker
 *    that cannot report does not take more work.
 */
#ifdef STG_BATCH_HAVE_QUEUE

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "batch/queue_source.h"
#include "util/assert.h"
#include "util/clock.h"

typedef struct tracked {
    int64_t id;
    char entry[48];
    int deliveries;
    int64_t claimed_us;   /* handed to the runner (latency: claim to end) */
    int64_t confirmed_us; /* send time of the last call that said it is ours */
    bool lost;            /* a renewal said it is not ours any more */
} tracked;

typedef struct kept {
    stg_queue_job job;     /* id and entry only */
    stg_queue_outcome o;   /* its strings and body point into bufs below */
    char *reason, *error, *file, *body;
} kept;

typedef struct hold {
    char key[256];
    int64_t until_us, checked_us;
} hold;

struct stg_batch_queue {
    stg_queue *q;
    const char *out_dir;
    bool follow;
    int64_t outage_us, poll_us, hold_refresh_us;
    stg_batch_source src;
    stg_shared_limiter lim;
    const stg_shared_limiter *inner;
    stg_shared_quota quo;             /* the shared quotas, through the */
    const stg_shared_quota *quo_inner; /* same outage rule as the limit */
    tracked *tr;
    size_t n_tr, cap_tr;
    stg_queue_job *pre;      /* claimed ahead, not yet handed out (FIFO) */
    int64_t *pre_conf;       /* ... and when each was last confirmed ours */
    size_t n_pre, cap_pre;
    int64_t renew_us, fresh_us; /* claim_idle / 4, claim_idle / 2 */
    int64_t last_renew_us;   /* send time of the last renewal that answered */
    size_t n_lost;           /* tracked jobs marked lost (checks are free at 0) */
    int prefetch;            /* how many to claim ahead; -1: as many as asked */
    kept *kp;
    size_t n_kp, cap_kp;
    hold *holds;
    size_t n_holds;
    stg_queue_counts counts;
    int64_t down_since_us;   /* the queue's Redis; 0: up */
    int64_t lim_down_since_us; /* the limiter's; 0: up */
    int64_t next_claim_us;
    stg_batch_queue_stats stats;
    char msg[640];
};

static void went_down(stg_batch_queue *s, int64_t now)
{
    if (!s->down_since_us)
        s->down_since_us = now;
}

/* ---- tracking ------------------------------------------------------------- */

static bool track(stg_batch_queue *s, const stg_queue_job *j, int64_t now, int64_t confirmed)
{
    if (s->n_tr == s->cap_tr) {
        size_t cap = s->cap_tr ? 2 * s->cap_tr : 64;
        tracked *t = realloc(s->tr, cap * sizeof *t);
        if (!t)
            return false;
        s->tr = t;
        s->cap_tr = cap;
    }
    tracked *t = &s->tr[s->n_tr++];
    t->id = j->id;
    memcpy(t->entry, j->entry, sizeof t->entry);
    t->deliveries = j->deliveries;
    t->claimed_us = now;
    t->confirmed_us = confirmed;
    t->lost = false;
    return true;
}

static bool untrack(stg_batch_queue *s, int64_t id, tracked *out)
{
    for (size_t i = 0; i < s->n_tr; i++)
        if (s->tr[i].id == id) {
            *out = s->tr[i];
            s->n_lost -= s->tr[i].lost;
            s->tr[i] = s->tr[--s->n_tr];
            return true;
        }
    return false;
}

/* ---- the source ---------------------------------------------------------- */

static char *dup_or_null(const char *p)
{
    return p ? strdup(p) : NULL;
}

/* stg_queue_job -> stg_job: the fields move (q is cleared). */
static void to_job(stg_queue_job *q, stg_job *j)
{
    memset(j, 0, sizeof *j);
    j->id = q->id;
    j->key = q->key;
    j->line = (long)q->id;
    j->method = q->method;
    j->url = q->url;
    j->url_redacted = dup_or_null(q->url); /* no secrets in a queue (checked at load) */
    j->headers = q->headers;
    j->body = q->body;
    j->body_len = q->body_len;
    j->idempotency_key = q->idempotency_key;
    j->replay_safe = q->replay_safe;
    q->key = q->method = q->url = q->body = q->idempotency_key = NULL;
    q->headers = NULL;
}

static int64_t ended_of(const stg_queue_counts *c)
{
    return c->n[STG_QUEUE_DONE] + c->n[STG_QUEUE_FAILED] + c->n[STG_QUEUE_DEFERRED] +
           c->n[STG_QUEUE_REVIEW];
}

/* Hand buffered jobs to the runner, oldest first. */
static bool hand_out(stg_batch_queue *s, int max, stg_job *out, int *n, int64_t now)
{
    size_t k = 0;
    while (*n < max && k < s->n_pre) {
        if (!track(s, &s->pre[k], now, s->pre_conf[k]))
            return false;
        to_job(&s->pre[k], &out[*n]);
        stg_queue_job_clear(&s->pre[k]);
        (*n)++;
        k++;
    }
    if (k) {
        memmove(s->pre, s->pre + k, (s->n_pre - k) * sizeof *s->pre);
        memmove(s->pre_conf, s->pre_conf + k, (s->n_pre - k) * sizeof *s->pre_conf);
        s->n_pre -= k;
    }
    s->stats.claimed += (int64_t)k;
    return true;
}

static int src_claim(void *ctx, int max, stg_job *out, int *n, bool *more)
{
    stg_batch_queue *s = ctx;
    *n = 0;
    *more = true;
    int64_t now = stg__clock_mono_us();
    if (s->n_kp)
        return STG_OK; /* reporting first */
    if (!s->down_since_us && !hand_out(s, max, out, n, now))
        return STG_ENOMEM;
    if (*n == max || now < s->next_claim_us)
        return STG_OK; /* all from the buffer; or an empty poll just now */
    if (s->prefetch < 0)
        s->prefetch = max; /* claim ahead as many as the slots */
    int room = s->prefetch - (int)s->n_pre;
    int want = (max - *n) + (room > 0 ? room : 0);
    stg_queue_job *qj = calloc((size_t)want, sizeof *qj);
    if (!qj)
        return STG_ENOMEM;
    int got = 0, rev = 0;
    stg_queue_counts c;
    int rc = stg_queue_claim(s->q, want, qj, &got, &rev, &c);
    if (rc == STG_EUNAVAIL) {
        went_down(s, now);
        s->next_claim_us = now + s->poll_us;
        free(qj);
        return STG_OK; /* tick decides when an outage is too long */
    }
    if (rc != STG_OK && got == 0) {
        free(qj);
        snprintf(s->msg, sizeof s->msg, "%s", stg_queue_errmsg(s->q));
        return rc == STG_ENOMEM ? STG_ENOMEM : STG_EIO;
    }
    s->down_since_us = 0;
    s->counts = c;
    s->stats.to_review += rev;
    /* Into the buffer behind what is there, then out of it in order. */
    if (s->n_pre + (size_t)got > s->cap_pre) {
        size_t cap = s->n_pre + (size_t)got + 16;
        stg_queue_job *p = realloc(s->pre, cap * sizeof *p);
        if (p)
            s->pre = p;
        int64_t *pc = p ? realloc(s->pre_conf, cap * sizeof *pc) : NULL;
        if (pc)
            s->pre_conf = pc;
        if (!p || !pc) {
            for (int i = 0; i < got; i++)
                stg_queue_job_clear(&qj[i]); /* left delivered: taken later */
            free(qj);
            return STG_ENOMEM;
        }
        s->cap_pre = cap;
    }
    if (got) {
        memcpy(s->pre + s->n_pre, qj, (size_t)got * sizeof *qj);
        for (int i = 0; i < got; i++)
            s->pre_conf[s->n_pre + (size_t)i] = now; /* the claim was sent at now */
        s->n_pre += (size_t)got;
    }
    free(qj);
    if (!hand_out(s, max, out, n, now))
        return STG_ENOMEM;
    STG_ASSERT(s->n_tr >= (size_t)*n); /* every job handed out is tracked */
    if (*n == 0) {
        s->next_claim_us = now + s->poll_us;
        *more = s->follow || c.total == 0 || ended_of(&c) < c.total;
    }
    return STG_OK;
}

/* ---- renewal: the jobs held stay ours while we live ----------------------------- */

#define RENEW_CHUNK 4000 /* entries per stg_queue_renew call */

/* Renew every job held (handed out and not lost, or claimed ahead) as of
 * now (the send time). A tracked job found taken over is marked lost; a
 * job claimed ahead found so is dropped, never handed out. STG_OK, or the
 * failure of the call (nothing changed). */
static int renew_all(stg_batch_queue *s, int64_t now)
{
    size_t n = 0, cap = s->n_tr + s->n_pre;
    if (cap == 0) {
        s->last_renew_us = now;
        return STG_OK;
    }
    const char **ents = malloc(cap * sizeof *ents);
    bool *mine = malloc(cap * sizeof *mine);
    if (!ents || !mine) {
        free(ents);
        free(mine);
        return STG_ENOMEM;
    }
    for (size_t i = 0; i < s->n_tr; i++)
        if (!s->tr[i].lost)
            ents[n++] = s->tr[i].entry;
    size_t n_tr_sent = n;
    for (size_t i = 0; i < s->n_pre; i++)
        ents[n++] = s->pre[i].entry;
    int rc = STG_OK;
    for (size_t off = 0; rc == STG_OK && off < n; off += RENEW_CHUNK) {
        size_t k = n - off < RENEW_CHUNK ? n - off : RENEW_CHUNK;
        rc = stg_queue_renew(s->q, ents + off, k, mine + off);
        s->stats.renewals++;
    }
    if (rc == STG_OK) {
        size_t m = 0;
        for (size_t i = 0; i < s->n_tr; i++) {
            if (s->tr[i].lost)
                continue;
            if (mine[m++]) {
                s->tr[i].confirmed_us = now;
            } else {
                s->tr[i].lost = true;
                s->n_lost++;
                s->stats.lost++;
            }
        }
        STG_ASSERT(m == n_tr_sent);
        size_t w = 0;
        for (size_t i = 0; i < s->n_pre; i++) {
            if (mine[n_tr_sent + i]) {
                s->pre[w] = s->pre[i];
                s->pre_conf[w++] = now;
            } else {
                stg_queue_job_clear(&s->pre[i]); /* another worker has it */
                s->stats.lost++;
            }
        }
        s->n_pre = w;
        s->last_renew_us = now;
    }
    free(ents);
    free(mine);
    return rc;
}

static tracked *tracked_of(stg_batch_queue *s, int64_t id)
{
    for (size_t i = 0; i < s->n_tr; i++)
        if (s->tr[i].id == id)
            return &s->tr[i];
    return NULL;
}

/* A job found taken over: the runner cancels it (before its next pass
 * sends it) and it ends here as PENDING. No round trip. */
static int src_may_send(void *ctx, const stg_job *j)
{
    stg_batch_queue *s = ctx;
    if (s->n_lost == 0)
        return STG_OK;
    tracked *t = tracked_of(s, j->id);
    return t && t->lost ? STG_ESTATE : STG_OK;
}

/* The admission guard (lim_acquire, before every attempt of every job):
 * every job held must have been confirmed ours within fresh_us (renewing
 * first if not) and none found lost may still be with the runner. Then
 * whichever job this admission is for is ours until at least claim_idle /
 * 2 from now. false: admit nothing now (*wait_us set). */
static bool owned_fresh(stg_batch_queue *s, int64_t now, int64_t timeout_us, int64_t *wait_us)
{
    /* The oldest confirmation is at least as old as the last renewal's,
     * and every job claimed since is younger: one look at the renewal
     * time usually settles it (the scan runs at most once per fresh_us). */
    bool stale = false;
    if (now - s->last_renew_us >= s->fresh_us)
        for (size_t i = 0; i < s->n_tr && !stale; i++)
            stale = !s->tr[i].lost && now - s->tr[i].confirmed_us >= s->fresh_us;
    if (stale) {
        int rc = renew_all(s, now);
        if (rc != STG_OK) {
            if (rc == STG_EUNAVAIL)
                went_down(s, now);
            *wait_us = timeout_us + STG_MS(100);
            return false;
        }
    }
    if (s->n_lost) {
        *wait_us = timeout_us + STG_MS(10); /* the runner cancels them first */
        return false;
    }
    return true;
}

static int src_mark_sent(void *ctx, const stg_job *j)
{
    stg_batch_queue *s = ctx;
    stg_queue_job qj;
    memset(&qj, 0, sizeof qj);
    qj.id = j->id;
    int rc = stg_queue_mark_sent(s->q, &qj);
    if (rc != STG_OK) {
        snprintf(s->msg, sizeof s->msg,
                 "cannot record in Redis that non-idempotent job %s is about to be sent (%s): "
                 "stopped before sending it",
                 j->key, stg_queue_errmsg(s->q));
        return STG_EUNAVAIL;
    }
    return STG_OK;
}

/* The body of o as bytes in memory (a body in a file is read back). */
static char *body_of(const stg_job_outcome *o, size_t *len)
{
    *len = 0;
    if (!o->body_in_fd) {
        if (!o->body)
            return NULL;
        char *b = malloc(o->body_len + 1);
        if (b) {
            memcpy(b, o->body, o->body_len);
            *len = o->body_len;
        }
        return b;
    }
    char *b = malloc(o->body_len + 1);
    size_t got = 0;
    while (b && got < o->body_len) {
        ssize_t r = pread(o->body_fd, b + got, o->body_len - got, (off_t)got);
        if (r <= 0)
            break;
        got += (size_t)r;
    }
    *len = got;
    return b;
}

static bool keep(stg_batch_queue *s, const tracked *t, const stg_queue_outcome *o, char *body)
{
    if (s->n_kp == s->cap_kp) {
        size_t cap = s->cap_kp ? 2 * s->cap_kp : 16;
        kept *k = realloc(s->kp, cap * sizeof *k);
        if (!k)
            return false;
        s->kp = k;
        s->cap_kp = cap;
    }
    kept *k = &s->kp[s->n_kp++];
    memset(k, 0, sizeof *k);
    k->job.id = t->id;
    memcpy(k->job.entry, t->entry, sizeof k->job.entry);
    k->job.deliveries = t->deliveries;
    k->o = *o;
    k->o.reason = k->reason = dup_or_null(o->reason);
    k->o.error = k->error = dup_or_null(o->error);
    k->o.file = k->file = dup_or_null(o->file);
    k->o.body = k->body = body;
    s->stats.kept++;
    return true;
}

static void kept_free(kept *k)
{
    free(k->reason);
    free(k->error);
    free(k->file);
    free(k->body);
}

static int src_finish(void *ctx, const stg_job *j, const stg_job_outcome *o)
{
    stg_batch_queue *s = ctx;
    tracked t;
    if (!untrack(s, j->id, &t)) {
        snprintf(s->msg, sizeof s->msg, "job %s was not claimed from the queue", j->key);
        return STG_EIO;
    }
    int64_t now = stg__clock_mono_us();
    size_t blen = 0;
    char *body = o->state == STG_JOB_PENDING ? NULL : body_of(o, &blen);
    char path[4096 + 200] = "";
    if (o->response_file)
        snprintf(path, sizeof path, "%s/%s", s->out_dir ? s->out_dir : ".", o->response_file);
    stg_queue_outcome qo = {
        .state = (stg_queue_state)o->state,
        .status = o->status,
        .attempts = o->attempts,
        .status_429 = o->status_429,
        .status_503 = o->status_503,
        .reason = o->reason,
        .error = o->error,
        .body = body,
        .body_len = blen,
        .file = o->response_file ? path : NULL,
        .latency_us = now - t.claimed_us,
    };
    stg_queue_job qj;
    memset(&qj, 0, sizeof qj);
    qj.id = t.id;
    memcpy(qj.entry, t.entry, sizeof qj.entry);
    bool recorded = false;
    int rc = s->n_kp ? STG_EUNAVAIL : stg_queue_finish(s->q, &qj, &qo, &recorded);
    if (rc == STG_OK) {
        s->stats.finished += recorded;
        s->stats.not_recorded += !recorded && o->state != STG_JOB_PENDING;
        free(body);
        return STG_OK;
    }
    if (rc == STG_EUNAVAIL) {
        went_down(s, now);
        if (keep(s, &t, &qo, body))
            return STG_OK;
        free(body);
        snprintf(s->msg, sizeof s->msg, "out of memory keeping an outcome");
        return STG_ENOMEM;
    }
    free(body);
    snprintf(s->msg, sizeof s->msg, "%s", stg_queue_errmsg(s->q));
    return STG_EIO;
}

static void src_counts(void *ctx, int64_t n[STG_JOB_NSTATES])
{
    stg_batch_queue *s = ctx;
    stg_queue_counts c;
    if (!s->n_kp && stg_queue_counts_get(s->q, &c) == STG_OK)
        s->counts = c;
    for (int i = 0; i < STG_JOB_NSTATES; i++)
        n[i] = s->counts.n[i];
}

static int src_tick(void *ctx)
{
    stg_batch_queue *s = ctx;
    int64_t now = stg__clock_mono_us();
    size_t done = 0;
    while (done < s->n_kp) {
        kept *k = &s->kp[done];
        bool recorded = false;
        int rc = stg_queue_finish(s->q, &k->job, &k->o, &recorded);
        if (rc == STG_EUNAVAIL)
            break;
        /* Written (or refused as malformed: nothing better to do with it). */
        s->stats.finished += recorded;
        kept_free(k);
        done++;
    }
    if (done) {
        memmove(s->kp, s->kp + done, (s->n_kp - done) * sizeof *s->kp);
        s->n_kp -= done;
    }
    if (!s->n_kp && done)
        s->down_since_us = 0;
    if ((s->n_tr || s->n_pre) && now - s->last_renew_us >= s->renew_us &&
        renew_all(s, now) == STG_EUNAVAIL)
        went_down(s, now);
    int64_t since = s->down_since_us;
    if (s->lim_down_since_us && (!since || s->lim_down_since_us < since))
        since = s->lim_down_since_us;
    if (since && now - since > s->outage_us) {
        snprintf(s->msg, sizeof s->msg,
                 "Redis unreachable for %lld s (%s); %zu outcomes not written: those jobs stay "
                 "in the queue for another worker (after --claim-idle)",
                 (long long)((now - since) / 1000000), stg_queue_errmsg(s->q), s->n_kp);
        return STG_EUNAVAIL;
    }
    return STG_OK;
}

/* ---- holds: the server's "not before" per host ---------------------------------- */

static hold *hold_of(stg_batch_queue *s, const char *key)
{
    for (size_t i = 0; i < s->n_holds; i++)
        if (!strcmp(s->holds[i].key, key))
            return &s->holds[i];
    if (strlen(key) >= sizeof s->holds[0].key)
        return NULL;
    hold *h = realloc(s->holds, (s->n_holds + 1) * sizeof *h);
    if (!h)
        return NULL;
    s->holds = h;
    h = &s->holds[s->n_holds++];
    memset(h, 0, sizeof *h);
    snprintf(h->key, sizeof h->key, "%s", key);
    return h;
}

static void src_on_event(void *ctx, const stg_event *ev)
{
    stg_batch_queue *s = ctx;
    if (ev->type != STG_EVENT_ATTEMPT_END || !ev->host ||
        (ev->status != 429 && ev->status != 503) || ev->retry_after_us <= 0)
        return;
    hold *h = hold_of(s, ev->host);
    int64_t now = stg__clock_mono_us();
    if (h && now + ev->retry_after_us > h->until_us)
        h->until_us = now + ev->retry_after_us;
    if (stg_queue_hold(s->q, ev->host, ev->retry_after_us) == STG_OK)
        s->stats.holds_set++;
}

/* How long key is still held (0: not), re-read from Redis at most every
 * hold_refresh_us; a read that fails keeps what is known. */
static int64_t held_for(stg_batch_queue *s, const char *key, int64_t now)
{
    hold *h = hold_of(s, key);
    if (!h)
        return 0;
    if (!h->checked_us || now - h->checked_us >= s->hold_refresh_us) {
        int64_t left = 0;
        h->checked_us = now;
        if (stg_queue_hold_left(s->q, key, &left) == STG_OK && now + left > h->until_us)
            h->until_us = now + left;
    }
    return h->until_us > now ? h->until_us - now : 0;
}

static int lim_acquire(void *ctx, const char *key, int64_t timeout_us, int64_t *wait_us,
                       int64_t *ticket)
{
    stg_batch_queue *s = ctx;
    int64_t now = stg__clock_mono_us();
    if (!owned_fresh(s, now, timeout_us, wait_us))
        return STG_ETIMEDOUT; /* the engine asks again shortly */
    int64_t held = held_for(s, key, now);
    if (held > timeout_us) {
        *wait_us = held;
        return STG_ETIMEDOUT; /* the engine asks again shortly before */
    }
    if (!s->inner) {
        *wait_us = held;
        return STG_OK;
    }
    /* A reservation sent later than its slot keeps the limit: only earlier
     * would break it. */
    int rc = s->inner->acquire(s->inner->ctx, key, timeout_us - held, wait_us, ticket);
    if (rc == STG_OK || rc == STG_ETIMEDOUT) {
        s->lim_down_since_us = 0;
        *wait_us += held;
        return rc;
    }
    if (rc == STG_EUNAVAIL) {
        if (!s->lim_down_since_us)
            s->lim_down_since_us = now;
        if (now - s->lim_down_since_us <= s->outage_us) {
            *wait_us = STG_MS(250) + timeout_us; /* not yet: asked again in a while */
            return STG_ETIMEDOUT;
        }
    }
    return rc;
}

static int lim_allow(void *ctx, const char *key, int64_t *retry_in_us)
{
    stg_batch_queue *s = ctx;
    return s->inner->breaker_allow(s->inner->ctx, key, retry_in_us);
}

static void lim_record(void *ctx, const char *key, stg_breaker_verdict v)
{
    stg_batch_queue *s = ctx;
    s->inner->breaker_record(s->inner->ctx, key, v);
}

static void lim_response(void *ctx, const char *key, int64_t ticket, bool throttled,
                         int64_t hold_us)
{
    stg_batch_queue *s = ctx;
    s->inner->on_response(s->inner->ctx, key, ticket, throttled, hold_us);
}

const stg_shared_limiter *stg__batch_queue_limiter(stg_batch_queue *s,
                                                  const stg_shared_limiter *inner)
{
    s->inner = inner && inner->acquire ? inner : NULL;
    memset(&s->lim, 0, sizeof s->lim);
    s->lim.ctx = s;
    s->lim.acquire = lim_acquire;
    if (s->inner && s->inner->breaker_allow && s->inner->breaker_record) {
        s->lim.breaker_allow = lim_allow;
        s->lim.breaker_record = lim_record;
    }
    if (s->inner && s->inner->on_response)
        s->lim.on_response = lim_response;
    /* A horizon, so that "not yet" (a held host, an outage) is asked again
     * instead of ending the request. */
    s->lim.horizon_us = s->inner && s->inner->horizon_us > 0 ? s->inner->horizon_us : STG_MS(50);
    return &s->lim;
}

/* The servers' quotas shared in the limiter's Redis: its outage is ridden
 * out as the limit's is (a wait, up to outage_us from the first failure of
 * either), not the end of the request. */
static int quo_ride(stg_batch_queue *s, int rc, int64_t *wait_us)
{
    if (rc != STG_EUNAVAIL) {
        if (rc == STG_OK || rc == STG_EAGAIN)
            s->lim_down_since_us = 0;
        return rc;
    }
    int64_t now = stg__clock_mono_us();
    if (!s->lim_down_since_us)
        s->lim_down_since_us = now;
    if (now - s->lim_down_since_us <= s->outage_us) {
        *wait_us = STG_MS(250); /* not yet: asked again in a while */
        return STG_EAGAIN;
    }
    return rc;
}

static int quo_acquire(void *ctx, const char *key, const char *route, const stg_quota_cost *costs,
                       size_t n, int64_t demand, void **ticket, int64_t *wait_us)
{
    stg_batch_queue *s = ctx;
    return quo_ride(s,
                    s->quo_inner->acquire(s->quo_inner->ctx, key, route, costs, n, demand, ticket,
                                          wait_us),
                    wait_us);
}

/* By class, when the ledger orders by class (the same outage rule). */
static int quo_acquire_class(void *ctx, const char *key, const char *route, const stg_class *cls,
                             const stg_quota_cost *costs, size_t n, int64_t demand, void **ticket,
                             int64_t *wait_us)
{
    stg_batch_queue *s = ctx;
    return quo_ride(s,
                    s->quo_inner->acquire_class(s->quo_inner->ctx, key, route, cls, costs, n,
                                                demand, ticket, wait_us),
                    wait_us);
}

static void quo_settle(void *ctx, void *ticket, int how, const stg_quota_set *qs,
                       const stg_quota_cost *used, size_t n_used, int64_t demand)
{
    stg_batch_queue *s = ctx;
    s->quo_inner->settle(s->quo_inner->ctx, ticket, how, qs, used, n_used, demand);
}

static void quo_tick(void *ctx)
{
    stg_batch_queue *s = ctx;
    if (s->quo_inner->tick)
        s->quo_inner->tick(s->quo_inner->ctx);
}

const stg_shared_quota *stg__batch_queue_quotas(stg_batch_queue *s, const stg_shared_quota *inner)
{
    if (!inner || !inner->acquire || !inner->settle)
        return NULL;
    s->quo_inner = inner;
    memset(&s->quo, 0, sizeof s->quo);
    s->quo.ctx = s;
    s->quo.acquire = quo_acquire;
    if (inner->acquire_class)
        s->quo.acquire_class = quo_acquire_class;
    s->quo.settle = quo_settle;
    s->quo.tick = quo_tick;
    return &s->quo;
}

/* ---- lifecycle ------------------------------------------------------------ */

static const char *src_errmsg(void *ctx)
{
    stg_batch_queue *s = ctx;
    return s->msg[0] ? s->msg : stg_queue_errmsg(s->q);
}

stg_batch_queue *stg__batch_queue_new(const stg_batch_queue_config *cfg)
{
    STG_ASSERT(cfg && cfg->queue);
    stg_batch_queue *s = calloc(1, sizeof *s);
    if (!s)
        return NULL;
    s->q = cfg->queue;
    s->out_dir = cfg->out_dir;
    s->follow = cfg->follow;
    s->outage_us = cfg->outage_us > 0 ? cfg->outage_us : STG_SEC(30);
    s->poll_us = cfg->poll_us > 0 ? cfg->poll_us : STG_MS(200);
    s->hold_refresh_us = cfg->hold_refresh_us > 0 ? cfg->hold_refresh_us : STG_SEC(1);
    s->prefetch = cfg->prefetch > 0 ? cfg->prefetch : cfg->prefetch < 0 ? 0 : -1;
    int64_t idle = cfg->claim_idle_us > 0 ? cfg->claim_idle_us : STG_QUEUE_DEFAULT_CLAIM_IDLE_US;
    s->renew_us = idle / 4;
    s->fresh_us = idle / 2;
    s->src = (stg_batch_source){.ctx = s,
                                .claim = src_claim,
                                .mark_sent = src_mark_sent,
                                .may_send = src_may_send,
                                .finish = src_finish,
                                .counts = src_counts,
                                .tick = src_tick,
                                .on_event = src_on_event,
                                .errmsg = src_errmsg};
    (void)stg_queue_counts_get(s->q, &s->counts);
    return s;
}

void stg__batch_queue_free(stg_batch_queue *s)
{
    if (!s)
        return;
    for (size_t i = 0; i < s->n_kp; i++)
        kept_free(&s->kp[i]);
    free(s->kp);
    for (size_t i = 0; i < s->n_pre; i++)
        stg_queue_job_clear(&s->pre[i]);
    free(s->pre);
    free(s->pre_conf);
    free(s->tr);
    free(s->holds);
    free(s);
}

const stg_batch_source *stg__batch_queue_source(stg_batch_queue *s)
{
    return &s->src;
}

void stg__batch_queue_stats_get(const stg_batch_queue *s, stg_batch_queue_stats *st)
{
    *st = s->stats;
}

int stg__batch_queue_release(stg_batch_queue *s)
{
    int back = 0;
    size_t i = 0;
    for (; i < s->n_pre; i++) {
        stg_queue_outcome o = {.state = STG_QUEUE_PENDING};
        bool rec = false;
        if (stg_queue_finish(s->q, &s->pre[i], &o, &rec) != STG_OK)
            break; /* Redis away: the rest wait for --claim-idle */
        back += rec;
    }
    for (size_t k = 0; k < s->n_pre; k++)
        stg_queue_job_clear(&s->pre[k]);
    s->n_pre = 0;
    return back;
}

size_t stg__batch_queue_kept(const stg_batch_queue *s)
{
    return s->n_kp;
}

#else
typedef int stg__batch_queue_source_unused;
#endif
