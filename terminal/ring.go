//go:build !windows

package terminal

import ringpkg "github.com/tetherdev/tether/internal/ring"

// The terminal's rings (async sessions' output, the visible terminal's
// transcript, a sync capture's tail) are internal/ring's, shared with the
// sandbox's exec sessions.
type ring = ringpkg.Ring

func newRing(size int) *ring { return ringpkg.New(size) }
