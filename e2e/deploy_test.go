package e2e_test

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/tetherdev/tether/broker/auth"
	"github.com/tetherdev/tether/internal/testwait"
	"github.com/tetherdev/tether/protocol"
)

// TestDeployThreeBrokersBehindHAProxy follows section 6 of docs/deploy.md
// with the doc's own commands: its openssl recipe makes the internal CA
// and the three brokers' certificates, its `tether keys new` the key set;
// three brokers on one Redis serve TLS with them, and HAProxy runs
// deploy/compose/haproxy.cfg with only its addresses and file paths
// changed (the server lines as the doc writes them for brokers on other
// hosts). Through the balancer, a bridge connects and calls succeed,
// answered by more than one broker; a long-polling and an upgrading
// socket.io client and an MCP session over HTTP work (each needs its
// requests on one broker); the balancer refuses /metrics. Then the broker
// holding the workspace is stopped (SIGTERM): every call is answered by a
// broker meanwhile (never a 503 of the balancer's), the bridge moves to
// another broker, and calls succeed again within 15 s (the doc gives the
// figure this test logs).
func TestDeployThreeBrokersBehindHAProxy(t *testing.T) {
	haproxy, err := exec.LookPath("haproxy")
	if err != nil {
		t.Fatal("haproxy is not installed (make deps installs Debian's haproxy)")
	}
	dir := t.TempDir()
	runDocBlock(t, dir, "### Certificates")
	runDocBlock(t, dir, "### Keys")
	for _, f := range []string{"ca.crt", "broker-1.crt", "broker-1.key", "broker-3.key", "k-2026-12.jwk.json", "keys.jwks.json"} {
		if _, err := os.Stat(filepath.Join(dir, f)); err != nil {
			t.Fatalf("the doc's commands did not make %s: %v", f, err)
		}
	}
	mint := func(role, ws string) string {
		out, err := exec.Command(tetherBin, "token", "--keys", filepath.Join(dir, "k-2026-12.jwk.json"), "--kid", "2026-12", "--role", role, "--workspace", ws, "--ttl", "1h").Output()
		if err != nil {
			t.Fatalf("tether token: %v", err)
		}
		return strings.TrimSpace(string(out))
	}

	rds := newRedisEnv(t)
	brokers := make([]*brokerProc, 3)
	for i := range brokers {
		name := fmt.Sprintf("broker-%d", i+1)
		env := []string{
			"TETHER_INSTANCE_ID=" + name,
			"TETHER_TLS_CERT=" + filepath.Join(dir, name+".crt"),
			"TETHER_TLS_KEY=" + filepath.Join(dir, name+".key"),
			"TETHER_KEYS=" + filepath.Join(dir, "keys.jwks.json"),
			"TETHER_PUBLIC_URL=https://broker.example.com",
			"TETHER_REDIS=" + rds.srv.URL(),
			"TETHER_REDIS_PREFIX=" + rds.prefix,
			"TETHER_TRUSTED_PROXIES=127.0.0.1/32", // the balancer, as broker.env.example
		}
		b := runBroker(t, name, "127.0.0.1:0", env)
		b.url = "https://" + strings.TrimPrefix(b.url, "http://")
		b.client = caClient(t, filepath.Join(dir, "ca.crt"), name+".internal")
		brokers[i] = b
	}

	// The balancer's public certificate: a CA of the test's own stands
	// for the public one, which clients trust with --ca.
	public := newTestCA(t)
	public.issue(t, filepath.Join(dir, "pub.crt"), filepath.Join(dir, "pub.key"))
	concat(t, filepath.Join(dir, "haproxy.pem"), filepath.Join(dir, "pub.crt"), filepath.Join(dir, "pub.key"))
	lbPort := freePort(t)
	cfg := haproxyConfig(t, dir, lbPort, brokers)
	start(t, "haproxy", exec.Command(haproxy, "-db", "-f", cfg))
	lb := &brokerProc{url: fmt.Sprintf("https://127.0.0.1:%d", lbPort), client: public.client()}
	lb.client.Transport.(*http.Transport).DisableKeepAlives = true // each call balanced anew
	testwait.Until(t, 20*time.Second, func() bool { return lbStatus(lb, "/readyz") == http.StatusOK }, "HAProxy answering /readyz")

	if got := lbStatus(lb, "/metrics"); got != http.StatusNotFound {
		t.Errorf("GET /metrics through the balancer: %d, want 404 (haproxy.cfg refuses it)", got)
	}

	const ws = "deploy-ws"
	root := t.TempDir()
	writeFiles(t, root, map[string]string{"hello.txt": "hello from the bridge\n"})
	start(t, "bridge", exec.Command(tetherBin, "bridge", "--broker", lb.url, "--ca", public.file,
		"--workspace", ws, "--token", mint(auth.RoleBridge, ws), "--root", root, "--log-level", "debug"))
	var gone *brokerProc // the broker stopped below
	holder := func() *brokerProc {
		for _, b := range brokers {
			if b != gone && b.holds(ws) {
				return b
			}
		}
		return nil
	}
	testwait.Until(t, 15*time.Second, func() bool { return holder() != nil }, "a broker holding %s", ws)

	// The doc's check: tether call through the balancer.
	caller := mint(auth.RoleCaller, ws)
	out, err := exec.Command(tetherBin, "call", "--broker", lb.url, "--ca", public.file, "--token", caller, "--workspace", ws, "/api/ping").Output()
	var answer protocol.ToolResponse
	if err != nil || json.Unmarshal(out, &answer) != nil || !answer.Success {
		t.Fatalf("tether call through the balancer: %v\n%s", err, out)
	}

	const calls = 12
	for i := range calls {
		if r := lb.call(ws, caller, `{"endpoint":"/api/ping","payload":{}}`); r.err != nil || !r.resp.Success {
			t.Fatalf("call %d through the balancer: %v %+v", i, r.err, r.resp)
		}
	}
	answered, total := 0, 0.0
	for _, b := range brokers {
		n := brokerMetric(t, b, `tether_calls_total{outcome="success"}`)
		total += n
		if n > 0 {
			answered++
		}
	}
	if total != calls+1 || answered < 2 {
		t.Errorf("%v calls answered by %d brokers; want %d calls spread over at least 2 (round robin)", total, answered, calls+1)
	}

	// A socket.io client on long-polling (the browser's way): every
	// request of its session must reach one broker (the balancer's cookie).
	const pollWS = "deploy-poll"
	poll, first := startIDE(t, lb, pollWS, mint(auth.RoleBridge, pollWS), "ack", "--transports", "polling", "--ca", public.file)
	if first["event"] != "connected" {
		t.Fatalf("a polling client through the balancer did not connect: %v", first)
	}
	pollCaller := mint(auth.RoleCaller, pollWS)
	for i := range 6 {
		if r := lb.call(pollWS, pollCaller, `{"endpoint":"/api/ping","payload":{"n":1}}`); r.err != nil || !r.resp.Success {
			t.Fatalf("call %d to the polling client through the balancer: %v %+v", i, r.err, r.resp)
		}
	}
	poll.kill()
	// socket.io-client's default: polling, then the upgrade to WebSocket,
	// which must reach the broker of the polling session.
	upgrading, first := startIDE(t, lb, pollWS, mint(auth.RoleBridge, pollWS), "ack", "--transports", "default", "--ca", public.file)
	if first["event"] == "connect_error" {
		t.Fatalf("a default socket.io client through the balancer: %v", first)
	}
	seen := map[any]bool{first["event"]: true}
	for !seen["connected"] || !seen["upgrade"] { // in either order
		ev := upgrading.next(10 * time.Second)
		if ev["event"] == "connect_error" || ev["event"] == "disconnect" {
			t.Fatalf("a default socket.io client through the balancer: %v", ev)
		}
		seen[ev["event"]] = true
	}
	if r := lb.call(pollWS, pollCaller, `{"endpoint":"/api/ping","payload":{}}`); r.err != nil || !r.resp.Success {
		t.Fatalf("a call to the upgraded client through the balancer: %v %+v", r.err, r.resp)
	}
	upgrading.kill()

	// An MCP client over streamable HTTP: its session lives in the broker
	// that answered initialize, and every later request must reach it.
	t.Setenv("NODE_EXTRA_CA_CERTS", public.file)
	mc := connectMCP(t, "--url", lb.url+"/api/v1/workspaces/"+ws+"/mcp", "--token", caller)
	mc.list()
	for range 6 {
		if text := mc.ok("file_read", map[string]any{"path": "hello.txt"}, nil); !strings.Contains(text, "hello from the bridge") {
			t.Fatalf("file_read over MCP through the balancer: %q", text)
		}
	}
	mc.close()

	// Stop the broker that holds the workspace, as an operator would.
	gone = holder()
	h := gone.name
	stopped := time.Now()
	gone.stop(syscall.SIGTERM, 45*time.Second)
	t.Logf("%s exited %s after SIGTERM", h, time.Since(stopped).Round(time.Millisecond))
	// Until the bridge has reconnected, calls answer workspace_offline;
	// every one is answered by a broker, never refused by the balancer for
	// a broker it has not yet seen go (it retries the connection on
	// another: option redispatch).
	offline := 0
	testwait.Until(t, 15*time.Second, func() bool {
		r := lb.call(ws, caller, `{"endpoint":"/api/ping","payload":{}}`)
		if r.err != nil {
			t.Errorf("a call through the balancer after %s stopped was not answered by a broker: HTTP %d, %v", h, r.status, r.err)
			return false
		}
		if !r.resp.Success {
			offline++
		}
		return r.resp.Success
	}, "a call through the balancer succeeding after %s stopped", h)
	t.Logf("calls through the balancer succeed again %s after SIGTERM to %s (%d answered workspace_offline before)", time.Since(stopped).Round(time.Millisecond), h, offline)
	for i := range calls {
		if r := lb.call(ws, caller, `{"endpoint":"/api/ping","payload":{}}`); r.err != nil || !r.resp.Success {
			t.Fatalf("call %d through the balancer after %s stopped: %v %+v", i, h, r.err, r.resp)
		}
	}
}

