-- Extend the lock only for its owner: compare and expire must be one step,
-- or the lock could change hands in between.
-- KEYS: [1] lock key. ARGV: [1] owner token, [2] ttl ms.
-- Returns 1 if extended, 0 if the caller does not hold the lock.
if redis.call('GET', KEYS[1]) == ARGV[1] then
  redis.call('PEXPIRE', KEYS[1], ARGV[2])
  return 1
end
return 0
