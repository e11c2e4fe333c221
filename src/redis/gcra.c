/*
 * The shared limiter: GCRA as a Lua script run inside Redis, and the
 * limiter API on top of it (try, acquire, pipelined acquire, set_rate).
 *
 * Script state per key, a hash:
 *   b  base: a Redis TIME second; all other times are ns since b
 *   t  TAT, ns since b: the instant the bucket is full again
 *   i  the interval T (ns per token) last used, to stretch the debt when a
 *      caller comes with a longer T (a rate cut), as stg_bucket_set_rate
 * Times are relative to b so that they stay integers below 2^53 (Lua
 * numbers are doubles): b is moved up when it is more than a day old, and
 * burst * T and timeouts are at most 2^50 ns, so every value the script
 * computes is below 2^53 and exact. Values are written with %.0f: Lua's
 * own number-to-string uses %.14g and would round them.
 *
 * The key expires when the bucket would be full again (plus 1 s): a missing
 * key means a full bucket, so expiry loses nothing.
 *
 * Classes and tenants (prio_lua.h, the model in src/core/prio_gcra.c): a
 * call with ARGV[9] = "class weight_m hold_ns floor_pm" and ARGV[10] = the
 * tenant decides by class and tenant on the same hash (fields pb, d<c>,
 * f<c>, p<c>:<tenant> beside b, t, i), so plain and class callers share one
 * TAT. The class fields count from a base of their own (pb), so that a
 * plain call that moves b needs not know them. A class call sets the expiry
 * from every field it holds; a plain call from t alone, which may cut the
 * marks and tenants' buckets short when both kinds of call share a key
 * (the side of forgetting fairness state, never the bound).
 * ARGV[11] > 0 pins the clock (µs since the epoch) instead of TIME: only
 * the differential test (tests/integration/test_redis_prio.c) uses it, to
 * run the script and the model on the same instants.
 *
 * The hand-over from and to the local fallback (see fallback.c): every
 * reply carries the key's debt (TAT - now) after the decision, which the
 * local bucket mirrors; and a call may carry a debt (ARGV[5], ns) that is
 * added to the TAT before deciding, and written even when the take itself
 * is refused: what the fallback admitted while Redis was away counts
 * against the shared bucket from the first shared decision on.
 *
 * Leases (lease.c, lease_size.c; stagger/redis.h says why the bound holds):
 * a call with lead_ns > 0 is a lease of up to `weight` tokens. Its TAT
 * before the take, tat0, is first moved to at least now + lead (the slots
 * skipped are lost, erring on the side of sending less), then as many
 * tokens as conform within the timeout are taken (k, at most weight), and
 * the reply says where the window of the lease ends (tat0 - now, rounded
 * down) and where the lease left the key (b and the new TAT), for the
 * give-back. The give-back (weight < 0) moves the TAT back by the unspent
 * tokens only when the key is still exactly there (same b, TAT and T):
 * nobody took since, so the lease becomes a smaller one; otherwise the
 * tokens lapse with their window.
 *
 * The clock is TIME inside the script. Redis before 5 replicates scripts
 * verbatim and refuses a write after TIME unless the script first asks for
 * effects replication, hence the guarded redis.replicate_commands().
 */
#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"
#include "redis/prio_lua.h"

