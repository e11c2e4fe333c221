/*
 * The work queue's calls on jobs: load, claim, mark_sent, finish, counts
 * and the per-host "not before" (see <stagger/redis/queue.h>; the scripts
 * are in queue_lua.c, the connection in queue_conn.c, the reading side in
 * queue_report.c).
 *
 * Invariants:
 *  - Each call is at most one script or command (one round trip), so a
 *    worker's cost per job is countable: one claim per batch of jobs, one
 *    finish per job, one sent-mark per non-idempotent job.
 *  - A load sends each job's class, tenant and weight (its Stagger-Priority
 *    and Stagger-Tenant headers) for the script to choose its lane; a
 *    claim sends the floor (fairq.h's constant), so the queue's floor is
 *    the in-process one.
 *  - A claimed job handed back to the caller is fully parsed (every field
 *    present, its id in 1..total) or the claim fails with STG_EIO: a
 *    foreign entry in the stream never becomes a request.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "core/fairq.h"
#include "queue_internal.h"
#include "util/assert.h"
#include "util/class_field.h"

#define LOAD_FIELDS 13

void stg_queue_job_clear(stg_queue_job *j)
{
    if (!j)
        return;
    free(j->key);
    free(j->method);
    free(j->url);
    if (j->headers)
        for (char **h = j->headers; *h; h++)
            free(*h);
    free(j->headers);
    free(j->body);
    free(j->idempotency_key);
    memset(j, 0, sizeof *j);
}

/* ---- load ---------------------------------------------------------------- */

/* "Name: value\n..." of a spec's headers (malloc'd). */
static char *join_headers(const stg_queue_spec *s)
{
    size_t len = 1;
    for (size_t i = 0; i < s->n_headers; i++)
        len += strlen(s->headers[i]) + 1;
    char *buf = malloc(len), *p = buf;
    if (!buf)
        return NULL;
    for (size_t i = 0; i < s->n_headers; i++) {
        size_t n = strlen(s->headers[i]);
        memcpy(p, s->headers[i], n);
        p += n;
        *p++ = '\n';
    }
    *p = '\0';
    return buf;
}

/* A spec's class, tenant and weight, as the store reads them from its
 * headers (src/store/report_class.c): Stagger-Priority's class name (""
 * when none or not a class), Stagger-Tenant's name ("" when none) and its
 * ";w=N" into w ("" when not given: the lane keeps its weight). */
static void class_of(const stg_queue_spec *s, char cls[16], char tenant[STG_TENANT_MAX + 2],
                     char w[32])
{
    cls[0] = tenant[0] = w[0] = '\0';
    for (size_t i = 0; i < s->n_headers; i++) {
        const char *h = s->headers[i];
        bool pr = !strncasecmp(h, STG__PRIORITY_FIELD ":", sizeof STG__PRIORITY_FIELD);
        bool te = !strncasecmp(h, STG__TENANT_FIELD ":", sizeof STG__TENANT_FIELD);
        if ((pr && cls[0]) || (te && tenant[0]) || (!pr && !te))
            continue;
        const char *v = h + (pr ? sizeof STG__PRIORITY_FIELD : sizeof STG__TENANT_FIELD);
        v += strspn(v, " \t");
        int p;
        char buf[STG_TENANT_MAX + 2];
        double weight = 0;
        snprintf(buf, sizeof buf, "%.*s", (int)strcspn(v, "; \t\r"), v);
        if (pr && stg_priority_parse(buf, &p) == STG_OK) {
            snprintf(cls, 16, "%s", stg_priority_name(p));
        } else if (te) {
            snprintf(tenant, STG_TENANT_MAX + 2, "%s", buf);
            if (stg__tenant_field_parse(v, buf, sizeof buf, &weight) && weight > 0)
                snprintf(w, 32, "%.17g", weight);
        }
    }
}

