package caller

import "github.com/tetherdev/tether/protocol"

// A Waiter takes the one answer of a call made in this process (the HTTP
// API, MCP, a submit that waits) and delivered to a connection of this
// broker without the bus: a channel a goroutine waiting for the answer
// reads (ChanWaiter), or the API's own HTTP connection, which writes the
// answer to its client on the goroutine that ends the call. Answer is
// called once per call and must not block.
type Waiter interface {
	Answer(resp protocol.ToolResponse)
}

// ChanWaiter is a Waiter read by a goroutine waiting for the answer; make
// it with a buffer of 1, so Answer never blocks.
type ChanWaiter chan protocol.ToolResponse

// Answer implements Waiter.
func (w ChanWaiter) Answer(resp protocol.ToolResponse) { w <- resp }
