package eio

import (
	"bytes"
	"context"
	"encoding/base64"
	"errors"
	"io"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/coder/websocket"

	"github.com/tetherdev/tether/protocol"
)

// Engine.IO v4 HTTP long-polling, so that clients with default options
// (socket.io-client, python-socketio: polling first, then upgrade) connect
// unchanged. A session starts with a GET without sid; GETs then wait for
// packets from the broker, POSTs carry the client's packets. A WebSocket with
// the session's sid upgrades it: "2probe" -> "3probe", a noop releases the
// waiting GET, the client's "5" switches every later packet to the socket.

var errTransportClosed = errors.New("transport closed")

// maxPollQueue bounds the packets waiting for a GET; a client that stops
// polling is dropped by the ping timeout long before.
const maxPollQueue = 4096

// upgradeTimeout bounds the probe exchange of an upgrade.
const upgradeTimeout = 10 * time.Second

type inbound struct {
	binary bool
	data   []byte
}

// pollTransport is a long-polling session, possibly upgraded to a WebSocket.
type pollTransport struct {
	srv *Server
	s   *Session
	sid string
	in  chan inbound // the client's packets, from POSTs

	// wmu orders writes across the switch to the WebSocket: the packets
	// still queued for a GET go out on the socket before any later one.
	wmu sync.Mutex

	mu      sync.Mutex
	out     [][]byte
	wake    chan struct{} // closed when out grows or the session closes
	polling bool          // a GET is waiting
	closed  bool
	ws      *websocket.Conn // set by the upgrade

	done     chan struct{}
	upgraded chan struct{}
	isWS     atomic.Bool
}

func newPollTransport(srv *Server, sid string) *pollTransport {
	return &pollTransport{
		srv:      srv,
		sid:      sid,
		in:       make(chan inbound, 64),
		wake:     make(chan struct{}),
		done:     make(chan struct{}),
		upgraded: make(chan struct{}),
	}
}

func (t *pollTransport) read(ctx context.Context) (bool, []byte, error) {
	if !t.isWS.Load() {
		select {
		case p := <-t.in:
			return p.binary, p.data, nil
		case <-t.done:
			return false, nil, errTransportClosed
		case <-ctx.Done():
			return false, nil, ctx.Err()
		case <-t.upgraded:
		}
	}
	select { // a POST that raced the upgrade still counts, in order
	case p := <-t.in:
		return p.binary, p.data, nil
	default:
	}
	typ, data, err := t.ws.Read(ctx)
	return typ == websocket.MessageBinary, data, err
}

