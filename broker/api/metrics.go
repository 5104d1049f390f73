package api

import "github.com/prometheus/client_golang/prometheus"

// metrics are the API's, registered on the broker's registry.
type metrics struct {
	calls          *prometheus.CounterVec // by outcome: success, or the error code
	latency        prometheus.Histogram
	asyncSubmitted prometheus.Counter // async calls recorded by this API
}

func newMetrics(reg *prometheus.Registry) *metrics {
	m := &metrics{
		calls: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "tether_calls_total",
			Help: "Calls answered by this broker's HTTP API, by outcome (success or error code).",
		}, []string{"outcome"}),
		latency: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "tether_call_duration_seconds",
			Help:    "Time from receiving an HTTP call to answering it.",
			Buckets: []float64{.0001, .00025, .0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60, 120, 600},
		}),
		asyncSubmitted: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "tether_async_calls_submitted_total",
			Help: "Async calls recorded through this broker's HTTP API.",
		}),
	}
	reg.MustRegister(m.calls, m.latency, m.asyncSubmitted)
	return m
}
