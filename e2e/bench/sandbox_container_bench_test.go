//go:build linux

package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/tetherdev/tether/bridge"
	"github.com/tetherdev/tether/internal/podmantest"
	"github.com/tetherdev/tether/sandbox"
)

// targetContainerExecRatio is issue #33's: a command in a running
// container through tether at most as slow as `podman exec` of it.
const targetContainerExecRatio = 1.0

// BenchmarkSandboxContainer measures, on a podman service of its own, an
// exec of `true` in a workspace's running container through a bridge
// process's /api/sandbox/workspaces/{id}/exec against `podman exec` of the
// same container from the shell (interleaved, median of per-pair ratios),
// and reports the first command of a workspace (container create and
// start).
func BenchmarkSandboxContainer(b *testing.B) {
	if err := podmantest.Available(); err != nil {
		b.Skip(err)
	}
	bin := tetherBin(b)
	runs := 15
	engine, err := podmantest.Start()
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(engine.Close)
	origin := benchOrigin(b, 10)

	client := controlClient(b)
	var tok string
	post := func(url string, body any, out any) {
		payload, _ := json.Marshal(body)
		req, _ := http.NewRequest(http.MethodPost, url, bytes.NewReader(payload))
		req.Header.Set("Authorization", "Bearer "+tok)
		res, err := client.Do(req)
		if err != nil {
			b.Fatal(err)
		}
		defer res.Body.Close()
		var resp struct {
			Success bool
			Error   string
			Message string
			Result  json.RawMessage
		}
		if err := json.NewDecoder(res.Body).Decode(&resp); err != nil || !resp.Success {
			b.Fatalf("%s: %v %s %s", url, err, resp.Error, resp.Message)
		}
		if out != nil {
			if err := json.Unmarshal(resp.Result, out); err != nil {
				b.Fatal(err)
			}
		}
	}
	_, addr := startListening(b, "bridge", bin, func(addr string) []string {
		return []string{"bridge", "--http", addr, "--sandbox-dir", b.TempDir(), "--root", b.TempDir(), "--log-level", "warn",
			"--container-host", engine.Host, "--container-image", engine.Image}
	}, func(string) []string { return nil }, func(addr string) bool {
		var err error
		tok, err = bridge.ReadToken(addr)
		return err == nil
	})
	base := "http://" + addr + "/api/sandbox/workspaces"
	var ws sandbox.AcquireResult
	post(base, sandbox.AcquireRequest{Repo: origin, Mode: sandbox.ModeEdit, UserID: "u", ProjectID: "p", ConversationID: "c", Runtime: "container"}, &ws)
	execURL := base + "/" + ws.WorkspaceID + "/exec"
	viaTether := func() {
		var res sandbox.ExecResult
		post(execURL, sandbox.ExecRequest{Command: "true"}, &res)
		if !res.Success {
			b.Fatalf("exec: %+v", res)
		}
	}
	t0 := time.Now()
	viaTether()
	first := time.Since(t0)

	ctx := context.Background()
	names, err := engine.Containers(ctx)
	if err != nil || len(names) != 1 {
		b.Fatalf("containers %v %v", names, err)
	}
	name := strings.TrimSpace(names[0])
	viaPodman := func() {
		if out, err := engine.PodmanCmd(ctx, "exec", name, "true").CombinedOutput(); err != nil {
			b.Fatalf("podman exec: %v %s", err, out)
		}
	}
	viaPodman()
	var tMS, pMS, ratios []float64
	for range runs {
		t0 := time.Now()
		viaPodman()
		pd := time.Since(t0)
		t0 = time.Now()
		viaTether()
		td := time.Since(t0)
		pMS, tMS = append(pMS, ms(pd)), append(tMS, ms(td))
		ratios = append(ratios, ms(td)/ms(pd))
	}
	ratio := median(ratios)
	fmt.Printf("\nsandbox container (podman), %d runs (medians)\n", runs)
	fmt.Printf("  exec true: podman exec %.1f ms, tether %.1f ms, ratio %.2f× (target ≤ %.1f×) %s\n",
		median(pMS), median(tMS), ratio, targetContainerExecRatio, verdict(ratio <= targetContainerExecRatio))
	fmt.Printf("  first command (container create and start): %.1f ms\n", ms(first))
	b.ReportMetric(ratio, "exec-ratio")
	b.ReportMetric(ms(first), "first-ms")
	b.ReportMetric(0, "ns/op")
	post(base+"/"+ws.WorkspaceID+"/destroy", struct{}{}, nil)
}
