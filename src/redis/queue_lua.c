/*
 * The work queue's Lua scripts: each state change of a job is one script,
 * so it is atomic in Redis (see <stagger/redis/queue.h> for the keys).
 *
 * Every script takes the queue's key base ("<prefix>{NAME}:") as ARGV[1]
 * and builds its keys from it: they all share the {NAME} hash tag, hence
 * one Cluster slot. Time is Redis's (TIME), in ms. Cost: a claim reads
 * the lanes' hash once and scans the lanes once per job it hands out
 * (O(lanes) per job, lanes = classes x tenants loaded).
 *
 * Invariants the scripts keep (and why each may safely run twice, as a
 * client retries a script whose reply was lost):
 *  - load: an entry is XADDed only when SADD of its id added it; a
 *    fingerprint other than the queue's refuses the whole call first;
 *  - finish: the outcome is written only when XACK acknowledged the entry
 *    (returned 1); a second run acknowledges nothing and writes nothing;
 *  - claim: an entry taken from another consumer that has been delivered
 *    more than max_deliveries times, or that is not replay-safe and has a
 *    sent-mark, is ended as review by the same XACK rule, never returned;
 *  - classes (issue #32): the hash "classes" counts per class and tenant
 *    ("CLASS|TENANT|what", "" for none: an entry without the fields c and
 *    t, loaded by an older stagger, is the default class, no tenant): the
 *    jobs loaded ("total", with the SADD rule), ended (a state's name, with
 *    the XACK rule), and the admissions the workers add when they stop
 *    ("admitted", "wait_ms", "wait_max_ms"), once per token (SADD);
 *  - renew: an entry's idle time is reset only while it is in the calling
 *    consumer's own pending list (checked in the same script), so a renewal
 *    never takes an entry back from the worker that took it over; JUSTID
 *    leaves its delivery count alone;
 *  - lanes (issue #32): a job's entry is in the stream of its class and
 *    tenant's lane ("jobs" for normal without a tenant, "lane:N" else), made
 *    with its group by the load that first needs it (MKSTREAM, BUSYGROUP
 *    ignored, so a second run is harmless); "N:u" counts the lane's unread
 *    entries (+1 with the XADD, -1 with the XREADGROUP that delivers it);
 *    the claim picks new entries as src/core/qpick.c does, step for step
 *    (same tags, same floating-point operations, tags stored with %.17g so
 *    they read back exactly), reading a lane's entries one pick at a time,
 *    or all at once while it is the only lane with unread entries (the
 *    picks are then all its own); a lane whose XREADGROUP finds fewer than
 *    asked is set to 0 unread (its missing picks are not taken); an entry handed out names its
 *    lane ("ID@N"; "ID" in lane 0), which finish and renew read back.
 */
#include "queue_internal.h"

#define LUA_COMMON                                                                         \
    "local P = ARGV[1]\n"                                                                  \
    "local S, G = P .. 'jobs', 'workers'\n"                                                \
    "local function now_ms()\n"                                                            \
    "  local t = redis.call('TIME')\n"                                                     \
    "  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)\n"                 \
    "end\n"                                                                                \
    "local L = P .. 'lanes'\n"                                                             \
    "local function lane_key(k)\n"                                                         \
    "  if k == 0 then return S end\n"                                                      \
    "  return P .. 'lane:' .. k\n"                                                         \
    "end\n"                                                                                \
    "local function n_lanes()\n"                                                           \
    "  return tonumber(redis.call('HGET', L, 'n') or '0')\n"                               \
    "end\n"                                                                                \
    "local function entry_of(e)\n"                                                         \
    "  local eid, k = string.match(e, '^([^@]+)@(%d+)$')\n"                                \
    "  if eid then return P .. 'lane:' .. k, eid end\n"                                    \
    "  return S, e\n"                                                                      \
    "end\n"                                                                                \
    "local function counts()\n"                                                            \
    "  local total = redis.call('HGET', P .. 'meta', 'total') or '0'\n"                    \
    "  local pel = 0\n"                                                                    \
    "  for k = 0, n_lanes() do\n"                                                          \
    "    local x = redis.pcall('XPENDING', lane_key(k), G)\n"                              \
    "    if type(x) == 'table' and not x.err then pel = pel + x[1] end\n"                  \
    "  end\n"                                                                              \
    "  return {total, pel, redis.call('HGETALL', P .. 'counts')}\n"                        \
    "end\n"                                                                                \
    "local function field(f, name)\n"                                                      \
    "  for i = 1, #f, 2 do if f[i] == name then return f[i + 1] end end\n"                 \
    "  return nil\n"                                                                       \
    "end\n"                                                                                \
    "local function class_of(f)\n"                                                         \
    "  return (field(f, 'c') or '') .. '|' .. (field(f, 't') or '') .. '|'\n"              \
    "end\n"

