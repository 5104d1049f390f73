//go:build !windows

package bridge

import (
	"context"
	"sync"
)

// lazy holds one value the bridge opens on first use and closes once when
// Run ends: the terminal Manager, the dap Manager and the sandbox Service.
// Opening on first use means a bridge that never debugs probes no adapter,
// one that never runs a command starts no shell, one that serves no sandbox
// call takes no lock on the sandbox directory.
//
// The rules:
//   - get opens the value on the first call and returns it to every later
//     one. Callers that arrive while an open runs wait for it (or for their
//     ctx) and share its outcome, value or error: concurrent first uses open
//     once.
//   - A failed open is not kept: the next get, after the callers of that
//     attempt were answered, tries again, as the hand-written holders this
//     replaces did (a sandbox directory locked by another process can be
//     free a minute later).
//   - close closes the value once, if it was opened, and waits for an open
//     that is running so the value it makes is closed too; close returns
//     once nothing the holder opened is left open. After close, get answers
//     closedErr. Calling close again, or on a nil holder (a route group not
//     mounted), does nothing.
//
// All methods are safe for concurrent use. No lock is held while open or
// shut runs.
type lazy[T any] struct {
	open      func() (T, error)
	shut      func(T)
	closedErr error

	mu      sync.Mutex
	v       T
	ok      bool            // v holds an open value
	attempt *lazyAttempt[T] // the open running now, nil when none
	closed  bool
}

// lazyAttempt is one run of open; done is closed when v and err are set.
type lazyAttempt[T any] struct {
	done chan struct{}
	v    T
	err  error
}

func newLazy[T any](open func() (T, error), shut func(T), closedErr error) *lazy[T] {
	return &lazy[T]{open: open, shut: shut, closedErr: closedErr}
}

// get returns the value, opening it if this is the first use. It returns
// ctx's error if ctx ends while another caller's open runs.
func (l *lazy[T]) get(ctx context.Context) (T, error) {
	var zero T
	l.mu.Lock()
	switch {
	case l.closed:
		l.mu.Unlock()
		return zero, l.closedErr
	case l.ok:
		v := l.v
		l.mu.Unlock()
		return v, nil
	case l.attempt != nil:
		a := l.attempt
		l.mu.Unlock()
		select {
		case <-a.done:
			return a.v, a.err
		case <-ctx.Done():
			return zero, ctx.Err()
		}
	}
	a := &lazyAttempt[T]{done: make(chan struct{})}
	l.attempt = a
	l.mu.Unlock()

	a.v, a.err = l.open()

	l.mu.Lock()
	l.attempt = nil
	if a.err == nil {
		// Kept even when close came meanwhile: close waits for done and
		// then shuts it.
		l.v, l.ok = a.v, true
		if l.closed {
			a.v, a.err = zero, l.closedErr
		}
	}
	close(a.done)
	l.mu.Unlock()
	return a.v, a.err
}

// close closes the value if it was opened; see the type's rules.
func (l *lazy[T]) close() {
	if l == nil {
		return
	}
	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		return
	}
	l.closed = true
	a := l.attempt
	l.mu.Unlock()
	if a != nil {
		<-a.done
	}
	l.mu.Lock()
	v, ok := l.v, l.ok
	var zero T
	l.v, l.ok = zero, false
	l.mu.Unlock()
	if ok {
		l.shut(v)
	}
}

// handleLazy mounts fn at path with the value h holds, opened on first
// use: a failed open answers the call with the open's error.
func handleLazy[T, Req, Resp any](r *Router, h *lazy[T], path string, fn func(ctx context.Context, v T, c *Call, req Req) (Resp, error)) {
	Handle(r, path, withLazy(h, fn))
}

// withLazy adapts fn, which serves a call with the value h holds, to a
// HandlerFunc.
func withLazy[T, Req, Resp any](h *lazy[T], fn func(ctx context.Context, v T, c *Call, req Req) (Resp, error)) HandlerFunc[Req, Resp] {
	return func(ctx context.Context, c *Call, req Req) (Resp, error) {
		v, err := h.get(ctx)
		if err != nil {
			var zero Resp
			return zero, err
		}
		return fn(ctx, v, c, req)
	}
}
