// Package bustest is the conformance suite every bus.Bus implementation must
// pass. Implementations call Run from their own tests with a factory that
// returns a fresh, isolated bus (for Redis: a unique prefix).
package bustest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tetherdev/tether/broker/bus"
	"github.com/tetherdev/tether/internal/testwait"
)

// Pair returns two Bus values that talk to each other, like two broker
// instances on one Redis, isolated from every other test (for Redis: a unique
// prefix). For the in-memory bus both may be the same value. The pair is
// closed by the factory's t.Cleanup.
type Pair func(t *testing.T) (a, b bus.Bus)

// deliveryWait bounds how long the suite waits for a delivery. Redis on a
// busy machine needs more than a local call; nothing in the suite waits for
// it when the message arrives.
const deliveryWait = 5 * time.Second

// cases are the suite, in the order Run runs them. Each case takes the
// factory and makes the buses it needs, isolated from the others'.
var cases = []struct {
	name string
	run  func(t *testing.T, pair Pair)
}{
	{"PublishWithoutSubscriberReachesNobody", publishWithoutSubscriberReachesNobody},
	{"SubscriberReceivesAndCountIsOne", subscriberReceivesAndCountIsOne},
	{"BinarySafeMessages", binarySafeMessages},
	{"LargeMessage", largeMessage},
	{"ChannelsAreIsolated", channelsAreIsolated},
	{"TwoSubscribersBothReceive", twoSubscribersBothReceive},
	{"UnsubscribeStopsDeliveryAndCount", unsubscribeStopsDeliveryAndCount},
	{"UnsubscribeFromWithinHandler", unsubscribeFromWithinHandler},
	{"OrderPerPublisher", orderPerPublisher},
	{"BlockedHandlerDelaysOnlyItsSubscription", blockedHandlerDelaysOnlyItsSubscription},
	{"ConcurrentPublishersAllDelivered", concurrentPublishersAllDelivered},
	{"HandlerOwnsMessage", handlerOwnsMessage},
	{"EmptyMessage", emptyMessage},
	{"ManyChannels", manyChannels},
	{"CountFollowsUnsubscribeOfOneOfTwo", countFollowsUnsubscribeOfOneOfTwo},
	{"SubscribeFromWithinHandler", subscribeFromWithinHandler},
	{"UnsubscribeAnotherFromWithinHandler", unsubscribeAnotherFromWithinHandler},
	{"SubscribeWithEndedContextFails", subscribeWithEndedContextFails},
	{"PublishAsyncReportsReceiverCountOnce", publishAsyncReportsReceiverCountOnce},
	{"PublishAsyncInOrderWithPublish", publishAsyncInOrderWithPublish},
	{"PublishAsyncKeepsNoReferenceToMsg", publishAsyncKeepsNoReferenceToMsg},
	{"PublishAsyncAfterCloseReportsErrClosed", publishAsyncAfterCloseReportsErrClosed},
	{"PublishAsyncInFlightAtCloseReportedOnce", publishAsyncInFlightAtCloseReportedOnce},
	{"PublishAsyncConcurrentEachReportedOnceInOrder", publishAsyncConcurrentEachReportedOnceInOrder},
	{"CloseEndsSubscriptions", closeEndsSubscriptions},
	{"ClosedBusReturnsErrClosed", closedBusReturnsErrClosed},
	{"ClosedBusRefuses", closedBusRefuses},
}

// Run runs the conformance suite: each case as a subtest of its name, so
// that a failure names its case and -run 'Conformance/Name' picks one.
func Run(t *testing.T, pair Pair) {
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) { c.run(t, pair) })
	}
}

func publishWithoutSubscriberReachesNobody(t *testing.T, pair Pair) {
	a, _ := pair(t)
	n, err := a.Publish(context.Background(), "nobody", []byte("x"))
	if err != nil || n != 0 {
		t.Fatalf("Publish = %d, %v; want 0, nil", n, err)
	}
}

