package broker

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/tetherdev/tether/broker/auth"
	"github.com/tetherdev/tether/protocol"
)

// Fuzz targets for what the routing core parses itself from clients: the
// CONNECT auth with the token in it (eio fuzzes the body of a polling
// POST; the packets go through protocol's decoders, fuzzed there).

// FuzzConnectAuth: whatever the CONNECT auth holds, decoding and checking
// its token never panics, and only a token signed with the broker's
// secret, for the bridge role and a workspace it names, is accepted.
func FuzzConnectAuth(f *testing.F) {
	secret := []byte("fuzz-secret-0123456789")
	good, err := auth.IssueToken(secret, auth.RoleBridge, []string{"ws1"}, time.Hour)
	if err != nil {
		f.Fatal(err)
	}
	caller, _ := auth.IssueToken(secret, auth.RoleCaller, []string{"*"}, time.Hour)
	forged, _ := jwt.NewWithClaims(jwt.SigningMethodHS256, jwt.MapClaims{"role": auth.RoleBridge, "workspaces": []string{"ws1"},
		"exp": time.Now().Add(time.Hour).Unix()}).SignedString([]byte("another-secret"))
	none, _ := jwt.NewWithClaims(jwt.SigningMethodNone, jwt.MapClaims{"role": auth.RoleBridge, "workspaces": []string{"ws1"},
		"exp": time.Now().Add(time.Hour).Unix()}).SignedString(jwt.UnsafeAllowNoneSignatureType)
	for _, s := range []string{
		``, `{}`, `null`, `[]`, `"x"`, `{"token":1}`, `{"token":"` + good + `","workspace_id":"ws1"}`,
		`{"token":"` + good + `"}`, `{"token":"` + good + `","workspace":"ws1"}`, `{"token":"` + good + `","workspace_id":"ws2"}`,
		`{"token":"` + caller + `","workspace_id":"ws1"}`, `{"token":"` + forged + `","workspace_id":"ws1"}`,
		`{"token":"` + none + `","workspace_id":"ws1"}`, `{"token":"a.b.c","workspace_id":"ws1","client":"vscode"}`,
		`{"token":"` + good[:len(good)-2] + `"}`, `{"token":"` + strings.Repeat("A", 5000) + `"}`,
	} {
		f.Add([]byte(s), "")
	}
	f.Add([]byte(`{"workspace_id":"ws1"}`), good)
	a := auth.NewVerifier(secret)
	f.Fuzz(func(t *testing.T, data []byte, bearer string) {
		token, ws, err := decodeConnectAuth(data, bearer)
		if err != nil {
			return
		}
		claims, err := a.Verify(token, auth.RoleBridge, ws)
		if err != nil {
			var pe *protocol.Error
			if !errors.As(err, &pe) || (pe.Code != protocol.CodeUnauthorized && pe.Code != protocol.CodeForbidden) {
				t.Fatalf("refusal %v is not unauthorized or forbidden", err)
			}
			return
		}
		// Only the bridge token the test signed can pass (or a spelling
		// of it that decodes to the same signed bytes).
		if claims.Role != auth.RoleBridge || len(claims.Workspaces) != 1 || claims.Workspaces[0] != "ws1" || (ws != "" && ws != "ws1") {
			t.Fatalf("accepted token %q with claims %+v for workspace %q", token, claims, ws)
		}
	})
}
