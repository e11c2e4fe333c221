/*
 * The shared adaptive rate: stagger/adaptive.h's model run inside Redis by
 * one Lua script, so that every process pacing a key paces at the rate the
 * key has learned, and a throttle seen by one of them cuts it for all.
 *
 * Why in a script and not in each client with only the state shared: the
 * decision (where the curve is now, whether this throttle belongs to the
 * last cut, whether this send may go) reads and writes several fields at
 * once; one script is atomic and runs on one clock (Redis TIME), so
 * processes neither race nor disagree about "now".
 *
 * State per key, a hash "<prefix>ad:<name>" (times in ns since b):
 *   b        base: a Redis TIME second (moved up when a day old, as gcra.c)
 *   en       1 once a throttle or a hold was seen: pacing is on
 *   wm, k    the curve: W_max (req/s) and K (s) of the last cut
 *   lt       the last cut's instant (origin of the curve and of slow start)
 *   lc, rs   the last cut and the admission count then (recovery rule)
 *   pr, pb   slow start on (the cut rested on no measurement) and its base
 *   n        admissions ever: the tickets
 *   o        the key's first call: measurement slots are aligned on it, so
 *            the first one is a whole 0.5 s
 *   ms,mc,mr,ma  measurement: 0.5 s slot index, admissions in it, smoothed
 *            rate, a slot has closed
 *   t, i     the pacing GCRA's TAT and the interval last used
 *   hu       hold: no admission before it
 *   c...     classes and tenants (below): prio_lua.h's fields with a "c"
 *            in front (cpb, cd<c>, cs0, cf<c>, cp<c>:<tenant>,
 *            cq<c>:<tenant>), so that none is taken for pr or pb
 * The key expires after 10 min without a call (or later, when a class
 * field reaches further): a missing key is a limiter that has learned
 * nothing, which is what an idle key should be.
 *
 * Classes and tenants (issue #32): an acquire with a class part (ARGV[13]
 * "cls weight_m hold_ns floor_pm", hold 0: 8 intervals within 20 ms..1 s;
 * ARGV[14] the tenant) is decided, while the key paces (en == 1), by the
 * fixed-rate script's decision (prio_lua.h: the pure model of
 * src/core/prio_gcra.c) at T = ceil(1e9 / rate), on this hash's t and i,
 * which plain acquires share: the same rules and numbers, with w = 1, no
 * lead, no carry. An admission counts in the measurement and gets its
 * ticket as a plain one; a refusal changes only the class fields. While the
 * key does not pace, a class call is admitted as a plain one (nothing
 * waits, so there is nothing to order; no class field is written). Every
 * acquire's reply carries the T it paced at (0: not pacing), and ARGV[15]
 * > 0 pins the clock (µs since the epoch) instead of TIME: only the
 * differential test (tests/integration/test_redis_prio_adaptive.c) uses
 * it, to run the script and the model on the same instants.
 *
 * A hold (a 503 that says when the server is back, or a quota spent until
 * a reset) is not congestion: it never cuts, and as stg_adaptive_on_hold
 * it pauses the model for the part of it not already held: the curve's
 * origin (lt), the last cut (lc) and the measurement's slots (o) move
 * forward by it, and while it lasts the curve is read at its end (where
 * its clock stands still), so that afterwards the key resumes at the rate it had
 * instead of reading the silence as an idle client (a measured rate near
 * 0, which the measure cap turns into a rate near the floor) or as
 * seconds of cubic growth. A throttle that comes with a hold (a 429 with
 * a spent quota) still cuts.
 *
 * Differences from the in-process limiter, all because the script sees
 * every process's admissions but no response it is not told about: the
 * measured rate counts admissions, the curve is evaluated when a process
 * asks, and a response costs a round trip only when it is a throttle or a
 * hold. The recovery rule becomes exact: a throttle cuts only when the send
 * it answers was admitted after the last cut (its ticket > rs) or
 * recovery_ns has passed.
 *
 * Numbers: every time is an integer of ns below 2^53 (see gcra.c) and is
 * written with %.17g, which keeps integers exact and rates round-tripping.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"
#include "redis/prio_lua.h"

const char stg__redis_adaptive_lua[] =
    "-- stagger shared adaptive rate. KEYS[1] state hash. ARGV: op, beta, scale,\n"
    "-- min_rate, max_rate (0 none), measure_cap, burst, recovery_ns, doubling_ns\n"
    "-- (0 no slow start), x, y, throttled, [class part, tenant, pinned now_us].\n"
    "-- op a (acquire): x timeout_ns. op r (response): x ticket, y hold_ns.\n"
    "-- op s (state). Returns {admitted|cut, wait_us, ticket|admissions,\n"
    "-- rate in milli req/s, enabled}, an acquire adds T (0: not pacing), and\n"
    "-- with a class part while pacing {floor, tracked, debt_us} (prio_lua.h).\n"
    "if redis.replicate_commands then redis.replicate_commands() end\n"
    "local op = ARGV[1]\n"
    "local beta, C = tonumber(ARGV[2]), tonumber(ARGV[3])\n"
    "local minr, maxr, mcap = tonumber(ARGV[4]), tonumber(ARGV[5]), tonumber(ARGV[6])\n"
    "local burst, recov, dbl = tonumber(ARGV[7]), tonumber(ARGV[8]), tonumber(ARGV[9])\n"
    "local x, y, thr = tonumber(ARGV[10]), tonumber(ARGV[11]), tonumber(ARGV[12])\n"
    "local B = 500000000\n"
    "local sec, usec\n"
    "local pin = tonumber(ARGV[15]) or 0\n"
    "if pin > 0 then\n"
    "  sec = math.floor(pin / 1000000); usec = pin - sec * 1000000\n"
    "else\n"
    "  local tm = redis.call('TIME')\n"
    "  sec = tonumber(tm[1]); usec = tonumber(tm[2])\n"
    "end\n"
    "local F = {'b','en','wm','k','lt','lc','rs','pr','pb','n','o','ms','mc','mr','ma','t','i',\n"
    "  'hu'}\n"
    "local raw = redis.call('HMGET', KEYS[1], unpack(F))\n"
    "local s = {}\n"
    "for j = 1, #F do s[F[j]] = tonumber(raw[j]) end\n"
    "local fresh = s.b == nil or s.n == nil or s.o == nil\n"
    "if fresh then s = {b = sec} end\n"
    "if sec - s.b > 86400 then\n"
    "  local d = (sec - s.b) * 1000000000\n"
    "  for _, f in ipairs({'lt', 'lc', 'o', 't', 'hu'}) do if s[f] then s[f] = s[f] - d end end\n"
    "  local q = math.floor(-s.o / B)\n"
    "  if q > 0 then s.o, s.ms = s.o + q * B, s.ms - q end\n"
    "  s.b = sec\n"
    "end\n"
    "local now = (sec - s.b) * 1000000000 + usec * 1000\n"
    "if fresh then\n"
    "  s.en, s.n, s.rs, s.pr, s.mc, s.mr, s.ma = 0, 0, 0, 0, 0, 0, 0\n"
    "  s.o, s.ms = now, 0\n"
    "  s.wm, s.pb, s.lt = minr, minr, now\n"
    "  s.k = (minr * (1 - beta) / C) ^ (1 / 3)\n"
    "end\n"
    "local slot = math.floor((now - s.o) / B)\n"
    "if slot > s.ms then\n"
    "  s.mr = 0.8 * (s.mc / ((slot - s.ms) * 0.5)) + 0.2 * s.mr\n"
    "  s.mc, s.ms, s.ma = 0, slot, 1\n"
    "end\n"
    "local function sending()\n"
    "  if s.ma == 1 then return s.mr end\n"
    "  return s.mc / 0.5\n"
    "end\n"
    "local function clamp(r)\n"
    "  if not (r >= minr) then r = minr end\n"
    "  if maxr > 0 and r > maxr then r = maxr end\n"
    "  return r\n"
    "end\n"
    "local function fill()\n"
    "  local tn = now\n"
    "  if s.hu and s.hu > tn then tn = s.hu end\n"
    "  local t = (tn - s.lt) / 1e9 - s.k\n"
    "  local r = C * t * t * t + s.wm\n"
    "  if s.pr == 1 then\n"
    "    local d = (tn - s.lt) / dbl\n"
    "    if d > 60 then d = 60 end\n"
    "    local slow = s.pb * 2 ^ d\n"
    "    if slow > r then r = slow end\n"
    "  end\n"
    "  local cap = mcap * sending()\n"
    "  if r > cap then r = cap end\n"
    "  return clamp(r)\n"
    "end\n"
    "local rate = 0\n"
    "if s.en == 1 then rate = fill() end\n"
    "if op == 's' then return {0, 0, s.n, math.floor(rate * 1000), s.en} end\n"
    "local function save(ttl)\n"
    "  local out = {}\n"
    "  for _, f in ipairs(F) do\n"
    "    if s[f] ~= nil then\n"
    "      out[#out + 1] = f\n"
    "      out[#out + 1] = string.format('%.17g', s[f])\n"
    "    end\n"
    "  end\n"
    "  redis.call('HSET', KEYS[1], unpack(out))\n"
    "  redis.call('PEXPIRE', KEYS[1], ttl)\n"
    "end\n"
    "local hold = 0\n"
    "if s.hu and s.hu > now then hold = s.hu - now end\n"
    "local res, Tused\n"
    "if op == 'a' then\n"
    "  local wait, T, new_tat = hold, nil, nil\n"
    "  if s.en == 1 then\n"
    "    T = math.ceil(1000000000 / rate)\n"
    "    Tused = T\n"
    "    local tat = s.t\n"
    "    if tat == nil or tat < now then tat = now end\n"
    "    if s.i and T > s.i and tat > now then\n"
    "      local d = math.ceil((tat - now) * (T / s.i))\n"
    "      if d > 2^51 then d = 2^51 end\n"
    "      tat = now + d\n"
    "    end\n"
    "    if tat < now + hold then tat = now + hold end\n"
    "    local spec = ARGV[13] or ''\n"
    "    if spec ~= '' then\n"
    "      local w, timeout, lead, carry, base = 1, x, 0, 0, s.b\n"
    STG__PRIO_LUA_FN("c")
    "      local c1, c2, c3, c4 = string.match(spec, '^(%d) (%d+) (%d+) (%d+)$')\n"
    "      local ph = tonumber(c3)\n"
    "      if ph == 0 then\n"
    "        ph = 8 * T\n"
    "        if ph < 20000000 then ph = 20000000 end\n"
    "        if ph > 1000000000 then ph = 1000000000 end\n"
    "      end\n"
    "      return prio_run(tonumber(c1), tonumber(c2), ph, tonumber(c4), ARGV[14] or '',\n"
    "        function(k, g, hs, exp, rep)\n"
    "          local tk, wt = 0, rep[2]\n"
    "          if wt < math.ceil(hold / 1000) then wt = math.ceil(hold / 1000) end\n"
    "          if k > 0 then\n"
    "            s.t, s.i = g, T\n"
    "            s.n = s.n + 1\n"
    "            s.mc = s.mc + 1\n"
    "            tk = s.n\n"
    "          end\n"
    "          redis.call('HSET', KEYS[1], unpack(hs))\n"
    "          local ttl = math.ceil((exp - now) / 1000000) + 1000\n"
    "          if ttl < 600000 then ttl = 600000 end\n"
    "          save(ttl)\n"
    "          return {rep[1], wt, tk, math.floor(rate * 1000), s.en, T, rep[9], rep[10], rep[3]}\n"
    "        end)\n"
    "    end\n"
    "    new_tat = tat + T\n"
    "    local w = new_tat - burst * T - now\n"
    "    if w > wait then wait = w end\n"
    "  end\n"
    "  if wait > x then\n"
    "    res = {0, math.ceil(wait / 1000), 0}\n"
    "  else\n"
    "    if T then s.t, s.i = new_tat, T end\n"
    "    s.n = s.n + 1\n"
    "    s.mc = s.mc + 1\n"
    "    res = {1, math.ceil(wait / 1000), s.n}\n"
    "  end\n"
    "else\n"
    "  if y > 0 and (s.hu == nil or now + y > s.hu) then\n"
    "    local from = now\n"
    "    if s.hu and s.hu > now then from = s.hu end\n"
    "    local p = now + y - from\n"
    "    s.lt, s.o = s.lt + p, s.o + p\n"
    "    if s.lc then s.lc = s.lc + p end\n"
    "    s.hu = now + y\n"
    "  end\n"
    "  local cut = 0\n"
    "  if thr == 1 and not (s.lc and x <= s.rs and now < s.lc + recov) then\n"
    "    local cur = sending()\n"
    "    if s.en == 1 and rate < cur then cur = rate end\n"
    "    s.wm = cur\n"
    "    s.k = (cur * (1 - beta) / C) ^ (1 / 3)\n"
    "    s.lt, s.lc, s.rs = now, now, s.n\n"
    "    if s.ma ~= 1 and dbl > 0 then s.pr = 1 else s.pr = 0 end\n"
    "    s.pb = cur * beta\n"
    "    s.en = 1\n"
    "    rate = clamp(cur * beta)\n"
    "    cut = 1\n"
    "  end\n"
    "  res = {cut, 0, 0}\n"
    "end\n"
    "save(600000)\n"
    "res[4] = math.floor(rate * 1000)\n"
    "res[5] = s.en\n"
    "if op == 'a' then res[6] = Tused or 0 end\n"
    "return res\n";

/* The script's reply, parsed. */
typedef struct reply5 {
    long long v[5];
} reply5;

