-- Records a call as it is (Put): delivered, and then due at its deadline
-- plus grace, or final. Nobody is told.
--
-- Returns 1 recorded, 0 id taken.

local record_key = KEYS[1] -- the call's hash
local due_key = KEYS[2]    -- sorted set: correlation id by the unix ms Sweep acts at

local cid = ARGV[1]        -- the correlation id
local expire_at = ARGV[2]  -- the record's expiry, unix ms
local due = ARGV[3]        -- when Sweep acts, unix ms ("" for a final call)
-- ARGV[4] on: the record's field/value pairs.
local first_field = 4

if redis.call('EXISTS', record_key) == 1 then return 0 end
redis.call('HSET', record_key, unpack(ARGV, first_field))
redis.call('PEXPIREAT', record_key, expire_at)
if due ~= '' then redis.call('ZADD', due_key, due, cid) end
return 1
