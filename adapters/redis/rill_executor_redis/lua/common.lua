-- Prelude of every rill-executor script; _scripts.py prepends it to each operation's file.
--
-- KEYS[1] is the job hash, KEYS[2] its attempt history; both carry the job's hash tag, so
-- they live in one slot and every script is Cluster-safe. Times are integer microseconds
-- on this server's clock (TIME), never the caller's. Numbers are written with %d: Lua's
-- tostring would print 1.7959976969832e+15 and lose the microseconds.
--
-- ARGV[1] holds every argument of the call, joined by the byte 0xFF: UTF-8 text never
-- contains that byte, so nothing needs escaping (one argument costs the client far less
-- to send than nine).
--
-- A job is handled as an array of its FIELDS, in that order (the reply of HMGET), absent
-- ones false (never nil: the array stays dense for unpack and cjson). The upper-case names
-- below are the positions.

local FIELDS = {
  'ns', 'key', 'state', 'fence', 'owner', 'claimed_at', 'lease_until', 'fp', 'rv',
  'result', 'error', 'retryable', 'created_at', 'updated_at', 'finished_at', 'retain_until',
  'outputs', 'origin', 'watchers', 'notices', 'trace',
}
local NS, KEY, STATE, FENCE, OWNER, CLAIMED_AT, LEASE_UNTIL, FP, RV, RESULT, ERROR,
  RETRYABLE, CREATED_AT, UPDATED_AT, FINISHED_AT, RETAIN_UNTIL, OUTPUTS, ORIGIN, WATCHERS,
  NOTICES, TRACE = 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21

-- The `n` arguments packed in ARGV[1] (or in `packed`); any other number is refused.
local function args(n, packed)
  local pattern = '^' .. string.rep('([^\255]*)\255', n - 1) .. '([^\255]*)$'
  local values = {string.match(packed or ARGV[1], pattern)}
  if #values ~= n then
    error('rill-executor: expected ' .. n .. ' packed arguments')
  end
  return values
end

