package revoke

import (
	"errors"
	"strings"
	"testing"

	"github.com/tetherdev/tether/protocol"
)

func TestDecodeRequestNamesTheField(t *testing.T) {
	for _, tc := range []struct{ body, field string }{
		{`{"jti":"a","extra":1}`, `"extra"`},
		{`{"jti":"a","workspace_id":"w"}`, "jti"},
		{`{"workspace_id":"w"}`, "issued_before"},
		{`{"issued_before":"2026-01-01T00:00:00Z"}`, "workspace_id"},
		{`{"workspace_id":"w","issued_before":"yesterday"}`, "issued_before"},
		{`{"workspace_id":"*","issued_before":"2026-01-01T00:00:00Z"}`, "workspace_id"},
		{`{"jti":5}`, `"jti"`},
		{`{}`, "jti"},
		{`[]`, ""},
		{`{"jti":"a"} {}`, ""},
	} {
		_, err := DecodeRequest([]byte(tc.body))
		var pe *protocol.Error
		if !errors.As(err, &pe) || pe.Code != protocol.CodeInvalidRequest {
			t.Errorf("%s: err = %v, want invalid_request", tc.body, err)
			continue
		}
		if !strings.Contains(pe.Message, tc.field) {
			t.Errorf("%s: message %q does not name %s", tc.body, pe.Message, tc.field)
		}
	}
	if r, err := DecodeRequest([]byte(`{"workspace_id":"w","issued_before":"2026-01-02T15:04:05+02:00"}`)); err != nil || r.issuedBefore.Hour() != 13 {
		t.Fatalf("good workspace request: %+v, %v", r, err)
	}
}

// FuzzDecodeRequest holds DecodeRequest to its promise on any body: a
// request of exactly one form, or an invalid_request error, never a panic.
func FuzzDecodeRequest(f *testing.F) {
	for _, s := range []string{
		`{"jti":"a"}`,
		`{"workspace_id":"w","issued_before":"2026-01-02T15:04:05Z"}`,
		`{"jti":"a","workspace_id":"w"}`,
		`{"workspace_id":"w","issued_before":"2026-13-02T15:04:05Z"}`,
		`{"jti":null}`, `{"JTI":"a"}`, `null`, ``, `{"jti":"a"}x`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		r, err := DecodeRequest(body)
		if err != nil {
			var pe *protocol.Error
			if !errors.As(err, &pe) || pe.Code != protocol.CodeInvalidRequest {
				t.Fatalf("error %v is not invalid_request", err)
			}
			return
		}
		jti := r.JTI != ""
		ws := r.WorkspaceID != "" && !r.issuedBefore.IsZero()
		if jti == ws {
			t.Fatalf("accepted %q as %+v: not exactly one form", body, r)
		}
	})
}
