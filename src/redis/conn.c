/*
 * The limiter handle and its one Redis connection: connect (AUTH, SELECT,
 * SCRIPT LOAD), run scripts with EVALSHA (reloading on NOSCRIPT), and the
 * up/down state machine behind the fallback.
 *
 * States: UP (ctx != NULL) and DOWN (ctx == NULL, `down` set). Any I/O
 * error, timeout or error reply other than NOSCRIPT drops the connection;
 * a dropped connection is re-attempted at once if the last attempt is older
 * than reconnect_interval_us (a server that closed an idle connection costs
 * one reconnect, not a fallback), otherwise the call is answered locally or
 * fails with STG_EUNAVAIL. The first failure after UP emits one note
 * (FALLBACK or DOWN), the first success after DOWN one note (BACK).
 *
 * Invariant: ctx != NULL implies both scripts were loaded on it at connect
 * time (their SHA1s are in sha[]); a NOSCRIPT later (SCRIPT FLUSH, a
 * failover to a replica that never saw them) reloads the script on the
 * same connection and runs the command again, once.
 *
 * The connection itself (TCP or TLS for rediss://, the timeouts, SIGPIPE)
 * is rconn.c's.
 */
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "internal.h"
#include "redis/cluster.h"
#include "redis/sentinel.h"
#include "util/clock.h"

static int64_t mono_us(void *data) /* the default stg_redis_clock_fn */
{
    (void)data;
    return stg__clock_mono_us();
}

int64_t stg__redis_now(stg_redis_limiter *l)
{
    return l->clock(l->clock_data);
}

int stg__redis_key(const stg_redis_limiter *l, const char *kind, const char *name, char *buf)
{
    if (!name)
        name = l->url.key;
    size_t n = strlen(name);
    if (n == 0 || n > STG_REDIS_KEY_MAX)
        return STG_EINVAL;
    snprintf(buf, STG__KEYBUF, "%s%s%s", l->prefix, kind, name);
    return STG_OK;
}

/* ---- notes ------------------------------------------------------------- */

static void note_down(stg_redis_limiter *l, stg__note *note, const char *reason)
{
    if (l->down)
        return;
    l->down = true;
    if (!note)
        return;
    if (l->share > 0 && l->adaptive) {
        note->ev = STG_REDIS_EVENT_FALLBACK;
        snprintf(note->msg, sizeof note->msg,
                 "redis %s unreachable (%s); falling back to a local adaptive rate per key, "
                 "at most %g x the rate last learned; retrying the connection every %g s",
                 l->url_shown, reason, l->share, (double)l->reconnect_interval_us / 1e6);
    } else if (l->share > 0) {
        note->ev = STG_REDIS_EVENT_FALLBACK;
        snprintf(note->msg, sizeof note->msg,
                 "redis %s unreachable (%s); falling back to local bucket at %g x rate "
                 "(%g/s, burst %" PRId64 "); retrying the connection every %g s",
                 l->url_shown, reason, l->share, l->share * l->rate, l->local_burst,
                 (double)l->reconnect_interval_us / 1e6);
    } else {
        note->ev = STG_REDIS_EVENT_DOWN;
        snprintf(note->msg, sizeof note->msg,
                 "redis %s unreachable (%s); no fallback, calls fail until it is back "
                 "(retrying every %g s)",
                 l->url_shown, reason, (double)l->reconnect_interval_us / 1e6);
    }
}

void stg__redis_emit(stg_redis_limiter *l, const stg__note *note)
{
    if (note->ev != 0 && l->log)
        l->log(l->log_data, note->ev, note->msg);
}

/* ---- connection -------------------------------------------------------- */

/* Every reason below says what failed and where ("Redis at HOST:PORT ..."):
 * it ends up in a log line or an error message, where "Resource
 * temporarily unavailable" alone would not tell anyone that Redis was
 * slow. Error replies are Redis's own words and never echo the password. */
static void reply_reason(const stg_redis_limiter *l, const redisReply *r, char *buf, size_t len,
                         const char *what)
{
    if (r && r->type == REDIS_REPLY_ERROR)
        snprintf(buf, len, "%s: Redis at %s answered %.*s", what, l->where,
                 (int)(r->len > 200 ? 200 : r->len), r->str);
    else
        snprintf(buf, len, "%s: Redis at %s sent an unexpected reply", what, l->where);
}

