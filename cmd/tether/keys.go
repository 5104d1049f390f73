package main

import (
	"flag"
	"net/url"
	"strings"

	"github.com/rs/zerolog"

	"github.com/tetherdev/tether/broker/auth"
)

// keyFlags are the broker's keys beyond --secret: a JWK Set file of its own
// (reloaded on SIGHUP) and identity providers' JWKS URLs, with what their
// tokens must say; and the authorization servers the MCP endpoint names
// (OAuth discovery).
type keyFlags struct {
	keysFile        string
	jwksURLs        repeatFlag
	issuers         listFlag
	audiences       listFlag
	roleClaim       string
	workspacesClaim string
	oauthIssuers    repeatFlag
	oauthScopes     repeatFlag
	publicURL       string
}

func (f *keyFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&f.keysFile, "keys", "", "JWK Set file of verification keys (HS256 oct, EdDSA, ES256, RS256), each with a kid; re-read on SIGHUP")
	fs.Var(&f.jwksURLs, "jwks-url", "an identity provider's JWKS URL (repeatable): its keys verify tokens by kid")
	fs.Var(&f.issuers, "token-issuer", "issuer a JWKS-verified token must name (repeatable or comma-separated; default: any)")
	fs.Var(&f.audiences, "token-audience", "audience a JWKS-verified token must hold (repeatable or comma-separated; default: any, except the MCP endpoint's own URL at that endpoint)")
	fs.StringVar(&f.roleClaim, "role-claim", "role", "claim holding tether's role in a token")
	fs.StringVar(&f.workspacesClaim, "workspaces-claim", "workspaces", "claim holding tether's workspaces in a token: an array of strings, or one string of ids separated by spaces or commas")
	fs.StringVar(&f.publicURL, "public-url", "", "the broker's base URL as its clients reach it (https://broker.example.com): the MCP endpoint's OAuth resource and the audience a provider's token must name there; default: each request's own scheme and Host, which a client chooses")
	fs.Var(&f.oauthIssuers, "oauth-issuer", "authorization server the MCP endpoint names in its OAuth protected-resource metadata (repeatable)")
	fs.Var(&f.oauthScopes, "oauth-scope", "scope the MCP endpoint tells clients to ask its authorization servers for (repeatable): scopes_supported in its protected-resource metadata and scope in its 401 challenge; a token's scopes are not checked")
}

// checkOAuthScopes refuses an --oauth-scope that is not an OAuth scope
// token (RFC 6749 section 3.3: printable ASCII but space, '"' and '\\'),
// which would break the metadata's list or the challenge's quoting.
func (f *keyFlags) checkOAuthScopes() error {
	for _, s := range f.oauthScopes {
		if s == "" || strings.ContainsFunc(s, func(r rune) bool { return r <= ' ' || r > '~' || r == '"' || r == '\\' }) {
			return usagef("--oauth-scope %q is not an OAuth scope: printable ASCII without spaces, '\"' or '\\'", s)
		}
	}
	return nil
}

// checkPublicURL makes --public-url a base URL: http(s), a host, no query,
// no trailing slash.
func (f *keyFlags) checkPublicURL() error {
	if f.publicURL == "" {
		return nil
	}
	u, err := url.Parse(f.publicURL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.User != nil || u.RawQuery != "" || u.Fragment != "" {
		return usagef("--public-url %q is not a base URL: want https://host[:port][/path]", f.publicURL)
	}
	f.publicURL = strings.TrimRight(u.String(), "/")
	return nil
}

// hasKeys reports whether the broker has a key beyond --secret. A broker
// checks tokens when it has a --secret or one of these.
func (f *keyFlags) hasKeys() bool { return f.keysFile != "" || len(f.jwksURLs) > 0 }

// verifier makes the broker's Verifier, and hooks the key file's reload on
// SIGHUP; close ends both. A key file that is unreadable or not a key set
// is an error here (the broker does not start); on a reload, it is logged
// and the keys before stay.
func (f *keyFlags) verifier(secret string, log zerolog.Logger) (v *auth.Verifier, close func(), err error) {
	v, err = auth.New(auth.Options{
		Secret:    []byte(secret),
		KeysFile:  f.keysFile,
		JWKSURLs:  f.jwksURLs,
		Issuers:   f.issuers,
		Audiences: f.audiences,
		Claims:    auth.ClaimNames{Role: f.roleClaim, Workspaces: f.workspacesClaim},
		Logger:    log,
	})
	if err != nil {
		return nil, nil, err
	}
	remove := onHangup(func() {
		if f.keysFile == "" {
			return
		}
		n, err := v.Reload()
		if err != nil {
			log.Error().Err(err).Str("keys", f.keysFile).Msg("reloading keys failed; the keys before stay")
			return
		}
		log.Info().Str("keys", f.keysFile).Int("count", n).Msg("keys reloaded")
	})
	return v, func() { remove(); v.Close() }, nil
}

// listFlag is a repeatable flag whose each value may also be a
// comma-separated list.
type listFlag []string

func (*listFlag) repeatable() {}

func (l *listFlag) String() string { return strings.Join(*l, ",") }

func (l *listFlag) Set(s string) error {
	for _, v := range strings.Split(s, ",") {
		if v = strings.TrimSpace(v); v != "" {
			*l = append(*l, v)
		}
	}
	return nil
}

// repeatFlag is a repeatable flag of URLs (which may hold commas).
type repeatFlag []string

func (*repeatFlag) repeatable() {}

func (l *repeatFlag) String() string { return strings.Join(*l, " ") }

func (l *repeatFlag) Set(s string) error {
	*l = append(*l, s)
	return nil
}
