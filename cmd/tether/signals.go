package main

import (
	"os"
	"os/signal"
	"slices"
	"sync"
	"syscall"

	"github.com/rs/zerolog"
)

// SIGHUP asks a running broker to read its files again: its --keys set
// (keys.go), and whatever else registers with onHangup (a TLS certificate
// pair, say). Each function runs once per signal, in the order registered,
// on the watching goroutine; it logs its own outcome and must not block
// for long.
var hangups struct {
	mu  sync.Mutex
	fns map[int]func()
	n   int
}

// onHangup runs fn on every SIGHUP while the broker runs; remove stops it.
func onHangup(fn func()) (remove func()) {
	hangups.mu.Lock()
	defer hangups.mu.Unlock()
	if hangups.fns == nil {
		hangups.fns = make(map[int]func())
	}
	id := hangups.n
	hangups.n++
	hangups.fns[id] = fn
	return func() {
		hangups.mu.Lock()
		delete(hangups.fns, id)
		hangups.mu.Unlock()
	}
}

// watchHangups catches SIGHUP (which would otherwise end the process) and
// runs the onHangup functions on each, until stop; stop waits for a run in
// progress.
func watchHangups(log zerolog.Logger) (stop func()) {
	ch := make(chan os.Signal, 1)
	signal.Notify(ch, syscall.SIGHUP)
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		for {
			select {
			case <-done:
				return
			case <-ch:
				log.Info().Msg("SIGHUP: reloading")
				hangups.mu.Lock()
				ids := make([]int, 0, len(hangups.fns))
				for id := range hangups.fns {
					ids = append(ids, id)
				}
				fns := make([]func(), 0, len(ids))
				slices.Sort(ids)
				for _, id := range ids {
					fns = append(fns, hangups.fns[id])
				}
				hangups.mu.Unlock()
				for _, fn := range fns {
					fn()
				}
			}
		}
	})
	return func() {
		signal.Stop(ch)
		close(done)
		wg.Wait()
	}
}