/* An I/O failure of a command on c: a timeout (hiredis reports the read's
 * EAGAIN as "Resource temporarily unavailable"), a closed connection, or
 * another socket error. */
static void io_reason(const stg_redis_limiter *l, const stg__rconn *c, const char *what,
                      char *buf, size_t len)
{
    const char *text;
    stg__rconn_err e = stg__rconn_error(c, &text);
    if (e == STG__RC_TIMEOUT)
        snprintf(buf, len, "Redis at %s did not answer %s within %" PRId64 " ms", l->where, what,
                 l->command_timeout_us / 1000);
    else if (e == STG__RC_CLOSED)
        snprintf(buf, len, "Redis at %s closed the connection during %s", l->where, what);
    else if (e == STG__RC_TLS)
        snprintf(buf, len, "%s to Redis at %s failed: TLS: %s", what, l->where, text);
    else
        snprintf(buf, len, "%s to Redis at %s failed: %s", what, l->where,
                 text[0] ? text : "I/O error");
}

static int load_script(const stg_redis_limiter *l, stg__rconn *c, const char *src,
                       char sha[41], char *reason, size_t rlen)
{
    const char *argv[] = {"SCRIPT", "LOAD", src};
    size_t lens[] = {6, 4, strlen(src)};
    redisReply *r = stg__rconn_command(c, 3, argv, lens);
    if (!r) {
        io_reason(l, c, "SCRIPT LOAD", reason, rlen);
        return STG_EUNAVAIL;
    }
    int rc = STG_OK;
    if (r->type == REDIS_REPLY_STRING && r->len == 40) {
        memcpy(sha, r->str, 40);
        sha[40] = '\0';
    } else {
        reply_reason(l, r, reason, rlen, "SCRIPT LOAD");
        rc = STG_EUNAVAIL;
    }
    freeReplyObject(r);
    return rc;
}

/* A setup command (AUTH, SELECT) whose answer only has to be no error:
 * STG_OK, or STG_EUNAVAIL with reason saying why ("AUTH failed: ..."). */
static int setup_command(const stg_redis_limiter *l, stg__rconn *c, int argc,
                         const char *const *argv, const size_t *lens, char *reason, size_t rlen)
{
    redisReply *r = stg__rconn_command(c, argc, argv, lens);
    if (!r) {
        io_reason(l, c, argv[0], reason, rlen);
        return STG_EUNAVAIL;
    }
    int rc = STG_OK;
    if (r->type == REDIS_REPLY_ERROR) {
        char what[32];
        snprintf(what, sizeof what, "%s failed", argv[0]);
        reply_reason(l, r, reason, rlen, what);
        rc = STG_EUNAVAIL;
    }
    freeReplyObject(r);
    return rc;
}

static const char *const script_src[STG__SCRIPT_COUNT] = {
    [STG__SCRIPT_GCRA] = stg__redis_gcra_lua,
    [STG__SCRIPT_BREAKER] = stg__redis_breaker_lua,
    [STG__SCRIPT_ADAPTIVE] = stg__redis_adaptive_lua,
    [STG__SCRIPT_QUOTA] = stg__redis_quota_lua,
};

/* Open a connection to host:port, authenticate, select, load the scripts:
 * *out. On failure reason says why. Under mu. */
