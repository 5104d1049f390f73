// Package eio is the broker's Engine.IO v4 server side: it serves
// /socket.io/, admits new sessions under the per-address connection limits
// (limit.go), speaks WebSocket (over a sock of its own, sock.go, parked
// without a goroutine while quiet, poller_linux.go) and HTTP long-polling
// with its upgrade (polling.go), keeps every session's heartbeat
// (heartbeat.go), reads Engine.IO packets and writes frames
// (session_read.go, session_write.go). What a session's Socket.IO packets
// mean is not its business: each session hands them to the Handler the
// broker's routing core gives it when the session begins.
//
// Connections reach it already accepted (api's accepting, where TLS will
// wrap the listener); a sock only takes raw descriptors of plain TCP
// connections, so over TLS a WebSocket keeps net/http's buffers and a
// goroutine per idle connection.
package eio

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/coder/websocket"
	"github.com/rs/zerolog"

	"github.com/tetherdev/tether/broker/proxy"
	"github.com/tetherdev/tether/internal/tuning"
)

// Config configures a Server. Zero values are not defaulted here: the
// broker's Config sets them.
type Config struct {
	PingInterval   time.Duration
	PingTimeout    time.Duration
	ConnectTimeout time.Duration // from open to Release (the CONNECT ack)
	WriteTimeout   time.Duration // per write to a client
	MaxPayload     int           // bytes per message
	MaxQueue       int           // frames waiting for a client before Send fails
	// The connection limits per remote address (limit.go).
	ConnRate           float64
	ConnBurst          int
	MaxHandshakesPerIP int
	LimitLoopback      bool
	// TrustedProxies are the reverse proxies whose X-Forwarded-For names
	// the client a session is limited and logged as; none: the peer.
	TrustedProxies proxy.Trust
	Logger         zerolog.Logger
	// OnMalformed counts a session ended for a malformed packet;
	// OnRefused a new session the limits refused, by limit. Both must not
	// block.
	OnMalformed func()
	OnRefused   func(limit string)
}

// Server serves /socket.io/. Create it with NewServer; end it with Drain,
// then Wait, then Close. All methods are safe for concurrent use.
type Server struct {
	cfg    Config
	log    zerolog.Logger
	accept func(*Session) Handler
	limits *connLimiter
	// sock: a WebSocket is read and written through a sock (sock.go),
	// unless TETHER_TUNING turned it off or the platform has none
	// (rawSockets). poller wakes parked socks; nil
	// where there is none, and then every session keeps its reader.
	sock   bool
	poller *poller
	beats  *heartbeats
	polls  sync.Map // Engine.IO sid -> *pollTransport of long-polling sessions

	mu       sync.Mutex
	draining bool           // under mu: no session is tracked any more
	wg       sync.WaitGroup // a count per session until it ended, its readers, writers and closer
}

// NewServer returns a Server; accept gives each new session its Handler,
// or nil to refuse it (the broker is shutting down).
func NewServer(cfg Config, accept func(*Session) Handler) *Server {
	srv := &Server{cfg: cfg, log: cfg.Logger, accept: accept, sock: rawSockets && tuning.On(tuning.Sock)}
	srv.limits = newConnLimiter(&cfg, cfg.Logger, cfg.OnRefused)
	srv.beats = newHeartbeats(cfg.PingInterval, cfg.PingTimeout)
	if srv.sock && tuning.On(tuning.Poller) {
		var err error
		if srv.poller, err = newPoller(); err != nil {
			srv.log.Info().Err(err).Msg("idle connections keep a goroutine each")
		}
	}
	return srv
}

