package bustest

import (
	"bytes"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/tetherdev/tether/broker/bus"
)

// outcome is what one PublishAsync reported to its done.
type outcome struct {
	n   int
	err error
}

// report collects the calls of one PublishAsync's done.
type report struct {
	calls atomic.Int32
	// got receives the first two calls (a second is a failure the test
	// must see); it is buffered so that done never blocks the bus.
	got chan outcome
}

// publishAsync calls b.PublishAsync with a done that records every call.
// done may run before PublishAsync returns (the in-memory bus) or later on a
// goroutine of the bus (Redis); the report works either way.
func publishAsync(b bus.Bus, ch string, msg []byte) *report {
	r := &report{got: make(chan outcome, 2)}
	b.PublishAsync(ch, msg, func(n int, err error) {
		if r.calls.Add(1) <= 2 {
			r.got <- outcome{n, err}
		}
	})
	return r
}

// await returns the first outcome.
func (r *report) await(t *testing.T) outcome {
	t.Helper()
	return await(t, r.got)
}

// once fails t unless done was called exactly once. Call it after a barrier
// that a second call would have had to pass (see flush).
func (r *report) once(t *testing.T, what string) {
	t.Helper()
	if n := r.calls.Load(); n != 1 {
		t.Errorf("%s: done called %d times, want once", what, n)
	}
}

// flush publishes once more through b and waits for the count: on a bus
// whose PublishAsync counts come back in order (the Redis pipe), every done
// of an earlier publish has run by then.
func flush(t *testing.T, b bus.Bus) {
	t.Helper()
	mustPublish(t, b, "flush", nil, 0)
}

// The PublishAsync cases of the suite.

func publishAsyncReportsReceiverCountOnce(t *testing.T, pair Pair) {
	a, b := pair(t)
	got := make(chan string, 4)
	s1 := subscribe(t, b, "async-one", func(m []byte) { got <- "one:" + string(m) })
	defer unsubscribe(t, s1)
	s2 := subscribe(t, a, "async-two", func(m []byte) { got <- "two-a:" + string(m) })
	defer unsubscribe(t, s2)
	s3 := subscribe(t, b, "async-two", func(m []byte) { got <- "two-b:" + string(m) })
	defer unsubscribe(t, s3)
	cases := []struct {
		channel string
		want    int
	}{{"async-none", 0}, {"async-one", 1}, {"async-two", 2}}
	reports := make([]*report, len(cases))
	for i, c := range cases {
		reports[i] = publishAsync(a, c.channel, []byte("x"))
	}
	for i, c := range cases {
		if o := reports[i].await(t); o.err != nil || o.n != c.want {
			t.Fatalf("PublishAsync(%s) reported %d, %v; want %d, nil", c.channel, o.n, o.err, c.want)
		}
	}
	seen := map[string]bool{}
	for range 3 {
		seen[await(t, got)] = true
	}
	for _, want := range []string{"one:x", "two-a:x", "two-b:x"} {
		if !seen[want] {
			t.Fatalf("deliveries %v lack %s", seen, want)
		}
	}
	flush(t, a)
	for i, c := range cases {
		reports[i].once(t, c.channel)
	}
}

func publishAsyncInOrderWithPublish(t *testing.T, pair Pair) {
	// One goroutine mixing both kinds of publish: its messages arrive
	// in the order it published them.
	a, b := pair(t)
	const total = 300
	got := make(chan []byte, total)
	sub := subscribe(t, b, "mixed", func(m []byte) { got <- m })
	defer unsubscribe(t, sub)
	var reports []*report
	for i := range total {
		msg := fmt.Appendf(nil, "%d", i)
		if i%3 == 0 {
			mustPublish(t, a, "mixed", msg, 1)
		} else {
			reports = append(reports, publishAsync(a, "mixed", msg))
		}
	}
	for i := range total {
		if m := await(t, got); string(m) != strconv.Itoa(i) {
			t.Fatalf("message %d: got %q", i, m)
		}
	}
	for _, r := range reports {
		if o := r.await(t); o.err != nil || o.n != 1 {
			t.Fatalf("PublishAsync reported %d, %v; want 1, nil", o.n, o.err)
		}
	}
	flush(t, a)
	for _, r := range reports {
		r.once(t, "mixed")
	}
}

