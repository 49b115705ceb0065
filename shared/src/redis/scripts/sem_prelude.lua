-- Semaphore helpers, prepended after prelude.lua.
-- KEYS (all semaphore scripts): [1] holders ZSET holder -> lease expiry ms,
-- [2] workers ZSET worker -> registration expiry ms, [3] slots HASH
-- worker -> slots, [4] cap STRING (absent = no cap), [5] epoch HASH
-- {id, recover_until}. One hash tag, one slot.

-- A worker whose registration lapsed must stop counting at once, so its slot
-- entry goes with it.
local function prune_workers(now)
  for _, w in ipairs(prune(KEYS[2], now)) do
    redis.call('HDEL', KEYS[3], w)
  end
end

-- Capacity is derived, never stored: sum of the slots of workers live at
-- `now`, then the cap. Reads only, so the read-only status script shares it.
local function capacity(now)
  local live = redis.call('ZRANGEBYSCORE', KEYS[2], string.format('(%d', now), '+inf')
  local total = 0
  for _, w in ipairs(live) do
    total = total + (tonumber(redis.call('HGET', KEYS[3], w)) or 0)
  end
  local cap = tonumber(redis.call('GET', KEYS[4]))
  if cap then
    total = math.min(total, cap)
  end
  return total
end

-- The epoch says whether this semaphore's data survived. It never expires,
-- so only a data loss (FLUSHALL, a restart without persistence, a failover to
-- an empty replica) removes it. The first writing script to find it missing
-- starts a new epoch (its id is the server time, unique per loss) and a
-- recovery window of `grace` ms: leases granted before the loss are
-- invisible now, so no new lease is granted until every holder of one has
-- either re-registered it (sem_renew.lua) or stopped, which a holder does
-- within one lease period of its last confirmed renewal. Returns the epoch
-- id and the end of its recovery window (server ms).
local function epoch(now, grace)
  local e = redis.call('HMGET', KEYS[5], 'id', 'recover_until')
  if e[1] then
    return e[1], tonumber(e[2]) or 0
  end
  local id = tostring(now)
  local recover_until = now + grace
  redis.call('HSET', KEYS[5], 'id', id, 'recover_until', recover_until)
  return id, recover_until
end
