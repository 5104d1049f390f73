package e2e_test

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/tetherdev/tether/broker/auth"
	"github.com/tetherdev/tether/internal/testwait"
)

// pebble is a real ACME server (github.com/letsencrypt/pebble, pinned by
// make deps-tools) on loopback, validating every challenge without looking
// (PEBBLE_VA_ALWAYS_VALID: nothing can reach this machine's names).
type pebble struct {
	*proc
	directory string // the ACME directory URL
	mgmt      string // the management API's base URL
	ca        *testCA
}

func startPebble(t *testing.T) *pebble {
	t.Helper()
	bin, err := exec.LookPath("pebble")
	if err != nil {
		// make deps-tools puts it in the repository's .bin, which is on
		// make's PATH but not go test's.
		_, file, _, _ := runtime.Caller(0)
		bin = filepath.Join(filepath.Dir(file), "..", ".bin", "pebble")
		_, err = os.Stat(bin)
	}
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatal("pebble is not installed (make deps-tools installs it in .bin)")
		}
		t.Skip("pebble is not installed; run make deps-tools")
	}
	// Pebble's own HTTPS listeners, with a certificate of a test CA.
	ca := newTestCA(t)
	dir := t.TempDir()
	cert, key := filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
	ca.issue(t, cert, key)
	acmePort, mgmtPort := freePort(t), freePort(t)
	config := map[string]any{"pebble": map[string]any{
		"listenAddress":                  fmt.Sprintf("127.0.0.1:%d", acmePort),
		"managementListenAddress":        fmt.Sprintf("127.0.0.1:%d", mgmtPort),
		"certificate":                    cert,
		"privateKey":                     key,
		"httpPort":                       freePort(t), // unused: every challenge is valid
		"tlsPort":                        freePort(t),
		"ocspResponderURL":               "",
		"externalAccountBindingRequired": false,
		"retryAfter":                     map[string]int{"authz": 1, "order": 1},
		"keyAlgorithm":                   "ecdsa",
		"profiles":                       map[string]any{"default": map[string]any{"description": "tether e2e", "validityPeriod": 7776000}},
	}}
	raw, _ := json.Marshal(config)
	configFile := filepath.Join(dir, "pebble.json")
	if err := os.WriteFile(configFile, raw, 0o600); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "-config", configFile)
	cmd.Env = append(os.Environ(), "PEBBLE_VA_ALWAYS_VALID=1", "PEBBLE_VA_NOSLEEP=1", "PEBBLE_WFE_NONCEREJECT=0")
	p := start(t, "pebble", cmd)
	pb := &pebble{proc: p, directory: fmt.Sprintf("https://127.0.0.1:%d/dir", acmePort), mgmt: fmt.Sprintf("https://127.0.0.1:%d", mgmtPort), ca: ca}
	client := ca.client()
	testwait.Until(t, 20*time.Second, func() bool {
		res, err := client.Get(pb.directory)
		if err != nil {
			return false
		}
		res.Body.Close()
		return res.StatusCode == http.StatusOK
	}, "pebble serving its directory")
	return pb
}

// root is pebble's root certificate (it makes a new one each start),
// fetched from its management API.
func (pb *pebble) root(t *testing.T) []byte {
	t.Helper()
	res, err := pb.ca.client().Get(pb.mgmt + "/roots/0")
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	pemRoot, _ := io.ReadAll(res.Body)
	if res.StatusCode != http.StatusOK || !strings.Contains(string(pemRoot), "BEGIN CERTIFICATE") {
		t.Fatalf("pebble's root: %d %q", res.StatusCode, pemRoot)
	}
	return pemRoot
}

func TestACMEBrokerGetsItsCertificateFromPebbleAndAClientTrustingPebbleCalls(t *testing.T) {
	pb := startPebble(t)
	const name = "tether.test"
	cache := filepath.Join(t.TempDir(), "acme")
	b := runBroker(t, "broker", "127.0.0.1:0", nil,
		"--acme-domain", name, "--acme-dir", cache, "--acme-directory", pb.directory, "--acme-ca", pb.ca.file, "--acme-email", "ops@tether.test")
	addr := strings.TrimPrefix(b.url, "http://")
	b.url = "https://" + addr

	roots := x509.NewCertPool()
	if !roots.AppendCertsFromPEM(pb.root(t)) {
		t.Fatal("pebble's root does not parse")
	}
	// The certificate is obtained on the first handshake that asks for the
	// name (TLS-ALPN-01 on this same port; pebble does not check it here).
	tlsCfg := &tls.Config{RootCAs: roots, ServerName: name, MinVersion: tls.VersionTLS12}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	started := time.Now()
	conn, err := (&tls.Dialer{Config: tlsCfg}).DialContext(ctx, "tcp", addr)
	if err != nil {
		t.Fatalf("handshake for %s trusting pebble's root: %v", name, err)
	}
	leaf := conn.(*tls.Conn).ConnectionState().PeerCertificates[0]
	_ = conn.Close()
	if !slices.Contains(leaf.DNSNames, name) {
		t.Fatalf("the broker served a certificate for %v", leaf.DNSNames)
	}
	t.Logf("certificate for %s from pebble in %v (serial %v)", name, time.Since(started), leaf.SerialNumber)
	if _, err := os.Stat(filepath.Join(cache, name)); err != nil {
		t.Fatalf("the certificate is not cached in --acme-dir: %v", err)
	}

	// A workspace (a bridge that skips verification: it dials 127.0.0.1,
	// not the name), and a call from a client that trusts pebble's root.
	start(t, "bridge ws-acme", bridgeCmd(b, "ws-acme", token(t, auth.RoleBridge, "ws-acme"), t.TempDir(), "--insecure-skip-verify"))
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.TLSClientConfig = tlsCfg
	tr.DialContext = func(ctx context.Context, network, _ string) (net.Conn, error) {
		return (&net.Dialer{}).DialContext(ctx, network, addr)
	}
	b.client = &http.Client{Transport: tr, Timeout: 30 * time.Second}
	b.url = "https://" + name + ":" + addr[strings.LastIndexByte(addr, ':')+1:]
	testwait.Until(t, 10*time.Second, func() bool { return b.holds("ws-acme") }, "%s holding ws-acme", b.name)
	r := b.call("ws-acme", token(t, auth.RoleCaller, "ws-acme"), pingBody)
	if r.err != nil || !r.resp.Success {
		t.Fatalf("call over the ACME certificate: %+v %v", r.resp, r.err)
	}
}
