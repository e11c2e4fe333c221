/*
 * The shared circuit breaker: stg_breaker's consecutive-failure state
 * machine, kept in a Redis hash per key and updated by one Lua script, so a
 * breaker opened by one worker is open for every worker at once.
 *
 * Hash fields (absent key = CLOSED with no failures):
 *   s  state: 0 CLOSED, 1 OPEN, 2 HALF_OPEN (the stg_breaker_state values)
 *   c  CLOSED: consecutive failures so far
 *   u  OPEN: Redis time (us since the epoch) at which it half-opens
 *   m  current open duration / open_us (1, 2, 4, ... max_multiplier)
 *   n  trips (re-opens included) since the key was created
 *   p  HALF_OPEN: probe slots claimed without an outcome yet
 *   k  HALF_OPEN: probe successes so far
 *   l  HALF_OPEN: Redis time at which claimed slots lapse
 * Transitions are those of stg_breaker (breaker.h) with the ratio mode
 * left out: OPEN half-opens lazily at the first call at or after u;
 * outcomes while OPEN are ignored; HALF_OPEN closes after half_open_probes
 * successes and re-opens at once on a failure with the duration doubled.
 *
 * Writes only when something changed, so the common case (a success on a
 * healthy host, an allow on a closed breaker) is a read. The key expires
 * breaker_idle_ttl after its last change (plus the open or lapse time
 * still ahead), which forgets a run of failures on a host left alone that
 * long.
 */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "internal.h"

const char stg__redis_breaker_lua[] =
    "-- stagger shared breaker. KEYS[1] breaker hash; ARGV op (allow|success|failure|\n"
    "-- neutral|state), consecutive, open_us, max_multiplier, probes, probe_timeout_us,\n"
    "-- idle_ttl_ms. Returns {ok 1|0, state, wait_us, trips}.\n"
    "if redis.replicate_commands then redis.replicate_commands() end\n"
    "local op = ARGV[1]\n"
    "local thr, open_us, maxm = tonumber(ARGV[2]), tonumber(ARGV[3]), tonumber(ARGV[4])\n"
    "local probes, ptimeout, ttl = tonumber(ARGV[5]), tonumber(ARGV[6]), tonumber(ARGV[7])\n"
    "local now_t = redis.call('TIME')\n"
    "local now = tonumber(now_t[1]) * 1000000 + tonumber(now_t[2])\n"
    "local h = redis.call('HMGET', KEYS[1], 's', 'c', 'u', 'm', 'n', 'p', 'k', 'l')\n"
    "local s, c, u = tonumber(h[1]) or 0, tonumber(h[2]) or 0, tonumber(h[3]) or 0\n"
    "local m, n, p = tonumber(h[4]) or 1, tonumber(h[5]) or 0, tonumber(h[6]) or 0\n"
    "local k, lapse = tonumber(h[7]) or 0, tonumber(h[8]) or 0\n"
    "local dirty = false\n"
    "if s == 1 and now >= u then s = 2; p = 0; k = 0; dirty = true end\n"
    "if s == 2 and p > 0 and now >= lapse then p = 0; dirty = true end\n"
    "local function open_now()\n"
    "  c = 0; p = 0; k = 0; s = 1; u = now + open_us * m; n = n + 1; dirty = true\n"
    "end\n"
    "local ok, wait = 1, 0\n"
    "if op == 'allow' then\n"
    "  if s == 1 then ok = 0; wait = u - now\n"
    "  elseif s == 2 then\n"
    "    if p + k < probes then p = p + 1; lapse = now + ptimeout; dirty = true\n"
    "    else ok = 0; if p > 0 then wait = lapse - now end end\n"
    "  end\n"
    "elseif op == 'success' then\n"
    "  if s == 0 then\n"
    "    if c ~= 0 then c = 0; dirty = true end\n"
    "  elseif s == 2 then\n"
    "    if p > 0 then p = p - 1 end\n"
    "    k = k + 1; dirty = true\n"
    "    if k >= probes then s = 0; c = 0; p = 0; k = 0; m = 1 end\n"
    "  end\n"
    "elseif op == 'failure' then\n"
    "  if s == 0 then\n"
    "    c = c + 1; dirty = true\n"
    "    if thr > 0 and c >= thr then m = 1; open_now() end\n"
    "  elseif s == 2 then\n"
    "    if m > maxm / 2 then m = maxm else m = m * 2 end\n"
    "    open_now()\n"
    "  end\n"
    "elseif op == 'neutral' then\n"
    "  if s == 2 and p > 0 then p = p - 1; dirty = true end\n"
    "end\n"
    "if dirty then\n"
    "  local function f(x) return string.format('%.0f', x) end\n"
    "  redis.call('HSET', KEYS[1], 's', f(s), 'c', f(c), 'u', f(u), 'm', f(m), 'n', f(n),\n"
    "    'p', f(p), 'k', f(k), 'l', f(lapse))\n"
    "  local ahead = 0\n"
    "  if s == 1 then ahead = u - now elseif s == 2 and p > 0 then ahead = lapse - now end\n"
    "  redis.call('PEXPIRE', KEYS[1], ttl + math.ceil(ahead / 1000))\n"
    "end\n"
    "if s == 1 and op ~= 'allow' then wait = u - now end\n"
    "return {ok, s, wait, n}\n";

typedef enum op {
    OP_ALLOW,
    OP_SUCCESS,
    OP_FAILURE,
    OP_NEUTRAL,
    OP_STATE
} op;

