package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/tetherdev/tether/bridge"
	"github.com/tetherdev/tether/sandbox"
)

// Targets of issue #6.
const (
	targetAcquireNewRatio = 1.3
	targetReacquireP50MS  = 5.0
	targetSearchRatio     = 1.5
	sandboxBenchFiles     = 5000
)

// benchGit runs git for setup.
func benchGit(b *testing.B, dir string, args ...string) string {
	b.Helper()
	cmd := exec.Command("git", args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GIT_AUTHOR_NAME=b", "GIT_AUTHOR_EMAIL=b@b", "GIT_COMMITTER_NAME=b", "GIT_COMMITTER_EMAIL=b@b")
	out, err := cmd.CombinedOutput()
	if err != nil {
		b.Fatalf("git %v: %v\n%s", args, err, out)
	}
	return string(bytes.TrimSpace(out))
}

// benchOrigin makes a bare repository of n small source files in 50
// directories.
func benchOrigin(b *testing.B, n int) string {
	b.Helper()
	dir := b.TempDir()
	src := filepath.Join(dir, "src")
	benchGit(b, dir, "init", "-q", "-b", "main", src)
	for i := range n {
		p := filepath.Join(src, fmt.Sprintf("pkg%02d", i%50), fmt.Sprintf("file%04d.go", i))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			b.Fatal(err)
		}
		body := fmt.Sprintf("package pkg%02d\n\n// Value%d is generated.\nconst Value%d = %d\n\nfunc F%d() int { return Value%d * 2 }\n", i%50, i, i, i, i, i)
		if i%50 == 0 {
			body += "\n// NEEDLE marks one file in fifty.\n"
		}
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			b.Fatal(err)
		}
	}
	benchGit(b, src, "add", "-A")
	benchGit(b, src, "commit", "-qm", "generated")
	origin := filepath.Join(dir, "origin.git")
	benchGit(b, dir, "clone", "-q", "--bare", src, origin)
	return origin
}

