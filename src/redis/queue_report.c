/*
 * The reading side of the work queue: the report (counts, per worker,
 * latency percentiles, 429s, per class and tenant) and the export (one row
 * per job, in load order). Both only read (HGET, LRANGE, HGETALL, XRANGE, XPENDING): a
 * report never changes the queue it looks at.
 *
 * Invariant: a job's state in a row is its recorded outcome when it has
 * one, else inflight when its entry is in the pending list of its lane's
 * group, else pending: the same rule as the counts, so an export adds up
 * to a report. The export reads every lane (queue.h: one stream per class
 * and tenant) and merges them by job id (input order when the lanes were
 * loaded in id order, as stagger batch loads).
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "queue_internal.h"

static int cmp_ll(const void *a, const void *b)
{
    long long x = *(const long long *)a, y = *(const long long *)b;
    return (x > y) - (x < y);
}

static int64_t pct(const long long *v, size_t n, double p)
{
    if (n == 0)
        return 0;
    size_t i = (size_t)(p * (double)(n - 1) + 0.5);
    return v[i < n ? i : n - 1];
}

static int latencies(stg_queue *q, stg_queue_report *r)
{
    char key[sizeof q->base + 8];
    snprintf(key, sizeof key, "%slat", q->base);
    const char *argv[] = {"LRANGE", key, "0", "-1"};
    redisReply *x = stg__queue_cmd(q, 4, argv, NULL);
    if (!x)
        return STG_EUNAVAIL;
    int rc = STG_OK;
    if (x->type == REDIS_REPLY_ARRAY && x->elements) {
        long long *v = malloc(x->elements * sizeof *v);
        if (!v)
            rc = STG_ENOMEM;
        size_t n = 0;
        for (size_t i = 0; v && i < x->elements; i++)
            if (stg__queue_int(x->element[i], &v[n]))
                n++;
        if (v) {
            qsort(v, n, sizeof *v, cmp_ll);
            r->lat_n = (int64_t)n;
            r->lat_p50_ms = pct(v, n, 0.50);
            r->lat_p90_ms = pct(v, n, 0.90);
            r->lat_p99_ms = pct(v, n, 0.99);
            r->lat_max_ms = n ? v[n - 1] : 0;
        }
        free(v);
    }
    freeReplyObject(x);
    return rc;
}

static stg_queue_worker_row *worker_row(stg_queue_report *r, const char *name, size_t len)
{
    for (size_t i = 0; i < r->n_workers; i++)
        if (strlen(r->workers[i].name) == len && !memcmp(r->workers[i].name, name, len))
            return &r->workers[i];
    stg_queue_worker_row *w = realloc(r->workers, (r->n_workers + 1) * sizeof *w);
    if (!w)
        return NULL;
    r->workers = w;
    w = &r->workers[r->n_workers];
    memset(w, 0, sizeof *w);
    if (!(w->name = malloc(len + 1)))
        return NULL;
    memcpy(w->name, name, len);
    w->name[len] = '\0';
    r->n_workers++;
    return w;
}

/* HGET of the queue's hash named what (NULL: no answer, q->err says). */
static redisReply *hget(stg_queue *q, const char *what, const char *field)
{
    char key[sizeof q->base + 8];
    snprintf(key, sizeof key, "%s%s", q->base, what);
    const char *argv[] = {"HGET", key, field};
    return stg__queue_cmd(q, 3, argv, NULL);
}

/* HGETALL of the queue's hash named what (as hget). */
static redisReply *hgetall(stg_queue *q, const char *what)
{
    char key[sizeof q->base + 8];
    snprintf(key, sizeof key, "%s%s", q->base, what);
    const char *argv[] = {"HGETALL", key};
    return stg__queue_cmd(q, 2, argv, NULL);
}

