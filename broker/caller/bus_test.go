package caller_test

import (
	"context"
	"encoding/json"
	"sync"
	"testing"
	"time"

	"github.com/tetherdev/tether/broker/bus"
	"github.com/tetherdev/tether/broker/bus/redistest"
	"github.com/tetherdev/tether/broker/caller"
	"github.com/tetherdev/tether/internal/testwait"
	"github.com/tetherdev/tether/protocol"
)

func TestBusCallIsAnsweredByTheOwner(t *testing.T) {
	eachBus(t, func(t *testing.T, pair busPair) {
		ob, cb := pair(t)
		o := startOwner(t, ob, "w1", echo)
		o.recordAll()
		c := newCaller(t, cb, 0)
		resp := c.Call(context.Background(), caller.Request{
			WorkspaceID: "w1", Endpoint: "/api/ping", Payload: json.RawMessage(`{"n":1}`),
			Timeout: 5 * time.Second, CorrelationID: "cid-1",
		})
		if !resp.Success || resp.CorrelationID != "cid-1" || string(resp.Result) != `{"n":1}` {
			t.Fatalf("got %+v", resp)
		}
		o.mu.Lock()
		defer o.mu.Unlock()
		if len(o.seen) != 1 {
			t.Fatalf("owner saw %d messages", len(o.seen))
		}
		m := o.seen[0]
		// The call carries what the owner needs to answer on its own.
		if m.ReplyTo != c.Inbox() || m.Timeout != 5 || m.Endpoint != "/api/ping" {
			t.Fatalf("call on the bus: %+v", m)
		}
		if d := time.Until(time.UnixMilli(m.DeadlineMS)); d < 4*time.Second || d > 5*time.Second {
			t.Fatalf("deadline_ms is %v away, want about 5s", d)
		}
		if c.Pending() != 0 {
			t.Fatalf("%d waiters left", c.Pending())
		}
	})
}

func TestBusCallToOfflineWorkspaceAnswersImmediately(t *testing.T) {
	eachBus(t, func(t *testing.T, pair busPair) {
		_, cb := pair(t)
		c := newCaller(t, cb, 0)
		start := time.Now()
		resp := c.Call(context.Background(), caller.Request{WorkspaceID: "nobody", Endpoint: "/api/ping", Timeout: 30 * time.Second})
		if el := time.Since(start); el > 100*time.Millisecond {
			t.Fatalf("offline answered after %v", el)
		}
		if resp.Error != protocol.CodeWorkspaceOffline {
			t.Fatalf("got %+v", resp)
		}
		if c.Pending() != 0 {
			t.Fatalf("%d waiters left", c.Pending())
		}
	})
}

// TestBusSilentOwnerAnsweredAtDeadlinePlusGrace: the owner received the call
// and never answers (not even its own timeout): the caller's own timer
// answers timeout, not before the deadline plus grace and not much after.
func TestBusSilentOwnerAnsweredAtDeadlinePlusGrace(t *testing.T) {
	eachBus(t, func(t *testing.T, pair busPair) {
		ob, cb := pair(t)
		startOwner(t, ob, "w-silent", silent)
		const grace = 200 * time.Millisecond
		c := newCaller(t, cb, grace)
		start := time.Now()
		resp := c.Call(context.Background(), caller.Request{WorkspaceID: "w-silent", Endpoint: "/api/ping", Timeout: 300 * time.Millisecond})
		el := time.Since(start)
		if resp.Error != protocol.CodeTimeout {
			t.Fatalf("got %+v", resp)
		}
		if el < 500*time.Millisecond || el > 650*time.Millisecond {
			t.Fatalf("answered after %v, want 300ms + 200ms grace", el)
		}
		if c.Pending() != 0 {
			t.Fatalf("%d waiters left", c.Pending())
		}
	})
}

