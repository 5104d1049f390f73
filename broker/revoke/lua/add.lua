-- Adds one revocation to the sorted set of them, drops those that ended,
-- keeps the set until its last entry ends, and tells the entry to every
-- broker, in one step: a broker that loads the set after this ran finds
-- the entry, and one subscribed before it hears it.
local revocations = KEYS[1] -- sorted set: entry JSON by the unix ms it ends
local entry = ARGV[1]       -- the entry's JSON
local ends_at = ARGV[2]     -- unix ms the entry ends
local now = ARGV[3]         -- unix ms
local publish = ARGV[4]     -- PUBLISH, or SPUBLISH on a Cluster
local channel = ARGV[5]     -- the bus channel of new entries (same hash tag)

redis.call('ZREMRANGEBYSCORE', revocations, '-inf', '(' .. now)
redis.call('ZADD', revocations, ends_at, entry)
local last = redis.call('ZRANGE', revocations, -1, -1, 'WITHSCORES')
redis.call('PEXPIREAT', revocations, last[2])
return redis.call(publish, channel, entry)
