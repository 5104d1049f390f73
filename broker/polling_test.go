package broker_test

import (
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/tetherdev/tether/broker"
	"github.com/tetherdev/tether/broker/auth"
	"github.com/tetherdev/tether/protocol"
)

// pollClient drives the long-polling transport with plain HTTP.
type pollClient struct {
	t   *testing.T
	e   *env
	sid string
}

func (e *env) pollURL(sid string) string {
	u := e.srv.URL + "/socket.io/?EIO=4&transport=polling"
	if sid != "" {
		u += "&sid=" + sid
	}
	return u
}

func (e *env) pollOpen() *pollClient {
	e.t.Helper()
	status, body := httpDo(e.t, http.MethodGet, e.pollURL(""), "")
	if status != 200 || !strings.HasPrefix(body, "0{") {
		e.t.Fatalf("handshake: %d %q", status, body)
	}
	info, err := protocol.DecodeOpen([]byte(body[1:]))
	if err != nil {
		e.t.Fatal(err)
	}
	if len(info.Upgrades) != 1 || info.Upgrades[0] != "websocket" {
		e.t.Fatalf("open packet offers upgrades %v, want [websocket]", info.Upgrades)
	}
	return &pollClient{t: e.t, e: e, sid: info.SID}
}

func httpDo(t *testing.T, method, url, body string) (int, string) {
	t.Helper()
	req, _ := http.NewRequest(method, url, strings.NewReader(body))
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, url, err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return res.StatusCode, string(b)
}

func (p *pollClient) post(packets ...string) (int, string) {
	return httpDo(p.t, http.MethodPost, p.e.pollURL(p.sid), strings.Join(packets, "\x1e"))
}

func (p *pollClient) get() (int, []string) {
	status, body := httpDo(p.t, http.MethodGet, p.e.pollURL(p.sid), "")
	return status, strings.Split(body, "\x1e")
}

func TestPollingSessionServesCalls(t *testing.T) {
	e := newEnv(t)
	p := e.pollOpen()
	if status, body := p.post(`40{"token":"` + e.token(auth.RoleBridge, "pw") + `","workspace_id":"pw"}`); status != 200 || body != "ok" {
		t.Fatalf("POST CONNECT: %d %q", status, body)
	}
	if _, pk := p.get(); !strings.HasPrefix(pk[0], `40{"sid":`) {
		t.Fatalf("GET after CONNECT: %q", pk)
	}
	res := e.goCall("pw", e.token(auth.RoleCaller, "pw"), `{"endpoint":"/x","timeout":5}`)
	_, pk := p.get()
	sp, err := protocol.DecodeSIO([]byte(pk[0][1:]))
	if err != nil || sp.Type != protocol.SIOEvent {
		t.Fatalf("GET returned %q", pk)
	}
	args, _ := sp.Args()
	var call protocol.ToolCall
	_ = json.Unmarshal(args[1], &call)
	p.post(string(protocol.EncodeAck(sp.ID, json.RawMessage(`{"correlation_id":"`+call.CorrelationID+`","success":true,"result":"polled"}`))))
	if got := awaitResult(t, res, 5*time.Second); string(got.resp.Result) != `"polled"` {
		t.Fatalf("got %+v", got.resp)
	}
}

func TestPollingUnknownSessionRefused(t *testing.T) {
	e := newEnv(t)
	if status, _ := httpDo(t, http.MethodGet, e.pollURL("no-such-sid"), ""); status != http.StatusBadRequest {
		t.Fatalf("GET for an unknown sid: %d", status)
	}
	if status, _ := httpDo(t, http.MethodPost, e.pollURL("no-such-sid"), "3"); status != http.StatusBadRequest {
		t.Fatalf("POST for an unknown sid: %d", status)
	}
}

func TestPollingOverlappingGETsEndTheSession(t *testing.T) {
	e := newEnv(t)
	p := e.pollOpen()
	type got struct {
		status int
		body   string
	}
	results := make(chan got, 2)
	for range 2 {
		go func() {
			status, body := httpDo(t, http.MethodGet, e.pollURL(p.sid), "")
			results <- got{status, body}
		}()
	}
	var refused, closed int
	for range 2 {
		select {
		case r := <-results:
			switch {
			case r.status == http.StatusBadRequest:
				refused++
			case r.status == 200 && strings.HasSuffix(r.body, "1"):
				closed++ // the parked GET, released with the close packet
			default:
				t.Fatalf("unexpected answer %d %q", r.status, r.body)
			}
		case <-time.After(3 * time.Second):
			t.Fatal("a GET was left hanging")
		}
	}
	if refused != 1 || closed != 1 {
		t.Fatalf("refused %d, closed %d; want one of each", refused, closed)
	}
	if status, _ := httpDo(t, http.MethodGet, e.pollURL(p.sid), ""); status != http.StatusBadRequest {
		t.Fatalf("session still open after overlapping GETs: %d", status)
	}
}

func TestPollingMalformedPOSTEndsOnlyThatSession(t *testing.T) {
	e := newEnv(t, func(c *broker.Config) { c.MaxPayload = 2048 })
	good := e.connect("good", e.token(auth.RoleBridge, "good"))
	for _, body := range []string{"bnot-base64!", strings.Repeat("4", 3000), "9"} {
		p := e.pollOpen()
		p.post(body)
		status, pk := p.get()
		if status == 200 && pk[len(pk)-1] != "1" {
			t.Fatalf("after POST %.20q the session is still open: %q", body, pk)
		}
		res := e.goCall("good", e.token(auth.RoleCaller, "good"), `{"endpoint":"/x","timeout":5}`)
		good.ackOK(good.nextCall(), `"ok"`)
		if got := awaitResult(t, res, 5*time.Second); !got.resp.Success {
			t.Fatalf("the websocket client was affected: %+v", got.resp)
		}
	}
}