// TestBusDeadOwnerAnsweredAtDeadlinePlusGrace: the owner instance dies (its
// whole Redis connection goes) with calls delivered to it. Nobody else can
// answer them; every caller is answered timeout by its own deadline plus
// grace.
func TestBusDeadOwnerAnsweredAtDeadlinePlusGrace(t *testing.T) {
	srv := redistest.Start(t)
	prefix := uniquePrefix(t)
	owner := newRedis(t, srv.URL(), prefix)
	o := startOwner(t, owner, "w-dies", silent)
	const grace = 200 * time.Millisecond
	c := newCaller(t, newRedis(t, srv.URL(), prefix), grace)
	const n = 50
	type result struct {
		resp protocol.ToolResponse
		el   time.Duration
	}
	results := make(chan result, n)
	start := time.Now()
	for range n {
		go func() {
			t0 := time.Now()
			r := c.Call(context.Background(), caller.Request{WorkspaceID: "w-dies", Endpoint: "/api/ping", Timeout: time.Second})
			results <- result{r, time.Since(t0)}
		}()
	}
	o.waitCalls(t, n)
	o.close()
	if err := owner.Close(); err != nil {
		t.Fatal(err)
	}
	for range n {
		r := <-results
		if r.resp.Error != protocol.CodeTimeout {
			t.Fatalf("got %+v", r.resp)
		}
		if r.el < time.Second+grace || r.el > time.Second+grace+150*time.Millisecond {
			t.Fatalf("answered after %v, want 1s + %v grace", r.el, grace)
		}
	}
	if el := time.Since(start); el > 2*time.Second {
		t.Fatalf("all answered after %v", el)
	}
	if c.Pending() != 0 {
		t.Fatalf("%d waiters left", c.Pending())
	}
}

// TestBusReplyAfterGiveUpIsUnmatched: a reply that arrives after the caller
// answered timeout is counted and dropped; it does not answer anything.
func TestBusReplyAfterGiveUpIsUnmatched(t *testing.T) {
	eachBus(t, func(t *testing.T, pair busPair) {
		ob, cb := pair(t)
		startOwner(t, ob, "w-late", func(call protocol.ToolCall) (*protocol.ToolResponse, time.Duration) {
			r := protocol.Success(call.CorrelationID, json.RawMessage(`"late"`))
			return &r, 300 * time.Millisecond
		})
		c := newCaller(t, cb, 10*time.Millisecond)
		resp := c.Call(context.Background(), caller.Request{WorkspaceID: "w-late", Endpoint: "/api/ping", Timeout: 100 * time.Millisecond})
		if resp.Error != protocol.CodeTimeout {
			t.Fatalf("got %+v", resp)
		}
		testwait.Until(t, 5*time.Second, func() bool { return c.Unmatched() == 1 }, "the late reply to be counted unmatched")
		if c.Pending() != 0 {
			t.Fatalf("%d waiters left", c.Pending())
		}
	})
}

// TestBusCancelledContextTellsTheOwner: a caller that gives up answers
// cancelled at once and publishes a cancel for the call on the workspace
// channel, so the owner can stop the work.
func TestBusCancelledContextTellsTheOwner(t *testing.T) {
	eachBus(t, func(t *testing.T, pair busPair) {
		ob, cb := pair(t)
		o := startOwner(t, ob, "w-cancel", silent)
		o.recordAll()
		c := newCaller(t, cb, 0)
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan protocol.ToolResponse, 1)
		go func() {
			done <- c.Call(ctx, caller.Request{WorkspaceID: "w-cancel", Endpoint: "/api/ping", Timeout: 30 * time.Second, CorrelationID: "cid-c"})
		}()
		o.waitCalls(t, 1)
		cancel()
		select {
		case resp := <-done:
			if resp.Error != protocol.CodeCancelled {
				t.Fatalf("got %+v", resp)
			}
		case <-time.After(time.Second):
			t.Fatal("cancelled call not answered within 1s")
		}
		testwait.Until(t, 5*time.Second, func() bool { return o.cancels.Load() == 1 }, "the owner to receive the cancel")
		o.mu.Lock()
		last := o.seen[len(o.seen)-1]
		o.mu.Unlock()
		if last.Type != protocol.BusCancel || last.CorrelationID != "cid-c" {
			t.Fatalf("owner got %+v", last)
		}
		if c.Pending() != 0 {
			t.Fatalf("%d waiters left", c.Pending())
		}
	})
}

