package broker_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/tetherdev/tether/broker"
	"github.com/tetherdev/tether/broker/auth"
	"github.com/tetherdev/tether/internal/testwait"
	"github.com/tetherdev/tether/protocol"
)

func TestCallAnsweredByAck(t *testing.T) {
	eachPath(t, func(t *testing.T, mk func(*testing.T, ...func(*broker.Config)) *env) {
		e := mk(t)
		c := e.connect("ws1", e.token(auth.RoleBridge, "ws1"))
		res := e.goCall("ws1", e.token(auth.RoleCaller, "ws1"), `{"endpoint":"/api/ping","payload":{"n":1},"timeout":5}`)
		r := c.nextCall()
		if r.call.Endpoint != "/api/ping" || string(r.call.Payload) != `{"n":1}` || r.call.Timeout <= 4 || r.call.Timeout > 5 {
			t.Fatalf("client received %+v", r.call)
		}
		if r.call.ReplyTo != "" || r.call.DeadlineMS != 0 {
			t.Fatalf("bus fields leaked to the client: %+v", r.call)
		}
		c.ackOK(r, `{"pong":true}`)
		got := awaitResult(t, res, 5*time.Second)
		if got.status != 200 || !got.resp.Success || string(got.resp.Result) != `{"pong":true}` || got.resp.CorrelationID != r.call.CorrelationID {
			t.Fatalf("got %d %+v", got.status, got.resp)
		}
	})
}

func TestCallAnsweredByToolResponseEvent(t *testing.T) {
	e := newEnv(t)
	c := e.connect("ws1", e.token(auth.RoleBridge, "ws1"))
	res := e.goCall("ws1", e.token(auth.RoleCaller, "ws1"), `{"endpoint":"/x","timeout":5}`)
	r := c.nextCall()
	c.send(string(protocol.EncodeEvent(protocol.NoAck, protocol.EventToolResponse,
		json.RawMessage(`{"correlation_id":"`+r.call.CorrelationID+`","success":false,"error":"boom","message":"it broke"}`))))
	got := awaitResult(t, res, 5*time.Second)
	if got.status != 200 || got.resp.Success || got.resp.Error != "boom" || got.resp.Message != "it broke" {
		t.Fatalf("got %d %+v", got.status, got.resp)
	}
}

func TestEmptyAckIsNotAnAnswer(t *testing.T) {
	e := newEnv(t)
	c := e.connect("ws1", e.token(auth.RoleBridge, "ws1"))
	res := e.goCall("ws1", e.token(auth.RoleCaller, "ws1"), `{"endpoint":"/x","timeout":5}`)
	r := c.nextCall()
	c.send(string(protocol.EncodeAck(r.ack)))
	c.send(string(protocol.EncodeAck(r.ack, json.RawMessage(`{}`))))
	select {
	case got := <-res:
		t.Fatalf("empty ack answered the call: %+v", got.resp)
	default:
	}
	c.send(string(protocol.EncodeEvent(protocol.NoAck, protocol.EventToolResponse,
		json.RawMessage(`{"correlation_id":"`+r.call.CorrelationID+`","success":true,"result":{"late":1}}`))))
	got := awaitResult(t, res, 5*time.Second)
	if !got.resp.Success || string(got.resp.Result) != `{"late":1}` {
		t.Fatalf("got %+v", got.resp)
	}
}

func TestFirstAnswerWinsDuplicatesDropped(t *testing.T) {
	e := newEnv(t)
	c := e.connect("ws1", e.token(auth.RoleBridge, "ws1"))
	res := e.goCall("ws1", e.token(auth.RoleCaller, "ws1"), `{"endpoint":"/x","timeout":5}`)
	r := c.nextCall()
	c.send(string(protocol.EncodeEvent(protocol.NoAck, protocol.EventToolResponse,
		json.RawMessage(`{"correlation_id":"`+r.call.CorrelationID+`","success":true,"result":"first"}`))))
	c.ackOK(r, `"second"`)
	got := awaitResult(t, res, 5*time.Second)
	if string(got.resp.Result) != `"first"` {
		t.Fatalf("got %s, want the first answer", got.resp.Result)
	}
	waitMetric(t, e, "tether_unmatched_answers_total 1")
}