func subscriberReceivesAndCountIsOne(t *testing.T, pair Pair) {
	a, b := pair(t)
	got := make(chan []byte, 1)
	sub := subscribe(t, b, "ch", func(m []byte) { got <- m })
	defer unsubscribe(t, sub)
	n, err := a.Publish(context.Background(), "ch", []byte("hello"))
	if err != nil || n != 1 {
		t.Fatalf("Publish = %d, %v; want 1, nil", n, err)
	}
	if m := await(t, got); string(m) != "hello" {
		t.Fatalf("got %q", m)
	}
}

func binarySafeMessages(t *testing.T, pair Pair) {
	a, b := pair(t)
	got := make(chan []byte, 1)
	sub := subscribe(t, b, "bin", func(m []byte) { got <- m })
	defer unsubscribe(t, sub)
	msg := []byte{0, 1, 2, 0xff, '\n', 0x1e, 'x'}
	mustPublish(t, a, "bin", msg, 1)
	if m := await(t, got); !bytes.Equal(m, msg) {
		t.Fatalf("got %v want %v", m, msg)
	}
}

func largeMessage(t *testing.T, pair Pair) {
	a, b := pair(t)
	got := make(chan []byte, 1)
	sub := subscribe(t, b, "big", func(m []byte) { got <- m })
	defer unsubscribe(t, sub)
	msg := bytes.Repeat([]byte("0123456789abcdef"), 1<<16) // 1 MiB
	mustPublish(t, a, "big", msg, 1)
	if m := await(t, got); !bytes.Equal(m, msg) {
		t.Fatalf("large message corrupted: got %d bytes", len(m))
	}
}

func channelsAreIsolated(t *testing.T, pair Pair) {
	a, b := pair(t)
	gotA := make(chan []byte, 4)
	gotB := make(chan []byte, 4)
	s1 := subscribe(t, b, "iso-a", func(m []byte) { gotA <- m })
	defer unsubscribe(t, s1)
	s2 := subscribe(t, b, "iso-b", func(m []byte) { gotB <- m })
	defer unsubscribe(t, s2)
	mustPublish(t, a, "iso-a", []byte("for-a"), 1)
	mustPublish(t, a, "iso-b", []byte("for-b"), 1)
	if m := await(t, gotA); string(m) != "for-a" {
		t.Fatalf("iso-a got %q", m)
	}
	if m := await(t, gotB); string(m) != "for-b" {
		t.Fatalf("iso-b got %q", m)
	}
	if len(gotA) != 0 || len(gotB) != 0 {
		t.Fatal("a message crossed channels")
	}
}

func twoSubscribersBothReceive(t *testing.T, pair Pair) {
	a, b := pair(t)
	got := make(chan string, 2)
	s1 := subscribe(t, a, "two", func(m []byte) { got <- "1:" + string(m) })
	defer unsubscribe(t, s1)
	s2 := subscribe(t, b, "two", func(m []byte) { got <- "2:" + string(m) })
	defer unsubscribe(t, s2)
	mustPublish(t, a, "two", []byte("x"), 2)
	seen := map[string]bool{}
	for range 2 {
		seen[string(await(t, got))] = true
	}
	if !seen["1:x"] || !seen["2:x"] {
		t.Fatalf("seen %v", seen)
	}
}

func unsubscribeStopsDeliveryAndCount(t *testing.T, pair Pair) {
	a, b := pair(t)
	var mu sync.Mutex
	count := 0
	sub := subscribe(t, b, "unsub", func([]byte) { mu.Lock(); count++; mu.Unlock() })
	unsubscribe(t, sub)
	n, err := a.Publish(context.Background(), "unsub", []byte("x"))
	if err != nil || n != 0 {
		t.Fatalf("Publish after Unsubscribe = %d, %v; want 0", n, err)
	}
	// A second subscription on the same channel proves delivery of later
	// messages, so the first handler had its chance to be (wrongly) called.
	got := make(chan []byte, 1)
	sub2 := subscribe(t, b, "unsub", func(m []byte) { got <- m })
	defer unsubscribe(t, sub2)
	mustPublish(t, a, "unsub", []byte("y"), 1)
	await(t, got)
	mu.Lock()
	defer mu.Unlock()
	if count != 0 {
		t.Fatalf("handler called %d times after Unsubscribe", count)
	}
	if err := sub.Unsubscribe(context.Background()); err != nil {
		t.Fatalf("second Unsubscribe: %v", err)
	}
}