-- Every argument packed in ARGV[1], however many.
local function all_args()
  local values = {}
  for value in string.gmatch(ARGV[1] .. '\255', '([^\255]*)\255') do
    values[#values + 1] = value
  end
  return values
end

local function us(n)
  return string.format('%d', n)
end

-- The event log `log` (JSON text) with `entry` appended, or counted as dropped once `limit`
-- reported entries are kept; a resolution is always appended. The count is the log's last
-- element, {dropped = n, at = ...}: rill_executor._rules.events.appended_event, in Lua.
local function append_event(log, entry, limit)
  local events, dropped = cjson.decode(log or '[]'), 0
  if #events > 0 and events[#events].kind == nil then
    dropped = tonumber(events[#events].dropped)
    events[#events] = nil
  end
  local reported = 0
  for _, e in ipairs(events) do
    if e.kind ~= 'resolved' then reported = reported + 1 end
  end
  if entry.kind == 'resolved' or reported < tonumber(limit) then
    events[#events + 1] = entry
  else
    dropped = dropped + 1
  end
  if dropped > 0 then
    events[#events + 1] = {dropped = dropped, at = entry.at}
  end
  return cjson.encode(events)
end

local function clock()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000000 + tonumber(t[2])
end

-- The job as stored, or nil if there is none.
local function load_job()
  local job = redis.call('HMGET', KEYS[1], unpack(FIELDS))
  if not job[STATE] then
    return nil
  end
  return job
end

-- A copy of `job` with `changes` ({[position] = value}) applied (false clears a field).
local function changed(job, changes)
  local new = {unpack(job)}
  for i, value in pairs(changes) do
    new[i] = value
  end
  return new
end

-- Store `new` over `old` (nil if there was none), writing only what differs.
-- HSET goes first: at maxmemory Redis refuses that first write and the script stops
-- before it has written anything (once a script has written, Redis lets it go on).
local function save(new, old)
  local set, clear = {}, {}
  for i, name in ipairs(FIELDS) do
    local value = new[i]
    if value then
      if not old or old[i] ~= value then
        set[#set + 1] = name
        set[#set + 1] = value
      end
    elseif old and old[i] then
      clear[#clear + 1] = name
    end
  end
  if #set > 0 then
    redis.call('HSET', KEYS[1], unpack(set))
  end
  if #clear > 0 then
    redis.call('HDEL', KEYS[1], unpack(clear))
  end
end

-- The reply of claim, heartbeat, finish, register_output and resolve: one JSON array
-- [ok, now, field...], without fields if there is no job. One bulk string parses far
-- faster in the client than an array of 23, and cjson builds it faster than Lua could.
-- A granted claim or finish answers only what its caller cannot tell from its own
-- request: values joined by SEP, the byte 0x1F (claim.lua, finish.lua; _rows.py).
local SEP = '\031'

local function answer(ok, now, job)
  if job then
    return cjson.encode({ok, us(now), unpack(job)})
  end
  return cjson.encode({ok, us(now)})
end

-- Why a write by (attempt, fence) must be rejected, or nil if it owns a live lease.
-- The same rules as rill_executor.store.check_write.
local function check_write(job, attempt, fence, now)
  if not job then
    return 'missing'
  end
  if tonumber(job[FENCE]) ~= tonumber(fence) or job[OWNER] ~= attempt then
    return 'superseded'
  end
  if job[STATE] ~= 'processing' then
    return 'finished'
  end
  if not job[LEASE_UNTIL] or tonumber(job[LEASE_UNTIL]) <= now then
    return 'lease_expired'
  end
  return nil
end

-- An ended attempt's outputs, as rill_executor.store.ended_outputs: the committed refs,
-- then every other registered output (JSON arrays of objects), marked committed or not.
local function ended_outputs(registered, committed)
  if (registered or '[]') == '[]' and (committed or '[]') == '[]' then
    return '[]' -- the common case: no outputs, no JSON to parse
  end
  local ended, done = {}, {}
  for _, ref in ipairs(cjson.decode(committed or '[]')) do
    ref.committed = true
    done[ref.key] = true
    ended[#ended + 1] = ref
  end
  for _, output in ipairs(cjson.decode(registered or '[]')) do
    if not done[output.key] then
      output.committed = false
      ended[#ended + 1] = output
    end
  end
  if #ended == 0 then
    return '[]' -- cjson would write an empty table as {}
  end
  return cjson.encode(ended)
end

-- The outbox (rill_executor.store's notices), kept in the job hash in a form cjson can carry
-- without loss: `watchers` is a JSON array of [watch id, target JSON text] pairs, in the
-- order they came; `notices` a JSON array of notice objects whose numbers are strings
-- (cjson keeps 14 digits, a microsecond time has 16) and whose target and error are JSON
-- text. _rows.py turns both into the port's JSON. An empty list is stored as no field.
-- `watch_token` (Redis Cluster only) is the token of the last claim with a watch, which
-- guards the namespace's outbox index (see _outbox.py).

-- The helpers, made only by the scripts and branches that use them: the hot paths (no
-- watch, no notice) do not pay for their closures.
local function outbox()
  local function outbox_key(ns)
    return 'rill:{ns-' .. redis.sha1hex(ns) .. '}:outbox'
  end

  local function decoded(text)
    if not text then
      return {}
    end
    return cjson.decode(text)
  end

  local function encoded(list)
    if #list == 0 then
      return false -- no field: cjson would write an empty list as {}
    end
    return cjson.encode(list)
  end

  -- The watchers with (id, target) added; a later watch with the same id replaces the target.
  local function add_watch(watchers, id, target)
    local pairs_ = decoded(watchers)
    for _, pair in ipairs(pairs_) do
      if pair[1] == id then
        pair[2] = target
        return encoded(pairs_)
      end
    end
    pairs_[#pairs_ + 1] = {id, target}
    return encoded(pairs_)
  end

  local function new_notice(seq, watch, target, fence, state, err, now)
    local null = cjson.null
    return {
      id = fence .. '.' .. seq, watch = watch, target = target, fence = fence, state = state,
      error = err or null, status = 'pending', attempts = '0', due = us(now),
      lease_owner = null, lease_until = null, outcome = null, detail = null,
      created_at = us(now), settled_at = null,
    }
  end

  -- The notices after a finish at `fence`: one more per watch (rill_executor's finish_notices).
  local function finish_notices(notices, watchers, fence, state, err, now)
    local found = decoded(notices)
    for _, pair in ipairs(decoded(watchers)) do
      found[#found + 1] = new_notice(#found + 1, pair[1], pair[2], fence, state, err, now)
    end
    return encoded(found)
  end

  -- The notices after a claim found the job ended (rill_executor's replay_notice): a notice
  -- to the same target answers it; a pending one not being sent takes the new target; one
  -- being sent (leased) keeps its own, and the new target gets a notice of its own.
  local function replay_notice(notices, id, target, fence, state, err, now)
    local found = decoded(notices)
    for _, notice in ipairs(found) do
      if notice.watch == id and notice.fence == fence then
        if notice.status ~= 'dropped' and notice.target == target then
          return encoded(found) -- a resend of a dispatch already answered or being answered
        end
        local leased = notice.lease_until ~= cjson.null and tonumber(notice.lease_until) > now
        if notice.status == 'pending' and not leased then
          notice.target = target
          return encoded(found)
        end
      end
    end
    found[#found + 1] = new_notice(#found + 1, id, target, fence, state, err, now)
    return encoded(found)
  end

  local function lease_end(notice)
    if notice.lease_until == cjson.null then
      return 0
    end
    return tonumber(notice.lease_until)
  end

  -- When the earliest pending notice may next be leased, or nil (rill_executor's notice_due).
  local function notice_due(found)
    local due = nil
    for _, notice in ipairs(found) do
      if notice.status == 'pending' then
        local at = math.max(tonumber(notice.due), lease_end(notice))
        if not due or at < due then
          due = at
        end
      end
    end
    return due
  end

  -- Whether a job still waits for its lapse notice: processing, watched, and none yet for
  -- its owner's fence (rill_executor's _lapse_due).
  local function lapse_due(found, state, watchers, fence)
    if state ~= 'processing' or not watchers then
      return false
    end
    for _, notice in ipairs(found) do
      if notice.state == 'processing' and tostring(notice.fence) == tostring(fence) then
        return false
      end
    end
    return true
  end

  -- When the job's outbox next needs a deliverer (rill_executor's outbox_due): its earliest
  -- pending notice, or for a watched job still processing its owner's lease end.
  local function outbox_due(found, state, watchers, fence, lease_until)
    local due = notice_due(found)
    if lease_until and lapse_due(found, state, watchers, fence) then
      local at = tonumber(lease_until)
      if not due or at < due then
        due = at
      end
    end
    return due
  end

  -- Add the lapse notice of a watched job whose owner's lease ran out (rill_executor's
  -- lapse_notices); true if one was added.
  local function lapse(found, state, watchers, fence, lease_until, now)
    if not lease_until or tonumber(lease_until) > now then
      return false
    end
    if not lapse_due(found, state, watchers, fence) then
      return false
    end
    found[#found + 1] = new_notice(#found + 1, '', 'null', fence, 'processing', false, now)
    return true
  end

  -- Standalone Redis: the namespace's index holds the jobs whose outbox is due some time
  -- (pending notices, or watches of a processing job), scored by outbox_due.
  local function index_job(ns, job_id, found, state, watchers, fence, lease_until)
    local due = outbox_due(found, state, watchers, fence, lease_until)
    if due then
      redis.call('ZADD', outbox_key(ns), due, job_id)
    else
      redis.call('ZREM', outbox_key(ns), job_id)
    end
  end

  -- The same for a job that is not processing: its pending notices alone.
  local function index_notices(ns, job_id, found)
    local due = notice_due(found)
    if due then
      redis.call('ZADD', outbox_key(ns), due, job_id)
    else
      redis.call('ZREM', outbox_key(ns), job_id)
    end
  end

  local function leasable(notice, now)
    return notice.status == 'pending' and tonumber(notice.due) <= now and lease_end(notice) <= now
  end

  -- Lease the job's earliest-due leasable notice in `found` (rill_executor's lease_notice);
  -- the leased notice, or nil if none is leasable.
  local function lease_one(found, owner, lease, now)
    local pick = nil
    for _, notice in ipairs(found) do
      if leasable(notice, now) and (not pick or tonumber(notice.due) < tonumber(pick.due)) then
        pick = notice
      end
    end
    if pick then
      pick.lease_owner = owner
      pick.lease_until = us(now + lease)
      pick.attempts = us(tonumber(pick.attempts) + 1)
    end
    return pick
  end

  return {
    key = outbox_key, decoded = decoded, encoded = encoded, add_watch = add_watch,
    finish_notices = finish_notices, replay_notice = replay_notice, lease_end = lease_end,
    notice_due = notice_due, index_notices = index_notices, lease_one = lease_one,
    outbox_due = outbox_due, lapse = lapse, index_job = index_job,
  }
end

-- Whether `notices` (the stored JSON text, or false) holds a pending notice. A finished
-- record with one gets no expiry (finish.lua, resolve.lua; a claim with a watch that
-- answers an ended job removes it): a queued notice is never lost to an expiry. settle.lua
-- gives the record its expiry back once none is pending.
local function notice_pending(notices)
  return notices and outbox().notice_due(cjson.decode(notices)) ~= nil
end
