-- Remove a member.
-- KEYS: [1] members ZSET. ARGV: [1] member.
-- Returns 1 if the member was live, else 0.
local now = now_ms()
prune(KEYS[1], now)
return redis.call('ZREM', KEYS[1], ARGV[1])