func unsubscribeFromWithinHandler(t *testing.T, pair Pair) {
	a, b := pair(t)
	var sub bus.Subscription
	ready := make(chan struct{})
	done := make(chan error, 1)
	sub = subscribe(t, b, "self", func([]byte) {
		<-ready
		done <- sub.Unsubscribe(context.Background())
	})
	close(ready)
	mustPublish(t, a, "self", []byte("x"), 1)
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(deliveryWait):
		t.Fatal("Unsubscribe from within the handler blocked")
	}
	testwait.Until(t, deliveryWait, func() bool {
		n, _ := a.Publish(context.Background(), "self", []byte("y"))
		return n == 0
	}, "a publish on the channel unsubscribed from within its handler to reach nobody")
}

func orderPerPublisher(t *testing.T, pair Pair) {
	a, b := pair(t)
	const total = 500
	got := make(chan []byte, total)
	sub := subscribe(t, b, "order", func(m []byte) { got <- m })
	defer unsubscribe(t, sub)
	for i := range total {
		mustPublish(t, a, "order", fmt.Appendf(nil, "%d", i), 1)
	}
	for i := range total {
		if m := await(t, got); string(m) != fmt.Sprint(i) {
			t.Fatalf("message %d: got %q", i, m)
		}
	}
}

func blockedHandlerDelaysOnlyItsSubscription(t *testing.T, pair Pair) {
	// A handler stuck on a slow socket must not stall other channels;
	// its own channel's later messages wait for it, in order.
	a, b := pair(t)
	release, blocked := make(chan struct{}), make(chan struct{})
	slowGot := make(chan string, 8)
	slow := subscribe(t, b, "slow", func(m []byte) {
		if string(m) == "first" {
			close(blocked)
			<-release
		}
		slowGot <- string(m)
	})
	defer unsubscribe(t, slow)
	fastGot := make(chan string, 8)
	fast := subscribe(t, b, "fast", func(m []byte) { fastGot <- string(m) })
	defer unsubscribe(t, fast)
	published := make(chan struct{})
	go func() { // the in-memory bus blocks the publisher in the handler
		defer close(published)
		for _, m := range []string{"first", "second"} {
			if _, err := a.Publish(context.Background(), "slow", []byte(m)); err != nil {
				t.Errorf("Publish: %v", err)
			}
		}
	}()
	await(t, blocked)
	mustPublish(t, a, "fast", []byte("x"), 1)
	if m := await(t, fastGot); m != "x" {
		t.Fatalf("fast channel got %q", m)
	}
	select {
	case m := <-slowGot:
		t.Fatalf("slow channel handled %q while its first message blocks", m)
	default:
	}
	close(release)
	if m := await(t, slowGot); m != "first" {
		t.Fatalf("slow channel's first message is %q", m)
	}
	if m := await(t, slowGot); m != "second" {
		t.Fatalf("slow channel's second message is %q", m)
	}
	<-published
}

func concurrentPublishersAllDelivered(t *testing.T, pair Pair) {
	a, b := pair(t)
	const publishers, each = 8, 100
	got := make(chan []byte, publishers*each)
	sub := subscribe(t, b, "conc", func(m []byte) { got <- m })
	defer unsubscribe(t, sub)
	var wg sync.WaitGroup
	for p := range publishers {
		wg.Go(func() {
			for i := range each {
				if n, err := a.Publish(context.Background(), "conc", fmt.Appendf(nil, "%d/%d", p, i)); err != nil || n != 1 {
					t.Errorf("Publish = %d, %v", n, err)
					return
				}
			}
		})
	}
	wg.Wait()
	seen := map[string]bool{}
	for range publishers * each {
		m := string(await(t, got))
		if seen[m] {
			t.Fatalf("duplicate delivery of %s", m)
		}
		seen[m] = true
	}
}

