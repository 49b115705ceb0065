-- Make a partition's share of a batch's running slots what its owner
-- says: every field of the partition (value = the partition) that is not
-- among the running workflows goes, whoever wrote it (this owner, or a
-- previous one stopped between a change and its release); the running
-- ones are present (even past the limit: they run already and must
-- count). A hash whose last field goes is deleted by Redis, so a
-- finished batch leaves nothing.
-- KEYS: [1] running HASH workflow id -> partition. ARGV: [1] partition,
-- [2 ..] workflows of the partition running. Returns the running count
-- after, over every partition.
local running = {}
for i = 2, #ARGV do
  running[ARGV[i]] = true
end
local all = redis.call('HGETALL', KEYS[1])
for i = 1, #all, 2 do
  if all[i + 1] == ARGV[1] and not running[all[i]] then
    redis.call('HDEL', KEYS[1], all[i])
  end
end
for i = 2, #ARGV do
  redis.call('HSET', KEYS[1], ARGV[i], ARGV[1])
end
return redis.call('HLEN', KEYS[1])
