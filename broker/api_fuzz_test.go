package broker_test

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/tetherdev/tether/broker"
	"github.com/tetherdev/tether/broker/auth"
	"github.com/tetherdev/tether/protocol"
)

// FuzzCallBody posts arbitrary bodies to the caller API: every request is
// answered with a ToolResponse, 200 for a call (here: the workspace is
// offline) or 400 invalid_request naming what is wrong, never a 5xx, and
// a body a caller may not send is never taken for a call.
func FuzzCallBody(f *testing.F) {
	for _, s := range []string{
		`{"endpoint":"/api/ping"}`, `{"endpoint":"/api/ping","payload":{"a":[1]},"timeout":1,"correlation_id":"c"}`,
		`{"endpoint":"/api/ping","timout":5}`, `{"endpoint":"/x","reply_to":"inbox"}`, `{"endpoint":"/x","deadline_ms":1}`,
		`{"endpoint":"x"}`, `{"endpoint":"/x","timeout":0}`, `{"endpoint":"/x","timeout":"5"}`, `{}`, `null`, `[]`, ``,
		`{"endpoint":"/x","wait_for_workspace_ms":100,"timeout":0.1}`, `{"\u0065ndpoint":"/x","\u0078":1}`,
		`{"endpoint":"/x","payload":` + string(bytes.Repeat([]byte("["), 10001)) + `}`,
	} {
		f.Add([]byte(s))
	}
	secret := []byte("fuzz-secret-0123456789")
	b, err := broker.New(broker.Config{Secret: secret, Logger: zerolog.Nop()})
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = b.Shutdown(ctx)
	})
	tok, err := auth.IssueToken(secret, auth.RoleCaller, []string{"*"}, time.Hour)
	if err != nil {
		f.Fatal(err)
	}
	h := b.Handler()
	f.Fuzz(func(t *testing.T, body []byte) {
		// A call that waits for its workspace would wait its timeout:
		// the request's context ends it sooner.
		ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
		defer cancel()
		req := httptest.NewRequestWithContext(ctx, http.MethodPost, "/api/v1/workspaces/ws1/calls", bytes.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+tok)
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		var resp protocol.ToolResponse
		if err := json.Unmarshal(rec.Body.Bytes(), &resp); err != nil {
			t.Fatalf("HTTP %d answer %q is not a ToolResponse: %v", rec.Code, rec.Body.Bytes(), err)
		}
		switch rec.Code {
		case http.StatusOK:
			var call protocol.ToolCall
			if err := protocol.DecodeCallRequest(body, &call); err != nil {
				t.Fatalf("body %q taken for a call (%+v) though DecodeCallRequest refuses it: %v", body, resp, err)
			}
			if resp.Success || resp.Error == "" {
				t.Fatalf("a call to an offline workspace answered %+v", resp)
			}
		case http.StatusBadRequest:
			if resp.Error != protocol.CodeInvalidRequest || resp.Message == "" {
				t.Fatalf("400 answered %+v", resp)
			}
		default:
			t.Fatalf("HTTP %d %q", rec.Code, rec.Body.Bytes())
		}
	})
}
