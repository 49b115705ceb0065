-- Extend a lease, but only while it is still live: once expired, the slot
-- may already be someone else's, so the holder must acquire again.
-- KEYS: see sem_prelude.lua (only [1] is used). ARGV: [1] holder id, [2] ttl ms.
-- Returns the new expiry ms, or 0 if the lease was gone.
local now = now_ms()
local score = tonumber(redis.call('ZSCORE', KEYS[1], ARGV[1]))
if not score or score <= now then
  redis.call('ZREM', KEYS[1], ARGV[1])
  return 0
end
local expires = now + tonumber(ARGV[2])
redis.call('ZADD', KEYS[1], expires, ARGV[1])
expire_with_last(KEYS[1])
return expires