int stg_queue_load(stg_queue *q, const char *fingerprint, int64_t total,
                   const stg_queue_spec *jobs, size_t n, int64_t *added)
{
    if (added)
        *added = 0;
    if (!q || !fingerprint || strlen(fingerprint) != 64 || total < 1 || (n && !jobs) ||
        n > 400)
        return STG_EINVAL;
    for (size_t i = 0; i < n; i++)
        if (jobs[i].id < 1 || jobs[i].id > total || !jobs[i].key || !jobs[i].method ||
            !jobs[i].url || (jobs[i].n_headers && !jobs[i].headers))
            return STG_EINVAL;
    int argc = 3 + (int)n * LOAD_FIELDS;
    const char **argv = calloc((size_t)argc, sizeof *argv);
    size_t *lens = calloc((size_t)argc, sizeof *lens);
    char (*ids)[24] = calloc(n ? n : 1, sizeof *ids);
    char (*lines)[24] = calloc(n ? n : 1, sizeof *lines);
    char **hdrs = calloc(n ? n : 1, sizeof *hdrs);
    char (*cls)[16] = calloc(n ? n : 1, sizeof *cls);
    char (*tenants)[STG_TENANT_MAX + 2] = calloc(n ? n : 1, sizeof *tenants);
    char (*weights)[32] = calloc(n ? n : 1, sizeof *weights);
    int rc = STG_ENOMEM;
    char tot[24];
    if (!argv || !lens || !ids || !lines || !hdrs || !cls || !tenants || !weights)
        goto out;
    snprintf(tot, sizeof tot, "%" PRId64, total);
    argv[0] = q->base;
    argv[1] = fingerprint;
    argv[2] = tot;
    for (size_t i = 0; i < n; i++) {
        const stg_queue_spec *s = &jobs[i];
        const char **a = argv + 3 + i * LOAD_FIELDS;
        size_t *l = lens + 3 + i * LOAD_FIELDS;
        snprintf(ids[i], sizeof ids[i], "%" PRId64, s->id);
        if (!(hdrs[i] = join_headers(s)))
            goto out;
        a[0] = ids[i];
        a[1] = s->key;
        a[2] = s->method;
        a[3] = s->url;
        a[4] = hdrs[i];
        a[5] = s->body ? "1" : "0";
        a[6] = s->body ? (const char *)s->body : "";
        l[6] = s->body ? s->body_len : 0;
        a[7] = s->idempotency_key ? s->idempotency_key : "";
        a[8] = s->replay_safe ? "1" : "0";
        snprintf(lines[i], sizeof lines[i], "%" PRId64, s->line > 0 ? s->line : 0);
        a[9] = lines[i];
        class_of(s, cls[i], tenants[i], weights[i]);
        a[10] = cls[i];
        a[11] = tenants[i];
        a[12] = weights[i];
        for (int k = 0; k < LOAD_FIELDS; k++)
            if (k != 6)
                l[k] = strlen(a[k]);
    }
    for (int k = 0; k < 3; k++)
        lens[k] = strlen(argv[k]);
    bool eio;
    redisReply *r = stg__queue_eval(q, STG__Q_LOAD, argc, argv, lens, &eio);
    long long got;
    if (!r) {
        rc = eio ? STG_EIO : STG_EUNAVAIL;
    } else if (r->type != REDIS_REPLY_ARRAY || r->elements != 2 ||
               !stg__queue_int(r->element[0], &got)) {
        rc = stg__queue_fail(q, STG_EIO, "Redis at %s sent an unexpected reply to a load",
                             q->where);
    } else if (got < 0) {
        rc = stg__queue_fail(q, STG_ESTATE,
                             "queue %s holds another job set (fingerprint %.12s..., this input "
                             "%.12s...): use another queue name",
                             q->url.key, r->element[1]->str ? r->element[1]->str : "?",
                             fingerprint);
    } else {
        if (added)
            *added = got;
        rc = STG_OK;
    }
    freeReplyObject(r);
out:
    if (rc == STG_ENOMEM)
        stg__queue_fail(q, STG_ENOMEM, "out of memory");
    for (size_t i = 0; hdrs && i < n; i++)
        free(hdrs[i]);
    free(hdrs);
    free(cls);
    free(tenants);
    free(weights);
    free(ids);
    free(lines);
    free(lens);
    free(argv);
    return rc;
}

/* ---- claim --------------------------------------------------------------- */

static char *dup_str(const redisReply *r)
{
    char *s = malloc(r->len + 1);
    if (s) {
        memcpy(s, r->str, r->len);
        s[r->len] = '\0';
    }
    return s;
}

static char **split_headers(const redisReply *r)
{
    size_t n = 0;
    for (size_t i = 0; i < r->len; i++)
        n += r->str[i] == '\n';
    if (n == 0)
        return NULL;
    char **hs = calloc(n + 1, sizeof *hs);
    if (!hs)
        return NULL;
    const char *p = r->str, *end = r->str + r->len;
    for (size_t k = 0; k < n && p < end; k++) {
        const char *nl = memchr(p, '\n', (size_t)(end - p));
        size_t len = (size_t)(nl - p);
        if (!(hs[k] = malloc(len + 1)))
            break;
        memcpy(hs[k], p, len);
        hs[k][len] = '\0';
        p = nl + 1;
    }
    return hs;
}

