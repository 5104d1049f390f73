package tlsclient_test

import (
	"bytes"
	"context"
	"encoding/pem"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/tetherdev/tether/tlsclient"
)

// tlsServer is an HTTPS test server and a file holding its certificate
// (self-signed: its own CA).
func tlsServer(t *testing.T) (*httptest.Server, string) {
	t.Helper()
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { _, _ = w.Write([]byte("ok")) }))
	t.Cleanup(srv.Close)
	caFile := filepath.Join(t.TempDir(), "ca.pem")
	if err := os.WriteFile(caFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw}), 0o600); err != nil {
		t.Fatal(err)
	}
	return srv, caFile
}

func get(t *testing.T, d *tlsclient.Dialer, url string) error {
	t.Helper()
	tr := d.Transport()
	defer tr.CloseIdleConnections()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	res, err := (&http.Client{Transport: tr}).Do(req)
	if err != nil {
		return err
	}
	return res.Body.Close()
}

func TestDialerWithTheCAFileVerifiesTheServer(t *testing.T) {
	srv, caFile := tlsServer(t)
	d, err := tlsclient.New(tlsclient.Options{CAFile: caFile})
	if err != nil {
		t.Fatal(err)
	}
	if err := get(t, d, srv.URL); err != nil {
		t.Fatalf("a server signed by the CA file: %v", err)
	}
}

func TestDialerRefusesAnUntrustedCertificateSayingWhatToDo(t *testing.T) {
	srv, _ := tlsServer(t)
	d, err := tlsclient.New(tlsclient.Options{})
	if err != nil {
		t.Fatal(err)
	}
	err = get(t, d, srv.URL)
	if !errors.Is(err, tlsclient.ErrUntrusted) || !strings.Contains(err.Error(), "the broker's certificate is not trusted: ") ||
		!strings.Contains(err.Error(), "x509: ") || !strings.Contains(err.Error(), "pass --ca FILE with the CA that signed it") {
		t.Fatalf("an untrusted certificate: %v", err)
	}
}

func TestInsecureSkipVerifyConnectsAndWarnsOnEveryConnection(t *testing.T) {
	srv, _ := tlsServer(t)
	var logs bytes.Buffer
	d, err := tlsclient.New(tlsclient.Options{InsecureSkipVerify: true, Logger: zerolog.New(&logs)})
	if err != nil {
		t.Fatal(err)
	}
	for range 2 {
		if err := get(t, d, srv.URL); err != nil { // a new transport: a new connection
			t.Fatal(err)
		}
	}
	if n := strings.Count(logs.String(), "--insecure-skip-verify"); n != 2 {
		t.Fatalf("two connections logged %d warnings: %s", n, logs.String())
	}
}

func TestNewRefusesACAFileThatIsMissingOrHoldsNoCertificate(t *testing.T) {
	dir := t.TempDir()
	garbage := filepath.Join(dir, "garbage.pem")
	if err := os.WriteFile(garbage, []byte("not pem"), 0o600); err != nil {
		t.Fatal(err)
	}
	for file, want := range map[string]string{filepath.Join(dir, "none.pem"): "none.pem", garbage: "holds no PEM certificate"} {
		if _, err := tlsclient.New(tlsclient.Options{CAFile: file}); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("CA file %s: %v, want %q", filepath.Base(file), err, want)
		}
	}
}