// runDocBlock runs, with bash in dir, the first ```sh block of
// docs/deploy.md under the heading, with this run's tether first on PATH.
func runDocBlock(t *testing.T, dir, heading string) {
	t.Helper()
	doc, err := os.ReadFile("../docs/deploy.md")
	if err != nil {
		t.Fatal(err)
	}
	_, rest, ok := strings.Cut(string(doc), "\n"+heading+"\n")
	if !ok {
		t.Fatalf("docs/deploy.md has no %q", heading)
	}
	_, rest, ok = strings.Cut(rest, "```sh\n")
	block, _, ok2 := strings.Cut(rest, "```")
	if !ok || !ok2 {
		t.Fatalf("docs/deploy.md: no sh block under %q", heading)
	}
	cmd := exec.Command("bash", "-euo", "pipefail", "-c", block)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "PATH="+filepath.Dir(tetherBin)+":"+os.Getenv("PATH"))
	if filepath.Base(tetherBin) != "tether" {
		t.Fatalf("TETHER_BIN %s is not named tether: the doc's commands would not find it", tetherBin)
	}
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("the commands under %q in docs/deploy.md failed: %v\n%s\n%s", heading, err, block, out)
	}
}

// haproxyConfig writes deploy/compose/haproxy.cfg with this test's
// addresses and files: the balancer on 127.0.0.1:port, the files from dir,
// and the server lines of docs/deploy.md for brokers on other hosts (each
// checked by its own name).
func haproxyConfig(t *testing.T, dir string, port int, brokers []*brokerProc) string {
	t.Helper()
	raw, err := os.ReadFile("../deploy/compose/haproxy.cfg")
	if err != nil {
		t.Fatal(err)
	}
	cfg := string(raw)
	replace := func(old, new string) {
		t.Helper()
		if strings.Count(cfg, old) != 1 {
			t.Fatalf("deploy/compose/haproxy.cfg: %q occurs %d times, want once (update this test)", old, strings.Count(cfg, old))
		}
		cfg = strings.Replace(cfg, old, new, 1)
	}
	replace("bind :8443 ssl crt /run/secrets/haproxy.pem", fmt.Sprintf("bind 127.0.0.1:%d ssl crt %s", port, filepath.Join(dir, "haproxy.pem")))
	replace("ca-file /run/secrets/broker-ca.crt", "ca-file "+filepath.Join(dir, "ca.crt"))
	// Docker's resolver: none here, and the servers are addresses.
	replace("resolvers docker init-addr last,libc,none ", "")
	serverRE := regexp.MustCompile(`(?m)^    server broker-(\d) broker-\d:8443$`)
	if n := len(serverRE.FindAllString(cfg, -1)); n != 2*len(brokers) {
		t.Fatalf("deploy/compose/haproxy.cfg has %d broker server lines, want %d (two backends)", n, 2*len(brokers))
	}
	cfg = serverRE.ReplaceAllStringFunc(cfg, func(line string) string {
		i, _ := strconv.Atoi(serverRE.FindStringSubmatch(line)[1])
		return fmt.Sprintf("    server broker-%d %s verifyhost broker-%d.internal sni str(broker-%d.internal)", i, brokers[i-1].addr(), i, i)
	})
	// Logs to stderr, which the harness keeps.
	replace("log stdout format raw local0", "log stderr format raw local0")
	path := filepath.Join(dir, "haproxy.cfg")
	if err := os.WriteFile(path, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("haproxy", "-c", "-f", path).CombinedOutput(); err != nil {
		t.Fatalf("haproxy -c: %v\n%s", err, out)
	}
	return path
}

// caClient trusts the PEM CA in file and expects name in the certificate,
// whatever address it connects to.
func caClient(t *testing.T, file, name string) *http.Client {
	t.Helper()
	pem, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		t.Fatalf("%s holds no certificate", file)
	}
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.TLSClientConfig = &tls.Config{RootCAs: pool, ServerName: name, MinVersion: tls.VersionTLS12}
	return &http.Client{Transport: tr, Timeout: 30 * time.Second}
}

