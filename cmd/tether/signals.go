package main

import (
	"os"
	"os/signal"
	"sync"
	"syscall"
)

// onHangup runs fn on every SIGHUP (the operator's "read your files
// again") until stop is called; stop waits for a run in progress. Each
// piece that re-reads something (certificates, keys) registers its own:
// the signal package hands every registered channel the signal.
func onHangup(fn func()) (stop func()) {
	ch := make(chan os.Signal, 1)
	signal.Notify(ch, syscall.SIGHUP)
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			select {
			case <-ch:
				fn()
			case <-done:
				return
			}
		}
	}()
	var once sync.Once
	return func() {
		once.Do(func() {
			signal.Stop(ch)
			close(done)
			wg.Wait()
		})
	}
}
