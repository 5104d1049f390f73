package rawnet

import (
	"context"
	"net"
)

// ListenerForTest is Listener, wrapping in a race build too.
func ListenerForTest(ln net.Listener) net.Listener { return rawListener{Listener: ln, always: true} }

// DialCheckedForTest is DialChecked, wrapping in a race build too.
func DialCheckedForTest(d *net.Dialer) func(ctx context.Context, network, addr string) (net.Conn, error) {
	return dialChecked(d, true)
}