static int open_node(stg_redis_limiter *l, const char *host, int port, stg__rconn **out,
                     char *reason, size_t rlen)
{
    char where[sizeof l->where];
    snprintf(where, sizeof where, strchr(host, ':') ? "[%s]:%d" : "%s:%d", host, port);
    stg__rconn_err cerr;
    stg__rconn *c = stg__rconn_open(host, port, where, l->url.tls, &l->tls,
                                    l->connect_timeout_us, l->command_timeout_us, &cerr, reason,
                                    rlen);
    *out = NULL;
    if (!c)
        return cerr == STG__RC_NOMEM ? STG_ENOMEM : STG_EUNAVAIL;
    int rc = STG_OK;
    if (l->url.password[0]) {
        const char *argv[3];
        size_t lens[3];
        int argc = 0;
        argv[argc] = "AUTH", lens[argc++] = 4;
        if (l->url.user[0])
            argv[argc] = l->url.user, lens[argc++] = strlen(l->url.user);
        argv[argc] = l->url.password, lens[argc++] = strlen(l->url.password);
        rc = setup_command(l, c, argc, argv, lens, reason, rlen);
    }
    if (rc == STG_OK && l->url.db != 0) {
        char db[16];
        snprintf(db, sizeof db, "%d", l->url.db);
        const char *argv[] = {"SELECT", db};
        size_t lens[] = {6, strlen(db)};
        rc = setup_command(l, c, 2, argv, lens, reason, rlen);
    }
    for (int i = 0; rc == STG_OK && i < STG__SCRIPT_COUNT; i++)
        rc = load_script(l, c, script_src[i], l->sha[i], reason, rlen);
    if (rc != STG_OK) {
        stg__rconn_free(c);
        return rc;
    }
    *out = c;
    return STG_OK;
}

/* Open a connection to the URL's node (see open_node). On success l->ctx
 * is set; on failure reason says why. Under mu. */
static int connect_now(stg_redis_limiter *l, char *reason, size_t rlen)
{
    l->attempted = true;
    l->last_attempt_us = stg__redis_now(l);
    stg__rconn *c;
    const char *host = l->url.host;
    int port = l->url.port;
    char found[STG_REDIS_HOST_MAX + 1];
    if (l->sentinels) {
        /* Where the primary is now (it moves with a failover). */
        if (stg__sentinel_master(l->sentinels, l->sentinel_master, l->url.tls, &l->tls,
                                 l->connect_timeout_us, l->command_timeout_us, found,
                                 sizeof found, &port, reason, rlen) != STG_OK)
            return STG_EUNAVAIL;
        host = found;
    }
    int rc = open_node(l, host, port, &c, reason, rlen);
    if (rc != STG_OK)
        return rc;
    if (l->sentinels && !stg__rconn_is_primary(c)) {
        snprintf(reason, rlen, "Redis at %s:%d, which the sentinels name as primary %s, is not "
                               "a primary (yet)", host, port, l->sentinel_master);
        stg__rconn_free(c);
        return STG_EUNAVAIL;
    }
    l->ctx = c;
    stg__local_mark_carry(l);
    return STG_OK;
}

/* Drop every connection (the URL's node's and the cluster's others): the
 * next call goes through the reconnect pacing. The slot map stays. */
static void drop(stg_redis_limiter *l)
{
    for (int i = 0; i < l->n_nodes; i++) {
        stg__rconn_free(l->nodes[i].c);
        l->nodes[i].c = NULL;
    }
    if (l->ctx) {
        stg__rconn_free(l->ctx);
        l->ctx = NULL;
        l->stats.disconnects++;
    }
}

bool stg__redis_ready(stg_redis_limiter *l, stg__note *note)
{
    if (l->ctx)
        return true;
    int64_t now = stg__redis_now(l);
    if (l->attempted && now - l->last_attempt_us < l->reconnect_interval_us)
        return false;
    char reason[STG__REASON_MAX];
    if (connect_now(l, reason, sizeof reason) != STG_OK) {
        note_down(l, note, reason);
        return false;
    }
    if (l->down) {
        l->down = false;
        l->stats.reconnects++;
        if (note) {
            note->ev = STG_REDIS_EVENT_BACK;
            snprintf(note->msg, sizeof note->msg, "redis %s back; using the shared limiter again",
                     l->url_shown);
        }
    }
    return true;
}

static bool is_noscript(const redisReply *r)
{
    return r && r->type == REDIS_REPLY_ERROR && r->len >= 8 && memcmp(r->str, "NOSCRIPT", 8) == 0;
}

/* Send the command n times, read n replies. Returns false on an I/O error
 * (replies freed and NULLed; stg__rconn_error says what). */
