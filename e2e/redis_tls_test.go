package e2e_test

import (
	"crypto/x509"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/tetherdev/tether/broker/auth"
	"github.com/tetherdev/tether/broker/bus/redistest"
	"github.com/tetherdev/tether/broker/store"
	"github.com/tetherdev/tether/internal/testwait"
)

// redisFailBound is how soon a broker pointed at a Redis it cannot speak
// to (TLS to a plaintext port, plaintext to a TLS port, a client
// certificate missing) must exit: well within the dial timeout (5 s),
// since each of these is known after one exchange.
const redisFailBound = 2 * time.Second

// tlsRedisFiles are the certificates of a TLS Redis test: its CA, and a
// client certificate that CA signed.
type tlsRedisFiles struct {
	ca                    *testCA
	clientCert, clientKey string
}

// newTLSRedisEnv starts a TLS-only redis-server (redistest.StartTLS) with a
// certificate of a fresh test CA; the brokers it starts trust that CA
// (--redis-ca) and, when authClients (tls-auth-clients yes), show a client
// certificate of it (--redis-cert, --redis-key).
func newTLSRedisEnv(t *testing.T, authClients bool) (*redisEnv, *tlsRedisFiles) {
	t.Helper()
	ca := newTestCA(t)
	dir := t.TempDir()
	f := &tlsRedisFiles{ca: ca, clientCert: filepath.Join(dir, "client.pem"), clientKey: filepath.Join(dir, "client.key")}
	serverCert, serverKey := filepath.Join(dir, "redis.pem"), filepath.Join(dir, "redis.key")
	ca.issue(t, serverCert, serverKey)
	ca.issueClient(t, f.clientCert, f.clientKey)
	srv := redistest.StartTLS(t, redistest.TLS{CertFile: serverCert, KeyFile: serverKey, CAFile: ca.file, AuthClients: authClients})
	e := &redisEnv{t: t, srv: srv, prefix: redisPrefix(t), tlsFlags: []string{"--redis-ca", ca.file}}
	if authClients {
		e.tlsFlags = append(e.tlsFlags, "--redis-cert", f.clientCert, "--redis-key", f.clientKey)
	}
	return e, f
}

// newTLSClusterEnv starts a three-master Redis Cluster that speaks TLS
// only (redistest.StartClusterTLS), its nodes' certificate of a fresh test
// CA; the brokers reach it with rediss:// seeds and --redis-ca.
func newTLSClusterEnv(t *testing.T) *redisEnv {
	t.Helper()
	ca := newTestCA(t)
	dir := t.TempDir()
	cert, key := filepath.Join(dir, "redis.pem"), filepath.Join(dir, "redis.key")
	// The nodes show it to each other on the cluster bus, which always
	// asks for a client certificate.
	ca.issueFor(t, cert, key, x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth)
	c := redistest.StartClusterTLS(t, 3, redistest.TLS{CertFile: cert, KeyFile: key, CAFile: ca.file})
	return &redisEnv{t: t, cluster: c, prefix: redisPrefix(t), tlsFlags: []string{"--redis-ca", ca.file}}
}

// brokerFails runs `tether broker` with args, which must make it exit
// with code want; it returns the output and how long the run took.
func brokerFails(t *testing.T, want int, args ...string) (string, time.Duration) {
	t.Helper()
	start := time.Now()
	cmd := exec.Command(tetherBin, append([]string{"broker", "--listen", "127.0.0.1:0", "--secret", secret}, args...)...)
	out, err := cmd.CombinedOutput()
	took := time.Since(start)
	ee, ok := err.(*exec.ExitError)
	if !ok || ee.ExitCode() != want {
		t.Fatalf("tether broker %s: %v (want exit %d) after %s:\n%s", strings.Join(args, " "), err, want, took, out)
	}
	return string(out), took
}

