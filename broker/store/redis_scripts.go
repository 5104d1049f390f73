package store

import "github.com/redis/go-redis/v9"

// The Lua scripts of the Redis store. Each step that must be atomic (create,
// claim, finish, sweep) is one script, so that no two instances can
// interleave inside it. Every key a script touches shares the "{calls}"
// hash tag (see redisKeys), so on a Redis Cluster they all live in one slot
// and a script may reach keys it computes, such as the record of an id it
// popped, and publish the outcome channel, which carries the same tag.
// Outcomes are told on per-instance channels (OutcomeChannel + ":" + the
// store's id): to the instance that recorded the call and to those that
// read it to wait (watchScript), never to every instance.
// Numbers computed from times come from Go as strings: Lua's own number
// formatting would lose digits of a unix millisecond.

// createScript records a call, or finds the retained call with the same
// idempotency key. With a workspace channel (a single server, where a
// script may publish any channel) it publishes the call there: when a
// holder hears it, the call is delivered (the takeover protocol gives it to
// exactly one holder, as any call on the channel) and never queued;
// otherwise, or without a channel, it joins the workspace's queue.
//
// Held (CreateHeld: the caller holds the workspace's connection), the
// fields come recorded delivered, and stay so when the queue is empty;
// nobody is told. With calls queued the call joins the queue behind them,
// queued.
//
// KEYS: record, queue, due, idempotency key (the record again when none).
// ARGV: correlation id, record expiry (unix ms), due while queued (unix
// ms), record key prefix, "1" when there is an idempotency key, due once
// delivered (deadline + grace, unix ms; also the queue's expiry), workspace
// channel ("" for none), the call's bus message, now (unix ms), "1" when
// held, then the record's field/value pairs.
//
// Returns {0, holders that heard the call, or -1 without a channel}
// created, {1, fields} the existing call, {2} id taken, {3} created
// delivered (held).
var createScript = redis.NewScript(`
if ARGV[5] == '1' then
  local other = redis.call('GET', KEYS[4])
  if other then
    local rec = redis.call('HGETALL', ARGV[4] .. other)
    if #rec > 0 then return {1, rec} end
  end
end
if redis.call('EXISTS', KEYS[1]) == 1 then return {2} end
redis.call('HSET', KEYS[1], unpack(ARGV, 11))
redis.call('PEXPIREAT', KEYS[1], ARGV[2])
if ARGV[5] == '1' then redis.call('SET', KEYS[4], ARGV[1], 'PXAT', ARGV[2]) end
if ARGV[10] == '1' then
  if redis.call('LLEN', KEYS[2]) == 0 then
    redis.call('ZADD', KEYS[3], ARGV[6], ARGV[1])
    return {3}
  end
  redis.call('HSET', KEYS[1], 'status', 'queued')
  redis.call('HDEL', KEYS[1], 'delivered_at')
end
local heard = -1
if ARGV[7] ~= '' then heard = redis.call('PUBLISH', ARGV[7], ARGV[8]) end
if heard > 0 then
  redis.call('HSET', KEYS[1], 'status', 'delivered', 'delivered_at', ARGV[9])
  redis.call('ZADD', KEYS[3], ARGV[6], ARGV[1])
  return {0, heard}
end
redis.call('ZADD', KEYS[3], ARGV[3], ARGV[1])
redis.call('RPUSH', KEYS[2], ARGV[1])
if redis.call('PEXPIRETIME', KEYS[2]) < tonumber(ARGV[6]) then
  redis.call('PEXPIREAT', KEYS[2], ARGV[6])
end
return {0, heard}
`)

// putScript records a call as it is (Put): delivered, and then due at its
// deadline plus grace, or final. Nobody is told.
//
// KEYS: record, due. ARGV: correlation id, record expiry (unix ms), due
// (unix ms; "" for a final call), then the record's field/value pairs.
//
// Returns 1 recorded, 0 id taken.
var putScript = redis.NewScript(`
if redis.call('EXISTS', KEYS[1]) == 1 then return 0 end
redis.call('HSET', KEYS[1], unpack(ARGV, 4))
redis.call('PEXPIREAT', KEYS[1], ARGV[2])
if ARGV[3] ~= '' then redis.call('ZADD', KEYS[2], ARGV[3], ARGV[1]) end
return 1
`)

// claimScript pops a workspace's queue until it has marked max calls
// delivered or the queue is empty; calls no longer queued or past their
// time are dropped from the queue (Sweep ends them).
//
// KEYS: queue, due. ARGV: record key prefix, now (unix ms), max.
//
// Returns the field/value lists of the calls claimed, oldest first.
var claimScript = redis.NewScript(`
local out = {}
local now = tonumber(ARGV[2])
local max = tonumber(ARGV[3])
while #out < max do
  local cid = redis.call('LPOP', KEYS[1])
  if not cid then break end
  local key = ARGV[1] .. cid
  local f = redis.call('HMGET', key, 'status', 'deadline', 'offline_at', 'delivered_due')
  if f[1] == 'queued' and now < tonumber(f[2]) and (not f[3] or now < tonumber(f[3])) then
    redis.call('HSET', key, 'status', 'delivered', 'delivered_at', ARGV[2])
    redis.call('ZADD', KEYS[2], f[4], cid)
    out[#out + 1] = redis.call('HGETALL', key)
  end
end
return out
`)