func concat(t *testing.T, dst string, srcs ...string) {
	t.Helper()
	var all []byte
	for _, s := range srcs {
		b, err := os.ReadFile(s)
		if err != nil {
			t.Fatal(err)
		}
		all = append(all, b...)
	}
	if err := os.WriteFile(dst, all, 0o600); err != nil {
		t.Fatal(err)
	}
}

// lbStatus is the status of a GET of path through the balancer, 0 when it
// does not answer.
func lbStatus(lb *brokerProc, path string) int {
	res, err := lb.httpClient().Get(lb.url + path)
	if err != nil {
		return 0
	}
	_, _ = io.Copy(io.Discard, res.Body)
	res.Body.Close()
	return res.StatusCode
}

// brokerMetric reads one sample of b's /metrics over its TLS client.
func brokerMetric(t *testing.T, b *brokerProc, name string) float64 {
	t.Helper()
	res, err := b.httpClient().Get(b.url + "/metrics")
	if err != nil {
		t.Fatalf("%s: reading metrics: %v", b.name, err)
	}
	defer res.Body.Close()
	body, _ := io.ReadAll(res.Body)
	for _, line := range strings.Split(string(body), "\n") {
		if v, ok := strings.CutPrefix(line, name+" "); ok {
			f, err := strconv.ParseFloat(v, 64)
			if err != nil {
				t.Fatalf("%s: %s = %q", b.name, name, v)
			}
			return f
		}
	}
	return 0 // a labelled counter not counted yet has no sample
}
