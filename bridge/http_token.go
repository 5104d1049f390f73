//go:build !windows

package bridge

import (
	"crypto/rand"
	"crypto/subtle"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"

	"github.com/tetherdev/tether/internal/runfile"
)

// The local HTTP listener's token. Loopback is no trust boundary (a shared
// dev server, a CI runner, a container in the host's network namespace, a
// process of another user): the routes run commands as this user, so every
// request must carry "Authorization: Bearer <token>", a random token made
// for each start of the listener. Run writes it to a file only this user
// can read (TokenFile), which `tether attach` and local tools read by
// themselves given the listener's address, as Jupyter does.

// HTTPTokenEnv overrides the token file for clients (`tether attach`): the
// token itself, when a client cannot read the file.
const HTTPTokenEnv = "TETHER_BRIDGE_HTTP_TOKEN"

// TokenFile is where the token of the listener on addr (host:port, or an
// http:// URL) is kept in dir (runfile.Dir() when empty). Files are named by port
// alone, so a client naming the listener localhost:P finds the token of
// the one listening on 127.0.0.1:P, and several bridges coexist.
func TokenFile(dir, addr string) (string, error) {
	hostport := addr
	if i := strings.Index(hostport, "://"); i >= 0 {
		hostport = strings.TrimSuffix(hostport[i+3:], "/")
	}
	_, port, err := net.SplitHostPort(hostport)
	if err != nil || port == "" || strings.ContainsAny(port, `/\.`) {
		return "", fmt.Errorf("%q is not host:port", addr)
	}
	if dir == "" {
		if dir, err = runfile.Dir(); err != nil {
			return "", err
		}
	}
	return filepath.Join(dir, "bridge-http-"+port+".token"), nil
}

// ReadToken reads the token of the listener on addr: HTTPTokenEnv when
// set, else its TokenFile in runfile.Dir().
func ReadToken(addr string) (string, error) {
	if tok := os.Getenv(HTTPTokenEnv); tok != "" {
		return tok, nil
	}
	path, err := TokenFile("", addr)
	if err != nil {
		return "", err
	}
	raw, err := os.ReadFile(path)
	if err != nil {
		return "", fmt.Errorf("reading the bridge's token (is a bridge listening on %s?): %w", addr, err)
	}
	tok := strings.TrimSpace(string(raw))
	if tok == "" {
		return "", fmt.Errorf("the bridge's token file %s is empty", path)
	}
	return tok, nil
}

// newHTTPToken is a token for one start of the listener: 256 random bits.
func newHTTPToken() string { return rand.Text() + rand.Text() }

// tokenMissing says why r does not carry the listener's token, or "" when
// it does. The compare takes the same time for every wrong token.
func (b *Bridge) tokenMissing(r *http.Request) string {
	h := r.Header.Get("Authorization")
	got, ok := strings.CutPrefix(h, "Bearer ")
	if !ok || got == "" {
		return "the request has no bearer token (the listener's token is in its token file; tether attach reads it)"
	}
	if subtle.ConstantTimeCompare([]byte(strings.TrimSpace(got)), []byte(b.httpToken)) != 1 {
		return "the bearer token is not this listener's"
	}
	return ""
}

// writeTokenFile writes the token of the listener on ln; the returned
// func removes it.
func (b *Bridge) writeTokenFile(ln net.Listener) (remove func(), err error) {
	path, err := TokenFile(b.cfg.HTTPTokenDir, ln.Addr().String())
	if err != nil {
		return nil, err
	}
	if err := runfile.Write(path, []byte(b.httpToken+"\n")); err != nil {
		return nil, fmt.Errorf("bridge: writing the HTTP listener's token file: %w", err)
	}
	b.tokenPath.Store(&path)
	return func() {
		if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
			b.log.Warn().Err(err).Str("path", path).Msg("removing the HTTP listener's token file")
		}
	}, nil
}

// HTTPTokenFile is the path of the HTTP listener's token file once Run
// has started the listener; "" before.
func (b *Bridge) HTTPTokenFile() string {
	if p := b.tokenPath.Load(); p != nil {
		return *p
	}
	return ""
}