// finishScript writes a call's outcome unless it has one (or, withdrawing,
// unless it left the queue), and tells the instances that may wait for it:
// the one that recorded it (the record's origin) and those that read it
// to wait (its watchers set, which goes), each on its own outcome channel,
// but not the instance finishing it, which tells its own waiters.
//
// KEYS: record, due, watchers. ARGV: correlation id, final status, now
// (unix ms), response JSON, record expiry (unix ms), outcome channel
// prefix (an instance's id completes it), "1" to withdraw, the publish
// command (PUBLISH, or SPUBLISH on a Cluster), this instance's id.
//
// Returns {0} no such call, {1, previous status, fields} written,
// {2, fields} left as it was.
var finishScript = redis.NewScript(`
local f = redis.call('HMGET', KEYS[1], 'status', 'idem_ref', 'origin')
local was, idem, origin = f[1], f[2], f[3]
if not was then return {0} end
if was ~= 'queued' and (ARGV[7] == '1' or was ~= 'delivered') then
  return {2, redis.call('HGETALL', KEYS[1])}
end
redis.call('HSET', KEYS[1], 'status', ARGV[2], 'finished_at', ARGV[3], 'response', ARGV[4])
redis.call('PEXPIREAT', KEYS[1], ARGV[5])
redis.call('ZREM', KEYS[2], ARGV[1])
if idem and redis.call('GET', idem) == ARGV[1] then redis.call('PEXPIREAT', idem, ARGV[5]) end
if origin and origin ~= ARGV[9] then redis.call(ARGV[8], ARGV[6] .. origin, ARGV[1]) end
local watchers = redis.call('SMEMBERS', KEYS[3])
for _, w in ipairs(watchers) do
  if w ~= ARGV[9] and w ~= origin then redis.call(ARGV[8], ARGV[6] .. w, ARGV[1]) end
end
if #watchers > 0 then redis.call('DEL', KEYS[3]) end
return {1, was, redis.call('HGETALL', KEYS[1])}
`)

// watchScript reads a call's record for an instance that waits for its
// outcome: a call not final yet gets the instance in its watchers set (kept
// as long as the record), so that whoever writes the outcome tells it.
// Atomic with finishScript: the outcome is either in the record read or
// told to the instance.
//
// KEYS: record, watchers. ARGV: this instance's id.
//
// Returns the record's fields (none: no such call).
var watchScript = redis.NewScript(`
local status = redis.call('HGET', KEYS[1], 'status')
if status == 'queued' or status == 'delivered' then
  redis.call('SADD', KEYS[2], ARGV[1])
  redis.call('PEXPIREAT', KEYS[2], redis.call('PEXPIRETIME', KEYS[1]))
end
return redis.call('HGETALL', KEYS[1])
`)

// sweepScript ends up to max calls due at now that have no outcome yet, as
// sweepFailure does, and tells each one's origin and watchers (this
// instance too: nobody else tells its waiters of a sweep).
//
// KEYS: due. ARGV: record key prefix, now (unix ms), max, record expiry
// (unix ms), outcome channel prefix, then the codes and messages: offline
// code, offline message, timeout code, queued timeout message, lost owner
// message, the publish command, watchers key prefix.
//
// Returns how many calls it ended.
var sweepScript = redis.NewScript(`
local due = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', ARGV[2], 'LIMIT', 0, tonumber(ARGV[3]))
local n = 0
for _, cid in ipairs(due) do
  redis.call('ZREM', KEYS[1], cid)
  local key = ARGV[1] .. cid
  local f = redis.call('HMGET', key, 'status', 'offline_at', 'idem_ref', 'origin')
  if f[1] == 'queued' or f[1] == 'delivered' then
    local code, msg = ARGV[8], ARGV[10]
    if f[1] == 'queued' then
      if f[2] then code, msg = ARGV[6], ARGV[7] else msg = ARGV[9] end
    end
    local resp = cjson.encode({correlation_id = cid, success = false, error = code, message = msg})
    redis.call('HSET', key, 'status', 'failed', 'finished_at', ARGV[2], 'response', resp)
    redis.call('PEXPIREAT', key, ARGV[4])
    if f[3] and redis.call('GET', f[3]) == cid then redis.call('PEXPIREAT', f[3], ARGV[4]) end
    if f[4] then redis.call(ARGV[11], ARGV[5] .. f[4], cid) end
    local wk = ARGV[12] .. cid
    local watchers = redis.call('SMEMBERS', wk)
    for _, w in ipairs(watchers) do
      if w ~= f[4] then redis.call(ARGV[11], ARGV[5] .. w, cid) end
    end
    if #watchers > 0 then redis.call('DEL', wk) end
    n = n + 1
  end
end
return n
`)
