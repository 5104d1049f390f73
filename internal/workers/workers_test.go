package workers_test

import (
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"go.uber.org/goleak"

	"github.com/tetherdev/tether/internal/workers"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestGoRunsOnAnIdleWorkerAndNeverWaits(t *testing.T) {
	p := &workers.Pool{}
	defer func() { p.Close(); p.Wait() }()
	var ran atomic.Int32
	done := make(chan struct{})
	p.Go(func() { ran.Add(1); close(done) })
	<-done
	// The worker is idle now (or about to be): the next function runs,
	// whether it takes it or a new worker does.
	release := make(chan struct{})
	var wg sync.WaitGroup
	for range 20 {
		wg.Add(1)
		p.Go(func() { defer wg.Done(); <-release; ran.Add(1) }) // 20 at once: none waits for another
	}
	close(release)
	wg.Wait()
	if n := ran.Load(); n != 21 {
		t.Fatalf("%d functions ran, want 21", n)
	}
}

func TestIdleWorkersEndAfterTheirTimeout(t *testing.T) {
	// Time is the subject: in the bubble the idle timeout passes at once.
	synctest.Test(t, func(t *testing.T) {
		p := &workers.Pool{IdleTimeout: 20 * time.Millisecond}
		done := make(chan struct{})
		p.Go(func() { close(done) })
		<-done
		ended := make(chan struct{})
		go func() { p.Wait(); close(ended) }()
		select {
		case <-ended:
		case <-time.After(5 * time.Second):
			t.Fatal("an idle worker outlived its timeout")
		}
	})
}

func TestCloseEndsIdleWorkersAndBusyOnesAfterTheirFunction(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := &workers.Pool{IdleTimeout: time.Hour}
		idle := make(chan struct{})
		p.Go(func() { close(idle) })
		<-idle
		release := make(chan struct{})
		busy := make(chan struct{})
		p.Go(func() { close(busy); <-release })
		<-busy
		p.Close()
		ran := make(chan struct{})
		p.Go(func() { close(ran) }) // after Close: still run, on a goroutine of its own
		<-ran
		waited := make(chan struct{})
		go func() { p.Wait(); close(waited) }()
		// Every goroutine in the bubble is blocked now: Wait has returned
		// or waits for good.
		synctest.Wait()
		select {
		case <-waited:
			t.Fatal("Wait returned while a worker was busy")
		default:
		}
		close(release)
		select {
		case <-waited:
		case <-time.After(5 * time.Second):
			t.Fatal("Wait did not return once the busy worker was done")
		}
	})
}