func (t *pollTransport) write(frames ...[]byte) error {
	t.wmu.Lock()
	defer t.wmu.Unlock()
	if t.isWS.Load() {
		ctx, cancel := context.WithTimeout(context.Background(), t.srv.cfg.WriteTimeout)
		defer cancel()
		for _, f := range frames {
			if err := t.ws.Write(ctx, websocket.MessageText, f); err != nil {
				return err
			}
		}
		return nil
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.closed {
		return errTransportClosed
	}
	if len(t.out)+len(frames) > maxPollQueue {
		return errors.New("client does not poll")
	}
	t.out = append(t.out, frames...)
	t.signalLocked()
	return nil
}

func (t *pollTransport) signalLocked() {
	close(t.wake)
	t.wake = make(chan struct{})
}

func (t *pollTransport) close(status websocket.StatusCode, reason string) error {
	ws := t.shut()
	if ws != nil {
		return ws.Close(status, reason)
	}
	return nil
}

func (t *pollTransport) closeNow() error {
	if ws := t.shut(); ws != nil {
		return ws.CloseNow()
	}
	return nil
}

// shut marks the session closed (a waiting GET returns what is queued and a
// close packet) and forgets its sid.
func (t *pollTransport) shut() *websocket.Conn {
	t.mu.Lock()
	if !t.closed {
		t.closed = true
		close(t.done)
		t.signalLocked()
	}
	ws := t.ws
	t.mu.Unlock()
	t.srv.polls.Delete(t.sid)
	return ws
}

// handlePolling serves the polling transport: handshake, GET and POST.
func (srv *Server) handlePolling(w http.ResponseWriter, r *http.Request, sid string) {
	if sid == "" {
		if r.Method != http.MethodGet {
			writeEIOError(w, http.StatusBadRequest, 2, "Bad handshake method")
			return
		}
		srv.pollHandshake(w, r)
		return
	}
	v, ok := srv.polls.Load(sid)
	if !ok {
		writeEIOError(w, http.StatusBadRequest, 1, "Session ID unknown")
		return
	}
	t := v.(*pollTransport)
	switch r.Method {
	case http.MethodGet:
		t.serveGET(w, r)
	case http.MethodPost:
		t.servePOST(w, r)
	default:
		writeEIOError(w, http.StatusBadRequest, 2, "Bad request method")
	}
}

func (srv *Server) pollHandshake(w http.ResponseWriter, r *http.Request) {
	client := srv.cfg.TrustedProxies.Client(r)
	hs, ok := srv.admitSession(w, client)
	if !ok {
		return
	}
	s := srv.newSession(r, client, hs)
	t := newPollTransport(srv, s.id)
	t.s = s
	s.tr = t
	if !srv.track(s) {
		hs.release()
		writeEIOError(w, http.StatusServiceUnavailable, 4, "Broker shutting down")
		s.cancel()
		return
	}
	srv.polls.Store(s.id, t)
	s.start()
	t.serveGET(w, r) // the open packet
}

// serveGET waits for packets for the client and returns them all.
func (t *pollTransport) serveGET(w http.ResponseWriter, r *http.Request) {
	t.mu.Lock()
	if t.polling || t.ws != nil {
		t.mu.Unlock()
		// Two GETs at once break the protocol's ordering: end the session.
		writeEIOError(w, http.StatusBadRequest, 3, "Bad request: overlapping GET or upgraded session")
		t.s.Close(ReasonMalformed, false)
		return
	}
	t.polling = true
	// A GET still waiting when the session upgrades gets a noop: from
	// then on everything goes on the WebSocket, and a GET left waiting
	// would hang until the client gave up on it.
	for len(t.out) == 0 && !t.closed && t.ws == nil {
		wake := t.wake
		t.mu.Unlock()
		select {
		case <-wake:
		case <-r.Context().Done():
			t.mu.Lock()
			t.polling = false
			t.mu.Unlock()
			return
		}
		t.mu.Lock()
	}
	frames, closed, upgraded := t.out, t.closed, t.ws != nil
	t.out = nil
	t.polling = false
	t.mu.Unlock()
	switch {
	case closed:
		frames = append(frames, []byte{byte(protocol.EIOClose)})
	case upgraded && len(frames) == 0:
		frames = [][]byte{{byte(protocol.EIONoop)}}
	}
	body := bytes.Join(frames, []byte{protocol.PayloadSeparator})
	w.Header().Set("Content-Type", "text/plain; charset=UTF-8")
	w.Header().Set("Cache-Control", "no-store")
	_, _ = w.Write(body)
}

// servePOST hands the client's packets to the read loop.
func (t *pollTransport) servePOST(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(io.LimitReader(r.Body, int64(t.srv.cfg.MaxPayload)+1))
	if err != nil {
		writeEIOError(w, http.StatusBadRequest, 3, "Bad request")
		return
	}
	if len(body) > t.srv.cfg.MaxPayload {
		writeEIOError(w, http.StatusRequestEntityTooLarge, 3, "payload over maxPayload")
		t.s.Close(ReasonTooLarge, false)
		return
	}
	packets, err := splitPollPayload(body)
	if err != nil {
		writeEIOError(w, http.StatusBadRequest, 3, "Bad request: "+err.Error())
		t.s.Close(ReasonMalformed, false)
		return
	}
	for _, in := range packets {
		select {
		case t.in <- in:
		case <-t.done:
			writeEIOError(w, http.StatusBadRequest, 1, "Session closed")
			return
		case <-r.Context().Done():
			return
		}
	}
	w.Header().Set("Content-Type", "text/html")
	_, _ = w.Write([]byte("ok"))
}

// splitPollPayload splits the body of a polling POST into the client's
// packets: Engine.IO v4 separates them with 0x1e, and sends a binary one
// as 'b' and its base64. The text packets alias body; the read loop
// decodes each as it would a WebSocket frame.
func splitPollPayload(body []byte) ([]inbound, error) {
	parts := bytes.Split(body, []byte{protocol.PayloadSeparator})
	packets := make([]inbound, 0, len(parts))
	for _, p := range parts {
		in := inbound{data: p}
		if len(p) > 0 && p[0] == 'b' {
			raw, err := base64.StdEncoding.DecodeString(string(p[1:]))
			if err != nil {
				return nil, errors.New("binary packet is not base64")
			}
			in = inbound{binary: true, data: raw}
		}
		packets = append(packets, in)
	}
	return packets, nil
}

// upgrade switches a polling session to the WebSocket of this request.
func (srv *Server) upgrade(w http.ResponseWriter, r *http.Request, sid string) {
	v, ok := srv.polls.Load(sid)
	if !ok {
		writeEIOError(w, http.StatusBadRequest, 1, "Session ID unknown")
		return
	}
	t := v.(*pollTransport)
	ws, err := websocket.Accept(w, r, acceptOptions)
	if err != nil {
		return
	}
	ws.SetReadLimit(int64(srv.cfg.MaxPayload))
	ctx, cancel := context.WithTimeout(context.Background(), upgradeTimeout)
	defer cancel()
	fail := func(why string) {
		t.s.Log(srv.log.Info()).Str("reason", why).Msg("upgrade to websocket failed; staying on polling")
		_ = ws.Close(websocket.StatusPolicyViolation, why)
	}
	if _, data, err := ws.Read(ctx); err != nil || string(data) != "2probe" {
		fail("expected 2probe")
		return
	}
	if err := ws.Write(ctx, websocket.MessageText, []byte("3probe")); err != nil {
		fail("writing 3probe")
		return
	}
	// Release the waiting GET so the client can pause polling.
	_ = t.write([]byte{byte(protocol.EIONoop)})
	if _, data, err := ws.Read(ctx); err != nil || string(data) != "5" {
		fail("expected 5 (upgrade)")
		return
	}
	t.wmu.Lock()
	t.mu.Lock()
	if t.closed {
		t.mu.Unlock()
		t.wmu.Unlock()
		_ = ws.Close(websocket.StatusGoingAway, "session closed")
		return
	}
	t.ws = ws
	rest := t.out
	t.out = nil
	t.signalLocked()
	t.mu.Unlock()
	t.isWS.Store(true)
	close(t.upgraded)
	for _, f := range rest {
		if len(f) == 1 && f[0] == byte(protocol.EIONoop) {
			continue
		}
		if err := ws.Write(ctx, websocket.MessageText, f); err != nil {
			break // the read loop sees the broken socket and closes
		}
	}
	t.wmu.Unlock()
	t.s.Log(srv.log.Debug()).Msg("upgraded from polling to websocket")
}
