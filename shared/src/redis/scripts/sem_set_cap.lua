-- Set or clear the cap. Stored in Redis, not in process config, so every
-- process computes the same capacity.
-- KEYS: see sem_prelude.lua. ARGV: [1] cap, or '' to remove the cap.
-- Returns the capacity after the change.
if ARGV[1] == '' then
  redis.call('DEL', KEYS[4])
else
  redis.call('SET', KEYS[4], ARGV[1])
end
local now = now_ms()
prune_workers(now)
return capacity(now)
