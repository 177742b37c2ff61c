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
local at = us(now)
-- The fields a finish changes, written directly (save would compare all of them); what
-- it clears goes after the HSET (see save).
local set = {'state', state, 'updated_at', at, 'finished_at', at, 'retain_until', us(retain_until)}
local clear = {'lease_until'} -- a processing job always has one
local function put(i, value)
  if value then
    set[#set + 1] = FIELDS[i]
    set[#set + 1] = value
  elseif job[i] then
    clear[#clear + 1] = FIELDS[i]
  end
end
put(RESULT, result ~= '' and result)
put(ERROR, err)
put(RETRYABLE, retryable ~= '' and retryable)
put(OUTPUTS, false)
local notices = job[NOTICES]
local ob = job[WATCHERS] and outbox()
if ob then
  put(WATCHERS, false)
  notices = ob.finish_notices(job[NOTICES], job[WATCHERS], job[FENCE], state, err, now)
  put(NOTICES, notices)
end
redis.call('HSET', KEYS[1], unpack(set))
redis.call('HDEL', KEYS[1], unpack(clear))
if ob and indexed == '1' then
  ob.index_notices(job[NS], string.match(KEYS[1], '{(%x+)}'), cjson.decode(notices))
end

-- The owner's attempt is running (see claim.lua): end it.
local prefix = job[FENCE] .. ':'
local history = {prefix .. 'outcome', outcome, prefix .. 'end', at}
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
if not notice_pending(notices) then
  redis.call('PEXPIREAT', KEYS[1], ms_not_before(retain_until))
  redis.call('PEXPIREAT', KEYS[2], ms_not_before(retain_until + retention))
end
-- The caller knows the rest of the finished row from its reference and completion
-- (rill_executor.store.finished_row): the result is not sent back.
return table.concat({
  1, at, job[NS], job[KEY], job[CLAIMED_AT] or '', job[FP], job[CREATED_AT],
  job[ORIGIN] or '', job[TRACE] or '', notices or '', job[RV] or '',
}, SEP)
