-- Release the lock only for its owner: compare and delete must be one step,
-- or a late owner could delete a lock that expired and was re-taken.
-- KEYS: [1] lock key. ARGV: [1] owner token.
-- Returns 1 if released, 0 if the caller does not hold the lock.
if redis.call('GET', KEYS[1]) == ARGV[1] then
  redis.call('DEL', KEYS[1])
  return 1
end
return 0
