package api

import (
	"bufio"
	"bytes"
	"net/http"
	"slices"
	"strings"
	"testing"
)

const testCallHead = "POST /api/v1/workspaces/ws-1/calls HTTP/1.1\r\nHost: 127.0.0.1:8080\r\nAuthorization: Bearer tok\r\nContent-Type: application/json\r\nContent-Length: 42\r\n\r\n"

func TestParseCallHeadServesAPlainCall(t *testing.T) {
	h, v := parseCallHead([]byte(testCallHead+`{"endpoint":"/x"}`), 1000)
	if v != headServe {
		t.Fatalf("verdict %d, want serve", v)
	}
	if h.size != len(testCallHead) || h.route != routeCall || h.id != "ws-1" || h.contentLength != 42 || string(h.authorization) != "Bearer tok" || h.close {
		t.Fatalf("head %+v", h)
	}
	withMore := "POST /api/v1/workspaces/a~b.c_d-e:f@g/calls HTTP/1.1\r\nhost: x\r\ncontent-length: 0\r\nPrefer: respond-async\r\nprefer: wait=5\r\n" +
		"Idempotency-Key:  k1 \r\nConnection: keep-alive, close\r\nX-Other: \t anything \t\r\n\r\n"
	h, v = parseCallHead([]byte(withMore), 1000)
	if v != headServe || h.route != routeCall || h.id != "a~b.c_d-e:f@g" || !h.close || string(h.idempotency) != "k1" ||
		len(h.prefer) != 2 || string(h.prefer[0]) != "respond-async" || string(h.prefer[1]) != "wait=5" {
		t.Fatalf("verdict %d, head %+v", v, h)
	}
}

func TestParseCallHeadServesStatusAndCancel(t *testing.T) {
	for head, want := range map[string]callHead{
		"GET /api/v1/calls/c-1 HTTP/1.1\r\nHost: h\r\n\r\n":                               {route: routeStatus, id: "c-1"},
		"GET /api/v1/calls/c-1?wait=2.5 HTTP/1.1\r\nHost: h\r\nContent-Length: 0\r\n\r\n": {route: routeStatus, id: "c-1", wait: "2.5", waitGiven: true},
		"POST /api/v1/calls/c-1/cancel HTTP/1.1\r\nHost: h\r\nContent-Length: 2\r\n\r\n":  {route: routeCancel, id: "c-1", contentLength: 2},
	} {
		h, v := parseCallHead([]byte(head), 1000)
		if v != headServe || h.route != want.route || h.id != want.id || h.wait != want.wait || h.waitGiven != want.waitGiven || h.contentLength != want.contentLength {
			t.Errorf("%q: verdict %d, head %+v", head, v, h)
		}
	}
}

func TestParseCallHeadWaitsForTheRestOfAHead(t *testing.T) {
	for n := 0; n < len(testCallHead); n++ {
		if _, v := parseCallHead([]byte(testCallHead[:n]), 1000); v != headMore {
			t.Fatalf("%d bytes of the head: verdict %d, want more", n, v)
		}
	}
}

