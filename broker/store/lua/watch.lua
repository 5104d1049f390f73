-- Reads a call's record for an instance that waits for its outcome
-- (GetWatched): a call not final yet gets the instance in its watchers set
-- (kept as long as the record), so that whoever writes the outcome tells
-- it. Atomic with finish.lua: the outcome is either in the record read or
-- told to the instance.
--
-- Returns the record's fields (none: no such call).

local record_key = KEYS[1]   -- the call's hash
local watchers_key = KEYS[2] -- the set of ids of the instances waiting for the call

local instance = ARGV[1]     -- this instance's id

local status = redis.call('HGET', record_key, 'status')
if status == 'queued' or status == 'delivered' then
  redis.call('SADD', watchers_key, instance)
  redis.call('PEXPIREAT', watchers_key, redis.call('PEXPIRETIME', record_key))
end
return redis.call('HGETALL', record_key)
