package bus

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"errors"
	"io"
	"math/big"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/tetherdev/tether/broker/bus/redistest"
	"github.com/tetherdev/tether/tlsclient"
)

// insecureDialer trusts any certificate: these tests are about the dial's
// timing, not about trust (e2e/redis_tls_test.go checks that with a CA).
func insecureDialer(t *testing.T) *tlsclient.Dialer {
	t.Helper()
	d, err := tlsclient.New(tlsclient.Options{InsecureSkipVerify: true, Protocols: []string{}, Peer: "Redis"})
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// TestRedisTLSDialToPlaintextRedisFailsWithinASecond: a TLS dial to a real
// redis-server that speaks plaintext ends with ErrRedisNotTLS long before
// its dial timeout, found by the plaintext probe.
func TestRedisTLSDialToPlaintextRedisFailsWithinASecond(t *testing.T) {
	srv := redistest.Start(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	start := time.Now()
	c, err := dialRedisTLS(ctx, insecureDialer(t), "tcp", srv.Addr())
	took := time.Since(start)
	if err == nil {
		_ = c.Close()
		t.Fatal("a TLS dial to a plaintext Redis succeeded")
	}
	if !errors.Is(err, ErrRedisNotTLS) || took > time.Second {
		t.Fatalf("after %s: %v; want ErrRedisNotTLS within 1s", took, err)
	}
	t.Logf("plaintext Redis found in %s", took.Round(time.Millisecond))
}

// TestRedisTLSDialWaitsForASlowTLSServer: a TLS server that answers the
// ClientHello only after the probe fired is not taken for a plaintext one:
// the probe's PING gets no RESP reply from it, and the handshake completes.
func TestRedisTLSDialWaitsForASlowTLSServer(t *testing.T) {
	const delay = 3 * plainProbeAfter
	ln := slowTLSServer(t, delay)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	start := time.Now()
	c, err := dialRedisTLS(ctx, insecureDialer(t), "tcp", ln.Addr().String())
	if err != nil {
		t.Fatalf("dial to a slow TLS server: %v", err)
	}
	_ = c.Close()
	if took := time.Since(start); took < delay {
		t.Fatalf("the handshake completed after %s, before the server answered (%s)", took, delay)
	}
}

// TestRedisTLSDialEndsAtTheDialTimeout: a server that accepts and never
// says a word (neither TLS nor RESP) holds the dial no longer than its
// context, the dial timeout go-redis gives it.
func TestRedisTLSDialEndsAtTheDialTimeout(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	t.Cleanup(func() { _ = ln.Close(); wg.Wait() })
	wg.Go(func() {
		var conns []net.Conn
		defer func() {
			for _, c := range conns {
				_ = c.Close()
			}
		}()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			conns = append(conns, c) // held open, silent
		}
	})
	const timeout = 700 * time.Millisecond
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	start := time.Now()
	_, err = dialRedisTLS(ctx, insecureDialer(t), "tcp", ln.Addr().String())
	took := time.Since(start)
	if err == nil || !errors.Is(err, context.DeadlineExceeded) || took > timeout+300*time.Millisecond {
		t.Fatalf("after %s: %v; want the dial timeout (%s)", took, err, timeout)
	}
}

// slowTLSServer accepts TLS connections and starts each handshake only
// after delay; it is closed in t.Cleanup.
func slowTLSServer(t *testing.T, delay time.Duration) net.Listener {
	t.Helper()
	cfg := &tls.Config{Certificates: []tls.Certificate{selfSigned(t)}, MinVersion: tls.VersionTLS12}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	t.Cleanup(func() { _ = ln.Close(); wg.Wait() })
	wg.Go(func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			wg.Go(func() {
				defer c.Close()
				time.Sleep(delay) // the slowness under test
				tc := tls.Server(c, cfg)
				_ = tc.SetDeadline(time.Now().Add(5 * time.Second))
				if tc.Handshake() == nil {
					_, _ = io.Copy(io.Discard, tc) // until the client closes
				}
			})
		}
	})
	return ln
}

func selfSigned(t *testing.T) tls.Certificate {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1),
		Subject:      pkix.Name{CommonName: "127.0.0.1"},
		IPAddresses:  []net.IP{net.IPv4(127, 0, 0, 1)},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(time.Hour),
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}
}
