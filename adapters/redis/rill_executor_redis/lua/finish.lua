-- finish: commit or fail for the owner with a live lease, its attempt ended in the history.
-- ARGV: attempt_id, fence, state, attempt outcome, result ('' = none), error ('' = none),
--       retryable ('1', '0' or '' = none), retention_us, committed outputs (JSON array).
-- The same rules as rill_executor.store.finished_row.

local now = clock()
local job = load_job()
if check_write(job, ARGV[1], ARGV[2], now) then
  return answer(0, now, job)
end

local err = ARGV[6] ~= '' and ARGV[6]
local retention = tonumber(ARGV[8])
local retain_until = now + retention
local new = changed(job, {
  state = ARGV[3], lease_until = false, result = ARGV[5] ~= '' and ARGV[5], error = err,
  retryable = ARGV[7] ~= '' and ARGV[7], updated_at = us(now), finished_at = us(now),
  retain_until = us(retain_until), outputs = false,
})
save(new, job)

-- The owner's attempt is running (see claim.lua): end it.
local prefix = job.fence .. ':'
local history = {prefix .. 'outcome', ARGV[4], prefix .. 'end', us(now)}
if err then
  table.insert(history, prefix .. 'error')
  table.insert(history, err)
end
local outputs = ended_outputs(job.outputs, ARGV[9])
if outputs ~= '[]' then
  table.insert(history, prefix .. 'outputs')
  table.insert(history, outputs)
end
redis.call('HSET', KEYS[2], unpack(history))

-- The record expires at the first millisecond not before retain_until, never earlier.
-- Its history lives one retention longer: it never disappears before the record, and
-- it keeps the last fence for a claim after the record expired (claim.lua).
local function ms_not_before(t)
  return us(math.floor((t + 999) / 1000))
end
redis.call('PEXPIREAT', KEYS[1], ms_not_before(retain_until))
redis.call('PEXPIREAT', KEYS[2], ms_not_before(retain_until + retention))
return answer(1, now, new)
