-- Raise the holder's fencing epoch above a floor found in durable state
-- (records written by an epoch Redis no longer remembers), only while the
-- caller still holds the lock.
-- KEYS: [1] lock key, [2] epoch key. ARGV: [1] owner token, [2] floor.
-- Returns the epoch now, or 0 when the caller does not hold the lock.
if redis.call('GET', KEYS[1]) ~= ARGV[1] then
  return 0
end
local epoch = tonumber(redis.call('GET', KEYS[2]) or '0')
local floor = tonumber(ARGV[2])
if epoch <= floor then
  epoch = floor + 1
  redis.call('SET', KEYS[2], epoch)
end
return epoch