const char stg__redis_gcra_lua[] =
    "-- stagger GCRA. KEYS[1] bucket hash; ARGV interval_ns, burst, weight, timeout_ns,\n"
    "-- carry_ns, lead_ns, base, tat, [class part, tenant, pinned now_us]. Returns\n"
    "-- {admitted 1|0, wait_us, debt_us} (the class part: prio_lua.h); a\n"
    "-- lease (lead_ns > 0, weight = tokens wanted) that is granted returns\n"
    "-- {1, wait_us, debt_us, k, end_us, base, tat}. weight < 0 gives -weight\n"
    "-- leased tokens back if the TAT is still base/tat: {1|0, 0, 0}.\n"
    "if redis.replicate_commands then redis.replicate_commands() end\n"
    "local T = tonumber(ARGV[1])\n"
    "local burst = tonumber(ARGV[2])\n"
    "local w = tonumber(ARGV[3])\n"
    "local timeout = tonumber(ARGV[4])\n"
    "local carry = tonumber(ARGV[5]) or 0\n"
    "local lead = tonumber(ARGV[6]) or 0\n"
    "local st = redis.call('HMGET', KEYS[1], 'b', 't', 'i')\n"
    "if w < 0 then\n"
    "  if tonumber(st[1]) == tonumber(ARGV[7]) and tonumber(st[2]) == tonumber(ARGV[8])\n"
    "      and tonumber(st[3]) == T then\n"
    "    redis.call('HSET', KEYS[1], 't', string.format('%.0f', tonumber(st[2]) + w * T))\n"
    "    return {1, 0, 0}\n"
    "  end\n"
    "  return {0, 0, 0}\n"
    "end\n"
    "local sec, usec\n"
    "local pin = tonumber(ARGV[11]) or 0\n"
    "if pin > 0 then\n"
    "  sec = math.floor(pin / 1000000); usec = pin - sec * 1000000\n"
    "else\n"
    "  local now_t = redis.call('TIME')\n"
    "  sec = tonumber(now_t[1]); usec = tonumber(now_t[2])\n"
    "end\n"
    "local base, tat, oldT = tonumber(st[1]), tonumber(st[2]), tonumber(st[3])\n"
    "if base == nil or tat == nil then base = sec; tat = nil end\n"
    "if sec - base > 86400 then\n"
    "  if tat then tat = tat - (sec - base) * 1000000000 end\n"
    "  base = sec\n"
    "end\n"
    "local now = (sec - base) * 1000000000 + usec * 1000\n"
    "if tat == nil or tat < now then tat = now end\n"
    "if oldT and T > oldT and tat > now then\n"
    "  local d = math.ceil((tat - now) * (T / oldT))\n"
    "  if d > 2^51 then d = 2^51 end\n"
    "  tat = now + d\n"
    "end\n"
    "if carry > 0 then tat = tat + carry end\n"
    "local function put(v)\n"
    "  redis.call('HSET', KEYS[1], 'b', string.format('%.0f', base),\n"
    "    't', string.format('%.0f', v), 'i', string.format('%.0f', T))\n"
    "  redis.call('PEXPIRE', KEYS[1], math.ceil((v - now) / 1000000) + 1000)\n"
    "end\n"
    STG__PRIO_LUA
    "if lead > 0 then\n"
    "  local tat0 = tat\n"
    "  if tat0 < now + lead then tat0 = now + lead end\n"
    "  local k = math.floor((now + timeout + burst * T - tat0) / T)\n"
    "  if k > w then k = w end\n"
    "  if k >= 1 then\n"
    "    local lt = tat0 + k * T\n"
    "    local lw = lt - burst * T - now\n"
    "    if lw < 0 then lw = 0 end\n"
    "    put(lt)\n"
    "    return {1, math.ceil(lw / 1000), math.ceil((lt - now) / 1000), k,\n"
    "      math.floor((tat0 - now) / 1000), base, lt}\n"
    "  end\n"
    "  w = 1\n"
    "end\n"
    "local new_tat = tat + w * T\n"
    "local wait = new_tat - burst * T - now\n"
    "if wait > timeout then\n"
    "  if carry > 0 then put(tat) end\n"
    "  return {0, math.ceil(wait / 1000), math.ceil((tat - now) / 1000)}\n"
    "end\n"
    "put(new_tat)\n"
    "if wait < 0 then wait = 0 end\n"
    "return {1, math.ceil(wait / 1000), math.ceil((new_tat - now) / 1000)}\n";

/* timeout_us as the script's timeout_ns: <= 0 -> 0, clamped to the span. */
int64_t stg__gcra_timeout_ns(int64_t timeout_us)
{
    if (timeout_us <= 0)
        return 0;
    if (timeout_us >= STG_REDIS_SPAN_MAX_NS / 1000)
        return STG_REDIS_SPAN_MAX_NS;
    return timeout_us * 1000;
}

/* Map the script's answer to the API's; *debt_us gets the key's debt. */
static int answer(const redisReply *r, bool is_try, int64_t *wait_us, int64_t *debt_us)
{
    long long admitted, wait, debt;
    if (!stg__reply_int(r, 0, &admitted) || !stg__reply_int(r, 1, &wait) || wait < 0 ||
        !stg__reply_int(r, 2, &debt) || debt < 0)
        return STG_EIO; /* not our script's reply: cannot happen */
    *debt_us = debt;
    *wait_us = admitted ? (is_try ? 0 : wait) : wait;
    if (admitted)
        return STG_OK;
    return is_try ? STG_EAGAIN : STG_ETIMEDOUT;
}