// BenchmarkSandbox measures, on a repository of 5000 files made here:
// acquiring a new workspace on a cached repo against a bare `git worktree
// add --detach` of the same cache (interleaved, median of per-pair
// ratios); re-acquiring an existing workspace (p50); and search through
// the bridge's HTTP route against plain `rg --json` on the same worktree
// (interleaved, median ratio).
func BenchmarkSandbox(b *testing.B) {
	bin := tetherBin(b)
	runs := 15
	origin := benchOrigin(b, sandboxBenchFiles)
	root := b.TempDir()
	svc, err := sandbox.New(sandbox.Config{Root: root})
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	req := sandbox.AcquireRequest{Repo: origin, Mode: sandbox.ModeAnalysis, UserID: "warm", ProjectID: "p"}
	warm, err := svc.AcquireWorkspace(ctx, req)
	if err != nil {
		b.Fatal(err)
	}
	repo, _ := sandbox.ParseRepo(origin)
	cache := (&sandbox.LocalGit{Root: root}).Dir(repo)
	baseDir := b.TempDir()

	var bare, through, ratios []float64
	for i := range runs {
		dir := filepath.Join(baseDir, fmt.Sprintf("bare-%d", i))
		t0 := time.Now()
		benchGit(b, "", "--git-dir="+cache, "worktree", "add", "--quiet", "--detach", dir, warm.BaseCommit)
		bd := time.Since(t0)

		r := req
		r.UserID = fmt.Sprintf("user-%d", i)
		t0 = time.Now()
		if _, err := svc.AcquireWorkspace(ctx, r); err != nil {
			b.Fatal(err)
		}
		td := time.Since(t0)
		bare, through = append(bare, ms(bd)), append(through, ms(td))
		ratios = append(ratios, ms(td)/ms(bd))
	}
	newRatio := median(ratios)

	var re []float64
	for range 200 {
		t0 := time.Now()
		if _, err := svc.AcquireWorkspace(ctx, req); err != nil {
			b.Fatal(err)
		}
		re = append(re, ms(time.Since(t0)))
	}
	reP50 := median(re)
	if err := svc.Close(); err != nil {
		b.Fatal(err)
	}

	// Search through the route: a bridge process serving this sandbox
	// root over its local HTTP listener.
	// The listener wants the token its bridge wrote to its token file.
	client := controlClient(b)
	var tok string
	withToken := func(method, url string, body []byte) (*http.Response, error) {
		req, err := http.NewRequest(method, url, bytes.NewReader(body))
		if err != nil {
			return nil, err
		}
		req.Header.Set("Authorization", "Bearer "+tok)
		return client.Do(req)
	}
	_, brAddr := startListening(b, "bridge", bin, func(addr string) []string {
		return []string{"bridge", "--http", addr, "--sandbox-dir", root, "--root", b.TempDir(), "--log-level", "warn"}
	}, func(string) []string { return nil }, func(addr string) bool {
		var err error
		if tok, err = bridge.ReadToken(addr); err != nil {
			return false
		}
		res, err := withToken(http.MethodGet, "http://"+addr+"/healthz", nil)
		if err != nil {
			return false
		}
		res.Body.Close()
		return res.StatusCode == http.StatusOK
	})
	payload := []byte(`{"pattern":"NEEDLE","max_results":10000}`)
	searchURL := "http://" + brAddr + "/api/sandbox/workspaces/" + warm.WorkspaceID + "/search"
	viaRoute := func() int {
		res, err := withToken(http.MethodPost, searchURL, payload)
		if err != nil {
			b.Fatal(err)
		}
		defer res.Body.Close()
		var resp struct {
			Success bool
			Error   string
			Result  sandbox.SearchResult
		}
		if err := json.NewDecoder(res.Body).Decode(&resp); err != nil || !resp.Success {
			b.Fatalf("search via route: %v %s", err, resp.Error)
		}
		return len(resp.Result.Hits)
	}
	viaRG := func() {
		cmd := exec.Command("rg", "--json", "--no-config", "--hidden", "--glob", "!.git", "--regexp", "NEEDLE", "--", ".")
		cmd.Dir = warm.Path
		if out, err := cmd.Output(); err != nil || len(out) == 0 {
			b.Fatalf("rg: %v", err)
		}
	}
	if _, err := exec.LookPath("rg"); err != nil {
		b.Skip("rg is not installed; the search baseline needs it")
	}
	hits := viaRoute()
	viaRG()
	var rgMS, routeMS, sratios []float64
	for range runs * 2 {
		t0 := time.Now()
		viaRG()
		rd := time.Since(t0)
		t0 = time.Now()
		viaRoute()
		td := time.Since(t0)
		rgMS, routeMS = append(rgMS, ms(rd)), append(routeMS, ms(td))
		sratios = append(sratios, ms(td)/ms(rd))
	}
	searchRatio := median(sratios)

	fmt.Printf("\nsandbox, repository of %d files, %d runs (medians)\n", sandboxBenchFiles, runs)
	fmt.Printf("  new workspace: git worktree add %.1f ms, acquire %.1f ms, ratio %.2f× (target ≤ %.1f×) %s\n",
		median(bare), median(through), newRatio, targetAcquireNewRatio, verdict(newRatio <= targetAcquireNewRatio))
	fmt.Printf("  re-acquire:    p50 %.3f ms (target < %.0f ms) %s\n", reP50, targetReacquireP50MS, verdict(reP50 < targetReacquireP50MS))
	fmt.Printf("  search (%d hits): rg %.1f ms, route %.1f ms, ratio %.2f× (target ≤ %.1f×) %s\n",
		hits, median(rgMS), median(routeMS), searchRatio, targetSearchRatio, verdict(searchRatio <= targetSearchRatio))
	b.ReportMetric(newRatio, "new-ratio")
	b.ReportMetric(reP50, "reacquire-p50-ms")
	b.ReportMetric(searchRatio, "search-ratio")
	b.ReportMetric(0, "ns/op")
}
