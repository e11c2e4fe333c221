/*
 * The work queue's handle and its one Redis connection: connect (AUTH,
 * SELECT, SCRIPT LOAD, the consumer group), run commands and scripts
 * (EVALSHA, reloading on NOSCRIPT), and the reconnect pacing.
 *
 * States: connected (ctx != NULL) or not. Any I/O error or timeout drops
 * the connection; the next call reconnects at once if the last attempt is
 * older than reconnect_interval_us, otherwise it fails with STG_EUNAVAIL
 * without touching the network. Nothing is retried inside a call: the
 * caller (the batch runner) decides what an outage means.
 *
 * The connection itself (TCP or TLS for rediss://, timeouts, SIGPIPE) is
 * rconn.c's.
 */
#include <errno.h>
#include <inttypes.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <pthread.h>
#include <unistd.h>

#include "queue_internal.h"
#include "redis/cluster.h"
#include "redis/sentinel.h"
#include "util/assert.h"
#include "util/clock.h"

int64_t stg__queue_mono_us(void)
{
    return stg__clock_mono_us();
}

int64_t stg__queue_wall_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

int stg__queue_fail(stg_queue *q, int err, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(q->err, sizeof q->err, fmt, ap);
    va_end(ap);
    return err;
}

bool stg__queue_int(const redisReply *r, long long *out)
{
    if (!r)
        return false;
    if (r->type == REDIS_REPLY_INTEGER) {
        *out = r->integer;
        return true;
    }
    if (r->type == REDIS_REPLY_STRING && r->len > 0 && r->len < 24) {
        char buf[24], *end;
        memcpy(buf, r->str, r->len);
        buf[r->len] = '\0';
        errno = 0;
        long long v = strtoll(buf, &end, 10);
        if (errno || *end)
            return false;
        *out = v;
        return true;
    }
    return false;
}

bool stg__queue_counts_from(const redisReply *r, stg_queue_counts *c)
{
    memset(c, 0, sizeof *c);
    long long total, pel;
    if (!r || r->type != REDIS_REPLY_ARRAY || r->elements != 3 ||
        !stg__queue_int(r->element[0], &total) || !stg__queue_int(r->element[1], &pel) ||
        r->element[2]->type != REDIS_REPLY_ARRAY)
        return false;
    const redisReply *h = r->element[2];
    int64_t ended = 0;
    for (size_t i = 0; i + 1 < h->elements; i += 2) {
        long long v;
        const char *f = h->element[i]->str;
        if (h->element[i]->type != REDIS_REPLY_STRING || !stg__queue_int(h->element[i + 1], &v))
            return false;
        if (!strcmp(f, "attempts"))
            c->attempts = v;
        else if (!strcmp(f, "s429"))
            c->status_429 = v;
        else if (!strcmp(f, "s503"))
            c->status_503 = v;
        else
            for (int s = STG_QUEUE_DONE; s < STG_QUEUE_NSTATES; s++)
                if (!strcmp(f, stg_queue_state_name((stg_queue_state)s))) {
                    c->n[s] = v;
                    ended += v;
                }
    }
    c->total = total;
    c->n[STG_QUEUE_INFLIGHT] = pel;
    int64_t pending = total - ended - pel;
    c->n[STG_QUEUE_PENDING] = pending > 0 ? pending : 0;
    return true;
}

const char *stg_queue_state_name(stg_queue_state s)
{
    static const char *const names[] = {"pending", "inflight", "done",
                                        "failed",  "deferred", "review"};
    return (unsigned)s < STG_QUEUE_NSTATES ? names[s] : "unknown";
}

static redisReply *raw(stg__rconn *c, int argc, const char **argv, const size_t *lens)
{
    return stg__rconn_command(c, argc, argv, lens);
}

/* What went wrong on q's connection, for messages. */
static const char *conn_text(const stg_queue *q)
{
    const char *text;
    return stg__rconn_error(q->ctx, &text) ? text : "no answer";
}

