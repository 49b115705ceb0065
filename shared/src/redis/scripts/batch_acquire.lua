-- Take one of a batch's running slots for a workflow, if the batch has
-- fewer running workflows than its limit. Idempotent per workflow: a
-- workflow already in holds its slot (a retried call never counts twice).
-- KEYS: [1] running HASH workflow id -> partition. ARGV: [1] workflow id,
-- [2] limit, [3] partition. Returns {granted 0|1, running after}.
local n = redis.call('HLEN', KEYS[1])
if redis.call('HEXISTS', KEYS[1], ARGV[1]) == 1 then
  return {1, n}
end
if n >= tonumber(ARGV[2]) then
  return {0, n}
end
redis.call('HSET', KEYS[1], ARGV[1], ARGV[3])
return {1, n + 1}
