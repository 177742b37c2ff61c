-- outbox_update (Redis Cluster): re-score or drop index entries after their jobs were read.
-- KEYS[1] is the index, KEYS[2] its tokens hash. Arguments: groups of four: job id, the
-- watch token its job had when read ('' = none), the score read ('' = unknown), the next
-- score ('' = nothing pending and nothing watched: drop it).
-- An entry changes only if no claim with a watch came since its job was read (the tokens
-- agree). Otherwise such a claim is under way, or died before its script ran: the entry
-- stays, and is looked at again a minute later if its score did not move meanwhile.

local values = all_args()
local now = clock()
for i = 1, #values - 3, 4 do
  local id, token, read, next_score = values[i], values[i + 1], values[i + 2], values[i + 3]
  local current = redis.call('HGET', KEYS[2], id)
  if current and current == token then
    if next_score == '' then
      redis.call('ZREM', KEYS[1], id)
      redis.call('HDEL', KEYS[2], id)
    else
      redis.call('ZADD', KEYS[1], 'XX', next_score, id)
    end
  elseif read ~= '' and redis.call('ZSCORE', KEYS[1], id) == read then
    redis.call('ZADD', KEYS[1], 'XX', now + 60000000, id)
  end
end
return 1