/* ---- connection --------------------------------------------------------- */


static void drop(stg_queue *q)
{
    stg__rconn_free(q->ctx);
    q->ctx = NULL;
}

/* One setup command on a fresh connection; false (q->err set) on failure. */
static bool setup(stg_queue *q, int argc, const char **argv, const char *what, bool busy_ok)
{
    redisReply *r = raw(q->ctx, argc, argv, NULL);
    bool ok = r && r->type != REDIS_REPLY_ERROR;
    /* The group exists already, or there is no stream yet (the first load
     * creates both: a worker that only looks leaves no key behind). */
    if (!ok && r && busy_ok &&
        (!strncmp(r->str, "BUSYGROUP", 9) || strstr(r->str, "requires the key to exist")))
        ok = true;
    if (!ok) {
        if (r)
            stg__queue_fail(q, STG_EUNAVAIL, "%s: Redis at %s answered %.*s", what, q->where,
                            (int)(r->len > 200 ? 200 : r->len), r->str);
        else
            stg__queue_fail(q, STG_EUNAVAIL, "%s to Redis at %s failed: %s", what, q->where,
                            conn_text(q));
    }
    freeReplyObject(r);
    return ok;
}

static bool load_scripts(stg_queue *q)
{
    for (int i = 0; i < STG__Q_NSCRIPTS; i++) {
        const char *argv[] = {"SCRIPT", "LOAD", stg__queue_lua[i]};
        redisReply *r = raw(q->ctx, 3, argv, NULL);
        if (!r || r->type != REDIS_REPLY_STRING || r->len != 40) {
            stg__queue_fail(q, STG_EUNAVAIL, "SCRIPT LOAD: Redis at %s %s", q->where,
                            r && r->type == REDIS_REPLY_ERROR ? r->str : "did not answer");
            freeReplyObject(r);
            return false;
        }
        memcpy(q->sha[i], r->str, 40);
        q->sha[i][40] = '\0';
        freeReplyObject(r);
    }
    return true;
}

static void set_node(stg_queue *q, const char *host, int port)
{
    if (host[0] && host != q->node_host)
        snprintf(q->node_host, sizeof q->node_host, "%s", host);
    q->node_port = port;
    snprintf(q->where, sizeof q->where, strchr(q->node_host, ':') ? "[%s]:%d" : "%s:%d",
             q->node_host, q->node_port);
}

/* Open a connection to host:port and authenticate on it (AUTH, SELECT);
 * it becomes q->ctx. false (q->err set) on failure. */
static bool open_auth(stg_queue *q, const char *host, int port)
{
    stg__rconn_err cerr;
    char why[sizeof q->err];
    stg__rconn *c = stg__rconn_open(host, port, q->where, q->url.tls, &q->tls,
                                    q->connect_timeout_us, q->command_timeout_us, &cerr, why,
                                    sizeof why);
    if (!c) {
        stg__queue_fail(q, STG_EUNAVAIL, "%s", why);
        return false;
    }
    q->ctx = c;
    bool ok = true;
    if (q->url.password[0]) {
        const char *a1[] = {"AUTH", q->url.password};
        const char *a2[] = {"AUTH", q->url.user, q->url.password};
        ok = q->url.user[0] ? setup(q, 3, a2, "AUTH", false) : setup(q, 2, a1, "AUTH", false);
    }
    if (ok && q->url.db) {
        char db[16];
        snprintf(db, sizeof db, "%d", q->url.db);
        const char *a[] = {"SELECT", db};
        ok = setup(q, 2, a, "SELECT", false);
    }
    if (ok)
        ok = load_scripts(q);
    if (!ok)
        drop(q);
    return ok;
}

/* Connect now to the node of the queue's slot. true when connected
 * (scripts loaded, group there). A MOVED for the group's creation moves to
 * the node named and starts again there. */
