/*
 * Claim and submit: pending jobs into free slots, each handed to the
 * engine as one request built from the job (and, for jobs whose secrets
 * are not stored, from the caller's input).
 *
 * Invariants:
 *  - A job is claimed (pending -> inflight, written in the group) before
 *    it reaches the engine, and its request leaves only once that claim is
 *    committed (commit.c); never more jobs than free slots are submitted.
 *  - A claim takes the free slots and ahead_max more when the claimed
 *    ahead (in id order) are fewer than the free slots, so claimed and not
 *    finished stay <= nslots + ahead_max (asserted: the inflight count is
 *    active + n_ahead). The claimed ahead go back with stg__store_unclaim
 *    at the end; a kill leaves them inflight and unsent (recovered to
 *    pending).
 *  - Headers of the configuration replace a job's own of the same name,
 *    and are never stored; a needs_input job takes its URL and headers from
 *    the input (the whole set, the secrets kept of it, or the file read
 *    again), matched by id and key (a mismatch stops the run); its method and body are the stored
 *    ones, which are the input's (the fingerprint says so).
 *  - A request the engine refuses is never sent: it is committed at once
 *    (failed, or pending when memory ran out) and its slot freed.
 *  - A Stagger-Cost header (a JSONL job's "cost", stored with its headers,
 *    or one of the configuration's) is never sent: it becomes the
 *    request's cost for the servers' quotas (the configuration's wins).
 *  - Stagger-Priority and Stagger-Tenant headers (a job's priority,
 *    tenant and weight, stored with its headers by the input's parser, so
 *    a resumed run keeps them) are never sent either: they become the
 *    request's class and tenant; a job without them takes the batch's
 *    (stg_batch_config.priority, tenant, weight); a malformed one fails
 *    the job unsent, as a malformed cost.
 *  - No job sets a field batch input may not set (framing, connection,
 *    Host, Proxy-*: util/http_field.h). The input's parser makes such a
 *    line a bad line and the configuration's headers are checked at
 *    stg__batch_new; a job that still has one (a database written by an
 *    older stagger, a queue another program loaded) fails here, unsent.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "batch/internal.h"
#include "util/assert.h"
#include "util/class_field.h"
#include "util/http_field.h"

#define MAX_REQ_HEADERS 128

/* ---- submit ---------------------------------------------------------------------- */

static bool header_named(const char *h, const char *name_of)
{
    const char *c1 = strchr(h, ':'), *c2 = strchr(name_of, ':');
    size_t n1 = c1 ? (size_t)(c1 - h) : strlen(h);
    size_t n2 = c2 ? (size_t)(c2 - name_of) : strlen(name_of);
    return n1 == n2 && !strncasecmp(h, name_of, n1);
}

/* Why the header line h may not be sent for a batch job, or NULL
 * (util/http_field.h): one of the engine's line forms, and a field batch
 * input may set. */
const char *stg__batch_header_refused(const char *h)
{
    size_t n = stg__http_line_name(h);
    if (n == 0)
        return "line is not valid (a name that is not a token, or a control character)";
    return stg__http_batch_refused(h, n);
}

/* h is a Stagger-Cost header: its value as the request's cost. Returns
 * false when the value is malformed. */
static bool take_cost(const char *h, stg_quota_cost *cost, size_t *n)
{
    const char *v = strchr(h, ':');
    v = v ? v + 1 : h + strlen(h);
    return stg_quota_cost_parse(v, strlen(v), cost, STG_QUOTA_COSTS_MAX, n) == STG_OK;
}

/* The class and tenant a request is for (take_class). */
typedef struct job_class {
    bool has_priority, has_tenant;
    int priority;
    char tenant[STG_TENANT_MAX + 1];
    double weight;
} job_class;

/* h is a Stagger-Priority or Stagger-Tenant header: true (its value taken
 * into c) when h is one of them; *ok false when its value is malformed. */
static bool take_class(const char *h, job_class *c, bool *ok)
{
    const char *v = strchr(h, ':');
    v = stg__field_blanks(v ? v + 1 : h + strlen(h));
    if (header_named(h, STG__PRIORITY_FIELD)) {
        *ok &= stg_priority_parse(v, &c->priority) == STG_OK;
        c->has_priority = true;
        return true;
    }
    if (header_named(h, STG__TENANT_FIELD)) {
        *ok &= stg__tenant_field_parse(v, c->tenant, sizeof c->tenant, &c->weight);
        c->has_tenant = true;
        return true;
    }
    return false;
}

