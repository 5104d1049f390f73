// Package tlsclient is how tether's clients (tether bridge, call, calls,
// mcp and the caller package) trust a broker's certificate, and how a
// broker trusts its Redis (rediss://, --redis-ca): the one place their
// tls.Config is built, their TLS handshakes are made, a certificate that
// does not verify is explained, and skipping verification is warned about.
//
// Trust: the system's roots by default; with a CA file (--ca), that file's
// certificates only, not added to the system's: a client told to trust a
// private CA for its broker has no reason to also accept a certificate some
// public CA issued for that name.
package tlsclient

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"time"

	"github.com/rs/zerolog"

	"github.com/tetherdev/tether/internal/rawnet"
)

// Options say whom a client trusts.
type Options struct {
	// CAFile is a PEM file of the CA certificates to trust instead of the
	// system's.
	CAFile string
	// InsecureSkipVerify accepts any certificate (tests only); every
	// connection made so logs a warning on Logger.
	InsecureSkipVerify bool
	// Logger gets the warning of InsecureSkipVerify.
	Logger zerolog.Logger
	// Peer names the server in errors and warnings: "the broker" if
	// empty ("Redis" for the broker's Redis connections).
	Peer string
	// CAFlag is the option an untrusted certificate's error tells the
	// user to pass: "--ca" if empty.
	CAFlag string
	// Protocols are the ALPN protocols offered: http/1.1 if nil (a
	// broker speaks nothing else); empty but not nil offers none (Redis
	// negotiates no protocol).
	Protocols []string
	// ClientCertificate, if set, answers a server that asks for a client
	// certificate (tls.Config.GetClientCertificate): Redis with
	// tls-auth-clients yes. It is called for every full handshake, so a
	// pair re-read from its files reaches new connections; with it,
	// sessions are not resumed (a resumed one would keep the certificate
	// it began with).
	ClientCertificate func(*tls.CertificateRequestInfo) (*tls.Certificate, error)
}

// Dialer dials TLS connections to a broker. The zero value is not usable:
// make one with New. It is safe for concurrent use.
type Dialer struct {
	cfg    *tls.Config
	log    zerolog.Logger
	peer   string
	caFlag string
	// Dial opens the TCP connection (rawnet's dialer by default).
	dial func(ctx context.Context, network, addr string) (net.Conn, error)
}

// New builds a Dialer from o; a CA file that cannot be read or holds no
// certificate is an error naming it.
func New(o Options) (*Dialer, error) {
	cfg := &tls.Config{
		MinVersion: tls.VersionTLS12,
		// tether's clients speak HTTP/1.1 (the call API, WebSocket
		// upgrades); a broker offers nothing else.
		NextProtos: o.Protocols,
		// Resumed sessions skip the certificate exchange and its
		// signature when a client connects again (a bridge reconnecting,
		// a short-lived tether call).
		ClientSessionCache:   tls.NewLRUClientSessionCache(64),
		GetClientCertificate: o.ClientCertificate,
	}
	if o.Protocols == nil {
		cfg.NextProtos = []string{"http/1.1"}
	}
	if o.ClientCertificate != nil {
		// A resumed session keeps the client identity it began with: a
		// certificate re-read (or refused) would not reach the servers
		// this client had met before.
		cfg.ClientSessionCache = nil
	}
	peer, caFlag := o.Peer, o.CAFlag
	if peer == "" {
		peer = "the broker"
	}
	if caFlag == "" {
		caFlag = "--ca"
	}
	if o.CAFile != "" {
		pool, err := CAPool(o.CAFile)
		if err != nil {
			return nil, err
		}
		cfg.RootCAs = pool
	}
	if o.InsecureSkipVerify {
		cfg.InsecureSkipVerify = true
	}
	return &Dialer{cfg: cfg, log: o.Logger, peer: peer, caFlag: caFlag,
		dial: rawnet.Dial(&net.Dialer{Timeout: 30 * time.Second, KeepAlive: 30 * time.Second})}, nil
}

// Config is a copy of the client configuration, for a client that makes
// its own TLS connections (ServerName is left for it to set). Connections
// made with it do not log the warning of InsecureSkipVerify: use
// DialTLSContext or Client where one can.
func (d *Dialer) Config() *tls.Config { return d.cfg.Clone() }

// DialTLSContext dials addr (host:port) and completes the TLS handshake,
// verifying the certificate for host (http.Transport.DialTLSContext's
// shape). A certificate that does not verify is an error that says so.
func (d *Dialer) DialTLSContext(ctx context.Context, network, addr string) (net.Conn, error) {
	nc, err := d.dial(ctx, network, addr)
	if err != nil {
		return nil, err
	}
	tc, err := d.Client(ctx, nc, addr)
	if err != nil {
		_ = nc.Close()
		return nil, err
	}
	return tc, nil
}

// Client runs the TLS handshake on nc, a connection to addr (host:port),
// until ctx ends. The caller closes nc on error.
func (d *Dialer) Client(ctx context.Context, nc net.Conn, addr string) (*tls.Conn, error) {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		host = addr
	}
	cfg := d.cfg
	if cfg.ServerName == "" {
		cfg = cfg.Clone()
		cfg.ServerName = host
	}
	if d.cfg.InsecureSkipVerify {
		d.log.Warn().Str("broker", addr).Msg("--insecure-skip-verify: the broker's certificate is not checked; anyone on the path can read and change this connection")
	}
	tc := tls.Client(nc, cfg)
	if err := tc.HandshakeContext(ctx); err != nil {
		return nil, d.explain(err)
	}
	return tc, nil
}

// Transport is an http.Transport whose https connections are this
// Dialer's and whose plain ones are read and written through rawnet.
func (d *Dialer) Transport() *http.Transport {
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.DialContext = d.dial
	t.DialTLSContext = d.DialTLSContext
	t.ForceAttemptHTTP2 = false
	return t
}

// ErrUntrusted is what Explain wraps a certificate that does not verify in.
var ErrUntrusted = errors.New("the broker's certificate is not trusted")

// Explain turns a failed certificate verification into an error that says
// what to do about it; other errors are returned as they are.
func Explain(err error) error {
	return explain(err, "the broker", "--ca")
}

// explain is Explain in the Dialer's words.
func (d *Dialer) explain(err error) error { return explain(err, d.peer, d.caFlag) }

func explain(err error, peer, caFlag string) error {
	var (
		ve  *tls.CertificateVerificationError
		ua  x509.UnknownAuthorityError
		he  x509.HostnameError
		inv x509.CertificateInvalidError
	)
	if errors.As(err, &ve) || errors.As(err, &ua) || errors.As(err, &he) || errors.As(err, &inv) {
		return &untrusted{err: err, peer: peer, caFlag: caFlag}
	}
	return err
}

// untrusted is a verification failure with its advice.
type untrusted struct {
	err          error
	peer, caFlag string
}

func (u *untrusted) Error() string {
	return fmt.Sprintf("%s's certificate is not trusted: %v; pass %s FILE with the CA that signed it", u.peer, u.err, u.caFlag)
}

func (u *untrusted) Unwrap() []error { return []error{ErrUntrusted, u.err} }

// CAPool reads the PEM certificates of file into a pool to trust instead
// of the system's roots; a file that cannot be read or holds no
// certificate is an error naming it.
func CAPool(file string) (*x509.CertPool, error) {
	pem, err := os.ReadFile(file)
	if err != nil {
		return nil, fmt.Errorf("reading the CA file: %w", err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		return nil, fmt.Errorf("the CA file %s holds no PEM certificate", file)
	}
	return pool, nil
}