static bool connect_now(stg_queue *q)
{
    q->attempted = true;
    q->last_attempt_us = stg__queue_mono_us();
    if (q->sentinels) {
        /* Where the primary is now (it moves with a failover). */
        char host[STG_REDIS_HOST_MAX + 1], why[STG__SENTINEL_WHY + 64];
        int port;
        if (stg__sentinel_master(q->sentinels, q->sentinel_master, q->url.tls, &q->tls,
                                 q->connect_timeout_us, q->command_timeout_us, host, sizeof host,
                                 &port, why, sizeof why) != STG_OK) {
            stg__queue_fail(q, STG_EUNAVAIL, "%s", why);
            return false;
        }
        set_node(q, host, port);
    }
    for (int hop = 0; hop <= STG__CLUSTER_MAX_HOPS; hop++) {
        if (!open_auth(q, q->node_host, q->node_port))
            return false;
        if (q->sentinels && !stg__rconn_is_primary(q->ctx)) {
            stg__queue_fail(q, STG_EUNAVAIL,
                            "Redis at %s, which the sentinels name as primary %s, is not a "
                            "primary (yet)", q->where, q->sentinel_master);
            drop(q);
            return false;
        }
        char stream[sizeof q->base + 8];
        snprintf(stream, sizeof stream, "%sjobs", q->base);
        const char *a[] = {"XGROUP", "CREATE", stream, STG__Q_GROUP, "0"};
        redisReply *r = raw(q->ctx, 5, a, NULL);
        int slot, port;
        char host[STG_REDIS_HOST_MAX + 1];
        stg__redirect rd = stg__cluster_redirect(r, &slot, host, sizeof host, &port);
        if (rd == STG__REDIRECT_MOVED || rd == STG__REDIRECT_ASK || rd == STG__REDIRECT_RETRY) {
            /* ASK and TRYAGAIN here: a migration of the slot; the group is
             * made by the first load or found by the next connection. */
            freeReplyObject(r);
            if (rd == STG__REDIRECT_MOVED) {
                drop(q);
                set_node(q, host, port);
                q->redirects++;
                continue;
            }
            break;
        }
        bool ok = r && (r->type != REDIS_REPLY_ERROR || !strncmp(r->str, "BUSYGROUP", 9) ||
                        strstr(r->str, "requires the key to exist"));
        if (!ok) {
            if (r)
                stg__queue_fail(q, STG_EUNAVAIL, "XGROUP CREATE: Redis at %s answered %.*s",
                                q->where, (int)(r->len > 200 ? 200 : r->len), r->str);
            else
                stg__queue_fail(q, STG_EUNAVAIL, "XGROUP CREATE to Redis at %s failed: %s",
                                q->where, conn_text(q));
            freeReplyObject(r);
            drop(q);
            return false;
        }
        freeReplyObject(r);
        break;
    }
    if (!q->ctx) {
        stg__queue_fail(q, STG_EUNAVAIL, "Redis Cluster at %s redirected more than %d times",
                        q->where, STG__CLUSTER_MAX_HOPS);
        return false;
    }
    q->stats.reconnects += q->stats.round_trips > 0;
    return true;
}

static bool ready(stg_queue *q)
{
    if (q->ctx)
        return true;
    if (q->attempted &&
        stg__queue_mono_us() - q->last_attempt_us < q->reconnect_interval_us) {
        if (!q->err[0])
            stg__queue_fail(q, STG_EUNAVAIL, "Redis at %s is unreachable", q->where);
        return false;
    }
    return connect_now(q);
}

/* One command on q->ctx; NULL on an I/O failure (q->err set, dropped). */
static redisReply *send_once(stg_queue *q, int argc, const char **argv, const size_t *lens)
{
    q->stats.round_trips++;
    redisReply *r = raw(q->ctx, argc, argv, lens);
    if (!r) {
        if (stg__rconn_error(q->ctx, NULL) == STG__RC_TIMEOUT)
            stg__queue_fail(q, STG_EUNAVAIL, "Redis at %s did not answer within %" PRId64 " ms",
                            q->where, q->command_timeout_us / 1000);
        else
            stg__queue_fail(q, STG_EUNAVAIL, "Redis at %s: %s", q->where, conn_text(q));
        drop(q);
        q->stats.failures++;
    }
    return r;
}