func waitMetric(t *testing.T, e *env, line string) {
	t.Helper()
	testwait.Until(t, 5*time.Second, func() bool { return strings.Contains(metricsText(t, e), line) }, "the metrics to show %q", line)
}

// metricsText is the broker's /metrics page.
func metricsText(t *testing.T, e *env) string {
	t.Helper()
	res, err := http.Get(e.srv.URL + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	return readAll(res)
}

func readAll(res *http.Response) string {
	defer res.Body.Close()
	var sb strings.Builder
	buf := make([]byte, 4096)
	for {
		n, err := res.Body.Read(buf)
		sb.Write(buf[:n])
		if err != nil {
			return sb.String()
		}
	}
}

func TestCallToOfflineWorkspaceAnswersImmediately(t *testing.T) {
	eachPath(t, func(t *testing.T, mk func(*testing.T, ...func(*broker.Config)) *env) {
		e := mk(t)
		start := time.Now()
		status, resp := e.httpCall("nobody", e.token(auth.RoleCaller, "*"), `{"endpoint":"/x","timeout":30}`)
		if el := time.Since(start); el > 100*time.Millisecond {
			t.Fatalf("offline answered after %s", el)
		}
		if status != 200 || resp.Error != protocol.CodeWorkspaceOffline {
			t.Fatalf("got %d %+v", status, resp)
		}
	})
}

func TestTimeoutAnswersAndCancelsClient(t *testing.T) {
	eachPath(t, func(t *testing.T, mk func(*testing.T, ...func(*broker.Config)) *env) {
		e := mk(t)
		c := e.connect("ws1", e.token(auth.RoleBridge, "ws1"))
		res := e.goCall("ws1", e.token(auth.RoleCaller, "ws1"), `{"endpoint":"/slow","timeout":0.3}`)
		r := c.nextCall()
		got := awaitResult(t, res, 2*time.Second)
		if got.resp.Error != protocol.CodeTimeout {
			t.Fatalf("got %+v", got.resp)
		}
		if got.elapsed < 300*time.Millisecond || got.elapsed > 550*time.Millisecond {
			t.Fatalf("timeout answered after %s, want within 0.3s + 250ms", got.elapsed)
		}
		if cancel := c.wantCancel(r.call.CorrelationID); cancel.Reason != "timeout" {
			t.Fatalf("tool_cancel %+v, want reason timeout", cancel)
		}
		// A late answer is dropped, not delivered anywhere.
		c.ackOK(r, `"late"`)
		waitMetric(t, e, "tether_unmatched_answers_total 1")
	})
}

func TestDisconnectAnswersPendingCalls(t *testing.T) {
	eachPath(t, func(t *testing.T, mk func(*testing.T, ...func(*broker.Config)) *env) {
		e := mk(t)
		c := e.connect("ws1", e.token(auth.RoleBridge, "ws1"))
		tok := e.token(auth.RoleCaller, "ws1")
		var results []<-chan callResult
		for range 5 {
			results = append(results, e.goCall("ws1", tok, `{"endpoint":"/x","timeout":30}`))
			c.nextCall()
		}
		start := time.Now()
		_ = c.ws.CloseNow()
		for _, ch := range results {
			got := awaitResult(t, ch, 2*time.Second)
			if got.resp.Error != protocol.CodeWorkspaceDisconnected {
				t.Fatalf("got %+v", got.resp)
			}
		}
		if el := time.Since(start); el > 500*time.Millisecond {
			t.Fatalf("disconnect answered after %s", el)
		}
	})
}

func TestOverloadedAboveInFlightBound(t *testing.T) {
	eachPath(t, func(t *testing.T, mk func(*testing.T, ...func(*broker.Config)) *env) {
		e := mk(t, func(c *broker.Config) { c.MaxInFlight = 2 })
		c := e.connect("ws1", e.token(auth.RoleBridge, "ws1"))
		tok := e.token(auth.RoleCaller, "ws1")
		a := e.goCall("ws1", tok, `{"endpoint":"/x","timeout":10}`)
		ra := c.nextCall()
		b := e.goCall("ws1", tok, `{"endpoint":"/x","timeout":10}`)
		rb := c.nextCall()
		start := time.Now()
		status, resp := e.httpCall("ws1", tok, `{"endpoint":"/x","timeout":10}`)
		if status != 200 || resp.Error != protocol.CodeOverloaded || time.Since(start) > 100*time.Millisecond {
			t.Fatalf("third call: %d %+v after %s", status, resp, time.Since(start))
		}
		c.ackOK(ra, `1`)
		c.ackOK(rb, `2`)
		awaitResult(t, a, 5*time.Second)
		awaitResult(t, b, 5*time.Second)
	})
}

func TestShutdownDrainsThenAnswersBrokerShutdown(t *testing.T) {
	eachPath(t, func(t *testing.T, mk func(*testing.T, ...func(*broker.Config)) *env) {
		e := mk(t, func(c *broker.Config) { c.DrainTimeout = 300 * time.Millisecond })
		c := e.connect("ws1", e.token(auth.RoleBridge, "ws1"))
		tok := e.token(auth.RoleCaller, "ws1")
		answered := e.goCall("ws1", tok, `{"endpoint":"/x","timeout":30}`)
		ra := c.nextCall()
		stuck := e.goCall("ws1", tok, `{"endpoint":"/x","timeout":30}`)
		c.nextCall()
		done := make(chan error, 1)
		start := time.Now()
		go func() { done <- e.broker.Shutdown(context.Background()) }()
		// Answered during the drain: the answer goes through.
		c.ackOK(ra, `"drained"`)
		if got := awaitResult(t, answered, 2*time.Second); string(got.resp.Result) != `"drained"` {
			t.Fatalf("drained call got %+v", got.resp)
		}
		got := awaitResult(t, stuck, 2*time.Second)
		if got.resp.Error != protocol.CodeBrokerShutdown {
			t.Fatalf("stuck call got %+v", got.resp)
		}
		if el := time.Since(start); el < 300*time.Millisecond || el > time.Second {
			t.Fatalf("broker_shutdown after %s, want after the 300ms drain", el)
		}
		if err := <-done; err != nil {
			t.Fatal(err)
		}
		c.waitClosed(2 * time.Second)
		status, resp := e.httpCallTo(e.srv.URL, "ws1", tok, `{"endpoint":"/x"}`)
		if status != 200 || resp.Error != protocol.CodeBrokerShutdown {
			t.Fatalf("call after shutdown: %d %+v", status, resp)
		}
	})
}

func TestNewerConnectionReplacesOlder(t *testing.T) {
	e := newEnv(t)
	tok := e.token(auth.RoleBridge, "ws1")
	old := e.connect("ws1", tok)
	caller := e.token(auth.RoleCaller, "ws1")
	pendingOnOld := e.goCall("ws1", caller, `{"endpoint":"/x","timeout":30}`)
	old.nextCall()
	newer := e.connect("ws1", tok)
	name, _, arg := old.nextEvent()
	if name != broker.EventDisconnectReason || !strings.Contains(string(arg), broker.ReasonReplaced) {
		t.Fatalf("old connection got %s %s", name, arg)
	}
	old.waitClosed(2 * time.Second)
	if got := awaitResult(t, pendingOnOld, time.Second); got.resp.Error != protocol.CodeWorkspaceDisconnected {
		t.Fatalf("call pending on the replaced connection got %+v", got.resp)
	}
	res := e.goCall("ws1", caller, `{"endpoint":"/x","timeout":5}`)
	r := newer.nextCall()
	newer.ackOK(r, `"new"`)
	if got := awaitResult(t, res, 5*time.Second); string(got.resp.Result) != `"new"` {
		t.Fatalf("got %+v", got.resp)
	}
}

// A replaced connection's goodbye, frame by frame: the disconnect_reason
// event, then the Socket.IO DISCONNECT packet, then the close.
func TestReplacedConnectionGetsReasonThenDisconnectPacket(t *testing.T) {
	e := newEnv(t)
	tok := e.token(auth.RoleBridge, "ws1")
	old := e.connect("ws1", tok)
	e.connect("ws1", tok)
	if f := string(old.next()); !strings.HasPrefix(f, `42["`+broker.EventDisconnectReason+`",`) || !strings.Contains(f, broker.ReasonReplaced) {
		t.Fatalf("first goodbye frame %q, want the disconnect_reason event", f)
	}
	if f := string(old.next()); f != "41" {
		t.Fatalf("second goodbye frame %q, want the DISCONNECT packet 41", f)
	}
	old.waitClosed(2 * time.Second)
}

func TestAnswerToAnotherConnectionsCallIgnored(t *testing.T) {
	e := newEnv(t)
	c1 := e.connect("ws1", e.token(auth.RoleBridge, "ws1"))
	c2 := e.connect("ws2", e.token(auth.RoleBridge, "ws2"))
	res := e.goCall("ws1", e.token(auth.RoleCaller, "ws1"), `{"endpoint":"/x","timeout":0.5}`)
	r := c1.nextCall()
	// ws2's client answers ws1's call, by event and by ack id.
	c2.send(string(protocol.EncodeEvent(protocol.NoAck, protocol.EventToolResponse,
		json.RawMessage(`{"correlation_id":"`+r.call.CorrelationID+`","success":true,"result":"forged"}`))))
	c2.ackOK(r, `"forged"`)
	got := awaitResult(t, res, 2*time.Second)
	if got.resp.Success || got.resp.Error != protocol.CodeTimeout {
		t.Fatalf("forged answer accepted: %+v", got.resp)
	}
}

func TestMalformedPacketsCloseOnlyThatConnection(t *testing.T) {
	e := newEnv(t)
	good := e.connect("good", e.token(auth.RoleBridge, "good"))
	caller := e.token(auth.RoleCaller, "*")
	for i, frame := range []string{"9", "4", "49", `42["tool_response"`, `42{"a":1}`, `42[1,2]`, `43x[]`, `451-["x",{"_placeholder":true,"num":0}]`, `59007199254740991-["x",{"_placeholder":true,"num":0}]`,
		"42[\"tool_response\",{\"correlation_id\":\"c\",\"success\":true,\"result\":\"\xff\"}]", "3\xc3"} {
		bad := e.connect(fmt.Sprintf("bad%d", i), e.token(auth.RoleBridge, fmt.Sprintf("bad%d", i)))
		bad.send(frame)
		if frame == `451-["x",{"_placeholder":true,"num":0}]` {
			bad.send("not a binary frame") // text while an attachment is due
		}
		bad.waitClosed(2 * time.Second)
		res := e.goCall("good", caller, `{"endpoint":"/x","timeout":5}`)
		r := good.nextCall()
		good.ackOK(r, `"ok"`)
		if got := awaitResult(t, res, 5*time.Second); !got.resp.Success {
			t.Fatalf("after malformed %q the good workspace got %+v", frame, got.resp)
		}
	}
}

func TestPayloadOverMaxPayloadRefused(t *testing.T) {
	e := newEnv(t, func(c *broker.Config) { c.MaxPayload = 4096 })
	e.connect("ws1", e.token(auth.RoleBridge, "ws1"))
	big := strings.Repeat("x", 5000)
	status, resp := e.httpCall("ws1", e.token(auth.RoleCaller, "ws1"), `{"endpoint":"/x","payload":"`+big+`"}`)
	if status != http.StatusRequestEntityTooLarge || resp.Error != protocol.CodePayloadTooLarge {
		t.Fatalf("got %d %+v", status, resp)
	}
	// A client frame over maxPayload closes that client.
	c := e.connect("ws2", e.token(auth.RoleBridge, "ws2"))
	c.send(`42["tool_response",{"x":"` + big + `"}]`)
	c.waitClosed(2 * time.Second)
}

func TestBadRequestsGetStructuredErrors(t *testing.T) {
	e := newEnv(t)
	tok := e.token(auth.RoleCaller, "*")
	cases := map[string]string{
		"not json":         `{"endpoint":`,
		"missing endpoint": `{"payload":{}}`,
		"relative":         `{"endpoint":"api/x"}`,
		"timeout too low":  `{"endpoint":"/x","timeout":0.01}`,
		"timeout too high": `{"endpoint":"/x","timeout":601}`,
		"timeout string":   `{"endpoint":"/x","timeout":"5"}`,
	}
	for name, body := range cases {
		status, resp := e.httpCall("ws1", tok, body)
		if status != http.StatusBadRequest || resp.Error != protocol.CodeInvalidRequest || resp.Message == "" {
			t.Errorf("%s: got %d %+v", name, status, resp)
		}
	}
}

func TestCallBodyWithAnUnknownFieldAnswers400NamingIt(t *testing.T) {
	e := newEnv(t)
	tok := e.token(auth.RoleCaller, "*")
	for body, want := range map[string]string{
		`{"endpoint":"/x","timout":5}`:          `call body: unknown field "timout" (did you mean "timeout"?)`,
		`{"endpoint":"/x","reply_to":"inbox"}`:  `call body: unknown field "reply_to" (known fields: correlation_id, endpoint, payload, timeout, wait_for_workspace_ms, async, idempotency_key)`,
		`{"endpont":"/x"}`:                      `call body: unknown field "endpont" (did you mean "endpoint"?)`,
		`{"endpoint":"/x","paylaod":{"a":1}}`:   `call body: unknown field "paylaod" (did you mean "payload"?)`,
		`{"endpoint":"/x","\u0078":1}`:          `call body: unknown field "x" (known fields: correlation_id, endpoint, payload, timeout, wait_for_workspace_ms, async, idempotency_key)`,
		`{"endpoint":"/x","timeout":"5"}`:       `call body: field "timeout": `,
		`{"endpoint":"/x","payload":{"b":1}}}`:  `call body: `,
		`{"endpoint":"/x","payload":{"c":1}} x`: `call body: `,
	} {
		status, resp := e.httpCall("ws1", tok, body)
		if status != http.StatusBadRequest || resp.Error != protocol.CodeInvalidRequest || !strings.HasPrefix(resp.Message, want) {
			t.Errorf("%s: got %d %+v, want 400 invalid_request %q", body, status, resp, want)
		}
	}
	// The payload is the route's business, not the broker's: any members.
	if status, resp := e.httpCall("ws1", tok, `{"endpoint":"/x","payload":{"anything":[1]},"timeout":1}`); status != http.StatusOK || resp.Error != protocol.CodeWorkspaceOffline {
		t.Errorf("free-form payload: got %d %+v, want 200 workspace_offline", status, resp)
	}
}

func signed(t *testing.T, method jwt.SigningMethod, key any, claims jwt.MapClaims) string {
	t.Helper()
	s, err := jwt.NewWithClaims(method, claims).SignedString(key)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestBadTokensRefused(t *testing.T) {
	e := newEnv(t)
	exp := time.Now().Add(time.Hour).Unix()
	bridgeClaims := jwt.MapClaims{"role": "bridge", "workspaces": []string{"ws1"}, "exp": exp}
	noneTok := signed(t, jwt.SigningMethodNone, jwt.UnsafeAllowNoneSignatureType, bridgeClaims)
	cases := map[string]struct{ token, code string }{
		"bad signature":    {signed(t, jwt.SigningMethodHS256, []byte("other-secret"), bridgeClaims), protocol.CodeUnauthorized},
		"alg none":         {noneTok, protocol.CodeUnauthorized},
		"HS384":            {signed(t, jwt.SigningMethodHS384, testSecret, bridgeClaims), protocol.CodeUnauthorized},
		"HS512":            {signed(t, jwt.SigningMethodHS512, testSecret, bridgeClaims), protocol.CodeUnauthorized},
		"expired":          {signed(t, jwt.SigningMethodHS256, testSecret, jwt.MapClaims{"role": "bridge", "workspaces": []string{"ws1"}, "exp": time.Now().Add(-time.Hour).Unix()}), protocol.CodeUnauthorized},
		"not yet valid":    {signed(t, jwt.SigningMethodHS256, testSecret, jwt.MapClaims{"role": "bridge", "workspaces": []string{"ws1"}, "exp": exp, "nbf": time.Now().Add(time.Minute).Unix()}), protocol.CodeUnauthorized},
		"no expiry":        {signed(t, jwt.SigningMethodHS256, testSecret, jwt.MapClaims{"role": "bridge", "workspaces": []string{"ws1"}}), protocol.CodeUnauthorized},
		"other workspace":  {e.token(auth.RoleBridge, "ws2"), protocol.CodeForbidden},
		"caller as bridge": {e.token(auth.RoleCaller, "ws1"), protocol.CodeForbidden},
		"garbage":          {"not.a.token", protocol.CodeUnauthorized},
		"missing":          {"", protocol.CodeUnauthorized},
		"bridge wildcard":  {signed(t, jwt.SigningMethodHS256, testSecret, jwt.MapClaims{"role": "bridge", "workspaces": []string{"*"}, "exp": exp}), protocol.CodeForbidden},
	}
	for name, tc := range cases {
		c := e.dialRaw()
		c.send(`40{"token":"` + tc.token + `","workspace_id":"ws1"}`)
		f := c.next()
		if !strings.HasPrefix(string(f), "44{") || !strings.Contains(string(f), `"code":"`+tc.code+`"`) {
			t.Errorf("%s: CONNECT answered %q, want CONNECT_ERROR %s", name, f, tc.code)
		}
		c.waitClosed(2 * time.Second)
	}
	// A bridge token used as a caller.
	status, resp := e.httpCall("ws1", e.token(auth.RoleBridge, "ws1"), `{"endpoint":"/x"}`)
	if status != http.StatusForbidden || resp.Error != protocol.CodeForbidden {
		t.Errorf("bridge token as caller: %d %+v", status, resp)
	}
	status, resp = e.httpCall("ws1", e.token(auth.RoleCaller, "ws2"), `{"endpoint":"/x"}`)
	if status != http.StatusForbidden || resp.Error != protocol.CodeForbidden {
		t.Errorf("caller token for another workspace: %d %+v", status, resp)
	}
	status, resp = e.httpCall("ws1", "", `{"endpoint":"/x"}`)
	if status != http.StatusUnauthorized || resp.Error != protocol.CodeUnauthorized {
		t.Errorf("no token: %d %+v", status, resp)
	}
}

func TestTokenInAuthorizationHeaderAccepted(t *testing.T) {
	e := newEnv(t)
	c := e.dialWith(http.Header{"Authorization": {"Bearer " + e.token(auth.RoleBridge, "ws1")}}, false)
	c.send(`40`) // no auth payload: token from the header, workspace from the token
	if f := string(c.next()); !strings.HasPrefix(f, `40{"sid":`) {
		t.Fatalf("CONNECT answered %q", f)
	}
	res := e.goCall("ws1", e.token(auth.RoleCaller, "ws1"), `{"endpoint":"/x","timeout":5}`)
	c.ackOK(c.nextCall(), `"hdr"`)
	if got := awaitResult(t, res, 5*time.Second); string(got.resp.Result) != `"hdr"` {
		t.Fatalf("got %+v", got.resp)
	}
}

func TestUnknownNamespaceGetsConnectError(t *testing.T) {
	e := newEnv(t)
	c := e.dialRaw()
	c.send(`40/admin,{"token":"x"}`)
	if f := string(c.next()); !strings.HasPrefix(f, "44/admin,{") {
		t.Fatalf("got %q", f)
	}
}

func TestSilentClientClosedAfterPingTimeout(t *testing.T) {
	e := newEnv(t, func(c *broker.Config) {
		c.PingInterval = 100 * time.Millisecond
		c.PingTimeout = 100 * time.Millisecond
	})
	alive := e.connect("alive", e.token(auth.RoleBridge, "alive"))
	silent := e.dialWith(nil, true)
	silent.send(`40{"token":"` + e.token(auth.RoleBridge, "silent") + `","workspace_id":"silent"}`)
	silent.next() // CONNECT ack
	res := e.goCall("silent", e.token(auth.RoleCaller, "silent"), `{"endpoint":"/x","timeout":30}`)
	silent.nextCall()
	start := time.Now()
	silent.waitClosed(2 * time.Second)
	if el := time.Since(start); el > 400*time.Millisecond {
		t.Fatalf("silent client closed after %s, want within pingInterval+pingTimeout", el)
	}
	if got := awaitResult(t, res, time.Second); got.resp.Error != protocol.CodeWorkspaceDisconnected {
		t.Fatalf("call on the silent client got %+v", got.resp)
	}
	// The client that answers pings is still served, several intervals later.
	res = e.goCall("alive", e.token(auth.RoleCaller, "alive"), `{"endpoint":"/x","timeout":5}`)
	alive.ackOK(alive.nextCall(), `"alive"`)
	if got := awaitResult(t, res, 5*time.Second); !got.resp.Success {
		t.Fatalf("a client answering pings was dropped: %+v", got.resp)
	}
}

func TestConcurrentCallsAllAnsweredExactlyOnce(t *testing.T) {
	e := newEnv(t)
	c := e.connect("ws1", e.token(auth.RoleBridge, "ws1"))
	tok := e.token(auth.RoleCaller, "ws1")
	const n = 200
	go func() {
		for range n {
			r := c.nextCall()
			c.ackOK(r, `"`+r.call.CorrelationID+`"`)
		}
	}()
	var wg sync.WaitGroup
	seen := sync.Map{}
	for i := range n {
		wg.Go(func() {
			cid := fmt.Sprintf("cid-%d", i)
			status, resp := e.httpCall("ws1", tok, `{"endpoint":"/x","timeout":10,"correlation_id":"`+cid+`"}`)
			if status != 200 || !resp.Success || resp.CorrelationID != cid || string(resp.Result) != `"`+cid+`"` {
				t.Errorf("call %s: %d %+v", cid, status, resp)
			}
			if _, dup := seen.LoadOrStore(cid, true); dup {
				t.Errorf("call %s answered twice", cid)
			}
		})
	}
	wg.Wait()
}

func TestCallWaitingForWorkspaceDeliveredWhenItConnects(t *testing.T) {
	e := newEnv(t)
	tok := e.token(auth.RoleCaller, "late")
	start := time.Now()
	res := e.goCall("late", tok, `{"endpoint":"/x","timeout":5,"wait_for_workspace_ms":5000}`)
	select {
	case got := <-res:
		t.Fatalf("answered before the workspace connected: %+v", got.resp)
	case <-time.After(200 * time.Millisecond):
	}
	c := e.connect("late", e.token(auth.RoleBridge, "late"))
	c.ackOK(c.nextCall(), `"waited"`)
	got := awaitResult(t, res, 5*time.Second)
	if string(got.resp.Result) != `"waited"` || got.elapsed > 2*time.Second {
		t.Fatalf("got %+v after %s", got.resp, time.Since(start))
	}
}

func TestCallWaitingForWorkspaceAnswersOfflineAtDeadline(t *testing.T) {
	e := newEnv(t)
	res := e.goCall("never", e.token(auth.RoleCaller, "never"), `{"endpoint":"/x","timeout":0.4,"wait_for_workspace_ms":400}`)
	got := awaitResult(t, res, 2*time.Second)
	if got.resp.Error != protocol.CodeWorkspaceOffline || got.elapsed < 400*time.Millisecond || got.elapsed > 650*time.Millisecond {
		t.Fatalf("got %+v after %s, want workspace_offline at the 0.4s deadline", got.resp, got.elapsed)
	}
}

// TestCallWaitingForWorkspaceGivesUpAfterItsWait: wait_for_workspace_ms is
// the longest wait for the workspace, not a wait until the deadline: a call
// with a 6s timeout that may wait 300ms is answered workspace_offline after
// 300ms.
func TestCallWaitingForWorkspaceGivesUpAfterItsWait(t *testing.T) {
	e := newEnv(t)
	res := e.goCall("never", e.token(auth.RoleCaller, "never"), `{"endpoint":"/x","timeout":6,"wait_for_workspace_ms":300}`)
	got := awaitResult(t, res, 3*time.Second)
	if got.resp.Error != protocol.CodeWorkspaceOffline || got.elapsed < 300*time.Millisecond || got.elapsed > 550*time.Millisecond {
		t.Fatalf("got %+v after %s, want workspace_offline after the 300ms wait", got.resp, got.elapsed)
	}
	status, resp := e.httpCall("never", e.token(auth.RoleCaller, "never"), `{"endpoint":"/x","wait_for_workspace_ms":-1}`)
	if status != http.StatusBadRequest || resp.Error != protocol.CodeInvalidRequest || !strings.Contains(resp.Message, "wait_for_workspace_ms") {
		t.Fatalf("negative wait: %d %+v", status, resp)
	}
}

func TestClientWithoutConnectClosedAfterConnectTimeout(t *testing.T) {
	e := newEnv(t, func(c *broker.Config) { c.ConnectTimeout = 200 * time.Millisecond })
	c := e.dialRaw()
	start := time.Now()
	c.waitClosed(2 * time.Second)
	if el := time.Since(start); el < 150*time.Millisecond || el > time.Second {
		t.Fatalf("closed after %s, want about the 200ms connect timeout", el)
	}
}
