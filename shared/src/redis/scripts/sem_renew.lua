-- Extend a lease, but only while it is still live: once expired, the slot
-- may already be someone else's, so the holder must acquire again. The one
-- exception is a data loss: a lease granted in an earlier epoch is
-- re-created (re-registered) during the new epoch's recovery window, in
-- which no new lease is granted (see sem_prelude.lua), so the re-created
-- leases are never more than were held before the loss.
-- KEYS: see sem_prelude.lua. ARGV: [1] holder id, [2] ttl ms, [3] the epoch
-- id the lease was granted (or last renewed) in, [4] recovery grace ms.
-- Returns {new expiry ms or 0 if the lease was gone, epoch id,
--          1 if re-created after a data loss else 0}.
local now = now_ms()
local eid, recover_until = epoch(now, tonumber(ARGV[4]))
local score = tonumber(redis.call('ZSCORE', KEYS[1], ARGV[1]))
local expires = now + tonumber(ARGV[2])
if score and score > now then
  redis.call('ZADD', KEYS[1], expires, ARGV[1])
  expire_with_last(KEYS[1])
  return {expires, eid, 0}
end
if not score and eid ~= ARGV[3] and now < recover_until then
  redis.call('ZADD', KEYS[1], expires, ARGV[1])
  expire_with_last(KEYS[1])
  return {expires, eid, 1}
end
redis.call('ZREM', KEYS[1], ARGV[1])
return {0, eid, 0}
