package store_test

import (
	"testing"

	"go.uber.org/goleak"

	"github.com/tetherdev/tether/broker/store"
	"github.com/tetherdev/tether/broker/store/storetest"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

func TestMemoryConformance(t *testing.T) {
	storetest.Run(t, func(t *testing.T, opts store.Options) (store.Store, store.Store) {
		m := store.NewMemory(opts)
		t.Cleanup(func() { _ = m.Close() })
		return m, m
	})
}
