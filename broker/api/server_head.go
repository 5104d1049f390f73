package api

import "bytes"

// The request heads the call server takes (server.go): a strict subset
// of HTTP/1.1 that needs no judgement. parseCallHead either reads a head
// completely or declines it; a declined request goes, from its first byte,
// to net/http, which answers it however it answers such a request (a
// chunked body, Expect: 100-continue, an id that needs percent-decoding, a
// malformed line, HTTP/1.0...). So only one parser ever reads a request,
// and the call server's is never the lenient one.

// headVerdict is what parseCallHead made of the bytes it was given.
type headVerdict uint8

const (
	headMore    headVerdict = iota // no whole head yet; read more
	headServe                      // a head the call server serves
	headDecline                    // net/http's, from its first byte
)

// maxCallHead bounds a head the call server reads; a longer one is
// net/http's (whose bound is 1 MB and whose answer to more is 431).
const maxCallHead = 8 << 10

// callRoute is a request the call server serves.
type callRoute uint8

const (
	routeCall   callRoute = iota + 1 // POST /api/v1/workspaces/{id}/calls
	routeStatus                      // GET /api/v1/calls/{id}[?wait=S]
	routeCancel                      // POST /api/v1/calls/{id}/cancel
)

// callRoutes are the request lines served: method and path around the id,
// and whether ?wait=S may follow.
var callRoutes = [...]struct {
	route          callRoute
	prefix, suffix string
	wait           bool
}{
	{routeCall, "POST /api/v1/workspaces/", "/calls", false},
	{routeStatus, "GET /api/v1/calls/", "", true},
	{routeCancel, "POST /api/v1/calls/", "/cancel", false},
}

// callHead is a request head the call server serves: a request line of
// callRoutes, HTTP/1.1, with a Host; for a POST exactly one
// Content-Length, for a GET none or 0; no header that changes how the
// body or the connection is read, and no Origin.
type callHead struct {
	size          int // bytes of the head, the blank line included
	route         callRoute
	id            string // the workspace (routeCall) or the call
	wait          string // ?wait='s value (routeStatus)
	waitGiven     bool
	contentLength int
	authorization []byte // the Authorization header's value; nil when none
	idempotency   []byte // the Idempotency-Key header's value
	prefer        [][]byte
	forwarded     [][]byte // X-Forwarded-For values, for the audit log's client (proxy.Trust)
	traceparent   []byte   // the W3C trace context headers; nil when none
	tracestate    []byte
	close         bool // Connection: close
}

var crlf = []byte("\r\n")

// parseCallHead reads the request head at the start of b. maxBody bounds
// Content-Length: a larger body is declined (net/http answers it 413).
// On headServe, h.size is the head's length; h's byte slices alias b.
func parseCallHead(b []byte, maxBody int) (h callHead, v headVerdict) {
	end := bytes.Index(b, []byte("\r\n\r\n"))
	if end < 0 {
		if len(b) >= maxCallHead || !callLinePrefix(b) {
			return h, headDecline
		}
		return h, headMore
	}
	if end+4 > maxCallHead {
		return h, headDecline
	}
	h.size = end + 4
	line, rest, _ := bytes.Cut(b[:end+2], crlf)
	if !h.requestLine(line) {
		return h, headDecline
	}
	hosts, lengths := 0, 0
	for len(rest) > 0 {
		var field []byte
		field, rest, _ = bytes.Cut(rest, crlf)
		name, value, ok := splitField(field)
		if !ok {
			return h, headDecline
		}
		switch {
		case fieldIs(name, "host"):
			hosts++
			if len(value) == 0 || !validHost(value) {
				return h, headDecline
			}
		case fieldIs(name, "content-length"):
			lengths++
			n, ok := contentLength(value)
			if !ok || n > maxBody {
				return h, headDecline
			}
			h.contentLength = n
		case fieldIs(name, "authorization"):
			if h.authorization != nil {
				return h, headDecline
			}
			h.authorization = value
		case fieldIs(name, "idempotency-key"):
			if h.idempotency != nil {
				return h, headDecline
			}
			h.idempotency = value
		case fieldIs(name, "prefer"):
			h.prefer = append(h.prefer, value)
		case fieldIs(name, "x-forwarded-for"):
			h.forwarded = append(h.forwarded, value)
		case fieldIs(name, "traceparent"):
			if h.traceparent != nil {
				return h, headDecline // W3C: two traceparents are net/http's to read
			}
			h.traceparent = value
		case fieldIs(name, "tracestate"):
			if h.tracestate != nil {
				return h, headDecline
			}
			h.tracestate = value
		case fieldIs(name, "connection"):
			close, ok := connectionOption(value)
			if !ok {
				return h, headDecline
			}
			h.close = h.close || close
		case fieldIs(name, "transfer-encoding"), fieldIs(name, "expect"), fieldIs(name, "upgrade"),
			fieldIs(name, "trailer"), fieldIs(name, "te"):
			return h, headDecline
		case fieldIs(name, "origin"):
			// A browser's request is net/http's, behind the CORS rule
			// (cors.go). A proxied one stays here: nothing of a call
			// reads the client's address.
			return h, headDecline
		}
	}
	switch {
	case hosts != 1, lengths > 1:
		return h, headDecline
	case h.route == routeStatus && h.contentLength > 0, h.route != routeStatus && lengths != 1:
		return h, headDecline // a GET has no body; a POST says how long its is
	}
	return h, headServe
}