func publishAsyncKeepsNoReferenceToMsg(t *testing.T, pair Pair) {
	// The caller reuses its buffer as soon as PublishAsync returns (a
	// retry does): what was published must be what it held then.
	a, b := pair(t)
	got := make(chan []byte, 2)
	sub := subscribe(t, b, "reuse", func(m []byte) { got <- m })
	defer unsubscribe(t, sub)
	for _, size := range []int{8, 1 << 20} {
		want := bytes.Repeat([]byte{'a'}, size)
		msg := bytes.Clone(want)
		r := publishAsync(a, "reuse", msg)
		for i := range msg {
			msg[i] = 'X'
		}
		if o := r.await(t); o.err != nil || o.n != 1 {
			t.Fatalf("PublishAsync reported %d, %v; want 1, nil", o.n, o.err)
		}
		if m := await(t, got); !bytes.Equal(m, want) {
			t.Fatalf("%d-byte message changed after PublishAsync returned (%d bytes arrived)", size, len(m))
		}
	}
}

func publishAsyncAfterCloseReportsErrClosed(t *testing.T, pair Pair) {
	a, _ := pair(t)
	if err := a.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	r := publishAsync(a, "x", []byte("x"))
	if o := r.await(t); !errors.Is(o.err, bus.ErrClosed) || o.n != 0 {
		t.Fatalf("PublishAsync after Close reported %d, %v; want 0, ErrClosed", o.n, o.err)
	}
	r.once(t, "after Close")
}

func publishAsyncInFlightAtCloseReportedOnce(t *testing.T, pair Pair) {
	// Publishes racing Close each end once: counted, or ErrClosed.
	a, b := pair(t)
	sub := subscribe(t, b, "inflight", func([]byte) {})
	defer unsubscribe(t, sub)
	const total = 400
	reports := make(chan *report, total)
	var wg sync.WaitGroup
	wg.Go(func() {
		for range total {
			reports <- publishAsync(a, "inflight", []byte("x"))
		}
		close(reports)
	})
	first := <-reports
	if err := a.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	wg.Wait()
	all := []*report{first}
	for r := range reports {
		all = append(all, r)
	}
	for _, r := range all {
		o := r.await(t)
		if o.err == nil && o.n != 1 || o.err != nil && !errors.Is(o.err, bus.ErrClosed) {
			t.Fatalf("PublishAsync racing Close reported %d, %v; want 1, nil or 0, ErrClosed", o.n, o.err)
		}
	}
	// Close has returned: no goroutine of the bus is left to call a
	// done again.
	for _, r := range all {
		r.once(t, "racing Close")
	}
}

func publishAsyncConcurrentEachReportedOnceInOrder(t *testing.T, pair Pair) {
	a, b := pair(t)
	const publishers, each = 16, 100
	var mu sync.Mutex
	next := make([]int, publishers) // per publisher, the sequence number due
	var wrong []string
	got := make(chan struct{}, publishers*each)
	sub := subscribe(t, b, "async-conc", func(m []byte) {
		p, seq, _ := strings.Cut(string(m), ":")
		pi, _ := strconv.Atoi(p)
		si, _ := strconv.Atoi(seq)
		mu.Lock()
		if si != next[pi] {
			wrong = append(wrong, fmt.Sprintf("publisher %d: got %d, want %d", pi, si, next[pi]))
		}
		next[pi] = si + 1
		mu.Unlock()
		got <- struct{}{}
	})
	defer unsubscribe(t, sub)
	type sent struct {
		r    *report
		want int
	}
	var wg sync.WaitGroup
	results := make([][]sent, publishers)
	for p := range publishers {
		wg.Go(func() {
			seq := 0
			for i := range each {
				if i%10 == 9 { // every tenth reaches nobody
					results[p] = append(results[p], sent{publishAsync(a, "async-nobody", []byte("x")), 0})
					continue
				}
				msg := fmt.Appendf(nil, "%d:%d", p, seq)
				seq++
				results[p] = append(results[p], sent{publishAsync(a, "async-conc", msg), 1})
			}
		})
	}
	wg.Wait()
	for _, list := range results {
		for _, s := range list {
			if o := s.r.await(t); o.err != nil || o.n != s.want {
				t.Fatalf("PublishAsync reported %d, %v; want %d, nil", o.n, o.err, s.want)
			}
		}
	}
	for range publishers * each * 9 / 10 {
		await(t, got)
	}
	flush(t, a)
	mu.Lock()
	defer mu.Unlock()
	if len(wrong) > 0 {
		t.Fatalf("%d messages out of order, first: %s", len(wrong), wrong[0])
	}
	if extra := len(got); extra != 0 {
		t.Fatalf("%d deliveries more than published", extra)
	}
	for _, list := range results {
		for _, s := range list {
			s.r.once(t, "concurrent")
		}
	}
}