int stg__gcra_local_takes(stg_redis_limiter *l, const char *name, size_t n, int64_t weight,
                       int64_t timeout_us, bool is_try, int *rcs, int64_t *waits)
{
    stg__local *loc = stg__local_get(l, name);
    if (!loc)
        return STG_ENOMEM;
    for (size_t i = 0; i < n; i++) {
        int64_t w = 0;
        int rc = stg__local_take(l, loc, weight, stg__redis_now(l), is_try ? -1 : timeout_us, &w);
        if (rc == STG_ETOOBIG)
            return rc;
        rcs[i] = rc;
        waits[i] = w;
        l->stats.local_decisions++;
    }
    return STG_OK;
}

/* What a lease reply adds to the first three elements. */
typedef struct lease_reply {
    bool lease; /* the reply was a lease's (else a plain take's) */
    long long k, end_us, base, tat;
} lease_reply;

static void parse_lease(const redisReply *r, lease_reply *lr)
{
    lr->lease = r && r->type == REDIS_REPLY_ARRAY && r->elements >= 7 &&
                stg__reply_int(r, 3, &lr->k) && lr->k >= 1 &&
                stg__reply_int(r, 4, &lr->end_us) && stg__reply_int(r, 5, &lr->base) &&
                stg__reply_int(r, 6, &lr->tat);
}

static void parse_lease_cb(const redisReply *r, void *data)
{
    parse_lease(r, data);
}

/* Under mu, connected: n plain takes decided by the script (internal.h,
 * stg__gcra_takes, says how). */
static int shared_takes(stg_redis_limiter *l, const char *name, const char *rkey,
                        const char *const *args, size_t n, int64_t weight, int64_t timeout_us,
                        bool is_try, int *rcs, int64_t *waits, redisReply **replies,
                        stg__note *note, lease_reply *lr)
{
    return stg__gcra_takes(l, name, rkey, args, 5, n, weight, timeout_us, is_try, rcs, waits,
                           replies, note, lr ? parse_lease_cb : NULL, lr);
}

int stg__gcra_takes(stg_redis_limiter *l, const char *name, const char *rkey,
                    const char *const *args, int argc, size_t n, int64_t weight,
                    int64_t timeout_us, bool is_try, int *rcs, int64_t *waits,
                    redisReply **replies, stg__note *note,
                    void (*first)(const redisReply *, void *), void *first_data)
{
    stg__local *loc = NULL;
    if (l->share > 0) {
        loc = stg__local_get(l, name);
        if (!loc)
            return STG_ENOMEM;
    }
    char a_carry[24];
    const char *argv[STG__GCRA_ARGC_MAX + 1] = {args[0], args[1], args[2], args[3], a_carry};
    if (argc < 5 || argc > STG__GCRA_ARGC_MAX)
        return STG_EINVAL;
    for (int i = 4; i < argc; i++)
        argv[i + 1] = args[i];
    size_t done = 0;
    int rc = STG_OK;
    int64_t debt = 0;
    bool fresh = true; /* a carry is due if loc->carry */
    while (done < n) {
        int64_t carry = fresh && loc && loc->carry ? stg__local_carry_ns(l, loc, stg__redis_now(l))
                                                   : 0;
        snprintf(a_carry, sizeof a_carry, "%" PRId64, carry);
        size_t m = carry > 0 ? 1 : n - done;
        int erc = stg__redis_eval_fresh(l, STG__SCRIPT_GCRA, rkey, argc + 1, argv, m,
                                        replies + done, note);
        if (erc == STG_EAGAIN) {
            fresh = true; /* a new connection: nothing ran, carry first */
            continue;
        }
        if (erc != STG_OK)
            break;
        for (size_t i = done; i < done + m; i++) {
            int r = answer(replies[i], is_try, &waits[i], &debt);
            if (r == STG_EIO)
                rc = STG_EIO;
            if (first && i == 0)
                first(replies[i], first_data);
            rcs[i] = r;
            freeReplyObject(replies[i]);
        }
        l->stats.redis_decisions += (int64_t)m;
        done += m;
        fresh = false;
    }
    if (done == 0)
        return STG_EUNAVAIL;
    if (loc && rc == STG_OK)
        stg__local_mirror(l, loc, stg__redis_now(l), debt * 1000);
    if (done < n) {
        /* The connection broke after the carrying call (only a limiter
         * with a fallback carries): the rest are answered locally. */
        int lrc = stg__gcra_local_takes(l, name, n - done, weight, timeout_us, is_try, rcs + done,
                              waits + done);
        if (lrc != STG_OK)
            rc = lrc;
    }
    return rc;
}

