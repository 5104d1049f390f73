package store

import (
	"context"
	_ "embed" // the scripts' sources

	"github.com/redis/go-redis/v9"
)

// The Lua scripts of the Redis store, one file each in lua/, and the
// arguments they take. Each step that must be atomic (create, claim,
// finish, sweep) is one script, so that no two instances can interleave
// inside it. Every key a script touches shares the "{calls}" hash tag (see
// redisKeys), so on a Redis Cluster they all live in one slot and a script
// may reach keys it computes, such as the record of an id it popped, and
// publish the outcome channel, which carries the same tag. Outcomes are told
// on per-instance channels (OutcomeChannel + ":" + the store's id): to the
// instance that recorded the call and to those that read it to wait
// (watchArgs), never to every instance.
//
// A script names each of its KEYS and ARGV in a local at its top; the Go
// side names them once, in the fields of the script's args struct below,
// in the same order, and its keys and argv methods are the only places
// that put them in that order. Numbers computed from times go to Redis as
// decimal strings: Lua's own number formatting would lose digits of a unix
// millisecond.

var (
	//go:embed lua/create.lua
	createLua string
	//go:embed lua/put.lua
	putLua string
	//go:embed lua/claim.lua
	claimLua string
	//go:embed lua/finish.lua
	finishLua string
	//go:embed lua/watch.lua
	watchLua string
	//go:embed lua/sweep.lua
	sweepLua string

	createScript = redis.NewScript(createLua)
	putScript    = redis.NewScript(putLua)
	claimScript  = redis.NewScript(claimLua)
	finishScript = redis.NewScript(finishLua)
	watchScript  = redis.NewScript(watchLua)
	sweepScript  = redis.NewScript(sweepLua)
)

// flag is a boolean argument of a script: "1" or "0".
func flag(b bool) string {
	if b {
		return "1"
	}
	return "0"
}

// createArgs are lua/create.lua's (Create, CreateDelivered).
type createArgs struct {
	recordKey, queueKey, dueKey string
	idemKey                     string // the record's key again when the call has no idempotency key

	cid          string
	expireAt     int64  // the record's expiry, unix ms
	dueQueued    int64  // when Sweep acts while the call is queued, unix ms
	recordPrefix string // record key prefix (+ correlation id)
	hasIdem      bool
	dueDelivered int64  // deadline + grace, unix ms; also the queue's expiry
	channel      string // the workspace channel to publish the call on; "" for none
	message      []byte // the call's bus message
	now          int64  // unix ms
	delivered    bool   // CreateDelivered: recorded delivered when the queue is empty
	fields       []any  // the record's field/value pairs
}

func (a *createArgs) run(ctx context.Context, b *batcher) *redis.Cmd {
	argv := make([]any, 0, 10+len(a.fields))
	argv = append(argv, a.cid, a.expireAt, a.dueQueued, a.recordPrefix, flag(a.hasIdem), a.dueDelivered, a.channel, a.message, a.now, flag(a.delivered))
	return b.run(ctx, createScript, []string{a.recordKey, a.queueKey, a.dueKey, a.idemKey}, append(argv, a.fields...)...)
}

// putArgs are lua/put.lua's (Put).
type putArgs struct {
	recordKey, dueKey string

	cid      string
	expireAt int64  // the record's expiry, unix ms
	due      string // when Sweep acts, unix ms; "" for a final call
	fields   []any  // the record's field/value pairs
}

func (a *putArgs) run(ctx context.Context, b *batcher) *redis.Cmd {
	argv := make([]any, 0, 3+len(a.fields))
	argv = append(argv, a.cid, a.expireAt, a.due)
	return b.run(ctx, putScript, []string{a.recordKey, a.dueKey}, append(argv, a.fields...)...)
}

// claimArgs are lua/claim.lua's (Claim).
type claimArgs struct {
	queueKey, dueKey string

	recordPrefix string // record key prefix (+ correlation id)
	now          int64  // unix ms
	max          int
}

func (a *claimArgs) run(ctx context.Context, b *batcher) *redis.Cmd {
	return b.run(ctx, claimScript, []string{a.queueKey, a.dueKey}, a.recordPrefix, a.now, a.max)
}

// finishArgs are lua/finish.lua's (Finish, Withdraw).
type finishArgs struct {
	recordKey, dueKey, watchersKey string

	cid           string
	status        string // the final status
	now           int64  // unix ms
	response      []byte // the response's JSON
	expireAt      int64  // the record's expiry, unix ms
	channelPrefix string // outcome channel prefix (an instance's id completes it)
	withdraw      bool   // end the call only while it is queued
	publish       string // PUBLISH, or SPUBLISH on a Cluster
	instance      string // this instance's id
}

func (a *finishArgs) run(ctx context.Context, b *batcher) *redis.Cmd {
	return b.run(ctx, finishScript, []string{a.recordKey, a.dueKey, a.watchersKey},
		a.cid, a.status, a.now, a.response, a.expireAt, a.channelPrefix, flag(a.withdraw), a.publish, a.instance)
}

// watchArgs are lua/watch.lua's (GetWatched).
type watchArgs struct {
	recordKey, watchersKey string

	instance string // this instance's id
}

func (a *watchArgs) run(ctx context.Context, b *batcher) *redis.Cmd {
	return b.run(ctx, watchScript, []string{a.recordKey, a.watchersKey}, a.instance)
}

// sweepArgs are lua/sweep.lua's (Sweep). The codes and messages it writes
// are sweepFailure's.
type sweepArgs struct {
	dueKey string

	recordPrefix     string // record key prefix (+ correlation id)
	now              int64  // unix ms
	max              int
	expireAt         int64  // an ended record's expiry, unix ms
	channelPrefix    string // outcome channel prefix (an instance's id completes it)
	codeOffline      string // a queued call whose wait ended
	msgOffline       string
	codeTimeout      string // a call whose deadline passed
	msgQueuedTimeout string // ... queued
	msgLostOwner     string // ... delivered
	publish          string // PUBLISH, or SPUBLISH on a Cluster
	watchersPrefix   string // watchers key prefix (+ correlation id)
}

func (a *sweepArgs) run(ctx context.Context, b *batcher) *redis.Cmd {
	return b.run(ctx, sweepScript, []string{a.dueKey},
		a.recordPrefix, a.now, a.max, a.expireAt, a.channelPrefix,
		a.codeOffline, a.msgOffline, a.codeTimeout, a.msgQueuedTimeout, a.msgLostOwner, a.publish, a.watchersPrefix)
}
