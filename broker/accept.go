package broker

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"net/http"
	"strings"

	"github.com/coder/websocket"
)

// A client's first request: the Engine.IO handshake over WebSocket (HTTP
// long-polling is in polling.go) and the state of the new connection.

// handleSocket upgrades an Engine.IO v4 WebSocket request and serves it until
// it closes.
func (b *Broker) handleSocket(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	if q.Get("EIO") != "4" {
		writeEIOError(w, http.StatusBadRequest, 5, "Unsupported protocol version")
		return
	}
	if b.isDraining() {
		writeEIOError(w, http.StatusServiceUnavailable, 4, "Broker shutting down")
		return
	}
	sid := q.Get("sid")
	switch q.Get("transport") {
	case "polling":
		b.handlePolling(w, r, sid)
		return
	case "websocket":
		if sid != "" {
			b.upgrade(w, r, sid)
			return
		}
	default:
		writeEIOError(w, http.StatusBadRequest, 0, "Transport unknown")
		return
	}
	hs, ok := b.admitSession(w, r)
	if !ok {
		return
	}
	hj := &socketHijacker{ResponseWriter: w, writeTimeout: b.cfg.WriteTimeout, poller: b.poller}
	ws, err := websocket.Accept(hj, r, acceptOptions)
	if err != nil {
		hs.release()
		b.log.Debug().Err(err).Str("remote", r.RemoteAddr).Msg("websocket accept failed")
		return
	}
	ws.SetReadLimit(int64(b.cfg.MaxPayload))
	c := b.newConn(r, hs)
	c.tr = wsTransport{ws: ws, s: hj.sock, timeout: b.cfg.WriteTimeout}
	if hj.sock != nil {
		hj.sock.resume = c.resume
	}
	if !b.track(c) {
		hs.release()
		_ = ws.Close(websocket.StatusGoingAway, ReasonShutdown)
		c.cancel()
		return
	}
	// The connection gets a goroutine of its own and net/http's returns:
	// its stack grew while serving the upgrade request, and its frames
	// keep the request, its headers and the response alive.
	c.start()
}

var acceptOptions = &websocket.AcceptOptions{
	// Clients authenticate with a token, not cookies, so a foreign origin
	// gains nothing; IDE webviews send odd origins.
	InsecureSkipVerify: true,
	CompressionMode:    websocket.CompressionDisabled,
}

// newConn builds the state of a client connection from its first request
// and the place admitSession gave it; the caller sets its transport.
func (b *Broker) newConn(r *http.Request, hs *handshake) *conn {
	ctx, cancel := context.WithCancel(context.Background())
	c := &conn{
		b:             b,
		id:            newSID(),
		remote:        r.RemoteAddr,
		hs:            hs,
		ctx:           ctx,
		cancel:        cancel,
		connectAckDue: true,
	}
	c.calls = newCallTable(&c.mu, c, &b.log, b.metrics.inFlight, b.metrics.duplicates)
	if h := r.Header.Get("Authorization"); strings.HasPrefix(h, "Bearer ") {
		c.bearer = strings.TrimPrefix(h, "Bearer ")
	}
	return c
}

func newSID() string {
	var b [15]byte
	_, _ = rand.Read(b[:])
	return base64.RawURLEncoding.EncodeToString(b[:])
}

func writeEIOError(w http.ResponseWriter, status, code int, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(map[string]any{"code": code, "message": msg})
}