static bool parse(const redisReply *r, reply5 *out)
{
    for (size_t i = 0; i < 5; i++)
        if (!stg__reply_int(r, i, &out->v[i]))
            return false;
    return true;
}

/* Under mu: run the script once for rkey (spec: a class part, with the
 * tenant, or NULL). STG_OK with *out, STG_EUNAVAIL (not connected or the
 * call failed: a note is set), STG_EIO (a reply that is not the
 * script's). */
static int run(stg_redis_limiter *l, const char *rkey, char op, int64_t x, int64_t y,
               bool throttled, const char *spec, const char *tenant, reply5 *out,
               stg__note *note)
{
    if (!stg__redis_ready(l, note))
        return STG_EUNAVAIL;
    const stg_adaptive_config *c = &l->acfg;
    char a[12][32];
    snprintf(a[0], sizeof a[0], "%c", op);
    snprintf(a[1], sizeof a[1], "%.17g", c->beta);
    snprintf(a[2], sizeof a[2], "%.17g", c->scale);
    snprintf(a[3], sizeof a[3], "%.17g", c->min_rate);
    snprintf(a[4], sizeof a[4], "%.17g", c->max_rate);
    snprintf(a[5], sizeof a[5], "%.17g", c->measure_cap);
    snprintf(a[6], sizeof a[6], "%" PRId64, c->burst);
    /* Resolved: recovery_us and startup_doubling_us are >= 0 here. */
    snprintf(a[7], sizeof a[7], "%.0f", (double)c->recovery_us * 1000.0);
    snprintf(a[8], sizeof a[8], "%.0f", (double)c->startup_doubling_us * 1000.0);
    snprintf(a[9], sizeof a[9], "%" PRId64, x);
    snprintf(a[10], sizeof a[10], "%" PRId64, y);
    snprintf(a[11], sizeof a[11], "%d", throttled ? 1 : 0);
    const char *argv[14];
    for (int i = 0; i < 12; i++)
        argv[i] = a[i];
    argv[12] = spec;
    argv[13] = tenant ? tenant : "";
    redisReply *r = NULL;
    int rc = stg__redis_eval(l, STG__SCRIPT_ADAPTIVE, rkey, spec ? 14 : 12, argv, 1, &r, note);
    if (rc != STG_OK)
        return STG_EUNAVAIL;
    rc = parse(r, out) ? STG_OK : STG_EIO;
    freeReplyObject(r);
    l->stats.redis_decisions++;
    return rc;
}

