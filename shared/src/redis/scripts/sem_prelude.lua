-- Semaphore helpers, prepended after prelude.lua.
-- KEYS (all semaphore scripts): [1] holders ZSET holder -> lease expiry ms,
-- [2] workers ZSET worker -> registration expiry ms, [3] slots HASH
-- worker -> slots, [4] cap STRING (absent = no cap). One hash tag, one slot.

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
