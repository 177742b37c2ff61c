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
  'outputs',
}
local NS, KEY, STATE, FENCE, OWNER, CLAIMED_AT, LEASE_UNTIL, FP, RV, RESULT, ERROR,
  RETRYABLE, CREATED_AT, UPDATED_AT, FINISHED_AT, RETAIN_UNTIL, OUTPUTS =
  1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17

-- The `n` arguments packed in ARGV[1]; a call with any other number is refused.
local function args(n)
  local pattern = '^' .. string.rep('([^\255]*)\255', n - 1) .. '([^\255]*)$'
  local values = {string.match(ARGV[1], pattern)}
  if #values ~= n then
    error('rill-executor: expected ' .. n .. ' packed arguments')
  end
  return values
end

local function us(n)
  return string.format('%d', n)
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

-- The reply of claim, heartbeat and finish: one JSON array [ok, now, field...], without
-- fields if there is no job. One bulk string parses far faster in the client than an
-- array of eighteen.
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
