//go:build !windows

package bridge

import (
	"context"
	"net/http"
	"sync"
	"time"

	"github.com/coder/websocket"
	"golang.org/x/sys/unix"

	"github.com/tetherdev/tether/audit"
	"github.com/tetherdev/tether/protocol"
	"github.com/tetherdev/tether/terminal"
)

// AttachPath is where the local HTTP listener serves the visible terminal
// to `tether attach`: a WebSocket (GET, loopback clients only) carrying
// the terminal's recent transcript and then its live output as binary
// messages. With ?write=1, binary messages the client sends are typed
// into the terminal; otherwise the client may send nothing.
const AttachPath = "/attach"

// SessionsResult answers /api/terminal/sessions: the async sessions,
// running and recently ended, oldest first.
type SessionsResult struct {
	Sessions []terminal.SessionInfo `json:"sessions"`
}

func mountTerminal(r *Router, b *Bridge) {
	cfg := b.cfg.Terminal
	cfg.Root, cfg.Logger = b.root, b.log
	// Made on first use, so a bridge that never runs a command starts no
	// shell and makes no files; closing it kills every process the
	// terminal started and waits for them.
	h := newLazy(func() (*terminal.Manager, error) { return terminal.New(cfg) }, func(m *terminal.Manager) {
		if err := m.Close(); err != nil {
			cfg.Logger.Warn().Err(err).Msg("closing the terminal")
		}
	}, terminal.ErrClosed)
	b.term = h

	handleLazy(r, h, protocol.TerminalExecuteEndpoint, func(ctx context.Context, m *terminal.Manager, c *Call, req terminal.ExecRequest) (terminal.ExecResult, error) {
		// The deadline of ctx bounds a sync command without a timeout of
		// its own; Execute answers timed_out before it expires.
		c.Audit(audit.WithCommand(req.Command))
		return m.Execute(c.Logger().WithContext(ctx), req)
	})
	handleLazy(r, h, protocol.TerminalSessionsEndpoint+"/:session_id/"+protocol.SessionOutputOp, func(_ context.Context, m *terminal.Manager, c *Call, req terminal.OutputRequest) (terminal.OutputResult, error) {
		return m.Output(c.Param("session_id"), req.Offset)
	})
	handleLazy(r, h, protocol.TerminalSessionsEndpoint+"/:session_id/"+protocol.SessionInputOp, func(ctx context.Context, m *terminal.Manager, c *Call, req terminal.InputRequest) (protocol.InputResult, error) {
		id := c.Param("session_id")
		if err := m.Input(ctx, id, req.Data, req.EOF); err != nil {
			return protocol.InputResult{}, err
		}
		return protocol.InputResult{SessionID: id, Bytes: len(req.Data), EOF: req.EOF}, nil
	})
	handleLazy(r, h, protocol.TerminalSessionsEndpoint+"/:session_id/"+protocol.SessionSignalOp, func(_ context.Context, m *terminal.Manager, c *Call, req terminal.SignalRequest) (protocol.SignalResult, error) {
		sig, err := terminal.ParseSignal(req.Signal)
		if err != nil {
			return protocol.SignalResult{}, err
		}
		id := c.Param("session_id")
		if err := m.Signal(id, req.Signal); err != nil {
			return protocol.SignalResult{}, err
		}
		return protocol.SignalResult{SessionID: id, Signal: unix.SignalName(sig)}, nil
	})
	handleLazy(r, h, protocol.TerminalSessionsEndpoint, func(_ context.Context, m *terminal.Manager, _ *Call, _ struct{}) (SessionsResult, error) {
		return SessionsResult{Sessions: m.Sessions()}, nil
	})
}

// attachWriteTimeout bounds sending one chunk to an attached viewer; a
// viewer that does not read for that long is disconnected.
const attachWriteTimeout = 10 * time.Second

// serveAttach streams the visible terminal to a local viewer. serveHTTP
// has checked that the request is local (notLocal), as for every request
// on the listener, and websocket.Accept refuses cross-origin pages too.
func (b *Bridge) serveAttach(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet {
		http.Error(w, "attach is a GET WebSocket upgrade", http.StatusMethodNotAllowed)
		return
	}
	// The visible terminal is refused with the terminal routes (typing
	// into it runs commands).
	if err := b.router.policy.refusal(protocol.TerminalExecuteEndpoint); err != nil {
		http.Error(w, "attach follows the terminal routes: "+err.Error(), http.StatusForbidden)
		return
	}
	m, err := b.term.get(r.Context())
	if err != nil {
		http.Error(w, "the terminal is not available: "+err.Error(), http.StatusServiceUnavailable)
		return
	}
	write := r.URL.Query().Get("write") == "1"
	conn, err := websocket.Accept(w, r, nil)
	if err != nil {
		return // Accept has answered the client
	}
	defer conn.CloseNow()
	log := b.log.With().Str("remote", r.RemoteAddr).Bool("write", write).Logger()
	log.Info().Msg("attach started")

	var wg sync.WaitGroup
	defer wg.Wait()
	ctx, cancel := context.WithCancel(r.Context())
	defer cancel()
	if write {
		wg.Add(1)
		go func(ctx context.Context) {
			defer wg.Done()
			defer cancel()
			for {
				_, p, err := conn.Read(ctx)
				if err != nil {
					return
				}
				if err := m.WriteTerminal(ctx, p); err != nil {
					log.Warn().Err(err).Msg("typing into the visible terminal failed")
					return
				}
			}
		}(ctx)
	} else {
		// Read-only: control frames are handled, a data message closes it.
		ctx = conn.CloseRead(ctx)
	}

	snapshot, live := m.Attach(ctx)
	send := func(p []byte) bool {
		wctx, wcancel := context.WithTimeout(ctx, attachWriteTimeout)
		defer wcancel()
		return conn.Write(wctx, websocket.MessageBinary, p) == nil
	}
	ok := len(snapshot) == 0 || send(snapshot)
	if !ok {
		cancel() // ends live
	}
	for p := range live {
		if ok && !send(p) {
			ok = false
			cancel()
		}
	}
	if ok && ctx.Err() == nil {
		// The stream ended with the viewer still there.
		_ = conn.Close(websocket.StatusGoingAway, "the terminal stream ended (the viewer fell behind, or the bridge is stopping); attach again")
	}
	log.Info().Msg("attach ended")
}