/* One {entry, deliveries, fields} of the claim reply into *j. */
static int parse_job(stg_queue *q, const redisReply *e, int64_t total, stg_queue_job *j)
{
    memset(j, 0, sizeof *j);
    long long dc;
    if (e->type != REDIS_REPLY_ARRAY || e->elements != 3 ||
        e->element[0]->type != REDIS_REPLY_STRING || e->element[0]->len >= sizeof j->entry ||
        !stg__queue_int(e->element[1], &dc) || e->element[2]->type != REDIS_REPLY_ARRAY)
        return stg__queue_fail(q, STG_EIO, "a queue entry is malformed");
    memcpy(j->entry, e->element[0]->str, e->element[0]->len);
    j->deliveries = (int)dc;
    const redisReply *f = e->element[2];
    bool has_body = false, seen_id = false, seen_rs = false;
    const redisReply *body = NULL, *hdr = NULL;
    for (size_t i = 0; i + 1 < f->elements; i += 2) {
        const redisReply *k = f->element[i], *v = f->element[i + 1];
        if (k->type != REDIS_REPLY_STRING || v->type != REDIS_REPLY_STRING)
            continue;
        const char *name = k->str;
        long long id;
        if (!strcmp(name, "id") && stg__queue_int(v, &id)) {
            j->id = id;
            seen_id = true;
        } else if (!strcmp(name, "key"))
            j->key = dup_str(v);
        else if (!strcmp(name, "m"))
            j->method = dup_str(v);
        else if (!strcmp(name, "u"))
            j->url = dup_str(v);
        else if (!strcmp(name, "h"))
            hdr = v;
        else if (!strcmp(name, "hb"))
            has_body = v->len == 1 && v->str[0] == '1';
        else if (!strcmp(name, "b"))
            body = v;
        else if (!strcmp(name, "k") && v->len)
            j->idempotency_key = dup_str(v);
        else if (!strcmp(name, "rs")) {
            j->replay_safe = v->len == 1 && v->str[0] == '1';
            seen_rs = true;
        }
    }
    if (has_body && body) {
        if ((j->body = malloc(body->len + 1))) {
            memcpy(j->body, body->str, body->len);
            j->body[body->len] = '\0';
            j->body_len = body->len;
        }
    }
    if (hdr && hdr->len)
        j->headers = split_headers(hdr);
    if (!seen_id || !seen_rs || j->id < 1 || (total > 0 && j->id > total) || !j->key ||
        !j->method || !j->url || (has_body && (!body || !j->body)) ||
        (hdr && hdr->len && !j->headers)) {
        stg_queue_job_clear(j);
        return stg__queue_fail(q, STG_EIO, "queue entry %s is malformed or memory ran out",
                               e->element[0]->str);
    }
    return STG_OK;
}

int stg_queue_claim(stg_queue *q, int max, stg_queue_job *out, int *n, int *to_review,
                    stg_queue_counts *counts)
{
    *n = 0;
    if (to_review)
        *to_review = 0;
    if (!q || max < 0 || max > 10000 || (max && !out))
        return STG_EINVAL;
    char smax[16], idle[24], maxd[16], floor_every[16];
    snprintf(smax, sizeof smax, "%d", max);
    /* The floor of the lower classes is the in-process queue's (fairq.h). */
    snprintf(floor_every, sizeof floor_every, "%d", STG__FQ_FLOOR_EVERY);
    snprintf(idle, sizeof idle, "%" PRId64, q->claim_idle_us / 1000);
    snprintf(maxd, sizeof maxd, "%d", q->max_deliveries);
    const char *argv[] = {q->base, q->worker, smax, idle, maxd, floor_every};
    bool eio;
    redisReply *r = stg__queue_eval(q, STG__Q_CLAIM, 6, argv, NULL, &eio);
    if (!r)
        return eio ? STG_EIO : STG_EUNAVAIL;
    stg_queue_counts c;
    long long rev;
    int rc = STG_OK;
    if (r->type != REDIS_REPLY_ARRAY || r->elements != 3 ||
        !stg__queue_counts_from(r->element[0], &c) ||
        r->element[1]->type != REDIS_REPLY_ARRAY || !stg__queue_int(r->element[2], &rev) ||
        r->element[1]->elements > (size_t)max) {
        freeReplyObject(r);
        return stg__queue_fail(q, STG_EIO, "Redis at %s sent an unexpected reply to a claim",
                               q->where);
    }
    const redisReply *jobs = r->element[1];
    for (size_t i = 0; i < jobs->elements; i++) {
        if ((rc = parse_job(q, jobs->element[i], c.total, &out[*n])) != STG_OK)
            break; /* left delivered: taken again after claim_idle_us */
        (*n)++;
    }
    STG_ASSERT(*n <= max); /* the script returns at most max (checked above) */
    if (to_review)
        *to_review = (int)rev;
    if (counts)
        *counts = c;
    freeReplyObject(r);
    return rc;
}

