//go:build !windows

package dap

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"sync"
	"time"
)

// Child sessions, for adapters that run the debuggee in a session of its
// own (js-debug): after the launch, the adapter sends the startDebugging
// reverse request with the child's configuration. The session answers it,
// opens a second connection to the adapter, initializes it, launches or
// attaches with that configuration, sends the breakpoints and exception
// filters asked so far again, and from then on sends the debuggee's
// requests (stack, variables, steps…) to the child; its events drive the
// session as the parent's do. One child is followed: the first (js-debug
// starts one per process; a program's own child processes are not
// followed). Stop disconnects the parent, which ends the children, and
// closes their connections.

// childStartWait bounds starting a child session.
const childStartWait = 15 * time.Second

type childSession struct {
	conn   net.Conn
	client *Client
}

// onRequest answers the adapter's reverse requests (on the client's read
// goroutine): startDebugging when the adapter runs child sessions.
func (s *Session) onRequest(m *Message) error {
	if m.Command != "startDebugging" || !s.childSessions {
		return fmt.Errorf("tether does not support the reverse request %s", m.Command)
	}
	var args struct {
		Request       string         `json:"request"`
		Configuration map[string]any `json:"configuration"`
	}
	if err := json.Unmarshal(m.Arguments, &args); err != nil || args.Configuration == nil {
		return fmt.Errorf("startDebugging without a configuration")
	}
	if args.Request != "attach" {
		args.Request = "launch"
	}
	s.mu.Lock()
	following := s.child != nil || s.stopping
	if !following {
		s.childWG.Add(1)
	}
	s.mu.Unlock()
	if following {
		return nil // a further target: acknowledged, not followed
	}
	go func() {
		defer s.childWG.Done()
		ctx, cancel := context.WithTimeout(startSpanContext(context.Background(), s.startSpan), childStartWait)
		defer cancel()
		stop := context.AfterFunc(s.stopCtx, cancel)
		defer stop()
		if err := s.startChild(ctx, args.Request, args.Configuration); err != nil {
			s.out.write(fmt.Sprintf("tether: the child session did not start: %v\n", err))
		}
	}()
	return nil
}

func (s *Session) startChild(ctx context.Context, request string, cfg map[string]any) error {
	if s.proc.addr == "" {
		return errors.New("the adapter has no address to connect a child session to")
	}
	var d net.Dialer
	conn, err := d.DialContext(ctx, "tcp", s.proc.addr)
	if err != nil {
		return fmt.Errorf("connecting to %s: %w", s.proc.addr, err)
	}
	initialized := make(chan struct{})
	var once sync.Once
	c := newClient(conn, conn, handlers{event: func(m *Message) {
		if m.Event == "initialized" {
			once.Do(func() { close(initialized) })
			return
		}
		s.onEvent(m)
	}, request: s.onRequest, adapter: s.adapter.Name()})
	child := &childSession{conn: conn, client: c}
	s.mu.Lock()
	if s.stopping {
		s.mu.Unlock()
		_ = conn.Close()
		return errors.New("the session is stopping")
	}
	s.child = child
	files, funcs, filters := s.askedFiles, s.askedFuncs, s.askedFilters
	s.mu.Unlock()

	if err := c.Do(ctx, "initialize", initializeArgs(s.adapter, true), nil); err != nil {
		return err
	}
	resp, err := c.Send(ctx, request, cfg)
	if err != nil {
		return err
	}
	select {
	case <-initialized:
	case <-ctx.Done():
		return fmt.Errorf("waiting for the child's initialized: %w", ctx.Err())
	}
	for path, bps := range files {
		if _, err := s.setFileBreakpoints(ctx, c, path, bps); err != nil {
			return err
		}
	}
	if len(funcs) > 0 {
		if _, err := s.setFunctionBreakpoints(ctx, c, funcs); err != nil {
			return err
		}
	}
	if filters != nil {
		if err := s.setExceptionFilters(ctx, c, filters); err != nil {
			return err
		}
	}
	if err := c.Do(ctx, "configurationDone", nil, nil); err != nil {
		return err
	}
	return c.Await(ctx, request, resp, nil)
}

// stopChildren closes the child connections and waits for a child still
// starting. The parent's disconnect has ended the children already.
func (s *Session) stopChildren() {
	s.mu.Lock()
	child := s.child
	s.mu.Unlock()
	if child != nil {
		_ = child.conn.Close()
		<-child.client.Done()
	}
	s.childWG.Wait()
}