// TestBusCloseReleasesWaitersWithCallerClosed: closing the caller answers
// every waiting call caller_closed at once, and later calls too.
func TestBusCloseReleasesWaitersWithCallerClosed(t *testing.T) {
	eachBus(t, func(t *testing.T, pair busPair) {
		ob, cb := pair(t)
		o := startOwner(t, ob, "w-close", silent)
		c := newCaller(t, cb, 0)
		const n = 20
		var wg sync.WaitGroup
		answers := make(chan protocol.ToolResponse, n+1)
		for range n {
			wg.Go(func() {
				answers <- c.Call(context.Background(), caller.Request{WorkspaceID: "w-close", Endpoint: "/api/ping", Timeout: 30 * time.Second})
			})
		}
		// Also one that waits for its workspace to come online.
		wg.Go(func() {
			answers <- c.Call(context.Background(), caller.Request{WorkspaceID: "w-never", Endpoint: "/api/ping", Timeout: 30 * time.Second, WaitForWorkspace: 30 * time.Second})
		})
		o.waitCalls(t, n)
		testwait.Until(t, 5*time.Second, func() bool { return c.Pending() == n+1 }, "%d waiters", n+1)
		start := time.Now()
		if err := c.Close(); err != nil {
			t.Fatal(err)
		}
		wg.Wait()
		if el := time.Since(start); el > time.Second {
			t.Fatalf("waiters released after %v", el)
		}
		close(answers)
		for resp := range answers {
			if resp.Error != protocol.CodeCallerClosed {
				t.Fatalf("got %+v", resp)
			}
		}
		if c.Pending() != 0 {
			t.Fatalf("%d waiters left", c.Pending())
		}
		if resp := c.Call(context.Background(), caller.Request{WorkspaceID: "w-close", Endpoint: "/api/ping"}); resp.Error != protocol.CodeCallerClosed {
			t.Fatalf("call after Close got %+v", resp)
		}
	})
}

// TestBusWaitForWorkspaceIsRoutedWhenItComesOnline: a call for an offline
// workspace with WaitForWorkspace is held until a holder announces the
// workspace on the online channel, then delivered.
func TestBusWaitForWorkspaceIsRoutedWhenItComesOnline(t *testing.T) {
	eachBus(t, func(t *testing.T, pair busPair) {
		ob, cb := pair(t)
		c := newCaller(t, cb, 0)
		done := make(chan protocol.ToolResponse, 1)
		go func() {
			done <- c.Call(context.Background(), caller.Request{WorkspaceID: "w-later", Endpoint: "/api/ping", Payload: json.RawMessage(`"hi"`), Timeout: 10 * time.Second, WaitForWorkspace: 10 * time.Second})
		}()
		testwait.Until(t, 5*time.Second, func() bool { return c.Pending() == 1 }, "the call to register")
		select {
		case resp := <-done:
			t.Fatalf("answered before the workspace came online: %+v", resp)
		case <-time.After(100 * time.Millisecond):
		}
		startOwner(t, ob, "w-later", echo)
		// What a broker does once it holds the workspace.
		if _, err := ob.Publish(context.Background(), protocol.OnlineChannel, []byte("w-later")); err != nil {
			t.Fatal(err)
		}
		select {
		case resp := <-done:
			if !resp.Success || string(resp.Result) != `"hi"` {
				t.Fatalf("got %+v", resp)
			}
		case <-time.After(5 * time.Second):
			t.Fatal("not answered after the workspace came online")
		}
	})
}

