package rawnet

import "net"

// ListenerForTest is Listener, wrapping in a race build too.
func ListenerForTest(ln net.Listener) net.Listener { return rawListener{Listener: ln, always: true} }
