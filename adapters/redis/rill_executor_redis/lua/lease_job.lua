-- lease_job (Redis Cluster): lease up to `limit` due notices of one job, earliest first.
-- Arguments: owner, lease_us, limit.
-- Reply: JSON [now, [[notice, ...]], namespace, key, result, next due ('' = none pending),
-- watched ('1' if watches wait for the finish), watch token ('' = none)].

local owner, lease, limit = unpack(args(3))
lease, limit = tonumber(lease), tonumber(limit)
local now = clock()
local ob = outbox()
local job = redis.call('HMGET', KEYS[1], 'ns', 'key', 'notices', 'result', 'watchers',
  'watch_token')
local found = ob.decoded(job[3])
local leased = {}
while #leased < limit do
  local notice = ob.lease_one(found, owner, lease, now)
  if not notice then
    break
  end
  leased[#leased + 1] = cjson.encode(notice)
end
if #leased > 0 then
  redis.call('HSET', KEYS[1], 'notices', cjson.encode(found))
end
local due = ob.notice_due(found)
return cjson.encode({
  us(now), leased, job[1], job[2], job[4], due and us(due) or '', job[5] and '1' or '',
  job[6] or '',
})
