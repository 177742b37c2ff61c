-- claim: take the job if it is free, else leave it untouched and return it.
-- ARGV: namespace, key, fingerprint, result_version ('' = none), attempt_id, lease_us.
-- The same rules as rill_executor.store.decide_claim / claimed_row.

local ns, key, fp, rv, attempt = ARGV[1], ARGV[2], ARGV[3], ARGV[4], ARGV[5]
local lease = tonumber(ARGV[6])

local function decide(job, now)
  if not job then
    return 'insert'
  end
  if job.state ~= 'processing' and tonumber(job.retain_until or '0') <= now then
    return 'takeover' -- retention passed: the old record no longer binds
  end
  if job.fp ~= fp or (job.rv or '') ~= rv then
    return 'conflict'
  end
  if job.state == 'succeeded' then
    return 'replay'
  end
  if job.state == 'failed' then
    if job.retryable == '1' then
      return 'takeover'
    end
    return 'replay'
  end
  if job.lease_until and tonumber(job.lease_until) > now then
    return 'in_progress'
  end
  return 'takeover'
end

local now = clock()
local job = load_job()
local action = decide(job, now)
if action ~= 'insert' and action ~= 'takeover' then
  return answer(0, now, job)
end

-- Fences are never reused for a key: a record that expired after its retention left its
-- history behind for one more retention, with the last fence in its 'fence' field.
local fence, created = 1, us(now)
if job then
  fence = tonumber(job.fence) + 1
  created = job.created_at
else
  local last = redis.call('HGET', KEYS[2], 'fence')
  if last then
    fence = tonumber(last) + 1
  end
end

local new = {
  ns = ns, key = key, state = 'processing', fence = us(fence), owner = attempt,
  claimed_at = us(now), lease_until = us(now + lease), fp = fp, rv = rv ~= '' and rv,
  result = false, error = false, retryable = false, created_at = created,
  updated_at = us(now), finished_at = false, retain_until = false, outputs = false,
}
save(new, job)

local prefix = us(fence) .. ':'
local history = {
  prefix .. 'id', attempt, prefix .. 'start', us(now), prefix .. 'outcome', 'running',
  'fence', us(fence),
}
if job and job.state == 'processing' then
  -- The previous owner's lease ran out. While a job is processing its owner's attempt is
  -- running (only finish ends both), so there is nothing to check before ending it.
  local old = job.fence .. ':'
  table.insert(history, old .. 'outcome')
  table.insert(history, 'expired')
  table.insert(history, old .. 'end')
  table.insert(history, us(now))
  if job.outputs then -- registered, never committed
    table.insert(history, old .. 'outputs')
    table.insert(history, ended_outputs(job.outputs, nil))
  end
end
redis.call('HSET', KEYS[2], unpack(history))

-- A running job never expires: its retention starts when it finishes.
if job then
  redis.call('PERSIST', KEYS[1])
end
redis.call('PERSIST', KEYS[2])
return answer(1, now, new)
