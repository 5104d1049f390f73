package eio

import (
	"bytes"
	"encoding/base64"
	"strings"
	"testing"

	"github.com/tetherdev/tether/protocol"
)

// FuzzPollPayload: splitting never panics, and a body it accepts is
// exactly its packets joined again (text as sent, binary as 'b' and
// base64), so no byte is lost or invented between the POST and the read
// loop.
func FuzzPollPayload(f *testing.F) {
	for _, s := range []string{
		"", "2", "3", "40", `40{"token":"t"}`, "42[\"tool_response\",{}]\x1e3\x1e3",
		"451-[\"tool_response\",{\"_placeholder\":true,\"num\":0}]\x1ebAQID", "b", "b!!!", "bAQ==\x1e", "\x1e\x1e",
		"4" + strings.Repeat("x", 300), "bAAECAwQFBgcICQ==\x1e42[\"e\"]",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		packets, err := splitPollPayload(body)
		if err != nil {
			return
		}
		var joined [][]byte
		for _, p := range packets {
			if p.binary {
				joined = append(joined, []byte("b"+base64.StdEncoding.EncodeToString(p.data)))
				continue
			}
			if len(p.data) > 0 && p.data[0] == 'b' {
				t.Fatalf("text packet %q starts with b", p.data)
			}
			joined = append(joined, p.data)
		}
		// base64 has one encoding per byte string, bar padding bits
		// that DecodeString tolerates being set; compare decoded then.
		again, err := splitPollPayload(bytes.Join(joined, []byte{protocol.PayloadSeparator}))
		if err != nil || len(again) != len(packets) {
			t.Fatalf("re-joined body splits into %d packets (%v), want %d", len(again), err, len(packets))
		}
		for i := range packets {
			if again[i].binary != packets[i].binary || !bytes.Equal(again[i].data, packets[i].data) {
				t.Fatalf("packet %d changed: %+v, then %+v", i, packets[i], again[i])
			}
		}
	})
}
