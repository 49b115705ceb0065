-- Give a slot back.
-- KEYS: see sem_prelude.lua (only [1] is used). ARGV: [1] holder id.
-- Returns 1 if the holder had a live lease, 0 if it had none or it expired.
local now = now_ms()
local score = tonumber(redis.call('ZSCORE', KEYS[1], ARGV[1]))
redis.call('ZREM', KEYS[1], ARGV[1])
if score and score > now then
  return 1
end
return 0