// TestRedisTLSTwoBrokersCallAcross: two brokers on a TLS-only Redis whose
// certificate a private CA signed (--redis-ca) route a call from one to
// the workspace held by the other.
func TestRedisTLSTwoBrokersCallAcross(t *testing.T) {
	e, _ := newTLSRedisEnv(t, false)
	a := e.broker("a")
	b := e.broker("b")
	startBridge(t, b, "ws-tls")
	tok := token(t, auth.RoleCaller, "ws-tls")
	r := a.call("ws-tls", tok, `{"endpoint":"/api/ping","payload":{"over":"tls"},"timeout":5}`)
	if r.err != nil || r.status != 200 || !r.resp.Success || compactJSON(t, r.resp.Result) != `{"over":"tls"}` {
		t.Fatalf("call via a: %v %d %+v", r.err, r.status, r.resp)
	}
	a.waitLine(time.Second, "call routed", `"workspace_id":"ws-tls"`)
	a.waitLine(time.Second, "routing through redis", "rediss://")
	if n, err := e.srv.Do("CLIENT", "LIST"); err != nil || strings.Count(n, "laddr=127.0.0.1:") < 4 {
		t.Fatalf("CLIENT LIST: %v\n%s", err, n) // each broker: pipe, pub/sub, store (at least)
	}
}

// TestRedisTLSClientCertificateRequired: a Redis with tls-auth-clients yes
// refuses a broker without a client certificate, which exits at start,
// quickly, saying what to pass; with --redis-cert and --redis-key the
// broker works.
func TestRedisTLSClientCertificateRequired(t *testing.T) {
	e, f := newTLSRedisEnv(t, true)
	out, took := brokerFails(t, 1, "--redis", e.srv.URL(), "--redis-ca", f.ca.file)
	for _, want := range []string{"client certificate", "tls-auth-clients", "pass --redis-cert and --redis-key"} {
		if !strings.Contains(out, want) {
			t.Fatalf("the error does not say %q:\n%s", want, out)
		}
	}
	if took > redisFailBound {
		t.Fatalf("the broker without a client certificate exited after %s, want within %s", took, redisFailBound)
	}
	t.Logf("refused without a client certificate in %s", took.Round(time.Millisecond))

	// A certificate of another CA is refused too, and the error names it.
	other := newTestCA(t)
	dir := t.TempDir()
	otherCert, otherKey := filepath.Join(dir, "c.pem"), filepath.Join(dir, "c.key")
	other.issueClient(t, otherCert, otherKey)
	out, _ = brokerFails(t, 1, "--redis", e.srv.URL(), "--redis-ca", f.ca.file, "--redis-cert", otherCert, "--redis-key", otherKey)
	if !strings.Contains(out, "check that --redis-cert "+otherCert+" is signed by that CA") {
		t.Fatalf("a client certificate of another CA:\n%s", out)
	}

	a := e.broker("a")
	b := e.broker("b")
	startBridge(t, b, "ws-mtls")
	r := a.call("ws-mtls", token(t, auth.RoleCaller, "ws-mtls"), `{"endpoint":"/api/ping","payload":1,"timeout":5}`)
	if r.err != nil || r.status != 200 || !r.resp.Success {
		t.Fatalf("call with client certificates: %v %d %+v", r.err, r.status, r.resp)
	}
}

