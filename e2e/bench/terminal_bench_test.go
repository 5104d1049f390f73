package bench

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"runtime"
	"slices"
	"testing"
	"text/tabwriter"
	"time"

	"github.com/tetherdev/tether/broker/auth"
)

// targetTerminalOverP50 is the target: `true` through the whole
// chain within this much of a direct fork/exec of `true`, at p50.
const targetTerminalOverP50 = 5 * time.Millisecond

// terminalModes are the ways BenchmarkTerminalExecute runs `true`, in the
// order each round measures them; "direct" is the baseline.
var terminalModes = []string{"direct", "hidden", "visible"}

// BenchmarkTerminalExecute measures /api/terminal/execute {"command":"true"}
// from an HTTP caller through a broker and a bridge (separate processes),
// the bridge's fork/exec of `true` (hidden) or the visible shell running it,
// and back, against exec.Command("true").Run() in this process. One call
// at a time; each round runs the three once, so drift on a shared machine
// hits all alike.
func BenchmarkTerminalExecute(b *testing.B) {
	bin := tetherBin(b)
	cfg := loadConfigFromEnv(b)
	truePath, err := exec.LookPath("true")
	if err != nil {
		b.Skip("no `true` on PATH")
	}
	brk, secret := startBroker(b, bin)
	bridge := startBridge(b, bin, brk, secret, "bench")
	url := brk.url + "/api/v1/workspaces/bench/calls"
	tok := mintToken(b, secret, auth.RoleCaller, "bench")
	client := controlClient(b)

	run := map[string]func() error{
		"direct": func() error { return exec.Command(truePath).Run() },
		"hidden": func() error {
			return executeTrue(client, url, tok, `{"endpoint":"/api/terminal/execute","payload":{"command":"true","hidden":true},"timeout":10}`, "hidden")
		},
		"visible": func() error {
			return executeTrue(client, url, tok, `{"endpoint":"/api/terminal/execute","payload":{"command":"true"},"timeout":10}`, "visible")
		},
	}

	fmt.Printf("\nterminal: %d×(%v warm-up + %v measured) rounds of direct, hidden, visible; CPUs: %d\n", cfg.runs, cfg.warmup, cfg.measure, runtime.NumCPU())
	lat := map[string][]time.Duration{}
	var overHidden, overVisible []float64 // per run: p50 ms over direct
	bridgeCPU0 := cpuTime(bridge.pid())
	calls := 0
	for r := 1; r <= cfg.runs; r++ {
		runLat, rounds := interleave(b, cfg, terminalModes, run, bridge.logTail)
		calls += rounds
		for _, mode := range terminalModes {
			lat[mode] = append(lat[mode], runLat[mode]...)
		}
		d := quantile(runLat["direct"], .5)
		overHidden = append(overHidden, ms(quantile(runLat["hidden"], .5)-d))
		overVisible = append(overVisible, ms(quantile(runLat["visible"], .5)-d))
		fmt.Printf("  run %d/%d: %d rounds; p50 direct %.3f ms, hidden %.3f ms, visible %.3f ms\n", r, cfg.runs, len(runLat["direct"]),
			ms(d), ms(quantile(runLat["hidden"], .5)), ms(quantile(runLat["visible"], .5)))
	}
	bridgeCPU := us(cpuTime(bridge.pid())-bridgeCPU0) / float64(2*calls)
	for _, mode := range terminalModes {
		slices.Sort(lat[mode])
	}

	out := os.Stdout
	fmt.Fprintf(out, "\nPOST /api/v1/workspaces/bench/calls /api/terminal/execute {\"command\":\"true\"}: HTTP caller → broker → bridge → exec → back, loopback, %d CPUs\n", runtime.NumCPU())
	fmt.Fprintf(out, "baseline: exec.Command(%q).Run() in this process, interleaved call by call in the same run; %d runs of %v after %v warm-up\n\n", truePath, cfg.runs, cfg.measure, cfg.warmup)
	tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "mode\t calls\tp50 ms\tp99 ms\t +p50 ms\t+p99 ms\t ×p50\t×p99\t")
	d50, d99 := quantile(lat["direct"], .5), quantile(lat["direct"], .99)
	for _, mode := range terminalModes {
		p50, p99 := quantile(lat[mode], .5), quantile(lat[mode], .99)
		fmt.Fprintf(tw, "%s\t %d\t%.3f\t%.3f\t %.3f\t%.3f\t %.2f\t%.2f\t\n", mode, len(lat[mode]), ms(p50), ms(p99),
			ms(p50-d50), ms(p99-d99), float64(p50)/float64(d50), float64(p99)/float64(d99))
	}
	_ = tw.Flush()
	fmt.Fprintf(out, "\nbridge CPU per terminal call: %.1f µs\n", bridgeCPU)
	for _, m := range []struct {
		mode string
		over []float64
	}{{"hidden", overHidden}, {"visible", overVisible}} {
		over := median(m.over)
		fmt.Fprintf(out, "target %-7s: p50 %+.3f ms over direct exec (median of per-run differences), want ≤ %.0f ms: %s\n",
			m.mode, over, ms(targetTerminalOverP50), verdict(over <= ms(targetTerminalOverP50)))
	}
	fmt.Fprintln(out)

	b.ReportMetric(0, "ns/op") // one op is the whole measurement
	b.ReportMetric(ms(d50), "direct-p50-ms")
	b.ReportMetric(ms(quantile(lat["hidden"], .5)), "hidden-p50-ms")
	b.ReportMetric(ms(quantile(lat["visible"], .5)), "visible-p50-ms")
	b.ReportMetric(median(overHidden), "hidden-over-p50-ms")
	b.ReportMetric(median(overVisible), "visible-over-p50-ms")
	b.ReportMetric(ms(quantile(lat["hidden"], .99)), "hidden-p99-ms")
	b.ReportMetric(ms(quantile(lat["visible"], .99)), "visible-p99-ms")
}

