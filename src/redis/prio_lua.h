/*
 * The class-and-tenant part of the shared scripts (issue #32): exactly the
 * decision of src/core/prio_gcra.c (read its header for the rules), on the
 * same hash as the plain GCRA so that plain and class callers of one key
 * share its TAT and the bound B + t/T holds for any mix of them.
 *
 * Two scripts run it: gcra.c's (a fixed
 * rate) and adaptive.c's (a learned rate, once pacing is on), each on its
 * own hash. STG__PRIO_LUA_FN(P) is the Lua text of the decision, a function
 * prio_run(cls, weight_m, hold_ns, floor_pm, tenant, fin) that the host
 * script defines where these locals are in scope, after it has read the
 * hash, moved the base, computed now and stretched the TAT for a longer T:
 * T, burst, w (tokens wanted), timeout (max wait), lead, carry, base, tat,
 * now. P prefixes every field name the decision owns, so that it cannot
 * collide with the host's fields ("" for gcra.c's hash, whose own fields
 * are b, t, i; "c" for adaptive.c's, which has pr and pb of its own). The
 * decision writes its fields and ends with fin(k, g, hs, exp, reply): k
 * tokens granted, g the key's new TAT (nil when refused), hs the HSET list
 * of its fields, exp the latest instant the hash must live to, reply as
 * below; the host writes b, t, i (and its own fields), sets the expiry and
 * returns. STG__PRIO_LUA is gcra.c's use: ARGV[9] is "cls weight_m hold_ns
 * floor_pm" (class index 0..2), ARGV[10] the tenant ("" for the class's
 * default one).
 *
 * Fields of the hash besides b, t, i, named here with P = "" (times in
 * ns since pb, a second of their own: a plain call may move b without
 * knowing them; a class call reads them relative to b and, when pb is not
 * b, writes them all back relative to b):
 *   pb             the base second of the fields below
 *   d<c>           class c demands until
 *   s0             an interactive caller seen: normal's cap until
 *   f<c>           class c's floor GCRA TAT
 *   p<c>:<tenant>  "tat until weight_m": the tenant's share GCRA and mark
 *   q<c>:<tenant>  the tenant's next free retry slot (rule 7; a field of its
 *                  own so that a script without rule 7 on the same key
 *                  reads the p records as before; deleted with its p)
 * The key's expiry is set from every time in the hash (a missing key is a
 * full bucket without marks or tenants, so expiry loses nothing). Redis
 * commands: HGETALL, HSET, HDEL, PEXPIRE (and the common part's HMGET,
 * TIME): the ACL of docs/redis.md.
 * One key per limit, so the script declares every key it touches in KEYS
 * (a Redis Cluster routes it by that one key).
 *
 * Reply: {1, wait_us, debt_us, k, end_us, base, tat, lease, floor,
 * tracked} when granted (end_us: the lease window's end from now, rounded
 * down), {0, hint_us, debt_us, 0, 0, base, tat, 0, 0, tracked} when not.
 * Waits are rounded up to the microsecond.
 */
#ifndef STG_REDIS_PRIO_LUA_H
#define STG_REDIS_PRIO_LUA_H

