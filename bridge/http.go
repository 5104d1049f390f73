//go:build !windows

package bridge

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	stdlog "log"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/tetherdev/tether/audit"
	"github.com/tetherdev/tether/protocol"
)

// Request headers the local HTTP listener reads.
const (
	// HeaderCorrelationID names the call in logs and in the response;
	// generated when absent.
	HeaderCorrelationID = "X-Correlation-ID"
	// HeaderTimeout is the call's timeout in seconds (a number, as in
	// tool_call); protocol.DefaultTimeout when absent.
	HeaderTimeout = "X-Tether-Timeout"
	// HeaderTraceparent is the caller's W3C trace context; the call's
	// span continues it when tracing is on (a malformed one is ignored).
	HeaderTraceparent = "Traceparent"
)

// HTTPHandler returns the route table as an http.Handler, for harness tests
// and local tools. POST <endpoint> with the payload as the body answers HTTP
// 200 and the ToolResponse JSON for every outcome of the call (success,
// unknown_route, invalid_payload, handler_timeout, overloaded, …), the same
// response the broker would get. A request that is not a call gets a
// ToolResponse body too: 405 for a method other than POST, 400 for a bad
// HeaderTimeout, 413 for a body over Config.MaxHTTPBody. GET /healthz
// answers 200 "ok". GET AttachPath streams the visible terminal
// (`tether attach`).
//
// Every request must carry the listener's token (Config.HTTPToken, in
// its token file: http_token.go) as "Authorization: Bearer"; one without
// it is refused with 401 and an unauthorized ToolResponse, WebSocket
// upgrades of `tether attach` included.
//
// Every request must also be local: from a loopback address, naming a
// loopback host (localhost or a loopback IP) and, when served by Run, the
// listener's port in Host, and carrying no Origin header other than that
// same loopback origin. Anything else is refused with 403 and a
// forbidden ToolResponse, so a web page in the person's browser can
// neither post calls (CSRF) nor reach the port through a rebound DNS name.
//
// The handler is safe for concurrent use; its calls share the MaxInFlight
// bound with the broker's, and a client that goes away cancels its call.
func (b *Bridge) HTTPHandler() http.Handler { return http.HandlerFunc(b.serveHTTP) }

func (b *Bridge) serveHTTP(w http.ResponseWriter, r *http.Request) {
	received := time.Now()
	if why := notLocal(r); why != "" {
		// The routes run commands on this machine: a web page the person
		// has open must not reach them, by a cross-origin request (Origin)
		// or through a name it rebound to 127.0.0.1 (Host).
		b.log.Warn().Str("remote", r.RemoteAddr).Str("host", r.Host).Str("origin", r.Header.Get("Origin")).
			Str("path", r.URL.Path).Str("reason", why).Msg("http request refused")
		writeToolResponse(w, http.StatusForbidden, protocol.Failure(r.Header.Get(HeaderCorrelationID),
			protocol.CodeForbidden, "the bridge's HTTP listener serves local clients only: "+why))
		return
	}
	if why := b.tokenMissing(r); why != "" {
		// Never the token itself in the log: only that one was wrong.
		b.log.Warn().Str("remote", r.RemoteAddr).Str("path", r.URL.Path).Str("reason", why).Msg("http request refused")
		w.Header().Set("WWW-Authenticate", `Bearer realm="tether bridge"`)
		writeToolResponse(w, http.StatusUnauthorized, protocol.Failure(r.Header.Get(HeaderCorrelationID),
			protocol.CodeUnauthorized, "the bridge's HTTP listener needs its token: "+why))
		return
	}
	if r.Method == http.MethodGet && r.URL.Path == "/healthz" {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		_, _ = io.WriteString(w, "ok\n")
		return
	}
	if r.URL.Path == AttachPath {
		b.serveAttach(w, r)
		return
	}
	call := protocol.ToolCall{
		CorrelationID: r.Header.Get(HeaderCorrelationID),
		Endpoint:      r.URL.EscapedPath(),
		// The caller's trace continues in the call's span, as the
		// broker's does through tool_call.
		Traceparent: r.Header.Get(HeaderTraceparent),
	}
	if call.CorrelationID == "" {
		call.CorrelationID = "http-" + rand.Text()
	}
	if r.Method != http.MethodPost {
		writeToolResponse(w, http.StatusMethodNotAllowed, protocol.Failure(call.CorrelationID,
			protocol.CodeInvalidRequest, "calls are POST requests, got "+r.Method))
		return
	}
	if h := r.Header.Get(HeaderTimeout); h != "" {
		t, err := strconv.ParseFloat(h, 64)
		if err != nil {
			writeToolResponse(w, http.StatusBadRequest, protocol.Failure(call.CorrelationID,
				protocol.CodeInvalidRequest, fmt.Sprintf("%s must be a number of seconds, got %q", HeaderTimeout, h)))
			return
		}
		call.Timeout = t
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, b.cfg.MaxHTTPBody))
	if err != nil {
		var tooLarge *http.MaxBytesError
		if errors.As(err, &tooLarge) {
			writeToolResponse(w, http.StatusRequestEntityTooLarge, protocol.Failure(call.CorrelationID,
				protocol.CodePayloadTooLarge, fmt.Sprintf("payload exceeds %d bytes", tooLarge.Limit)))
			return
		}
		writeToolResponse(w, http.StatusBadRequest, protocol.Failure(call.CorrelationID,
			protocol.CodeInvalidRequest, "reading body: "+err.Error()))
		return
	}
	call.Payload = body

	resp := b.d.dispatch(r.Context(), &call, received, audit.DoorLocalHTTP)
	err = writeToolResponse(w, http.StatusOK, resp)
	ev := b.d.callLog(&call).Info()
	if err != nil {
		ev = b.d.callLog(&call).Warn().Err(err)
	}
	ev.Str("transport", audit.DoorLocalHTTP).Bool("success", resp.Success).Str("code", resp.Error).
		Dur("duration", time.Since(received)).Msg("response sent")
}