/* ASK: the command once on the node named, after ASKING, on a connection
 * of its own (authenticated, scripts loaded), closed after. */
static redisReply *ask_once(stg_queue *q, const char *host, int port, int argc,
                            const char **argv, const size_t *lens)
{
    stg__rconn *home = q->ctx;
    char where[sizeof q->where];
    memcpy(where, q->where, sizeof where);
    q->ctx = NULL;
    redisReply *r = NULL;
    if (open_auth(q, host, port)) {
        const char *asking[] = {"ASKING"};
        q->stats.round_trips++;
        if (stg__rconn_append(q->ctx, 1, asking, NULL) &&
            stg__rconn_append(q->ctx, argc, argv, lens)) {
            redisReply *ok = stg__rconn_reply(q->ctx);
            r = ok ? stg__rconn_reply(q->ctx) : NULL;
            freeReplyObject(ok);
        }
        if (!r)
            stg__queue_fail(q, STG_EUNAVAIL, "Redis at %s:%d (ASK): %s", host, port,
                            conn_text(q));
        drop(q);
    }
    q->ctx = home;
    memcpy(q->where, where, sizeof where);
    return r;
}

redisReply *stg__queue_cmd(stg_queue *q, int argc, const char **argv, const size_t *lens)
{
    if (!ready(q)) {
        q->stats.failures++;
        return NULL;
    }
    redisReply *r = send_once(q, argc, argv, lens);
    /* Redis Cluster: follow MOVED and ASK, wait out TRYAGAIN/CLUSTERDOWN. */
    for (int hop = 0, retries = 0; r;) {
        int slot, port;
        char host[STG_REDIS_HOST_MAX + 1];
        stg__redirect rd = stg__cluster_redirect(r, &slot, host, sizeof host, &port);
        if (rd == STG__REDIRECT_NONE)
            break;
        freeReplyObject(r);
        r = NULL;
        if (rd == STG__REDIRECT_RETRY ? ++retries > STG__CLUSTER_MAX_RETRIES
                                      : ++hop > STG__CLUSTER_MAX_HOPS) {
            stg__queue_fail(q, STG_EUNAVAIL,
                            "Redis Cluster at %s kept redirecting (or answering TRYAGAIN)",
                            q->where);
            q->stats.failures++;
            return NULL;
        }
        if (!host[0])
            snprintf(host, sizeof host, "%s", q->node_host);
        if (rd == STG__REDIRECT_RETRY) {
            struct timespec ts = {0, STG__CLUSTER_RETRY_US * 1000L};
            nanosleep(&ts, NULL);
        } else if (rd == STG__REDIRECT_MOVED) {
            q->redirects++;
            drop(q);
            set_node(q, host, port);
            if (!connect_now(q)) {
                q->stats.failures++;
                return NULL;
            }
        } else {
            q->redirects++;
            r = ask_once(q, host, port, argc, argv, lens);
            if (!r) {
                q->stats.failures++;
                return NULL;
            }
            continue;
        }
        if (!q->ctx && !ready(q)) {
            q->stats.failures++;
            return NULL;
        }
        r = send_once(q, argc, argv, lens);
    }
    return r;
}

/* An error reply that says this node cannot serve writes now. */
static bool not_primary(const redisReply *r)
{
    static const char *const codes[] = {"READONLY", "LOADING", "MASTERDOWN", "NOREPLICAS"};
    for (size_t i = 0; i < sizeof codes / sizeof codes[0]; i++) {
        size_t n = strlen(codes[i]);
        if (r->len >= n && !memcmp(r->str, codes[i], n))
            return true;
    }
    return false;
}

