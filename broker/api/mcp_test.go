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
	if got, want := resourceURL(r, "w x"), "http://broker.test:8377/api/v1/workspaces/w%20x/mcp"; got != want {
		t.Errorf("plain: %q, want %q", got, want)
	}
	r.TLS = &tls.ConnectionState{}
	if got, want := resourceMetadataURL(r, "w"), "https://broker.test:8377/.well-known/oauth-protected-resource/api/v1/workspaces/w/mcp"; got != want {
		t.Errorf("TLS: %q, want %q", got, want)
	}
}
