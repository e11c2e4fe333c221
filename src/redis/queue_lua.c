/*
 * The work queue's Lua scripts: each state change of a job is one script,
 * so it is atomic in Redis (see <stagger/redis/queue.h> for the keys).
 *
 * Every script takes the queue's key base ("<prefix>{NAME}:") as ARGV[1]
 * and builds its keys from it: they all share the {NAME} hash tag, hence
 * one Cluster slot. Time is Redis's (TIME), in ms.
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
 *    leaves its delivery count alone.
 */
#include "queue_internal.h"

#define LUA_COMMON                                                                         \
    "local P = ARGV[1]\n"                                                                  \
    "local S, G = P .. 'jobs', 'workers'\n"                                                \
    "local function now_ms()\n"                                                            \
    "  local t = redis.call('TIME')\n"                                                     \
    "  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)\n"                 \
    "end\n"                                                                                \
    "local function counts()\n"                                                            \
    "  local total = redis.call('HGET', P .. 'meta', 'total') or '0'\n"                    \
    "  local pel = 0\n"                                                                    \
    "  local x = redis.pcall('XPENDING', S, G)\n"                                          \
    "  if type(x) == 'table' and not x.err then pel = x[1] end\n"                          \
    "  return {total, pel, redis.call('HGETALL', P .. 'counts')}\n"                        \
    "end\n"                                                                                \
    "local function field(f, name)\n"                                                      \
    "  for i = 1, #f, 2 do if f[i] == name then return f[i + 1] end end\n"                 \
    "  return nil\n"                                                                       \
    "end\n"                                                                                \
    "local function class_of(f)\n"                                                         \
    "  return (field(f, 'c') or '') .. '|' .. (field(f, 't') or '') .. '|'\n"              \
    "end\n"

/* ARGV: base, fingerprint, total, then 12 per job: id key method url headers
 * has_body body idempotency_key replay_safe line class tenant. {added} or
 * {-1, theirs}. */
static const char load_lua[] =
    LUA_COMMON
    "local fp = redis.call('HGET', P .. 'meta', 'fp')\n"
    "if not fp then\n"
    "  redis.call('HSET', P .. 'meta', 'fp', ARGV[2], 'total', ARGV[3], 'created', now_ms())\n"
    "  local g = redis.pcall('XGROUP', 'CREATE', S, G, '0', 'MKSTREAM')\n"
    "elseif fp ~= ARGV[2] then\n"
    "  return {-1, fp}\n"
    "end\n"
    "local added = 0\n"
    "for i = 4, #ARGV, 12 do\n"
    "  if redis.call('SADD', P .. 'ids', ARGV[i]) == 1 then\n"
    "    redis.call('XADD', S, '*', 'id', ARGV[i], 'key', ARGV[i+1], 'm', ARGV[i+2],\n"
    "               'u', ARGV[i+3], 'h', ARGV[i+4], 'hb', ARGV[i+5], 'b', ARGV[i+6],\n"
    "               'k', ARGV[i+7], 'rs', ARGV[i+8], 'ln', ARGV[i+9],\n"
    "               'c', ARGV[i+10], 't', ARGV[i+11])\n"
    "    redis.call('HINCRBY', P .. 'classes', ARGV[i+10] .. '|' .. ARGV[i+11] .. '|total', 1)\n"
    "    added = added + 1\n"
    "  end\n"
    "end\n"
    "return {added, ''}\n";

/* ARGV: base, consumer, max, claim_idle_ms, max_deliveries.
 * {counts(), {{entry, deliveries, fields}...}, to_review}. */
static const char claim_lua[] =
    LUA_COMMON
    "local me, max, idle, maxd = ARGV[2], tonumber(ARGV[3]), ARGV[4], tonumber(ARGV[5])\n"
    "local now = now_ms()\n"
    "redis.call('HSET', P .. 'workers', me .. '|seen', now)\n"
    "local out, review = {}, 0\n"
    "local function to_review(id, eid, f, dc, reason, err)\n"
    "  if redis.call('XACK', S, G, eid) == 0 then return end\n"
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
    "if max > 0 and redis.call('EXISTS', S) == 1 then\n"
    "  local r = redis.call('XAUTOCLAIM', S, G, me, idle, '0-0', 'COUNT', max)\n"
    "  for _, e in ipairs(r[2]) do\n"
    "    local eid, f = e[1], e[2]\n"
    "    if type(f) == 'table' then\n"
    "      local id = field(f, 'id')\n"
    "      local p = redis.call('XPENDING', S, G, eid, eid, 1)\n"
    "      local dc = (p[1] and tonumber(p[1][4])) or 1\n"
    "      local by = redis.call('HGET', P .. 'sent', id)\n"
    "      if dc > maxd then\n"
    "        to_review(id, eid, f, dc, 'max_deliveries', 'delivered ' .. dc ..\n"
    "                  ' times without an outcome (more than --max-deliveries)')\n"
    "      elseif field(f, 'rs') ~= '1' and by then\n"
    "        to_review(id, eid, f, dc, 'maybe_sent',\n"
    "                  'not idempotent, and may have been sent by' ..\n"
    "                  ' worker ' .. by .. ', which stopped answering')\n"
    "      else\n"
    "        out[#out + 1] = {eid, dc, f}\n"
    "      end\n"
    "    else\n"
    "      redis.call('XACK', S, G, eid)\n"
    "    end\n"
    "  end\n"
    "  local want = max - #out - review\n"
    "  if want > 0 then\n"
    "    local r2 = redis.call('XREADGROUP', 'GROUP', G, me, 'COUNT', want, 'STREAMS', S, '>')\n"
    "    if r2 then\n"
    "      for _, e in ipairs(r2[1][2]) do out[#out + 1] = {e[1], 1, e[2]} end\n"
    "    end\n"
    "  end\n"
    "end\n"
    "return {counts(), out, review}\n";

/* ARGV: base, consumer, entry, id, state, status, attempts, n429, n503,
 * reason, error, file, latency_ms, has_body, body, claim_idle_ms.
 * 1: recorded; 0: the entry was not ours to acknowledge. */
static const char finish_lua[] =
    LUA_COMMON
    "local me, eid, id, st = ARGV[2], ARGV[3], ARGV[4], ARGV[5]\n"
    "if st == 'pending' then\n"
    "  local p = redis.call('XPENDING', S, G, eid, eid, 1, me)\n"
    "  if not p[1] then return 0 end\n"
    "  redis.call('XCLAIM', S, G, me, 0, eid, 'IDLE', tonumber(ARGV[16]) + 1000, 'JUSTID')\n"
    "  redis.call('HDEL', P .. 'sent', id)\n"
    "  return 1\n"
    "end\n"
    "if redis.call('XACK', S, G, eid) == 0 then return 0 end\n"
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
    "local e = redis.call('XRANGE', S, eid, eid)\n"
    "redis.call('HINCRBY', P .. 'classes', (e[1] and class_of(e[1][2]) or '||') .. st, 1)\n"
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
    "  local e = ARGV[i]\n"
    "  local p = redis.pcall('XPENDING', S, G, e, e, 1, me)\n"
    "  if type(p) == 'table' and not p.err and p[1] then\n"
    "    redis.call('XCLAIM', S, G, me, 0, e, 'JUSTID')\n"
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
