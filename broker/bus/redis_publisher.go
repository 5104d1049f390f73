package bus

import "context"

// publisher carries a Redis bus's publishes: a pipe on a single server, a
// clusterPublisher on a cluster. Channels are named without the bus's
// prefix, which the publisher adds (the pipe writes it into the command, so
// a publish builds no prefixed name). The bus checks its own closed state
// and words the errors (Redis.publishError); everything between the command
// and its count is the publisher's.
//
// The retry rule, the same for both: a publish that cannot have run is
// sent again, one that may have run never is. A command still queued when
// its connection fails (not written yet) or that found no connection goes
// out on the next one, and on a cluster go-redis follows a redirection
// (MOVED, ASK: Redis did not run it) within ClusterOptions.MaxRedirects; a
// command written to a connection that then failed, or whose reply did not
// come within the read timeout, is failed with that error, because Redis
// may have delivered it and a resent call could run twice (on a cluster
// the commands say NoRetry to go-redis, see spublish). Closing fails at
// once, with ErrClosed, whatever was not sent yet.
//
// All methods are safe for concurrent use.
type publisher interface {
	// publish sends msg to channel and waits for the receiver count, or
	// until ctx ends: the message may then still go out, and its outcome is
	// dropped. It takes ownership of msg.
	publish(ctx context.Context, channel string, msg []byte) (int, error)
	// publishAsync sends msg to channel and calls done once with the
	// outcome: before it returns (an error found at once) or later on a
	// goroutine of the bus counted by its wait group. It keeps no
	// reference to msg after it returns. Publishes one goroutine makes
	// reach Redis in the order it made them, whichever method it used.
	publishAsync(channel string, msg []byte, done pubDone)
	// close fails every publish that is not answered yet (at least those
	// not sent) and every later one with ErrClosed. The goroutines of the
	// publisher end on their own, within the write and read timeouts; the
	// bus's wait group counts them.
	close()
}

// pubDone receives a publish's outcome: the receiver count Redis reported,
// or the error that ended the command. It must not block.
type pubDone func(receivers int, err error)