static bool round_trip(stg__rconn *c, int argc, const char **argv, const size_t *lens,
                       size_t n, redisReply **replies, bool asking)
{
    for (size_t i = 0; i < n; i++)
        replies[i] = NULL;
    bool ok = true;
    static const char *const ask[] = {"ASKING"};
    for (size_t i = 0; i < n && ok; i++)
        ok = (!asking || stg__rconn_append(c, 1, ask, NULL)) &&
             stg__rconn_append(c, argc, argv, lens);
    for (size_t i = 0; i < n && ok; i++) {
        if (asking) {
            redisReply *a = stg__rconn_reply(c); /* +OK of ASKING */
            ok = a != NULL;
            freeReplyObject(a);
            if (!ok)
                break;
        }
        replies[i] = stg__rconn_reply(c);
        ok = replies[i] != NULL;
    }
    if (!ok) {
        for (size_t i = 0; i < n; i++) {
            if (replies[i])
                freeReplyObject(replies[i]);
            replies[i] = NULL;
        }
    }
    return ok;
}

static void free_replies(redisReply **replies, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        if (replies[i])
            freeReplyObject(replies[i]);
        replies[i] = NULL;
    }
}

bool stg__reply_int(const redisReply *r, size_t i, long long *out)
{
    if (!r || r->type != REDIS_REPLY_ARRAY || i >= r->elements ||
        r->element[i]->type != REDIS_REPLY_INTEGER)
        return false;
    *out = r->element[i]->integer;
    return true;
}

/* Most arguments a script call takes here (EVALSHA sha 1 key + values):
 * the adaptive script with a class part takes 14 values. */
#define MAX_ARGV 20

/* The connection broke in a way that says the server closed it (EOF,
 * reset, broken pipe), as opposed to a timeout: the command did not run,
 * and a fresh connection may well work. */
static bool closed_by_peer(const stg__rconn *c)
{
    return stg__rconn_error(c, NULL) == STG__RC_CLOSED;
}

/* ---- Redis Cluster: which connection serves a slot ----------------------- */

/* The connection to host:port (the URL's node, or one of the others, made
 * on first use), and its index into slot_node (0: the URL's). NULL when it
 * cannot be made (reason says why) or the table is full. */
static stg__rconn *node_conn(stg_redis_limiter *l, const char *host, int port, int *idx,
                             char *reason, size_t rlen)
{
    if ((!host[0] || !strcmp(host, l->url.host)) && port == l->url.port) {
        *idx = 0;
        return l->ctx;
    }
    int i = 0;
    while (i < l->n_nodes && !(l->nodes[i].port == port && !strcmp(l->nodes[i].host, host)))
        i++;
    if (i == l->n_nodes) {
        if (l->n_nodes == STG__NODES_MAX) {
            snprintf(reason, rlen, "Redis Cluster behind %s has more than %d nodes serving "
                                   "this limiter's keys", l->where, STG__NODES_MAX);
            return NULL;
        }
        snprintf(l->nodes[i].host, sizeof l->nodes[i].host, "%s", host);
        l->nodes[i].port = port;
        l->nodes[i].c = NULL;
        l->n_nodes++;
    }
    *idx = i + 1;
    if (!l->nodes[i].c && open_node(l, host, port, &l->nodes[i].c, reason, rlen) != STG_OK)
        return NULL;
    return l->nodes[i].c;
}

/* The connection for key's slot: the node the last MOVED named for it,
 * else the URL's. */
static stg__rconn *slot_conn(stg_redis_limiter *l, int slot, char *reason, size_t rlen)
{
    int k = l->slot_node ? l->slot_node[slot] : 0;
    if (k == 0)
        return l->ctx;
    int idx;
    return node_conn(l, l->nodes[k - 1].host, l->nodes[k - 1].port, &idx, reason, rlen);
}

