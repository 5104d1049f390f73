package broker

import (
	"time"

	"github.com/tetherdev/tether/protocol"
)

// The Engine.IO v4 heartbeat: the server pings every pingInterval and closes
// a connection whose pong does not come within pingTimeout. One timer per
// connection, no goroutine.

// startHeartbeat arms the first ping, pingInterval from now.
func (c *conn) startHeartbeat() {
	c.mu.Lock()
	c.hbTimer = time.AfterFunc(c.b.cfg.PingInterval, c.heartbeat)
	c.mu.Unlock()
}

// heartbeat fires every pingInterval to send a ping and, while a ping is
// unanswered, after pingTimeout to end the connection.
func (c *conn) heartbeat() {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return
	}
	late := c.awaitingPong
	c.awaitingPong = true
	if !late {
		c.hbTimer.Reset(c.b.cfg.PingTimeout)
	}
	c.mu.Unlock()
	if late {
		c.event(c.b.log.Info()).Msg("no pong within ping timeout")
		c.close(ReasonPingTimeout, true)
		return
	}
	if err := c.writeNow([]byte{byte(protocol.EIOPing)}); err != nil {
		c.close(ReasonTransport, false)
	}
}

func (c *conn) pong() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed || !c.awaitingPong {
		return
	}
	c.awaitingPong = false
	c.hbTimer.Reset(c.b.cfg.PingInterval)
}
