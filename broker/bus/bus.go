// Package bus carries messages between broker instances and callers: calls to
// the instance that holds a workspace's socket, replies to a caller's inbox,
// and control messages (takeover, online announcements).
//
// A Bus is plain channel pub/sub that reports how many subscribers a publish
// reached; tether builds routing on that count (0 receivers on a workspace
// channel means nobody serves the workspace). Channel names are chosen by the
// user of the bus; implementations add their own prefix.
package bus

import (
	"context"
	"errors"
)

// Handler receives one message. It is called from the bus's receiving
// goroutine (or, for the in-memory bus, the publisher's): it must not block.
// msg is owned by the handler. Handlers of one subscription may run
// concurrently for messages from different publishers; messages from one
// publisher goroutine to one channel are delivered in publish order. A
// handler that blocks delays the later messages of its subscription (on
// Redis also, by about 200 µs, those of other channels). A handler may
// Subscribe and Unsubscribe.
type Handler func(msg []byte)

// Bus is a pub/sub transport. All methods are safe for concurrent use.
type Bus interface {
	// Publish sends msg to every current subscriber of channel and returns
	// how many received it. A message published with no subscriber is lost.
	// Publish takes ownership of msg: the caller must not touch it after.
	Publish(ctx context.Context, channel string, msg []byte) (receivers int, err error)
	// PublishAsync sends msg to channel as Publish does without waiting for
	// the receiver count: it calls done exactly once with the outcome,
	// possibly before it returns, otherwise from a goroutine of the bus.
	// done must not block. PublishAsync keeps no reference to msg after it
	// returns.
	PublishAsync(channel string, msg []byte, done func(receivers int, err error))
	// Subscribe calls h for every message published to channel from the
	// moment Subscribe returns until the subscription is cancelled.
	Subscribe(ctx context.Context, channel string, h Handler) (Subscription, error)
	// Close ends every subscription; later calls return ErrClosed.
	Close() error
}

// Subscription is one Subscribe registration.
type Subscription interface {
	// Unsubscribe stops delivery. A message that reached the subscription
	// before it ended is still handled (on Redis: every message Redis
	// delivered before confirming the end, all of which its publishers
	// counted), so a call of h may start after Unsubscribe returns; no
	// message published after it returns is delivered. It may be called
	// from within h, and is idempotent.
	Unsubscribe(ctx context.Context) error
}

// Checker is implemented by buses that can lose their connection (Redis):
// Ready returns nil only while every subscription is known to be live.
type Checker interface {
	Ready(ctx context.Context) error
}

// InProcess is implemented by a bus whose subscribers all live in this
// process and whose Publish runs their handlers before it returns (the
// in-memory bus). A broker on such a bus serves its own API's calls without
// the bus (the holder, if any, is in the same process) and publishes replies
// inline. A bus that does not implement it, or answers false, gets the
// general path: every call and reply goes through Publish and Subscribe.
type InProcess interface {
	InProcess() bool
}

// ErrClosed is returned by a Bus used after Close.
var ErrClosed = errors.New("bus closed")
