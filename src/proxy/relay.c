/*
 * The loop thread: it alone touches the stg_engine and drives
 * libmicrohttpd (external epoll mode), so a request never changes thread
 * on its way through: MHD_run reads it and the front queues a command
 * (submit, cancel, resume a paused transfer), which runs right after
 * MHD_run returns; the engine's pass sends it and hands the answer back
 * through the body sink (a 2xx head and body bytes, as they arrive) and
 * the done callback (the final answer, or the end of a stream), which
 * resume the connection for the next MHD_run. The engine's wait also ends
 * when MHD's epoll descriptor is readable (stg_engine_run_fd). Two threads
 * per request (MHD's and the engine's, a wake-up and a context switch each
 * way) cost four times the CPU of the rest of the proxy on loopback.
 * After each MHD_run the loop also sweeps the client connections
 * (conns.c: heads open too long, slots kept free near the limit).
 * The watcher and the controlling thread still queue commands, and wake
 * the engine's wait (px_wake).
 *
 * Streaming (STG_STREAM_HEAD | FINAL | PAUSE): the head of a 2xx answer
 * resumes the client's connection, which then reads body bytes from the
 * request's buffer as the sink appends them; once the head went out the
 * request is never retried (the program already has part of an answer).
 * A buffer over PX_HIGH_WATER pauses the upstream transfer (the sink
 * returns STG_BODY_PAUSE and libcurl keeps the bytes); the reader resumes
 * it once the buffer drains below PX_LOW_WATER, so a slow program reading
 * a 64 MiB body holds the proxy's memory to about PX_HIGH_WATER.
 *
 * An event stream (STG_STREAM_SSE_HOLD) is held by the engine until its
 * first event: an LLM API that is overloaded after it accepted a stream
 * answers 200 and then an error event, and since nothing has reached the
 * program, that event is taken as the refusal it stands for (a 529, a 429)
 * and retried like one, invisibly; given back, it reaches the program as
 * that status with the error as a JSON body. Once the head went out, never.
 *
 * Any other answer's body (STG_STREAM_OTHER) is spooled whole, in memory
 * and then a temporary file, because whether it is the answer is known
 * only at done: a 429 whose retry succeeds is dropped (RESTART), one
 * given back reaches the program byte for byte, up to max_body (--max-body,
 * 64 MiB by default), and while all the bodies held stay within max_spool
 * (--max-spool, 1 GiB: a --forward client picks the upstream, and could
 * fill the disk with many at once); past either, a 502 (Stagger-Error:
 * body-too-large), never a cut body. A 2xx body streams and is not limited.
 *
 * Invariants: commands run without p->mu (the engine calls back into the
 * sink and done, which take it); every SUBMIT ends in exactly one done
 * callback or, when the submit fails, in a final answer set here; the
 * engine reference of a request is dropped in its done callback only.
 */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "proxy/internal.h"
#include "util/assert.h"
#include "util/grow.h"

bool px_cmd_push(stg_proxy *p, enum px_cmd_kind kind, px_req *r)
{
    if (!STG__GROW(p->cmds, p->n_cmds, p->cap_cmds, 64))
        return false;
    p->cmds[p->n_cmds++] = (px_cmd){.kind = kind, .r = r};
    if (r)
        r->refs++;
    return true;
}

void px_wake(stg_proxy *p)
{
    stg_engine_wake(p->engine);
}

void px_req_free(px_req *r)
{
    /* The last holder let go: no command, no reader, the engine done with
     * it (if it ever had it), its connection not left suspended. */
    STG_ASSERT(r->refs == 0);
    STG_ASSERT(!r->submitted || r->engine_done);
    STG_ASSERT(!r->suspended);
    STG_ASSERT(r->p->buffered >= r->charged && r->p->spooled >= r->ocharged);
    free(r->uri);
    free(r->host);
    free(r->method);
    free(r->url);
    for (size_t i = 0; i < r->n_hdrs; i++)
        free(r->hdrs[i]);
    free(r->hdrs);
    free(r->body);
    free(r->rhdrs);
    free(r->sbuf);
    free(r->fbody);
    free(r->obuf);
    free(r->cost);
    if (r->ofile)
        fclose(r->ofile);
    r->p->buffered -= r->charged; /* p->mu held (px_unref_locked) */
    r->p->spooled -= r->ocharged;
    free(r);
}

