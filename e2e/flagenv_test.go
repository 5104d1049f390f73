package e2e_test

import (
	"context"
	"encoding/json"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/tetherdev/tether/audit"
	"github.com/tetherdev/tether/broker/auth"
	"github.com/tetherdev/tether/protocol"
)

// Every flag reads a TETHER_* variable (cmd/tether/flagenv.go): a broker
// configured as a container or a systemd EnvironmentFile= configures it,
// with no flag on its command line.

// TestBrokerConfiguredByVariablesAlone starts `tether broker` with no flag
// at all: TETHER_LISTEN, TETHER_SECRET, TETHER_INSTANCE_ID,
// TETHER_MAX_IN_FLIGHT, TETHER_DRAIN, TETHER_TRUSTED_PROXIES and
// TETHER_AUDIT_LOG each show in what it does: it listens where told,
// authenticates with the secret, refuses a second call in flight as
// overloaded, takes a proxied client's address from X-Forwarded-For, and
// ends an unanswered call within the 300ms drain (the default is 10s).
func TestBrokerConfiguredByVariablesAlone(t *testing.T) {
	dir := t.TempDir()
	auditPath := filepath.Join(dir, "audit.jsonl")
	cmd := exec.Command(tetherBin, "broker")
	cmd.Env = append(os.Environ(),
		"TETHER_LISTEN=127.0.0.1:0",
		"TETHER_SECRET="+secret,
		"TETHER_LOG_LEVEL=debug",
		"TETHER_INSTANCE_ID=env-only",
		"TETHER_MAX_IN_FLIGHT=1",
		"TETHER_DRAIN=300ms",
		"TETHER_TRUSTED_PROXIES=127.0.0.1/32,10.0.0.0/8",
		"TETHER_AUDIT_LOG="+auditPath,
		"XDG_RUNTIME_DIR="+filepath.Join(dir, "run"),
	)
	p := start(t, "broker", cmd)
	line := p.waitLine(20*time.Second, "broker listening")
	for _, want := range []string{`"instance":"env-only"`, `"auth":true`, `"listen":"127.0.0.1:`} {
		if !strings.Contains(line, want) {
			t.Fatalf("listening line %s lacks %s", line, want)
		}
	}
	if strings.Contains(line, ":8377") {
		t.Fatalf("listening on the default port, not TETHER_LISTEN's: %s", line)
	}
	addr := strings.Split(strings.Split(line, `"listen":"`)[1], `"`)[0]
	b := &brokerProc{proc: p, url: "http://" + addr, instance: "env-only"}

	ws := "ws-env"
	ide := connectIDE(t, b, ws, "none") // the bridge's token: TETHER_SECRET's
	tok := token(t, auth.RoleCaller, ws)
	// The call the bridge never answers, through a trusted proxy.
	stuck := make(chan callResult, 1)
	go func() {
		req, _ := http.NewRequest(http.MethodPost, b.url+"/api/v1/workspaces/"+ws+"/calls", strings.NewReader(`{"endpoint":"/api/ping","timeout":30}`))
		req.Header.Set("Authorization", "Bearer "+tok)
		req.Header.Set("X-Forwarded-For", "203.0.113.9")
		start := time.Now()
		res, err := http.DefaultClient.Do(req)
		r := callResult{err: err}
		if err == nil {
			r.status = res.StatusCode
			r.err = json.NewDecoder(res.Body).Decode(&r.resp)
			res.Body.Close()
		}
		r.elapsed = time.Since(start)
		stuck <- r
	}()
	ide.await("tool_call", 5*time.Second)
	if r := b.call(ws, tok, `{"endpoint":"/api/ping","timeout":2}`); r.resp.Error != protocol.CodeOverloaded || r.elapsed > 500*time.Millisecond {
		t.Fatalf("second call with TETHER_MAX_IN_FLIGHT=1: %+v after %s, want overloaded at once", r.resp, r.elapsed)
	}

	start := time.Now()
	_ = syscall.Kill(p.cmd.Process.Pid, syscall.SIGTERM)
	r := await(t, stuck, 5*time.Second)
	if r.resp.Error != protocol.CodeBrokerShutdown {
		t.Fatalf("unanswered call at shutdown: %+v", r.resp)
	}
	if el := time.Since(start); el < 250*time.Millisecond || el > 2*time.Second {
		t.Fatalf("broker_shutdown %s after SIGTERM, want after TETHER_DRAIN's 300ms", el)
	}
	select {
	case <-p.done:
	case <-time.After(5 * time.Second):
		t.Fatal("broker did not exit after SIGTERM")
	}
	findAudit(t, readAudit(t, auditPath), audit.Call, func(l auditLine) bool { return l.Remote == "203.0.113.9" },
		"the call through a proxy TETHER_TRUSTED_PROXIES trusts")
}

// TestBrokerRefusesABadVariableNamingIt: a variable its flag refuses ends
// the start with exit 2 and a message naming the variable, at once.
func TestBrokerRefusesABadVariableNamingIt(t *testing.T) {
	for _, kv := range []string{"TETHER_DRAIN=soon", "TETHER_LIMIT_LOOPBACK=maybe", "TETHER_TRUSTED_PROXIES=10.0.0.0/8,nonsense"} {
		name, _, _ := strings.Cut(kv, "=")
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		cmd := exec.CommandContext(ctx, tetherBin, "broker")
		cmd.Env = append(os.Environ(), "TETHER_LISTEN=127.0.0.1:0", kv)
		out, err := cmd.CombinedOutput()
		if code := cmd.ProcessState.ExitCode(); code != 2 || !strings.Contains(string(out), name+": invalid value") {
			t.Errorf("tether broker with %s: exit %d (%v), output %q; want exit 2 naming %s", kv, code, err, out, name)
		}
		cancel()
	}
}
