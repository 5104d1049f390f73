package release_test

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/tetherdev/tether/broker/auth"
	"github.com/tetherdev/tether/internal/testwait"
)

var (
	imgOnce sync.Once
	img     image
	imgErr  error
)

// image is what scripts/image.sh built from the first release, in a podman
// storage of the test's own (so the machine's images are never touched, and
// removing the folder removes everything).
type image struct {
	name  string
	env   []string      // CONTAINERS_CONF and CONTAINERS_STORAGE_CONF for podman
	build time.Duration // how long scripts/image.sh took
}

// needImage builds the image on first use; its removal is TestMain's.
func needImage(t *testing.T) (releases, image) {
	t.Helper()
	r := needRelease(t)
	imgOnce.Do(func() { img, imgErr = buildImage(r) })
	if imgErr != nil {
		t.Fatal(imgErr)
	}
	return r, img
}

func buildImage(r releases) (image, error) {
	store := filepath.Join(scratch, "podman")
	conf := filepath.Join(store, "storage.conf")
	// vfs: plain directories, nothing mounted that could outlive the test.
	storage := fmt.Sprintf("[storage]\ndriver = \"vfs\"\ngraphroot = %q\nrunroot = %q\n",
		filepath.Join(store, "graph"), filepath.Join(store, "run"))
	if err := os.MkdirAll(store, 0o700); err != nil {
		return image{}, err
	}
	if err := os.WriteFile(conf, []byte(storage), 0o600); err != nil {
		return image{}, err
	}
	im := image{
		name: fmt.Sprintf("localhost/tether-release-test-%d:%s", os.Getpid(), r.version),
		env: []string{
			"CONTAINERS_CONF=" + filepath.Join(repo, "deploy", "podman", "containers.conf"),
			"CONTAINERS_STORAGE_CONF=" + conf,
		},
	}
	cmd := exec.Command(filepath.Join(repo, "scripts", "image.sh"))
	cmd.Env = append(os.Environ(), append(im.env, "RELEASE_DIR="+r.a, "IMAGE="+im.name)...)
	start := time.Now()
	b, err := cmd.CombinedOutput()
	built = &im // removed at the end even if the build failed half-way
	if err != nil {
		return im, fmt.Errorf("scripts/image.sh: %v\n%s", err, b)
	}
	im.build = time.Since(start)
	return im, nil
}

// built is the image to remove when the tests end (nil: none was built).
var built *image

// removeImage removes every container and image of the test's storage,
// whatever the tests did; the storage folder goes with scratch.
func removeImage() {
	if built == nil {
		return
	}
	for _, args := range [][]string{{"rm", "--all", "--force"}, {"rmi", "--all", "--force"}} {
		cmd := built.podman(args...)
		if b, err := cmd.CombinedOutput(); err != nil {
			fmt.Fprintf(os.Stderr, "podman %s: %v\n%s", strings.Join(args, " "), err, b)
		}
	}
}

func (im image) podman(args ...string) *exec.Cmd {
	cmd := exec.Command("podman", args...)
	cmd.Env = append(os.Environ(), im.env...)
	return cmd
}

const secret = "release-test-secret-0123456789abcdef"

// client makes the test's requests; no connection outlives one (the leak
// check counts open descriptors).
var client = &http.Client{Timeout: 15 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}