int stg_queue_mark_sent(stg_queue *q, const stg_queue_job *j)
{
    if (!q || !j || j->id < 1)
        return STG_EINVAL;
    char key[sizeof q->base + 8], id[24];
    snprintf(key, sizeof key, "%ssent", q->base);
    snprintf(id, sizeof id, "%" PRId64, j->id);
    const char *argv[] = {"HSET", key, id, q->worker};
    redisReply *r = stg__queue_cmd(q, 4, argv, NULL);
    if (!r)
        return STG_EUNAVAIL;
    int rc = r->type == REDIS_REPLY_INTEGER
                 ? STG_OK
                 : stg__queue_fail(q, STG_EUNAVAIL, "HSET: Redis at %s refused the sent-mark",
                                   q->where);
    freeReplyObject(r);
    return rc;
}

/* ---- renew ----------------------------------------------------------------- */

int stg_queue_renew(stg_queue *q, const char *const *entries, size_t n, bool *mine)
{
    if (!q || (n && (!entries || !mine)) || n > 4000)
        return STG_EINVAL;
    const char **argv = malloc((n + 2) * sizeof *argv);
    if (!argv)
        return stg__queue_fail(q, STG_ENOMEM, "out of memory");
    argv[0] = q->base;
    argv[1] = q->worker;
    for (size_t i = 0; i < n; i++) {
        if (!entries[i] || !entries[i][0]) {
            free(argv);
            return STG_EINVAL;
        }
        argv[i + 2] = entries[i];
    }
    bool eio = false;
    redisReply *r = stg__queue_eval(q, STG__Q_RENEW, (int)n + 2, argv, NULL, &eio);
    free(argv);
    if (!r)
        return eio ? STG_EIO : STG_EUNAVAIL;
    int rc = STG_OK;
    if (r->type != REDIS_REPLY_ARRAY || r->elements != n) {
        rc = stg__queue_fail(q, STG_EIO, "renew: Redis at %s sent an unexpected reply", q->where);
    } else {
        for (size_t i = 0; i < n; i++)
            mine[i] = r->element[i]->type == REDIS_REPLY_INTEGER && r->element[i]->integer == 1;
    }
    freeReplyObject(r);
    return rc;
}

/* ---- finish ---------------------------------------------------------------- */

int stg_queue_finish(stg_queue *q, const stg_queue_job *j, const stg_queue_outcome *o,
                     bool *recorded)
{
    if (recorded)
        *recorded = false;
    if (!q || !j || !o || j->id < 1 || !j->entry[0] || o->state == STG_QUEUE_INFLIGHT ||
        (unsigned)o->state >= STG_QUEUE_NSTATES)
        return STG_EINVAL;
    char id[24], status[16], attempts[16], n429[16], n503[16], lat[24], idle[24];
    snprintf(id, sizeof id, "%" PRId64, j->id);
    snprintf(status, sizeof status, "%d", o->status);
    snprintf(attempts, sizeof attempts, "%d", o->attempts);
    snprintf(n429, sizeof n429, "%d", o->status_429);
    snprintf(n503, sizeof n503, "%d", o->status_503);
    snprintf(lat, sizeof lat, "%" PRId64, o->latency_us > 0 ? o->latency_us / 1000 : 0);
    snprintf(idle, sizeof idle, "%" PRId64, q->claim_idle_us / 1000);
    const char *argv[16] = {q->base,
                            q->worker,
                            j->entry,
                            id,
                            stg_queue_state_name(o->state),
                            status,
                            attempts,
                            n429,
                            n503,
                            o->reason ? o->reason : "",
                            o->error ? o->error : "",
                            o->file ? o->file : "",
                            lat,
                            o->body ? "1" : "0",
                            o->body ? (const char *)o->body : "",
                            idle};
    size_t lens[16];
    for (int i = 0; i < 16; i++)
        lens[i] = i == 14 ? (o->body ? o->body_len : 0) : strlen(argv[i]);
    bool eio;
    redisReply *r = stg__queue_eval(q, STG__Q_FINISH, 16, argv, lens, &eio);
    if (!r)
        return eio ? STG_EIO : STG_EUNAVAIL;
    long long v;
    int rc = stg__queue_int(r, &v)
                 ? STG_OK
                 : stg__queue_fail(q, STG_EIO, "Redis at %s sent an unexpected reply to a finish",
                                   q->where);
    if (rc == STG_OK && recorded)
        *recorded = v == 1;
    freeReplyObject(r);
    return rc;
}

