-- Take the lock, or refresh it if this owner already holds it (so a retry
-- after a lost reply does not lock the owner out of its own lock). Expiry is
-- PX, i.e. the server clock.
-- KEYS: [1] lock key. ARGV: [1] owner token, [2] ttl ms.
-- Returns 1 if the caller holds the lock now, else 0.
if redis.call('SET', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) then
  return 1
end
if redis.call('GET', KEYS[1]) == ARGV[1] then
  redis.call('PEXPIRE', KEYS[1], ARGV[2])
  return 1
end
return 0
