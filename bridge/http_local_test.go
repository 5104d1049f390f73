//go:build !windows

package bridge_test

import (
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tetherdev/tether/bridge"
	"github.com/tetherdev/tether/protocol"
)

// Every request on the local HTTP listener must come from this machine
// and not from a web page the person has open: the routes run commands.

func TestHTTPListenerRefusesAWebPagesOrigin(t *testing.T) {
	root := t.TempDir()
	base, client := httpBridge(t, bridge.Config{Root: root}, nil)
	port := base[strings.LastIndex(base, ":")+1:]
	marker := filepath.Join(root, "ran")
	for _, origin := range []string{
		"https://evil.example",
		"http://evil.example:" + port, // a page on a rebound name
		"http://localhost:3000",       // another local server's page
		"null",                        // a sandboxed frame or file: page
	} {
		t.Run(origin, func(t *testing.T) {
			status, resp := post(t, client, base+protocol.TerminalExecuteEndpoint, `{"command":"touch ran","hidden":true}`,
				map[string]string{"Origin": origin, "Content-Type": "text/plain"})
			if status != http.StatusForbidden {
				t.Errorf("status = %d, want 403", status)
			}
			wantFailure(t, resp, protocol.CodeForbidden)
		})
	}
	if _, err := os.Stat(marker); err == nil {
		t.Error("a refused request ran its command")
	}
}

func TestHTTPListenerRefusesANonLoopbackHost(t *testing.T) {
	base, client := httpBridge(t, bridge.Config{}, nil)
	port := base[strings.LastIndex(base, ":")+1:]
	for _, host := range []string{
		"attacker.example:" + port, // DNS rebinding: the page's own name
		"attacker.example",
		"192.0.2.1:" + port,
		"127.0.0.1:1", // another port than the listener's
	} {
		t.Run(host, func(t *testing.T) {
			req, err := http.NewRequest(http.MethodPost, base+protocol.PingEndpoint, strings.NewReader(`{}`))
			if err != nil {
				t.Fatal(err)
			}
			req.Host = host
			status, resp := do(t, client, req)
			if status != http.StatusForbidden {
				t.Errorf("status = %d, want 403", status)
			}
			wantFailure(t, resp, protocol.CodeForbidden)
		})
	}
}

func TestHTTPListenerServesPlainLoopbackRequests(t *testing.T) {
	base, client := httpBridge(t, bridge.Config{}, nil)
	port := base[strings.LastIndex(base, ":")+1:]
	for _, tc := range []struct{ name, host, origin string }{
		{"plain", "", ""},
		{"localhost", "localhost:" + port, ""},
		{"same-origin page", "", base},
		{"localhost page", "localhost:" + port, "http://localhost:" + port},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req, err := http.NewRequest(http.MethodPost, base+protocol.PingEndpoint, strings.NewReader(`{"a":1}`))
			if err != nil {
				t.Fatal(err)
			}
			if tc.host != "" {
				req.Host = tc.host
			}
			if tc.origin != "" {
				req.Header.Set("Origin", tc.origin)
			}
			status, resp := do(t, client, req)
			if status != http.StatusOK {
				t.Errorf("status = %d, want 200", status)
			}
			wantSuccess(t, resp, `{"a":1}`)
		})
	}
}

func TestHTTPHandlerRefusesARemoteClient(t *testing.T) {
	b, err := bridge.New(bridge.Config{Root: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	for _, remote := range []string{"192.0.2.7:40000", "[2001:db8::1]:40000", "@"} {
		req := httptest.NewRequest(http.MethodPost, "http://127.0.0.1:8765"+protocol.PingEndpoint, strings.NewReader(`{}`))
		req.RemoteAddr = remote
		rec := httptest.NewRecorder()
		b.HTTPHandler().ServeHTTP(rec, req)
		if rec.Code != http.StatusForbidden || !strings.Contains(rec.Body.String(), `"error":"forbidden"`) {
			t.Errorf("from %s: HTTP %d %s, want 403 forbidden", remote, rec.Code, rec.Body)
		}
	}
}