// TestBusWaitForAnOfflineWorkspaceEndsOnTime: nobody ever serves the
// workspace; a held call ends at the earlier of its deadline and its wait
// for the workspace (wait_for_workspace means its name), answered
// workspace_offline when the wait ends it and timeout when the deadline
// does, and leaves no waiter.
func TestBusWaitForAnOfflineWorkspaceEndsOnTime(t *testing.T) {
	for _, tc := range []struct {
		name          string
		timeout, wait time.Duration
		want          string
	}{
		{"GivesUpAtTheDeadline", 300 * time.Millisecond, 300 * time.Millisecond, protocol.CodeWorkspaceOffline},
		{"GivesUpAfterItsWait", 5 * time.Second, 300 * time.Millisecond, protocol.CodeWorkspaceOffline},
		{"LongerThanTheTimeoutEndsAtTheDeadline", 300 * time.Millisecond, time.Minute, protocol.CodeTimeout},
	} {
		t.Run(tc.name, func(t *testing.T) {
			eachBus(t, func(t *testing.T, pair busPair) {
				_, cb := pair(t)
				c := newCaller(t, cb, 0)
				start := time.Now()
				resp := c.Call(context.Background(), caller.Request{WorkspaceID: "w-never", Endpoint: "/api/ping", Timeout: tc.timeout, WaitForWorkspace: tc.wait})
				el := time.Since(start)
				if resp.Error != tc.want || el < 300*time.Millisecond || el > 500*time.Millisecond {
					t.Fatalf("got %+v after %v, want %s at 300ms", resp, el, tc.want)
				}
				if c.Pending() != 0 {
					t.Fatalf("%d waiters left", c.Pending())
				}
			})
		})
	}
}

func TestBusRefusesABadRequestWithoutPublishing(t *testing.T) {
	eachBus(t, func(t *testing.T, pair busPair) {
		ob, cb := pair(t)
		o := startOwner(t, ob, "w-bad", echo)
		c := newCaller(t, cb, 0)
		for _, req := range []caller.Request{
			{WorkspaceID: "w-bad", Endpoint: "no-slash"},
			{WorkspaceID: "w-bad", Endpoint: "/api/ping", Timeout: time.Millisecond},
			{WorkspaceID: "w-bad", Endpoint: "/api/ping", WaitForWorkspace: -time.Second},
		} {
			if resp := c.Call(context.Background(), req); resp.Error != protocol.CodeInvalidRequest {
				t.Fatalf("%+v got %+v", req, resp)
			}
		}
		if o.calls.Load() != 0 {
			t.Fatalf("owner received %d calls", o.calls.Load())
		}
	})
}

// TestBusGatherCollectsOneAnswerPerSubscriber: Gather waits for as many
// answers as the publish reached subscribers, and when one of them never
// answers it returns what came once ctx ends, reporting the count reached.
func TestBusGatherCollectsOneAnswerPerSubscriber(t *testing.T) {
	eachBus(t, func(t *testing.T, pair busPair) {
		ob, cb := pair(t)
		c := newCaller(t, cb, 0)
		answer := func(name string) bus.Handler {
			return func(msg []byte) {
				var m protocol.BusMessage
				if json.Unmarshal(msg, &m) != nil {
					return
				}
				resp, _ := json.Marshal(protocol.Success(m.CorrelationID, json.RawMessage(`"`+name+`"`)))
				go func() { _, _ = ob.Publish(context.Background(), m.ReplyTo, resp) }()
			}
		}
		subs := []bus.Subscription{}
		for _, h := range []bus.Handler{answer("one"), answer("two"), func([]byte) {}} {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			s, err := ob.Subscribe(ctx, "gather", h)
			cancel()
			if err != nil {
				t.Fatal(err)
			}
			subs = append(subs, s)
		}
		defer func() {
			for _, s := range subs {
				_ = s.Unsubscribe(context.Background())
			}
		}()
		msg, _ := json.Marshal(protocol.BusMessage{Type: "list", ToolCall: protocol.ToolCall{CorrelationID: "g1", ReplyTo: c.Inbox()}})
		ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
		defer cancel()
		start := time.Now()
		got, n, err := c.Gather(ctx, "gather", "g1", msg)
		if err != nil {
			t.Fatal(err)
		}
		if took := time.Since(start); took < 250*time.Millisecond || took > 2*time.Second {
			t.Fatalf("Gather with a silent subscriber returned after %v; want at its ctx (300ms)", took)
		}
		names := map[string]bool{}
		for _, r := range got {
			names[string(r.Result)] = true
		}
		if n != 3 || len(got) != 2 || !names[`"one"`] || !names[`"two"`] {
			t.Fatalf("Gather = %d answers %v of %d reached; want one and two of 3", len(got), names, n)
		}
		if c.Pending() != 0 {
			t.Fatalf("%d waiters left", c.Pending())
		}
	})
}
