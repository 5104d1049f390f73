package broker_test

import (
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/tetherdev/tether/broker/auth"
	"github.com/tetherdev/tether/broker/store"
	"github.com/tetherdev/tether/protocol"
)

// apiRequest sends one request to the broker's API and returns its status,
// its headers and its body.
func (e *env) apiRequest(method, path, token, body string, header ...string) (int, http.Header, []byte) {
	e.t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, _ := http.NewRequest(method, e.srv.URL+path, rd)
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		e.t.Fatalf("%s %s: %v", method, path, err)
	}
	defer res.Body.Close()
	raw, _ := io.ReadAll(res.Body)
	return res.StatusCode, res.Header, raw
}

// submit posts an async call and returns its record; want is the HTTP
// status expected.
func (e *env) submit(ws, token, body string, want int, header ...string) (store.Record, http.Header) {
	e.t.Helper()
	status, h, raw := e.apiRequest(http.MethodPost, "/api/v1/workspaces/"+ws+"/calls", token, body, header...)
	if status != want {
		e.t.Fatalf("submit %s: HTTP %d %s, want %d", body, status, raw, want)
	}
	var rec store.Record
	if status == http.StatusAccepted || status == http.StatusOK {
		if err := json.Unmarshal(raw, &rec); err != nil {
			e.t.Fatalf("submit answered %s: %v", raw, err)
		}
	}
	return rec, h
}

// callStatus reads GET /api/v1/calls/{cid}{query}.
func (e *env) callStatus(cid, token, query string) (int, store.Record, protocol.ToolResponse) {
	e.t.Helper()
	status, _, raw := e.apiRequest(http.MethodGet, "/api/v1/calls/"+cid+query, token, "")
	var rec store.Record
	var fail protocol.ToolResponse
	if status == http.StatusOK {
		_ = json.Unmarshal(raw, &rec)
	} else {
		_ = json.Unmarshal(raw, &fail)
	}
	return status, rec, fail
}

func (e *env) cancelCall(cid, token string) (int, store.Record) {
	e.t.Helper()
	status, _, raw := e.apiRequest(http.MethodPost, "/api/v1/calls/"+cid+"/cancel", token, "")
	var rec store.Record
	_ = json.Unmarshal(raw, &rec)
	return status, rec
}

