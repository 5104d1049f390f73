//go:build !windows

package bridge_test

import (
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"os"
	"strings"
	"testing"

	"github.com/tetherdev/tether/bridge"
	"github.com/tetherdev/tether/protocol"
)

// The local HTTP listener, served by Run on a real socket.

func httpBridge(t testing.TB, cfg bridge.Config, mount func(r *bridge.Router)) (base string, client *http.Client) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	cfg.HTTPListener = ln
	cfg.WorkspaceID = "ws-http"
	if cfg.HTTPToken == "" {
		cfg.HTTPToken = testHTTPToken
	}
	if cfg.HTTPTokenDir == "" {
		cfg.HTTPTokenDir = privateDir(t)
	}
	startBridge(t, cfg, mount)
	tr := &http.Transport{}
	t.Cleanup(tr.CloseIdleConnections)
	return "http://" + ln.Addr().String(), &http.Client{Transport: bearer{cfg.HTTPToken, tr}}
}

// testHTTPToken is the listener token httpBridge's bridges require.
const testHTTPToken = "test-listener-token"

// bearer sends every request with the listener's token, as a local tool
// that read the token file does.
type bearer struct {
	token string
	next  http.RoundTripper
}

func (b bearer) RoundTrip(req *http.Request) (*http.Response, error) {
	req = req.Clone(req.Context())
	req.Header.Set("Authorization", "Bearer "+b.token)
	return b.next.RoundTrip(req)
}

// privateDir is a fresh directory only this user may enter, for token
// files.
func privateDir(t testing.TB) string {
	t.Helper()
	dir := t.TempDir()
	if err := os.Chmod(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	return dir
}

// post sends a call over HTTP and decodes the ToolResponse body.
func post(t testing.TB, client *http.Client, url, body string, header map[string]string) (int, protocol.ToolResponse) {
	t.Helper()
	req, err := http.NewRequestWithContext(context.Background(), http.MethodPost, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range header {
		req.Header.Set(k, v)
	}
	return do(t, client, req)
}

func do(t testing.TB, client *http.Client, req *http.Request) (int, protocol.ToolResponse) {
	t.Helper()
	res, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	raw, err := io.ReadAll(res.Body)
	if err != nil {
		t.Fatal(err)
	}
	if ct := res.Header.Get("Content-Type"); ct != "application/json" {
		t.Errorf("Content-Type = %q, want application/json", ct)
	}
	var resp protocol.ToolResponse
	if err := json.Unmarshal(raw, &resp); err != nil {
		t.Fatalf("body %q is not a ToolResponse: %v", raw, err)
	}
	return res.StatusCode, resp
}

func TestHTTPListenerServesPing(t *testing.T) {
	base, client := httpBridge(t, bridge.Config{}, nil)
	status, resp := post(t, client, base+protocol.PingEndpoint, `{"hello":"world"}`,
		map[string]string{bridge.HeaderCorrelationID: "http-corr"})
	if status != http.StatusOK {
		t.Errorf("status = %d, want 200", status)
	}
	if resp.CorrelationID != "http-corr" {
		t.Errorf("correlation_id = %q, want http-corr", resp.CorrelationID)
	}
	wantSuccess(t, resp, `{"hello":"world"}`)
}

func TestHTTPListenerGeneratesCorrelationID(t *testing.T) {
	base, client := httpBridge(t, bridge.Config{}, nil)
	_, resp := post(t, client, base+protocol.PingEndpoint, ``, nil)
	if !strings.HasPrefix(resp.CorrelationID, "http-") {
		t.Errorf("correlation_id = %q, want a generated http-… id", resp.CorrelationID)
	}
	wantSuccess(t, resp, `{}`)
}

func TestHTTPListenerAnswersFailuresAsToolResponses(t *testing.T) {
	base, client := httpBridge(t, bridge.Config{}, func(r *bridge.Router) {
		bridge.Handle(r, "/api/test/panic", func(context.Context, *bridge.Call, struct{}) (struct{}, error) {
			panic("boom")
		})
		bridge.Handle(r, "/api/test/add", func(_ context.Context, _ *bridge.Call, req addRequest) (addResponse, error) {
			return addResponse{Sum: req.A + req.B}, nil
		})
		bridge.Handle(r, "/api/test/wait", func(ctx context.Context, _ *bridge.Call, _ struct{}) (struct{}, error) {
			<-ctx.Done()
			return struct{}{}, ctx.Err()
		})
	})
	for _, tc := range []struct {
		name, path, body string
		header           map[string]string
		code             string
	}{
		{"unknown route", "/api/nope", `{}`, nil, protocol.CodeUnknownRoute},
		{"panic", "/api/test/panic", `{}`, nil, protocol.CodeInternalError},
		{"bad payload", "/api/test/add", `{"a":[]}`, nil, protocol.CodeInvalidPayload},
		{"not JSON", "/api/test/add", `a=1&b=2`, nil, protocol.CodeInvalidPayload},
		{"handler timeout", "/api/test/wait", `{}`, map[string]string{bridge.HeaderTimeout: "0.2"}, protocol.CodeHandlerTimeout},
	} {
		t.Run(tc.name, func(t *testing.T) {
			status, resp := post(t, client, base+tc.path, tc.body, tc.header)
			if status != http.StatusOK {
				t.Errorf("status = %d, want 200 for a call with an outcome", status)
			}
			wantFailure(t, resp, tc.code)
		})
	}
	_, resp := post(t, client, base+"/api/test/add", `{"a":40,"b":2}`, nil)
	wantSuccess(t, resp, `{"sum":42}`)
}

func TestHTTPListenerRejectsRequestsThatAreNotCalls(t *testing.T) {
	base, client := httpBridge(t, bridge.Config{MaxHTTPBody: 64}, nil)

	req, _ := http.NewRequestWithContext(context.Background(), http.MethodGet, base+protocol.PingEndpoint, nil)
	status, resp := do(t, client, req)
	if status != http.StatusMethodNotAllowed {
		t.Errorf("GET status = %d, want 405", status)
	}
	wantFailure(t, resp, protocol.CodeInvalidRequest)

	status, resp = post(t, client, base+protocol.PingEndpoint, `{}`, map[string]string{bridge.HeaderTimeout: "soon"})
	if status != http.StatusBadRequest {
		t.Errorf("bad timeout status = %d, want 400", status)
	}
	wantFailure(t, resp, protocol.CodeInvalidRequest)

	status, resp = post(t, client, base+protocol.PingEndpoint, `"`+strings.Repeat("x", 100)+`"`, nil)
	if status != http.StatusRequestEntityTooLarge {
		t.Errorf("big body status = %d, want 413", status)
	}
	wantFailure(t, resp, protocol.CodePayloadTooLarge)
}

func TestHTTPListenerHealthz(t *testing.T) {
	base, client := httpBridge(t, bridge.Config{}, nil)
	res, err := client.Get(base + "/healthz")
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	body, _ := io.ReadAll(res.Body)
	if res.StatusCode != http.StatusOK || strings.TrimSpace(string(body)) != "ok" {
		t.Errorf("healthz = %d %q, want 200 ok", res.StatusCode, body)
	}
}

func TestRunFailsWhenHTTPAddrIsTaken(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	b, err := bridge.New(bridge.Config{HTTPAddr: ln.Addr().String(), Root: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	if err := b.Run(context.Background()); err == nil {
		t.Error("Run succeeded on a taken address")
	}
}
