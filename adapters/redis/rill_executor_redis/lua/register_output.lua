-- register_output: append one output (a JSON object) to the owner's registered outputs,
-- under the same fence and live-lease check as a heartbeat.
-- Arguments: attempt_id, fence, output. The same rules as rill_executor.store.registered_row.

local attempt, fence, output = unpack(args(3))

local now = clock()
local job = load_job()
if check_write(job, attempt, fence, now) then
  return answer(0, now, job)
end
-- Appended as text: the registered list is JSON the core wrote, kept as it wrote it.
local outputs = '[' .. output .. ']'
if job[OUTPUTS] and job[OUTPUTS] ~= '[]' then
  outputs = string.sub(job[OUTPUTS], 1, -2) .. ',' .. output .. ']'
end
local new = changed(job, {[OUTPUTS] = outputs, [UPDATED_AT] = us(now)})
save(new, job)
return answer(1, now, new)
