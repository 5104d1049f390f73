package main

import (
	"context"
	"crypto/tls"
	"flag"
	"fmt"
	"net/http"
	"os"
	"sync"
	"time"

	"github.com/rs/zerolog"
	"golang.org/x/crypto/acme"
	"golang.org/x/crypto/acme/autocert"

	"github.com/tetherdev/tether/broker/caller"
	"github.com/tetherdev/tether/internal/certfile"
	"github.com/tetherdev/tether/tlsclient"
)

// tlsFlags are the broker's TLS: a certificate from files, or from an ACME
// CA (Let's Encrypt). Without either the broker serves plaintext.
type tlsFlags struct {
	cert, key     string
	watch         time.Duration
	acmeDomains   stringList
	acmeDir       string
	acmeDirectory string
	acmeCA        string
	acmeEmail     string
}

func (f *tlsFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&f.cert, "tls-cert", "", "PEM certificate (chain) to serve HTTPS and WSS with; re-read on SIGHUP and when the file changes")
	fs.StringVar(&f.key, "tls-key", "", "PEM private key of --tls-cert")
	fs.DurationVar(&f.watch, "tls-watch", 2*time.Second, "how often --tls-cert and --tls-key are checked for a change (two stat calls); 0: only on SIGHUP")
	fs.Var(&f.acmeDomains, "acme-domain", "get and renew a certificate for this name from an ACME CA (repeatable; TLS-ALPN-01 on this port, which must be the name's port 443)")
	fs.StringVar(&f.acmeDir, "acme-dir", "", "directory caching the ACME account key and certificates (required with --acme-domain)")
	fs.StringVar(&f.acmeDirectory, "acme-directory", acme.LetsEncryptURL, "ACME directory URL")
	fs.StringVar(&f.acmeCA, "acme-ca", "", "PEM CA file trusted for the ACME server's own HTTPS (a private ACME server)")
	fs.StringVar(&f.acmeEmail, "acme-email", "", "contact address given to the ACME CA")
}

// serverConfig is the broker's tls.Config, nil for plaintext. stop ends
// the file watch and SIGHUP hook; it is never nil.
func (f *tlsFlags) serverConfig(log zerolog.Logger) (cfg *tls.Config, stop func(), err error) {
	noop := func() {}
	files := f.cert != "" || f.key != ""
	switch {
	case files && len(f.acmeDomains) > 0:
		return nil, noop, usagef("--tls-cert and --acme-domain exclude each other")
	case files && (f.cert == "" || f.key == ""):
		return nil, noop, usagef("--tls-cert and --tls-key go together")
	case files:
		return f.filesConfig(log)
	case len(f.acmeDomains) > 0:
		cfg, err := f.acmeConfig(log)
		return cfg, noop, err
	case f.acmeDir != "" || f.acmeCA != "" || f.acmeEmail != "":
		return nil, noop, usagef("--acme-dir, --acme-ca and --acme-email need --acme-domain")
	}
	return nil, noop, nil
}

// baseConfig is what both kinds of certificate share.
func baseConfig() *tls.Config {
	return &tls.Config{
		MinVersion: tls.VersionTLS12,
		// The call server and the WebSocket upgrade speak HTTP/1.1: h2
		// is not offered (the call server would not understand it).
		NextProtos: []string{"http/1.1"},
	}
}

func (f *tlsFlags) filesConfig(log zerolog.Logger) (*tls.Config, func(), error) {
	pair, err := certfile.Load(f.cert, f.key, log)
	if err != nil {
		return nil, func() {}, fmt.Errorf("--tls-cert/--tls-key: %w", err)
	}
	cfg := baseConfig()
	cfg.GetCertificate = pair.GetCertificate
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	if f.watch > 0 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			pair.Watch(ctx, f.watch)
		}()
	}
	stopHangup := onHangup(func() {
		log.Info().Msg("SIGHUP: reloading the certificate")
		_ = pair.Reload() // a failure is logged; the old pair stays
	})
	return cfg, func() {
		stopHangup()
		cancel()
		wg.Wait()
	}, nil
}

func (f *tlsFlags) acmeConfig(log zerolog.Logger) (*tls.Config, error) {
	if f.acmeDir == "" {
		return nil, usagef("--acme-domain needs --acme-dir (where the account key and certificates are kept)")
	}
	if err := os.MkdirAll(f.acmeDir, 0o700); err != nil {
		return nil, fmt.Errorf("--acme-dir: %w", err)
	}
	client := &acme.Client{DirectoryURL: f.acmeDirectory}
	if f.acmeCA != "" {
		pool, err := tlsclient.CAPool(f.acmeCA)
		if err != nil {
			return nil, fmt.Errorf("--acme-ca: %w", err)
		}
		t := http.DefaultTransport.(*http.Transport).Clone()
		t.TLSClientConfig = &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
		client.HTTPClient = &http.Client{Transport: t, Timeout: time.Minute}
	}
	m := &autocert.Manager{
		Prompt:     autocert.AcceptTOS,
		Cache:      autocert.DirCache(f.acmeDir),
		HostPolicy: autocert.HostWhitelist(f.acmeDomains...),
		Email:      f.acmeEmail,
		Client:     client,
	}
	cfg := baseConfig()
	// The TLS-ALPN-01 challenge arrives as a handshake offering acme-tls/1
	// on this port: no port 80 is needed.
	cfg.NextProtos = append(cfg.NextProtos, acme.ALPNProto)
	cfg.GetCertificate = func(hello *tls.ClientHelloInfo) (*tls.Certificate, error) {
		if hello.ServerName == "" {
			// A client dialling an IP address sends no name: it gets the
			// first domain's certificate (a health check, a client told
			// to skip verification) rather than a failed handshake.
			h := *hello
			h.ServerName = f.acmeDomains[0]
			hello = &h
		}
		c, err := m.GetCertificate(hello)
		if err != nil {
			log.Warn().Err(err).Str("server_name", hello.ServerName).Msg("acme: no certificate for this handshake")
		}
		return c, err
	}
	log.Info().Strs("domains", f.acmeDomains).Str("directory", f.acmeDirectory).Str("cache", f.acmeDir).Msg("certificates from ACME")
	return cfg, nil
}

// stringList is a repeatable string flag.
type stringList []string

func (*stringList) repeatable() {}

func (l *stringList) String() string { return fmt.Sprint([]string(*l)) }

func (l *stringList) Set(v string) error {
	*l = append(*l, v)
	return nil
}

// caFlags are a client's trust in the broker's certificate (tlsclient).
type caFlags struct {
	ca       string
	insecure bool
}

func (f *caFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&f.ca, "ca", "", "PEM file of the CA that signed the broker's certificate, trusted instead of the system's roots (https:// and wss:// brokers)")
	fs.BoolVar(&f.insecure, "insecure-skip-verify", false, "do not verify the broker's certificate (tests only; warns on every connection)")
}

// dialer is the tlsclient.Dialer the flags describe.
func (f *caFlags) dialer(log zerolog.Logger) (*tlsclient.Dialer, error) {
	d, err := tlsclient.New(tlsclient.Options{CAFile: f.ca, InsecureSkipVerify: f.insecure, Logger: log})
	if err != nil {
		return nil, usagef("--ca: %v", err)
	}
	return d, nil
}

// callerClient is the HTTP client of tether call, calls and mcp:
// caller.Transport (plain and TLS) with the flags' trust.
func (f *caFlags) callerClient(log zerolog.Logger) (*http.Client, error) {
	d, err := f.dialer(log)
	if err != nil {
		return nil, err
	}
	return &http.Client{Transport: &caller.Transport{TLS: d}}, nil
}
