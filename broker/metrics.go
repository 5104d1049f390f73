package broker

import (
	"context"
	"errors"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/tetherdev/tether/broker/store"
)

// metrics are per Broker (not global) so that several brokers can live in
// one test process.
type metrics struct {
	reg *prometheus.Registry

	inFlight   prometheus.Gauge
	workspaces prometheus.Gauge
	duplicates prometheus.Counter // answers for calls already answered or never sent to that connection
	dropped    prometheus.Counter // replies that reached no caller
	badPackets prometheus.Counter
	// connRefused counts new sessions refused by the connection limits
	// (eio/limit.go), by which limit.
	connRefused *prometheus.CounterVec

	asyncOutcomes *prometheus.CounterVec // async outcomes this broker wrote (its calls' answers, its sweeps), by status
	// storeSteps times each step of the call store (store.Observe), by
	// operation; storeFailures counts those that failed (the store could
	// not be reached or gave up), not a call that is not there or an id
	// taken, nor a step its caller stopped waiting for.
	storeSteps    *prometheus.HistogramVec
	storeFailures *prometheus.CounterVec
}

func newMetrics() *metrics {
	m := &metrics{
		reg: prometheus.NewRegistry(),
		inFlight: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "tether_calls_in_flight",
			Help: "Calls delivered to sockets on this broker and not yet answered.",
		}),
		workspaces: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "tether_connected_workspaces",
			Help: "Workspaces whose socket is held by this broker.",
		}),
		duplicates: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "tether_unmatched_answers_total",
			Help: "Answers dropped because the call was already answered or was not sent to that connection.",
		}),
		dropped: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "tether_replies_dropped_total",
			Help: "Replies that reached no caller (the caller had given up or is gone).",
		}),
		badPackets: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "tether_malformed_packets_total",
			Help: "Connections closed for sending a malformed packet.",
		}),
		connRefused: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "tether_connections_refused_total",
			Help: "New Engine.IO sessions refused with HTTP 429 by the per-address connection limits, by limit.",
		}, []string{"limit"}),
		asyncOutcomes: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "tether_async_outcomes_total",
			Help: "Async call outcomes written by this broker (its clients' answers and its sweeps), by final status.",
		}, []string{"status"}),
		storeSteps: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "tether_call_store_step_seconds",
			Help: "Time each step of the async call store took (Redis, or memory), by operation: create, create_delivered, put, get, get_watched, claim, finish, withdraw, sweep.",
			// Fine below a millisecond, where a healthy Redis answers.
			Buckets: []float64{.00005, .000075, .0001, .000125, .00015, .0002, .00025, .0003, .0004, .0005, .00075, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5},
		}, []string{"op"}),
		storeFailures: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "tether_call_store_failures_total",
			Help: "Steps of the async call store that failed (unreachable, timed out, closed), by operation.",
		}, []string{"op"}),
	}
	m.reg.MustRegister(m.inFlight, m.workspaces, m.duplicates, m.dropped, m.badPackets, m.connRefused, m.asyncOutcomes, m.storeSteps, m.storeFailures,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return m
}

// observeStore is the store.Observer of the broker's call store.
func (m *metrics) observeStore(op string, took time.Duration, err error) {
	m.storeSteps.WithLabelValues(op).Observe(took.Seconds())
	if err != nil && !errors.Is(err, store.ErrNotFound) && !errors.Is(err, store.ErrExists) && !errors.Is(err, context.Canceled) {
		m.storeFailures.WithLabelValues(op).Inc()
	}
}
