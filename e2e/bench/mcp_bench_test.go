package bench

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"runtime"
	"slices"
	"strings"
	"testing"
	"text/tabwriter"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/tetherdev/tether/broker/auth"
)

// targetMCPOverP50 is the target: an MCP tool call adds at most this
// much, at p50, to the same tether call made through the HTTP call API.
const targetMCPOverP50 = 500 * time.Microsecond

// mcpWays are the ways BenchmarkMCPToolCall runs `true`, in the order each
// round measures them; "call" (the HTTP call API) is the baseline, the
// targets are on mcp-http and mcp-stdio, and mcp-http-sdk (the same as
// mcp-http with the Go SDK's client) is shown for reference.
var mcpWays = []string{"call", "mcp-http", "mcp-stdio", "mcp-http-sdk"}

// mcpTargets are the ways the target applies to.
var mcpTargets = []string{"mcp-http", "mcp-stdio"}

// BenchmarkMCPToolCall measures the MCP tool call terminal_run
// {"command":"true"}, over the broker's streamable HTTP endpoint and over
// stdio (a `tether mcp` process relaying to the broker's HTTP API), against
// the tether call the tool makes, /api/terminal/execute with the same
// payload, sent to the HTTP call API directly. Broker and bridge are
// separate processes. The MCP client is a lean one (mcp_lean_test.go), as
// the call API's is, so the difference is the server's; the Go SDK client
// over HTTP is measured too, for reference. One call at a time; each round
// runs every way once, so drift on a shared machine hits all alike.
func BenchmarkMCPToolCall(b *testing.B) {
	bin := tetherBin(b)
	cfg := loadConfigFromEnv(b)
	brk, secret := startBroker(b, bin)
	bridge := startBridge(b, bin, brk, secret, "bench")
	tok := mintToken(b, secret, auth.RoleCaller, "bench")
	client := controlClient(b)
	url := brk.url + "/api/v1/workspaces/bench/calls"
	// The payload terminal_run sends for {"command":"true"} (timeout_s 30).
	body := `{"endpoint":"/api/terminal/execute","payload":{"command":"true","timeout":30},"timeout":32}`

	ctx := context.Background()
	endpoint := brk.url + "/api/v1/workspaces/bench/mcp"
	overHTTP := dialLeanHTTP(b, client, endpoint, tok)
	stdio := exec.Command(bin, "mcp", "--broker", brk.url, "--workspace", "bench", "--token", tok, "--log-level", "warn")
	stdio.Stderr = os.Stderr
	overStdio := startLeanStdio(b, stdio)
	overSDK := mcpSession(b, &sdk.StreamableClientTransport{
		Endpoint:   endpoint,
		HTTPClient: &http.Client{Transport: bearer{tok, &http.Transport{Proxy: nil, DisableCompression: true}}},
		MaxRetries: -1,
	})

	toolTrue := func(cs *sdk.ClientSession) error {
		res, err := cs.CallTool(ctx, &sdk.CallToolParams{Name: "terminal_run", Arguments: map[string]any{"command": "true"}})
		if err != nil {
			return err
		}
		if res.IsError || len(res.Content) == 0 || !strings.HasPrefix(res.Content[0].(*sdk.TextContent).Text, "Exit code 0") {
			return fmt.Errorf("terminal_run true: %+v", res.Content)
		}
		return nil
	}
	run := map[string]func() error{
		"call":         func() error { return executeTrue(client, url, tok, body, "visible") },
		"mcp-http":     overHTTP.callTrue,
		"mcp-stdio":    overStdio.callTrue,
		"mcp-http-sdk": func() error { return toolTrue(overSDK) },
	}

	fmt.Printf("\nmcp: %d×(%v warm-up + %v measured) rounds of %s; CPUs: %d\n", cfg.runs, cfg.warmup, cfg.measure, strings.Join(mcpWays, ", "), runtime.NumCPU())
	lat := map[string][]time.Duration{}
	over := map[string][]float64{} // per run: p50 ms over the call API
	for r := 1; r <= cfg.runs; r++ {
		runLat, _ := interleave(b, cfg, mcpWays, run, bridge.logTail)
		for _, way := range mcpWays {
			lat[way] = append(lat[way], runLat[way]...)
		}
		base := quantile(runLat["call"], .5)
		line := fmt.Sprintf("  run %d/%d: %d rounds; p50 call %.3f ms", r, cfg.runs, len(runLat["call"]), ms(base))
		for _, way := range mcpWays[1:] {
			p50 := quantile(runLat[way], .5)
			over[way] = append(over[way], ms(p50-base))
			line += fmt.Sprintf(", %s %.3f ms (%+.3f)", way, ms(p50), ms(p50-base))
		}
		fmt.Println(line)
	}
	for _, way := range mcpWays {
		slices.Sort(lat[way])
	}

	out := os.Stdout
	fmt.Fprintf(out, "\nterminal_run {\"command\":\"true\"} as an MCP tool call vs the same /api/terminal/execute through POST /api/v1/workspaces/bench/calls; broker and bridge on loopback, %d CPUs\n", runtime.NumCPU())
	fmt.Fprintf(out, "mcp-http: lean MCP client → broker's MCP endpoint; mcp-stdio: lean MCP client → tether mcp → broker's call API; mcp-http-sdk: Go SDK client → broker's MCP endpoint\n")
	fmt.Fprintf(out, "interleaved call by call, %d runs of %v after %v warm-up\n\n", cfg.runs, cfg.measure, cfg.warmup)
	tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "way\t calls\tp50 ms\tp99 ms\t +p50 ms\t+p99 ms\t")
	c50, c99 := quantile(lat["call"], .5), quantile(lat["call"], .99)
	for _, way := range mcpWays {
		p50, p99 := quantile(lat[way], .5), quantile(lat[way], .99)
		fmt.Fprintf(tw, "%s\t %d\t%.3f\t%.3f\t %.3f\t%.3f\t\n", way, len(lat[way]), ms(p50), ms(p99), ms(p50-c50), ms(p99-c99))
	}
	_ = tw.Flush()
	for _, way := range mcpTargets {
		o := median(over[way])
		fmt.Fprintf(out, "target %-9s: p50 %+.3f ms over the call API (median of per-run differences), want ≤ %.1f ms: %s\n",
			way, o, ms(targetMCPOverP50), verdict(o <= ms(targetMCPOverP50)))
	}
	fmt.Fprintln(out)

	b.ReportMetric(0, "ns/op") // one op is the whole measurement
	b.ReportMetric(ms(c50), "call-p50-ms")
	b.ReportMetric(ms(quantile(lat["mcp-http"], .5)), "mcp-http-p50-ms")
	b.ReportMetric(ms(quantile(lat["mcp-stdio"], .5)), "mcp-stdio-p50-ms")
	b.ReportMetric(median(over["mcp-http"]), "mcp-http-over-p50-ms")
	b.ReportMetric(median(over["mcp-stdio"]), "mcp-stdio-over-p50-ms")
	b.ReportMetric(median(over["mcp-http-sdk"]), "mcp-http-sdk-over-p50-ms")
}

// mcpSession connects an MCP client over t; the session is closed when the
// benchmark ends.
func mcpSession(tb testing.TB, t sdk.Transport) *sdk.ClientSession {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	cs, err := sdk.NewClient(&sdk.Implementation{Name: "bench", Version: "0"}, nil).Connect(ctx, t, nil)
	if err != nil {
		tb.Fatalf("MCP connect: %v", err)
	}
	tb.Cleanup(func() { _ = cs.Close() })
	return cs
}

// bearer adds a caller token to every request.
type bearer struct {
	token string
	next  http.RoundTripper
}

func (b bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.token)
	return b.next.RoundTrip(r)
}