/* ARGV: base, fingerprint, total, then 13 per job: id key method url headers
 * has_body body idempotency_key replay_safe line class tenant weight ("":
 * not given). Each job goes to its (class, tenant)'s lane, made here with
 * its consumer group when it is new. {added} or {-1, theirs}. */
static const char load_lua[] =
    LUA_COMMON
    "local fp = redis.call('HGET', P .. 'meta', 'fp')\n"
    "if not fp then\n"
    "  redis.call('HSET', P .. 'meta', 'fp', ARGV[2], 'total', ARGV[3], 'created', now_ms())\n"
    "  redis.pcall('XGROUP', 'CREATE', S, G, '0', 'MKSTREAM')\n"
    "  redis.call('HSETNX', L, '0:u', 0)\n"
    "elseif fp ~= ARGV[2] then\n"
    "  return {-1, fp}\n"
    "end\n"
    "local CI = {interactive = 0, normal = 1, batch = 2}\n"
    "local function lane(c, t)\n"
    "  local ci = CI[c] or 1\n"
    "  if ci == 1 and t == '' then return 0 end\n"
    "  local f = 'l:' .. ci .. '|' .. t\n"
    "  local k = tonumber(redis.call('HGET', L, f) or '')\n"
    "  if k then return k end\n"
    "  k = redis.call('HINCRBY', L, 'n', 1)\n"
    "  redis.call('HSET', L, f, k, k .. ':c', ci, k .. ':u', 0)\n"
    "  redis.pcall('XGROUP', 'CREATE', lane_key(k), G, '0', 'MKSTREAM')\n"
    "  return k\n"
    "end\n"
    "local added = 0\n"
    "for i = 4, #ARGV, 13 do\n"
    "  if redis.call('SADD', P .. 'ids', ARGV[i]) == 1 then\n"
    "    local k = lane(ARGV[i+10], ARGV[i+11])\n"
    "    redis.call('XADD', lane_key(k), '*', 'id', ARGV[i], 'key', ARGV[i+1], 'm', ARGV[i+2],\n"
    "               'u', ARGV[i+3], 'h', ARGV[i+4], 'hb', ARGV[i+5], 'b', ARGV[i+6],\n"
    "               'k', ARGV[i+7], 'rs', ARGV[i+8], 'ln', ARGV[i+9],\n"
    "               'c', ARGV[i+10], 't', ARGV[i+11])\n"
    "    if ARGV[i+12] ~= '' then redis.call('HSET', L, k .. ':w', ARGV[i+12]) end\n"
    "    redis.call('HINCRBY', L, k .. ':u', 1)\n"
    "    redis.call('HINCRBY', P .. 'classes', ARGV[i+10] .. '|' .. ARGV[i+11] .. '|total', 1)\n"
    "    added = added + 1\n"
    "  end\n"
    "end\n"
    "return {added, ''}\n";

