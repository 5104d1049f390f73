package protocol_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"testing"
	"time"

	"github.com/tetherdev/tether/protocol"
)

func TestDecodeResponseEmptyObjectIsNotAnAnswer(t *testing.T) {
	for _, raw := range []string{`{}`, ` { } `, `{"success":false}`, `{"correlation_id":"c1"}`, `{"unknown":1}`} {
		resp, ok, err := protocol.DecodeResponse(json.RawMessage(raw))
		if err != nil || ok {
			t.Errorf("DecodeResponse(%s) = %+v, ok=%v, %v; want not an answer, no error", raw, resp, ok, err)
		}
	}
}

func TestDecodeResponseSuccessCarriesResult(t *testing.T) {
	resp, ok, err := protocol.DecodeResponse(json.RawMessage(`{"correlation_id":"c1","success":true,"result":{"lines":["ü",1]}}`))
	if err != nil || !ok {
		t.Fatalf("DecodeResponse = ok=%v, %v; want an answer", ok, err)
	}
	if resp.CorrelationID != "c1" || !resp.Success || string(resp.Result) != `{"lines":["ü",1]}` {
		t.Errorf("got %+v", resp)
	}
	if err := resp.Err(); err != nil {
		t.Errorf("Err() = %v, want nil for a success", err)
	}
}

func TestDecodeResponseSuccessWithoutResultIsAnAnswer(t *testing.T) {
	resp, ok, err := protocol.DecodeResponse(json.RawMessage(`{"correlation_id":"c1","success":true}`))
	if err != nil || !ok || !resp.Success || resp.Result != nil {
		t.Fatalf("DecodeResponse = %+v, ok=%v, %v; want a success without result", resp, ok, err)
	}
}

func TestDecodeResponseFailureCarriesCodeAndMessage(t *testing.T) {
	resp, ok, err := protocol.DecodeResponse(json.RawMessage(`{"correlation_id":"c2","success":false,"error":"unknown_route","message":"no route /x"}`))
	if err != nil || !ok {
		t.Fatalf("DecodeResponse = ok=%v, %v; want an answer", ok, err)
	}
	if resp.Success || resp.Error != protocol.CodeUnknownRoute || resp.Message != "no route /x" {
		t.Errorf("got %+v", resp)
	}
	var e *protocol.Error
	if !errors.As(resp.Err(), &e) || e.Code != protocol.CodeUnknownRoute || e.Message != "no route /x" {
		t.Errorf("Err() = %v, want *Error unknown_route", resp.Err())
	}
}

func TestDecodeResponseFailureWithOnlyMessageIsAnAnswer(t *testing.T) {
	_, ok, err := protocol.DecodeResponse(json.RawMessage(`{"message":"boom"}`))
	if err != nil || !ok {
		t.Fatalf("ok=%v, %v; want an answer", ok, err)
	}
}

func TestDecodeResponseRejectsNonObject(t *testing.T) {
	for _, raw := range []string{``, `   `, `[]`, `[{}]`, `"x"`, `null`, `1`, `true`} {
		_, ok, err := protocol.DecodeResponse(json.RawMessage(raw))
		if ok || !errors.Is(err, protocol.ErrMalformed) {
			t.Errorf("DecodeResponse(%q) = ok=%v, %v; want ErrMalformed", raw, ok, err)
		}
	}
}

func TestDecodeResponseRejectsInvalidObject(t *testing.T) {
	for _, raw := range []string{`{`, `{"success":"yes"}`, `{"correlation_id":1}`, `{"error":{}}`, `{} {}`} {
		_, ok, err := protocol.DecodeResponse(json.RawMessage(raw))
		if ok || !errors.Is(err, protocol.ErrMalformed) {
			t.Errorf("DecodeResponse(%s) = ok=%v, %v; want ErrMalformed", raw, ok, err)
		}
	}
}

func validCall() protocol.ToolCall {
	return protocol.ToolCall{CorrelationID: "c1", Endpoint: "/fs/read", Timeout: protocol.DefaultTimeout}
}

func assertInvalidRequest(t *testing.T, c protocol.ToolCall) {
	t.Helper()
	err := c.Validate()
	var e *protocol.Error
	if !errors.As(err, &e) || e.Code != protocol.CodeInvalidRequest {
		t.Errorf("Validate(%+v) = %v, want *Error %s", c, err, protocol.CodeInvalidRequest)
	}
}

func TestToolCallValidateAcceptsTimeoutBoundsInclusive(t *testing.T) {
	for _, timeout := range []float64{protocol.MinTimeout, 0.1, 1, protocol.DefaultTimeout, 599.999, protocol.MaxTimeout, 600} {
		c := validCall()
		c.Timeout = timeout
		if err := c.Validate(); err != nil {
			t.Errorf("Validate with timeout %g: %v", timeout, err)
		}
	}
}

func TestToolCallValidateRejectsTimeoutOutOfBounds(t *testing.T) {
	for _, timeout := range []float64{0, math.Nextafter(0.1, 0), 0.09, math.Nextafter(600, 1000), 601, -1, -0.1, math.NaN(), math.Inf(1), math.Inf(-1)} {
		c := validCall()
		c.Timeout = timeout
		assertInvalidRequest(t, c)
	}
}

func TestToolCallValidateRejectsMissingEndpoint(t *testing.T) {
	c := validCall()
	c.Endpoint = ""
	assertInvalidRequest(t, c)
}