func handlerOwnsMessage(t *testing.T, pair Pair) {
	a, b := pair(t)
	got := make(chan []byte, 2)
	s1 := subscribe(t, b, "own", func(m []byte) { got <- m })
	defer unsubscribe(t, s1)
	s2 := subscribe(t, b, "own", func(m []byte) {
		for i := range m {
			m[i] = 'X' // scribbling on its own copy must not reach the other
		}
	})
	defer unsubscribe(t, s2)
	msg := []byte("pristine")
	mustPublish(t, a, "own", msg, 2)
	if m := await(t, got); string(m) != "pristine" {
		t.Fatalf("message altered by another handler: %q", m)
	}
}

func emptyMessage(t *testing.T, pair Pair) {
	a, b := pair(t)
	got := make(chan []byte, 1)
	sub := subscribe(t, b, "empty", func(m []byte) { got <- m })
	defer unsubscribe(t, sub)
	mustPublish(t, a, "empty", []byte{}, 1)
	if m := await(t, got); len(m) != 0 {
		t.Fatalf("got %q, want an empty message", m)
	}
}

func manyChannels(t *testing.T, pair Pair) {
	a, b := pair(t)
	const channels = 200
	got := make(chan string, channels)
	for i := range channels {
		name := fmt.Sprintf("many-%d", i)
		sub := subscribe(t, b, name, func(m []byte) { got <- name + "=" + string(m) })
		defer unsubscribe(t, sub)
	}
	for i := range channels {
		mustPublish(t, a, fmt.Sprintf("many-%d", i), []byte("x"), 1)
	}
	seen := map[string]bool{}
	for range channels {
		seen[await(t, got)] = true
	}
	for i := range channels {
		if want := fmt.Sprintf("many-%d=x", i); !seen[want] {
			t.Fatalf("missing %s", want)
		}
	}
}

func countFollowsUnsubscribeOfOneOfTwo(t *testing.T, pair Pair) {
	a, b := pair(t)
	got := make(chan string, 4)
	s1 := subscribe(t, b, "half", func(m []byte) { got <- "1:" + string(m) })
	s2 := subscribe(t, b, "half", func(m []byte) { got <- "2:" + string(m) })
	defer unsubscribe(t, s2)
	unsubscribe(t, s1)
	mustPublish(t, a, "half", []byte("x"), 1)
	if m := await(t, got); m != "2:x" {
		t.Fatalf("got %q, want 2:x", m)
	}
}

func subscribeFromWithinHandler(t *testing.T, pair Pair) {
	a, b := pair(t)
	got := make(chan []byte, 1)
	subscribed := make(chan bus.Subscription, 1)
	errs := make(chan error, 1)
	trigger := subscribe(t, b, "outer", func([]byte) {
		ctx, cancel := context.WithTimeout(context.Background(), deliveryWait)
		defer cancel()
		s, err := b.Subscribe(ctx, "inner", func(m []byte) { got <- m })
		if err != nil {
			errs <- err
			return
		}
		subscribed <- s
	})
	defer unsubscribe(t, trigger)
	mustPublish(t, a, "outer", []byte("go"), 1)
	select {
	case s := <-subscribed:
		defer unsubscribe(t, s)
	case err := <-errs:
		t.Fatalf("Subscribe from within a handler: %v", err)
	case <-time.After(deliveryWait):
		t.Fatal("Subscribe from within a handler blocked")
	}
	mustPublish(t, a, "inner", []byte("x"), 1)
	if m := await(t, got); string(m) != "x" {
		t.Fatalf("got %q", m)
	}
}