func TestImageRunsABrokerThatABridgeOutsideServesACallThrough(t *testing.T) {
	r, im := needImage(t)
	name := fmt.Sprintf("tether-release-test-%d-broker", os.Getpid())
	// As the README runs it: the image's own command (broker on its
	// port 8377), published on a free loopback port of the host, the
	// secret from the environment so it is on no command line.
	run := im.podman("run", "--rm", "--name", name, "-p", "127.0.0.1::8377", "-e", "TETHER_SECRET", im.name)
	run.Env = append(run.Env, "TETHER_SECRET="+secret)
	started := time.Now()
	lines := startLines(t, run, func() {
		if b, err := im.podman("rm", "--force", "--time", "10", name).CombinedOutput(); err != nil {
			t.Errorf("podman rm %s: %v\n%s", name, err, b)
		}
	})
	line := lines.await(t, 30*time.Second, "broker listening")
	var ev struct {
		Listen string `json:"listen"`
	}
	// Every address of the container: Go names 0.0.0.0 [::] (both stacks).
	if err := json.Unmarshal([]byte(line), &ev); err != nil || (ev.Listen != "0.0.0.0:8377" && ev.Listen != "[::]:8377") {
		t.Fatalf("the broker in the image logged %q, want it listening on 0.0.0.0:8377", line)
	}
	hostPort, err := output(im.podman("port", name, "8377/tcp"))
	if err != nil {
		t.Fatal(err)
	}
	url := "http://" + hostPort

	bin := os.Getenv("TETHER_BIN")
	if bin == "" {
		bin = extractTether(t, r.archive(r.a, "linux_"+runtime.GOARCH))
	}
	const ws = "ws-image"
	bridge := exec.Command(bin, "bridge", "--broker", url, "--workspace", ws, "--root", t.TempDir())
	// The token from the environment (on no command line); the bridge's
	// local files in a folder of the test's.
	bridge.Env = append(os.Environ(), "TETHER_TOKEN="+issue(t, auth.RoleBridge, ws), "XDG_RUNTIME_DIR="+t.TempDir())
	startLines(t, bridge, nil)
	caller := issue(t, auth.RoleCaller, ws)
	testwait.Until(t, 15*time.Second, func() bool { return lists(url, caller, ws) }, "the broker in the container listing %s", ws)

	start := time.Now()
	req, _ := http.NewRequest(http.MethodPost, url+"/api/v1/workspaces/"+ws+"/calls",
		strings.NewReader(`{"endpoint":"/api/ping","payload":{"from":"outside"},"timeout":10}`))
	req.Header.Set("Authorization", "Bearer "+caller)
	res, err := client.Do(req)
	if err != nil {
		t.Fatalf("call through the container: %v", err)
	}
	defer res.Body.Close()
	body, _ := io.ReadAll(res.Body)
	var resp struct {
		Success bool            `json:"success"`
		Result  json.RawMessage `json:"result"`
	}
	if err := json.Unmarshal(body, &resp); err != nil || res.StatusCode != http.StatusOK || !resp.Success {
		t.Fatalf("call answered %d %s, want 200 and success", res.StatusCode, body)
	}
	if !bytes.Contains(resp.Result, []byte(`"outside"`)) {
		t.Errorf("ping result %s does not echo the payload", resp.Result)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("the call took %s, want under 5s", d)
	}
	t.Logf("image built in %s; container started to call answered in %s; the call took %s",
		im.build.Round(time.Millisecond), time.Since(started).Round(time.Millisecond), time.Since(start).Round(time.Millisecond))
}