func writeToolResponse(w http.ResponseWriter, status int, resp protocol.ToolResponse) error {
	body, err := json.Marshal(resp)
	if err != nil {
		body, _ = json.Marshal(protocol.Failure(resp.CorrelationID, protocol.CodeInternalError, "encoding response: "+err.Error()))
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, err = w.Write(body)
	return err
}

// httpServer is the local listener Run owns, and its token file.
type httpServer struct {
	srv         *http.Server
	removeToken func()
}

// startHTTP serves the route table on the configured listener until
// shutdown. Requests inherit ctx, so ending Run cancels their calls and lets
// shutdown finish promptly. A failing listener stops Run through stop.
func (b *Bridge) startHTTP(ctx context.Context, stop context.CancelCauseFunc, wg *sync.WaitGroup) (*httpServer, error) {
	ln := b.cfg.HTTPListener
	if ln == nil {
		var err error
		ln, err = net.Listen("tcp", b.cfg.HTTPAddr)
		if err != nil {
			return nil, fmt.Errorf("bridge: listening for HTTP: %w", err)
		}
	}
	removeToken, err := b.writeTokenFile(ln)
	if err != nil {
		ln.Close()
		return nil, err
	}
	srv := &http.Server{
		Handler:           b.HTTPHandler(),
		BaseContext:       func(net.Listener) context.Context { return ctx },
		ReadHeaderTimeout: 10 * time.Second,
		ErrorLog:          stdlog.New(b.log.With().Str("component", "http").Logger(), "", 0),
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		if err := srv.Serve(ln); !errors.Is(err, http.ErrServerClosed) {
			stop(fmt.Errorf("bridge: serving HTTP on %s: %w", ln.Addr(), err))
		}
	}()
	b.log.Info().Stringer("addr", ln.Addr()).Str("token_file", b.HTTPTokenFile()).Msg("http listener started")
	return &httpServer{srv: srv, removeToken: removeToken}, nil
}

func (h *httpServer) shutdown() {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := h.srv.Shutdown(ctx); err != nil {
		_ = h.srv.Close()
	}
	h.removeToken()
}

// notLocal says why r is not a request from a local client to this
// listener, or "" when it is.
func notLocal(r *http.Request) string {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if ip := net.ParseIP(host); err != nil || ip == nil || !ip.IsLoopback() {
		return "the client is not on loopback"
	}
	port := ""
	if a, ok := r.Context().Value(http.LocalAddrContextKey).(*net.TCPAddr); ok {
		port = strconv.Itoa(a.Port)
	}
	if !loopbackHostPort(r.Host, port) {
		return "the Host header does not name this loopback listener"
	}
	if origin, ok := r.Header["Origin"]; ok {
		u, err := url.Parse(strings.Join(origin, ","))
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || !loopbackHostPort(u.Host, port) {
			return "the request comes from a web page (Origin " + strings.Join(origin, ",") + ")"
		}
	}
	return ""
}

// loopbackHostPort reports whether hostport names a loopback host and,
// when port is known, that port (80 when hostport has none).
func loopbackHostPort(hostport, port string) bool {
	name, p, err := net.SplitHostPort(hostport)
	if err != nil {
		name, p = strings.TrimSuffix(strings.TrimPrefix(hostport, "["), "]"), "80"
	}
	if port != "" && p != port {
		return false
	}
	if strings.EqualFold(name, "localhost") {
		return true
	}
	ip := net.ParseIP(name)
	return ip != nil && ip.IsLoopback()
}
