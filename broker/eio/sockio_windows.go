package eio

import "errors"

// rawSockets: a Windows socket is not read with read(2), so there is no
// sock; every WebSocket goes through net/http's hijacked buffers, as with
// TETHER_TUNING=no-sock on Linux (NewServer).
const rawSockets = false

var (
	errWouldBlock = errors.New("would block")
	errNoRawIO    = errors.New("no raw socket I/O on Windows")
)

// readFD and writeFD are never called on Windows (rawSockets); they fail
// should that change without a Windows form of them.
func readFD(uintptr, []byte) (int, error)  { return 0, errNoRawIO }
func writeFD(uintptr, []byte) (int, error) { return 0, errNoRawIO }