static int eval_once(stg_redis_limiter *l, int which, const char *key, int argc,
                     const char *const *args, size_t n, redisReply **replies, stg__note *note,
                     bool *peer_closed)
{
    const char *argv[MAX_ARGV];
    size_t lens[MAX_ARGV];
    int k = 0;
    *peer_closed = false;
    if (argc < 0 || argc > MAX_ARGV - 4)
        return STG_EINVAL; /* a caller's bug: never send a call cut short */
    argv[k] = "EVALSHA", lens[k++] = 7;
    argv[k] = l->sha[which], lens[k++] = 40;
    argv[k] = "1", lens[k++] = 1;
    argv[k] = key, lens[k++] = strlen(key);
    for (int i = 0; i < argc; i++)
        argv[k] = args[i], lens[k++] = strlen(args[i]);

    char reason[STG__REASON_MAX];
    redisReply **again = NULL;
    *peer_closed = false;
    /* Redis Cluster: the node of KEYS[1]'s slot; a MOVED re-routes the
     * slot, an ASK sends once with ASKING, TRYAGAIN/CLUSTERDOWN waits. All
     * n commands have the same key, hence the same answer to routing. */
    int slot = stg__cluster_slot(key, strlen(key));
    stg__rconn *c = slot_conn(l, slot, reason, sizeof reason);
    bool asking = false;
    int retries = 0;
    if (!c)
        goto fail;
    for (int hop = 0;;) {
        if (!round_trip(c, k, argv, lens, n, replies, asking)) {
            *peer_closed = c == l->ctx && closed_by_peer(c);
            io_reason(l, c, "EVALSHA", reason, sizeof reason);
            goto fail;
        }
        int rslot, port;
        char host[STG_REDIS_HOST_MAX + 1];
        stg__redirect rd = stg__cluster_redirect(replies[0], &rslot, host, sizeof host, &port);
        if (rd == STG__REDIRECT_NONE)
            break;
        free_replies(replies, n);
        if (rd == STG__REDIRECT_RETRY ? ++retries > STG__CLUSTER_MAX_RETRIES
                                      : ++hop > STG__CLUSTER_MAX_HOPS) {
            snprintf(reason, sizeof reason,
                     "Redis Cluster at %s kept redirecting EVALSHA (or answering TRYAGAIN)",
                     l->where);
            goto fail;
        }
        asking = false;
        if (rd == STG__REDIRECT_RETRY) {
            struct timespec ts = {0, STG__CLUSTER_RETRY_US * 1000L};
            nanosleep(&ts, NULL);
            continue;
        }
        int idx;
        c = node_conn(l, host[0] ? host : l->url.host, port, &idx, reason, sizeof reason);
        if (!c)
            goto fail;
        if (rd == STG__REDIRECT_ASK) {
            asking = true;
        } else {
            if (!l->slot_node && !(l->slot_node = calloc(STG__CLUSTER_SLOTS, 1))) {
                snprintf(reason, sizeof reason, "out of memory following a MOVED");
                goto fail;
            }
            l->slot_node[slot] = (unsigned char)idx;
        }
    }
    size_t noscript = 0;
    for (size_t i = 0; i < n; i++) {
        if (is_noscript(replies[i])) {
            noscript++;
        } else if (replies[i]->type != REDIS_REPLY_ARRAY) {
            reply_reason(l, replies[i], reason, sizeof reason, "EVALSHA");
            goto fail;
        }
    }
    if (noscript == 0)
        return STG_OK;

    /* NOSCRIPT: those commands did not run. Reload the script and run them
     * again (in one more round trip), keeping the order of results. */
    if (load_script(l, c, script_src[which], l->sha[which], reason, sizeof reason) != STG_OK)
        goto fail;
    l->stats.script_loads++;
    again = malloc(noscript * sizeof *again);
    if (!again) {
        snprintf(reason, sizeof reason, "out of memory reloading a script on Redis at %s",
                 l->where);
        goto fail;
    }
    if (!round_trip(c, k, argv, lens, noscript, again, asking)) {
        io_reason(l, c, "EVALSHA", reason, sizeof reason);
        goto fail;
    }
    for (size_t i = 0, j = 0; i < n; i++) {
        if (is_noscript(replies[i])) {
            freeReplyObject(replies[i]);
            replies[i] = again[j++];
        }
    }
    free(again);
    again = NULL;
    for (size_t i = 0; i < n; i++) {
        if (replies[i]->type != REDIS_REPLY_ARRAY) {
            if (is_noscript(replies[i]))
                snprintf(reason, sizeof reason,
                         "EVALSHA: Redis at %s lost the script again right after SCRIPT LOAD",
                         l->where);
            else
                reply_reason(l, replies[i], reason, sizeof reason, "EVALSHA");
            goto fail;
        }
    }
    return STG_OK;

fail:
    free(again);
    free_replies(replies, n);
    drop(l);
    note_down(l, note, reason);
    return STG_EUNAVAIL;
}

