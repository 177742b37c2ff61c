-- status: the job and its whole attempt history, read together.
-- Reply: JSON [now] if there is no job, else [now, [field...], [attempt field, value, ...]].

local now = clock()
local job = load_job()
if not job then
  return cjson.encode({us(now)})
end
return cjson.encode({us(now), job, redis.call('HGETALL', KEYS[2])})
