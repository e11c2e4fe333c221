/*
 * The shared quota ledger's script (include/stagger/redis/quota.h says what
 * it keeps and why the server's bound holds). One call per round trip of a
 * replica: it applies the replica's report (what it holds, what it spent,
 * the lowest count its answers heard) and, when asked, grants a lease.
 *
 * KEYS[1]  the limit key's hash "<prefix>qs:<key>". Fields, with \1 as the
 *          separator (C replaces control bytes of ids by '_'):
 *            u\1ID  unit        e\1ID  estimate E (-1: unknown)
 *            a\1ID  E's time    r\1ID  refill per ms (fill), 0: none
 *            l\1ID  limit (-1)  x\1ID  window's reset instant, ms (0: none)
 *            f\1ID  1: refilling bucket (reset = full again)
 *            h\1ID\1REP  units REP holds      t\1REP  REP's expiry, ms
 *            w\1ID\1C\1REP  REP waits with class C (0 interactive, 1
 *                   normal, 2 batch) for the quota until then, ms
 *            p\1ID\1C\1REP  REP asked with class C until then, ms
 *            n\1ID\1C  the floor's credit of class C: units granted to
 *                   the classes above it while it waited
 * ARGV[1]  this replica; ARGV[2] ttl ms; ARGV[3] reports, one per line:
 *          ID \t UNIT \t HELD \t SPENT \t COUNT(-1) \t AGE_MS \t LIMIT \t
 *          RESET_MS(-1) \t FILL(0|1)
 * ARGV[4]  wants, one per line: UNIT \t NEED \t LEASE (units);
 * ARGV[5]  1: grant a lease, 0: report only, 2: report and give back (the
 *          replica is idle: its class marks go); ARGV[6] the lease of a unit
 *          not in wants (requests: it costs 1); ARGV[7] key expiry, ms;
 *          ARGV[8] the server keys the request is charged to, one a line,
 *          or "*" for all (a quota of the key "" is always charged);
 * ARGV[9]  the request's class C (0..2); ARGV[10] the floor, F
 *          (STG__FQ_FLOOR_EVERY); ARGV[11] how long a refusal's mark
 *          outlives its wait, ms; ARGV[12] how long an ask's p mark holds.
 * Classes, per quota ID the request is charged to (a replica's own marks
 *   never count against it): while another replica waits with a higher
 *   class (a live w mark of a lower number), the request is refused (wait
 *   50 ms at least) unless its class's credit reaches (F - 1) * its cost:
 *   then it is granted its cost only and the credit pays that (the floor,
 *   one grant in F at equal costs). While another replica of a higher
 *   class waits or asked (p), its grant is its cost: no lease beyond it.
 *   A grant adds its units to the credit of each lower class waiting. A
 *   refusal marks w until now + wait + ARGV[11]; a grant short of the
 *   lease asked for marks w for ARGV[11] (more of the class waits), one
 *   that covers it clears w. Marks and credits expire on their own (a
 *   credit with its class's last w mark: never banked). Classes only
 *   refuse: every grant still fits E - sum(held), the bound below.
 * Returns {status 1 granted | 0 refused | 2 too big | 3 reported,
 *          wait_ms, then per quota: ID, UNIT, granted, floor(E) or -1,
 *          refill per s * 1000, limit}.
 * Times are Redis's (TIME) in ms. A replica past its expiry is dropped
 * with everything it held. Values are written with %.3f / %.0f (Lua's
 * own conversion rounds to 14 digits).
 */
#include "internal.h"