/* eval_once, and when the server had closed a connection that was fine
 * (an idle timeout, a restart: the commands did not run), reconnect at
 * once if the pacing allows, take back the note, and either run them there
 * (rerun) or return STG_EAGAIN for the caller to build them anew. */
static int eval_reconnect(stg_redis_limiter *l, int which, const char *key, int argc,
                          const char *const *argv, size_t n, redisReply **replies,
                          stg__note *note, bool rerun)
{
    bool peer_closed;
    int rc = eval_once(l, which, key, argc, argv, n, replies, note, &peer_closed);
    if (rc == STG_OK || !peer_closed)
        return rc;
    if (stg__redis_now(l) - l->last_attempt_us < l->reconnect_interval_us)
        return rc;
    char reason[STG__REASON_MAX];
    if (connect_now(l, reason, sizeof reason) != STG_OK)
        return rc;
    l->down = false;
    l->stats.reconnects++;
    note->ev = 0;
    if (!rerun)
        return STG_EAGAIN;
    return eval_once(l, which, key, argc, argv, n, replies, note, &peer_closed);
}

int stg__redis_eval(stg_redis_limiter *l, int which, const char *key, int argc,
                    const char *const *argv, size_t n, redisReply **replies, stg__note *note)
{
    return eval_reconnect(l, which, key, argc, argv, n, replies, note, true);
}

int stg__redis_eval_fresh(stg_redis_limiter *l, int which, const char *key, int argc,
                          const char *const *argv, size_t n, redisReply **replies,
                          stg__note *note)
{
    return eval_reconnect(l, which, key, argc, argv, n, replies, note, false);
}

/* ---- the handle -------------------------------------------------------- */

__attribute__((format(printf, 3, 4))) static void set_why(char *why, size_t why_len,
                                                          const char *fmt, ...)
{
    if (why && why_len > 0) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(why, why_len, fmt, ap);
        va_end(ap);
    }
}

static int64_t default_us(int64_t v, int64_t dflt)
{
    return v == 0 ? dflt : v;
}

/* Check and resolve the adaptive configuration (stg_adaptive_init does
 * both); NULL or what is wrong. */
static const char *adaptive_config(const stg_redis_limiter_config *cfg, stg_adaptive_config *out)
{
    if (cfg->rate != 0.0 || cfg->burst != 0)
        return "an adaptive limiter learns its rate: rate and burst must be 0";
    if (stg_adaptive_resolve(&cfg->adaptive_config, out) != STG_OK)
        return "bad adaptive configuration (see stg_adaptive_config)";
    /* The script's pacing is GCRA with T = 1/rate >= 1/min_rate: keep
     * burst * T within what Lua's doubles hold exactly. */
    if ((double)out->burst * ceil(1e9 / out->min_rate) > (double)STG_REDIS_SPAN_MAX_NS)
        return "adaptive burst / min_rate must be at most 2^50 ns (about 13 days)";
    return NULL;
}

