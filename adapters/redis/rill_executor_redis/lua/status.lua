-- status: the job, its whole attempt history and its event log, read together.
-- ARGV[1], if given, is a namespace: a job of another one is answered as no job (a listing
-- reads every key a SCAN step found, whatever its namespace, whole only when it is wanted).
-- Reply: JSON [now] if there is no job, else
-- [now, [field...], [attempt field, value, ...], event log (JSON text) or false].

local now = clock()
local job = load_job()
if not job or (ARGV[1] and job[NS] ~= ARGV[1]) then
  return cjson.encode({us(now)})
end
local events = redis.call('HGET', KEYS[1], 'events')
return cjson.encode({us(now), job, redis.call('HGETALL', KEYS[2]), events})
