package eio

import (
	"fmt"
	"os"
	"sync"
	"syscall"

	"golang.org/x/sys/unix"
)

// The poller lets an idle WebSocket connection exist without a goroutine: a
// connection whose client has been quiet hands its socket to the poller and
// its reading goroutine ends; when the client sends again, the poller starts
// a new one. Its own wait costs no thread: the epoll instance is itself
// pollable, so Go's netpoller waits on it like on a socket. Hand-written on
// golang.org/x/sys/unix because neither net nor coder/websocket can wait
// for readability without a goroutine parked in a read.
//
// What it earns is memory, not CPU: without it (TETHER_TUNING=no-poller;
// make bench-peers, 2026-12-04, one instance, medians of three rounds'
// ratios) an idle connection held 1.10x the memory and a goroutine of its
// own, while calls per CPU-second (0.98x at c=1, 1.01x at c=64) and p99
// (0.94x, 1.08x) stayed within the rounds' spread.

// poller is one epoll instance watching parked sockets, level-triggered and
// one-shot: a socket is reported once per park, and a socket that became
// readable before it was parked is reported at once.
//
// Concurrency: park and forget may be called from any goroutine; run is
// the poller's one goroutine, which close ends and waits for.
type poller struct {
	file *os.File // the epoll instance
	raw  syscall.RawConn

	mu     sync.Mutex
	socks  map[uint64]*sock // by the id in their epoll registration
	nextID uint64

	done chan struct{}
}

func newPoller() (*poller, error) {
	fd, err := unix.EpollCreate1(unix.EPOLL_CLOEXEC)
	if err != nil {
		return nil, fmt.Errorf("creating epoll instance: %w", err)
	}
	if err := unix.SetNonblock(fd, true); err != nil {
		_ = unix.Close(fd)
		return nil, fmt.Errorf("creating epoll instance: %w", err)
	}
	file := os.NewFile(uintptr(fd), "epoll")
	raw, err := file.SyscallConn()
	if err != nil {
		_ = file.Close()
		return nil, fmt.Errorf("creating epoll instance: %w", err)
	}
	p := &poller{file: file, raw: raw, socks: make(map[uint64]*sock), done: make(chan struct{})}
	go p.run() // ended by close
	return p, nil
}

// park registers s to be woken (sock.wake) when it becomes readable. The
// caller's goroutine must not touch s's read side once park succeeded.
func (p *poller) park(s *sock) error {
	p.mu.Lock()
	if s.pollID == 0 {
		p.nextID++
		s.pollID = p.nextID
		p.socks[s.pollID] = s
	}
	id := s.pollID
	p.mu.Unlock()
	// Set before the registration: once it is made, a new reader may
	// run and park again.
	op := unix.EPOLL_CTL_MOD
	if !s.pollAdded {
		op, s.pollAdded = unix.EPOLL_CTL_ADD, true
	}
	ev := unix.EpollEvent{
		Events: unix.EPOLLIN | unix.EPOLLRDHUP | unix.EPOLLONESHOT,
		Fd:     int32(uint32(id)),
		Pad:    int32(uint32(id >> 32)),
	}
	var cerr error
	err := s.raw.Control(func(fd uintptr) {
		cerr = p.raw.Control(func(epfd uintptr) {
			cerr = unix.EpollCtl(int(epfd), op, int(fd), &ev)
		})
	})
	if err == nil {
		err = cerr
	}
	if err != nil {
		if op == unix.EPOLL_CTL_ADD {
			s.pollAdded = false
		}
		return fmt.Errorf("watching socket: %w", err)
	}
	return nil
}

// forget stops waking s. Its registration ends with its file descriptor;
// an event that comes before finds no socket.
func (p *poller) forget(s *sock) {
	p.mu.Lock()
	if s.pollID != 0 {
		delete(p.socks, s.pollID)
	}
	p.mu.Unlock()
}

func (p *poller) run() {
	defer close(p.done)
	events := make([]unix.EpollEvent, 128)
	var ready []*sock
	for {
		var n int
		var werr error
		err := p.raw.Read(func(epfd uintptr) bool {
			for {
				n, werr = unix.EpollWait(int(epfd), events, 0)
				if werr != unix.EINTR {
					break
				}
			}
			return n > 0 || werr != nil // nothing ready: Go's netpoller waits
		})
		if err != nil || werr != nil {
			return // closed
		}
		p.mu.Lock()
		for _, ev := range events[:n] {
			if s := p.socks[uint64(uint32(ev.Fd))|uint64(uint32(ev.Pad))<<32]; s != nil {
				ready = append(ready, s)
			}
		}
		p.mu.Unlock()
		for i, s := range ready {
			s.wake()
			ready[i] = nil
		}
		ready = ready[:0]
	}
}

// close ends the poller's goroutine and waits for it. Parked sockets are
// not woken any more.
func (p *poller) close() error {
	err := p.file.Close()
	<-p.done
	return err
}
