-- Take a leader lock and its fencing epoch in one step.
-- KEYS: [1] lock key, [2] epoch key (same hash tag).
-- ARGV: [1] owner token, [2] ttl ms, [3] epoch floor (the highest epoch the
--   caller has seen in durable state; after Redis lost its data the counter
--   restarts, and the floor keeps epochs rising anyway).
-- Returns {1, epoch} when the caller holds the lock now (a retry by the
-- holder after a lost reply keeps its epoch), else {0, current holder's epoch}.
local epoch
if redis.call('SET', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) then
  epoch = redis.call('INCR', KEYS[2])
  local floor = tonumber(ARGV[3])
  if epoch <= floor then
    epoch = floor + 1
    redis.call('SET', KEYS[2], epoch)
  end
  return {1, epoch}
end
epoch = tonumber(redis.call('GET', KEYS[2]) or '0')
if redis.call('GET', KEYS[1]) == ARGV[1] then
  redis.call('PEXPIRE', KEYS[1], ARGV[2])
  return {1, epoch}
end
return {0, epoch}
