-- Take one slot. Reclaiming expired leases and lapsed workers happens here,
-- in the same step, so a dead holder's slot is free for the very next caller.
-- KEYS: see sem_prelude.lua. ARGV: [1] holder id, [2] ttl ms, [3] recovery
-- grace ms (used when the epoch is missing, see sem_prelude.lua).
-- Returns {granted 0|1, lease expiry ms, capacity, in use, epoch id,
--          recovery ms left (0 = not recovering)}.
local now = now_ms()
local eid, recover_until = epoch(now, tonumber(ARGV[3]))
local recovering = math.max(0, recover_until - now)
prune(KEYS[1], now)
prune_workers(now)
local cap = capacity(now)
local in_use = redis.call('ZCARD', KEYS[1])
local expires = now + tonumber(ARGV[2])
if redis.call('ZSCORE', KEYS[1], ARGV[1]) then
  -- Same holder again (e.g. a retry after a lost reply): renew, never take a
  -- second slot. Not revoked if capacity shrank meanwhile: no preemption.
  redis.call('ZADD', KEYS[1], expires, ARGV[1])
elseif recovering > 0 then
  -- After a data loss, leases granted before it may still be running
  -- unseen: nothing new until they re-registered or stopped.
  return {0, 0, cap, in_use, eid, recovering}
elseif in_use < cap then
  redis.call('ZADD', KEYS[1], expires, ARGV[1])
  in_use = in_use + 1
else
  return {0, 0, cap, in_use, eid, 0}
end
expire_with_last(KEYS[1])
return {1, expires, cap, in_use, eid, recovering}