static int workers(stg_queue *q, stg_queue_report *r)
{
    redisReply *x = hgetall(q, "workers");
    if (!x)
        return STG_EUNAVAIL;
    int rc = STG_OK;
    for (size_t i = 0; x->type == REDIS_REPLY_ARRAY && i + 1 < x->elements; i += 2) {
        const redisReply *f = x->element[i];
        long long v;
        const char *bar = f->type == REDIS_REPLY_STRING ? strrchr(f->str, '|') : NULL;
        if (!bar || !stg__queue_int(x->element[i + 1], &v))
            continue;
        stg_queue_worker_row *w = worker_row(r, f->str, (size_t)(bar - f->str));
        if (!w) {
            rc = STG_ENOMEM;
            break;
        }
        if (!strcmp(bar + 1, "seen"))
            w->seen_ms = v;
        for (int s = 0; s < STG_QUEUE_NSTATES; s++)
            if (!strcmp(bar + 1, stg_queue_state_name((stg_queue_state)s)))
                w->n[s] = v;
    }
    freeReplyObject(x);
    return rc;
}

int stg_queue_report_get(stg_queue *q, stg_queue_report *r)
{
    memset(r, 0, sizeof *r);
    if (!q)
        return STG_EINVAL;
    redisReply *x = hget(q, "meta", "fp");
    if (!x)
        return STG_EUNAVAIL;
    if (x->type != REDIS_REPLY_STRING) {
        freeReplyObject(x);
        return stg__queue_fail(q, STG_ENOTFOUND, "no queue %s at %s (nothing loaded)",
                               q->url.key, q->where);
    }
    snprintf(r->fingerprint, sizeof r->fingerprint, "%s", x->str);
    freeReplyObject(x);
    int rc = stg_queue_counts_get(q, &r->counts);
    if (rc == STG_OK)
        rc = latencies(q, r);
    if (rc == STG_OK)
        rc = workers(q, r);
    if (rc != STG_OK)
        stg_queue_report_free(r);
    return rc;
}

void stg_queue_report_free(stg_queue_report *r)
{
    if (!r)
        return;
    for (size_t i = 0; i < r->n_workers; i++)
        free(r->workers[i].name);
    free(r->workers);
    r->workers = NULL;
    r->n_workers = 0;
}

/* ---- export ------------------------------------------------------------- */

/* The number of the queue's last lane (0: only {NAME}:jobs, as a queue an
 * older stagger loaded). */
static int lanes_n(stg_queue *q, long long *n)
{
    *n = 0;
    redisReply *x = hget(q, "lanes", "n");
    if (!x)
        return STG_EUNAVAIL;
    if (!stg__queue_int(x, n) || *n < 0 || *n > 1000000)
        *n = 0;
    freeReplyObject(x);
    return STG_OK;
}

/* Lane k's stream (0: {NAME}:jobs). */
static void lane_stream(const stg_queue *q, long long k, char *buf, size_t len)
{
    if (k == 0)
        snprintf(buf, len, "%sjobs", q->base);
    else
        snprintf(buf, len, "%slane:%lld", q->base, k);
}

/* An entry as the claim hands it out: "ID" in lane 0, "ID@K" in lane K. */
static void entry_name(const char *eid, long long k, char *buf, size_t len)
{
    if (k == 0)
        snprintf(buf, len, "%s", eid);
    else
        snprintf(buf, len, "%s@%lld", eid, k);
}

/* The entries in the groups' pending lists of every lane, as entry_name
 * writes them, sorted (inflight jobs). */
typedef struct pel_set {
    char **ids;
    size_t n;
} pel_set;

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

static int pel_load(stg_queue *q, pel_set *p)
{
    memset(p, 0, sizeof *p);
    long long nl;
    int rc = lanes_n(q, &nl);
    for (long long k = 0; rc == STG_OK && k <= nl; k++) {
        char key[sizeof q->base + 32];
        lane_stream(q, k, key, sizeof key);
        const char *argv[] = {"XPENDING", key, STG__Q_GROUP, "-", "+", "1000000"};
        redisReply *x = stg__queue_cmd(q, 6, argv, NULL);
        if (!x)
            return STG_EUNAVAIL;
        if (x->type == REDIS_REPLY_ARRAY && x->elements) {
            char **v = realloc(p->ids, (p->n + x->elements) * sizeof *v);
            if (!v)
                rc = STG_ENOMEM;
            else
                p->ids = v;
            for (size_t i = 0; v && i < x->elements; i++) {
                const redisReply *e = x->element[i];
                char name[96];
                if (e->type != REDIS_REPLY_ARRAY || e->elements < 1 ||
                    e->element[0]->type != REDIS_REPLY_STRING)
                    continue;
                entry_name(e->element[0]->str, k, name, sizeof name);
                if ((p->ids[p->n] = strdup(name)))
                    p->n++;
            }
        }
        freeReplyObject(x);
    }
    if (p->n)
        qsort(p->ids, p->n, sizeof *p->ids, cmp_str);
    return rc;
}

