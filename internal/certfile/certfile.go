// Package certfile serves a TLS certificate and key kept in two PEM files,
// re-read when asked (SIGHUP) or when the files change: a renewal written
// by certbot, cert-manager or a script reaches new handshakes without a
// restart, and established connections keep the certificate they
// started with.
package certfile

import (
	"context"
	"crypto/tls"
	"encoding/pem"
	"errors"
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rs/zerolog"
)

// Pair is a certificate and its key from files. GetCertificate may be
// called from any goroutine; Reload and Watch too.
type Pair struct {
	certFile, keyFile string
	log               zerolog.Logger

	cur atomic.Pointer[tls.Certificate]

	mu    sync.Mutex // orders reloads
	stamp stamp      // of the files the last reload read (or tried)
}

// Load reads the pair a server serves; an error names the file at fault.
func Load(certFile, keyFile string, log zerolog.Logger) (*Pair, error) {
	return load(certFile, keyFile, "serving certificate", log)
}

// LoadClient reads the pair a client shows a server that asks for one
// (GetCertificate serves it too); it differs from Load in what it logs.
func LoadClient(certFile, keyFile string, log zerolog.Logger) (*Pair, error) {
	return load(certFile, keyFile, "client certificate loaded", log)
}

func load(certFile, keyFile, msg string, log zerolog.Logger) (*Pair, error) {
	p := &Pair{certFile: certFile, keyFile: keyFile, log: log}
	p.stamp = stampOf(certFile, keyFile)
	c, err := read(certFile, keyFile)
	if err != nil {
		return nil, err
	}
	p.cur.Store(c)
	p.logServed(c, msg)
	return p, nil
}

// GetCertificate implements tls.Config.GetCertificate: the pair read last.
func (p *Pair) GetCertificate(*tls.ClientHelloInfo) (*tls.Certificate, error) {
	return p.cur.Load(), nil
}

// Reload reads the files again. A pair that does not load is logged and
// returned, and the one served before stays.
func (p *Pair) Reload() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.stamp = stampOf(p.certFile, p.keyFile)
	c, err := read(p.certFile, p.keyFile)
	if err != nil {
		p.log.Error().Err(err).Msg("certificate reload failed: still serving the previous certificate")
		return err
	}
	p.cur.Store(c)
	p.logServed(c, "certificate reloaded")
	return nil
}

// Watch reloads the pair whenever either file's modification time, size
// or inode changes (a rename over it included), checking every interval,
// until ctx ends. A poll of two stat calls is cheap and works on every
// file system, where inotify misses a Kubernetes secret's symlink swap.
func (p *Pair) Watch(ctx context.Context, interval time.Duration) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		p.mu.Lock()
		changed := stampOf(p.certFile, p.keyFile) != p.stamp
		p.mu.Unlock()
		if changed {
			_ = p.Reload() // logged; a later change tries again
		}
	}
}

func (p *Pair) logServed(c *tls.Certificate, msg string) {
	e := p.log.Info().Str("cert", p.certFile)
	if c.Leaf != nil {
		e = e.Strs("names", c.Leaf.DNSNames).Str("serial", c.Leaf.SerialNumber.String()).Time("not_after", c.Leaf.NotAfter)
		if time.Now().After(c.Leaf.NotAfter) {
			p.log.Warn().Str("cert", p.certFile).Time("not_after", c.Leaf.NotAfter).Msg("the certificate has expired")
		}
	}
	e.Msg(msg)
}

// read loads the pair, saying which file is at fault.
func read(certFile, keyFile string) (*tls.Certificate, error) {
	certPEM, err := os.ReadFile(certFile)
	if err != nil {
		return nil, fmt.Errorf("reading the certificate: %w", err)
	}
	keyPEM, err := os.ReadFile(keyFile)
	if err != nil {
		return nil, fmt.Errorf("reading the key: %w", err)
	}
	return parse(certPEM, keyPEM, certFile, keyFile)
}

// parse is read's work on the files' contents; the errors name the files.
func parse(certPEM, keyPEM []byte, certFile, keyFile string) (*tls.Certificate, error) {
	if !hasBlock(certPEM, func(t string) bool { return t == "CERTIFICATE" }) {
		return nil, fmt.Errorf("the certificate file %s holds no PEM CERTIFICATE block", certFile)
	}
	if !hasBlock(keyPEM, func(t string) bool { return len(t) >= 11 && t[len(t)-11:] == "PRIVATE KEY" }) {
		return nil, fmt.Errorf("the key file %s holds no PEM PRIVATE KEY block", keyFile)
	}
	c, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		return nil, fmt.Errorf("the certificate %s and the key %s: %w", certFile, keyFile, err)
	}
	if c.Leaf == nil {
		return nil, errors.New("the certificate " + certFile + " has no leaf")
	}
	return &c, nil
}

func hasBlock(data []byte, isType func(string) bool) bool {
	for {
		var b *pem.Block
		b, data = pem.Decode(data)
		if b == nil {
			return false
		}
		if isType(b.Type) {
			return true
		}
	}
}

// stamp tells one version of the two files from another.
type stamp struct{ cert, key fileStamp }

type fileStamp struct {
	mod  time.Time
	size int64
	ino  uint64
}

func stampOf(certFile, keyFile string) stamp {
	return stamp{fileStampOf(certFile), fileStampOf(keyFile)}
}

// fileStampOf follows symlinks: a swapped link is a change.
func fileStampOf(name string) fileStamp {
	fi, err := os.Stat(name)
	if err != nil {
		return fileStamp{}
	}
	return fileStamp{mod: fi.ModTime(), size: fi.Size(), ino: inode(fi)}
}