/* ---- counts and holds ---------------------------------------------------- */

int stg_queue_counts_get(stg_queue *q, stg_queue_counts *c)
{
    memset(c, 0, sizeof *c);
    if (!q)
        return STG_EINVAL;
    const char *argv[] = {q->base};
    bool eio;
    redisReply *r = stg__queue_eval(q, STG__Q_COUNTS, 1, argv, NULL, &eio);
    if (!r)
        return eio ? STG_EIO : STG_EUNAVAIL;
    int rc = stg__queue_counts_from(r, c)
                 ? STG_OK
                 : stg__queue_fail(q, STG_EIO, "Redis at %s sent unexpected counts", q->where);
    freeReplyObject(r);
    return rc;
}

static bool host_ok(const char *host)
{
    return host && host[0] && strlen(host) <= 300;
}

int stg_queue_hold(stg_queue *q, const char *host, int64_t wait_us)
{
    if (!q || !host_ok(host) || wait_us < 0)
        return STG_EINVAL;
    int64_t ms = (wait_us + 999) / 1000;
    if (ms < 1)
        return STG_OK;
    char w[24];
    snprintf(w, sizeof w, "%" PRId64, ms);
    const char *argv[] = {q->base, host, w};
    bool eio;
    redisReply *r = stg__queue_eval(q, STG__Q_HOLD, 3, argv, NULL, &eio);
    if (!r)
        return eio ? STG_EIO : STG_EUNAVAIL;
    freeReplyObject(r);
    return STG_OK;
}

int stg_queue_hold_left(stg_queue *q, const char *host, int64_t *left_us)
{
    *left_us = 0;
    if (!q || !host_ok(host))
        return STG_EINVAL;
    const char *argv[] = {q->base, host};
    bool eio;
    redisReply *r = stg__queue_eval(q, STG__Q_HOLD_LEFT, 2, argv, NULL, &eio);
    if (!r)
        return eio ? STG_EIO : STG_EUNAVAIL;
    long long v = 0;
    int rc = stg__queue_int(r, &v) ? STG_OK : STG_EIO;
    *left_us = v > 0 ? (int64_t)v * 1000 : 0;
    freeReplyObject(r);
    return rc;
}

/* ---- admissions per class ---------------------------------------------- */

int stg_queue_classes_add(stg_queue *q, const stg_queue_class_add *v, size_t n)
{
    if (!q || (n && !v) || n > 800)
        return STG_EINVAL;
    for (size_t i = 0; i < n; i++)
        if (!v[i].cls || strlen(v[i].cls) >= 16 ||
            (v[i].tenant && strlen(v[i].tenant) > STG_TENANT_MAX))
            return STG_EINVAL;
    if (!n)
        return STG_OK;
    int argc = 2 + (int)n * 5;
    const char **argv = calloc((size_t)argc, sizeof *argv);
    char (*nums)[3][24] = calloc(n, sizeof *nums);
    char token[sizeof q->worker + 48];
    int rc = STG_ENOMEM;
    if (!argv || !nums) {
        stg__queue_fail(q, STG_ENOMEM, "out of memory");
        goto out;
    }
    /* This worker and call: another call (or worker) never has it. */
    snprintf(token, sizeof token, "%s:%lld:%lld", q->worker, (long long)stg__queue_wall_ms(),
             (long long)stg__queue_mono_us());
    argv[0] = q->base;
    argv[1] = token;
    for (size_t i = 0; i < n; i++) {
        const char **a = argv + 2 + i * 5;
        snprintf(nums[i][0], sizeof nums[i][0], "%lld", (long long)v[i].admitted);
        snprintf(nums[i][1], sizeof nums[i][1], "%lld", (long long)v[i].wait_ms);
        snprintf(nums[i][2], sizeof nums[i][2], "%lld", (long long)v[i].wait_max_ms);
        a[0] = v[i].cls;
        a[1] = v[i].tenant ? v[i].tenant : "";
        a[2] = nums[i][0];
        a[3] = nums[i][1];
        a[4] = nums[i][2];
    }
    bool eio;
    redisReply *r = stg__queue_eval(q, STG__Q_CLASSES, argc, argv, NULL, &eio);
    rc = r ? STG_OK : eio ? STG_EIO : STG_EUNAVAIL;
    freeReplyObject(r);
out:
    free(nums);
    free(argv);
    return rc;
}
