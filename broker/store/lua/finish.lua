-- Writes a call's outcome (Finish, Withdraw) unless it has one (or,
-- withdrawing, unless it left the queue), and tells the instances that may
-- wait for it: the one that recorded it (the record's origin) and those
-- that read it to wait (its watchers set, which goes), each on its own
-- outcome channel, but not the instance finishing it, which tells its own
-- waiters.
--
-- Returns {0} no such call, {1, previous status, fields} written,
-- {2, fields} left as it was.

local record_key = KEYS[1]      -- the call's hash
local due_key = KEYS[2]         -- sorted set: correlation id by the unix ms Sweep acts at
local watchers_key = KEYS[3]    -- the set of ids of the instances waiting for the call

local cid = ARGV[1]             -- the correlation id
local status = ARGV[2]          -- the final status
local now = ARGV[3]             -- unix ms
local response = ARGV[4]        -- the response's JSON
local expire_at = ARGV[5]       -- the record's expiry, unix ms
local channel_prefix = ARGV[6]  -- outcome channel prefix (an instance's id completes it)
local withdraw = ARGV[7]        -- "1" to withdraw: end the call only while it is queued
local publish = ARGV[8]         -- the publish command: PUBLISH, or SPUBLISH on a Cluster
local instance = ARGV[9]        -- this instance's id

local f = redis.call('HMGET', record_key, 'status', 'idem_ref', 'origin')
local was, idem, origin = f[1], f[2], f[3]
if not was then return {0} end
if was ~= 'queued' and (withdraw == '1' or was ~= 'delivered') then
  return {2, redis.call('HGETALL', record_key)}
end
redis.call('HSET', record_key, 'status', status, 'finished_at', now, 'response', response)
redis.call('PEXPIREAT', record_key, expire_at)
redis.call('ZREM', due_key, cid)
if idem and redis.call('GET', idem) == cid then redis.call('PEXPIREAT', idem, expire_at) end
if origin and origin ~= instance then redis.call(publish, channel_prefix .. origin, cid) end
local watchers = redis.call('SMEMBERS', watchers_key)
for _, w in ipairs(watchers) do
  if w ~= instance and w ~= origin then redis.call(publish, channel_prefix .. w, cid) end
end
if #watchers > 0 then redis.call('DEL', watchers_key) end
return {1, was, redis.call('HGETALL', record_key)}
