-- Register or renew (heartbeat) a worker's slots.
-- KEYS: see sem_prelude.lua. ARGV: [1] worker id, [2] slots, [3] ttl ms,
-- [4] recovery grace ms (a heartbeat after a data loss starts the recovery
-- window, see sem_prelude.lua).
-- Returns the capacity after registering.
local now = now_ms()
epoch(now, tonumber(ARGV[4]))
prune_workers(now)
redis.call('ZADD', KEYS[2], now + tonumber(ARGV[3]), ARGV[1])
redis.call('HSET', KEYS[3], ARGV[1], ARGV[2])
expire_with_last(KEYS[2], KEYS[3])
return capacity(now)