// ServeHTTP upgrades an Engine.IO v4 WebSocket request and serves it until
// it closes, or serves a long-polling request.
func (srv *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	if q.Get("EIO") != "4" {
		writeEIOError(w, http.StatusBadRequest, 5, "Unsupported protocol version")
		return
	}
	if srv.isDraining() {
		writeEIOError(w, http.StatusServiceUnavailable, 4, "Broker shutting down")
		return
	}
	sid := q.Get("sid")
	switch q.Get("transport") {
	case "polling":
		srv.handlePolling(w, r, sid)
		return
	case "websocket":
		if sid != "" {
			srv.upgrade(w, r, sid)
			return
		}
	default:
		writeEIOError(w, http.StatusBadRequest, 0, "Transport unknown")
		return
	}
	client := srv.cfg.TrustedProxies.Client(r)
	hs, ok := srv.admitSession(w, client)
	if !ok {
		return
	}
	hj := &socketHijacker{ResponseWriter: w, writeTimeout: srv.cfg.WriteTimeout, poller: srv.poller}
	var rw http.ResponseWriter = w // the sock off: net/http's hijacked buffers, hj.sock stays nil
	if srv.sock {
		rw = hj
	}
	ws, err := websocket.Accept(rw, r, acceptOptions)
	if err != nil {
		hs.release()
		srv.log.Debug().Err(err).Str("remote", client).Msg("websocket accept failed")
		return
	}
	ws.SetReadLimit(int64(srv.cfg.MaxPayload))
	s := srv.newSession(r, client, hs)
	s.tr = wsTransport{ws: ws, s: hj.sock, plain: hj.plain, timeout: srv.cfg.WriteTimeout}
	if hj.sock != nil {
		hj.sock.resume = s.resume
	}
	if !srv.track(s) {
		hs.release()
		_ = ws.Close(websocket.StatusGoingAway, ReasonShutdown)
		s.cancel()
		return
	}
	// The session gets a goroutine of its own and net/http's returns: its
	// stack grew while serving the upgrade request, and its frames keep
	// the request, its headers and the response alive.
	s.start()
}

var acceptOptions = &websocket.AcceptOptions{
	// Clients authenticate with a token, not cookies, so a foreign origin
	// gains nothing; IDE webviews send odd origins.
	InsecureSkipVerify: true,
	CompressionMode:    websocket.CompressionDisabled,
}

// newSession builds the state of a session from its first request, its
// client's address and the place admitSession gave it; the caller sets
// its transport and tracks it.
func (srv *Server) newSession(r *http.Request, client string, hs *handshake) *Session {
	ctx, cancel := context.WithCancel(context.Background())
	s := &Session{
		srv:    srv,
		id:     newSID(),
		remote: client,
		hs:     hs,
		ctx:    ctx,
		cancel: cancel,
		held:   true,
	}
	if h := r.Header.Get("Authorization"); strings.HasPrefix(h, "Bearer ") {
		s.bearer = strings.TrimPrefix(h, "Bearer ")
	}
	return s
}

// track counts s among the server's sessions and gives it its Handler;
// false when the server drains or the Handler refused it.
func (srv *Server) track(s *Session) bool {
	srv.mu.Lock()
	if srv.draining {
		srv.mu.Unlock()
		return false
	}
	// A session holds a count in wg until its end has closed it and its
	// readers ended, so the goroutines it starts (writers, the closer)
	// are added while the counter is above zero and Wait covers them.
	srv.wg.Add(1)
	srv.mu.Unlock()
	h := srv.accept(s)
	if h == nil {
		srv.wg.Done()
		return false
	}
	if s.h == nil { // an accept that did not Bind: nothing else has s yet
		s.h = h
	}
	return true
}

func (srv *Server) untrack(*Session) { srv.wg.Done() }

func (srv *Server) isDraining() bool {
	srv.mu.Lock()
	defer srv.mu.Unlock()
	return srv.draining
}

// Drain refuses new sessions from now on (HTTP 503); the sessions open go
// on until they are closed.
func (srv *Server) Drain() {
	srv.mu.Lock()
	srv.draining = true
	srv.mu.Unlock()
}

// Wait waits for every session to end: its transport closed and its
// goroutines done. Call it after Drain, once the sessions were closed.
func (srv *Server) Wait() { srv.wg.Wait() }

// Close stops the heartbeat scheduler and the poller. Call it after Wait.
func (srv *Server) Close() {
	srv.beats.stop()
	if srv.poller != nil {
		_ = srv.poller.close()
	}
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
