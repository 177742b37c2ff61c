-- heartbeat: extend the owner's live lease to now + lease_us; else change nothing.
-- Arguments: attempt_id, fence, lease_us. The same rules as rill_executor.store.heartbeat_row.

local attempt, fence, lease = unpack(args(3))

local now = clock()
local job = load_job()
if check_write(job, attempt, fence, now) then
  return answer(0, now, job)
end
local new = changed(job, {[LEASE_UNTIL] = us(now + tonumber(lease)), [UPDATED_AT] = us(now)})
save(new, job)
return answer(1, now, new)
