package protocol_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/tetherdev/tether/internal/strictjson"
	"github.com/tetherdev/tether/protocol"
)

// callerBody is what a caller may send, for encoding/json's strict decoding
// to hold DecodeCallRequest to.
type callerBody struct {
	CorrelationID      string          `json:"correlation_id"`
	Endpoint           string          `json:"endpoint"`
	Payload            json.RawMessage `json:"payload,omitempty"`
	Timeout            float64         `json:"timeout"`
	WaitForWorkspaceMS int64           `json:"wait_for_workspace_ms,omitempty"`
	Async              bool            `json:"async,omitempty"`
	IdempotencyKey     string          `json:"idempotency_key,omitempty"`
}

// checkDecodeCallRequest asserts DecodeCallRequest agrees with
// encoding/json's strict decoding (DisallowUnknownFields, nothing after the
// value) into callerBody: both refuse, or both accept with the same fields.
func checkDecodeCallRequest(t *testing.T, b []byte) (protocol.ToolCall, error) {
	t.Helper()
	in := bytes.Clone(b)
	got := protocol.ToolCall{Timeout: 7}
	err := protocol.DecodeCallRequest(b, &got)
	if !bytes.Equal(in, b) {
		t.Fatalf("DecodeCallRequest changed its input %q to %q", in, b)
	}
	want := callerBody{Timeout: 7}
	wantErr := strictjson.Decode(b, &want) // encoding/json's strict decoding (fuzzed against it there)
	if isNull(b) {
		if err == nil {
			t.Errorf("DecodeCallRequest(%q) accepted null", b)
		}
		return got, err
	}
	if (err != nil) != (wantErr != nil) {
		t.Errorf("DecodeCallRequest(%q) error = %v, strict encoding/json error = %v", truncate(b), err, wantErr)
		return got, err
	}
	if err == nil {
		w := protocol.ToolCall{CorrelationID: want.CorrelationID, Endpoint: want.Endpoint, Payload: want.Payload,
			Timeout: want.Timeout, WaitForWorkspaceMS: want.WaitForWorkspaceMS, Async: want.Async, IdempotencyKey: want.IdempotencyKey}
		if !sameValue(got, w) {
			t.Errorf("DecodeCallRequest(%q) = %+v, encoding/json gives %+v", truncate(b), got, w)
		}
	}
	return got, err
}

func TestDecodeCallRequestAgreesWithStrictEncodingJSON(t *testing.T) {
	for _, s := range decodeTexts {
		checkDecodeCallRequest(t, []byte(s))
	}
}

func TestDecodeCallRequestNamesTheUnknownFieldAndWhatItMeant(t *testing.T) {
	for body, want := range map[string]string{
		`{"endpoint":"/api/ping","timout":5}`:                                                              `unknown field "timout" (did you mean "timeout"?)`,
		`{"endpoint":"/api/ping","Payload":{},"paylod":{}}`:                                                `unknown field "paylod" (did you mean "payload"?)`,
		`{"endpoint":"/api/ping","reply_to":"inbox"}`:                                                      `unknown field "reply_to" (known fields: correlation_id, endpoint, payload, timeout, wait_for_workspace_ms, async, idempotency_key)`,
		`{"endpoint":"/api/ping","deadline_ms":1}`:                                                         `unknown field "deadline_ms" (known fields: correlation_id, endpoint, payload, timeout, wait_for_workspace_ms, async, idempotency_key)`,
		`{"endpoint":"/api/ping","traceparent":"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"}`: `unknown field "traceparent" (known fields: correlation_id, endpoint, payload, timeout, wait_for_workspace_ms, async, idempotency_key)`,
		`{"endpoint":"/api/ping","workspace":"w"}`:                                                         `unknown field "workspace" (known fields: correlation_id, endpoint, payload, timeout, wait_for_workspace_ms, async, idempotency_key)`,
		`{"endpoint":"/api/ping","\u0074imout":5}`:                                                         `unknown field "timout" (did you mean "timeout"?)`,
		`{"endpoint":"/api/ping","route":"/x","payload":{}}`:                                               `unknown field "route" (did you mean "endpoint"?)`,
		`{"endpoint":"/api/ping","correlationId":"c","x":1}`:                                               `unknown field "correlationId" (did you mean "correlation_id"?)`,
		`{"endpoint":"/api/ping","asynch":true}`:                                                           `unknown field "asynch" (did you mean "async"?)`,
		`{"endpoint":"/api/ping","idempotencyKey":"k"}`:                                                    `unknown field "idempotencyKey" (did you mean "idempotency_key"?)`,
	} {
		var c protocol.ToolCall
		err := protocol.DecodeCallRequest([]byte(body), &c)
		var fe *strictjson.FieldError
		if !errors.As(err, &fe) || err.Error() != want {
			t.Errorf("%s: got %v, want %s", body, err, want)
		}
	}
	var c protocol.ToolCall
	if err := protocol.DecodeCallRequest([]byte(`{"endpoint":"/e","timeout":"5"}`), &c); err == nil || !strings.Contains(err.Error(), `"timeout"`) {
		t.Errorf("wrong type: %v, want it to name timeout", err)
	}
}