// callLinePrefix reports whether b may still become a request line of
// callRoutes: it agrees with one's method and path prefix as far as it
// goes. Anything else is net/http's as soon as it is seen (a WebSocket
// upgrade, say).
func callLinePrefix(b []byte) bool {
	for _, r := range callRoutes {
		n := min(len(b), len(r.prefix))
		if string(b[:n]) == r.prefix[:n] {
			return true
		}
	}
	return false
}

// requestLine reads a request line (without its CRLF) of callRoutes into
// h. The id must be 1 to 256 bytes that need no decoding: letters, digits
// and -._~:@!$&'()*+,;= (RFC 3986 pchar without '%'); a wait, digits and
// dots (parseWait judges the number).
func (h *callHead) requestLine(line []byte) bool {
	const version = " HTTP/1.1"
	if !bytes.HasSuffix(line, []byte(version)) {
		return false
	}
	target := line[:len(line)-len(version)]
	for _, r := range callRoutes {
		if !bytes.HasPrefix(target, []byte(r.prefix)) {
			continue
		}
		rest := target[len(r.prefix):]
		i := 0
		for i < len(rest) && pathChar(rest[i]) {
			i++
		}
		id, rest := rest[:i], rest[i:]
		if len(id) == 0 || len(id) > 256 || !bytes.HasPrefix(rest, []byte(r.suffix)) {
			continue
		}
		rest = rest[len(r.suffix):]
		if r.wait && len(rest) > 0 {
			v, ok := bytes.CutPrefix(rest, []byte("?wait="))
			if !ok || len(v) == 0 || len(bytes.Trim(v, "0123456789.")) > 0 {
				return false
			}
			h.wait, h.waitGiven, rest = string(v), true, nil
		}
		if len(rest) > 0 {
			continue
		}
		h.route, h.id = r.route, string(id)
		return true
	}
	return false
}

func pathChar(c byte) bool {
	switch {
	case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9':
		return true
	}
	switch c {
	case '-', '.', '_', '~', ':', '@', '!', '$', '&', '\'', '(', ')', '*', '+', ',', ';', '=':
		return true
	}
	return false
}

// splitField splits a header field line into its name and its value,
// without the whitespace around the value. A name must be a token right
// before the colon; a value may hold visible characters, spaces and tabs.
// Anything else (an obs-fold continuation line, a bare LF or CR, a control
// character) is not ok.
func splitField(field []byte) (name, value []byte, ok bool) {
	name, value, found := bytes.Cut(field, []byte(":"))
	if !found || len(name) == 0 {
		return nil, nil, false
	}
	for _, c := range name {
		if !tokenChar(c) {
			return nil, nil, false
		}
	}
	for _, c := range value {
		if c < ' ' && c != '\t' || c == 0x7f {
			return nil, nil, false
		}
	}
	return name, bytes.Trim(value, " \t"), true
}

func tokenChar(c byte) bool {
	switch {
	case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9':
		return true
	}
	switch c {
	case '!', '#', '$', '%', '&', '\'', '*', '+', '-', '.', '^', '_', '`', '|', '~':
		return true
	}
	return false
}

// fieldIs reports whether name is lower, ignoring ASCII case.
func fieldIs(name []byte, lower string) bool {
	if len(name) != len(lower) {
		return false
	}
	for i, c := range name {
		if 'A' <= c && c <= 'Z' {
			c += 'a' - 'A'
		}
		if c != lower[i] {
			return false
		}
	}
	return true
}

// validHost accepts what a Host header of a loopback or DNS name, or an
// IP literal, with a port holds; anything else is net/http's to judge.
func validHost(v []byte) bool {
	for _, c := range v {
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '.' || c == '-' || c == ':' || c == '[' || c == ']' || c == '_') {
			return false
		}
	}
	return true
}

// contentLength reads 1 to 9 decimal digits.
func contentLength(v []byte) (int, bool) {
	if len(v) == 0 || len(v) > 9 {
		return 0, false
	}
	n := 0
	for _, c := range v {
		if c < '0' || c > '9' {
			return 0, false
		}
		n = n*10 + int(c-'0')
	}
	return n, true
}

// connectionOption reads a Connection header: keep-alive and close, in
// a comma-separated list, are the options served; close reports the
// latter. Any other option (upgrade, a hop-by-hop header name) is not ok.
func connectionOption(v []byte) (close, ok bool) {
	for opt := range bytes.SplitSeq(v, []byte(",")) {
		opt = bytes.Trim(opt, " \t")
		switch {
		case len(opt) == 0:
		case fieldIs(opt, "close"):
			close = true
		case fieldIs(opt, "keep-alive"):
		default:
			return false, false
		}
	}
	return close, true
}
