package bus_test

import (
	"testing"

	"github.com/tetherdev/tether/broker/bus"
	"github.com/tetherdev/tether/broker/bus/bustest"
)

func TestMemoryConformance(t *testing.T) {
	bustest.Run(t, func(t *testing.T) (bus.Bus, bus.Bus) {
		m := bus.NewMemory()
		t.Cleanup(func() { _ = m.Close() })
		return m, m
	})
}