func TestImageHoldsOnlyTheBinaryCertificatesAndUserAndRunsAsNonRoot(t *testing.T) {
	r, im := needImage(t)
	out, err := output(im.podman("image", "inspect", "--format", "{{json .Config}}", im.name))
	if err != nil {
		t.Fatal(err)
	}
	var cfg struct {
		User       string
		Entrypoint []string
		Labels     map[string]string
	}
	if err := json.Unmarshal([]byte(out), &cfg); err != nil {
		t.Fatalf("image config %q: %v", out, err)
	}
	if cfg.User != "65532:65532" {
		t.Errorf("image user %q, want 65532:65532 (not root)", cfg.User)
	}
	if !slices.Equal(cfg.Entrypoint, []string{"/tether"}) {
		t.Errorf("entrypoint %q, want [/tether]", cfg.Entrypoint)
	}
	for k, v := range map[string]string{
		"org.opencontainers.image.version":  r.version,
		"org.opencontainers.image.revision": r.head,
		"org.opencontainers.image.created":  r.headTime.Format(time.RFC3339),
	} {
		if cfg.Labels[k] != v {
			t.Errorf("label %s = %q, want %q", k, cfg.Labels[k], v)
		}
	}

	mnt, err := output(im.podman("image", "mount", im.name))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if b, err := im.podman("image", "unmount", im.name).CombinedOutput(); err != nil {
			t.Errorf("podman image unmount: %v\n%s", err, b)
		}
	})
	got := map[string]string{}
	err = filepath.WalkDir(mnt, func(path string, d fs.DirEntry, err error) error {
		if err != nil || path == mnt {
			return err
		}
		rel, _ := filepath.Rel(mnt, path)
		info, err := d.Info()
		if err != nil {
			return err
		}
		got["/"+rel] = info.Mode().String()
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{
		"/etc":                               "drwxr-xr-x",
		"/etc/group":                         "-rw-r--r--",
		"/etc/passwd":                        "-rw-r--r--",
		"/etc/ssl":                           "drwxr-xr-x",
		"/etc/ssl/certs":                     "drwxr-xr-x",
		"/etc/ssl/certs/ca-certificates.crt": "-rw-r--r--",
		"/tether":                            "-rwxr-xr-x",
	}
	for p, mode := range got {
		if want[p] != mode {
			t.Errorf("the image holds %s (%s); want only %v", p, mode, want)
		}
	}
	for p := range want {
		if _, ok := got[p]; !ok {
			t.Errorf("the image lacks %s", p)
		}
	}
	certs, err := os.ReadFile(filepath.Join(mnt, "etc/ssl/certs/ca-certificates.crt"))
	if err != nil || !bytes.Contains(certs, []byte("BEGIN CERTIFICATE")) {
		t.Errorf("ca-certificates.crt holds no certificate (%v)", err)
	}
	passwd, _ := os.ReadFile(filepath.Join(mnt, "etc/passwd"))
	if !bytes.Contains(passwd, []byte("\ntether:x:65532:65532:")) {
		t.Errorf("/etc/passwd has no tether user 65532:\n%s", passwd)
	}

	// No shell to start: a container given /bin/sh fails to start.
	sh := im.podman("run", "--rm", "--entrypoint", "/bin/sh", im.name, "-c", "true")
	if b, err := sh.CombinedOutput(); err == nil || !strings.Contains(string(b), "/bin/sh") {
		t.Errorf("podman run --entrypoint /bin/sh: %v, %s; want a failure naming /bin/sh", err, b)
	}
	// The binary runs, as 65532.
	id, err := output(im.podman("run", "--rm", "--entrypoint", "/tether", im.name, "version", "--json"))
	if err != nil || !strings.Contains(id, r.head) {
		t.Errorf("tether version --json in the image: %q, %v; want commit %s", id, err, r.head)
	}
}

// lines is a started process's stderr, line by line.
type lines struct {
	mu   sync.Mutex
	all  []string
	more chan struct{} // closed and replaced on every new line
	done chan struct{} // closed once the process has exited
}

// startLines starts cmd, keeps its stderr lines, and on cleanup calls stop
// (nil: SIGTERM to cmd) and waits for it to exit.
func startLines(t *testing.T, cmd *exec.Cmd, stop func()) *lines {
	t.Helper()
	l := &lines{more: make(chan struct{}), done: make(chan struct{})}
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	// A group of its own, so a stop reaches whatever it started.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		t.Fatalf("starting %s: %v", cmd.Args[0], err)
	}
	go func() {
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			l.mu.Lock()
			l.all = append(l.all, sc.Text())
			close(l.more)
			l.more = make(chan struct{})
			l.mu.Unlock()
		}
		_ = cmd.Wait()
		close(l.done)
	}()
	t.Cleanup(func() {
		if stop != nil {
			stop()
		} else {
			_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGTERM)
		}
		select {
		case <-l.done:
		case <-time.After(20 * time.Second):
			t.Errorf("%s did not exit 20s after being stopped; killing it", strings.Join(cmd.Args, " "))
			_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
			<-l.done
		}
		if t.Failed() {
			l.mu.Lock()
			t.Logf("%s stderr:\n%s", cmd.Args[0], strings.Join(l.all, "\n"))
			l.mu.Unlock()
		}
	})
	return l
}

// await waits for a line containing part and returns it.
func (l *lines) await(t *testing.T, within time.Duration, part string) string {
	t.Helper()
	deadline := time.After(within)
	for seen := 0; ; {
		l.mu.Lock()
		all, more := l.all, l.more
		l.mu.Unlock()
		for ; seen < len(all); seen++ {
			if strings.Contains(all[seen], part) {
				return all[seen]
			}
		}
		select {
		case <-more:
		case <-l.done:
			t.Fatalf("exited before printing %q", part)
		case <-deadline:
			t.Fatalf("no line with %q within %s", part, within)
		}
	}
}

func issue(t *testing.T, role, ws string) string {
	t.Helper()
	tok, err := auth.IssueToken([]byte(secret), role, []string{ws}, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

// lists reports whether the broker at url lists ws.
func lists(url, tok, ws string) bool {
	req, _ := http.NewRequest(http.MethodGet, url+"/api/v1/workspaces", nil)
	req.Header.Set("Authorization", "Bearer "+tok)
	res, err := client.Do(req)
	if err != nil {
		return false
	}
	defer res.Body.Close()
	var list struct {
		Workspaces []struct {
			WorkspaceID string `json:"workspace_id"`
		} `json:"workspaces"`
	}
	_ = json.NewDecoder(res.Body).Decode(&list)
	for _, w := range list.Workspaces {
		if w.WorkspaceID == ws {
			return true
		}
	}
	return false
}
