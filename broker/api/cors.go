package api

import (
	"net/http"
	"slices"
	"strings"
)

// CORS lets the browser pages of the origins listed (--cors-origin) use
// the caller API and the polling transport: the one rule of which
// cross-origin requests a browser may make, applied to every path the
// API serves (routes).
//
// A request whose Origin is listed gets Access-Control-Allow-Origin with
// that origin and Access-Control-Allow-Credentials; when only "*" is
// listed, the answer is "*" and never with credentials (browsers refuse
// the pair, and it would hand any page the person's cookies). A preflight
// (OPTIONS with Access-Control-Request-Method) of a listed origin is
// answered here, 204 with the methods and headers the API reads. A
// request from an origin not listed gets no CORS header, so the browser
// keeps the answer from the page, and is otherwise served as it would be:
// CORS is the browser's rule, not the broker's authentication (tokens
// are).
func CORS(origins []string, next http.Handler) http.Handler {
	if len(origins) == 0 {
		return next
	}
	c := &cors{next: next, any: slices.Contains(origins, "*")}
	for _, o := range origins {
		if o != "*" {
			c.exact = append(c.exact, strings.ToLower(strings.TrimSuffix(o, "/")))
		}
	}
	return c
}

// The methods and request headers the API and the polling transport read,
// and the response headers a page may see.
const (
	corsMethods       = "GET, POST, DELETE, OPTIONS"
	corsHeaders       = "Authorization, Content-Type, Idempotency-Key, Prefer, Mcp-Session-Id, Mcp-Protocol-Version, Last-Event-ID"
	corsExposeHeaders = "Location, Preference-Applied, Retry-After, WWW-Authenticate, Mcp-Session-Id"
	corsMaxAge        = "600"
)

type cors struct {
	next  http.Handler
	exact []string // lower-case origins, compared as browsers send them
	any   bool     // "*" was listed
}

func (c *cors) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	h := w.Header()
	// Every answer depends on the Origin, whether or not it is allowed: a
	// cache must not hand one origin's answer to another.
	h.Add("Vary", "Origin")
	origin := r.Header.Get("Origin")
	allow, credentials := c.allowed(origin)
	if allow == "" {
		c.next.ServeHTTP(w, r)
		return
	}
	h.Set("Access-Control-Allow-Origin", allow)
	if credentials {
		h.Set("Access-Control-Allow-Credentials", "true")
	}
	if r.Method == http.MethodOptions && r.Header.Get("Access-Control-Request-Method") != "" {
		h.Add("Vary", "Access-Control-Request-Method")
		h.Add("Vary", "Access-Control-Request-Headers")
		h.Set("Access-Control-Allow-Methods", corsMethods)
		h.Set("Access-Control-Allow-Headers", corsHeaders)
		h.Set("Access-Control-Max-Age", corsMaxAge)
		w.WriteHeader(http.StatusNoContent)
		return
	}
	h.Set("Access-Control-Expose-Headers", corsExposeHeaders)
	c.next.ServeHTTP(w, r)
}

// allowed is the Access-Control-Allow-Origin for origin ("" when none)
// and whether credentials go with it: only for an origin listed exactly.
func (c *cors) allowed(origin string) (allow string, credentials bool) {
	if origin == "" {
		return "", false
	}
	if slices.Contains(c.exact, strings.ToLower(origin)) {
		return origin, true
	}
	if c.any {
		return "*", false
	}
	return "", false
}