/* ARGV: base, consumer, max, claim_idle_ms, max_deliveries, floor_every.
 * {counts(), {{entry, deliveries, fields}...}, to_review}; an entry of
 * lane N > 0 is handed out as "ID@N". The pick is src/core/qpick.c's,
 * step for step (the differential test compares them). */
static const char claim_lua[] =
    LUA_COMMON
    "local me, max, idle, maxd = ARGV[2], tonumber(ARGV[3]), ARGV[4], tonumber(ARGV[5])\n"
    "local FE = tonumber(ARGV[6])\n"
    "local now = now_ms()\n"
    "redis.call('HSET', P .. 'workers', me .. '|seen', now)\n"
    "local out, review = {}, 0\n"
    "local function to_review(s, id, eid, f, dc, reason, err)\n"
    "  if redis.call('XACK', s, G, eid) == 0 then return end\n"
    "  local k = P .. 'res:' .. id\n"
    "  redis.call('DEL', k)\n"
    "  redis.call('HSET', k, 'state', 'review', 'reason', reason, 'error', err,\n"
    "             'worker', me, 'finished', now, 'deliveries', dc, 'attempts', 0)\n"
    "  redis.call('HINCRBY', P .. 'counts', 'review', 1)\n"
    "  redis.call('HINCRBY', P .. 'classes', class_of(f) .. 'review', 1)\n"
    "  redis.call('HINCRBY', P .. 'workers', me .. '|review', 1)\n"
    "  redis.call('HDEL', P .. 'sent', id)\n"
    "  review = review + 1\n"
    "end\n"
    "local function ent(eid, k)\n"
    "  if k == 0 then return eid end\n"
    "  return eid .. '@' .. k\n"
    "end\n"
    "if max <= 0 then return {counts(), out, review} end\n"
    "local h = redis.call('HGETALL', L)\n"
    "local m = {}\n"
    "for i = 1, #h, 2 do m[h[i]] = h[i + 1] end\n"
    "local n = tonumber(m['n'] or '0')\n"
    "local lanes, V, st = {}, {}, {}\n"
    "for k = 0, n do\n"
    "  lanes[k] = {c = tonumber(m[k .. ':c'] or '1'), w = tonumber(m[k .. ':w'] or '1'),\n"
    "              f = tonumber(m[k .. ':f'] or '0'), u = tonumber(m[k .. ':u'] or '-1')}\n"
    "  if k > 0 and lanes[k].u < 0 then lanes[k].u = 0 end\n"
    "end\n"
    "for i = 0, 2 do\n"
    "  V[i] = tonumber(m['v:' .. i] or '0')\n"
    "  st[i] = tonumber(m['s:' .. i] or '0')\n"
    "end\n"
    "local unknown = false\n"
    "if lanes[0].u < 0 then\n"
    "  if redis.call('EXISTS', S) == 1 then\n"
    "    unknown = true\n"
    "    lanes[0].u = 1\n"
    "  else\n"
    "    lanes[0].u = 0\n"
    "  end\n"
    "end\n"
    "local order = {}\n"
    "for k = 0, n do order[#order + 1] = k end\n"
    "table.sort(order, function(a, b)\n"
    "  if lanes[a].c ~= lanes[b].c then return lanes[a].c < lanes[b].c end\n"
    "  return a < b\n"
    "end)\n"
    "for _, k in ipairs(order) do\n"
    "  local room = max - #out - review\n"
    "  if room <= 0 then break end\n"
    "  local s = lane_key(k)\n"
    "  local r = redis.pcall('XAUTOCLAIM', s, G, me, idle, '0-0', 'COUNT', room)\n"
    "  if type(r) == 'table' and not r.err then\n"
    "    for _, e in ipairs(r[2]) do\n"
    "      local eid, f = e[1], e[2]\n"
    "      if type(f) == 'table' then\n"
    "        local id = field(f, 'id')\n"
    "        local p = redis.call('XPENDING', s, G, eid, eid, 1)\n"
    "        local dc = (p[1] and tonumber(p[1][4])) or 1\n"
    "        local by = redis.call('HGET', P .. 'sent', id)\n"
    "        if dc > maxd then\n"
    "          to_review(s, id, eid, f, dc, 'max_deliveries', 'delivered ' .. dc ..\n"
    "                    ' times without an outcome (more than --max-deliveries)')\n"
    "        elseif field(f, 'rs') ~= '1' and by then\n"
    "          to_review(s, id, eid, f, dc, 'maybe_sent',\n"
    "                    'not idempotent, and may have been sent by' ..\n"
    "                    ' worker ' .. by .. ', which stopped answering')\n"
    "        else\n"
    "          out[#out + 1] = {ent(eid, k), dc, f}\n"
    "        end\n"
    "      else\n"
    "        redis.call('XACK', s, G, eid)\n"
    "      end\n"
    "    end\n"
    "  end\n"
    "end\n"
    "local function wgt(l)\n"
    "  if l.w > 0 then return l.w end\n"
    "  return 1\n"
    "end\n"
    "local W = {[0] = 0, 0, 0}\n"
    "for k = 0, n do\n"
    "  if lanes[k].u > 0 then W[lanes[k].c] = W[lanes[k].c] + lanes[k].u end\n"
    "end\n"
    "local function start_of(l)\n"
    "  if l.f > V[l.c] then return l.f end\n"
    "  return V[l.c]\n"
    "end\n"
    "local function next_lane()\n"
    "  local first, fl = -1, -1\n"
    "  for i = 0, 2 do\n"
    "    if W[i] > 0 then\n"
    "      if first < 0 then\n"
    "        first = i\n"
    "      elseif st[i] + 1 >= FE and (fl < 0 or st[i] > st[fl]) then\n"
    "        fl = i\n"
    "      end\n"
    "    end\n"
    "  end\n"
    "  local ci = first\n"
    "  if fl >= 0 then ci = fl end\n"
    "  if ci < 0 then return -1 end\n"
    "  local best, bs, bf = -1, 0, 0\n"
    "  for k = 0, n do\n"
    "    local l = lanes[k]\n"
    "    if l.c == ci and l.u > 0 then\n"
    "      local s = start_of(l)\n"
    "      local f = s + 1.0 / wgt(l)\n"
    "      if best < 0 or s < bs or (s == bs and f < bf) then best, bs, bf = k, s, f end\n"
    "    end\n"
    "  end\n"
    "  return best\n"
    "end\n"
    "local function take(k)\n"
    "  local l = lanes[k]\n"
    "  local ci = l.c\n"
    "  local s = start_of(l)\n"
    "  l.f = s + 1.0 / wgt(l)\n"
    "  V[ci] = s\n"
    "  l.u = l.u - 1\n"
    "  W[ci] = W[ci] - 1\n"
    "  for i = 0, 2 do\n"
    "    if i ~= ci and W[i] > 0 then st[i] = st[i] + 1 else st[i] = 0 end\n"
    "  end\n"
    "end\n"
    "local want = max - #out - review\n"
    "local touched = {}\n"
    "local function alone(k)\n"
    "  return W[0] + W[1] + W[2] == lanes[k].u\n"
    "end\n"
    "while want > 0 do\n"
    "  local k = next_lane()\n"
    "  if k < 0 then break end\n"
    "  local cnt = 1\n"
    "  if alone(k) then\n"
    "    cnt = want\n"
    "    if not (k == 0 and unknown) and lanes[k].u < cnt then cnt = lanes[k].u end\n"
    "  end\n"
    "  local r2 = redis.call('XREADGROUP', 'GROUP', G, me, 'COUNT', cnt, 'STREAMS', lane_key(k), '>')\n"
    "  local got = (r2 and r2[1] and r2[1][2]) or {}\n"
    "  touched[k] = true\n"
    "  for _, e in ipairs(got) do\n"
    "    if k == 0 and unknown then\n"
    "      lanes[0].u = 2\n"
    "      W[lanes[0].c] = W[lanes[0].c] + 1\n"
    "    end\n"
    "    take(k)\n"
    "    out[#out + 1] = {ent(e[1], k), 1, e[2]}\n"
    "    want = want - 1\n"
    "  end\n"
    "  if #got < cnt then\n"
    "    local c = lanes[k].c\n"
    "    W[c] = W[c] - lanes[k].u\n"
    "    lanes[k].u = 0\n"
    "    if k == 0 then unknown = false end\n"
    "    if W[c] == 0 then st[c] = 0 end\n"
    "  end\n"
    "end\n"
    "if next(touched) then\n"
    "  for k in pairs(touched) do\n"
    "    redis.call('HSET', L, k .. ':f', string.format('%.17g', lanes[k].f))\n"
    "    if not (k == 0 and unknown) then redis.call('HSET', L, k .. ':u', lanes[k].u) end\n"
    "  end\n"
    "  for i = 0, 2 do\n"
    "    redis.call('HSET', L, 'v:' .. i, string.format('%.17g', V[i]), 's:' .. i, st[i])\n"
    "  end\n"
    "end\n"
    "if want > 0 and redis.call('EXISTS', S) == 1 then\n"
    "  local r3 = redis.call('XREADGROUP', 'GROUP', G, me, 'COUNT', want, 'STREAMS', S, '>')\n"
    "  if r3 then\n"
    "    for _, e in ipairs(r3[1][2]) do out[#out + 1] = {e[1], 1, e[2]} end\n"
    "  end\n"
    "end\n"
    "return {counts(), out, review}\n";

