-- Opening a store (once per process, not prepended by common.lua): its identity and which
-- versions of the code may write to it, in the hash KEYS[1] (rill:store-id): id, version
-- (the newest code that opened it) and min_writer (the oldest that may write to it).
-- ARGV: a new id, this code's version, the oldest version that may write beside it.
-- Up to version 10 the key was a string, the id alone, read with GET: it becomes the hash
-- here, so a process of version 10 or older fails at open (WRONGTYPE) instead of writing.
-- Reply: {id, version, min_writer, the version found before this call (0: none)}.
local key, new_id = KEYS[1], ARGV[1]
local version, min_writer = tonumber(ARGV[2]), tonumber(ARGV[3])
local kind = redis.call('TYPE', key).ok
if kind == 'string' then
  local id = redis.call('GET', key)
  redis.call('DEL', key)
  redis.call('HSET', key, 'id', id, 'version', 0, 'min_writer', 0)
elseif kind == 'none' then
  redis.call('HSET', key, 'id', new_id, 'version', 0, 'min_writer', 0)
end
local found = redis.call('HMGET', key, 'id', 'version', 'min_writer')
local have, oldest = tonumber(found[2]), tonumber(found[3])
if oldest <= version and have < version then
  redis.call('HSET', key, 'version', version, 'min_writer', math.max(oldest, min_writer))
  return {found[1], version, math.max(oldest, min_writer), have}
end
return {found[1], have, oldest, have}