/* The input's spec of a needs_input job (its url and headers), or NULL:
 * the whole parsed set by position, the kept secrets by id, or the input
 * read again by the cursor; the key must match, and what the spec has of
 * the stored fields must be them (an input file changed under the run). */
static const stg_job_spec *spec_of(const stg_batch *b, const stg_job *j)
{
    const stg_job_spec *sp = NULL;
    if (b->set && j->id >= 1 && (size_t)j->id <= b->set->n &&
        !strcmp(b->set->jobs[j->id - 1].key, j->key))
        sp = &b->set->jobs[j->id - 1];
    else if (b->secrets)
        sp = stg__input_secrets_find(b->secrets, j->id, j->key);
    else if (b->cursor)
        sp = stg__input_cursor_find(b->cursor, j->id, j->key);
    if (sp && ((sp->method && strcmp(sp->method, j->method)) ||
               (sp->url_redacted && j->url_redacted && strcmp(sp->url_redacted, j->url_redacted))))
        return NULL;
    return sp;
}

/* Hand the claimed job in sl to the engine. A job that cannot be sent is
 * committed at once (pending when it may go later, failed when never). */
static void submit(stg_batch *b, stg_batch_slot *sl)
{
    const stg_job *j = &sl->job;
    sl->used = true;
    sl->sent = false;
    sl->lost = false;
    sl->committed = sl->n429 = sl->n503 = 0;
    sl->b = b;
    b->active++;
    const stg_job_spec *spec = NULL;
    if (j->needs_input && !(spec = spec_of(b, j))) {
        /* Checked at start; a guard against a database edited by hand. */
        stg__batch_stop_for(b, STG_BATCH_NEEDS_INPUT,
                 "job %s needs its input file (secrets are not stored): give the same input "
                 "again", j->key);
        stg_job_outcome back = {.state = STG_JOB_PENDING};
        stg__batch_write_outcome(b, sl, &back);
        stg__batch_release(b, sl);
        return;
    }
    const char *headers[MAX_REQ_HEADERS + 1];
    size_t nh = 0;
    stg_quota_cost cost[STG_QUOTA_COSTS_MAX];
    size_t n_cost = 0;
    bool cost_ok = true;
    job_class cls = {0};
    /* Kept secrets hold the headers only when one of them is secret; else
     * the stored ones are all of the job's. */
    bool own_from_spec = spec && spec->headers;
    const char *const *own = own_from_spec ? (const char *const *)spec->headers
                                           : (const char *const *)j->headers;
    size_t n_own = own_from_spec ? spec->n_headers : SIZE_MAX;
    const char *refused = NULL, *refused_line = NULL;
    for (size_t i = 0; own && i < n_own && own[i] && nh < MAX_REQ_HEADERS; i++) {
        if (!refused && (refused = stg__batch_header_refused(own[i])))
            refused_line = own[i];
        bool overridden = false;
        for (size_t k = 0; k < b->n_headers && !overridden; k++)
            overridden = header_named(own[i], b->headers[k]);
        if (overridden)
            continue;
        if (header_named(own[i], STG_QUOTA_COST_HEADER))
            cost_ok &= take_cost(own[i], cost, &n_cost);
        else if (!take_class(own[i], &cls, &cost_ok))
            headers[nh++] = own[i];
    }
    for (size_t k = 0; k < b->n_headers && nh < MAX_REQ_HEADERS; k++) {
        if (header_named(b->headers[k], STG_QUOTA_COST_HEADER))
            cost_ok &= take_cost(b->headers[k], cost, &n_cost);
        else if (!take_class(b->headers[k], &cls, &cost_ok))
            headers[nh++] = b->headers[k];
    }
    if (!cls.has_priority)
        cls.priority = b->priority;
    if (!cls.has_tenant && b->tenant) {
        snprintf(cls.tenant, sizeof cls.tenant, "%s", b->tenant);
        cls.weight = b->weight;
    }
    headers[nh] = NULL;
    stg_request req = {
        .url = spec && spec->url ? spec->url : j->url,
        .method = j->method,
        .headers = headers,
        .body = j->body,
        .body_len = j->body_len,
        .idempotency_key = j->idempotency_key,
        .cost = cost_ok ? cost : NULL,
        .n_cost = cost_ok ? n_cost : 0,
        .priority = cls.priority,
        .tenant = cls.tenant[0] ? cls.tenant : NULL,
        .weight = cls.weight,
    };
    /* The body streams into out_dir, or towards the database (body.c). */
    stg__batch_body_init(&sl->body, b->out_dir, b->out_fd, j);
    req.body_sink = stg__batch_body_sink;
    req.body_sink_data = &sl->body;
    /* A malformed cost (a configuration header: stored ones were checked at
     * import) is refused like any invalid request. */
    int rc = cost_ok && !refused
                 ? stg_engine_submit(b->engine, &req, stg__batch_on_done, sl, &sl->req_id)
                 : STG_EINVAL;
    if (rc == STG_OK)
        return;
    /* Never sent: a final answer about this request, not about the server. */
    char msg[240];
    size_t rn = refused ? stg__http_line_name(refused_line) : 0; /* a token: no value shown */
    if (refused)
        snprintf(msg, sizeof msg, "the request was refused before sending: header %.*s %s",
                 (int)(rn > 64 ? 64 : rn), refused_line, refused);
    else
        snprintf(msg, sizeof msg, "the request was refused before sending: %s",
                 stg_strerror(rc));
    stg_job_outcome out = {.state = rc == STG_ENOMEM ? STG_JOB_PENDING : STG_JOB_FAILED,
                           .reason = "invalid_request",
                           .error = msg};
    stg__batch_write_outcome(b, sl, &out);
    if (rc == STG_ENOMEM)
        stg__batch_stop_for(b, STG_BATCH_STORE, "%s", "out of memory");
    stg__batch_release(b, sl);
}

