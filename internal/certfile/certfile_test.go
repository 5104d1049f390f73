package certfile

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/tetherdev/tether/internal/testwait"
)

// writePair writes a self-signed certificate with serial and its key,
// each through a rename.
func writePair(t testing.TB, certFile, keyFile string, serial int64) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(serial), Subject: pkix.Name{CommonName: "localhost"}, DNSNames: []string{"localhost"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour)}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, _ := x509.MarshalPKCS8PrivateKey(key)
	write(t, keyFile, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: keyDER}))
	write(t, certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}))
}

func write(t testing.TB, name string, data []byte) {
	t.Helper()
	if err := os.WriteFile(name+".tmp", data, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(name+".tmp", name); err != nil {
		t.Fatal(err)
	}
}

func served(t *testing.T, p *Pair) int64 {
	t.Helper()
	c, err := p.GetCertificate(&tls.ClientHelloInfo{})
	if err != nil || c == nil || c.Leaf == nil {
		t.Fatalf("GetCertificate: %v %v", c, err)
	}
	return c.Leaf.SerialNumber.Int64()
}

func TestReloadKeepsTheOldPairWhenTheNewOneDoesNotLoad(t *testing.T) {
	dir := t.TempDir()
	cert, key := filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
	writePair(t, cert, key, 1)
	p, err := Load(cert, key, zerolog.Nop())
	if err != nil {
		t.Fatal(err)
	}
	write(t, key, []byte("garbage"))
	if err := p.Reload(); err == nil || !strings.Contains(err.Error(), key) {
		t.Fatalf("reloading a bad key: %v, want an error naming %s", err, key)
	}
	if got := served(t, p); got != 1 {
		t.Fatalf("after a bad reload the pair served is serial %d, want 1", got)
	}
	writePair(t, cert, key, 2)
	if err := p.Reload(); err != nil {
		t.Fatal(err)
	}
	if got := served(t, p); got != 2 {
		t.Fatalf("after a good reload serial %d, want 2", got)
	}
}

func TestWatchReloadsWhenTheFilesAreReplaced(t *testing.T) {
	dir := t.TempDir()
	cert, key := filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
	writePair(t, cert, key, 1)
	p, err := Load(cert, key, zerolog.Nop())
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	ctx, cancel := context.WithCancel(context.Background())
	defer func() { cancel(); <-done }()
	go func() { defer close(done); p.Watch(ctx, 10*time.Millisecond) }()
	writePair(t, cert, key, 7)
	testwait.Until(t, 5*time.Second, func() bool { return served(t, p) == 7 }, "the watch serving serial 7")
}

func TestLoadNamesTheFileAtFault(t *testing.T) {
	dir := t.TempDir()
	cert, key := filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
	writePair(t, cert, key, 1)
	otherCert, otherKey := filepath.Join(dir, "o-cert.pem"), filepath.Join(dir, "o-key.pem")
	writePair(t, otherCert, otherKey, 2)
	for _, tc := range []struct {
		cert, key, want string
	}{
		{filepath.Join(dir, "none.pem"), key, "none.pem"},
		{cert, filepath.Join(dir, "none.pem"), "none.pem"},
		{key, key, "the certificate file " + key + " holds no PEM CERTIFICATE block"},
		{cert, cert, "the key file " + cert + " holds no PEM PRIVATE KEY block"},
		{cert, otherKey, "private key does not match public key"},
	} {
		if _, err := Load(tc.cert, tc.key, zerolog.Nop()); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Load(%s, %s): %v, want %q", filepath.Base(tc.cert), filepath.Base(tc.key), err, tc.want)
		}
	}
}

// FuzzLoad: whatever the two files hold, loading them answers (a pair
// with its leaf, or an error naming a file) without panicking.
func FuzzLoad(f *testing.F) {
	dir := f.TempDir()
	cert, key := filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
	writePair(f, cert, key, 1)
	certPEM, _ := os.ReadFile(cert)
	keyPEM, _ := os.ReadFile(key)
	f.Add(certPEM, keyPEM)
	f.Add(keyPEM, certPEM)
	f.Fuzz(func(t *testing.T, c, k []byte) {
		p, err := parse(c, k, "/c.pem", "/k.pem")
		if err != nil {
			if !strings.Contains(err.Error(), "/c.pem") && !strings.Contains(err.Error(), "/k.pem") {
				t.Fatalf("an error that names no file: %v", err)
			}
			return
		}
		if p.Leaf == nil {
			t.Fatal("a pair loaded without its leaf")
		}
	})
}