/* ARGV: base, consumer, entry, id, state, status, attempts, n429, n503,
 * reason, error, file, latency_ms, has_body, body, claim_idle_ms.
 * 1: recorded; 0: the entry was not ours to acknowledge. */
static const char finish_lua[] =
    LUA_COMMON
    "local me, e, id, st = ARGV[2], ARGV[3], ARGV[4], ARGV[5]\n"
    "local s, eid = entry_of(e)\n"
    "if st == 'pending' then\n"
    "  local p = redis.call('XPENDING', s, G, eid, eid, 1, me)\n"
    "  if not p[1] then return 0 end\n"
    "  redis.call('XCLAIM', s, G, me, 0, eid, 'IDLE', tonumber(ARGV[16]) + 1000, 'JUSTID')\n"
    "  redis.call('HDEL', P .. 'sent', id)\n"
    "  return 1\n"
    "end\n"
    "if redis.call('XACK', s, G, eid) == 0 then return 0 end\n"
    "local now = now_ms()\n"
    "local k = P .. 'res:' .. id\n"
    "redis.call('DEL', k)\n"
    "redis.call('HSET', k, 'state', st, 'status', ARGV[6], 'attempts', ARGV[7],\n"
    "           'n429', ARGV[8], 'worker', me, 'lat', ARGV[13], 'finished', now)\n"
    "if ARGV[10] ~= '' then redis.call('HSET', k, 'reason', ARGV[10]) end\n"
    "if ARGV[11] ~= '' then redis.call('HSET', k, 'error', ARGV[11]) end\n"
    "if ARGV[12] ~= '' then redis.call('HSET', k, 'file', ARGV[12]) end\n"
    "if ARGV[14] == '1' then redis.call('HSET', k, 'body', ARGV[15]) end\n"
    "local C = P .. 'counts'\n"
    "redis.call('HINCRBY', C, st, 1)\n"
    "redis.call('HINCRBY', C, 'attempts', ARGV[7])\n"
    "redis.call('HINCRBY', C, 's429', ARGV[8])\n"
    "redis.call('HINCRBY', C, 's503', ARGV[9])\n"
    "redis.call('HINCRBY', P .. 'workers', me .. '|' .. st, 1)\n"
    "local x = redis.call('XRANGE', s, eid, eid)\n"
    "redis.call('HINCRBY', P .. 'classes', (x[1] and class_of(x[1][2]) or '||') .. st, 1)\n"
    "redis.call('RPUSH', P .. 'lat', ARGV[13])\n"
    "redis.call('HDEL', P .. 'sent', id)\n"
    "return 1\n";