/* Under mu: one acquire (or try) of weight 1 with leases on: from the
 * key's lease if it holds a token usable in time, else a new lease (or a
 * single token) from the script, sized by lease_size.c. A grant whose
 * window closed before its reply arrived (a round trip longer than the
 * margin it was sized with) is not used: its tokens lapse, and the call
 * asks again, with the margin of the round trip just seen; after three
 * such, the acquire is refused (tokens spent, nothing admitted: the side
 * of sending less). */
static int lease_decide(stg_redis_limiter *l, const char *name, const char *rkey,
                        const char *a_int, const char *a_burst, int64_t timeout_us, bool is_try,
                        int *rcs, int64_t *waits, redisReply **replies, stg__note *note)
{
    stg__lease *ls = stg__lease_get(l, name);
    if (!ls)
        return STG_ENOMEM;
    if (stg__lease_draw(l, ls, stg__redis_now(l), is_try ? -1 : timeout_us, rcs, waits))
        return STG_OK;
    if (!stg__redis_ready(l, note))
        return STG_EUNAVAIL;
    for (int attempt = 0; attempt < 3; attempt++) {
        int64_t t0 = stg__redis_now(l);
        stg__lease_plan p = stg__lease_size(stg__lease_meter_rate(&ls->meter, t0), l->interval_ns,
                                            l->burst, l->lease_us, l->rtt_us);
        char a_weight[24], a_timeout[24], a_lead[24];
        snprintf(a_weight, sizeof a_weight, "%" PRId64, p.k);
        snprintf(a_timeout, sizeof a_timeout, "%" PRId64,
                 is_try ? 0 : stg__gcra_timeout_ns(timeout_us));
        snprintf(a_lead, sizeof a_lead, "%" PRId64, p.lead_ns);
        const char *args[] = {a_int, a_burst, a_weight, a_timeout, a_lead};
        lease_reply lr = {0};
        int rc = shared_takes(l, name, rkey, args, 1, 1, timeout_us, is_try, rcs, waits,
                              replies, note, &lr);
        int64_t t1 = stg__redis_now(l);
        if (rc != STG_OK)
            return rc;
        l->rtt_us = t1 - t0;
        if (rcs[0] != STG_OK)
            return STG_OK; /* refused: nothing taken */
        if (!lr.lease) {
            /* a plain take (leases off for this key, or burst 1) */
            stg__lease_meter_add(&ls->meter, t1, 1);
            return STG_OK;
        }
        if (t1 + waits[0] <= t0 + lr.end_us) {
            stg__lease_grant(l, ls, lr.k, t0, t1, waits[0], lr.end_us, lr.base, lr.tat);
            stg__lease_meter_add(&ls->meter, t1, 1);
            return STG_OK;
        }
        l->stats.lease_expired += lr.k;
    }
    rcs[0] = is_try ? STG_EAGAIN : STG_ETIMEDOUT;
    waits[0] = l->rtt_us;
    return STG_OK;
}

/* The common path of try, acquire and acquire_many. On STG_OK, rcs[] and
 * waits[] hold each decision. */