// TestParseCallHeadDeclinesWhatNetHTTPJudges: everything outside the
// strict subset goes to net/http, as early as it can be told.
func TestParseCallHeadDeclinesWhatNetHTTPJudges(t *testing.T) {
	base := strings.Replace(testCallHead, "Content-Type: application/json\r\n", "", 1)
	for name, head := range map[string]string{
		"websocket upgrade":   "GET /socket.io/?EIO=4&transport=websocket HTTP/1.1\r\n",
		"other path":          "POST /api/v1/calls/x/other HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\n\r\n",
		"status with a body":  "GET /api/v1/calls/x HTTP/1.1\r\nHost: x\r\nContent-Length: 1\r\n\r\n",
		"status, other query": "GET /api/v1/calls/x?wait=1&x=2 HTTP/1.1\r\nHost: x\r\n\r\n",
		"status, odd wait":    "GET /api/v1/calls/x?wait=%31 HTTP/1.1\r\nHost: x\r\n\r\n",
		"status, empty wait":  "GET /api/v1/calls/x?wait= HTTP/1.1\r\nHost: x\r\n\r\n",
		"status of nothing":   "GET /api/v1/calls/ HTTP/1.1\r\nHost: x\r\n\r\n",
		"cancel, no length":   "POST /api/v1/calls/x/cancel HTTP/1.1\r\nHost: x\r\n\r\n",
		"delete of a call":    "DELETE /api/v1/calls/x HTTP/1.1\r\nHost: x\r\n\r\n",
		"get of the path":     strings.Replace(base, "POST", "GET", 1),
		"HTTP/1.0":            strings.Replace(base, "HTTP/1.1", "HTTP/1.0", 1),
		"query":               strings.Replace(base, "/calls", "/calls?x=1", 1),
		"percent-encoded id":  strings.Replace(base, "ws-1", "ws%201", 1),
		"slash in id":         strings.Replace(base, "ws-1", "ws/1", 1),
		"empty id":            strings.Replace(base, "ws-1", "", 1),
		"long id":             strings.Replace(base, "ws-1", strings.Repeat("w", 257), 1),
		"chunked":             strings.Replace(base, "Content-Length: 42", "Transfer-Encoding: chunked", 1),
		"chunked and length":  strings.Replace(base, "Host:", "Transfer-Encoding: chunked\r\nHost:", 1),
		"expect":              strings.Replace(base, "Host:", "Expect: 100-continue\r\nHost:", 1),
		"upgrade":             strings.Replace(base, "Host:", "Upgrade: h2c\r\nHost:", 1),
		"connection upgrade":  strings.Replace(base, "Host:", "Connection: Upgrade\r\nHost:", 1),
		"no length":           strings.Replace(base, "Content-Length: 42\r\n", "", 1),
		"two lengths":         strings.Replace(base, "Host:", "Content-Length: 42\r\nHost:", 1),
		"signed length":       strings.Replace(base, "42", "+42", 1),
		"length list":         strings.Replace(base, "42", "42, 42", 1),
		"body over the limit": strings.Replace(base, "42", "1001", 1),
		"no host":             strings.Replace(base, "Host: 127.0.0.1:8080\r\n", "", 1),
		"two hosts":           strings.Replace(base, "Host:", "Host: a\r\nHost:", 1),
		"odd host":            strings.Replace(base, "127.0.0.1:8080", "a/b", 1),
		"two authorizations":  strings.Replace(base, "Host:", "Authorization: Bearer other\r\nHost:", 1),
		"obs-fold":            strings.Replace(base, "Bearer tok\r\n", "Bearer\r\n tok\r\n", 1),
		"space before colon":  strings.Replace(base, "Host:", "Host :", 1),
		"bare LF in a value":  strings.Replace(base, "Bearer tok", "Bearer\ntok", 1),
		"NUL in a value":      strings.Replace(base, "Bearer tok", "Bearer\x00tok", 1),
		"bad name":            strings.Replace(base, "Host:", "Bad(Name): x\r\nHost:", 1),
		"head over the limit": strings.Replace(base, "Host:", "X-Pad: "+strings.Repeat("p", maxCallHead)+"\r\nHost:", 1),
		"leading CRLF":        "\r\n" + base,
	} {
		if _, v := parseCallHead([]byte(head), 1000); v != headDecline {
			t.Errorf("%s: verdict %d, want decline", name, v)
		}
	}
}

