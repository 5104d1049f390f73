-- Pops a workspace's queue (Claim) until it has marked max calls delivered
-- or the queue is empty; calls no longer queued or past their time are
-- dropped from the queue (Sweep ends them).
--
-- Returns the field/value lists of the calls claimed, oldest first.

local queue_key = KEYS[1]     -- the workspace's queue
local due_key = KEYS[2]       -- sorted set: correlation id by the unix ms Sweep acts at

local record_prefix = ARGV[1] -- record key prefix (+ correlation id)
local now = ARGV[2]           -- unix ms
local max = tonumber(ARGV[3]) -- how many calls to claim at most

local out = {}
local now_ms = tonumber(now)
while #out < max do
  local cid = redis.call('LPOP', queue_key)
  if not cid then break end
  local key = record_prefix .. cid
  local f = redis.call('HMGET', key, 'status', 'deadline', 'offline_at', 'delivered_due')
  if f[1] == 'queued' and now_ms < tonumber(f[2]) and (not f[3] or now_ms < tonumber(f[3])) then
    redis.call('HSET', key, 'status', 'delivered', 'delivered_at', now)
    redis.call('ZADD', due_key, f[4], cid)
    out[#out + 1] = redis.call('HGETALL', key)
  end
end
return out
