package bench

import (
	"bufio"
	"bytes"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"os"
	"runtime"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// pingPayload is the ~100 byte payload /api/ping echoes.
var pingPayload = []byte(`{"kind":"bench","text":"` + strings.Repeat("tether", 11) + `","seq":42,"ok":true}`)

// callBody is the HTTP call every request sends.
var callBody = []byte(`{"endpoint":"/api/ping","payload":` + string(pingPayload) + `,"timeout":10}`)

// asyncCallBody is callBody as an async call (docs/async-calls.md).
var asyncCallBody = []byte(`{"endpoint":"/api/ping","payload":` + string(pingPayload) + `,"timeout":10,"async":true}`)

// target is where the load generator sends calls.
type target struct {
	url   string
	token string // bearer token; empty sends none
	// async makes each call an async submit followed by a wait for its
	// outcome (GET /api/v1/calls/{id}?wait=), measured as one round trip.
	async bool
	// submitWait makes the async submit wait for the outcome itself
	// (Prefer: respond-async, wait=10): one request while the call ends
	// within the wait.
	submitWait bool
	// peer marks a system tether is compared with: a call it answers with
	// a failure is counted (runStats.failed), not fatal, since how often
	// it fails is part of what the comparison shows. Anything tether
	// answers must be a success.
	peer bool
	// traceparent, when set, is sent as the request's traceparent header
	// (BenchmarkTracingCost).
	traceparent string
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
	// watchCPU is the CPU of each watched process in the measured window
	// (runLoadOver).
	watchCPU []time.Duration
	// failed counts the calls a peer answered with a failure in the
	// measured window (target.peer), which lat leaves out; firstFailure
	// is the first one's error.
	failed       int
	firstFailure string
}

func (s runStats) rate() float64 { return float64(len(s.lat)) / s.elapsed.Seconds() }

// cpuPerCall is the CPU per call measured, µs, of the load generator and
// then of each watched process.
func (s runStats) cpuPerCall() []float64 {
	out := []float64{us(s.loadCPU) / float64(len(s.lat))}
	for _, d := range s.watchCPU {
		out = append(out, us(d)/float64(len(s.lat)))
	}
	return out
}

// boxCPUPerCall is cpuPerCall's sum: with every process of a setup
// watched, what the machine spends on a call.
func (s runStats) boxCPUPerCall() float64 {
	total := 0.0
	for _, v := range s.cpuPerCall() {
		total += v
	}
	return total
}

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
//
// The load generator shares the machine with what it measures, so it is
// kept lean: each worker holds one keep-alive connection and writes a
// prepared HTTP/1.1 request and reads the answer on its own goroutine (a
// net/http client costs about twice the CPU per call, with two goroutine
// handoffs per request), the way wrk drives a server.
func runLoad(tb testing.TB, tgt target, conc int, cfg loadConfig) runStats {
	tb.Helper()
	return runLoadOver(tb, []target{tgt}, conc, cfg, nil)
}

// runLoadOver is runLoad over several targets: each worker sends its calls
// to the targets in turn (worker w starting at target w·len/conc), holding
// one keep-alive connection per host. The CPU time of the processes in
// watch over the measured window goes into runStats.watchCPU, in order.
func runLoadOver(tb testing.TB, tgts []target, conc int, cfg loadConfig, watch []int) runStats {
	tb.Helper()
	defer holdGC()()
	start := time.Now()
	from := start.Add(cfg.warmup)
	until := from.Add(cfg.measure)
	type result struct {
		lat     []time.Duration
		lastEnd time.Time
		err     error
		failed  int
		failure string
	}
	results := make([]result, conc)
	var cpuFrom time.Duration
	watchFrom := make([]time.Duration, len(watch))
	var cpuOnce sync.Once
	var wg sync.WaitGroup
	for w := range conc {
		wg.Go(func() {
			r := &results[w]
			r.lat = make([]time.Duration, 0, 1<<14)
			reqs := make([][]byte, len(tgts))
			callers := make([]*httpCaller, len(tgts))
			byHost := map[string]*httpCaller{}
			defer func() {
				for _, c := range byHost {
					c.close()
				}
			}()
			for i, tgt := range tgts {
				host, req, err := callRequest(tgt)
				if err != nil {
					r.err = err
					return
				}
				if byHost[host] == nil {
					c, err := dialCaller(host, strings.HasPrefix(tgt.url, "https://"))
					if err != nil { // byHost holds only callers to close
						r.err = err
						return
					}
					byHost[host] = c
				}
				reqs[i], callers[i] = req, byHost[host]
			}
			for n := w * len(tgts) / conc; ; n++ {
				t0 := time.Now()
				if !t0.Before(until) {
					return
				}
				measured := !t0.Before(from)
				if measured {
					cpuOnce.Do(func() {
						cpuFrom = cpuTime(os.Getpid())
						for i, pid := range watch {
							watchFrom[i] = cpuTime(pid)
						}
					})
				}
				i := n % len(tgts)
				call := callers[i].call
				if tgts[i].async {
					call = callers[i].callAsync
				}
				if err := call(reqs[i]); err != nil {
					var failed *answerError
					if !tgts[i].peer || !errors.As(err, &failed) {
						r.err = fmt.Errorf("%s: %w", tgts[i].url, err)
						return
					}
					if measured {
						if r.failed++; r.failure == "" {
							r.failure = err.Error()
						}
					}
					continue
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
	for i, pid := range watch {
		s.watchCPU = append(s.watchCPU, cpuTime(pid)-watchFrom[i])
	}
	var last time.Time
	for _, r := range results {
		if r.err != nil {
			tb.Fatalf("c=%d: call failed: %v", conc, r.err)
		}
		s.lat = append(s.lat, r.lat...)
		if s.failed += r.failed; s.firstFailure == "" {
			s.firstFailure = r.failure
		}
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

// holdGC stops the load generator's own garbage collection until the
// returned function is called, which collects once and restores it.
//
// The load generator is the benchmark process: a collection in it takes a
// core for its mark phase and stops its workers for moments, and every
// call in flight then reads as slower, whichever system answers it. That
// is noise of the harness's, and it weighs more on the faster system.
// Measured on 2 cores, one broker, a bridge as the client, c=64, four
// interleaved pairs of runs of a closed loop like this one: p99/p50 2.86
// with the load generator collecting, 2.60 without. (In bench-peers' ratios against
// node the difference stayed within the spread between runs.) The
// workers allocate little per call (an answer's decoded result); the
// memory limit still collects if that ever reaches a gigabyte.
func holdGC() (release func()) {
	gcHold.Lock()
	defer gcHold.Unlock()
	if gcHold.depth++; gcHold.depth == 1 {
		runtime.GC()
		gcHold.percent = debug.SetGCPercent(-1)
		gcHold.limit = debug.SetMemoryLimit(1 << 30)
	}
	return func() {
		gcHold.Lock()
		defer gcHold.Unlock()
		if gcHold.depth--; gcHold.depth == 0 {
			debug.SetMemoryLimit(gcHold.limit)
			debug.SetGCPercent(gcHold.percent)
			runtime.GC()
		}
	}
}

// gcHold is what holdGC changed: the outermost of overlapping holds
// restores it.
var gcHold struct {
	sync.Mutex
	depth   int
	percent int
	limit   int64
}

// httpCaller is one keep-alive HTTP/1.1 connection sending bench calls.
type httpCaller struct {
	conn net.Conn
	rd   *bufio.Reader
	body []byte // the last answer's body
}

// callRequest prepares the whole HTTP request of the bench call to tgt and
// returns it with the host it goes to.
func callRequest(tgt target) (host string, req []byte, err error) {
	u, err := url.Parse(tgt.url)
	if err != nil {
		return "", nil, err
	}
	body := callBody
	if tgt.async {
		body = asyncCallBody
	}
	var b bytes.Buffer
	fmt.Fprintf(&b, "POST %s HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\nContent-Length: %d\r\n", u.RequestURI(), u.Host, len(body))
	if tgt.token != "" {
		fmt.Fprintf(&b, "Authorization: Bearer %s\r\n", tgt.token)
	}
	if tgt.async && tgt.submitWait {
		b.WriteString("Prefer: respond-async, wait=10\r\n")
	}
	if tgt.traceparent != "" {
		fmt.Fprintf(&b, "traceparent: %s\r\n", tgt.traceparent)
	}
	b.WriteString("\r\n")
	b.Write(body)
	return u.Host, b.Bytes(), nil
}

// dialCaller opens a keep-alive connection to host; over TLS (the bench's
// certificate) it handshakes once here, and every call after reuses it.
func dialCaller(host string, overTLS bool) (*httpCaller, error) {
	var conn net.Conn
	var err error
	if overTLS {
		conn, err = tls.DialWithDialer(&net.Dialer{Timeout: 5 * time.Second}, "tcp", host, benchClientTLS())
	} else {
		conn, err = net.DialTimeout("tcp", host, 5*time.Second)
	}
	if err != nil {
		return nil, err
	}
	return &httpCaller{conn: conn, rd: bufio.NewReaderSize(conn, 4096)}, nil
}

func (c *httpCaller) close() { _ = c.conn.Close() }

// call sends one prepared call and checks its answer.
func (c *httpCaller) call(req []byte) error {
	code, err := c.exchange(req)
	if err != nil {
		return err
	}
	if code != 200 {
		return &answerError{fmt.Sprintf("HTTP %d: %.300s", code, c.body)}
	}
	return checkAnswer(c.body)
}

// answerError is an answer that came but is not the success the call
// should get: an HTTP status other than 200, a failed ToolResponse, a
// result other than the payload. (Other errors: the connection broke.)
type answerError struct{ msg string }

func (e *answerError) Error() string { return e.msg }

// callAsync sends one prepared async submit, then waits for the call's
// outcome with GET /api/v1/calls/{id}?wait=, on the same connection, and
// checks it. Each answer is decoded once, as a synchronous call's is.
func (c *httpCaller) callAsync(submit []byte) error {
	code, err := c.exchange(submit)
	if err != nil {
		return err
	}
	var rec asyncRecord
	if code == 200 { // Prefer: wait, and the outcome came within it
		if json.Unmarshal(c.body, &rec) != nil || rec.Status != "succeeded" {
			return fmt.Errorf("submit with wait: %.300s", c.body)
		}
		return rec.Response.check()
	}
	if code != 202 || json.Unmarshal(c.body, &rec) != nil || rec.CorrelationID == "" {
		return fmt.Errorf("submit: HTTP %d: %.300s", code, c.body)
	}
	// The wait request reuses the submit's Host and Authorization lines.
	head, _, _ := bytes.Cut(submit, []byte("\r\n\r\n"))
	var b bytes.Buffer
	fmt.Fprintf(&b, "GET /api/v1/calls/%s?wait=10 HTTP/1.1\r\n", rec.CorrelationID)
	for line := range bytes.SplitSeq(head, []byte("\r\n")) {
		if bytes.HasPrefix(line, []byte("Host:")) || bytes.HasPrefix(line, []byte("Authorization:")) {
			b.Write(line)
			b.WriteString("\r\n")
		}
	}
	b.WriteString("\r\n")
	if code, err = c.exchange(b.Bytes()); err != nil {
		return err
	}
	var final asyncRecord
	if code != 200 || json.Unmarshal(c.body, &final) != nil {
		return fmt.Errorf("wait: HTTP %d: %.300s", code, c.body)
	}
	if final.Status != "succeeded" {
		return fmt.Errorf("async call ended %s: %.300s", final.Status, c.body)
	}
	return final.Response.check()
}

// asyncRecord is what the load generator reads of an async call's record.
type asyncRecord struct {
	CorrelationID string     `json:"correlation_id"`
	Status        string     `json:"status"`
	Response      benchReply `json:"response"`
}

// exchange writes one prepared request and reads its answer into c.body;
// it returns the status code.
func (c *httpCaller) exchange(req []byte) (int, error) {
	_ = c.conn.SetDeadline(time.Now().Add(15 * time.Second))
	if _, err := c.conn.Write(req); err != nil {
		return 0, fmt.Errorf("sending call: %w", err)
	}
	status, err := c.rd.ReadSlice('\n')
	if err != nil {
		return 0, fmt.Errorf("reading status line: %w", err)
	}
	code := 0 // from "HTTP/1.1 200 …", without a string per answer
	if len(status) >= 12 && bytes.HasPrefix(status, []byte("HTTP/1.1 ")) {
		for _, d := range status[9:12] {
			code = code*10 + int(d-'0')
		}
	}
	length := -1
	for {
		line, err := c.rd.ReadSlice('\n')
		if err != nil {
			return 0, fmt.Errorf("reading headers: %w", err)
		}
		line = bytes.TrimRight(line, "\r\n")
		if len(line) == 0 {
			break
		}
		name, value, found := bytes.Cut(line, []byte(":"))
		if !found {
			return 0, fmt.Errorf("bad header line %q", line)
		}
		switch {
		case bytes.EqualFold(name, []byte("Content-Length")):
			if length, err = strconv.Atoi(string(bytes.TrimSpace(value))); err != nil {
				return 0, fmt.Errorf("bad Content-Length %q", value)
			}
		case bytes.EqualFold(name, []byte("Transfer-Encoding")), bytes.EqualFold(name, []byte("Connection")) && bytes.EqualFold(bytes.TrimSpace(value), []byte("close")):
			return 0, fmt.Errorf("unexpected header %q: the bench client reads Content-Length bodies on keep-alive connections", line)
		}
	}
	if length < 0 {
		return 0, errors.New("answer without Content-Length")
	}
	c.body = slices.Grow(c.body[:0], length)[:length]
	if _, err := io.ReadFull(c.rd, c.body); err != nil {
		return 0, fmt.Errorf("reading answer body: %w", err)
	}
	return code, nil
}

// checkAnswer requires a successful ToolResponse carrying the payload back.
func checkAnswer(body []byte) error {
	var resp benchReply
	if err := json.Unmarshal(body, &resp); err != nil {
		return &answerError{fmt.Sprintf("decoding answer %.300q: %v", body, err)}
	}
	return resp.check()
}

// benchReply is what the load generator reads of a ToolResponse.
type benchReply struct {
	Success bool            `json:"success"`
	Error   string          `json:"error"`
	Message string          `json:"message"`
	Result  json.RawMessage `json:"result"`
}

// check requires a success carrying the payload back.
func (r *benchReply) check() error {
	if !r.Success {
		return &answerError{fmt.Sprintf("call failed: %s: %s", r.Error, r.Message)}
	}
	if !bytes.Equal(r.Result, pingPayload) {
		return &answerError{fmt.Sprintf("result %.300s is not the payload sent", r.Result)}
	}
	return nil
}
