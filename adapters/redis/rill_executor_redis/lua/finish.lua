-- finish: commit or fail for the owner with a live lease, its attempt ended in the history.
-- Arguments: attempt_id, fence, state, attempt outcome, result ('' = none), error ('' =
-- none), retryable ('1', '0' or '' = none), retention_us, committed outputs (JSON array),
-- and '1' if this script keeps the outbox index (standalone).
-- The same rules as rill_executor.store.finished_row: the watches become notices.

local attempt, fence, state, outcome, result, err, retryable, retention, committed, indexed =
  unpack(args(10))

local now = clock()
local job = load_job()
if check_write(job, attempt, fence, now) then
  return answer(0, now, job)
end

err = err ~= '' and err
retention = tonumber(retention)
local retain_until = now + retention
local new = changed(job, {
  [STATE] = state, [LEASE_UNTIL] = false, [RESULT] = result ~= '' and result,
  [ERROR] = err, [RETRYABLE] = retryable ~= '' and retryable, [UPDATED_AT] = us(now),
  [FINISHED_AT] = us(now), [RETAIN_UNTIL] = us(retain_until), [OUTPUTS] = false,
})
local ob = job[WATCHERS] and outbox()
if ob then
  new[WATCHERS] = false
  new[NOTICES] = ob.finish_notices(job[NOTICES], job[WATCHERS], job[FENCE], state, err, now)
end
save(new, job)
if ob and indexed == '1' then
  ob.index_notices(job[NS], string.match(KEYS[1], '{(%x+)}'), cjson.decode(new[NOTICES]))
end

-- The owner's attempt is running (see claim.lua): end it.
local prefix = job[FENCE] .. ':'
local history = {prefix .. 'outcome', outcome, prefix .. 'end', us(now)}
if err then
  table.insert(history, prefix .. 'error')
  table.insert(history, err)
end
local outputs = ended_outputs(job[OUTPUTS], committed)
if outputs ~= '[]' then
  table.insert(history, prefix .. 'outputs')
  table.insert(history, outputs)
end
redis.call('HSET', KEYS[2], unpack(history))

-- The record expires at the first millisecond not before retain_until, never earlier.
-- Its history lives one retention longer: it never disappears before the record, and
-- it keeps the last fence for a claim after the record expired (claim.lua).
-- None while a notice is pending (see notice_pending in common.lua).
local function ms_not_before(t)
  return us(math.floor((t + 999) / 1000))
end
if not notice_pending(new[NOTICES]) then
  redis.call('PEXPIREAT', KEYS[1], ms_not_before(retain_until))
  redis.call('PEXPIREAT', KEYS[2], ms_not_before(retain_until + retention))
end
return answer(1, now, new)
