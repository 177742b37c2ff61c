-- heartbeat: extend the owner's live lease to now + lease_us; else change nothing.
-- ARGV: attempt_id, fence, lease_us. The same rules as rill_executor.store.heartbeat_row.

local now = clock()
local job = load_job()
if check_write(job, ARGV[1], ARGV[2], now) then
  return answer(0, now, job)
end
local new = changed(job, {lease_until = us(now + tonumber(ARGV[3])), updated_at = us(now)})
save(new, job)
return answer(1, now, new)
