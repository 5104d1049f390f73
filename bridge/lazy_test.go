//go:build !windows

package bridge

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
)

// lazyProbe counts what a lazy[int] does with its open and shut functions.
// Open blocks until release is closed when gate is set.
type lazyProbe struct {
	opens, shuts atomic.Int32
	shutValue    atomic.Int32
	failWith     error
	gate         chan struct{} // nil: open returns at once
}

var errProbeClosed = errors.New("probe closed")

func (p *lazyProbe) holder() *lazy[int] {
	return newLazy(func() (int, error) {
		n := p.opens.Add(1)
		if p.gate != nil {
			<-p.gate
		}
		if p.failWith != nil {
			return 0, p.failWith
		}
		return int(n) * 10, nil
	}, func(v int) {
		p.shuts.Add(1)
		p.shutValue.Store(int32(v))
	}, errProbeClosed)
}

func TestLazyConcurrentFirstUseOpensOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := &lazyProbe{gate: make(chan struct{})}
		h := p.holder()
		const callers = 16
		got := make(chan int, callers)
		for range callers {
			go func() {
				v, err := h.get(context.Background())
				if err != nil {
					t.Errorf("get: %v", err)
				}
				got <- v
			}()
		}
		synctest.Wait() // every caller is blocked: one in open, the rest waiting for it
		close(p.gate)
		for range callers {
			if v := <-got; v != 10 {
				t.Fatalf("a caller got %d, want the one value 10", v)
			}
		}
		if n := p.opens.Load(); n != 1 {
			t.Fatalf("%d opens for %d concurrent first uses, want 1", n, callers)
		}
		if v, _ := h.get(context.Background()); v != 10 || p.opens.Load() != 1 {
			t.Fatalf("a later get returned %d after %d opens; want the kept value", v, p.opens.Load())
		}
		h.close()
		if p.shuts.Load() != 1 || p.shutValue.Load() != 10 {
			t.Fatalf("close shut %d times (value %d), want once with 10", p.shuts.Load(), p.shutValue.Load())
		}
	})
}

func TestLazyCloseBeforeOpenOpensNothing(t *testing.T) {
	p := &lazyProbe{}
	h := p.holder()
	h.close()
	if _, err := h.get(context.Background()); !errors.Is(err, errProbeClosed) {
		t.Fatalf("get after close: %v, want the closed error", err)
	}
	if p.opens.Load() != 0 || p.shuts.Load() != 0 {
		t.Fatalf("opens %d shuts %d, want none", p.opens.Load(), p.shuts.Load())
	}
}

func TestLazyCloseAfterFailedOpenShutsNothing(t *testing.T) {
	boom := errors.New("boom")
	p := &lazyProbe{failWith: boom}
	h := p.holder()
	if _, err := h.get(context.Background()); !errors.Is(err, boom) {
		t.Fatalf("get: %v, want the open's error", err)
	}
	// A failed open is not kept: the next use tries again.
	if _, err := h.get(context.Background()); !errors.Is(err, boom) || p.opens.Load() != 2 {
		t.Fatalf("second get: %v after %d opens, want a second attempt", err, p.opens.Load())
	}
	h.close()
	if p.shuts.Load() != 0 {
		t.Fatalf("close shut %d values after failed opens, want none", p.shuts.Load())
	}
	if _, err := h.get(context.Background()); !errors.Is(err, errProbeClosed) || p.opens.Load() != 2 {
		t.Fatalf("get after close: %v (opens %d), want the closed error and no open", err, p.opens.Load())
	}
}

func TestLazyCallersOfAFailedOpenShareItsError(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		boom := errors.New("boom")
		p := &lazyProbe{failWith: boom, gate: make(chan struct{})}
		h := p.holder()
		var wg sync.WaitGroup
		for range 4 {
			wg.Go(func() {
				if _, err := h.get(context.Background()); !errors.Is(err, boom) {
					t.Errorf("get: %v, want the shared open's error", err)
				}
			})
		}
		synctest.Wait()
		close(p.gate)
		wg.Wait()
		if n := p.opens.Load(); n != 1 {
			t.Fatalf("%d opens, want 1 shared by the callers that waited for it", n)
		}
	})
}

func TestLazyCloseWaitsForARunningOpenAndShutsItsValue(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := &lazyProbe{gate: make(chan struct{})}
		h := p.holder()
		getErr := make(chan error, 1)
		go func() {
			_, err := h.get(context.Background())
			getErr <- err
		}()
		synctest.Wait() // the open runs
		closed := make(chan struct{})
		go func() {
			h.close()
			close(closed)
		}()
		synctest.Wait()
		select {
		case <-closed:
			t.Fatal("close returned while the open it must wait for was still running")
		default:
		}
		close(p.gate)
		<-closed
		if p.shuts.Load() != 1 || p.shutValue.Load() != 10 {
			t.Fatalf("close shut %d times (value %d), want the value the running open made", p.shuts.Load(), p.shutValue.Load())
		}
		if err := <-getErr; !errors.Is(err, errProbeClosed) {
			t.Fatalf("the get whose open close overtook: %v, want the closed error", err)
		}
	})
}

func TestLazyWaiterGivesUpWhenItsContextEnds(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := &lazyProbe{gate: make(chan struct{})}
		h := p.holder()
		go func() { _, _ = h.get(context.Background()) }()
		synctest.Wait()
		ctx, cancel := context.WithCancel(context.Background())
		errc := make(chan error, 1)
		go func() {
			_, err := h.get(ctx)
			errc <- err
		}()
		synctest.Wait()
		cancel()
		if err := <-errc; !errors.Is(err, context.Canceled) {
			t.Fatalf("waiter: %v, want context.Canceled", err)
		}
		close(p.gate)
		h.close()
		if p.opens.Load() != 1 || p.shuts.Load() != 1 {
			t.Fatalf("opens %d shuts %d, want 1 and 1", p.opens.Load(), p.shuts.Load())
		}
	})
}

func TestLazyCloseTwiceShutsOnceAndNilHolderCloses(t *testing.T) {
	p := &lazyProbe{}
	h := p.holder()
	if _, err := h.get(context.Background()); err != nil {
		t.Fatal(err)
	}
	h.close()
	h.close()
	if p.shuts.Load() != 1 {
		t.Fatalf("%d shuts, want 1", p.shuts.Load())
	}
	var none *lazy[int]
	none.close() // a route group that was not mounted
}
