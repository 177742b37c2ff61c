-- outbox_due (Redis Cluster): the index's jobs due now, earliest first, with their scores.
-- KEYS[1] is the index, KEYS[2] its tokens hash. Arguments: limit.
-- Reply: JSON [now, [job id, score, job id, score, ...]].

local limit = unpack(args(1))
local now = clock()
local due = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', now, 'WITHSCORES', 'LIMIT', 0, limit)
return cjson.encode({us(now), due})
