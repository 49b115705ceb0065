-- Read-only: the live members at one server instant (expired ones are
-- filtered, not pruned).
-- KEYS: [1] members ZSET. ARGV: none. Returns the member list.
return redis.call('ZRANGEBYSCORE', KEYS[1], string.format('(%d', now_ms()), '+inf')
