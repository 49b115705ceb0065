-- Add a member if there is room. Members carry an expiry so a crashed
-- facilitator's entries lapse instead of blocking the queue forever.
-- KEYS: [1] members ZSET member -> expiry ms. ARGV: [1] member, [2] max,
-- [3] ttl ms. Returns {added 0|1, live count after}.
local now = now_ms()
prune(KEYS[1], now)
local count = redis.call('ZCARD', KEYS[1])
local expires = now + tonumber(ARGV[3])
if redis.call('ZSCORE', KEYS[1], ARGV[1]) then
  -- Already in: renew, so a retried add never counts twice.
  redis.call('ZADD', KEYS[1], expires, ARGV[1])
elseif count < tonumber(ARGV[2]) then
  redis.call('ZADD', KEYS[1], expires, ARGV[1])
  count = count + 1
else
  return {0, count}
end
expire_with_last(KEYS[1])
return {1, count}