/* Resolve key to its name and Redis key; STG_OK or STG_EINVAL. */
static int names(const stg_redis_limiter *l, const char *key, const char **name, char *rkey)
{
    if (!l || !l->adaptive)
        return STG_EINVAL;
    *name = key ? key : l->url.key;
    return stg__redis_key(l, "ad:", *name, rkey);
}

/* Remember what Redis said the key paces at, for a later fallback. */
static void learn(stg_redis_limiter *l, const char *name, const reply5 *r)
{
    if (!(l->share > 0) || !r->v[4])
        return;
    stg__local *loc = stg__local_get(l, name);
    if (loc)
        loc->learned_rate = (double)r->v[3] / 1000.0;
}

/* Under mu: the local adaptive limiter of name (the fallback), NULL when
 * out of memory. */
static stg_adaptive *local_limiter(stg_redis_limiter *l, const char *name)
{
    stg__local *loc = stg__local_get(l, name);
    return loc ? stg__local_adaptive(l, loc) : NULL;
}

int stg_redis_adaptive_acquire(stg_redis_limiter *l, const char *key, int64_t timeout_us,
                               int64_t *wait_us, int64_t *ticket)
{
    return stg__redis_adaptive_acquire_spec(l, key, NULL, NULL, timeout_us, wait_us, ticket);
}