#define STG__PRIO_LUA_FN(P) \
    "local function prio_run(cls, wm, hold, fpm, name, fin)\n" \
    "  if fpm == 0 then fpm = 50 end\n" \
    "  local n, maxw = w, timeout\n" \
    "  local function fmt(v) return string.format('%.0f', v) end\n" \
    "  local function icap(v, b)\n" \
    "    v = math.ceil(v)\n" \
    "    local cap = math.floor(2^51 / b)\n" \
    "    if v > cap then v = cap end\n" \
    "    return v\n" \
    "  end\n" \
    "  local all = redis.call('HGETALL', KEYS[1])\n" \
    "  local h = {}\n" \
    "  for j = 1, #all, 2 do h[all[j]] = all[j + 1] end\n" \
    "  local pb = tonumber(h['" P "pb'])\n" \
    "  local off = 0\n" \
    "  if pb then off = (base - pb) * 1000000000 end\n" \
    "  local rebase = off ~= 0\n" \
    "  local hs = {}\n" \
    "  local function set(f, v) table.insert(hs, f); table.insert(hs, v) end\n" \
    "  local exp = tat\n" \
    "  local dem, flo = {}, {}\n" \
    "  for c = 0, 2 do\n" \
    "    dem[c] = (tonumber(h['" P "d' .. c]) or off) - off\n" \
    "    flo[c] = (tonumber(h['" P "f' .. c]) or off) - off\n" \
    "  end\n" \
    "  if dem[cls] < now + hold then dem[cls] = now + hold end\n" \
    "  local seen = (tonumber(h['" P "s0']) or off) - off\n" \
    "  if cls == 0 then seen = now + 30000000000 end\n" \
    "  local pre = '" P "p' .. cls .. ':'\n" \
    "  local myf = pre .. name\n" \
    "  local me, S, count, oth = nil, wm, 0, {}\n" \
    "  for f, v in pairs(h) do\n" \
    "    if string.sub(f, 1, #'" P "p') == '" P "p' and f ~= '" P "pb' then\n" \
    "      local a1, a2, a3 = string.match(v, '^(%S+) (%S+) (%S+)$')\n" \
    "      local tt, un, ww = tonumber(a1) - off, tonumber(a2) - off, tonumber(a3)\n" \
    "      local qf = '" P "q' .. string.sub(f, #'" P "p' + 1)\n" \
    "      local qq = (tonumber(h[qf]) or off) - off\n" \
    "      if un <= now and tt <= now and qq <= now then\n" \
    "        redis.call('HDEL', KEYS[1], f, qf)\n" \
    "      else\n" \
    "        count = count + 1\n" \
    "        exp = math.max(exp, tt, un, qq)\n" \
    "        if f == myf then me = {tt, un, qq}\n" \
    "        else\n" \
    "          if string.sub(f, 1, #pre) == pre and un > now then\n" \
    "            S = S + ww\n" \
    "            table.insert(oth, {tt, ww})\n" \
    "          end\n" \
    "          if rebase then\n" \
    "            set(f, fmt(tt) .. ' ' .. fmt(un) .. ' ' .. a3)\n" \
    "            if h[qf] then set(qf, fmt(qq)) end\n" \
    "          end\n" \
    "        end\n" \
    "      end\n" \
    "    end\n" \
    "  end\n" \
    "  local tracked = true\n" \
    "  if not me then\n" \
    "    if count >= 64 then tracked = false else me = {0, 0, 0} end\n" \
    "  end\n" \
    "  if tracked and me[2] < now + hold then me[2] = now + hold end\n" \
    "  local need = 0\n" \
    "  for c = 0, cls - 1 do if dem[c] > now then need = need + 1 end end\n" \
    "  local low = cls == 2 or (cls == 1 and need > 0)\n" \
    "  local nd = 0\n" \
    "  if low then nd = need end\n" \
    "  local Tt = 0\n" \
    "  if tracked and S > wm then Tt = icap(T * S / wm, burst) end\n" \
    "  local keep = 1\n" \
    "  if Tt > 0 then\n" \
    "    for _, o in ipairs(oth) do\n" \
    "      local To = icap(T * S / o[2], burst)\n" \
    "      if math.max(o[1], now) + To - burst * To <= now then\n" \
    "        local q = math.floor((To + 1) / 2)\n" \
    "        local lag = math.floor(q / T)\n" \
    "        if lag * T < q then lag = lag + 1 end\n" \
    "        if 1 + lag > keep then keep = 1 + lag end\n" \
    "      end\n" \
    "    end\n" \
    "    if keep > burst - 1 - nd then keep = burst - 1 - nd end\n" \
    "    if keep < 1 then keep = 1 end\n" \
    "  end\n" \
    "  local Tf = icap(T * 1000 / fpm, 1)\n" \
    "  local tt0 = 0\n" \
    "  if tracked then tt0 = me[1] end\n" \
    "  local ft0 = flo[cls]\n" \
    "  local BT = burst * T\n" \
    "  local resw = maxw\n" \
    "  if cls == 1 and seen > now and T < maxw then resw = T end\n" \
    "  local function try(g0, nn)\n" \
    "    local g, tt, ft, k, wait, fl, hint = g0, tt0, ft0, 0, 0, false, 0\n" \
    "    for i = 0, nn - 1 do\n" \
    "      local gn = g + T\n" \
    "      local wg = gn - BT - now\n" \
    "      local tn, within = 0, true\n" \
    "      if Tt > 0 then\n" \
    "        tn = math.max(tt, now) + Tt\n" \
    "        within = tn - burst * Tt <= now\n" \
    "      end\n" \
    "      local a_now = within and wg <= 0 and (nd == 0 or wg + nd * T <= 0)\n" \
    "      local o_now = (not within) and i == 0 and wg + (nd + keep) * T <= 0\n" \
    "      local a_wait = within and (not low) and i == 0 and wg <= resw\n" \
    "      local f = within and low and need > 0 and i == 0 and ft0 <= now and wg <= maxw\n" \
    "      if a_now or a_wait or f then\n" \
    "        if Tt > 0 then tt = tn end\n" \
    "        if not a_now and not a_wait then\n" \
    "          ft = math.max(ft0, now) + Tf\n" \
    "          fl = true\n" \
    "        end\n" \
    "      elseif not o_now then\n" \
    "        if i == 0 then\n" \
    "          local lim = resw\n" \
    "          if low then lim = 0 end\n" \
    "          local tw = 0\n" \
    "          if Tt > 0 then tw = tn - burst * Tt - now end\n" \
    "          local hh = math.max(wg + nd * T - lim, tw)\n" \
    "          if Tt > 0 and wg + (nd + keep) * T < hh then hh = wg + (nd + keep) * T end\n" \
    "          if low and need > 0 then\n" \
    "            local hf = math.max(math.max(ft0 - now, wg - maxw), tw)\n" \
    "            if hf < hh then hh = hf end\n" \
    "          end\n" \
    "          if hh < 1 then hh = 1 end\n" \
    "          hint = hh\n" \
    "        end\n" \
    "        break\n" \
    "      end\n" \
    "      g = gn\n" \
    "      k = k + 1\n" \
    "      if wg > 0 then\n" \
    "        wait = wg\n" \
    "        break\n" \
    "      end\n" \
    "    end\n" \
    "    return k, wait, g, tt, ft, fl, hint\n" \
    "  end\n" \
    "  local lease = lead > 0\n" \
    "  local g0 = tat\n" \
    "  if lease and g0 < now + lead then g0 = now + lead end\n" \
    "  local k, wait, g, tt, ft, fl, hint = try(g0, n)\n" \
    "  if k == 0 and lease then\n" \
    "    lease = false\n" \
    "    g0 = tat\n" \
    "    k, wait, g, tt, ft, fl, hint = try(tat, 1)\n" \
    "  end\n" \
    "  if k > 0 then flo[cls] = ft end\n" \
    "  local myq = '" P "q' .. cls .. ':' .. name\n" \
    "  if k == 0 and tracked then\n" \
    "    local slot = math.max(now + hint, me[3])\n" \
    "    local sp = T\n" \
    "    if Tt > 0 then sp = Tt end\n" \
    "    me[3] = slot + math.floor((sp + 1) / 2)\n" \
    "    hint = slot - now\n" \
    "    set(myq, fmt(me[3]))\n" \
    "    exp = math.max(exp, me[3])\n" \
    "  elseif tracked and rebase and h[myq] then\n" \
    "    set(myq, fmt(me[3]))\n" \
    "  end\n" \
    "  set('" P "pb', fmt(base))\n" \
    "  if cls == 0 or (rebase and h['" P "s0']) then set('" P "s0', fmt(seen)) end\n" \
    "  if cls == 0 or h['" P "s0'] then exp = math.max(exp, seen) end\n" \
    "  for c = 0, 2 do\n" \
    "    if c == cls or rebase then\n" \
    "      set('" P "d' .. c, fmt(dem[c]))\n" \
    "      if c == cls or h['" P "f' .. c] then set('" P "f' .. c, fmt(flo[c])) end\n" \
    "    end\n" \
    "    exp = math.max(exp, dem[c], flo[c])\n" \
    "  end\n" \
    "  if tracked then\n" \
    "    if k == 0 then tt = tt0 end\n" \
    "    set(myf, fmt(tt) .. ' ' .. fmt(me[2]) .. ' ' .. fmt(wm))\n" \
    "    exp = math.max(exp, tt, me[2])\n" \
    "  end\n" \
    "  local tr = 0\n" \
    "  if tracked then tr = 1 end\n" \
    "  if k == 0 then\n" \
    "    return fin(0, nil, hs, exp, {0, math.ceil(hint / 1000),\n" \
    "      math.ceil((tat - now) / 1000), 0, 0, base, tat, 0, 0, tr})\n" \
    "  end\n" \
    "  local el, fl1 = 0, 0\n" \
    "  if lease then el = 1 end\n" \
    "  if fl then fl1 = 1 end\n" \
    "  local endu = 0\n" \
    "  if lease then endu = math.floor((g0 - now) / 1000) end\n" \
    "  return fin(k, g, hs, math.max(exp, g), {1, math.ceil(wait / 1000),\n" \
    "    math.ceil((g - now) / 1000), k, endu, base, g, el, fl1, tr})\n" \
    "end\n"

