-- reindex (standalone Redis; once, when version 11 first opens a store of version 10 or
-- older): put each given job where its namespace's outbox index says it belongs
-- (index_job), so that a watched job still processing, whose entry a process of version 8
-- or older never wrote or dropped, is re-driven when its owner's lease ends.
-- KEYS: job hashes, any number (a standalone server lets a script reach keys of any slot).
-- Reply: how many of them are in an index afterwards.
local ob, indexed = outbox(), 0
for _, name in ipairs(KEYS) do
  local job = redis.call('HMGET', name, 'ns', 'state', 'watchers', 'fence', 'lease_until',
    'notices')
  if job[2] then
    local id = string.match(name, '{(%x+)}')
    ob.index_job(job[1], id, ob.decoded(job[6]), job[2], job[3], job[4], job[5])
    if redis.call('ZSCORE', ob.key(job[1]), id) then
      indexed = indexed + 1
    end
  end
end
return indexed
