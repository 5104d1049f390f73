//go:build !windows

package dap

import (
	"context"
	"fmt"
	"strings"
	"syscall"
	"time"

	"github.com/tetherdev/tether/internal/proctree"
	"github.com/tetherdev/tether/protocol"
)

// How a session ends: stop-session (Stop), the adapter's connection
// dropping (watch), or the debuggee terminating (the terminated event).

// Grace periods of Stop: the disconnect request, then the adapter's exit.
const (
	disconnectTimeout = 3 * time.Second
	exitGrace         = 2 * time.Second
)

// Stop disconnects (terminating or detaching the debuggee), then ends the
// adapter's process group after a grace. It is safe to call more than once.
func (s *Session) Stop(ctx context.Context, terminate *bool) *StopResult {
	term := s.request != "attach"
	if terminate != nil {
		term = *terminate
	}
	s.mu.Lock()
	ended := s.state == StateEnded
	pid := s.debuggeePid
	s.stopping = true
	s.mu.Unlock()
	s.stopCancel()
	s.stopOnce.Do(func() {
		if !ended {
			dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), disconnectTimeout)
			if !term {
				s.releaseRemote(dctx)
			}
			_ = s.proc.client.Do(dctx, "disconnect", map[string]any{"restart": false, "terminateDebuggee": term}, nil)
			cancel()
		}
		s.proc.stop(exitGrace)
		s.stopChildren()
		if term && pid > 0 && s.request != "attach" {
			// The debuggee may sit outside the adapter's group; it must not
			// outlive the session.
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
	})
	<-s.watcherDone
	s.end("stopped by stop-session")
	s.mu.Lock()
	defer s.mu.Unlock()
	return &StopResult{SessionID: s.id, State: s.state, ExitCode: s.exitCode}
}

func (s *Session) end(reason string) {
	s.mu.Lock()
	if s.state != StateEnded {
		s.state = StateEnded
		s.endReason = reason
		s.notifyLocked()
	}
	s.mu.Unlock()
	if s.refill != nil {
		s.refill() // the next warm adapter of this kind (warm.go)
	}
}

// watch marks the session ended when the adapter's connection drops.
func (s *Session) watch() {
	defer close(s.watcherDone)
	<-s.proc.client.Done()
	s.mu.Lock()
	ended := s.state == StateEnded
	stopping := s.stopping
	s.mu.Unlock()
	if stopping {
		s.end("stopped by stop-session")
		return
	}
	if !ended {
		select {
		case <-s.proc.exited:
		case <-time.After(time.Second): // stderr may lag the pipe closing
		}
		// The adapter is gone; what it started is not.
		proctree.KillAll(s.proc.tree())
		tail := strings.TrimSpace(s.proc.stderr.String())
		if tail == "" {
			tail = "(no stderr)"
		}
		s.end(fmt.Sprintf("the debug adapter %s exited unexpectedly; its stderr ends with: %s", s.adapter.Name(), lastLines(tail, 20)))
	}
}

func lastLines(s string, n int) string {
	lines := strings.Split(s, "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// endedError is the session_ended answer for this session.
func (s *Session) endedErrorLocked() error {
	msg := s.endedMessageLocked()
	if s.exitCode != nil && *s.exitCode != 0 {
		// A crash says why in its last words.
		if text, _, _ := s.out.read(0); strings.TrimSpace(text) != "" {
			msg += "; its output ends with: " + lastLines(strings.TrimSpace(text), 10)
			if h := nextStep(s.adapter.Name(), text); h != "" {
				msg += "; next step: " + h
			}
		}
	}
	return protocol.Errorf(protocol.CodeSessionEnded, "%s", msg)
}

func (s *Session) endedMessageLocked() string {
	msg := fmt.Sprintf("session %s has ended: %s", s.id, s.endReason)
	if s.exitCode != nil {
		msg += fmt.Sprintf(" (exit code %d)", *s.exitCode)
	}
	return msg
}

func (s *Session) endedError() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.endedErrorLocked()
}