static void pel_free(pel_set *p)
{
    for (size_t i = 0; i < p->n; i++)
        free(p->ids[i]);
    free(p->ids);
}

static const char *fget(const redisReply *f, const char *name, size_t *len)
{
    for (size_t i = 0; f && f->type == REDIS_REPLY_ARRAY && i + 1 < f->elements; i += 2)
        if (f->element[i]->type == REDIS_REPLY_STRING && !strcmp(f->element[i]->str, name) &&
            f->element[i + 1]->type == REDIS_REPLY_STRING) {
            if (len)
                *len = f->element[i + 1]->len;
            return f->element[i + 1]->str;
        }
    return NULL;
}

static long long fint(const redisReply *f, const char *name)
{
    const char *v = fget(f, name, NULL);
    return v ? strtoll(v, NULL, 10) : 0;
}

/* One row: the entry's fields and, when it has one, the job's outcome. */
static int one_row(stg_queue *q, const redisReply *e, long long lane, const pel_set *pel,
                   unsigned mask, bool bodies, int (*fn)(void *, const stg_queue_row *),
                   void *data)
{
    const redisReply *f = e->element[1];
    const char *id = fget(f, "id", NULL);
    if (!id)
        return STG_OK;
    char key[sizeof q->base + 32];
    snprintf(key, sizeof key, "%sres:%s", q->base, id);
    const char *argv[] = {"HGETALL", key};
    redisReply *res = stg__queue_cmd(q, 2, argv, NULL);
    if (!res)
        return STG_EUNAVAIL;
    stg_queue_row row;
    memset(&row, 0, sizeof row);
    row.id = strtoll(id, NULL, 10);
    row.key = fget(f, "key", NULL);
    row.method = fget(f, "m", NULL);
    row.url = fget(f, "u", NULL);
    const char *st = fget(res, "state", NULL);
    row.state = STG_QUEUE_PENDING;
    if (st) {
        for (int s = STG_QUEUE_DONE; s < STG_QUEUE_NSTATES; s++)
            if (!strcmp(st, stg_queue_state_name((stg_queue_state)s)))
                row.state = (stg_queue_state)s;
    } else {
        char name[96];
        entry_name(e->element[0]->str, lane, name, sizeof name);
        const char *eid = name;
        if (pel->n && bsearch(&eid, pel->ids, pel->n, sizeof *pel->ids, cmp_str))
            row.state = STG_QUEUE_INFLIGHT;
    }
    row.status = (int)fint(res, "status");
    row.attempts = (int)fint(res, "attempts");
    row.deliveries = (int)fint(res, "deliveries");
    row.reason = fget(res, "reason", NULL);
    row.error = fget(res, "error", NULL);
    row.file = fget(res, "file", NULL);
    row.worker = fget(res, "worker", NULL);
    row.latency_ms = fint(res, "lat");
    row.finished_ms = fint(res, "finished");
    row.line = fint(f, "ln");
    if (bodies)
        row.body = fget(res, "body", &row.body_len);
    int rc = STG_OK;
    if (!mask || (mask & (1u << row.state)))
        rc = fn(data, &row);
    freeReplyObject(res);
    return rc;
}

/* One lane's entries being read for the export, 500 at a time. */
typedef struct lane_cursor {
    redisReply *batch; /* NULL: read the next one */
    size_t pos;
    bool done;
    char start[64];
} lane_cursor;

/* The lane's current entry (NULL when it has no more); reads a batch when
 * the last one is spent. */
