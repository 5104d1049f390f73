-- Records a call (Create, CreateDelivered), or finds the retained call with
-- the same idempotency key. With a workspace channel (a single server, where
-- a script may publish any channel) it publishes the call there: when a
-- holder hears it, the call is delivered (the takeover protocol gives it to
-- exactly one holder, as any call on the channel) and never queued;
-- otherwise, or without a channel, it joins the workspace's queue.
--
-- Delivered (CreateDelivered: the caller holds the workspace's connection
-- and delivers the call on it itself), the fields come recorded delivered,
-- and stay so when the queue is empty; nobody is told. With calls queued
-- the call joins the queue behind them, queued.
--
-- Returns {0, holders that heard the call, or -1 without a channel}
-- created, {1, fields} the existing call, {2} id taken, {3} created
-- delivered (CreateDelivered).

local record_key = KEYS[1]    -- the call's hash
local queue_key = KEYS[2]     -- the workspace's queue
local due_key = KEYS[3]       -- sorted set: correlation id by the unix ms Sweep acts at
local idem_key = KEYS[4]      -- the idempotency key's key (the record's key again when none)

local cid = ARGV[1]           -- the correlation id
local expire_at = ARGV[2]     -- the record's expiry, unix ms
local due_queued = ARGV[3]    -- when Sweep acts while the call is queued, unix ms
local record_prefix = ARGV[4] -- record key prefix (+ correlation id)
local has_idem = ARGV[5]      -- "1" when the call has an idempotency key
local due_delivered = ARGV[6] -- deadline + grace, unix ms: when Sweep acts once delivered; also the queue's expiry
local channel = ARGV[7]       -- the workspace channel to publish the call on ("" for none)
local message = ARGV[8]       -- the call's bus message
local now = ARGV[9]           -- unix ms
local delivered = ARGV[10]    -- "1": recorded delivered when the queue is empty (CreateDelivered)
-- ARGV[11] on: the record's field/value pairs.
local first_field = 11

if has_idem == '1' then
  local other = redis.call('GET', idem_key)
  if other then
    local rec = redis.call('HGETALL', record_prefix .. other)
    if #rec > 0 then return {1, rec} end
  end
end
if redis.call('EXISTS', record_key) == 1 then return {2} end
redis.call('HSET', record_key, unpack(ARGV, first_field))
redis.call('PEXPIREAT', record_key, expire_at)
if has_idem == '1' then redis.call('SET', idem_key, cid, 'PXAT', expire_at) end
if delivered == '1' then
  if redis.call('LLEN', queue_key) == 0 then
    redis.call('ZADD', due_key, due_delivered, cid)
    return {3}
  end
  redis.call('HSET', record_key, 'status', 'queued')
  redis.call('HDEL', record_key, 'delivered_at')
end
local heard = -1
if channel ~= '' then heard = redis.call('PUBLISH', channel, message) end
if heard > 0 then
  redis.call('HSET', record_key, 'status', 'delivered', 'delivered_at', now)
  redis.call('ZADD', due_key, due_delivered, cid)
  return {0, heard}
end
redis.call('ZADD', due_key, due_queued, cid)
redis.call('RPUSH', queue_key, cid)
if redis.call('PEXPIRETIME', queue_key) < tonumber(due_delivered) then
  redis.call('PEXPIREAT', queue_key, due_delivered)
end
return {0, heard}
