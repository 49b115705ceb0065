-- Read-only snapshot at one server instant (nothing is pruned, expired
-- entries are filtered out).
-- KEYS: see sem_prelude.lua. ARGV: none.
-- Returns {capacity, cap or -1, {holder, expiry, ...},
--          {worker, slots, expiry, ...}, epoch id or '',
--          recovery ms left (0 = none; -1 = no epoch: the next writing
--          script starts one, with a recovery window)}.
local now = now_ms()
local after_now = string.format('(%d', now)
local holders = redis.call('ZRANGEBYSCORE', KEYS[1], after_now, '+inf', 'WITHSCORES')
local live = redis.call('ZRANGEBYSCORE', KEYS[2], after_now, '+inf', 'WITHSCORES')
local workers = {}
for i = 1, #live, 2 do
  table.insert(workers, live[i])
  table.insert(workers, tonumber(redis.call('HGET', KEYS[3], live[i])) or 0)
  table.insert(workers, live[i + 1])
end
-- A nil inside a Lua array would truncate the reply, hence -1 for "no cap".
local cap = tonumber(redis.call('GET', KEYS[4])) or -1
local e = redis.call('HMGET', KEYS[5], 'id', 'recover_until')
local recovering = -1
if e[1] then
  recovering = math.max(0, (tonumber(e[2]) or 0) - now)
end
return {capacity(now), cap, holders, workers, e[1] or '', recovering}