func TestAsyncSubmitAnswers202ThenWaitGivesTheOutcome(t *testing.T) {
	e := newEnv(t)
	c := e.connect("ws-a", e.token(auth.RoleBridge, "ws-a"))
	tok := e.token(auth.RoleCaller, "ws-a")
	rec, h := e.submit("ws-a", tok, `{"endpoint":"/x","payload":{"n":1},"timeout":5,"async":true}`, http.StatusAccepted)
	if rec.CorrelationID == "" || rec.Status != store.Delivered || rec.WorkspaceID != "ws-a" || rec.Endpoint != "/x" || h.Get("Location") != "/api/v1/calls/"+rec.CorrelationID {
		t.Fatalf("submit: %+v, Location %q", rec, h.Get("Location"))
	}
	r := c.nextCall()
	if r.call.CorrelationID != rec.CorrelationID || string(r.call.Payload) != `{"n":1}` || r.call.Async || r.call.IdempotencyKey != "" {
		t.Fatalf("client got %+v", r.call)
	}
	waited := make(chan store.Record, 1)
	go func() {
		_, got, _ := e.callStatus(rec.CorrelationID, tok, "?wait=10")
		waited <- got
	}()
	time.Sleep(50 * time.Millisecond) // the subject: a wait under way does not answer before the outcome
	select {
	case got := <-waited:
		t.Fatalf("wait answered before the outcome: %+v", got)
	default:
	}
	start := time.Now()
	c.ackOK(r, `{"done":true}`)
	select {
	case got := <-waited:
		if got.Status != store.Succeeded || got.Response == nil || !got.Response.Success || string(got.Response.Result) != `{"done":true}` || got.DeliveredAt == nil || got.FinishedAt == nil {
			t.Fatalf("after the answer: %+v %+v", got, got.Response)
		}
		if el := time.Since(start); el > time.Second {
			t.Fatalf("wait answered %s after the outcome", el)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("wait not answered after the outcome")
	}
}

func TestAsyncPreferRespondAsyncHeaderSubmits(t *testing.T) {
	e := newEnv(t)
	e.connect("ws-p", e.token(auth.RoleBridge, "ws-p"))
	rec, h := e.submit("ws-p", e.token(auth.RoleCaller, "ws-p"), `{"endpoint":"/x","timeout":5}`, http.StatusAccepted, "Prefer", "return=minimal, respond-async")
	if rec.CorrelationID == "" || h.Get("Preference-Applied") != "respond-async" {
		t.Fatalf("%+v %v", rec, h)
	}
}

// TestAsyncPreferWaitAnswersTheOutcomeInTheSubmit: with Prefer: wait=S a
// submit whose call ends within S seconds is answered 200 with the final
// record, in the one request; one that does not is answered 202 after S
// seconds with its record then, and goes on as any async call.
func TestAsyncPreferWaitAnswersTheOutcomeInTheSubmit(t *testing.T) {
	e := newEnv(t)
	c := e.connect("ws-w", e.token(auth.RoleBridge, "ws-w"))
	tok := e.token(auth.RoleCaller, "ws-w")

	type answer struct {
		status  int
		rec     store.Record
		h       http.Header
		elapsed time.Duration
	}
	submit := func(body string, want int, prefer string) func() answer {
		out := make(chan answer, 1)
		start := time.Now()
		go func() {
			status, h, raw := e.apiRequest(http.MethodPost, "/api/v1/workspaces/ws-w/calls", tok, body, "Prefer", prefer)
			a := answer{status: status, h: h, elapsed: time.Since(start)}
			_ = json.Unmarshal(raw, &a.rec)
			out <- a
		}()
		return func() answer {
			t.Helper()
			a := <-out
			if a.status != want {
				t.Fatalf("submit %s with Prefer %q: HTTP %d %+v, want %d", body, prefer, a.status, a.rec, want)
			}
			return a
		}
	}
	quick := submit(`{"endpoint":"/x","timeout":5,"async":true}`, http.StatusOK, "wait=5")
	r := c.nextCall()
	c.ackOK(r, `{"done":1}`)
	got := quick()
	if got.rec.Status != store.Succeeded || got.rec.Response == nil || string(got.rec.Response.Result) != `{"done":1}` || got.rec.CorrelationID != r.call.CorrelationID {
		t.Fatalf("quick call: %+v", got.rec)
	}
	if got.h.Get("Location") != "/api/v1/calls/"+got.rec.CorrelationID || got.h.Get("Preference-Applied") != "wait=5" || got.elapsed > 2*time.Second {
		t.Fatalf("quick call: Location %q, Preference-Applied %q, after %s", got.h.Get("Location"), got.h.Get("Preference-Applied"), got.elapsed)
	}

	slow := submit(`{"endpoint":"/x","timeout":5}`, http.StatusAccepted, "respond-async, wait=0.3")
	r = c.nextCall()
	got = slow()
	if got.rec.Status != store.Delivered || got.h.Get("Preference-Applied") != "wait=0.3, respond-async" {
		t.Fatalf("slow call: %+v, Preference-Applied %q", got.rec, got.h.Get("Preference-Applied"))
	}
	if got.elapsed < 300*time.Millisecond || got.elapsed > 1300*time.Millisecond {
		t.Fatalf("slow call answered after %s, want after its 0.3 s wait", got.elapsed)
	}
	c.ackOK(r, `{"later":1}`)
	if _, rec, _ := e.callStatus(got.rec.CorrelationID, tok, "?wait=5"); rec.Status != store.Succeeded || string(rec.Response.Result) != `{"later":1}` {
		t.Fatalf("slow call's outcome: %+v", rec)
	}

	// A wait that is not seconds from 0 to 60 is refused, naming it, and
	// nothing runs: the next call the client gets is the one after it.
	if status, _, raw := e.apiRequest(http.MethodPost, "/api/v1/workspaces/ws-w/calls", tok, `{"endpoint":"/refused","async":true}`, "Prefer", "wait=90"); status != http.StatusBadRequest || !strings.Contains(string(raw), "Prefer: wait") {
		t.Fatalf("wait=90: %d %s", status, raw)
	}
	if status, _, raw := e.apiRequest(http.MethodPost, "/api/v1/workspaces/ws-w/calls", tok, `{"endpoint":"/refused"}`, "Prefer", "respond-async, wait=90"); status != http.StatusBadRequest || !strings.Contains(string(raw), "Prefer: wait") {
		t.Fatalf("respond-async, wait=90: %d %s", status, raw)
	}
	next := submit(`{"endpoint":"/next","timeout":5,"async":true}`, http.StatusAccepted, "")
	if r := c.nextCall(); r.call.Endpoint != "/next" {
		t.Fatalf("client got %+v after the refused submit", r.call)
	}
	next()
}

func TestAsyncBadRequestsGetStructuredErrors(t *testing.T) {
	e := newEnv(t)
	tok := e.token(auth.RoleCaller, "ws-b")
	other := e.token(auth.RoleCaller, "ws-other")
	c := e.connect("ws-b", e.token(auth.RoleBridge, "ws-b"))
	rec, _ := e.submit("ws-b", tok, `{"endpoint":"/x","timeout":5,"async":true}`, http.StatusAccepted)
	c.nextCall()
	for _, tc := range []struct {
		name, cid, token, query string
		status                  int
		code                    string
	}{
		{"unknown id", "no-such-call", tok, "", http.StatusNotFound, protocol.CodeCallNotFound},
		{"another workspace's call", rec.CorrelationID, other, "", http.StatusForbidden, protocol.CodeForbidden},
		{"no token", rec.CorrelationID, "", "", http.StatusUnauthorized, protocol.CodeUnauthorized},
		{"bridge token", rec.CorrelationID, e.token(auth.RoleBridge, "ws-b"), "", http.StatusForbidden, protocol.CodeForbidden},
		{"wait too long", rec.CorrelationID, tok, "?wait=61", http.StatusBadRequest, protocol.CodeInvalidRequest},
		{"wait negative", rec.CorrelationID, tok, "?wait=-1", http.StatusBadRequest, protocol.CodeInvalidRequest},
		{"wait not a number", rec.CorrelationID, tok, "?wait=soon", http.StatusBadRequest, protocol.CodeInvalidRequest},
		{"wait empty", rec.CorrelationID, tok, "?wait=", http.StatusBadRequest, protocol.CodeInvalidRequest},
	} {
		status, _, fail := e.callStatus(tc.cid, tc.token, tc.query)
		if status != tc.status || fail.Error != tc.code || fail.Message == "" {
			t.Errorf("%s: HTTP %d %+v, want %d %s", tc.name, status, fail, tc.status, tc.code)
		}
	}
	if status, _ := e.cancelCall(rec.CorrelationID, other); status != http.StatusForbidden {
		t.Errorf("cancel with another workspace's token: HTTP %d", status)
	}
	if status, _ := e.cancelCall("no-such-call", tok); status != http.StatusNotFound {
		t.Errorf("cancel of an unknown id: HTTP %d", status)
	}
	// Submits that cannot be made.
	for _, tc := range []struct {
		name, body string
		header     []string
		status     int
		code       string
	}{
		{"no endpoint", `{"async":true}`, nil, http.StatusBadRequest, protocol.CodeInvalidRequest},
		{"negative wait", `{"endpoint":"/x","async":true,"wait_for_workspace_ms":-5}`, nil, http.StatusBadRequest, protocol.CodeInvalidRequest},
		{"key without async", `{"endpoint":"/x","idempotency_key":"k"}`, nil, http.StatusBadRequest, protocol.CodeInvalidRequest},
		{"header and field differ", `{"endpoint":"/x","async":true,"idempotency_key":"k"}`, []string{"Idempotency-Key", "other"}, http.StatusBadRequest, protocol.CodeInvalidRequest},
		{"id taken", `{"endpoint":"/x","async":true,"correlation_id":"` + rec.CorrelationID + `"}`, nil, http.StatusConflict, protocol.CodeConflict},
	} {
		status, _, raw := e.apiRequest(http.MethodPost, "/api/v1/workspaces/ws-b/calls", tok, tc.body, tc.header...)
		var fail protocol.ToolResponse
		_ = json.Unmarshal(raw, &fail)
		if status != tc.status || fail.Error != tc.code || fail.Message == "" {
			t.Errorf("%s: HTTP %d %s, want %d %s", tc.name, status, raw, tc.status, tc.code)
		}
	}
}

func TestAsyncIdempotencyKeyReturnsTheSameCallOnce(t *testing.T) {
	e := newEnv(t)
	c := e.connect("ws-i", e.token(auth.RoleBridge, "ws-i"))
	tok := e.token(auth.RoleCaller, "ws-i")
	body := `{"endpoint":"/x","payload":{"a":1},"timeout":5,"async":true}`
	first, _ := e.submit("ws-i", tok, body, http.StatusAccepted, "Idempotency-Key", "job-1")
	again, _ := e.submit("ws-i", tok, `{"endpoint":"/x","payload":{ "a" : 1 },"timeout":5,"async":true,"idempotency_key":"job-1"}`, http.StatusAccepted)
	if again.CorrelationID != first.CorrelationID {
		t.Fatalf("retry made call %s, want %s", again.CorrelationID, first.CorrelationID)
	}
	status, _, raw := e.apiRequest(http.MethodPost, "/api/v1/workspaces/ws-i/calls", tok, `{"endpoint":"/x","payload":{"a":2},"timeout":5,"async":true}`, "Idempotency-Key", "job-1")
	var fail protocol.ToolResponse
	_ = json.Unmarshal(raw, &fail)
	if status != http.StatusConflict || fail.Error != protocol.CodeConflict || !strings.Contains(fail.Message, "job-1") {
		t.Fatalf("same key, other body: HTTP %d %s", status, raw)
	}
	r := c.nextCall()
	c.ackOK(r, `"once"`)
	select {
	case f := <-c.frames:
		t.Fatalf("a second frame reached the client: %q", f)
	case <-time.After(200 * time.Millisecond):
	}
}

func TestAsyncCancelWhileDeliveredSendsToolCancel(t *testing.T) {
	e := newEnv(t)
	c := e.connect("ws-c", e.token(auth.RoleBridge, "ws-c"))
	tok := e.token(auth.RoleCaller, "ws-c")
	rec, _ := e.submit("ws-c", tok, `{"endpoint":"/x","timeout":30,"async":true}`, http.StatusAccepted)
	r := c.nextCall()
	status, got := e.cancelCall(rec.CorrelationID, tok)
	if status != http.StatusOK || got.Status != store.Cancelled || got.Response == nil || got.Response.Error != protocol.CodeCancelled {
		t.Fatalf("cancel: HTTP %d %+v", status, got)
	}
	c.wantCancel(rec.CorrelationID)
	// The client's late answer loses: the call stays cancelled.
	c.ackOK(r, `"late"`)
	_, after, _ := e.callStatus(rec.CorrelationID, tok, "")
	if after.Status != store.Cancelled {
		t.Fatalf("after the late answer: %+v", after)
	}
	// Cancelling a call with an outcome leaves it as it is.
	done, _ := e.submit("ws-c", tok, `{"endpoint":"/x","timeout":30,"async":true}`, http.StatusAccepted)
	c.ackOK(c.nextCall(), `"ok"`)
	_, final, _ := e.callStatus(done.CorrelationID, tok, "?wait=5")
	if final.Status != store.Succeeded {
		t.Fatalf("waited for %+v", final)
	}
	if status, got := e.cancelCall(done.CorrelationID, tok); status != http.StatusOK || got.Status != store.Succeeded || string(got.Response.Result) != `"ok"` {
		t.Fatalf("cancel after success: HTTP %d %+v", status, got)
	}
}

func TestAsyncOfflineWorkspaceWithoutWaitFailsAtOnce(t *testing.T) {
	e := newEnv(t)
	tok := e.token(auth.RoleCaller, "ws-off")
	rec, _ := e.submit("ws-off", tok, `{"endpoint":"/x","timeout":30,"async":true}`, http.StatusAccepted)
	if rec.Status != store.Failed || rec.Response == nil || rec.Response.Error != protocol.CodeWorkspaceOffline {
		t.Fatalf("submit: %+v %+v", rec, rec.Response)
	}
}

func TestAsyncQueuedCallIsDeliveredWhenTheWorkspaceConnects(t *testing.T) {
	e := newEnv(t)
	tok := e.token(auth.RoleCaller, "ws-late")
	first, _ := e.submit("ws-late", tok, `{"endpoint":"/first","timeout":10,"async":true,"wait_for_workspace_ms":5000}`, http.StatusAccepted)
	second, _ := e.submit("ws-late", tok, `{"endpoint":"/second","timeout":10,"async":true,"wait_for_workspace_ms":5000}`, http.StatusAccepted)
	if _, rec, _ := e.callStatus(first.CorrelationID, tok, "?wait=0.2"); rec.Status != store.Queued {
		t.Fatalf("before the workspace connects: %+v", rec)
	}
	c := e.connect("ws-late", e.token(auth.RoleBridge, "ws-late"))
	r1, r2 := c.nextCall(), c.nextCall()
	if r1.call.CorrelationID != first.CorrelationID || r2.call.CorrelationID != second.CorrelationID {
		t.Fatalf("delivered %s then %s, want the submit order", r1.call.Endpoint, r2.call.Endpoint)
	}
	if r1.call.Timeout > 10 || r1.call.Timeout < 9 {
		t.Fatalf("timeout sent %v, want the time left", r1.call.Timeout)
	}
	c.ackOK(r1, `1`)
	c.ackOK(r2, `2`)
	for _, cid := range []string{first.CorrelationID, second.CorrelationID} {
		if _, rec, _ := e.callStatus(cid, tok, "?wait=5"); rec.Status != store.Succeeded {
			t.Fatalf("%s: %+v", cid, rec)
		}
	}
}

func TestAsyncQueuedCallPastItsDeadlineTimesOutAndIsNeverDelivered(t *testing.T) {
	e := newEnv(t)
	tok := e.token(auth.RoleCaller, "ws-dl")
	rec, _ := e.submit("ws-dl", tok, `{"endpoint":"/x","timeout":0.3,"async":true,"wait_for_workspace_ms":60000}`, http.StatusAccepted)
	_, got, _ := e.callStatus(rec.CorrelationID, tok, "?wait=5")
	if got.Status != store.Failed || got.Response.Error != protocol.CodeTimeout || got.DeliveredAt != nil {
		t.Fatalf("got %+v %+v", got, got.Response)
	}
	if late := got.FinishedAt.Sub(rec.Deadline); late < 0 || late > 500*time.Millisecond {
		t.Fatalf("ended %s after its deadline", late)
	}
	c := e.connect("ws-dl", e.token(auth.RoleBridge, "ws-dl"))
	select {
	case f := <-c.frames:
		t.Fatalf("the timed-out call reached the client: %q", f)
	case <-time.After(300 * time.Millisecond):
	}
	// A wait shorter than the timeout ends workspace_offline.
	rec, _ = e.submit("ws-gone", e.token(auth.RoleCaller, "ws-gone"), `{"endpoint":"/x","timeout":30,"async":true,"wait_for_workspace_ms":200}`, http.StatusAccepted)
	_, got, _ = e.callStatus(rec.CorrelationID, e.token(auth.RoleCaller, "ws-gone"), "?wait=5")
	if got.Status != store.Failed || got.Response.Error != protocol.CodeWorkspaceOffline {
		t.Fatalf("got %+v %+v", got, got.Response)
	}
}

func TestAsyncWaitAnswersWithTheCurrentStatusWhenItEnds(t *testing.T) {
	e := newEnv(t)
	c := e.connect("ws-w", e.token(auth.RoleBridge, "ws-w"))
	tok := e.token(auth.RoleCaller, "ws-w")
	rec, _ := e.submit("ws-w", tok, `{"endpoint":"/x","timeout":30,"async":true}`, http.StatusAccepted)
	c.nextCall()
	start := time.Now()
	status, got, _ := e.callStatus(rec.CorrelationID, tok, "?wait=0.3")
	if el := time.Since(start); status != http.StatusOK || got.Status != store.Delivered || el < 300*time.Millisecond || el > time.Second {
		t.Fatalf("HTTP %d %+v after %s, want delivered after 0.3s", status, got, el)
	}
}

// The broker times each step of its call store: a submit takes a create,
// its outcome a finish, and a status read of an unknown call a get (not
// counted as a failure).
func TestAsyncStoreStepsAreInTheMetrics(t *testing.T) {
	e := newEnv(t)
	c := e.connect("ws-m", e.token(auth.RoleBridge, "ws-m"))
	tok := e.token(auth.RoleCaller, "ws-m")
	rec, _ := e.submit("ws-m", tok, `{"endpoint":"/x","timeout":5,"async":true}`, http.StatusAccepted)
	c.ackOK(c.nextCall(), `1`)
	if _, got, _ := e.callStatus(rec.CorrelationID, tok, "?wait=10"); got.Status != store.Succeeded {
		t.Fatalf("outcome: %+v", got)
	}
	if code, _, _ := e.callStatus("no-such-call", tok, ""); code != http.StatusNotFound {
		t.Fatalf("unknown call: HTTP %d", code)
	}
	waitMetric(t, e, `tether_call_store_step_seconds_count{op="finish"} 1`)
	waitMetric(t, e, `tether_call_store_step_seconds_count{op="get"}`)
	m := metricsText(t, e)
	// Held here, the submit is recorded by the held create, or by the
	// plain one when it came while the connection's connect-time drain
	// ran longer than a submit waits for it (a loaded machine).
	if !strings.Contains(m, `tether_call_store_step_seconds_count{op="create_delivered"} 1`) && !strings.Contains(m, `tether_call_store_step_seconds_count{op="create"} 1`) {
		t.Fatalf("no create step counted:\n%s", m)
	}
	if strings.Contains(m, "tether_call_store_failures_total{") {
		t.Fatalf("store failures counted:\n%s", m)
	}
}