void px_unref_locked(px_req *r)
{
    STG_ASSERT(r->refs > 0); /* one unref per holder: never below zero */
    if (--r->refs == 0)
        px_req_free(r);
}

/* ---- the sink and done: engine thread, p->mu taken here ---------------- */

static bool sbuf_put(px_req *r, const void *buf, size_t len)
{
    if (r->soff && r->soff == r->slen)
        r->soff = r->slen = 0;
    if (r->soff > r->scap / 2) {
        memmove(r->sbuf, r->sbuf + r->soff, r->slen - r->soff);
        r->slen -= r->soff;
        r->soff = 0;
    }
    if (!stg__reserve(&r->sbuf, &r->scap, r->slen + len, 1, 16384))
        return false;
    memcpy(r->sbuf + r->slen, buf, len);
    r->slen += len;
    return true;
}

/* A non-2xx body, kept whole (engine thread; the spool is the engine
 * thread's until done). Returns false when it cannot be kept: the engine
 * then fails the request (a 502), so no body is ever cut silently. */
static bool spool_put(px_req *r, const void *buf, size_t len)
{
    stg_proxy *p = r->p;
    if (r->ototal + len > p->max_body) {
        r->otoo_large = true;
        return !(r->ofull = true);
    }
    /* ... and the bodies held by all requests together (max_spool). */
    pthread_mutex_lock(&p->mu);
    bool room = p->spooled + len <= p->max_spool;
    if (room) {
        p->spooled += len;
        r->ocharged += len;
    }
    pthread_mutex_unlock(&p->mu);
    if (!room) {
        r->otoo_large = r->ospool_full = true;
        return !(r->ofull = true);
    }
    if (!r->ofile && r->olen + len <= PX_SPOOL_MEM) {
        if (!r->obuf && !(r->obuf = malloc(PX_SPOOL_MEM)))
            return false;
        memcpy(r->obuf + r->olen, buf, len);
        r->olen += len;
        r->ototal += len;
        return true;
    }
    if (!r->ofile) { /* over PX_SPOOL_MEM: everything to an unlinked file */
        r->ofile = tmpfile();
        if (!r->ofile || (r->olen && fwrite(r->obuf, 1, r->olen, r->ofile) != r->olen))
            return !(r->ofull = true);
        free(r->obuf);
        r->obuf = NULL;
        r->olen = 0;
    }
    if (fwrite(buf, 1, len, r->ofile) != len)
        return !(r->ofull = true);
    r->ototal += len;
    return true;
}

static void spool_reset(px_req *r)
{
    pthread_mutex_lock(&r->p->mu);
    r->p->spooled -= r->ocharged;
    r->ocharged = 0;
    pthread_mutex_unlock(&r->p->mu);
    r->olen = 0;
    r->ototal = 0;
    r->ofull = r->otoo_large = r->ospool_full = false;
    if (r->ofile) {
        fclose(r->ofile);
        r->ofile = NULL;
    }
}

