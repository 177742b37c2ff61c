-- lease_job (Redis Cluster): lease up to `limit` due notices of one job, earliest first,
-- after adding its lapse notice if it is watched and its owner's lease ran out.
-- Arguments: owner, lease_us, limit.
-- Reply: JSON [now, [[notice, ...]], namespace, key, result, next due ('' = none pending),
-- watched ('1' if watches wait for the finish), watch token ('' = none)].

local owner, lease, limit = unpack(args(3))
lease, limit = tonumber(lease), tonumber(limit)
local now = clock()
local ob = outbox()
local job = redis.call('HMGET', KEYS[1], 'ns', 'key', 'notices', 'result', 'watchers',
  'watch_token', 'state', 'fence', 'lease_until')
local found = ob.decoded(job[3])
local lapsed = ob.lapse(found, job[7], job[5], job[8], job[9], now)
local leased = {}
while #leased < limit do
  local notice = ob.lease_one(found, owner, lease, now)
  if not notice then
    break
  end
  leased[#leased + 1] = cjson.encode(notice)
end
if #leased > 0 or lapsed then
  redis.call('HSET', KEYS[1], 'notices', cjson.encode(found))
end
local due = ob.outbox_due(found, job[7], job[5], job[8], job[9])
return cjson.encode({
  us(now), leased, job[1], job[2], job[4], due and us(due) or '', job[5] and '1' or '',
  job[6] or '',
})