/* ARGV: base. counts(). */
static const char counts_lua[] = LUA_COMMON "return counts()\n";

/* ARGV: base, host, wait_ms. The later "not before" wins. */
static const char hold_lua[] =
    LUA_COMMON
    "local k = P .. 'nb:' .. ARGV[2]\n"
    "local w = tonumber(ARGV[3])\n"
    "local t = now_ms() + w\n"
    "local cur = tonumber(redis.call('GET', k) or '0')\n"
    "if t > cur then redis.call('SET', k, string.format('%d', t), 'PX', w) end\n"
    "return 0\n";

/* ARGV: base, host. ms left, 0 when not held. */
static const char hold_left_lua[] =
    LUA_COMMON
    "local v = tonumber(redis.call('GET', P .. 'nb:' .. ARGV[2]) or '0')\n"
    "local left = v - now_ms()\n"
    "if left < 0 then left = 0 end\n"
    "return left\n";

/* ARGV: base, consumer, entry... For each entry 1 when it is still this
 * consumer's (its idle time now 0), 0 when it is not (taken over, ended). */
static const char renew_lua[] =
    LUA_COMMON
    "local me = ARGV[2]\n"
    "redis.call('HSET', P .. 'workers', me .. '|seen', now_ms())\n"
    "local out = {}\n"
    "for i = 3, #ARGV do\n"
    "  local s, e = entry_of(ARGV[i])\n"
    "  local p = redis.pcall('XPENDING', s, G, e, e, 1, me)\n"
    "  if type(p) == 'table' and not p.err and p[1] then\n"
    "    redis.call('XCLAIM', s, G, me, 0, e, 'JUSTID')\n"
    "    out[#out + 1] = 1\n"
    "  else\n"
    "    out[#out + 1] = 0\n"
    "  end\n"
    "end\n"
    "return out\n";

