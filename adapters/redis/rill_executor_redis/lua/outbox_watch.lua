-- outbox_watch (Redis Cluster): before a claim with a watch, put its job in the namespace's
-- outbox index, due now, under the claim's token. KEYS[1] is the index, KEYS[2] its tokens
-- hash (job id -> token of the last claim with a watch). Arguments: job id, token.

local id, token = unpack(args(2))
redis.call('HSET', KEYS[2], id, token)
redis.call('ZADD', KEYS[1], clock(), id)
return 1
