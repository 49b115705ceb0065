-- Helpers prepended to the semaphore and counter scripts (no KEYS/ARGV of
-- its own). Kept in one place so every script reads time and expiry the same
-- way.

-- Server clock in ms: every process reads the same clock, so hosts whose own
-- clocks are skewed still agree on which lease has expired.
local function now_ms()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end

-- Expiry-scored ZSETs hold members until someone prunes them; a score at or
-- before now means expired. Returns the pruned members.
local function prune(zkey, now)
  local gone = redis.call('ZRANGEBYSCORE', zkey, '-inf', now)
  if #gone > 0 then
    redis.call('ZREMRANGEBYSCORE', zkey, '-inf', now)
  end
  return gone
end

-- Let the key (and a companion key) vanish with its last member, so an
-- abandoned primitive leaves nothing behind in Redis.
local function expire_with_last(zkey, companion)
  local last = redis.call('ZRANGE', zkey, -1, -1, 'WITHSCORES')
  if #last == 0 then
    return
  end
  redis.call('PEXPIREAT', zkey, last[2])
  if companion then
    redis.call('PEXPIREAT', companion, last[2])
  end
end