// TestRedisWrongSchemeFailsFastWithAClearError: rediss:// at a plaintext
// Redis, and redis:// at a TLS-only one, end the broker's start within
// redisFailBound with an error that says what is wrong and what to use.
func TestRedisWrongSchemeFailsFastWithAClearError(t *testing.T) {
	plain := redistest.Start(t)
	out, took := brokerFails(t, 1, "--redis", "rediss://"+plain.Addr())
	for _, want := range []string{"does not speak TLS", "use a redis:// URL", "--tls-port"} {
		if !strings.Contains(out, want) {
			t.Fatalf("rediss:// to a plaintext Redis: the error does not say %q:\n%s", want, out)
		}
	}
	if took > redisFailBound {
		t.Fatalf("rediss:// to a plaintext Redis failed after %s, want within %s", took, redisFailBound)
	}
	t.Logf("rediss:// to plaintext refused in %s", took.Round(time.Millisecond))

	e, _ := newTLSRedisEnv(t, false)
	out, took = brokerFails(t, 1, "--redis", "redis://"+e.srv.Addr())
	for _, want := range []string{"closed the plaintext connection", "use rediss://"} {
		if !strings.Contains(out, want) {
			t.Fatalf("redis:// to a TLS port: the error does not say %q:\n%s", want, out)
		}
	}
	if took > redisFailBound {
		t.Fatalf("redis:// to a TLS port failed after %s, want within %s", took, redisFailBound)
	}
	t.Logf("redis:// to TLS refused in %s", took.Round(time.Millisecond))

	// Without --redis-ca the private CA's certificate is not trusted.
	out, _ = brokerFails(t, 1, "--redis", e.srv.URL())
	if !strings.Contains(out, "Redis's certificate is not trusted") || !strings.Contains(out, "pass --redis-ca FILE") {
		t.Fatalf("rediss:// without --redis-ca:\n%s", out)
	}
}