redisReply *stg__queue_eval(stg_queue *q, int which, int argc, const char **argv,
                            const size_t *lens, bool *eio)
{
    STG_ASSERT(which >= 0 && which < STG__Q_NSCRIPTS && argc <= 4096 + 2);
    *eio = false;
    /* The queue's fixed keys are declared (KEYS), as Redis Cluster wants
     * of a script: they route it, and a slot being migrated answers ASK
     * or TRYAGAIN for them instead of running on half the keys. The
     * scripts build the same names from ARGV[1]; per-job keys (res:ID,
     * nb:HOST) and the lanes' streams (lane:N) share the {NAME} tag, hence the slot. */
    static const char *const fixed[] = {"meta", "jobs", "ids", "counts", "lat", "workers", "sent",
                                        "classes", "cadded", "lanes"};
    enum { NK = sizeof fixed / sizeof fixed[0] };
    char keys[NK][sizeof q->base + 8];
    for (int k = 0; k < NK; k++)
        snprintf(keys[k], sizeof keys[k], "%s%s", q->base, fixed[k]);
    char nk[8];
    snprintf(nk, sizeof nk, "%d", (int)NK);
    const char **av = malloc((size_t)(argc + 3 + NK) * sizeof *av);
    size_t *ln = malloc((size_t)(argc + 3 + NK) * sizeof *ln);
    if (!av || !ln) {
        free(av);
        free(ln);
        *eio = true;
        stg__queue_fail(q, STG_ENOMEM, "out of memory");
        return NULL;
    }
    redisReply *r = NULL;
    for (int pass = 0; pass < 2; pass++) {
        if (!ready(q)) {
            q->stats.failures++;
            break;
        }
        av[0] = "EVALSHA";
        ln[0] = 7;
        av[1] = q->sha[which];
        ln[1] = 40;
        av[2] = nk;
        ln[2] = strlen(nk);
        for (int k = 0; k < NK; k++) {
            av[3 + k] = keys[k];
            ln[3 + k] = strlen(keys[k]);
        }
        for (int i = 0; i < argc; i++) {
            av[i + 3 + NK] = argv[i];
            ln[i + 3 + NK] = lens ? lens[i] : strlen(argv[i]);
        }
        r = stg__queue_cmd(q, argc + 3 + NK, av, ln);
        if (r && r->type == REDIS_REPLY_ERROR && !strncmp(r->str, "NOSCRIPT", 8) && pass == 0) {
            freeReplyObject(r);
            r = NULL;
            if (!load_scripts(q)) {
                drop(q);
                break;
            }
            continue;
        }
        break;
    }
    free(av);
    free(ln);
    if (r && r->type == REDIS_REPLY_ERROR && not_primary(r)) {
        /* A replica (the old primary after a failover, a stale endpoint),
         * or a Redis still loading: an outage, not a script's failure.
         * The next call reconnects, as after a dropped connection. */
        stg__queue_fail(q, STG_EUNAVAIL, "Redis at %s cannot take writes now: %.*s", q->where,
                        (int)(r->len > 200 ? 200 : r->len), r->str);
        freeReplyObject(r);
        drop(q);
        q->stats.failures++;
        return NULL;
    }
    if (r && r->type == REDIS_REPLY_ERROR) {
        stg__queue_fail(q, STG_EIO, "a queue script failed: Redis at %s answered %.*s", q->where,
                        (int)(r->len > 300 ? 300 : r->len), r->str);
        freeReplyObject(r);
        *eio = true;
        return NULL;
    }
    return r;
}

/* ---- lifecycle ---------------------------------------------------------- */

