-- Ends up to max calls due at now that have no outcome yet (Sweep), as
-- sweepFailure does, and tells each one's origin and watchers (this
-- instance too: nobody else tells its waiters of a sweep).
--
-- Returns how many calls it ended.

local due_key = KEYS[1]             -- sorted set: correlation id by the unix ms Sweep acts at

local record_prefix = ARGV[1]       -- record key prefix (+ correlation id)
local now = ARGV[2]                 -- unix ms
local max = tonumber(ARGV[3])       -- how many calls to end at most
local expire_at = ARGV[4]           -- an ended record's expiry, unix ms
local channel_prefix = ARGV[5]      -- outcome channel prefix (an instance's id completes it)
local code_offline = ARGV[6]        -- the code of a queued call whose wait ended
local msg_offline = ARGV[7]         -- its message
local code_timeout = ARGV[8]        -- the code of a call whose deadline passed
local msg_queued_timeout = ARGV[9]  -- its message for a queued call
local msg_lost_owner = ARGV[10]     -- its message for a delivered call
local publish = ARGV[11]            -- the publish command: PUBLISH, or SPUBLISH on a Cluster
local watchers_prefix = ARGV[12]    -- watchers key prefix (+ correlation id)

local due = redis.call('ZRANGEBYSCORE', due_key, '-inf', now, 'LIMIT', 0, max)
local n = 0
for _, cid in ipairs(due) do
  redis.call('ZREM', due_key, cid)
  local key = record_prefix .. cid
  local f = redis.call('HMGET', key, 'status', 'offline_at', 'idem_ref', 'origin')
  if f[1] == 'queued' or f[1] == 'delivered' then
    local code, msg = code_timeout, msg_lost_owner
    if f[1] == 'queued' then
      if f[2] then code, msg = code_offline, msg_offline else msg = msg_queued_timeout end
    end
    local resp = cjson.encode({correlation_id = cid, success = false, error = code, message = msg})
    redis.call('HSET', key, 'status', 'failed', 'finished_at', now, 'response', resp)
    redis.call('PEXPIREAT', key, expire_at)
    if f[3] and redis.call('GET', f[3]) == cid then redis.call('PEXPIREAT', f[3], expire_at) end
    if f[4] then redis.call(publish, channel_prefix .. f[4], cid) end
    local wk = watchers_prefix .. cid
    local watchers = redis.call('SMEMBERS', wk)
    for _, w in ipairs(watchers) do
      if w ~= f[4] then redis.call(publish, channel_prefix .. w, cid) end
    end
    if #watchers > 0 then redis.call('DEL', wk) end
    n = n + 1
  end
end
return n