// TestRedisTLSFlagsAreChecked: the TLS flags' mistakes are caught at
// start, each naming the flag or the file.
func TestRedisTLSFlagsAreChecked(t *testing.T) {
	ca := newTestCA(t)
	dir := t.TempDir()
	cert, key := filepath.Join(dir, "c.pem"), filepath.Join(dir, "c.key")
	ca.issueClient(t, cert, key)
	otherCert, otherKey := filepath.Join(dir, "o.pem"), filepath.Join(dir, "o.key")
	ca.issueClient(t, otherCert, otherKey)
	notPEM := filepath.Join(dir, "not.pem")
	if err := os.WriteFile(notPEM, []byte("not a certificate\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	const url = "rediss://127.0.0.1:1"
	for _, c := range []struct {
		name string
		code int
		args []string
		want string
	}{
		{"cert without key", 2, []string{"--redis", url, "--redis-cert", cert}, "--redis-cert and --redis-key go together"},
		{"ca without TLS", 2, []string{"--redis", "redis://127.0.0.1:1", "--redis-ca", ca.file}, "need TLS: a rediss:// URL"},
		{"ca without redis", 2, []string{"--redis-ca", ca.file}, "need --redis or --redis-cluster"},
		{"mixed cluster seeds", 2, []string{"--redis-cluster", "rediss://127.0.0.1:1,127.0.0.1:2"}, "every seed as rediss://"},
		{"missing CA", 1, []string{"--redis", url, "--redis-ca", filepath.Join(dir, "nope.pem")}, "--redis-ca: reading the CA file: open " + filepath.Join(dir, "nope.pem")},
		{"CA not PEM", 1, []string{"--redis", url, "--redis-ca", notPEM}, "the CA file " + notPEM + " holds no PEM certificate"},
		{"missing cert", 1, []string{"--redis", url, "--redis-cert", filepath.Join(dir, "nope.pem"), "--redis-key", key}, "nope.pem"},
		{"cert not PEM", 1, []string{"--redis", url, "--redis-cert", notPEM, "--redis-key", key}, "the certificate file " + notPEM + " holds no PEM CERTIFICATE block"},
		{"cert and key mismatch", 1, []string{"--redis", url, "--redis-cert", cert, "--redis-key", otherKey}, "the certificate " + cert + " and the key " + otherKey},
	} {
		out, _ := brokerFails(t, c.code, c.args...)
		if !strings.Contains(out, c.want) {
			t.Errorf("%s: the output does not say %q:\n%s", c.name, c.want, out)
		}
	}
	// The environment sets the flags too.
	cmd := exec.Command(tetherBin, "broker", "--listen", "127.0.0.1:0", "--secret", secret, "--redis", url)
	cmd.Env = append(os.Environ(), "TETHER_REDIS_CERT="+cert)
	if code := exitCode(t, cmd); code != 2 {
		t.Fatalf("TETHER_REDIS_CERT without a key: exit %d, want 2", code)
	}
}

// TestRedisTLSAsyncCallAndRevocationAcrossBrokers: the call store and the
// revocation list, which keep clients of their own beside the bus, work
// over TLS with a client certificate: an async call submitted on one
// broker is served by the other, and a revocation on one is in force on
// the other.
func TestRedisTLSAsyncCallAndRevocationAcrossBrokers(t *testing.T) {
	e, _ := newTLSRedisEnv(t, true)
	a := e.broker("a")
	b := e.broker("b")
	startBridge(t, b, "ws-tls-async")
	tok := token(t, auth.RoleCaller, "ws-tls-async")
	rec := a.submit("ws-tls-async", tok, `{"endpoint":"/api/ping","payload":"stored","timeout":10,"async":true}`)
	if rec.Status != store.Queued && rec.Status != store.Delivered {
		t.Fatalf("submitted %+v", rec)
	}
	wantSucceeded(t, b.record(rec.CorrelationID, tok, 10), `"stored"`)

	revoked := token(t, auth.RoleCaller, "ws-tls-async")
	if r := b.call("ws-tls-async", revoked, `{"endpoint":"/api/ping","timeout":5}`); r.status != http.StatusOK {
		t.Fatalf("the token before its revocation: %d %+v", r.status, r.resp)
	}
	a.revoke(`{"jti":"` + jtiOf(t, revoked) + `"}`)
	testwait.Until(t, 5*time.Second, func() bool {
		return b.call("ws-tls-async", revoked, `{"endpoint":"/api/ping","timeout":5}`).status == http.StatusUnauthorized
	}, "b refusing the token revoked on a")
	b.refusedRevoked("ws-tls-async", revoked)
}

// TestRedisRestartedWithoutTLSCallsEndByTheirDeadline: the Redis of two
// running brokers comes back speaking plaintext on its TLS port. The
// brokers log why they cannot reconnect (not TLS), keep trying, and a call
// meanwhile is answered by its deadline, not held by a hanging dial.
func TestRedisRestartedWithoutTLSCallsEndByTheirDeadline(t *testing.T) {
	e, _ := newTLSRedisEnv(t, false)
	a := e.broker("a")
	b := e.broker("b")
	startBridge(t, b, "ws-tls-gone")
	tok := token(t, auth.RoleCaller, "ws-tls-gone")
	e.srv.RestartWithoutTLS()
	a.waitLine(10*time.Second, "does not speak TLS")
	for i := range 3 {
		r := a.call("ws-tls-gone", tok, fmt.Sprintf(`{"endpoint":"/api/ping","payload":%d,"timeout":2}`, i))
		if r.err != nil || r.resp.Success || r.elapsed > 2*time.Second+time.Second {
			t.Fatalf("call %d while Redis speaks plaintext: %v %d %+v after %s", i, r.err, r.status, r.resp, r.elapsed)
		}
		t.Logf("call %d: HTTP %d %s after %s", i, r.status, r.resp.Error, r.elapsed.Round(time.Millisecond))
	}
	// Still trying: the same reason is logged again later.
	n := len(a.linesWith("does not speak TLS"))
	testwait.Until(t, 10*time.Second, func() bool { return len(a.linesWith("does not speak TLS")) > n }, "a retrying and logging the reason again")
}

// TestRedisClientLogLinesAreJSON: go-redis's own log lines (its pool
// failing to dial a Redis that went away) reach the broker's JSON log
// with component "redis"; every stderr line of the broker is JSON.
func TestRedisClientLogLinesAreJSON(t *testing.T) {
	e := newRedisEnv(t)
	a := e.broker("a")
	e.srv.Stop()
	a.waitLine(15*time.Second, `"component":"redis"`)
	a.stop(syscall.SIGTERM, 10*time.Second)
	a.mu.Lock()
	lines := append([]string(nil), a.lines...)
	a.mu.Unlock()
	for _, line := range lines {
		var ev map[string]any
		if err := json.Unmarshal([]byte(line), &ev); err != nil {
			t.Errorf("a stderr line is not JSON: %q", line)
			continue
		}
		if msg, _ := ev["message"].(string); ev["component"] == "redis" && (ev["level"] != "warn" || strings.HasPrefix(msg, "redis: ")) {
			t.Errorf("a go-redis line: %q", line)
		}
	}
	t.Logf("%d lines, %d from go-redis", len(lines), len(a.linesWith(`"component":"redis"`)))
}

// TestRedisClusterTLSCallAcrossInstances: brokers on a Redis Cluster that
// speaks TLS only (rediss:// seeds, --redis-ca) route a call over sharded
// pub/sub on the nodes' TLS ports, and an async call through the store.
func TestRedisClusterTLSCallAcrossInstances(t *testing.T) {
	e := newTLSClusterEnv(t)
	a := e.broker("a")
	b := e.broker("b")
	startBridge(t, b, "ws-cluster-tls")
	tok := token(t, auth.RoleCaller, "ws-cluster-tls")
	r := a.call("ws-cluster-tls", tok, `{"endpoint":"/api/ping","payload":"sharded","timeout":5}`)
	if r.err != nil || r.status != 200 || !r.resp.Success || compactJSON(t, r.resp.Result) != `"sharded"` {
		t.Fatalf("call via a: %v %d %+v", r.err, r.status, r.resp)
	}
	rec := a.submit("ws-cluster-tls", tok, `{"endpoint":"/api/ping","payload":"stored","timeout":10,"async":true}`)
	wantSucceeded(t, b.record(rec.CorrelationID, tok, 10), `"stored"`)

	// Plaintext seeds at the TLS ports fail at start, quickly.
	out, took := brokerFails(t, 1, "--redis-cluster", strings.Join(e.cluster.Addrs(), ","))
	if !strings.Contains(out, "use rediss://") || took > redisFailBound {
		t.Fatalf("plaintext seeds at a TLS cluster, after %s:\n%s", took, out)
	}
}

// TestRedisTLSClientCertificateReloadedOnSIGHUP: the broker's Redis client
// certificate is read again on SIGHUP and shown on the connections made
// after it. Swapped for one of a CA Redis does not trust, then the
// connections cut: the broker's new connections are refused, and say why;
// swapped back (SIGHUP again), it reconnects and is ready.
func TestRedisTLSClientCertificateReloadedOnSIGHUP(t *testing.T) {
	e, f := newTLSRedisEnv(t, true)
	a := e.broker("a")
	a.waitLine(time.Second, "client certificate loaded", f.clientCert)
	hangup := func() {
		t.Helper()
		if err := a.cmd.Process.Signal(syscall.SIGHUP); err != nil {
			t.Fatal(err)
		}
	}
	cutClients := func() {
		t.Helper()
		for _, typ := range []string{"pubsub", "normal"} {
			if _, err := e.srv.Do("CLIENT", "KILL", "TYPE", typ); err != nil {
				t.Fatalf("CLIENT KILL TYPE %s: %v", typ, err)
			}
		}
	}

	other := newTestCA(t)
	bad := other.issueClient(t, f.clientCert, f.clientKey) // in place, by rename
	hangup()
	a.waitLine(5*time.Second, "certificate reloaded", bad.String())
	cutClients()
	a.waitLine(10*time.Second, "redis refused the TLS client")
	testwait.Until(t, 10*time.Second, func() bool { return a.readyz() == http.StatusServiceUnavailable }, "a not ready with its certificate refused")

	good := f.ca.issueClient(t, f.clientCert, f.clientKey)
	hangup()
	a.waitLine(5*time.Second, "certificate reloaded", good.String())
	testwait.Until(t, 15*time.Second, func() bool { return a.readyz() == http.StatusOK }, "a ready again with a certificate Redis trusts")
}