static int cursor_peek(stg_queue *q, long long k, lane_cursor *c, const redisReply **out)
{
    *out = NULL;
    for (;;) {
        if (c->done)
            return STG_OK;
        if (c->batch) {
            size_t n = c->batch->type == REDIS_REPLY_ARRAY ? c->batch->elements : 0;
            while (c->pos < n) {
                const redisReply *e = c->batch->element[c->pos];
                if (e->type == REDIS_REPLY_ARRAY && e->elements == 2 &&
                    e->element[0]->type == REDIS_REPLY_STRING) {
                    *out = e;
                    return STG_OK;
                }
                c->pos++;
            }
            if (n < 500)
                c->done = true;
            freeReplyObject(c->batch);
            c->batch = NULL;
            continue;
        }
        char key[sizeof q->base + 32];
        lane_stream(q, k, key, sizeof key);
        const char *argv[] = {"XRANGE", key, c->start, "+", "COUNT", "500"};
        if (!(c->batch = stg__queue_cmd(q, 6, argv, NULL)))
            return STG_EUNAVAIL;
        c->pos = 0;
    }
}

int stg_queue_export(stg_queue *q, unsigned state_mask, bool bodies,
                     int (*fn)(void *data, const stg_queue_row *row), void *data)
{
    if (!q || !fn)
        return STG_EINVAL;
    long long nl;
    int rc = lanes_n(q, &nl);
    if (rc != STG_OK)
        return rc;
    pel_set pel;
    if ((rc = pel_load(q, &pel)) != STG_OK) {
        pel_free(&pel);
        return rc;
    }
    lane_cursor *cur = calloc((size_t)nl + 1, sizeof *cur);
    if (!cur) {
        pel_free(&pel);
        return STG_ENOMEM;
    }
    for (long long k = 0; k <= nl; k++)
        snprintf(cur[k].start, sizeof cur[k].start, "-");
    /* The lanes merged by job id: each lane is in load order, and a load
     * pushes the input in id order, so the rows come in input order. */
    while (rc == STG_OK) {
        long long best = -1, best_id = 0;
        const redisReply *be = NULL;
        for (long long k = 0; rc == STG_OK && k <= nl; k++) {
            const redisReply *e;
            rc = cursor_peek(q, k, &cur[k], &e);
            long long id = e ? fint(e->element[1], "id") : 0;
            if (e && (!be || id < best_id)) {
                be = e;
                best = k;
                best_id = id;
            }
        }
        if (rc != STG_OK || !be)
            break;
        rc = one_row(q, be, best, &pel, state_mask, bodies, fn, data);
        snprintf(cur[best].start, sizeof cur[best].start, "(%s", be->element[0]->str);
        cur[best].pos++;
    }
    for (long long k = 0; k <= nl; k++)
        freeReplyObject(cur[k].batch);
    free(cur);
    pel_free(&pel);
    return rc;
}

/* ---- per class and tenant ------------------------------------------------ */

static stg_queue_class_row *class_row(stg_queue_class_row **rows, size_t *n, const char *cls,
                                      size_t cls_len, const char *tenant, size_t tenant_len)
{
    if (cls_len >= sizeof(*rows)->cls || tenant_len >= sizeof(*rows)->tenant)
        return NULL;
    for (size_t i = 0; i < *n; i++) {
        stg_queue_class_row *c = &(*rows)[i];
        if (strlen(c->cls) == cls_len && !memcmp(c->cls, cls, cls_len) &&
            strlen(c->tenant) == tenant_len && !memcmp(c->tenant, tenant, tenant_len))
            return c;
    }
    stg_queue_class_row *v = realloc(*rows, (*n + 1) * sizeof *v);
    if (!v)
        return NULL;
    *rows = v;
    stg_queue_class_row *c = &v[(*n)++];
    memset(c, 0, sizeof *c);
    memcpy(c->cls, cls, cls_len);
    memcpy(c->tenant, tenant, tenant_len);
    return c;
}

static int cmp_class(const void *a, const void *b)
{
    const stg_queue_class_row *x = a, *y = b;
    int d = strcmp(x->cls, y->cls);
    return d ? d : strcmp(x->tenant, y->tenant);
}

/* The jobs in flight per class: each entry of the pending list's fields c
 * and t (the list is as long as the jobs the workers hold). */
