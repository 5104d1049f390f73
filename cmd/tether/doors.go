package main

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"strings"

	"github.com/rs/zerolog"

	"github.com/tetherdev/tether/broker"
	"github.com/tetherdev/tether/broker/proxy"
	"github.com/tetherdev/tether/internal/runfile"
)

// doorFlags decide who may come in, and from where (issue 29): the
// broker's secret from a file, the one explicit way to turn
// authentication off, the browser origins allowed (CORS) and the proxies
// whose X-Forwarded-For is believed. `tether broker` and `tether up` have
// them, through brokerFlags.
type doorFlags struct {
	secretFile     string
	insecureNoAuth bool
	corsOrigins    originsFlag
	trustedProxies proxiesFlag
}

func (d *doorFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&d.secretFile, "secret-file", "", "read the token signing secret from this file (better than --secret, which other users may see in the process list)")
	fs.BoolVar(&d.insecureNoAuth, "insecure-no-auth", false, "turn authentication off (loopback only; every connection and call is logged as a warning). Without it, a broker with no keys generates a secret")
	fs.Var(&d.corsOrigins, "cors-origin", "a browser origin (scheme://host[:port], or * for any, never with credentials) allowed to use the caller API and the polling transport; repeatable; none by default")
	fs.Var(&d.trustedProxies, "trusted-proxies", "comma-separated CIDRs of reverse proxies whose X-Forwarded-For names the client, for the per-address limits and the logs; none by default")
}

// apply puts the doors' settings in the broker's Config.
func (d *doorFlags) apply(cfg *broker.Config) {
	cfg.CORSOrigins = d.corsOrigins
	cfg.TrustedProxies = d.trustedProxies.Trust
}

// originsFlag is --cors-origin, repeatable: "*" or an origin as a browser
// sends it, scheme://host[:port] and nothing more.
type originsFlag []string

func (*originsFlag) repeatable() {}

func (o *originsFlag) String() string { return strings.Join(*o, ",") }

func (o *originsFlag) Set(v string) error {
	if v != "*" {
		u, err := url.Parse(v)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.User != nil ||
			(u.Path != "" && u.Path != "/") || u.RawQuery != "" || u.Fragment != "" {
			return fmt.Errorf("%q is not an origin: want scheme://host[:port] (e.g. https://app.example) or *", v)
		}
		v = u.Scheme + "://" + u.Host
	}
	*o = append(*o, v)
	return nil
}

// proxiesFlag is --trusted-proxies.
type proxiesFlag struct{ proxy.Trust }

func (p *proxiesFlag) Set(v string) (err error) {
	p.Trust, err = proxy.Parse(v)
	return err
}

// hasKeys reports whether the broker has keys to verify tokens with: a
// secret, or the keys of --keys and --jwks-url (keysGiven).
func (f *brokerFlags) hasKeys() bool { return f.secret != "" || f.keysGiven }

// setupAuth settles how the broker on ln authenticates, before it serves:
// --secret-file is read into the secret; a broker with no keys at all gets
// a generated secret, kept in a private file (returned) that `tether
// token --secret-file` reads; --insecure-no-auth alone turns
// authentication off, and only on loopback.
func (f *brokerFlags) setupAuth(ln net.Addr, log zerolog.Logger) (secretFile string, err error) {
	d := &f.doors
	if d.secretFile != "" {
		if f.secret != "" {
			return "", usagef("--secret and --secret-file exclude each other")
		}
		if f.secret, err = readSecretFile(d.secretFile); err != nil {
			return "", usageError{err}
		}
	}
	if d.insecureNoAuth {
		if f.hasKeys() {
			return "", usagef("--insecure-no-auth turns authentication off: it goes with no --secret or other keys")
		}
		if !isLoopback(ln.String()) {
			return "", usagef("refusing --insecure-no-auth on %s: anyone who can reach it could act as any workspace", ln)
		}
		log.Warn().Msg("--insecure-no-auth: authentication is off; every connection and call let in is logged")
		return "", nil
	}
	if f.hasKeys() {
		return d.secretFile, nil
	}
	path, err := generatedSecretFile(ln)
	if err != nil {
		return "", err
	}
	if f.secret, err = readSecretFile(path); errors.Is(err, os.ErrNotExist) {
		var b [32]byte
		_, _ = rand.Read(b[:])
		f.secret = hex.EncodeToString(b[:])
		if err = runfile.Write(path, []byte(f.secret+"\n")); err != nil {
			return "", fmt.Errorf("keeping the generated secret: %w", err)
		}
	} else if err != nil {
		return "", err
	}
	return path, nil
}

// generatedSecretFile is where a broker without keys keeps the secret it
// generated: the run directory, named by port. The next start on that
// port uses it again, so the tokens made with it outlive a restart.
func generatedSecretFile(ln net.Addr) (string, error) {
	_, port, err := net.SplitHostPort(ln.String())
	if err != nil {
		return "", err
	}
	dir, err := runfile.Dir()
	if err != nil {
		return "", err
	}
	return filepath.Join(dir, "broker-"+port+".secret"), nil
}

// readSecretFile reads a secret kept in a file: its first line, trimmed.
// A file other users may read is refused: the secret mints every token.
func readSecretFile(path string) (string, error) {
	st, err := os.Stat(path)
	if err != nil {
		return "", fmt.Errorf("reading the secret file: %w", err)
	}
	if runfile.OpenToOthers(st) {
		return "", fmt.Errorf("the secret file %s is open to other users (mode %o): chmod 600 it", path, st.Mode().Perm())
	}
	raw, err := os.ReadFile(path)
	if err != nil {
		return "", fmt.Errorf("reading the secret file: %w", err)
	}
	secret, _, _ := strings.Cut(string(raw), "\n")
	if secret = strings.TrimSpace(secret); secret == "" {
		return "", fmt.Errorf("the secret file %s is empty", path)
	}
	return secret, nil
}