/* gcra.c's use: ARGV[9] = "cls weight_m hold_ns floor_pm", ARGV[10] the
 * tenant; the key's b, t, i written with the class fields (t the new TAT
 * on a grant, the carried one on a refusal with a carry). */
#define STG__PRIO_LUA \
    STG__PRIO_LUA_FN("") \
    "if ARGV[9] and ARGV[9] ~= '' then\n" \
    "  local c1, c2, c3, c4 = string.match(ARGV[9], '^(%d) (%d+) (%d+) (%d+)$')\n" \
    "  return prio_run(tonumber(c1), tonumber(c2), tonumber(c3), tonumber(c4), ARGV[10] or '',\n" \
    "    function(k, g, hs, exp, rep)\n" \
    "      if k == 0 and carry > 0 then g = tat end\n" \
    "      if g then\n" \
    "        for _, v in ipairs({'b', string.format('%.0f', base),\n" \
    "            't', string.format('%.0f', g), 'i', string.format('%.0f', T)}) do\n" \
    "          table.insert(hs, v)\n" \
    "        end\n" \
    "      end\n" \
    "      redis.call('HSET', KEYS[1], unpack(hs))\n" \
    "      redis.call('PEXPIRE', KEYS[1], math.ceil((exp - now) / 1000000) + 1000)\n" \
    "      return rep\n" \
    "    end)\n" \
    "end\n"

#endif