/* ARGV: base, token, then 5 per row: class tenant admitted wait_ms
 * wait_max_ms. 1: added; 0: this token's rows were added before (a retry
 * of a call whose reply was lost adds nothing twice). */
static const char classes_lua[] =
    LUA_COMMON
    "if redis.call('SADD', P .. 'cadded', ARGV[2]) == 0 then return 0 end\n"
    "local H = P .. 'classes'\n"
    "for i = 3, #ARGV, 5 do\n"
    "  local ct = ARGV[i] .. '|' .. ARGV[i+1] .. '|'\n"
    "  redis.call('HINCRBY', H, ct .. 'admitted', ARGV[i+2])\n"
    "  redis.call('HINCRBY', H, ct .. 'wait_ms', ARGV[i+3])\n"
    "  local m = tonumber(redis.call('HGET', H, ct .. 'wait_max_ms') or '0')\n"
    "  if tonumber(ARGV[i+4]) > m then redis.call('HSET', H, ct .. 'wait_max_ms', ARGV[i+4]) end\n"
    "end\n"
    "return 1\n";

const char *const stg__queue_lua[STG__Q_NSCRIPTS] = {
    [STG__Q_LOAD] = load_lua,         [STG__Q_CLAIM] = claim_lua,
    [STG__Q_FINISH] = finish_lua,     [STG__Q_COUNTS] = counts_lua,
    [STG__Q_HOLD] = hold_lua,         [STG__Q_HOLD_LEFT] = hold_left_lua,
    [STG__Q_RENEW] = renew_lua,       [STG__Q_CLASSES] = classes_lua,
};
