-- claim: take the job if it is free, else leave it untouched and return it.
-- Arguments: namespace, key, fingerprint, result_version ('' = none), attempt_id, lease_us,
-- and '1' if this script keeps the outbox index (standalone); only if the claim has an
-- origin, a trace or a watch, a second packed ARGV: origin ('' = none), trace (a W3C
-- traceparent, '' = none), watch id ('' = no watch), watch target (JSON text), watch token
-- (Redis Cluster: '' = none).
-- The same rules as rill_executor.store.decide_claim / claimed_row / watched_row.

local ns, key, fp, rv, attempt, lease, indexed = unpack(args(7))
lease = tonumber(lease)
local origin, trace, watch, target, token = '', '', '', '', ''
if ARGV[2] then
  origin, trace, watch, target, token = unpack(args(5, ARGV[2]))
end

local function decide(job, now)
  if not job then
    return 'insert'
  end
  if job[STATE] ~= 'processing' and tonumber(job[RETAIN_UNTIL] or '0') <= now then
    return 'takeover' -- retention passed: the old record no longer binds
  end
  if job[FP] ~= fp or (job[RV] or '') ~= rv then
    return 'conflict'
  end
  if job[STATE] == 'succeeded' then
    return 'replay'
  end
  if job[STATE] == 'failed' then
    if job[RETRYABLE] == '1' then
      return 'takeover'
    end
    return 'replay'
  end
  if job[LEASE_UNTIL] and tonumber(job[LEASE_UNTIL]) > now then
    return 'in_progress'
  end
  return 'takeover'
end

local now = clock()
local job = load_job()
local action = decide(job, now)
if token ~= '' then -- the index has this job under this token (see common.lua)
  redis.call('HSET', KEYS[1], 'watch_token', token)
end
if action ~= 'insert' and action ~= 'takeover' then
  if watch == '' or action == 'conflict' then
    return answer(0, now, job) -- a pure read: a replay or a busy job, without a watch
  end
  local new
  if action == 'in_progress' then -- the watch waits for the finish, or the lease's lapse
    local ob = outbox()
    new = changed(job, {[WATCHERS] = ob.add_watch(job[WATCHERS], watch, target)})
    if indexed == '1' then
      ob.index_job(ns, string.match(KEYS[1], '{(%x+)}'), ob.decoded(new[NOTICES]), 'processing',
        new[WATCHERS], new[FENCE], new[LEASE_UNTIL])
    end
  else -- ended: answered from the stored outcome at once
    local ob = outbox()
    local notices = ob.replay_notice(
      job[NOTICES], watch, target, job[FENCE], job[STATE], job[ERROR], now)
    new = changed(job, {[NOTICES] = notices})
    if indexed == '1' then
      ob.index_notices(ns, string.match(KEYS[1], '{(%x+)}'), cjson.decode(notices))
    end
  end
  save(new, job)
  -- A pending notice: no expiry until it settles (see notice_pending in common.lua). A
  -- resend already answered added none, and the record keeps its expiry.
  if action ~= 'in_progress' and notice_pending(new[NOTICES]) then
    redis.call('PERSIST', KEYS[1])
    redis.call('PERSIST', KEYS[2])
  end
  return answer(0, now, new)
end

-- Fences are never reused for a key: a record that expired after its retention left its
-- history behind for one more retention, with the last fence in its 'fence' field.
local at = us(now)
local fence, created, history_existed = 1, at, job ~= nil
if job then
  fence = tonumber(job[FENCE]) + 1
  created = job[CREATED_AT]
else
  local last = redis.call('HGET', KEYS[2], 'fence')
  if last then
    fence = tonumber(last) + 1
    history_existed = true
  end
end

local new = {
  [NS] = ns, [KEY] = key, [STATE] = 'processing', [FENCE] = us(fence), [OWNER] = attempt,
  [CLAIMED_AT] = at, [LEASE_UNTIL] = us(now + lease), [FP] = fp,
  [RV] = rv ~= '' and rv, [RESULT] = false, [ERROR] = false, [RETRYABLE] = false,
  [CREATED_AT] = created, [UPDATED_AT] = at, [FINISHED_AT] = false,
  [RETAIN_UNTIL] = false, [OUTPUTS] = false, [ORIGIN] = origin ~= '' and origin,
  [WATCHERS] = job and job[WATCHERS] or false, [NOTICES] = job and job[NOTICES] or false,
  [TRACE] = trace ~= '' and trace,
}
if watch ~= '' then
  new[WATCHERS] = outbox().add_watch(new[WATCHERS], watch, target)
end
if new[WATCHERS] and indexed == '1' then -- looked at again when this lease ends, for its lapse
  local ob = outbox()
  ob.index_job(ns, string.match(KEYS[1], '{(%x+)}'), ob.decoded(new[NOTICES]), 'processing',
    new[WATCHERS], new[FENCE], new[LEASE_UNTIL])
end
if job then
  save(new, job)
else -- a first claim: nothing to compare, its fields written as they are
  local set = {
    'ns', ns, 'key', key, 'state', 'processing', 'fence', new[FENCE], 'owner', attempt,
    'claimed_at', at, 'lease_until', new[LEASE_UNTIL], 'fp', fp, 'created_at', at,
    'updated_at', at,
  }
  for _, i in ipairs({RV, ORIGIN, WATCHERS, TRACE}) do
    if new[i] then
      set[#set + 1] = FIELDS[i]
      set[#set + 1] = new[i]
    end
  end
  redis.call('HSET', KEYS[1], unpack(set))
end

local prefix = new[FENCE] .. ':'
local history = {
  prefix .. 'id', attempt, prefix .. 'start', at, prefix .. 'outcome', 'running',
  'fence', new[FENCE],
}
if origin ~= '' then -- the attempt's entry keeps what it answered
  table.insert(history, prefix .. 'origin')
  table.insert(history, origin)
end
if trace ~= '' then -- and the span it ran in
  table.insert(history, prefix .. 'trace')
  table.insert(history, trace)
end
if job and job[STATE] == 'processing' then
  -- The previous owner's lease ran out. While a job is processing its owner's attempt is
  -- running (only finish ends both), so there is nothing to check before ending it.
  local old = job[FENCE] .. ':'
  table.insert(history, old .. 'outcome')
  table.insert(history, 'expired')
  table.insert(history, old .. 'end')
  table.insert(history, at)
  if job[OUTPUTS] then -- registered, never committed
    table.insert(history, old .. 'outputs')
    table.insert(history, ended_outputs(job[OUTPUTS], nil))
  end
end
redis.call('HSET', KEYS[2], unpack(history))

-- A running job never expires: its retention starts when it finishes. Keys that did not
-- exist before this script (a first claim) were created without an expiry.
if job then
  redis.call('PERSIST', KEYS[1])
end
if history_existed then
  redis.call('PERSIST', KEYS[2])
end
-- The caller knows the rest of the new row from its request (rill_executor.store's
-- claimed_row): the fence, the record's creation and the outbox are all it is told.
return table.concat({1, at, new[FENCE], created, new[WATCHERS] or '', new[NOTICES] or ''}, SEP)
