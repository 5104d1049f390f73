package bench

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

// pingPayload is the ~100 byte payload /api/ping echoes.
var pingPayload = []byte(`{"kind":"bench","text":"` + strings.Repeat("tether", 11) + `","seq":42,"ok":true}`)

// callBody is the HTTP call every request sends.
var callBody = []byte(`{"endpoint":"/api/ping","payload":` + string(pingPayload) + `,"timeout":10}`)

// target is where the load generator sends calls.
type target struct {
	url   string
	token string // bearer token; empty sends none
}

// runStats is one load run: the latencies of the calls that started in the
// measured window, sorted.
type runStats struct {
	conc    int
	lat     []time.Duration
	elapsed time.Duration
	// loadCPU is the CPU this process (the load generator) spent in the
	// measured window.
	loadCPU time.Duration
}

func (s runStats) rate() float64 { return float64(len(s.lat)) / s.elapsed.Seconds() }

// quantile is the nearest-rank quantile q of the latencies.
func (s runStats) quantile(q float64) time.Duration {
	if len(s.lat) == 0 {
		return 0
	}
	i := int(float64(len(s.lat))*q+0.999999) - 1
	return s.lat[min(max(i, 0), len(s.lat)-1)]
}

// loadConfig is the shape of every run, from the environment.
type loadConfig struct {
	warmup, measure time.Duration
	runs            int
}

func loadConfigFromEnv(tb testing.TB) loadConfig {
	tb.Helper()
	c := loadConfig{warmup: 500 * time.Millisecond, measure: 3 * time.Second, runs: 3}
	durEnv := func(name string, d *time.Duration) {
		if v := os.Getenv(name); v != "" {
			parsed, err := time.ParseDuration(v)
			if err != nil || parsed < 0 {
				tb.Fatalf("%s=%q: want a duration such as 3s", name, v)
			}
			*d = parsed
		}
	}
	durEnv("BENCH_DURATION", &c.measure)
	durEnv("BENCH_WARMUP", &c.warmup)
	if v := os.Getenv("BENCH_RUNS"); v != "" {
		if _, err := fmt.Sscan(v, &c.runs); err != nil || c.runs < 1 {
			tb.Fatalf("BENCH_RUNS=%q: want a positive integer", v)
		}
	}
	if c.measure <= 0 {
		tb.Fatalf("BENCH_DURATION must be positive")
	}
	return c
}

// runLoad sends calls to tgt from conc goroutines, each waiting for its
// answer before sending the next, over keep-alive connections: cfg.warmup
// unmeasured, then cfg.measure measured. Every answer must be HTTP 200, a
// successful ToolResponse, and carry the payload back; the first one that is
// not fails the benchmark.
func runLoad(tb testing.TB, tgt target, conc int, cfg loadConfig) runStats {
	tb.Helper()
	tr := &http.Transport{
		Proxy:               nil,
		DialContext:         (&net.Dialer{Timeout: 5 * time.Second}).DialContext,
		MaxIdleConns:        2 * conc,
		MaxIdleConnsPerHost: 2 * conc,
		IdleConnTimeout:     time.Minute,
		DisableCompression:  true,
	}
	defer tr.CloseIdleConnections()
	client := &http.Client{Transport: tr, Timeout: 15 * time.Second}

	start := time.Now()
	from := start.Add(cfg.warmup)
	until := from.Add(cfg.measure)
	type result struct {
		lat     []time.Duration
		lastEnd time.Time
		err     error
	}
	results := make([]result, conc)
	var cpuFrom time.Duration
	var cpuOnce sync.Once
	var wg sync.WaitGroup
	for w := range conc {
		wg.Go(func() {
			r := &results[w]
			r.lat = make([]time.Duration, 0, 1<<14)
			var buf bytes.Buffer
			for {
				t0 := time.Now()
				if !t0.Before(until) {
					return
				}
				measured := !t0.Before(from)
				if measured {
					cpuOnce.Do(func() { cpuFrom = cpuTime(os.Getpid()) })
				}
				if err := callOnce(client, tgt, &buf); err != nil {
					r.err = err
					return
				}
				if t1 := time.Now(); measured {
					r.lat = append(r.lat, t1.Sub(t0))
					r.lastEnd = t1
				}
			}
		})
	}
	wg.Wait()
	s := runStats{conc: conc, loadCPU: cpuTime(os.Getpid()) - cpuFrom}
	var last time.Time
	for _, r := range results {
		if r.err != nil {
			tb.Fatalf("c=%d: call to %s failed: %v", conc, tgt.url, r.err)
		}
		s.lat = append(s.lat, r.lat...)
		if r.lastEnd.After(last) {
			last = r.lastEnd
		}
	}
	if len(s.lat) == 0 {
		tb.Fatalf("c=%d: no call completed in the measured window", conc)
	}
	s.elapsed = last.Sub(from)
	slices.Sort(s.lat)
	return s
}

// callOnce sends one call and checks its answer. buf is the caller's
// reusable response buffer.
func callOnce(client *http.Client, tgt target, buf *bytes.Buffer) error {
	req, err := http.NewRequest(http.MethodPost, tgt.url, bytes.NewReader(callBody))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	if tgt.token != "" {
		req.Header.Set("Authorization", "Bearer "+tgt.token)
	}
	res, err := client.Do(req)
	if err != nil {
		return err
	}
	buf.Reset()
	_, err = buf.ReadFrom(res.Body)
	_ = res.Body.Close()
	if err != nil {
		return fmt.Errorf("reading answer: %w", err)
	}
	if res.StatusCode != http.StatusOK {
		return fmt.Errorf("HTTP %d: %.300s", res.StatusCode, buf.Bytes())
	}
	var resp struct {
		Success bool            `json:"success"`
		Error   string          `json:"error"`
		Message string          `json:"message"`
		Result  json.RawMessage `json:"result"`
	}
	if err := json.Unmarshal(buf.Bytes(), &resp); err != nil {
		return fmt.Errorf("decoding answer %.300q: %w", buf.Bytes(), err)
	}
	if !resp.Success {
		return fmt.Errorf("call failed: %s: %s", resp.Error, resp.Message)
	}
	if !bytes.Equal(resp.Result, pingPayload) {
		return fmt.Errorf("result %.300s is not the payload sent", resp.Result)
	}
	return nil
}