/* Claim want more jobs onto the tail of the ahead list (one statement). */
static void claim_more(stg_batch *b, int want)
{
    STG_ASSERT(want > 0 && b->n_ahead + want <= b->nslots + b->ahead_max);
    int got = 0;
    bool more = false;
    int rc = stg__batch_src_claim(b, want, b->ahead + b->n_ahead, &got, &more);
    b->claims++;
    if (rc != STG_OK) {
        if (rc == STG_EUNAVAIL)
            stg__batch_stop_for(b, STG_BATCH_LIMITER, "%s", stg__batch_src_errmsg(b));
        else
            stg__batch_store_failed(b);
        return;
    }
    STG_ASSERT(got <= want && (b->source || got <= b->counts.n[STG_JOB_PENDING]));
    if (!more)
        b->exhausted = true;
    stg__batch_claimed(b, got); /* commit.c: committed before its first send */
    for (int i = 0; i < got && !b->source; i++)
        stg__batch_counts_move(&b->counts, STG_JOB_PENDING, STG_JOB_INFLIGHT);
    b->n_ahead += got;
}

/* Claim pending jobs for the free slots (and ahead_max more, when the list
 * of claimed ones runs short: one claim statement per ahead_max + 1 jobs
 * or more instead of one per pass), and submit them from the list. */
void stg__batch_refill(stg_batch *b)
{
    if (b->stopping || b->drained)
        return;
    int free_n = b->nslots - b->active;
    if (free_n <= 0)
        return;
    if (b->n_ahead < free_n && !b->exhausted)
        claim_more(b, free_n - b->n_ahead + b->ahead_max);
    if (b->stopping)
        return; /* the claim failed: what is claimed goes back at the end */
    int take = b->n_ahead < free_n ? b->n_ahead : free_n;
    int k = 0;
    for (int i = 0; i < b->nslots && k < take; i++) {
        if (b->slots[i].used)
            continue;
        b->slots[i].job = b->ahead[k++];
        submit(b, &b->slots[i]);
    }
    STG_ASSERT(k == take && b->active <= b->nslots);
    b->n_ahead -= take;
    memmove(b->ahead, b->ahead + take, (size_t)b->n_ahead * sizeof *b->ahead);
    memset(b->ahead + b->n_ahead, 0, (size_t)take * sizeof *b->ahead); /* moved out */
    STG_ASSERT(b->source || b->store_failed ||
               b->counts.n[STG_JOB_INFLIGHT] == b->active + b->n_ahead);
}

/* The claimed-ahead jobs back to pending, in one statement. */
void stg__batch_unclaim_ahead(stg_batch *b)
{
    if (b->n_ahead == 0)
        return;
    STG_ASSERT(!b->source); /* a source claims none ahead */
    if (!b->store_failed) {
        int moved = 0;
        if (stg__store_unclaim(b->store, b->ahead, b->n_ahead, b->run_id, stg__store_now_ms(),
                              &moved) == STG_OK) {
            for (int i = 0; i < moved; i++)
                stg__batch_counts_move(&b->counts, STG_JOB_INFLIGHT, STG_JOB_PENDING);
        } else {
            stg__batch_store_failed(b); /* they stay inflight, unsent: recovered */
        }
    }
    for (int i = 0; i < b->n_ahead; i++)
        stg__job_clear(&b->ahead[i]);
    b->n_ahead = 0;
}
