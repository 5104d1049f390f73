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
const HTTPTokenEnv = "TETHER_BRIDGE_TOKEN"

// RunDir is the directory of the per-start files of tether's local doors
// (the bridge listener's token, a broker's generated secret):
// $XDG_RUNTIME_DIR/tether, or the user's cache directory's tether/run.
// It is not created here: see PrivateFile.
func RunDir() (string, error) {
	if d := os.Getenv("XDG_RUNTIME_DIR"); d != "" && filepath.IsAbs(d) {
		return filepath.Join(d, "tether"), nil
	}
	d, err := os.UserCacheDir()
	if err != nil {
		return "", fmt.Errorf("finding a directory for tether's run files: %w", err)
	}
	return filepath.Join(d, "tether", "run"), nil
}

// TokenFile is where the token of the listener on addr (host:port, or an
// http:// URL) is kept in dir (RunDir when empty). Files are named by port
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
		if dir, err = RunDir(); err != nil {
			return "", err
		}
	}
	return filepath.Join(dir, "bridge-http-"+port+".token"), nil
}

// ReadToken reads the token of the listener on addr: HTTPTokenEnv when
// set, else its TokenFile in RunDir.
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

// PrivateFile writes data to path, readable by this user only (0600), in a
// directory only this user can enter (0700, created if missing). An
// existing directory that others may enter, or that another user owns, is
// refused rather than trusted. The file is replaced by a rename, so a
// reader never sees it half written.
func PrivateFile(path string, data []byte) error {
	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("creating %s: %w", dir, err)
	}
	st, err := os.Stat(dir)
	if err != nil {
		return err
	}
	if st.Mode().Perm()&0o077 != 0 {
		return fmt.Errorf("%s is open to other users (mode %o): want 0700", dir, st.Mode().Perm())
	}
	if !ownedBySelf(st) {
		return fmt.Errorf("%s belongs to another user", dir)
	}
	tmp, err := os.CreateTemp(dir, ".tmp-*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name()) // after a successful rename, a no-op
	if err := tmp.Chmod(0o600); err != nil {
		tmp.Close()
		return err
	}
	if _, err := tmp.Write(data); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), path)
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
	if err := PrivateFile(path, []byte(b.httpToken+"\n")); err != nil {
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