static int sink(stg_body_op op, const void *buf, size_t len, void *data)
{
    px_req *r = data;
    stg_proxy *p = r->p;
    int rc = 0;
    if (op == STG_BODY_OTHER || op == STG_BODY_RESTART) {
        pthread_mutex_lock(&p->mu);
        bool gone = r->client_gone;
        pthread_mutex_unlock(&p->mu);
        if (op == STG_BODY_RESTART)
            spool_reset(r); /* and the 2xx buffer, below */
        else
            return gone || !spool_put(r, buf, len) ? -1 : 0;
    }
    pthread_mutex_lock(&p->mu);
    if (op == STG_BODY_HEAD) {
        free(r->rhdrs);
        r->rhdrs = malloc(len + 1);
        if (r->rhdrs) {
            memcpy(r->rhdrs, buf, len);
            r->rhdrs[len] = '\0';
            r->rhdrs_len = len;
            r->status = px_block_status(buf, len);
            r->rlen = px_block_length(buf, len);
            r->head = true;
            /* No resume yet: the first DATA comes in the same libcurl
             * write, and one wake-up of the front then sends both. */
        }
        rc = r->rhdrs ? 0 : -1;
        pthread_mutex_unlock(&p->mu);
        return rc;
    }
    switch (op) {
    case STG_BODY_DATA:
        if (r->client_gone) {
            rc = -1; /* nobody reads it: stop the transfer */
        } else if (r->slen - r->soff >= PX_HIGH_WATER) {
            r->upstream_paused = true;
            rc = STG_BODY_PAUSE;
        } else if (!sbuf_put(r, buf, len)) {
            rc = -1;
        } else if (r->soff == 0 && r->rlen >= 0 && r->slen == (size_t)r->rlen) {
            /* The whole body, by its length, and nothing of it sent yet:
             * the done callback, which comes with it (the transfer is
             * complete), resumes the connection, and the front hands head
             * and body to MHD as one buffer, one send (front.c). Resumed
             * here, MHD sent the head first and the body on the next run:
             * a send and a wake-up of the client more per answer. */
        } else {
            px_resume_locked(r); /* a reader waiting for bytes */
        }
        break;
    case STG_BODY_RESTART: /* not after a head (STG_STREAM_FINAL) */
        r->slen = r->soff = 0;
        break;
    case STG_BODY_END:
        break;
    }
    pthread_mutex_unlock(&p->mu);
    return rc;
}

static void on_done(stg_engine *e, uint64_t id, const stg_result *res, void *data)
{
    (void)e, (void)id;
    px_req *r = data;
    stg_proxy *p = r->p;
    pthread_mutex_lock(&p->mu);
    STG_ASSERT(r->submitted && !r->engine_done); /* done exactly once, after a submit */
    r->engine_done = true;
    p->in_flight--;
    r->reason = res->reason;
    r->error = res->error;
    r->attempts = res->attempts;
    snprintf(r->errtext, sizeof r->errtext, "%s", res->error_text);
    if (r->head) {
        r->stream_end = true;
        r->stream_ok = res->action == STG_ACTION_SUCCESS;
        if (r->queued || r->client_gone) /* else the front logs its answer */
            px_log_request(p, r, r->stream_ok ? r->status : 0);
    } else {
        r->final = true;
        r->status = res->status;
        free(r->rhdrs);
        r->rhdrs = res->headers_len ? strndup(res->headers, res->headers_len) : NULL;
        r->rhdrs_len = r->rhdrs ? res->headers_len : 0;
        if (r->ofull || (r->ofile && fflush(r->ofile) != 0)) {
            r->error = STG_NET_OTHER; /* the spool lost bytes: never cut silently */
            if (r->ospool_full)
                snprintf(r->errtext, sizeof r->errtext,
                         "the upstream's %d answer has a body the proxy cannot hold now: the "
                         "answers it holds together would pass --max-spool (%llu bytes)",
                         res->status, (unsigned long long)p->max_spool);
            else if (r->otoo_large)
                snprintf(r->errtext, sizeof r->errtext,
                         "the upstream's %d answer has a body over --max-body (%llu bytes), "
                         "which the proxy would have to hold whole",
                         res->status, (unsigned long long)p->max_body);
            else
                snprintf(r->errtext, sizeof r->errtext,
                         "the upstream's %d answer has a body the proxy cannot keep whole "
                         "(the temporary directory is full)", res->status);
        }
        /* A spooled body is the whole one; res->body only its first 64 KiB. */
        r->fbody = res->body_len && !r->ototal ? malloc(res->body_len) : NULL;
        if (r->fbody)
            memcpy(r->fbody, res->body, res->body_len);
        r->fbody_len = r->fbody ? res->body_len : 0;
    }
    px_resume_locked(r);
    pthread_cond_broadcast(&p->cv);
    px_unref_locked(r); /* the engine's reference */
    pthread_mutex_unlock(&p->mu);
}