static int inflight(stg_queue *q, stg_queue_class_row **rows, size_t *n)
{
    pel_set pel;
    int rc = pel_load(q, &pel);
    for (size_t i = 0; rc == STG_OK && i < pel.n; i++) {
        char eid[96], key[sizeof q->base + 32];
        snprintf(eid, sizeof eid, "%s", pel.ids[i]);
        char *at = strchr(eid, '@');
        long long k = 0;
        if (at) {
            *at = '\0';
            k = strtoll(at + 1, NULL, 10);
        }
        lane_stream(q, k, key, sizeof key);
        const char *argv[] = {"XRANGE", key, eid, eid};
        redisReply *x = stg__queue_cmd(q, 4, argv, NULL);
        if (!x) {
            rc = STG_EUNAVAIL;
            break;
        }
        if (x->type == REDIS_REPLY_ARRAY && x->elements == 1 &&
            x->element[0]->type == REDIS_REPLY_ARRAY && x->element[0]->elements == 2) {
            const redisReply *f = x->element[0]->element[1];
            size_t cl = 0, tl = 0;
            const char *c = fget(f, "c", &cl), *t = fget(f, "t", &tl);
            stg_queue_class_row *r = class_row(rows, n, c ? c : "", c ? cl : 0, t ? t : "",
                                               t ? tl : 0);
            if (r) {
                r->has_jobs = true;
                r->n[STG_QUEUE_INFLIGHT]++;
            }
        }
        freeReplyObject(x);
    }
    pel_free(&pel);
    return rc;
}

int stg_queue_classes_get(stg_queue *q, stg_queue_class_row **rows, size_t *n)
{
    if (!rows || !n)
        return STG_EINVAL;
    *rows = NULL;
    *n = 0;
    if (!q)
        return STG_EINVAL;
    redisReply *x = hgetall(q, "classes");
    if (!x)
        return STG_EUNAVAIL;
    int64_t *total = NULL; /* per row: the jobs loaded */
    size_t n_total = 0;
    int rc = STG_OK;
    /* "CLASS|TENANT|what": the class has no '|', the tenant none either
     * (stg_tenant_check), what is a state, total or an admission's. */
    for (size_t i = 0; x->type == REDIS_REPLY_ARRAY && i + 1 < x->elements; i += 2) {
        const redisReply *f = x->element[i];
        long long v;
        if (f->type != REDIS_REPLY_STRING || !stg__queue_int(x->element[i + 1], &v))
            continue;
        const char *bar1 = memchr(f->str, '|', f->len), *bar2 = strrchr(f->str, '|');
        if (!bar1 || bar2 == bar1)
            continue;
        stg_queue_class_row *c = class_row(rows, n, f->str, (size_t)(bar1 - f->str), bar1 + 1,
                                           (size_t)(bar2 - bar1 - 1));
        if (!c)
            continue; /* a name too long is not one stagger wrote */
        size_t k = (size_t)(c - *rows);
        if (k >= n_total) {
            int64_t *t = realloc(total, (k + 1) * sizeof *t);
            if (!t) {
                rc = STG_ENOMEM;
                break;
            }
            memset(t + n_total, 0, (k + 1 - n_total) * sizeof *t);
            total = t;
            n_total = k + 1;
        }
        const char *what = bar2 + 1;
        if (!strcmp(what, "total")) {
            total[k] = v;
            c->has_jobs = true;
        } else if (!strcmp(what, "admitted")) {
            c->admitted = v;
            c->has_admitted = true;
        } else if (!strcmp(what, "wait_ms")) {
            c->wait_ms = v;
        } else if (!strcmp(what, "wait_max_ms")) {
            c->wait_max_ms = v;
        } else {
            for (int s = STG_QUEUE_DONE; s < STG_QUEUE_NSTATES; s++)
                if (!strcmp(what, stg_queue_state_name((stg_queue_state)s))) {
                    c->n[s] = v;
                    c->has_jobs = true;
                }
        }
    }
    freeReplyObject(x);
    if (rc == STG_OK && *n)
        rc = inflight(q, rows, n);
    for (size_t i = 0; rc == STG_OK && i < *n; i++) {
        stg_queue_class_row *c = &(*rows)[i];
        int64_t left = i < n_total ? total[i] : 0;
        for (int s = STG_QUEUE_INFLIGHT; s < STG_QUEUE_NSTATES; s++)
            left -= c->n[s];
        c->n[STG_QUEUE_PENDING] = left > 0 ? left : 0;
    }
    free(total);
    if (rc != STG_OK) {
        free(*rows);
        *rows = NULL;
        *n = 0;
    } else if (*n) {
        qsort(*rows, *n, sizeof **rows, cmp_class);
    }
    return rc;
}
