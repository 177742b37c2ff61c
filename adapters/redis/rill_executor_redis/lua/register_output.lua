-- register_output: append one output (a JSON object) to the owner's registered outputs,
-- under the same fence and live-lease check as a heartbeat.
-- ARGV: attempt_id, fence, output. The same rules as rill_executor.store.registered_row.

local now = clock()
local job = load_job()
if check_write(job, ARGV[1], ARGV[2], now) then
  return answer(0, now, job)
end
-- Appended as text: the registered list is JSON the core wrote, kept as it wrote it.
local outputs = '[' .. ARGV[3] .. ']'
if job.outputs and job.outputs ~= '[]' then
  outputs = string.sub(job.outputs, 1, -2) .. ',' .. ARGV[3] .. ']'
end
local new = changed(job, {outputs = outputs, updated_at = us(now)})
save(new, job)
return answer(1, now, new)
