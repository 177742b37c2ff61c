-- status: the job and its whole attempt history, read together.
-- Reply: JSON [now] if there is no job, else [now, [field...], [attempt field, value, ...]].

local now = clock()
local row = redis.call('HMGET', KEYS[1], unpack(FIELDS))
if not row[3] then
  return cjson.encode({us(now)})
end
return cjson.encode({us(now), row, redis.call('HGETALL', KEYS[2])})