/* A body that streams (engine thread): what the front buffered, a pause
 * when it has nothing yet, the end once the client's last byte is in. */
static size_t body_read(char *buf, size_t size, void *data)
{
    px_req *r = data;
    stg_proxy *p = r->p;
    size_t n;
    pthread_mutex_lock(&p->mu);
    size_t avail = r->body_len - r->body_off;
    if (r->client_gone) {
        n = STG_READ_ABORT;
    } else if (!avail) {
        n = r->body_done ? 0 : STG_READ_PAUSE;
        r->read_paused = !r->body_done;
    } else {
        n = avail < size ? avail : size;
        memcpy(buf, r->body + r->body_off, n);
        r->body_off += n;
        if (r->body_off == r->body_len)
            r->body_off = r->body_len = 0;
        if (r->upload_blocked) {
            r->upload_blocked = false;
            px_resume_locked(r); /* room again: the upload goes on */
        }
    }
    pthread_mutex_unlock(&p->mu);
    return n;
}

/* ---- commands ----------------------------------------------------------- */

static void submit(stg_proxy *p, px_req *r)
{
    pthread_mutex_lock(&p->mu);
    bool gone = r->client_gone;
    pthread_mutex_unlock(&p->mu);
    int rc = STG_ECANCELED;
    uint64_t id = 0;
    if (!gone) {
        stg_request rq;
        memset(&rq, 0, sizeof rq);
        rq.url = r->url;
        rq.method = r->method;
        rq.headers = (const char *const *)r->hdrs;
        rq.body = r->body_len || r->body ? (r->body ? r->body : "") : NULL;
        rq.body_len = r->body_len;
        if (!rq.body && (!strcmp(r->method, "POST") || !strcmp(r->method, "PUT") ||
                         !strcmp(r->method, "PATCH")))
            rq.body = "";
        if (r->body_stream) { /* read as it arrives, sent once */
            rq.body = NULL;
            rq.read_body = body_read; /* gets body_sink_data: r */
            rq.body_len = r->body_total >= 0 ? (size_t)r->body_total : (size_t)-1;
        }
        rq.idempotency_key = r->idem_key[0] ? r->idem_key : NULL;
        rq.secret_headers = p->cfg.secret_headers;
        rq.body_sink = sink;
        rq.body_sink_data = r;
        rq.stream = STG_STREAM_HEAD | STG_STREAM_FINAL | STG_STREAM_PAUSE | STG_STREAM_OTHER |
                    STG_STREAM_SSE_HOLD;
        rq.deadline_us = r->deadline_us;
        rq.max_attempts = r->max_attempts;
        rq.priority = r->priority;
        rq.tenant = r->tenant[0] ? r->tenant : NULL; /* Stagger-Tenant (control.c) */
        rq.weight = r->weight;
        rq.cost = r->cost; /* Stagger-Cost (control.c) */
        rq.n_cost = r->n_cost;
        stg_policy own; /* Stagger-Timeout: the proxy's policy, these times */
        const px_timeouts *t = &r->timeouts;
        if (t->connect_us || t->first_byte_us || t->idle_us || t->total_us) {
            own = p->cfg.engine.policy;
            if (t->connect_us)
                own.connect_timeout_us = t->connect_us;
            if (t->first_byte_us)
                own.first_byte_timeout_us = t->first_byte_us;
            if (t->idle_us)
                own.idle_timeout_us = t->idle_us;
            if (t->total_us)
                own.attempt_timeout_us = t->total_us;
            rq.policy = &own; /* copied at submit */
        }
        rc = stg_engine_submit(p->engine, &rq, on_done, r, &id);
    }
    pthread_mutex_lock(&p->mu);
    if (rc == STG_OK) {
        r->has_id = true;
        r->id = id;
        if (!r->body_stream) { /* the engine has its copy: one is enough */
            free(r->body);
            r->body = NULL;
            r->body_len = r->body_cap = 0;
        }
    } else {
        /* No done callback will come: answer here, drop the engine's ref. */
        STG_ASSERT(!r->engine_done);
        r->engine_done = true;
        p->in_flight--;
        r->final = true;
        r->status = 0;
        r->reason = STG_REASON_ERROR_NOT_RETRYABLE;
        r->error = STG_NET_OTHER;
        snprintf(r->errtext, sizeof r->errtext, "the engine refused the request: %s",
                 stg_strerror(rc));
        px_resume_locked(r);
        pthread_cond_broadcast(&p->cv);
        px_unref_locked(r);
    }
    pthread_mutex_unlock(&p->mu);
}