static const char *const op_name[] = {"allow", "success", "failure", "neutral", "state"};

typedef struct result {
    bool ok;
    stg_breaker_state state;
    int64_t wait_us;
    int64_t trips;
} result;

/* Under mu: answer from the local breaker of name. */
static int local_run(stg_redis_limiter *l, const char *name, op o, result *res)
{
    stg__local *loc = stg__local_get(l, name);
    if (!loc)
        return STG_ENOMEM;
    int64_t now = stg__redis_now(l);
    res->ok = true;
    res->wait_us = 0;
    switch (o) {
    case OP_ALLOW:
        res->ok = stg_breaker_allow(&loc->breaker, now, &res->wait_us) == STG_OK;
        break;
    case OP_SUCCESS:
        stg_breaker_on_success(&loc->breaker, now);
        break;
    case OP_FAILURE:
        stg_breaker_on_failure(&loc->breaker, now);
        break;
    case OP_NEUTRAL:
        stg_breaker_on_neutral(&loc->breaker, now);
        break;
    case OP_STATE:
        break;
    }
    res->state = stg_breaker_state_at(&loc->breaker, now);
    /* In OPEN (already settled at now) allow changes nothing and says how
     * long is left. */
    if (o != OP_ALLOW && res->state == STG_BREAKER_OPEN)
        stg_breaker_allow(&loc->breaker, now, &res->wait_us);
    res->trips = loc->trips;
    l->stats.local_decisions++;
    return STG_OK;
}

static int run(stg_redis_limiter *l, const char *key, op o, result *res)
{
    if (!l)
        return STG_EINVAL;
    const char *name = key ? key : l->url.key;
    char rkey[STG__KEYBUF];
    if (stg__redis_key(l, "br:", name, rkey) != STG_OK)
        return STG_EINVAL;

    char a_thr[24], a_open[24], a_maxm[24], a_probes[24], a_pto[24], a_ttl[24];
    snprintf(a_thr, sizeof a_thr, "%d", l->bcfg.consecutive_failures);
    snprintf(a_open, sizeof a_open, "%" PRId64, l->bcfg.open_us);
    snprintf(a_maxm, sizeof a_maxm, "%d", l->bcfg.max_multiplier);
    snprintf(a_probes, sizeof a_probes, "%d", l->bcfg.half_open_probes);
    snprintf(a_pto, sizeof a_pto, "%" PRId64, l->bcfg.probe_timeout_us);
    int64_t ttl_ms = (l->breaker_ttl_us + 999) / 1000;
    snprintf(a_ttl, sizeof a_ttl, "%" PRId64, ttl_ms < 1 ? 1 : ttl_ms);
    const char *args[] = {op_name[o], a_thr, a_open, a_maxm, a_probes, a_pto, a_ttl};

    stg__note note = {0};
    int rc;
    redisReply *r = NULL;
    pthread_mutex_lock(&l->mu);
    if (stg__redis_ready(l, &note) &&
        stg__redis_eval(l, STG__SCRIPT_BREAKER, rkey, 7, args, 1, &r, &note) == STG_OK) {
        long long ok, state, wait, trips;
        if (stg__reply_int(r, 0, &ok) && stg__reply_int(r, 1, &state) &&
            stg__reply_int(r, 2, &wait) && stg__reply_int(r, 3, &trips) && state >= 0 &&
            state <= 2) {
            res->ok = ok != 0;
            res->state = (stg_breaker_state)state;
            res->wait_us = wait < 0 ? 0 : wait;
            res->trips = trips;
            rc = STG_OK;
        } else {
            rc = STG_EIO; /* not our script's reply: cannot happen */
        }
        freeReplyObject(r);
        l->stats.redis_decisions++;
    } else if (l->share > 0) {
        rc = local_run(l, name, o, res);
    } else {
        rc = STG_EUNAVAIL;
        l->stats.unavailable++;
    }
    pthread_mutex_unlock(&l->mu);
    stg__redis_emit(l, &note);
    return rc;
}

int stg_redis_breaker_allow(stg_redis_limiter *l, const char *key, int64_t *retry_in_us)
{
    result res;
    int rc = run(l, key, OP_ALLOW, &res);
    if (rc != STG_OK)
        return rc;
    if (retry_in_us)
        *retry_in_us = res.ok ? 0 : res.wait_us;
    return res.ok ? STG_OK : STG_EBREAKER;
}

int stg_redis_breaker_record(stg_redis_limiter *l, const char *key, stg_breaker_verdict verdict,
                             stg_breaker_state *state)
{
    op o;
    switch (verdict) {
    case STG_BREAKER_SUCCESS:
        o = OP_SUCCESS;
        break;
    case STG_BREAKER_FAILURE:
        o = OP_FAILURE;
        break;
    case STG_BREAKER_NEUTRAL:
        o = OP_NEUTRAL;
        break;
    default:
        return STG_EINVAL;
    }
    result res;
    int rc = run(l, key, o, &res);
    if (rc == STG_OK && state)
        *state = res.state;
    return rc;
}

int stg_redis_breaker_state(stg_redis_limiter *l, const char *key, stg_breaker_state *state,
                            int64_t *retry_in_us, int64_t *trips)
{
    result res;
    int rc = run(l, key, OP_STATE, &res);
    if (rc != STG_OK)
        return rc;
    if (state)
        *state = res.state;
    if (retry_in_us)
        *retry_in_us = res.state == STG_BREAKER_OPEN ? res.wait_us : 0;
    if (trips)
        *trips = res.trips;
    return STG_OK;
}