stg_redis_limiter *stg_redis_limiter_new(const stg_redis_limiter_config *cfg, int *err,
                                         char *why, size_t why_len)
{
    int dummy;
    if (!err)
        err = &dummy;
    if (why && why_len > 0)
        why[0] = '\0';
    if (!cfg || !cfg->url) {
        *err = STG_EINVAL;
        set_why(why, why_len, "%s", "no redis URL given");
        return NULL;
    }
    stg_redis_limiter *l = calloc(1, sizeof *l);
    if (!l) {
        *err = STG_ENOMEM;
        set_why(why, why_len, "%s", "out of memory");
        return NULL;
    }
    const char *msg = NULL;
    int rc = stg_redis_url_parse(cfg->url, &l->url, &msg);
    if (rc != STG_OK) {
        free(l);
        *err = rc;
        set_why(why, why_len, "%s", msg);
        return NULL;
    }
    stg_redis_url_format(&l->url, l->url_shown, sizeof l->url_shown);
    if (cfg->tls)
        l->tls = *cfg->tls;

    snprintf(l->where, sizeof l->where, strchr(l->url.host, ':') ? "[%s]:%d" : "%s:%d",
             l->url.host, l->url.port);

    const char *bad = NULL;
    int64_t interval = 0;
    int64_t burst = cfg->burst;
    if (cfg->adaptive) {
        bad = adaptive_config(cfg, &l->acfg);
        l->adaptive = true;
        interval = 1; /* unused: no bucket */
        burst = 1;
    } else if (stg__redis_interval_ns(cfg->rate, &interval) != STG_OK) {
        bad = "rate must be > 0 and at most 1e9 per second";
    }
    if (!bad && burst == 0) {
        double c = ceil(cfg->rate);
        burst = c < 1.0 ? 1 : (c > 1e15 ? INT64_MAX : (int64_t)c);
    }
    if (!bad && (burst < 1 || burst > STG_REDIS_SPAN_MAX_NS / interval))
        bad = "burst must be >= 1 and burst / rate at most 2^50 ns (about 13 days)";
    if (!bad && !(cfg->fallback_share >= 0.0 && cfg->fallback_share <= 1.0))
        bad = "fallback share must be in [0, 1]";
    if (!bad && (cfg->connect_timeout_us < 0 || cfg->command_timeout_us < 0 ||
                 cfg->reconnect_interval_us < 0 || cfg->breaker_idle_ttl_us < 0 ||
                 cfg->lease_us < 0))
        bad = "timeouts and intervals must not be negative";
    if (!bad && cfg->prefix && strlen(cfg->prefix) >= sizeof l->prefix)
        bad = "key prefix too long (at most 63 bytes)";
    const stg_redis_breaker_config *b = &cfg->breaker;
    if (!bad && (b->open_us < 0 || b->max_multiplier < 0 || b->half_open_probes < 0 ||
                 b->probe_timeout_us < 0))
        bad = "breaker durations and counts must not be negative";
    /* Breaker times are absolute Redis µs (~2^51 today) in Lua doubles:
     * keeping each added span within 2^50 µs keeps sums exact. */
    if (!bad && (b->open_us > STG_REDIS_BREAKER_SPAN_MAX_US || b->max_multiplier > 1024 ||
                 b->probe_timeout_us > STG_REDIS_BREAKER_SPAN_MAX_US ||
                 (b->open_us ? b->open_us : STG_BREAKER_DEFAULT_OPEN_US) *
                         (b->max_multiplier ? b->max_multiplier
                                            : STG_BREAKER_DEFAULT_MAX_MULTIPLIER) >
                     STG_REDIS_BREAKER_SPAN_MAX_US ||
                 cfg->breaker_idle_ttl_us > STG_REDIS_BREAKER_SPAN_MAX_US))
        bad = "breaker open time x max multiplier, probe timeout and idle TTL must each be "
              "at most 2^50 us (35 years); max multiplier at most 1024";
    if (bad) {
        free(l);
        *err = STG_EINVAL;
        set_why(why, why_len, "%s", bad);
        return NULL;
    }

    l->rate = cfg->rate;
    l->burst = burst;
    l->interval_ns = interval;
    l->share = cfg->fallback_share;
    l->lease_us = l->adaptive ? 0 : cfg->lease_us;
    if (l->share > 0 && !l->adaptive) {
        double lb = floor(l->share * (double)burst);
        l->local_burst = lb < 1.0 ? 1 : (int64_t)lb;
        /* The local bucket must accept share * rate with that burst. */
        stg_bucket probe;
        stg_bucket_config bc = {.rate = l->share * l->rate, .burst = l->local_burst};
        if (stg_bucket_init(&probe, &bc, 0) != STG_OK) {
            free(l);
            *err = STG_EINVAL;
            set_why(why, why_len, "%s", "fallback share * rate is too low for a local bucket");
            return NULL;
        }
    }
    l->connect_timeout_us = default_us(cfg->connect_timeout_us, STG_REDIS_DEFAULT_CONNECT_TIMEOUT_US);
    l->command_timeout_us = default_us(cfg->command_timeout_us, STG_REDIS_DEFAULT_COMMAND_TIMEOUT_US);
    l->reconnect_interval_us = default_us(cfg->reconnect_interval_us, STG_REDIS_DEFAULT_RECONNECT_US);
    l->breaker_ttl_us = default_us(cfg->breaker_idle_ttl_us, STG_REDIS_DEFAULT_BREAKER_TTL_US);
    snprintf(l->prefix, sizeof l->prefix, "%s", cfg->prefix ? cfg->prefix : STG_REDIS_DEFAULT_PREFIX);
    l->bcfg.consecutive_failures =
        b->consecutive_failures == 0 ? STG_BREAKER_DEFAULT_CONSECUTIVE : b->consecutive_failures;
    l->bcfg.open_us = default_us(b->open_us, STG_BREAKER_DEFAULT_OPEN_US);
    l->bcfg.max_multiplier = b->max_multiplier == 0 ? STG_BREAKER_DEFAULT_MAX_MULTIPLIER
                                                    : b->max_multiplier;
    l->bcfg.half_open_probes = b->half_open_probes == 0 ? STG_BREAKER_DEFAULT_PROBES
                                                        : b->half_open_probes;
    l->bcfg.probe_timeout_us = default_us(b->probe_timeout_us, STG_BREAKER_DEFAULT_PROBE_TIMEOUT_US);
    l->log = cfg->log;
    l->log_data = cfg->log_data;
    l->clock = cfg->clock ? cfg->clock : mono_us;
    l->clock_data = cfg->clock ? cfg->clock_data : NULL;
    if (pthread_mutex_init(&l->mu, NULL) != 0) {
        free(l);
        *err = STG_ENOMEM;
        set_why(why, why_len, "%s", "cannot create a mutex");
        return NULL;
    }

    if ((cfg->sentinels != NULL) != (cfg->sentinel_master != NULL) ||
        (cfg->sentinels && (!(l->sentinels = strdup(cfg->sentinels)) ||
                            !(l->sentinel_master = strdup(cfg->sentinel_master))))) {
        *err = cfg->sentinels && cfg->sentinel_master ? STG_ENOMEM : STG_EINVAL;
        set_why(why, why_len, "%s",
                *err == STG_EINVAL ? "sentinels and sentinel_master go together"
                                   : "out of memory");
        stg_redis_limiter_free(l);
        return NULL;
    }
    char reason[STG__REASON_MAX];
    rc = connect_now(l, reason, sizeof reason);
    if (rc != STG_OK) {
        if (rc == STG_ENOMEM || l->share <= 0) {
            set_why(why, why_len, "redis %s unreachable: %s", l->url_shown, reason);
            stg_redis_limiter_free(l);
            *err = rc;
            return NULL;
        }
        stg__note note = {0};
        note_down(l, &note, reason);
        stg__redis_emit(l, &note);
    }
    *err = STG_OK;
    return l;
}

void stg_redis_limiter_free(stg_redis_limiter *l)
{
    if (!l)
        return;
    stg__lease_close(l); /* unspent leased tokens back to Redis */
    if (l->ctx)
        stg__rconn_free(l->ctx);
    stg__local_free_all(l);
    for (int i = 0; i < l->n_nodes; i++)
        stg__rconn_free(l->nodes[i].c);
    free(l->slot_node);
    free(l->sentinels);
    free(l->sentinel_master);
    pthread_mutex_destroy(&l->mu);
    memset(&l->url, 0, sizeof l->url); /* no password left in freed memory */
    free(l);
}

bool stg_redis_limiter_degraded(stg_redis_limiter *l)
{
    if (!l)
        return false;
    pthread_mutex_lock(&l->mu);
    bool d = l->down;
    pthread_mutex_unlock(&l->mu);
    return d;
}

void stg_redis_limiter_stats(stg_redis_limiter *l, stg_redis_stats *out)
{
    if (!out)
        return;
    memset(out, 0, sizeof *out);
    if (!l)
        return;
    pthread_mutex_lock(&l->mu);
    *out = l->stats;
    pthread_mutex_unlock(&l->mu);
}
