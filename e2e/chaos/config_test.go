package chaos

import (
	"fmt"
	"os"
	"strconv"
	"time"
)

// config is one run's shape, from the CHAOS_* environment (doc.go).
type config struct {
	duration   time.Duration
	calls      int64 // 0: bounded by duration only
	rate       int
	workers    int
	brokers    int
	bridges    int
	clients    int
	faultEvery time.Duration
	seed       uint64
	logLevel   string
	out        string

	// Timing of the processes, fixed: a short heartbeat so that a dead or
	// stalled peer is noticed within seconds.
	pingInterval, pingTimeout time.Duration
}

func loadConfig() (config, error) {
	c := config{
		duration:     60 * time.Second,
		rate:         200,
		workers:      64,
		brokers:      3,
		bridges:      20,
		clients:      10,
		faultEvery:   1500 * time.Millisecond,
		seed:         uint64(time.Now().UnixNano()),
		pingInterval: 2 * time.Second,
		pingTimeout:  3 * time.Second,
	}
	var errs []error
	dur := func(name string, dst *time.Duration) {
		if v := os.Getenv(name); v != "" {
			d, err := time.ParseDuration(v)
			if err != nil || d <= 0 {
				errs = append(errs, fmt.Errorf("%s=%q: want a positive duration", name, v))
				return
			}
			*dst = d
		}
	}
	num := func(name string, dst *int, min int) {
		if v := os.Getenv(name); v != "" {
			n, err := strconv.Atoi(v)
			if err != nil || n < min {
				errs = append(errs, fmt.Errorf("%s=%q: want an integer of at least %d", name, v, min))
				return
			}
			*dst = n
		}
	}
	dur("CHAOS_DURATION", &c.duration)
	dur("CHAOS_FAULT_EVERY", &c.faultEvery)
	num("CHAOS_RATE", &c.rate, 1)
	num("CHAOS_WORKERS", &c.workers, 1)
	num("CHAOS_BROKERS", &c.brokers, 2)
	num("CHAOS_BRIDGES", &c.bridges, 1)
	num("CHAOS_CLIENTS", &c.clients, 1)
	var calls int
	num("CHAOS_CALLS", &calls, 0)
	c.calls = int64(calls)
	if v := os.Getenv("CHAOS_SEED"); v != "" {
		s, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			errs = append(errs, fmt.Errorf("CHAOS_SEED=%q: want an unsigned integer", v))
		}
		c.seed = s
	}
	c.logLevel = os.Getenv("CHAOS_LOG_LEVEL")
	if c.logLevel == "" {
		c.logLevel = "debug"
		if c.duration > 10*time.Minute {
			c.logLevel = "info"
		}
	}
	c.out = os.Getenv("CHAOS_OUT")
	if len(errs) > 0 {
		return c, fmt.Errorf("chaos configuration: %v", errs)
	}
	return c, nil
}

func (c config) String() string {
	bound := c.duration.String()
	if c.calls > 0 {
		bound = fmt.Sprintf("%d calls or %s", c.calls, c.duration)
	}
	return fmt.Sprintf("%d brokers, %d bridges, %d socket.io clients, %d callers at up to %d calls/s for %s, a fault every %s on average, seed %d",
		c.brokers, c.bridges, c.clients, c.workers, c.rate, bound, c.faultEvery, c.seed)
}
