//go:build !windows

package bridge_test

import (
	"context"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/tetherdev/tether/bridge"
	"github.com/tetherdev/tether/internal/testwait"
	"github.com/tetherdev/tether/protocol"
)

// The listener's token: loopback is no trust boundary, so a local process
// without the token runs nothing.

func TestHTTPListenerRefusesARequestWithoutItsToken(t *testing.T) {
	root := t.TempDir()
	base, _ := httpBridge(t, bridge.Config{Root: root}, nil)
	plain := &http.Client{Transport: &http.Transport{}}
	for _, tc := range []struct{ name, auth string }{
		{"no header", ""},
		{"wrong token", "Bearer not-the-token"},
		{"token without Bearer", testHTTPToken},
		{"token prefix", "Bearer " + testHTTPToken[:4]},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := map[string]string{}
			if tc.auth != "" {
				h["Authorization"] = tc.auth
			}
			status, resp := post(t, plain, base+protocol.TerminalExecuteEndpoint, `{"command":"touch ran","hidden":true}`, h)
			if status != http.StatusUnauthorized {
				t.Errorf("status = %d, want 401", status)
			}
			wantFailure(t, resp, protocol.CodeUnauthorized)
			if strings.Contains(resp.Message, testHTTPToken) {
				t.Errorf("the refusal echoes the token: %q", resp.Message)
			}
		})
	}
	for _, path := range []string{"/healthz", bridge.AttachPath} {
		res, err := plain.Get(base + path)
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		if res.StatusCode != http.StatusUnauthorized {
			t.Errorf("GET %s without the token: HTTP %d, want 401", path, res.StatusCode)
		}
	}
	if _, err := os.Stat(filepath.Join(root, "ran")); err == nil {
		t.Error("a request without the token ran its command")
	}
}

func TestHTTPListenerAcceptsItsToken(t *testing.T) {
	base, client := httpBridge(t, bridge.Config{}, nil)
	status, resp := post(t, client, base+protocol.PingEndpoint, `{"a":1}`, nil)
	if status != http.StatusOK {
		t.Fatalf("status = %d, want 200", status)
	}
	wantSuccess(t, resp, `{"a":1}`)
}

func TestHTTPTokenFileIsPrivateAndRemovedWhenRunEnds(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "run") // created by Run, 0700
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	b, err := bridge.New(bridge.Config{Root: t.TempDir(), HTTPListener: ln, HTTPTokenDir: dir})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- b.Run(ctx) }()
	want, err := bridge.TokenFile(dir, ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	var path string
	testwait.Until(t, waitLimit, func() bool { path = b.HTTPTokenFile(); return path != "" }, "the listener's token file")
	if path != want {
		t.Fatalf("token file %s, want %s", path, want)
	}
	st, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if st.Mode().Perm() != 0o600 {
		t.Errorf("token file mode %o, want 600", st.Mode().Perm())
	}
	dst, err := os.Stat(dir)
	if err != nil {
		t.Fatal(err)
	}
	if dst.Mode().Perm() != 0o700 {
		t.Errorf("token dir mode %o, want 700", dst.Mode().Perm())
	}
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	tok := strings.TrimSpace(string(raw))
	if len(tok) < 32 {
		t.Errorf("token %d characters long, want at least 32", len(tok))
	}
	_, resp := post(t, &http.Client{Transport: &http.Transport{}}, "http://"+ln.Addr().String()+protocol.PingEndpoint, `{}`,
		map[string]string{"Authorization": "Bearer " + tok})
	wantSuccess(t, resp, `{}`)

	cancel()
	select {
	case <-done:
	case <-time.After(waitLimit):
		t.Fatal("Run did not return")
	}
	if _, err := os.Stat(path); !os.IsNotExist(err) {
		t.Errorf("token file after Run: %v, want it removed", err)
	}
}

func TestTokenFileIsNamedByPort(t *testing.T) {
	a, err := bridge.TokenFile("/d", "127.0.0.1:8765")
	if err != nil {
		t.Fatal(err)
	}
	for _, addr := range []string{"localhost:8765", "http://[::1]:8765/", "ws://127.0.0.1:8765"} {
		b, err := bridge.TokenFile("/d", addr)
		if err != nil || b != a {
			t.Errorf("TokenFile(%q) = %q, %v; want %q", addr, b, err, a)
		}
	}
	for _, bad := range []string{"", "8765", "host:", "127.0.0.1:../x"} {
		if p, err := bridge.TokenFile("/d", bad); err == nil {
			t.Errorf("TokenFile(%q) = %q, want an error", bad, p)
		}
	}
}