// interleave runs one measured run of rounds: each round calls every way
// once, in order, so drift on a shared machine hits all alike; cfg.warmup
// of rounds first, unmeasured, then cfg.measure of them. It returns each
// way's latencies, sorted, and how many rounds ran; the first failing call
// fails the benchmark, with logTail's lines.
func interleave(b *testing.B, cfg loadConfig, ways []string, run map[string]func() error, logTail func() string) (map[string][]time.Duration, int) {
	b.Helper()
	lat := map[string][]time.Duration{}
	rounds := 0
	start := time.Now()
	from, until := start.Add(cfg.warmup), start.Add(cfg.warmup+cfg.measure)
	for now := start; now.Before(until); now = time.Now() {
		for _, way := range ways {
			t0 := time.Now()
			if err := run[way](); err != nil {
				b.Fatalf("%s: %v\n%s", way, err, logTail())
			}
			if d := time.Since(t0); !now.Before(from) {
				lat[way] = append(lat[way], d)
			}
		}
		rounds++
	}
	for _, way := range ways {
		slices.Sort(lat[way])
	}
	return lat, rounds
}

// quantile is the nearest-rank quantile q of the sorted latencies.
func quantile(lat []time.Duration, q float64) time.Duration {
	return runStats{lat: lat}.quantile(q)
}

// executeTrue sends one execute call for `true` and checks that it ran
// where it should and exited 0.
func executeTrue(client *http.Client, url, tok, body, where string) error {
	req, err := http.NewRequest(http.MethodPost, url, bytes.NewReader([]byte(body)))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+tok)
	res, err := client.Do(req)
	if err != nil {
		return err
	}
	raw, err := io.ReadAll(res.Body)
	_ = res.Body.Close()
	if err != nil {
		return fmt.Errorf("reading answer: %w", err)
	}
	if res.StatusCode != http.StatusOK {
		return fmt.Errorf("HTTP %d: %.300s", res.StatusCode, raw)
	}
	var resp struct {
		Success bool   `json:"success"`
		Error   string `json:"error"`
		Message string `json:"message"`
		Result  struct {
			Success  bool   `json:"success"`
			ExitCode int    `json:"exit_code"`
			TimedOut bool   `json:"timed_out"`
			Terminal string `json:"terminal"`
			Note     string `json:"note"`
		} `json:"result"`
	}
	if err := json.Unmarshal(raw, &resp); err != nil {
		return fmt.Errorf("decoding answer %.300q: %w", raw, err)
	}
	r := resp.Result
	switch {
	case !resp.Success:
		return fmt.Errorf("call failed: %s: %s", resp.Error, resp.Message)
	case !r.Success || r.ExitCode != 0 || r.TimedOut:
		return fmt.Errorf("true did not succeed: %s", raw)
	case r.Terminal != where:
		return fmt.Errorf("ran %s, want %s: %s", r.Terminal, where, r.Note)
	}
	return nil
}
