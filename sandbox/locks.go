//go:build !windows

package sandbox

import (
	"context"
	"sync"
)

// Locks is the in-process Locker: one mutex per key, made on first use
// and dropped when nobody holds or waits for it.
type Locks struct {
	mu sync.Mutex
	m  map[string]*keyLock
}

type keyLock struct {
	ch   chan struct{} // holds one token while locked
	refs int
}

var _ Locker = (*Locks)(nil)

// Lock waits for key's lock or for ctx to end.
func (l *Locks) Lock(ctx context.Context, key string) (func(), error) {
	l.mu.Lock()
	if l.m == nil {
		l.m = make(map[string]*keyLock)
	}
	k := l.m[key]
	if k == nil {
		k = &keyLock{ch: make(chan struct{}, 1)}
		l.m[key] = k
	}
	k.refs++
	l.mu.Unlock()

	select {
	case k.ch <- struct{}{}:
	case <-ctx.Done():
		l.release(key, k)
		return nil, ctx.Err()
	}
	var once sync.Once
	return func() {
		once.Do(func() {
			<-k.ch
			l.release(key, k)
		})
	}, nil
}

func (l *Locks) release(key string, k *keyLock) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if k.refs--; k.refs == 0 {
		delete(l.m, key)
	}
}