// FuzzParseCallHead: a head the call server serves is one net/http reads
// too, to the same request: method, path, body length, and every header the
// call API reads. (The converse is not asked: what the call server
// declines, net/http serves.)
func FuzzParseCallHead(f *testing.F) {
	f.Add([]byte(testCallHead))
	f.Add([]byte("POST /api/v1/workspaces/w/calls HTTP/1.1\r\nhost: h\r\ncontent-length: 7\r\nprefer: respond-async, wait=1\r\nPrefer: x\r\nidempotency-key: k\r\nconnection: close\r\n\r\n"))
	f.Add([]byte("POST /api/v1/workspaces/w/calls HTTP/1.1\r\nHost: [::1]:80\r\nContent-Length: 0\r\nAuthorization:Bearer  a.b.c \r\nX: \xff\r\n\r\n"))
	f.Add([]byte("GET /socket.io/?EIO=4 HTTP/1.1\r\nHost: h\r\n\r\n"))
	f.Add([]byte("GET /api/v1/calls/c1?wait=10 HTTP/1.1\r\nHost: h\r\nAuthorization: Bearer t\r\n\r\n"))
	f.Add([]byte("POST /api/v1/calls/c1/cancel HTTP/1.1\r\nHost: h\r\nContent-Length: 0\r\n\r\n"))
	f.Add([]byte("POST /api/v1/workspaces/w/calls HTTP/1.1\r\nHost: h\r\nContent-Length: 2\r\nX-Forwarded-For: 203.0.113.7, 10.0.0.1\r\nx-forwarded-for: 10.0.0.2\r\n\r\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		h, v := parseCallHead(b, 1<<20)
		if v != headServe {
			return
		}
		if h.size > len(b) || h.size > maxCallHead || h.contentLength < 0 || h.contentLength > 1<<20 {
			t.Fatalf("head %+v of %d bytes", h, len(b))
		}
		req, err := http.ReadRequest(bufio.NewReader(bytes.NewReader(b[:h.size])))
		if err != nil {
			t.Fatalf("served a head net/http refuses: %v\n%q", err, b[:h.size])
		}
		prefer := make([]string, len(h.prefer))
		for i, p := range h.prefer {
			prefer[i] = string(p)
		}
		forwarded := make([]string, len(h.forwarded))
		for i, v := range h.forwarded {
			forwarded[i] = string(v)
		}
		method, path, query := http.MethodPost, "/api/v1/workspaces/"+h.id+"/calls", ""
		switch h.route {
		case routeStatus:
			method, path = http.MethodGet, "/api/v1/calls/"+h.id
			if h.waitGiven {
				query = "wait=" + h.wait
			}
		case routeCancel:
			path = "/api/v1/calls/" + h.id + "/cancel"
		}
		switch {
		case req.Method != method || req.URL.Path != path || req.URL.RawQuery != query:
			t.Fatalf("net/http reads %s %s (query %q), the call server %s %s (query %q)", req.Method, req.URL.Path, req.URL.RawQuery, method, path, query)
		case req.ProtoMajor != 1 || req.ProtoMinor != 1 || len(req.TransferEncoding) > 0:
			t.Fatalf("net/http reads %s, transfer encoding %v", req.Proto, req.TransferEncoding)
		case req.ContentLength != int64(h.contentLength):
			t.Fatalf("net/http reads a body of %d bytes, the call server %d", req.ContentLength, h.contentLength)
		case req.Header.Get("Authorization") != string(h.authorization) || len(req.Header.Values("Authorization")) > 1:
			t.Fatalf("Authorization: net/http %q, the call server %q", req.Header.Values("Authorization"), h.authorization)
		case req.Header.Get("Idempotency-Key") != string(h.idempotency) || len(req.Header.Values("Idempotency-Key")) > 1:
			t.Fatalf("Idempotency-Key: net/http %q, the call server %q", req.Header.Values("Idempotency-Key"), h.idempotency)
		case !slices.Equal(req.Header.Values("Prefer"), prefer):
			t.Fatalf("Prefer: net/http %q, the call server %q", req.Header.Values("Prefer"), prefer)
		case !slices.Equal(req.Header.Values("X-Forwarded-For"), forwarded):
			t.Fatalf("X-Forwarded-For: net/http %q, the call server %q", req.Header.Values("X-Forwarded-For"), forwarded)
		case req.Close != h.close:
			t.Fatalf("Connection close: net/http %v, the call server %v", req.Close, h.close)
		case req.Host == "" || len(req.Header.Values("Host")) > 0:
			t.Fatalf("Host %q", req.Host)
		}
	})
}

func TestParseCallHeadDeclinesBrowserRequests(t *testing.T) {
	for _, field := range []string{"Origin: https://app.example", "origin: null"} {
		head := strings.Replace(testCallHead, "Content-Type:", field+"\r\nContent-Type:", 1)
		if _, v := parseCallHead([]byte(head+`{"endpoint":"/x"}`), 1000); v != headDecline {
			t.Errorf("a head with %q: verdict %d, want declined (net/http, behind CORS)", field, v)
		}
	}
	head := strings.Replace(testCallHead, "Content-Type:", "X-Forwarded-For: 198.51.100.1\r\nContent-Type:", 1)
	if _, v := parseCallHead([]byte(head+`{"endpoint":"/x"}`), 1000); v != headServe {
		t.Errorf("a proxied call: verdict %d, want served by the call server", v)
	}
}