func TestToolCallValidateRejectsRelativeEndpoint(t *testing.T) {
	for _, ep := range []string{"fs/read", "./fs/read", " /fs/read", "http://x/fs", "\\fs"} {
		c := validCall()
		c.Endpoint = ep
		assertInvalidRequest(t, c)
	}
}

func TestToolCallValidateRejectsAPayloadThatIsNotUTF8(t *testing.T) {
	for _, payload := range []string{"\"\xff\"", "{\"a\":\"\xed\xa0\x80\"}", "\"\xc3\""} {
		c := validCall()
		c.Payload = json.RawMessage(payload)
		assertInvalidRequest(t, c)
	}
	c := validCall()
	c.Payload = json.RawMessage(`{"a":"é \ud800"}`) // an escaped lone surrogate is valid JSON text
	if err := c.Validate(); err != nil {
		t.Errorf("Validate(UTF-8 payload): %v", err)
	}
}

func TestToolCallValidateAcceptsRootEndpoint(t *testing.T) {
	c := validCall()
	c.Endpoint = "/"
	if err := c.Validate(); err != nil {
		t.Errorf("Validate(endpoint \"/\"): %v", err)
	}
}

func TestToolCallTimeoutDurationConvertsSeconds(t *testing.T) {
	for timeout, want := range map[float64]time.Duration{0.1: 100 * time.Millisecond, 30: 30 * time.Second, 600: 10 * time.Minute, 1.5: 1500 * time.Millisecond} {
		c := protocol.ToolCall{Timeout: timeout}
		if got := c.TimeoutDuration(); got != want {
			t.Errorf("TimeoutDuration(%g) = %v, want %v", timeout, got, want)
		}
	}
}

// Clients in other languages read these names; renaming a tag breaks them.
func TestToolCallMarshalsWireFieldNames(t *testing.T) {
	c := protocol.ToolCall{CorrelationID: "c1", Endpoint: "/e", Payload: json.RawMessage(`{"a":1}`), Timeout: 2.5}
	b, err := json.Marshal(c)
	if err != nil {
		t.Fatal(err)
	}
	const want = `{"correlation_id":"c1","endpoint":"/e","payload":{"a":1},"timeout":2.5}`
	if string(b) != want {
		t.Errorf("json = %s, want %s", b, want)
	}
}

func TestBusMessageWithoutTypeIsACall(t *testing.T) {
	var m protocol.BusMessage
	err := json.Unmarshal([]byte(`{"correlation_id":"c1","endpoint":"/e","timeout":5,"reply_to":"r","deadline_ms":123}`), &m)
	if err != nil {
		t.Fatal(err)
	}
	if m.Type != protocol.BusCall || m.CorrelationID != "c1" || m.Endpoint != "/e" || m.Timeout != 5 || m.ReplyTo != "r" || m.DeadlineMS != 123 {
		t.Errorf("got %+v", m)
	}
}

func TestBusMessageCancelRoundTrips(t *testing.T) {
	in := protocol.BusMessage{Type: protocol.BusCancel, Reason: "caller gone"}
	in.CorrelationID = "c9"
	b, err := json.Marshal(in)
	if err != nil {
		t.Fatal(err)
	}
	var out protocol.BusMessage
	if err := json.Unmarshal(b, &out); err != nil {
		t.Fatal(err)
	}
	if out.Type != protocol.BusCancel || out.CorrelationID != "c9" || out.Reason != "caller gone" {
		t.Errorf("round trip of %s = %+v", b, out)
	}
}

func TestWorkspaceChannelPrefixesID(t *testing.T) {
	if got := protocol.WorkspaceChannel("w1"); got != "ws:w1" {
		t.Errorf("WorkspaceChannel = %q, want %q", got, "ws:w1")
	}
}

func TestFailureFromKeepsCodeOfWrappedError(t *testing.T) {
	err := fmt.Errorf("serving call: %w", protocol.Errorf(protocol.CodeSessionNotFound, "no session %d", 4))
	r := protocol.FailureFrom("c1", err, protocol.CodeInternalError)
	if r.Success || r.CorrelationID != "c1" || r.Error != protocol.CodeSessionNotFound || r.Message != "no session 4" {
		t.Errorf("FailureFrom = %+v", r)
	}
}

func TestFailureFromUsesFallbackForPlainError(t *testing.T) {
	r := protocol.FailureFrom("c1", errors.New("disk on fire"), protocol.CodeInternalError)
	if r.Error != protocol.CodeInternalError || r.Message != "disk on fire" {
		t.Errorf("FailureFrom = %+v", r)
	}
}

func TestErrorMessageJoinsCodeAndText(t *testing.T) {
	e := protocol.Errorf(protocol.CodeInvalidPath, "path %q escapes the root", "../x")
	if e.Code != protocol.CodeInvalidPath || e.Error() != `invalid_path: path "../x" escapes the root` {
		t.Errorf("Errorf = %+v, Error() = %q", e, e.Error())
	}
}

func TestSuccessBuildsSuccessfulResponse(t *testing.T) {
	r := protocol.Success("c1", json.RawMessage(`[1]`))
	b, _ := json.Marshal(r)
	if string(b) != `{"correlation_id":"c1","success":true,"result":[1]}` {
		t.Errorf("json = %s", b)
	}
}
