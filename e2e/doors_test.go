package e2e_test

import (
	"encoding/json"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/tetherdev/tether/bridge"
	"github.com/tetherdev/tether/protocol"
)

// No unauthenticated local doors (issue 29): loopback is no trust
// boundary, so the bridge's local listener and a broker without keys both
// want a credential; and the doors browsers and balancers use.

// startLocalBridge runs `tether bridge --http` (no broker) with its own
// XDG_RUNTIME_DIR, and returns it with its listener's address and that
// directory.
func startLocalBridge(t *testing.T, root string) (p *proc, addr, runDir string) {
	t.Helper()
	runDir = filepath.Join(t.TempDir(), "run")
	cmd := exec.Command(tetherBin, "bridge", "--http", "127.0.0.1:0", "--root", root, "--log-level", "debug")
	cmd.Env = append(os.Environ(), "XDG_RUNTIME_DIR="+runDir)
	p = start(t, "bridge", cmd)
	var ev struct {
		Addr string `json:"addr"`
	}
	if err := json.Unmarshal([]byte(p.waitLine(10*time.Second, "http listener started")), &ev); err != nil || ev.Addr == "" {
		t.Fatal("no HTTP address in the bridge's log")
	}
	return p, ev.Addr, runDir
}

func postLocal(t *testing.T, addr, auth, body string) (int, protocol.ToolResponse) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, "http://"+addr+protocol.TerminalExecuteEndpoint, strings.NewReader(body))
	if auth != "" {
		req.Header.Set("Authorization", auth)
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	var resp protocol.ToolResponse
	if err := json.NewDecoder(res.Body).Decode(&resp); err != nil {
		t.Fatalf("HTTP %d: not a ToolResponse: %v", res.StatusCode, err)
	}
	return res.StatusCode, resp
}

func TestDoorsBridgeListenerRefusesARequestWithoutItsToken(t *testing.T) {
	root := t.TempDir()
	_, addr, runDir := startLocalBridge(t, root)
	planted := `{"command":"touch planted","hidden":true}`
	for name, auth := range map[string]string{"no token": "", "wrong token": "Bearer guessed", "not bearer": "Basic eDp5"} {
		t.Run(name, func(t *testing.T) {
			status, resp := postLocal(t, addr, auth, planted)
			if status != http.StatusUnauthorized || resp.Error != protocol.CodeUnauthorized || resp.Message == "" {
				t.Fatalf("HTTP %d %+v, want 401 unauthorized with a message", status, resp)
			}
		})
	}
	if _, err := os.Stat(filepath.Join(root, "planted")); err == nil {
		t.Fatal("a request without the token ran its command")
	}
	path, err := bridge.TokenFile(filepath.Join(runDir, "tether"), addr)
	if err != nil {
		t.Fatal(err)
	}
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("the token file: %v", err)
	}
	status, resp := postLocal(t, addr, "Bearer "+strings.TrimSpace(string(raw)), `{"command":"echo ok","hidden":true}`)
	if status != http.StatusOK || !resp.Success {
		t.Fatalf("with the token: HTTP %d %+v, want a success", status, resp)
	}
}

func TestDoorsBridgeTokenFileIsPrivateAndRemovedOnStop(t *testing.T) {
	p, addr, runDir := startLocalBridge(t, t.TempDir())
	dir := filepath.Join(runDir, "tether")
	path, err := bridge.TokenFile(dir, addr)
	if err != nil {
		t.Fatal(err)
	}
	for what, tc := range map[string]struct {
		path string
		mode os.FileMode
	}{"token file": {path, 0o600}, "its directory": {dir, 0o700}} {
		st, err := os.Stat(tc.path)
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		if st.Mode().Perm() != tc.mode {
			t.Errorf("%s %s: mode %o, want %o", what, tc.path, st.Mode().Perm(), tc.mode)
		}
	}
	if !strings.Contains(p.waitLine(time.Second, "http listener started"), path) {
		t.Errorf("the bridge's log does not name its token file %s", path)
	}
	p.stop(syscall.SIGTERM, 10*time.Second)
	if _, err := os.Stat(path); !os.IsNotExist(err) {
		t.Errorf("the token file after the bridge stopped: %v, want it removed", err)
	}
}
