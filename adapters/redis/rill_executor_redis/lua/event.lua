-- event: append an entry to the job's event log (rill_executor's appended_event), stamped
-- `at` on this server's clock, the first `limit` kept (append_event); nothing if there is no job.
-- The log is the hash field `events` (a JSON array), read by status alone.
-- Arguments: the entry (a JSON object), limit.
-- Reply: 1 if appended, 0 if there is no job.

local event, limit = unpack(args(2))
local now = clock()
if not redis.call('HGET', KEYS[1], 'state') then
  return 0
end
local entry = cjson.decode(event)
entry.at = us(now)
redis.call('HSET', KEYS[1], 'events', append_event(redis.call('HGET', KEYS[1], 'events'), entry, limit))
return 1
