-- resolve: an operator's resolution, atomically, else nothing. The same rules as
-- rill_executor.store's check_resolve, resolved_row, resolved_attempt and resolution_event:
-- the fence is bumped and the owner cleared, a running attempt ends (fenced if its lease
-- was live, abandoned if not), and the decision goes to the event log with the state before.
-- Arguments: action (reuse, redo, terminate), reason, actor, '1' if forced, result ('' =
-- the committed one), error ('' = none), retention_us, the event log's limit, and '1' if
-- this script keeps the outbox index (standalone).

local action, reason, actor, force, result, err, retention, limit, indexed = unpack(args(9))
local now = clock()
local job = load_job()
if not job then
  return answer(0, now, nil)
end
local live = job[STATE] == 'processing' and job[LEASE_UNTIL] ~= false
  and tonumber(job[LEASE_UNTIL]) > now
local committed = job[STATE] == 'succeeded' and job[RESULT]
if (live and force ~= '1') or (action == 'reuse' and result == '' and not committed) then
  return answer(0, now, job)
end

local fence = us(tonumber(job[FENCE]) + 1)
-- the job's own retention, as its finish recorded it (recorded_retention), else the argument
retention = tonumber(retention)
if job[STATE] ~= 'processing' and job[RETAIN_UNTIL] and job[FINISHED_AT] then
  local recorded = tonumber(job[RETAIN_UNTIL]) - tonumber(job[FINISHED_AT])
  if recorded > 0 then
    retention = recorded
  end
end
local state, retryable, retain_until = 'failed', '0', now + retention
if action == 'reuse' then
  state, retryable, err, result = 'succeeded', false, '', result ~= '' and result or job[RESULT]
else
  result = false
  if action == 'redo' then
    retryable, retain_until = '1', now -- the record stops binding: the next claim runs
  end
end
local new = changed(job, {
  [STATE] = state, [FENCE] = fence, [OWNER] = false, [CLAIMED_AT] = false,
  [LEASE_UNTIL] = false, [RESULT] = result, [ERROR] = err ~= '' and err,
  [RETRYABLE] = retryable, [UPDATED_AT] = us(now), [FINISHED_AT] = us(now),
  [RETAIN_UNTIL] = us(retain_until), [OUTPUTS] = false, [ORIGIN] = false,
})
local ob = action ~= 'redo' and job[WATCHERS] and outbox()
if ob then -- the waiting dispatches are answered, as by a finish
  new[WATCHERS] = false
  new[NOTICES] = ob.finish_notices(job[NOTICES], job[WATCHERS], fence, state, new[ERROR], now)
end
save(new, job)
if ob and indexed == '1' then
  ob.index_notices(job[NS], string.match(KEYS[1], '{(%x+)}'), cjson.decode(new[NOTICES]))
end

local history = {'fence', fence}
if job[STATE] == 'processing' then
  local prefix = job[FENCE] .. ':'
  table.insert(history, prefix .. 'outcome')
  table.insert(history, live and 'fenced' or 'abandoned')
  table.insert(history, prefix .. 'end')
  table.insert(history, us(now))
  if job[OUTPUTS] then
    table.insert(history, prefix .. 'outputs')
    table.insert(history, ended_outputs(job[OUTPUTS], nil))
  end
end
redis.call('HSET', KEYS[2], unpack(history))

local entry = {
  kind = 'resolved', attempt_id = cjson.null, fence = tonumber(fence), reason = reason,
  detail = action, actor = actor, at = us(now),
  data = {force = force == '1', before = {
    state = job[STATE], fence = tonumber(job[FENCE]), owner_attempt = job[OWNER] or cjson.null,
    lease_live = live and true or false,
  }},
}
redis.call('HSET', KEYS[1], 'events', append_event(redis.call('HGET', KEYS[1], 'events'), entry, limit))

-- Kept a retention from now (a redo's record too: its history and the decision stay
-- readable), the history one retention longer, as finish.lua does; no expiry while a
-- notice is pending (see notice_pending in common.lua).
if notice_pending(new[NOTICES]) then
  redis.call('PERSIST', KEYS[1])
  redis.call('PERSIST', KEYS[2])
else
  local until_ms = us(math.floor((now + retention + 999) / 1000))
  redis.call('PEXPIREAT', KEYS[1], until_ms)
  redis.call('PEXPIREAT', KEYS[2], us(math.floor((now + 2 * retention + 999) / 1000)))
end
return answer(1, now, new)