int stg__redis_adaptive_acquire_spec(stg_redis_limiter *l, const char *key, const char *spec,
                                     const char *tenant, int64_t timeout_us, int64_t *wait_us,
                                     int64_t *ticket)
{
    const char *name;
    char rkey[STG__KEYBUF];
    if (names(l, key, &name, rkey) != STG_OK)
        return STG_EINVAL;
    stg__note note = {0};
    reply5 r;
    int64_t w = 0, t = 0;
    pthread_mutex_lock(&l->mu);
    int rc = run(l, rkey, 'a', stg__gcra_timeout_ns(timeout_us), 0, false, spec, tenant, &r,
                 &note);
    if (rc == STG_OK) {
        learn(l, name, &r);
        w = r.v[1];
        t = r.v[2];
        rc = r.v[0] ? STG_OK : STG_ETIMEDOUT;
    } else if (rc == STG_EUNAVAIL && l->share > 0) {
        stg_adaptive *a = local_limiter(l, name);
        rc = a ? stg_adaptive_acquire(a, stg__redis_now(l), timeout_us, &w) : STG_ENOMEM;
        l->stats.local_decisions++;
    } else if (rc == STG_EUNAVAIL) {
        l->stats.unavailable++;
    }
    pthread_mutex_unlock(&l->mu);
    stg__redis_emit(l, &note);
    if (rc == STG_OK || rc == STG_ETIMEDOUT) {
        if (wait_us)
            *wait_us = w;
        if (ticket)
            *ticket = t;
    }
    return rc;
}