static int decide(stg_redis_limiter *l, const char *key, size_t n, int64_t weight,
                  int64_t timeout_us, bool is_try, int *rcs, int64_t *waits)
{
    if (!l || weight < 1 || l->adaptive)
        return STG_EINVAL;
    const char *name = key ? key : l->url.key;
    char rkey[STG__KEYBUF];
    if (stg__redis_key(l, "rl:", name, rkey) != STG_OK)
        return STG_EINVAL;
    if (n == 0)
        return STG_OK;
    if (n > SIZE_MAX / sizeof(int64_t))
        return STG_EINVAL;
    redisReply **replies = malloc(n * sizeof *replies);
    if (!replies)
        return STG_ENOMEM;

    stg__note note = {0};
    int rc;
    pthread_mutex_lock(&l->mu);
    if (weight > l->burst) {
        rc = STG_ETOOBIG;
        goto out;
    }
    char a_int[24], a_burst[24], a_weight[24], a_timeout[24];
    snprintf(a_int, sizeof a_int, "%" PRId64, l->interval_ns);
    snprintf(a_burst, sizeof a_burst, "%" PRId64, l->burst);
    snprintf(a_weight, sizeof a_weight, "%" PRId64, weight);
    snprintf(a_timeout, sizeof a_timeout, "%" PRId64,
             is_try ? 0 : stg__gcra_timeout_ns(timeout_us));
    const char *args[] = {a_int, a_burst, a_weight, a_timeout, "0"};

    if (l->lease_us > 0 && n == 1 && weight == 1)
        rc = lease_decide(l, name, rkey, a_int, a_burst, timeout_us, is_try, rcs, waits, replies,
                          &note);
    else
        rc = stg__redis_ready(l, &note) ? shared_takes(l, name, rkey, args, n, weight,
                                                       timeout_us, is_try, rcs, waits, replies,
                                                       &note, NULL)
                                        : STG_EUNAVAIL;
    if (rc == STG_EUNAVAIL && l->share > 0) {
        rc = stg__gcra_local_takes(l, name, n, weight, timeout_us, is_try, rcs, waits);
    } else if (rc == STG_EUNAVAIL) {
        l->stats.unavailable++;
    }
out:
    pthread_mutex_unlock(&l->mu);
    free(replies);
    stg__redis_emit(l, &note);
    return rc;
}

int stg_redis_limiter_try(stg_redis_limiter *l, const char *key, int64_t weight,
                          int64_t *wait_us)
{
    int r;
    int64_t w;
    int rc = decide(l, key, 1, weight, 0, true, &r, &w);
    if (rc != STG_OK)
        return rc;
    if (wait_us)
        *wait_us = w;
    return r;
}

int stg_redis_limiter_acquire(stg_redis_limiter *l, const char *key, int64_t weight,
                              int64_t timeout_us, int64_t *wait_us)
{
    int r;
    int64_t w;
    int rc = decide(l, key, 1, weight, timeout_us, false, &r, &w);
    if (rc != STG_OK)
        return rc;
    if (wait_us)
        *wait_us = w;
    return r;
}

int stg_redis_limiter_acquire_many(stg_redis_limiter *l, const char *key, size_t n,
                                   int64_t weight, int64_t timeout_us, int *rcs,
                                   int64_t *waits)
{
    if ((!rcs && n > 0) || n > SIZE_MAX / sizeof(int64_t))
        return STG_EINVAL;
    int64_t *w = waits;
    if (!w && n > 0) {
        w = malloc(n * sizeof *w);
        if (!w)
            return STG_ENOMEM;
    }
    int rc = decide(l, key, n, weight, timeout_us, false, rcs, w);
    if (rc != STG_OK) {
        for (size_t i = 0; i < n; i++)
            rcs[i] = rc;
    }
    if (w != waits)
        free(w);
    return rc;
}

int stg_redis_limiter_set_rate(stg_redis_limiter *l, double rate)
{
    if (!l || l->adaptive)
        return STG_EINVAL;
    int64_t interval;
    if (stg__redis_interval_ns(rate, &interval) != STG_OK)
        return STG_EINVAL;
    pthread_mutex_lock(&l->mu);
    int rc = STG_OK;
    if (l->burst > STG_REDIS_SPAN_MAX_NS / interval) {
        rc = STG_EINVAL;
    } else if (l->share > 0) {
        /* The local buckets must take share * rate too. */
        stg_bucket probe;
        stg_bucket_config bc = {.rate = l->share * rate, .burst = l->local_burst};
        if (stg_bucket_init(&probe, &bc, 0) != STG_OK)
            rc = STG_EINVAL;
    }
    if (rc == STG_OK) {
        l->rate = rate;
        l->interval_ns = interval;
        stg__local_set_rate(l, rate);
    }
    pthread_mutex_unlock(&l->mu);
    return rc;
}