const char stg__redis_quota_lua[] =
    "if redis.replicate_commands then redis.replicate_commands() end\n"
    "local tm = redis.call('TIME')\n"
    "local now = tonumber(tm[1]) * 1000 + math.floor(tonumber(tm[2]) / 1000)\n"
    "local me, ttl = ARGV[1], tonumber(ARGV[2])\n"
    "local raw = redis.call('HGETALL', KEYS[1])\n"
    "local f, dirty, del = {}, {}, {}\n"
    "for i = 1, #raw, 2 do f[raw[i]] = raw[i + 1] end\n"
    "local S = '\\1'\n"
    "local function put(k, v) f[k] = v; dirty[k] = true end\n"
    "local function num(k, d) local v = tonumber(f[k]); if v == nil then return d end return v end\n"
    "local live, dead = {}, {}\n"
    "for k, v in pairs(f) do\n"
    "  local r = string.match(k, '^t\\1(.*)$')\n"
    "  if r then if r == me or tonumber(v) > now then live[r] = true else dead[r] = true end end\n"
    "end\n"
    "local ids = {}\n"
    "for k, v in pairs(f) do\n"
    "  local id = string.match(k, '^u\\1(.*)$')\n"
    "  if id then ids[#ids + 1] = id end\n"
    "  local hid, rep = string.match(k, '^h\\1(.*)\\1(.-)$')\n"
    "  if rep and dead[rep] then del[#del + 1] = k end\n"
    "end\n"
    "for r in pairs(dead) do del[#del + 1] = 't' .. S .. r end\n"
    "for _, k in ipairs(del) do f[k] = nil end\n"
    "table.sort(ids)\n"
    "local cls, fev = tonumber(ARGV[9]) or 1, tonumber(ARGV[10]) or 20\n"
    "local margin, phold = tonumber(ARGV[11]) or 250, tonumber(ARGV[12]) or math.floor(ttl / 2)\n"
    "local wm, pm, gone = {}, {}, {}\n"
    "for k, v in pairs(f) do\n"
    "  local kind, id, c, rep = string.match(k, '^([wp])\\1(.*)\\1(%d)\\1(.-)$')\n"
    "  if kind then\n"
    "    if tonumber(v) <= now or (ARGV[5] == '2' and rep == me) then gone[#gone + 1] = k\n"
    "    else\n"
    "      local m = (kind == 'w') and wm or pm\n"
    "      c = tonumber(c)\n"
    "      m[id] = m[id] or {}; m[id][c] = m[id][c] or {}; m[id][c][rep] = true\n"
    "    end\n"
    "  end\n"
    "end\n"
    "for k in pairs(f) do\n"
    "  local id, c = string.match(k, '^n\\1(.*)\\1(%d)$')\n"
    "  if id and not (wm[id] and wm[id][tonumber(c)]) then gone[#gone + 1] = k end\n"
    "end\n"
    "for _, k in ipairs(gone) do f[k] = nil; del[#del + 1] = k end\n"
    "local function above(m, id, c)\n"
    "  for cc, reps in pairs(m[id] or {}) do\n"
    "    if cc < c then for r in pairs(reps) do if r ~= me then return true end end end\n"
    "  end\n"
    "  return false\n"
    "end\n"
    "local function proj(id)\n"
    "  local e, a = num('e' .. S .. id, -1), num('a' .. S .. id, now)\n"
    "  if e >= 0 then\n"
    "    if f['f' .. S .. id] == '1' then\n"
    "      local r, l = num('r' .. S .. id, 0), num('l' .. S .. id, -1)\n"
    "      if r > 0 and now > a then e = e + r * (now - a) end\n"
    "      if l >= 0 and e > l then e = l end\n"
    "    else\n"
    "      local x = num('x' .. S .. id, 0)\n"
    "      if x > 0 and now >= x then\n"
    "        if e < 1 then e = -1 end\n"
    "        put('x' .. S .. id, 0)\n"
    "      end\n"
    "    end\n"
    "  end\n"
    "  if a ~= now or e ~= num('e' .. S .. id, -1) then put('e' .. S .. id, e); put('a' .. S .. id, now) end\n"
    "end\n"
    "for _, id in ipairs(ids) do proj(id) end\n"
    "for line in string.gmatch(ARGV[3], '[^\\n]+') do\n"
    "  local id, unit, H, sp, R, age, lim, rs, fill = string.match(line,\n"
    "    '^([^\\t]+)\\t([^\\t]+)\\t(%-?%d+)\\t(%-?%d+)\\t(%-?%d+)\\t(%-?%d+)\\t(%-?%d+)\\t(%-?%d+)\\t([01])$')\n"
    "  if id then\n"
    "    H, sp, R, age, lim, rs = tonumber(H), tonumber(sp), tonumber(R), tonumber(age), tonumber(lim), tonumber(rs)\n"
    "    if f['u' .. S .. id] == nil and R >= 0 then\n"
    "      put('u' .. S .. id, unit); put('e' .. S .. id, -1); put('a' .. S .. id, now)\n"
    "      put('r' .. S .. id, 0); put('l' .. S .. id, lim); put('x' .. S .. id, 0); put('f' .. S .. id, fill)\n"
    "      ids[#ids + 1] = id\n"
    "    end\n"
    "    if f['u' .. S .. id] ~= nil then\n"
    "      local e = num('e' .. S .. id, -1)\n"
    "      if R >= 0 then\n"
    "        if lim >= 0 then put('l' .. S .. id, lim) end\n"
    "        put('f' .. S .. id, fill)\n"
    "        if fill == '1' then\n"
    "          if rs > 0 and lim > R then put('r' .. S .. id, string.format('%.9f', (lim - R) / rs)) end\n"
    "          local rp = R + num('r' .. S .. id, 0) * age\n"
    "          if lim >= 0 and rp > lim then rp = lim end\n"
    "          if e < 0 or rp < e then e = rp end\n"
    "        else\n"
    "          local nx, x = 0, num('x' .. S .. id, 0)\n"
    "          if rs >= 0 then nx = now - age + rs end\n"
    "          if e < 0 or (nx > 0 and nx > x + 1000) then e = R; x = nx\n"
    "          elseif R < e then e = R end\n"
    "          if x == 0 then x = nx end\n"
    "          put('x' .. S .. id, string.format('%.0f', x))\n"
    "        end\n"
    "      end\n"
    "      if e >= 0 then e = e - sp; if e < 0 then e = 0 end end\n"
    "      put('e' .. S .. id, string.format('%.3f', e)); put('a' .. S .. id, now)\n"
    "      if H < 0 then H = 0 end\n"
    "      put('h' .. S .. id .. S .. me, H)\n"
    "    end\n"
    "  end\n"
    "end\n"
    "local want = {}\n"
    "for line in string.gmatch(ARGV[4], '[^\\n]+') do\n"
    "  local u, n, k = string.match(line, '^([^\\t]+)\\t(%d+)\\t(%d+)$')\n"
    "  if u then want[u] = {tonumber(n), tonumber(k)} end\n"
    "end\n"
    "local all, keys = ARGV[8] == '*', {}\n"
    "for k in string.gmatch(ARGV[8], '[^\\n]+') do keys[k] = true end\n"
    "local function charged(id)\n"
    "  local k = string.match(id, '^(.*)|[^|]*|[^|]*$') or ''\n"
    "  return all or k == '' or keys[k]\n"
    "end\n"
    "local status, wait, grant, needs, ks, floors, cblock = 3, 0, {}, {}, {}, {}, false\n"
    "if ARGV[5] == '1' then\n"
    "  status = 1\n"
    "  for _, id in ipairs(ids) do\n"
    "   grant[id] = 0\n"
    "   if charged(id) then\n"
    "    local w = want[f['u' .. S .. id]] or {1, tonumber(ARGV[6])}\n"
    "    local need, k = w[1], w[2]\n"
    "    local hw = above(wm, id, cls)\n"
    "    if hw then\n"
    "      if num('n' .. S .. id .. S .. cls, 0) >= (fev - 1) * need then floors[#floors + 1] = id\n"
    "      else cblock = true end\n"
    "    end\n"
    "    if hw or above(pm, id, cls) then k = need end\n"
    "    needs[id], ks[id] = need, k\n"
    "    local e, lim = num('e' .. S .. id, -1), num('l' .. S .. id, -1)\n"
    "    local mine = num('h' .. S .. id .. S .. me, 0)\n"
    "    local others, nact = 0, 0\n"
    "    for r in pairs(live) do\n"
    "      if r ~= me then\n"
    "        local h = num('h' .. S .. id .. S .. r, 0)\n"
    "        others = others + h\n"
    "        if h > 0 then nact = nact + 1 end\n"
    "      end\n"
    "    end\n"
    "    local g = 0\n"
    "    if lim >= 0 and need > lim then\n"
    "      status = 2\n"
    "    elseif e < 0 then\n"
    "      if mine + others == 0 then g = need else if status == 1 then status = 0 end; wait = math.max(wait, 20) end\n"
    "    else\n"
    "      local avail = e - mine - others\n"
    "      if avail >= need then\n"
    "        g = math.floor(math.max(need, math.min(k, avail / (nact + 1))))\n"
    "      else\n"
    "        if status == 1 then status = 0 end\n"
    "        local wt = 20\n"
    "        if f['f' .. S .. id] == '1' then\n"
    "          local r = num('r' .. S .. id, 0)\n"
    "          if r > 0 then wt = math.ceil((need - avail) / r) end\n"
    "        else\n"
    "          local x = num('x' .. S .. id, 0)\n"
    "          if x > now then wt = x - now end\n"
    "        end\n"
    "        if e - mine >= need and wt > 100 then wt = 100 end\n"
    "        if wt < 1 then wt = 1 end\n"
    "        wait = math.max(wait, wt)\n"
    "      end\n"
    "    end\n"
    "    grant[id] = g\n"
    "   end\n"
    "  end\n"
    "  if cblock and status ~= 2 then status = 0; wait = math.max(wait, 50) end\n"
    "  if status == 1 then\n"
    "    for _, id in ipairs(ids) do\n"
    "      put('h' .. S .. id .. S .. me, num('h' .. S .. id .. S .. me, 0) + grant[id])\n"
    "    end\n"
    "    for _, id in ipairs(floors) do\n"
    "      put('n' .. S .. id .. S .. cls, math.max(0, num('n' .. S .. id .. S .. cls, 0) - (fev - 1) * needs[id]))\n"
    "    end\n"
    "    for _, id in ipairs(ids) do\n"
    "      for c, reps in pairs(wm[id] or {}) do\n"
    "        local other = false\n"
    "        for r in pairs(reps) do if r ~= me then other = true end end\n"
    "        if c > cls and other and grant[id] > 0 then\n"
    "          put('n' .. S .. id .. S .. c, num('n' .. S .. id .. S .. c, 0) + grant[id])\n"
    "        end\n"
    "      end\n"
    "    end\n"
    "  end\n"
    "  for _, id in ipairs(ids) do\n"
    "    if needs[id] then\n"
    "      local wk = 'w' .. S .. id .. S .. cls .. S .. me\n"
    "      put('p' .. S .. id .. S .. cls .. S .. me, string.format('%.0f', now + phold))\n"
    "      if status == 0 then put(wk, string.format('%.0f', now + wait + margin))\n"
    "      elseif status == 1 and grant[id] < ks[id] then put(wk, string.format('%.0f', now + margin))\n"
    "      elseif f[wk] ~= nil then f[wk] = nil; del[#del + 1] = wk end\n"
    "    end\n"
    "  end\n"
    "end\n"
    "put('t' .. S .. me, string.format('%.0f', now + ttl))\n"
    "local args = {}\n"
    "for k in pairs(dirty) do\n"
    "  if f[k] ~= nil then args[#args + 1] = k; args[#args + 1] = tostring(f[k]) end\n"
    "end\n"
    "if #del > 0 then redis.call('HDEL', KEYS[1], unpack(del)) end\n"
    "if #args > 0 then redis.call('HSET', KEYS[1], unpack(args)) end\n"
    "redis.call('PEXPIRE', KEYS[1], tonumber(ARGV[7]))\n"
    "local out = {status, wait}\n"
    "for _, id in ipairs(ids) do\n"
    "  local e = num('e' .. S .. id, -1)\n"
    "  if e >= 0 then e = math.floor(e) end\n"
    "  out[#out + 1] = id; out[#out + 1] = f['u' .. S .. id]\n"
    "  out[#out + 1] = (status == 1) and grant[id] or 0\n"
    "  out[#out + 1] = e\n"
    "  out[#out + 1] = math.floor(num('r' .. S .. id, 0) * 1000000)\n"
    "  out[#out + 1] = num('l' .. S .. id, -1)\n"
    "end\n"
    "return out\n";
