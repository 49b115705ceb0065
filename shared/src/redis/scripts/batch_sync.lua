-- Make a partition's share of a batch's running slots what it says: the
-- workflows that no longer run are removed, those that run are present
-- (even past the limit: they run already and must count). A hash whose
-- last field goes is deleted by Redis, so a finished batch leaves nothing.
-- KEYS: [1] running HASH. ARGV: [1] partition, [2] n = workflows to
-- release, [3 .. 2+n] those, [3+n ..] workflows running.
-- Returns the running count after.
local n = tonumber(ARGV[2])
for i = 3, 2 + n do
  redis.call('HDEL', KEYS[1], ARGV[i])
end
for i = 3 + n, #ARGV do
  redis.call('HSET', KEYS[1], ARGV[i], ARGV[1])
end
return redis.call('HLEN', KEYS[1])
