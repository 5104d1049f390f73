//go:build unix

package main

import (
	"io"
	"os"
	"sync"
	"syscall"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
	"golang.org/x/sys/unix"
)

// stdioTransport is the MCP transport of tether mcp: stdin and stdout. When
// they are pipes (as an MCP client starts its servers) they are read and
// written through Go's network poller, non-blocking, rather than with
// blocking system calls: each blocking read or write that returns wakes the
// runtime's monitor thread (sysmon), which then polls every 20 µs for a
// millisecond, and a relay that answers a tool call every millisecond or so
// paid that for every call (perf of tether mcp under BenchmarkMCPToolCall:
// sysmon's sleeps were a quarter of its CPU; the stdio way's p50 over the
// HTTP way's, same runs, alternating builds on a noisy 2-core machine:
// 0.11–0.18 ms with this, 0.15–0.32 ms without). restore puts each pipe
// found blocking back to blocking, for whoever shares it after us; pipes
// already non-blocking are the poller's from the start. Anything else (a
// terminal, a file) is used as it is, through sdk.StdioTransport.
func stdioTransport() (t sdk.Transport, restore func()) {
	// Not os.Stdin.Fd(): Fd puts a descriptor the poller has back to
	// blocking mode.
	in, out := syscall.Stdin, syscall.Stdout
	if !isPipe(in) || !isPipe(out) {
		return &sdk.StdioTransport{}, func() {}
	}
	inWas, err1 := isNonblock(in)
	outWas, err2 := isNonblock(out)
	switch {
	case err1 != nil || err2 != nil:
		return &sdk.StdioTransport{}, func() {}
	case inWas && outWas:
		// Non-blocking from the start: os.Stdin and os.Stdout went to the
		// poller when the process began; nothing to change.
		return &sdk.StdioTransport{}, func() {}
	}
	var r io.ReadCloser = os.Stdin
	var w io.Writer = os.Stdout
	var rr *restoringReader
	if !inWas {
		if syscall.SetNonblock(in, true) != nil {
			return &sdk.StdioTransport{}, func() {}
		}
		// os.NewFile of a non-blocking descriptor registers it with the
		// poller. The session closes its reader, and so stdin, when it
		// ends: the mode goes back first (after the close, descriptor 0
		// may be another file).
		rr = &restoringReader{File: os.NewFile(uintptr(in), "stdin"), fd: in}
		r = rr
	}
	if !outWas {
		if syscall.SetNonblock(out, true) != nil {
			if rr != nil {
				rr.restore()
			}
			return &sdk.StdioTransport{}, func() {}
		}
		w = os.NewFile(uintptr(out), "stdout")
	}
	return &sdk.IOTransport{Reader: r, Writer: nopWriteCloser{w}}, func() {
		if rr != nil {
			rr.restore()
		}
		if !outWas {
			_ = syscall.SetNonblock(out, false)
		}
	}
}

// restoringReader is stdin, found blocking, read through the poller;
// restore puts it back to blocking, once, and Close does so before it
// closes.
type restoringReader struct {
	*os.File
	fd   int
	once sync.Once
}

func (r *restoringReader) restore() {
	r.once.Do(func() { _ = syscall.SetNonblock(r.fd, false) })
}

func (r *restoringReader) Close() error {
	r.restore()
	return r.File.Close()
}

// isNonblock reports whether fd is in non-blocking mode.
func isNonblock(fd int) (bool, error) {
	flags, err := unix.FcntlInt(uintptr(fd), unix.F_GETFL, 0)
	return flags&unix.O_NONBLOCK != 0, err
}

// isPipe reports whether fd is a pipe (or FIFO).
func isPipe(fd int) bool {
	var st syscall.Stat_t
	return syscall.Fstat(fd, &st) == nil && st.Mode&syscall.S_IFMT == syscall.S_IFIFO
}

// nopWriteCloser keeps stdout open when the session closes its writer, as
// sdk.StdioTransport does.
type nopWriteCloser struct{ io.Writer }

func (nopWriteCloser) Close() error { return nil }
