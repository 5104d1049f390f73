package bench

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"
)

// topoTLS is the TLS topology of BenchmarkPeers: one instance, as
// topoSingle, but every system serves HTTPS and WSS with the same
// certificate (benchCert), the echo client verifies it through
// socket.io-client's ca option and the load generator through crypto/tls,
// each of its connections handshaking once and then kept alive.
const topoTLS = "tls"

// benchPKI is the bench's certificate authority and the one server
// certificate (ECDSA P-256, for 127.0.0.1) every system serves.
type benchPKI struct {
	caPEM, certPEM, keyPEM []byte
	roots                  *x509.CertPool
}

// benchCert makes the bench's certificates once per process.
var benchCert = sync.OnceValue(func() *benchPKI {
	must := func(err error) {
		if err != nil {
			panic("bench certificates: " + err.Error())
		}
	}
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	must(err)
	now := time.Now()
	caTmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "tether bench CA"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(7 * 24 * time.Hour),
		KeyUsage: x509.KeyUsageCertSign, BasicConstraintsValid: true, IsCA: true}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	must(err)
	ca, err := x509.ParseCertificate(caDER)
	must(err)
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	must(err)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: "127.0.0.1"},
		IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)}, DNSNames: []string{"localhost"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(7 * 24 * time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
	must(err)
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	must(err)
	roots := x509.NewCertPool()
	roots.AddCert(ca)
	return &benchPKI{
		caPEM:   pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER}),
		certPEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		keyPEM:  pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: keyDER}),
		roots:   roots,
	}
})

// benchTLSFiles writes the CA certificate and the server's certificate and
// key to a directory of tb's and returns their paths.
func benchTLSFiles(tb testing.TB) (caFile, certFile, keyFile string) {
	tb.Helper()
	pki := benchCert()
	dir := childDir(tb, "tls")
	caFile, certFile, keyFile = filepath.Join(dir, "ca.pem"), filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
	for name, data := range map[string][]byte{caFile: pki.caPEM, certFile: pki.certPEM, keyFile: pki.keyPEM} {
		if err := os.WriteFile(name, data, 0o600); err != nil {
			tb.Fatal(err)
		}
	}
	return caFile, certFile, keyFile
}

// benchClientTLS is how the bench's own clients (the load generator, the
// control client) trust the servers over TLS.
func benchClientTLS() *tls.Config {
	return &tls.Config{RootCAs: benchCert().roots, MinVersion: tls.VersionTLS12, NextProtos: []string{"http/1.1"}}
}
