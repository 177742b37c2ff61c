-- purge: delete the given jobs of a namespace that are past retention, unless a completion
-- notice is pending (rill_executor.store's purge_verdict), keeping each one's last fence.
-- KEYS: pairs (job hash, attempt history); on a Cluster one pair, on a standalone server
-- any number (a standalone server lets a script reach keys of any slot).
-- Arguments: namespace, dangling_after_us, '1' for a dry run, and '1' if this script keeps
-- the outbox index (standalone).
-- Reply: JSON [now, codes, tokens]: codes has one character per job, '0' left alone (gone,
-- another namespace's, or within retention), '1' purged (a dry run: would be), '2' kept for
-- a pending notice; tokens, per job, the watch token of a purged job ('' = none), joined
-- by ',' (Redis Cluster: its outbox index entry is dropped under that token).
-- Every rule is checked here, on this server's clock: a job claimed again since the caller
-- found it is live and stays.

local ns, dangling_after, dry, indexed = unpack(args(4))
dangling_after = tonumber(dangling_after)
local now = clock()
local codes, tokens = {}, {}
local ob = nil
-- The namespace's outbox index (as outbox().key), if this script keeps it and it exists.
local index = indexed == '1' and ('rill:{ns-' .. redis.sha1hex(ns) .. '}:outbox')
if index and redis.call('EXISTS', index) == 0 then
  index = false
end

-- Whether someone waits for the record: a pending notice, or watches of a processing job
-- its lapse notice will answer (rill_executor's has_pending_notice).
local function waiting(job)
  if not job[7] and not job[9] then
    return false
  end
  ob = ob or outbox()
  return ob.outbox_due(ob.decoded(job[7]), job[2], job[9], job[3], job[4]) ~= nil
end

-- Until when the deleted record's last fence is kept (rill_executor's fence_keep_until):
-- one retention from now, the record's own for an ended job, never less than dangling_after.
local function keep_for(state, retain_until, finished_at)
  local kept = dangling_after
  if state ~= 'processing' and retain_until and finished_at then
    kept = math.max(kept, tonumber(retain_until) - tonumber(finished_at))
  end
  return kept
end

local function delete(name, history, job)
  local fence = job[3]
  -- The history of every claim holds the fence already; HSET only where it does not (and,
  -- the one command here that Redis refuses at maxmemory, before anything is deleted).
  if tonumber(redis.call('HGET', history, 'fence') or '0') < tonumber(fence) then
    redis.call('HSET', history, 'fence', fence)
  end
  -- A dangling job's history never expires; an ended one's would one retention after its
  -- record: now + keep_for is never earlier than that (now >= retain_until).
  local until_us = now + keep_for(job[2], job[5], job[6])
  redis.call('PEXPIREAT', history, us(math.floor((until_us + 999) / 1000)))
  -- The record's attempts go with it, as a SQL purge deletes them: the next claim's history
  -- starts empty. Taken off after the HSET above, so a refused HSET leaves all as it was.
  local drop = {}
  for _, field in ipairs(redis.call('HKEYS', history)) do
    if field ~= 'fence' then
      drop[#drop + 1] = field
      if #drop == 1000 then -- unpack's limit is some thousands of values
        redis.call('HDEL', history, unpack(drop))
        drop = {}
      end
    end
  end
  if #drop > 0 then
    redis.call('HDEL', history, unpack(drop))
  end
  redis.call('DEL', name)
  if index then -- the index holds jobs that someone waits for: not this one
    redis.call('ZREM', index, string.match(name, '{(%x+)}'))
  end
end

for i = 1, #KEYS - 1, 2 do
  local name, history = KEYS[i], KEYS[i + 1]
  local job = redis.call('HMGET', name, 'ns', 'state', 'fence', 'lease_until', 'retain_until',
    'finished_at', 'notices', 'watch_token', 'watchers')
  local code, token = '0', ''
  if job[1] == ns and job[2] then
    local past
    if job[2] == 'processing' then
      past = tonumber(job[4] or '0') + dangling_after <= now
    else
      local retain_until, finished_at = tonumber(job[5] or '0'), tonumber(job[6] or '0')
      past = retain_until <= now
      if retain_until == finished_at then -- released by a redo: kept as a dangling job is
        past = finished_at + dangling_after <= now
      end
    end
    if past and waiting(job) then
      code = '2'
    elseif past then
      code, token = '1', job[8] or ''
      if dry ~= '1' then
        delete(name, history, job)
      end
    end
  end
  codes[#codes + 1] = code
  tokens[#tokens + 1] = token
end
return cjson.encode({us(now), table.concat(codes), table.concat(tokens, ',')})
