-- Graceful removal of a worker; its leases stay until released or expired,
-- because the tasks they guard may still be finishing.
-- KEYS: see sem_prelude.lua. ARGV: [1] worker id.
-- Returns 1 if a live registration was removed, else 0.
local now = now_ms()
prune_workers(now)
redis.call('HDEL', KEYS[3], ARGV[1])
return redis.call('ZREM', KEYS[2], ARGV[1])