/* Under mu: feed the local limiter (fallback) with an answer. */
static int local_response(stg_redis_limiter *l, const char *name, bool throttled, int64_t hold_us)
{
    stg_adaptive *a = local_limiter(l, name);
    if (!a)
        return STG_ENOMEM;
    int64_t now = stg__redis_now(l);
    stg_adaptive_on_response(a, throttled, now);
    if (hold_us > 0) {
        stg_hints h;
        stg_hints_init(&h);
        h.remaining = 0;
        h.reset_us = hold_us;
        stg_adaptive_on_hints(a, &h, now, NULL);
    }
    l->stats.local_decisions++;
    return STG_OK;
}

int stg_redis_adaptive_response(stg_redis_limiter *l, const char *key, int64_t ticket,
                                bool throttled, int64_t hold_us)
{
    const char *name;
    char rkey[STG__KEYBUF];
    if (names(l, key, &name, rkey) != STG_OK)
        return STG_EINVAL;
    stg__note note = {0};
    int rc = STG_OK;
    pthread_mutex_lock(&l->mu);
    /* Ticket 0: the send was admitted by the local limiter (Redis counts
     * from 1), which must hear every answer to measure its rate. */
    if (ticket <= 0) {
        rc = l->share > 0 ? local_response(l, name, throttled, hold_us) : STG_OK;
    } else if (throttled || hold_us > 0) {
        reply5 r;
        rc = run(l, rkey, 'r', ticket, stg__gcra_timeout_ns(hold_us), throttled, NULL, NULL, &r,
                 &note);
        if (rc == STG_OK)
            learn(l, name, &r);
        else if (rc == STG_EUNAVAIL && l->share > 0)
            rc = local_response(l, name, throttled, hold_us);
        else if (rc == STG_EUNAVAIL)
            l->stats.unavailable++;
    }
    pthread_mutex_unlock(&l->mu);
    stg__redis_emit(l, &note);
    return rc;
}

int stg_redis_adaptive_state(stg_redis_limiter *l, const char *key, bool *enabled, double *rate,
                             int64_t *admissions)
{
    const char *name;
    char rkey[STG__KEYBUF];
    if (names(l, key, &name, rkey) != STG_OK)
        return STG_EINVAL;
    stg__note note = {0};
    reply5 r;
    pthread_mutex_lock(&l->mu);
    int rc = run(l, rkey, 's', 0, 0, false, NULL, NULL, &r, &note);
    if (rc == STG_EUNAVAIL)
        l->stats.unavailable++;
    pthread_mutex_unlock(&l->mu);
    stg__redis_emit(l, &note);
    if (rc != STG_OK)
        return rc;
    if (enabled)
        *enabled = r.v[4] != 0;
    if (rate)
        *rate = (double)r.v[3] / 1000.0;
    if (admissions)
        *admissions = r.v[2];
    return STG_OK;
}