static void run(stg_proxy *p, const px_cmd *c)
{
    px_req *r = c->r;
    uint64_t id = 0;
    bool live = false;
    if (r) {
        pthread_mutex_lock(&p->mu);
        live = r->has_id && !r->engine_done;
        id = r->id;
        pthread_mutex_unlock(&p->mu);
    }
    switch (c->kind) {
    case PX_SUBMIT:
        submit(p, r);
        break;
    case PX_CANCEL:
        if (live)
            stg_engine_cancel(p->engine, id);
        break;
    case PX_RESUME:
        if (live)
            stg_engine_resume(p->engine, id);
        break;
    case PX_REOPEN:
        break; /* proxy.c reopens under log_mu; nothing for the engine */
    }
    if (r) {
        pthread_mutex_lock(&p->mu);
        px_unref_locked(r);
        pthread_mutex_unlock(&p->mu);
    }
}

/* Commands queued since the last call, run in order. Returns how many. */
static size_t run_commands(stg_proxy *p, px_cmd **batch, size_t *cap)
{
    pthread_mutex_lock(&p->mu);
    size_t n = p->n_cmds;
    if (n > *cap) {
        px_cmd *b = realloc(*batch, n * sizeof *b);
        if (b) {
            *batch = b;
            *cap = n;
        } else {
            n = *cap;
        }
    }
    if (n) {
        memcpy(*batch, p->cmds, n * sizeof **batch);
        memmove(p->cmds, p->cmds + n, (p->n_cmds - n) * sizeof *p->cmds);
        p->n_cmds -= n;
    }
    pthread_mutex_unlock(&p->mu);
    for (size_t i = 0; i < n; i++)
        run(p, &(*batch)[i]);
    return n;
}

/* How long the engine's wait may last: MHD's next connection timeout,
 * at most 250 ms (a stop or drain is seen within that anyway: both wake
 * the engine). */
static int64_t wait_us(stg_proxy *p)
{
    MHD_UNSIGNED_LONG_LONG ms = 0;
    if (MHD_get_timeout(p->mhd, &ms) == MHD_YES && ms < 250)
        return (int64_t)ms * 1000;
    return STG_MS(250);
}

/* A drain asked to stop accepting: MHD is ours (this thread's) to call. */
static void quiesce(stg_proxy *p)
{
    pthread_mutex_lock(&p->mu);
    bool want = p->quiesce && !p->quiesced;
    pthread_mutex_unlock(&p->mu);
    if (!want)
        return;
    MHD_socket s = MHD_quiesce_daemon(p->mhd);
    if (s != MHD_INVALID_SOCKET)
        close(s);
    pthread_mutex_lock(&p->mu);
    p->quiesced = true;
    pthread_cond_broadcast(&p->cv);
    pthread_mutex_unlock(&p->mu);
}

void *px_engine_main(void *arg)
{
    stg_proxy *p = arg;
    px_cmd *batch = NULL;
    size_t cap = 0;
    for (;;) {
        MHD_run(p->mhd); /* never blocks: what is ready, and the resumed */
        px_conns_sweep(p);
        quiesce(p);
        size_t n = run_commands(p, &batch, &cap);
        pthread_mutex_lock(&p->mu);
        bool stop = p->stopping;
        pthread_mutex_unlock(&p->mu);
        if (stop && !n)
            break;
        stg_engine_run_fd(p->engine, wait_us(p), p->mhd_fd);
    }
    stg_engine_cancel_all(p->engine); /* every done callback runs */
    MHD_run(p->mhd);                  /* the connections that resumed */
    run_commands(p, &batch, &cap);
    free(batch);
    return NULL;
}
