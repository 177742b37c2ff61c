-- settle: settle a leased notice if `owner` still holds its lease (rill_executor's
-- settle_notice), else write nothing.
-- Arguments: notice id, owner, status, outcome, detail, '1' if there is a detail,
-- retry_in_us, '1' if this script keeps the outbox index (standalone), and '1' if the
-- notice was tried (else it is given back unsent: its lease's try is taken off again).
-- Reply: JSON [ok, next due ('' = none pending), watched ('1' or ''), watch token, namespace].

local id, owner, status, outcome, detail, has_detail, retry_in, indexed, tried = unpack(args(9))
local now = clock()
local ob = outbox()
local job = redis.call('HMGET', KEYS[1], 'ns', 'notices', 'watchers', 'watch_token', 'state',
  'retain_until', 'finished_at', 'fence', 'lease_until')
local found = ob.decoded(job[2])
local settled = false
for _, notice in ipairs(found) do
  if notice.id == id then
    local held = notice.lease_owner == owner and ob.lease_end(notice) > now
    if held and notice.status == 'pending' then
      local again = status == 'pending'
      notice.status = status
      if tried ~= '1' then
        notice.attempts = notice.attempts - 1
      end
      notice.lease_owner = cjson.null
      notice.lease_until = cjson.null
      notice.outcome = outcome
      notice.detail = has_detail == '1' and detail or cjson.null
      notice.settled_at = again and cjson.null or us(now)
      if again then
        notice.due = us(now + tonumber(retry_in))
      end
      settled = true
    end
    break
  end
end
if not settled then
  return cjson.encode({0, '', '', '', ''})
end
redis.call('HSET', KEYS[1], 'notices', cjson.encode(found))
if indexed == '1' then
  ob.index_job(job[1], string.match(KEYS[1], '{(%x+)}'), found, job[5], job[3], job[8], job[9])
end
local due = ob.notice_due(found)
-- The last pending notice of a finished record settled: it gets the expiries finish.lua
-- held back (see notice_pending in common.lua), the record at retain_until (at once if that
-- passed), its history one retention after the record. A record without a retention of its
-- own (a redo's) is left to purge.
if not due and job[5] ~= 'processing' and redis.call('PTTL', KEYS[1]) == -1 then
  local retain_until = tonumber(job[6] or '0')
  local retention = retain_until - tonumber(job[7] or retain_until)
  if retention > 0 then
    redis.call('PEXPIREAT', KEYS[1], us(math.floor((retain_until + 999) / 1000)))
    local history_until = math.max(retain_until, now) + retention
    redis.call('PEXPIREAT', KEYS[2], us(math.floor((history_until + 999) / 1000)))
  end
end
return cjson.encode({1, due and us(due) or '', job[3] and '1' or '', job[4] or '', job[1]})
