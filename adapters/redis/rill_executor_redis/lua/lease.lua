-- lease (standalone Redis): lease up to `limit` due notices of a namespace, earliest first.
-- KEYS[1] is the namespace's outbox index (jobs with pending notices or watches, scored by
-- outbox_due; a watched job whose owner's lease ran out gets its lapse notice here); the jobs' hashes are reached by their names (standalone only).
-- Arguments: owner, lease_us, limit.
-- Reply: JSON [now, [[job id, namespace, key, notice, result], ...]].

local owner, lease, limit = unpack(args(3))
lease, limit = tonumber(lease), tonumber(limit)
local now = clock()
local ob = outbox()
local leased = {}
for _ = 1, 2 * limit + 8 do -- each turn leases one notice or drops one stale entry
  if #leased >= limit then
    break
  end
  local first = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', now, 'LIMIT', 0, 1)
  if #first == 0 then
    break
  end
  local id = first[1]
  local name = 'rill:{' .. id .. '}:job'
  local job = redis.call('HMGET', name, 'ns', 'key', 'notices', 'result', 'state', 'watchers',
    'fence', 'lease_until')
  local found = ob.decoded(job[3])
  local lapsed = ob.lapse(found, job[5], job[6], job[7], job[8], now)
  local notice = ob.lease_one(found, owner, lease, now)
  if notice or lapsed then
    redis.call('HSET', name, 'notices', cjson.encode(found))
  end
  if notice then
    leased[#leased + 1] = {id, job[1], job[2], cjson.encode(notice), job[4]}
  end
  local due = ob.outbox_due(found, job[5], job[6], job[7], job[8])
  if due then
    redis.call('ZADD', KEYS[1], due, id)
  else
    redis.call('ZREM', KEYS[1], id) -- nothing pending or watched, or the record expired
  end
end
return cjson.encode({us(now), leased})
