-- status: the job, its whole attempt history and its event log, read together.
-- Reply: JSON [now] if there is no job, else
-- [now, [field...], [attempt field, value, ...], event log (JSON text) or false].

local now = clock()
local job = load_job()
if not job then
  return cjson.encode({us(now)})
end
local events = redis.call('HGET', KEYS[1], 'events')
return cjson.encode({us(now), job, redis.call('HGETALL', KEYS[2]), events})
