//go:build race

package rawnet

// raceEnabled leaves connections as net makes them in a race build: net's
// own reads and writes tell the race detector that what one goroutine
// writes to a socket another may read (internal/poll's ioSync), which the
// detector cannot see through the kernel, and a Conn's system calls would
// not. The package's tests wrap connections themselves (wrapTCP).
const raceEnabled = true
