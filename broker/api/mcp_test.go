package api

import (
	"crypto/tls"
	"net/http/httptest"
	"testing"
)

// The resource an MCP client reached is named by the request's own TLS
// state and Host; X-Forwarded-* are not trusted (no proxy is).
func TestResourceURLFromTheRequestItself(t *testing.T) {
	r := httptest.NewRequest("POST", "http://broker.test:8377/api/v1/workspaces/w%20x/mcp", nil)
	r.Header.Set("X-Forwarded-Proto", "https")
	r.Header.Set("X-Forwarded-Host", "evil.test")
	a := &API{cfg: Config{}}
	if got, want := a.resourceURL(r, "w x"), "http://broker.test:8377/api/v1/workspaces/w%20x/mcp"; got != want {
		t.Errorf("plain: %q, want %q", got, want)
	}
	r.TLS = &tls.ConnectionState{}
	if got, want := a.resourceMetadataURL(r, "w"), "https://broker.test:8377/.well-known/oauth-protected-resource/api/v1/workspaces/w/mcp"; got != want {
		t.Errorf("TLS: %q, want %q", got, want)
	}
}

// With --public-url the resource is named by it, whatever Host a client
// sends: a token meant for another server cannot be made to fit.
func TestResourceURLUnderThePublicURL(t *testing.T) {
	r := httptest.NewRequest("POST", "http://evil.test/api/v1/workspaces/w/mcp", nil)
	a := &API{cfg: Config{PublicURL: "https://broker.example.com"}}
	if got, want := a.resourceURL(r, "w"), "https://broker.example.com/api/v1/workspaces/w/mcp"; got != want {
		t.Errorf("resource: %q, want %q", got, want)
	}
	if got, want := a.resourceMetadataURL(r, "w"), "https://broker.example.com/.well-known/oauth-protected-resource/api/v1/workspaces/w/mcp"; got != want {
		t.Errorf("metadata: %q, want %q", got, want)
	}
}
