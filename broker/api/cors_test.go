package api_test

import (
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"

	"github.com/tetherdev/tether/broker/api"
)

// served is the handler behind CORS in these tests: it answers 200 with
// a body, so a test sees whether the request reached it.
var served = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("X-Served", "yes")
	_, _ = w.Write([]byte("ok"))
})

func corsDo(h http.Handler, method, origin string, header map[string]string) *httptest.ResponseRecorder {
	req := httptest.NewRequest(method, "http://broker.test/api/v1/workspaces/ws/calls", nil)
	if origin != "" {
		req.Header.Set("Origin", origin)
	}
	for k, v := range header {
		req.Header.Set(k, v)
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	return rec
}

var preflight = map[string]string{"Access-Control-Request-Method": "POST", "Access-Control-Request-Headers": "authorization, content-type"}

func TestCORSListedOriginGetsItsOriginWithCredentials(t *testing.T) {
	h := api.CORS([]string{"https://app.example", "https://other.example"}, served)
	rec := corsDo(h, http.MethodOptions, "https://app.example", preflight)
	if rec.Code != http.StatusNoContent || rec.Header().Get("X-Served") != "" {
		t.Fatalf("preflight: HTTP %d, served %q; want 204 answered by CORS", rec.Code, rec.Header().Get("X-Served"))
	}
	for k, want := range map[string]string{
		"Access-Control-Allow-Origin":      "https://app.example",
		"Access-Control-Allow-Credentials": "true",
	} {
		if got := rec.Header().Get(k); got != want {
			t.Errorf("preflight %s = %q, want %q", k, got, want)
		}
	}
	if m := rec.Header().Get("Access-Control-Allow-Methods"); !strings.Contains(m, "POST") {
		t.Errorf("Allow-Methods %q lacks POST", m)
	}
	if hd := strings.ToLower(rec.Header().Get("Access-Control-Allow-Headers")); !strings.Contains(hd, "authorization") || !strings.Contains(hd, "content-type") {
		t.Errorf("Allow-Headers %q lacks authorization or content-type", hd)
	}
	if v := rec.Header().Values("Vary"); !slices.Contains(v, "Origin") {
		t.Errorf("Vary %q lacks Origin", v)
	}
	rec = corsDo(h, http.MethodPost, "https://app.example", nil)
	if rec.Code != http.StatusOK || rec.Body.String() != "ok" || rec.Header().Get("Access-Control-Allow-Origin") != "https://app.example" ||
		rec.Header().Get("Access-Control-Allow-Credentials") != "true" {
		t.Errorf("actual request: HTTP %d %q, headers %v", rec.Code, rec.Body, rec.Header())
	}
}

func TestCORSUnlistedOriginGetsNoHeaderAndIsServed(t *testing.T) {
	h := api.CORS([]string{"https://app.example"}, served)
	for _, method := range []string{http.MethodOptions, http.MethodPost} {
		rec := corsDo(h, method, "https://evil.example", preflight)
		for k := range rec.Header() {
			if strings.HasPrefix(k, "Access-Control-") {
				t.Errorf("%s from an unlisted origin got %s", method, k)
			}
		}
		if rec.Header().Get("X-Served") != "yes" {
			t.Errorf("%s from an unlisted origin was not served as usual", method)
		}
	}
	if rec := corsDo(h, http.MethodPost, "", nil); rec.Header().Get("Access-Control-Allow-Origin") != "" || rec.Body.String() != "ok" {
		t.Errorf("no Origin: headers %v body %q", rec.Header(), rec.Body)
	}
}

func TestCORSWildcardNeverGoesWithCredentials(t *testing.T) {
	h := api.CORS([]string{"*", "https://app.example"}, served)
	rec := corsDo(h, http.MethodOptions, "https://any.example", preflight)
	if rec.Header().Get("Access-Control-Allow-Origin") != "*" || rec.Header().Get("Access-Control-Allow-Credentials") != "" {
		t.Errorf("wildcard preflight: %v, want * without credentials", rec.Header())
	}
	rec = corsDo(h, http.MethodPost, "https://any.example", nil)
	if rec.Header().Get("Access-Control-Allow-Origin") != "*" || rec.Header().Get("Access-Control-Allow-Credentials") != "" {
		t.Errorf("wildcard request: %v, want * without credentials", rec.Header())
	}
	rec = corsDo(h, http.MethodPost, "https://app.example", nil)
	if rec.Header().Get("Access-Control-Allow-Origin") != "https://app.example" || rec.Header().Get("Access-Control-Allow-Credentials") != "true" {
		t.Errorf("a listed origin beside *: %v, want it with credentials", rec.Header())
	}
}

func TestCORSOffSendsNothing(t *testing.T) {
	rec := corsDo(api.CORS(nil, served), http.MethodPost, "https://app.example", nil)
	if len(rec.Header().Values("Vary")) != 0 || rec.Header().Get("Access-Control-Allow-Origin") != "" {
		t.Errorf("CORS off: %v", rec.Header())
	}
}