stg_queue *stg_queue_new(const stg_queue_config *cfg, int *err, char *why, size_t why_len)
{
    int e = STG_OK;
    const char *msg = NULL;
    stg_queue *q = NULL;
    if (!cfg || !cfg->url || cfg->claim_idle_us < 0 || cfg->max_deliveries < 0 ||
        cfg->connect_timeout_us < 0 || cfg->command_timeout_us < 0 ||
        (cfg->worker && (!cfg->worker[0] || strlen(cfg->worker) > 200 ||
                         strpbrk(cfg->worker, "|\r\n"))) ||
        (cfg->prefix && strlen(cfg->prefix) > 63)) {
        e = STG_EINVAL;
        msg = "bad queue configuration";
        goto fail;
    }
    if (!(q = calloc(1, sizeof *q))) {
        e = STG_ENOMEM;
        msg = "out of memory";
        goto fail;
    }
    const char *why_url = NULL;
    if ((e = stg_redis_url_parse(cfg->url, &q->url, &why_url)) != STG_OK) {
        msg = why_url ? why_url : "malformed Redis URL";
        e = STG_EINVAL;
        goto fail;
    }
    if (!q->url.key[0]) {
        e = STG_EINVAL;
        msg = "the queue URL names no queue (redis://HOST[:PORT]/NAME)";
        goto fail;
    }
    set_node(q, q->url.host, q->url.port);
    if (cfg->tls)
        q->tls = *cfg->tls;
    if ((cfg->sentinels != NULL) != (cfg->sentinel_master != NULL)) {
        e = STG_EINVAL;
        msg = "sentinels and sentinel_master go together";
        goto fail;
    }
    if (cfg->sentinels && (!(q->sentinels = strdup(cfg->sentinels)) ||
                           !(q->sentinel_master = strdup(cfg->sentinel_master)))) {
        e = STG_ENOMEM;
        msg = "out of memory";
        goto fail;
    }
    snprintf(q->base, sizeof q->base, "%s{%s}:", cfg->prefix ? cfg->prefix : STG_QUEUE_DEFAULT_PREFIX,
             q->url.key);
    if (cfg->worker)
        snprintf(q->worker, sizeof q->worker, "%s", cfg->worker);
    else {
        char host[128] = "host";
        gethostname(host, sizeof host - 1);
        host[sizeof host - 1] = '\0';
        snprintf(q->worker, sizeof q->worker, "%s:%ld", host, (long)getpid());
    }
    q->connect_timeout_us = cfg->connect_timeout_us ? cfg->connect_timeout_us : STG_SEC(1);
    q->command_timeout_us = cfg->command_timeout_us ? cfg->command_timeout_us : STG_SEC(5);
    q->reconnect_interval_us = cfg->reconnect_interval_us ? cfg->reconnect_interval_us : STG_MS(250);
    q->claim_idle_us = cfg->claim_idle_us ? cfg->claim_idle_us : STG_QUEUE_DEFAULT_CLAIM_IDLE_US;
    q->max_deliveries = cfg->max_deliveries ? cfg->max_deliveries : STG_QUEUE_DEFAULT_MAX_DELIVERIES;
    if (!connect_now(q)) {
        e = STG_EUNAVAIL;
        msg = q->err;
        goto fail;
    }
    q->err[0] = '\0';
    if (err)
        *err = STG_OK;
    return q;
fail:
    if (err)
        *err = e;
    if (why && why_len)
        snprintf(why, why_len, "%s", msg ? msg : stg_strerror(e));
    stg_queue_free(q);
    return NULL;
}

void stg_queue_free(stg_queue *q)
{
    if (!q)
        return;
    drop(q);
    memset(q->url.password, 0, sizeof q->url.password);
    free(q->sentinels);
    free(q->sentinel_master);
    free(q);
}

const char *stg_queue_errmsg(const stg_queue *q)
{
    return q ? q->err : "";
}

const char *stg_queue_worker(const stg_queue *q)
{
    return q ? q->worker : "";
}

void stg_queue_stats_get(const stg_queue *q, stg_queue_stats *s)
{
    memset(s, 0, sizeof *s);
    if (q)
        *s = q->stats;
}