func unsubscribeAnotherFromWithinHandler(t *testing.T, pair Pair) {
	// Like a takeover notice ending a workspace subscription.
	a, b := pair(t)
	victim := subscribe(t, b, "victim", func([]byte) {})
	done := make(chan error, 1)
	killer := subscribe(t, b, "killer", func([]byte) { done <- victim.Unsubscribe(context.Background()) })
	defer unsubscribe(t, killer)
	mustPublish(t, a, "killer", []byte("x"), 1)
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(deliveryWait):
		t.Fatal("Unsubscribe of another subscription from within a handler blocked")
	}
	mustPublish(t, a, "victim", []byte("y"), 0)
}

func subscribeWithEndedContextFails(t *testing.T, pair Pair) {
	a, b := pair(t)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := b.Subscribe(ctx, "ended", func([]byte) {}); err == nil {
		t.Fatal("Subscribe with an ended context succeeded")
	}
	mustPublish(t, a, "ended", []byte("x"), 0)
}

func closeEndsSubscriptions(t *testing.T, pair Pair) {
	a, b := pair(t)
	var closed, late atomic.Bool
	subscribe(t, a, "closing", func([]byte) {
		if closed.Load() {
			late.Store(true)
		}
	})
	if err := a.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	closed.Store(true)
	// Redis may count a closed subscriber until it has seen the socket
	// go; it must not be handed a message. (For the in-memory bus a and
	// b are one bus: b is closed too.)
	testwait.Until(t, deliveryWait, func() bool {
		n, err := b.Publish(context.Background(), "closing", []byte("x"))
		return err != nil || n == 0
	}, "a publish on the closed bus's channel to reach nobody")
	if late.Load() {
		t.Fatal("a handler ran after Close returned")
	}
}

func closedBusReturnsErrClosed(t *testing.T, pair Pair) {
	a, _ := pair(t)
	if err := a.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if _, err := a.Publish(context.Background(), "x", []byte("x")); !errors.Is(err, bus.ErrClosed) {
		t.Fatalf("Publish after Close = %v; want ErrClosed", err)
	}
	if _, err := a.Subscribe(context.Background(), "x", func([]byte) {}); !errors.Is(err, bus.ErrClosed) {
		t.Fatalf("Subscribe after Close = %v; want ErrClosed", err)
	}
}

func closedBusRefuses(t *testing.T, pair Pair) {
	a, _ := pair(t)
	if err := a.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if _, err := a.Publish(context.Background(), "x", []byte("x")); err == nil {
		t.Fatal("Publish after Close succeeded")
	}
	if _, err := a.Subscribe(context.Background(), "x", func([]byte) {}); err == nil {
		t.Fatal("Subscribe after Close succeeded")
	}
}

func subscribe(t *testing.T, b bus.Bus, ch string, h bus.Handler) bus.Subscription {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), deliveryWait)
	defer cancel()
	sub, err := b.Subscribe(ctx, ch, h)
	if err != nil {
		t.Fatalf("Subscribe(%s): %v", ch, err)
	}
	return sub
}

func unsubscribe(t *testing.T, s bus.Subscription) {
	t.Helper()
	if err := s.Unsubscribe(context.Background()); err != nil {
		t.Errorf("Unsubscribe: %v", err)
	}
}

func mustPublish(t *testing.T, b bus.Bus, ch string, msg []byte, want int) {
	t.Helper()
	n, err := b.Publish(context.Background(), ch, msg)
	if err != nil || n != want {
		t.Fatalf("Publish(%s) = %d, %v; want %d", ch, n, err, want)
	}
}

func await[T any](t *testing.T, ch <-chan T) T {
	t.Helper()
	select {
	case m := <-ch:
		return m
	case <-time.After(deliveryWait):
		t.Fatal("no delivery within", deliveryWait)
		var zero T
		return zero
	}
}
