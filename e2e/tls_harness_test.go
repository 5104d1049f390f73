package e2e_test

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
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// testCA is a certificate authority made for one test, its certificate in
// a PEM file that the clients under test are given (--ca, ca, ssl verify).
type testCA struct {
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
	file string // the CA certificate, PEM
	pool *x509.CertPool
}

func newTestCA(t *testing.T) *testCA {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber:          randSerial(t),
		Subject:               pkix.Name{CommonName: "tether e2e test CA"},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(24 * time.Hour),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, _ := x509.ParseCertificate(der)
	file := filepath.Join(t.TempDir(), "ca.pem")
	writePEM(t, file, "CERTIFICATE", der)
	pool := x509.NewCertPool()
	pool.AddCert(cert)
	return &testCA{cert: cert, key: key, file: file, pool: pool}
}

func randSerial(t *testing.T) *big.Int {
	t.Helper()
	n, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 62))
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// issue writes a server certificate for 127.0.0.1 and localhost, signed by
// the CA, to certFile and keyFile (each replaced by a rename, as a
// renewal tool does) and returns its serial number.
func (ca *testCA) issue(t *testing.T, certFile, keyFile string) *big.Int {
	t.Helper()
	return ca.issueFor(t, certFile, keyFile, x509.ExtKeyUsageServerAuth)
}

// issueClient is issue for a client certificate (a broker's to its Redis).
func (ca *testCA) issueClient(t *testing.T, certFile, keyFile string) *big.Int {
	t.Helper()
	return ca.issueFor(t, certFile, keyFile, x509.ExtKeyUsageClientAuth)
}

func (ca *testCA) issueFor(t *testing.T, certFile, keyFile string, usage ...x509.ExtKeyUsage) *big.Int {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: randSerial(t),
		Subject:      pkix.Name{CommonName: "localhost"},
		DNSNames:     []string{"localhost"},
		IPAddresses:  []net.IP{net.IPv4(127, 0, 0, 1)},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(24 * time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  usage,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	writePEM(t, keyFile, "PRIVATE KEY", keyDER)
	writePEM(t, certFile, "CERTIFICATE", der)
	return tmpl.SerialNumber
}

// writePEM writes one PEM block to name through a temporary file and a
// rename: a reader never sees half of it.
func writePEM(t *testing.T, name, typ string, der []byte) {
	t.Helper()
	tmp := name + ".tmp"
	if err := os.WriteFile(tmp, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, name); err != nil {
		t.Fatal(err)
	}
}

// tlsConfig trusts the CA alone.
func (ca *testCA) tlsConfig() *tls.Config {
	return &tls.Config{RootCAs: ca.pool, MinVersion: tls.VersionTLS12}
}

// client is an HTTP client trusting the CA.
func (ca *testCA) client() *http.Client {
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.TLSClientConfig = ca.tlsConfig()
	return &http.Client{Transport: t, Timeout: 30 * time.Second}
}

// tlsBroker is a broker serving HTTPS and WSS with a certificate of its
// test CA, kept in files the test may replace.
type tlsBroker struct {
	*brokerProc
	ca                *testCA
	certFile, keyFile string
	serial            *big.Int // of the certificate issued first
}

// startTLSBroker runs `tether broker --tls-cert --tls-key` with a fresh CA
// and certificate, and waits until it listens.
func startTLSBroker(t *testing.T, extra ...string) *tlsBroker {
	t.Helper()
	ca := newTestCA(t)
	dir := t.TempDir()
	tb := &tlsBroker{ca: ca, certFile: filepath.Join(dir, "cert.pem"), keyFile: filepath.Join(dir, "key.pem")}
	tb.serial = ca.issue(t, tb.certFile, tb.keyFile)
	b := runBroker(t, "broker", "127.0.0.1:0", nil, append([]string{"--tls-cert", tb.certFile, "--tls-key", tb.keyFile}, extra...)...)
	b.url = "https://" + strings.TrimPrefix(b.url, "http://")
	b.client = ca.client()
	tb.brokerProc = b
	return tb
}

// addr is the broker's host:port.
func (b *brokerProc) addr() string {
	return strings.TrimPrefix(strings.TrimPrefix(b.url, "https://"), "http://")
}

// servedSerial makes a new TLS handshake with the broker (no session
// resumption) and returns the serial number of the certificate it shows.
func (tb *tlsBroker) servedSerial(t *testing.T) *big.Int {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	d := tls.Dialer{Config: tb.ca.tlsConfig()}
	c, err := d.DialContext(ctx, "tcp", tb.addr())
	if err != nil {
		t.Fatalf("handshake with the broker: %v", err)
	}
	defer c.Close()
	return c.(*tls.Conn).ConnectionState().PeerCertificates[0].SerialNumber
}
