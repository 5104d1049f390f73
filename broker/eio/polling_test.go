package eio

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/rs/zerolog"

	"github.com/tetherdev/tether/internal/testwait"
	"github.com/tetherdev/tether/protocol"
)

// quietHandler takes every packet and ends with nothing to say.
type quietHandler struct{}

func (quietHandler) Packet(protocol.SIOPacket) string { return "" }
func (quietHandler) Ended(string, bool) [][]byte      { return nil }

// pollGet makes a long-polling GET of session sid ("" for the handshake)
// and returns its body on the channel.
func pollGet(t *testing.T, base, sid string) <-chan string {
	t.Helper()
	out := make(chan string, 1)
	url := base + "/socket.io/?EIO=4&transport=polling"
	if sid != "" {
		url += "&sid=" + sid
	}
	go func() {
		res, err := http.Get(url)
		if err != nil {
			out <- "error: " + err.Error()
			return
		}
		defer res.Body.Close()
		body, _ := io.ReadAll(res.Body)
		out <- string(body)
	}()
	return out
}

func awaitBody(t *testing.T, what string, ch <-chan string) string {
	t.Helper()
	select {
	case body := <-ch:
		return body
	case <-time.After(5 * time.Second):
		t.Fatalf("%s: no answer within 5s", what)
		return ""
	}
}

// The upgrade of a polling session: the probe releases the waiting GET
// with a noop, and a GET that is waiting when the client's "5" switches
// the session over gets a noop too, not a wait until the client gives up.
func TestUpgradeAnswersEveryWaitingGETWithANoop(t *testing.T) {
	srv := NewServer(Config{PingInterval: time.Minute, PingTimeout: time.Minute, ConnectTimeout: time.Minute,
		WriteTimeout: 5 * time.Second, MaxPayload: 1 << 20, MaxQueue: 64, LimitLoopback: false, Logger: zerolog.Nop()},
		func(*Session) Handler { return quietHandler{} })
	hs := httptest.NewServer(srv)
	t.Cleanup(func() { srv.Close(); hs.Close() })

	open := awaitBody(t, "handshake", pollGet(t, hs.URL, ""))
	var o struct {
		SID string `json:"sid"`
	}
	if !strings.HasPrefix(open, "0") || json.Unmarshal([]byte(open[1:]), &o) != nil || o.SID == "" {
		t.Fatalf("open packet %q", open)
	}
	v, _ := srv.polls.Load(o.SID)
	tr := v.(*pollTransport)
	waiting := func() bool {
		tr.mu.Lock()
		defer tr.mu.Unlock()
		return tr.polling
	}

	first := pollGet(t, hs.URL, o.SID)
	testwait.Until(t, 5*time.Second, waiting, "the first GET waiting")
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	ws, _, err := websocket.Dial(ctx, strings.Replace(hs.URL, "http", "ws", 1)+"/socket.io/?EIO=4&transport=websocket&sid="+o.SID, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer ws.CloseNow()
	if err := ws.Write(ctx, websocket.MessageText, []byte("2probe")); err != nil {
		t.Fatal(err)
	}
	if _, msg, err := ws.Read(ctx); err != nil || string(msg) != "3probe" {
		t.Fatalf("probe answered %q, %v", msg, err)
	}
	if body := awaitBody(t, "the GET waiting at the probe", first); body != "6" {
		t.Fatalf("the GET waiting at the probe got %q, want a noop", body)
	}

	second := pollGet(t, hs.URL, o.SID)
	testwait.Until(t, 5*time.Second, waiting, "a second GET waiting")
	if err := ws.Write(ctx, websocket.MessageText, []byte("5")); err != nil {
		t.Fatal(err)
	}
	if body := awaitBody(t, "the GET waiting at the upgrade", second); body != "6" {
		t.Fatalf("the GET waiting at the upgrade got %q, want a noop", body)
	}
	if !tr.isWS.Load() {
		t.Fatal("the session did not switch to the WebSocket")
	}
}
