-- heartbeat: extend the owner's live lease to now + lease_us; else change nothing.
-- Arguments: attempt_id, fence, lease_us. The same rules as rill_executor.store.heartbeat_row.

local attempt, fence, lease = unpack(args(3))

local now = clock()
local job = load_job()
if check_write(job, attempt, fence, now) then
  return answer(0, now, job)
end
-- The two fields it changes, written directly (save would compare all of them).
job[LEASE_UNTIL], job[UPDATED_AT] = us(now + tonumber(lease)), us(now)
redis.call('HSET', KEYS[1], 'lease_until', job[LEASE_UNTIL], 'updated_at', job[UPDATED_AT])
return answer(1, now, job)
