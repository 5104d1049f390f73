// Package release_test checks make release and make image from the outside:
// it runs scripts/release.sh twice (each builds HEAD from its own fresh clone,
// at its own path) and compares the outputs byte for byte, checks the archives,
// the binary, the checksums and the SBOM, then builds the image with
// scripts/image.sh from the first release and runs a broker in it, with a
// bridge outside it and a call through it.
//
// Cross builds and podman are slow and heavy on a 2-core machine, so these
// tests run only with TETHER_RELEASE_TEST=1: make test runs them as a step
// of their own (scripts/test.sh) rather than beside every other package.
// Run them by hand with `.bin` on PATH (cyclonedx-gomod):
//
//	PATH=$PWD/.bin:$PATH TETHER_RELEASE_TEST=1 go test -count=1 -v ./e2e/release/
package release_test

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"debug/buildinfo"
	"debug/macho"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tetherdev/tether/internal/leakcheck"
)

var (
	// repo is the repository's top directory (scripts/ lives there).
	repo string
	// scratch holds what the tests build, shared between them (the
	// releases, the image's podman storage); TestMain removes it.
	scratch string

	relOnce sync.Once
	rel     releases
	relErr  error
)

// releases is what two runs of scripts/release.sh wrote.
type releases struct {
	a, b     string // the two output directories
	version  string
	head     string // the commit both were built from
	headTime time.Time
	second   time.Duration // how long the second run took (cache warm)
}

func TestMain(m *testing.M) {
	leaks := leakcheck.Begin()
	code := func() int {
		var err error
		if repo, err = filepath.Abs("../.."); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		if scratch, err = os.MkdirTemp("", "tether-release-test"); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		defer os.RemoveAll(scratch)
		defer removeImage()
		return m.Run()
	}()
	os.Exit(leaks.After(code))
}

// needRelease skips the test unless TETHER_RELEASE_TEST is set, and
// returns the two releases, building them on first use.
func needRelease(t *testing.T) releases {
	t.Helper()
	if os.Getenv("TETHER_RELEASE_TEST") == "" {
		t.Skip("set TETHER_RELEASE_TEST=1 (make test does, in a step of its own) to build the releases")
	}
	relOnce.Do(func() { rel, relErr = buildReleases() })
	if relErr != nil {
		t.Fatal(relErr)
	}
	return rel
}

func buildReleases() (releases, error) {
	var r releases
	head, err := output(exec.Command("git", "-C", repo, "rev-parse", "HEAD"))
	if err != nil {
		return r, err
	}
	r.head = head
	ct, err := output(exec.Command("git", "-C", repo, "log", "-1", "--format=%ct", head))
	if err != nil {
		return r, err
	}
	sec, err := strconv.ParseInt(ct, 10, 64)
	if err != nil {
		return r, fmt.Errorf("commit time %q: %w", ct, err)
	}
	r.headTime = time.Unix(sec, 0).UTC()
	r.a, r.b = filepath.Join(scratch, "dist-a"), filepath.Join(scratch, "dist-b")
	for i, out := range []string{r.a, r.b} {
		start := time.Now()
		cmd := exec.Command(filepath.Join(repo, "scripts", "release.sh"))
		// Each run in a TMPDIR of its own: its clone sits at a path of
		// its own, so equal outputs also show that no path gets in.
		tmp := filepath.Join(scratch, fmt.Sprintf("tmp-%d", i))
		if err := os.MkdirAll(tmp, 0o755); err != nil {
			return r, err
		}
		cmd.Env = append(withoutEnv("VERSION", "PLATFORMS"), "OUT="+out, "TMPDIR="+tmp)
		if b, err := cmd.CombinedOutput(); err != nil {
			return r, fmt.Errorf("scripts/release.sh (run %d): %v\n%s", i+1, err, b)
		}
		if i == 1 {
			r.second = time.Since(start)
		}
	}
	sums, err := os.ReadFile(filepath.Join(r.a, "SHA256SUMS"))
	if err != nil {
		return r, err
	}
	for _, line := range strings.Split(string(sums), "\n") {
		if name, ok := strings.CutSuffix(line, "_sbom.cdx.json"); ok {
			_, r.version, _ = strings.Cut(strings.Fields(name)[1], "tether_")
		}
	}
	if r.version == "" {
		return r, fmt.Errorf("no SBOM in SHA256SUMS:\n%s", sums)
	}
	return r, nil
}

// platforms are the release's targets: make release builds all four.
var platforms = []string{"linux_amd64", "linux_arm64", "darwin_amd64", "darwin_arm64"}

func (r releases) archive(dir, platform string) string {
	return filepath.Join(dir, "tether_"+r.version+"_"+platform+".tar.gz")
}

func TestReleaseTwiceGivesByteIdenticalFiles(t *testing.T) {
	r := needRelease(t)
	want := []string{"SHA256SUMS", "tether_" + r.version + "_sbom.cdx.json"}
	for _, p := range platforms {
		want = append(want, filepath.Base(r.archive(r.a, p)))
	}
	slices.Sort(want)
	for _, dir := range []string{r.a, r.b} {
		if got := names(t, dir); !slices.Equal(got, want) {
			t.Fatalf("%s holds %q, want %q", dir, got, want)
		}
	}
	for _, name := range want {
		a, errA := os.ReadFile(filepath.Join(r.a, name))
		b, errB := os.ReadFile(filepath.Join(r.b, name))
		if err := errors.Join(errA, errB); err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(a, b) {
			t.Errorf("%s differs between two release runs of commit %s", name, r.head)
		}
	}
	t.Logf("version %s; second release run (build cache warm) took %s", r.version, r.second.Round(time.Millisecond))
}

func TestReleaseChecksumsVerifyWithSha256sum(t *testing.T) {
	r := needRelease(t)
	cmd := exec.Command("sha256sum", "-c", "SHA256SUMS")
	cmd.Dir = r.a
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("sha256sum -c SHA256SUMS: %v\n%s", err, out)
	}
	// Every file of the release but SHA256SUMS itself is listed.
	if n, want := strings.Count(string(out), ": OK\n"), len(platforms)+1; n != want {
		t.Fatalf("sha256sum -c checked %d files, want %d:\n%s", n, want, out)
	}
}

func TestReleaseArchivesHoldOneDirectoryNamedLikeTheArchiveOwnedByRootAtTheCommitTime(t *testing.T) {
	r := needRelease(t)
	for _, p := range platforms {
		path := r.archive(r.a, p)
		dir := strings.TrimSuffix(filepath.Base(path), ".tar.gz") + "/"
		hdrs, _ := readArchive(t, path, "")
		var got []string
		for _, h := range hdrs {
			got = append(got, h.Name)
			if h.Uid != 0 || h.Gid != 0 || h.Uname != "" || h.Gname != "" {
				t.Errorf("%s: %s owned by %d:%d (%q:%q), want 0:0 and no names", p, h.Name, h.Uid, h.Gid, h.Uname, h.Gname)
			}
			if !h.ModTime.Equal(r.headTime) {
				t.Errorf("%s: %s has time %s, want the commit's %s", p, h.Name, h.ModTime.UTC(), r.headTime)
			}
		}
		want := []string{dir, dir + "README.md", dir + "tether"}
		if _, err := os.Stat(filepath.Join(repo, "LICENSE")); err == nil {
			want = []string{dir, dir + "LICENSE", dir + "README.md", dir + "tether"}
		}
		if !slices.Equal(got, want) {
			t.Errorf("%s holds %q, want %q (in this order)", p, got, want)
		}
		for _, h := range hdrs {
			if h.Name == dir+"tether" && h.Mode&0o777 != 0o755 {
				t.Errorf("%s: tether has mode %o, want 755", p, h.Mode&0o777)
			}
		}
	}
}

func TestReleaseLinuxBinariesAreStatic(t *testing.T) {
	r := needRelease(t)
	for _, p := range []string{"linux_amd64", "linux_arm64"} {
		bin := extractTether(t, r.archive(r.a, p))
		out, err := output(exec.Command("file", "-b", bin))
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(out, "statically linked") {
			t.Errorf("%s: file says %q, want statically linked", p, out)
		}
		ldd, err := exec.Command("ldd", bin).CombinedOutput()
		if err == nil || !strings.Contains(string(ldd), "not a dynamic executable") {
			t.Errorf("%s: ldd said %q (err %v), want \"not a dynamic executable\"", p, ldd, err)
		}
	}
}

// Apple silicon runs no unsigned program: Go's linker writes an ad-hoc
// signature (LC_CODE_SIGNATURE) when it links darwin/arm64 itself, which a
// change of linker flags could lose without any build failing.
func TestReleaseDarwinArm64BinaryIsAdHocSigned(t *testing.T) {
	r := needRelease(t)
	f, err := macho.Open(extractTether(t, r.archive(r.a, "darwin_arm64")))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	const lcCodeSignature = 0x1d
	for _, l := range f.Loads {
		if raw := l.Raw(); len(raw) >= 4 && f.ByteOrder.Uint32(raw) == lcCodeSignature {
			return
		}
	}
	t.Fatal("the darwin/arm64 binary has no LC_CODE_SIGNATURE load command")
}

func TestReleaseBinaryNamesTheCommitItWasBuiltFrom(t *testing.T) {
	r := needRelease(t)
	bin := extractTether(t, r.archive(r.a, "linux_"+runtime.GOARCH))
	out, err := output(exec.Command(bin, "version", "--json"))
	if err != nil {
		t.Fatal(err)
	}
	var info map[string]any
	dec := json.NewDecoder(strings.NewReader(out))
	if err := dec.Decode(&info); err != nil || dec.More() {
		t.Fatalf("tether version --json printed %q, want one JSON object (%v)", out, err)
	}
	want := map[string]any{
		"version":    r.version,
		"commit":     r.head,
		"build_date": r.headTime.Format(time.RFC3339),
		"go_version": runtime.Version(),
	}
	for k, v := range want {
		if info[k] != v {
			t.Errorf("tether version --json: %s = %v, want %v (all: %s)", k, info[k], v, out)
		}
	}
	// Built from a clean clone: never "modified", even when the work tree
	// the test runs in has changes.
	if m, ok := info["modified"]; ok {
		t.Errorf("tether version --json: modified = %v, want it absent (a clean build)", m)
	}
	line, err := output(exec.Command(bin, "version"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(line, "tether "+r.version+" ("+r.head[:12]+") ") || strings.Contains(line, "\n") {
		t.Errorf("tether version printed %q, want one line naming %s and %s", line, r.version, r.head[:12])
	}
}

func TestReleaseSBOMListsEveryModuleOfTheBinaryAndNoVaryingFields(t *testing.T) {
	r := needRelease(t)
	raw, err := os.ReadFile(filepath.Join(r.a, "tether_"+r.version+"_sbom.cdx.json"))
	if err != nil {
		t.Fatal(err)
	}
	var bom struct {
		BOMFormat    string `json:"bomFormat"`
		SerialNumber string `json:"serialNumber"`
		Metadata     struct {
			Timestamp string `json:"timestamp"`
			Component struct {
				Name    string `json:"name"`
				Version string `json:"version"`
			} `json:"component"`
		} `json:"metadata"`
		Components []struct {
			Name    string `json:"name"`
			Version string `json:"version"`
			Purl    string `json:"purl"`
		} `json:"components"`
	}
	if err := json.Unmarshal(raw, &bom); err != nil {
		t.Fatalf("the SBOM is not JSON: %v", err)
	}
	if bom.BOMFormat != "CycloneDX" {
		t.Errorf("bomFormat %q, want CycloneDX", bom.BOMFormat)
	}
	if bom.SerialNumber != "" || bom.Metadata.Timestamp != "" {
		t.Errorf("serialNumber %q, timestamp %q: both vary run to run, want neither", bom.SerialNumber, bom.Metadata.Timestamp)
	}
	if c := bom.Metadata.Component; c.Name != "github.com/tetherdev/tether" {
		t.Errorf("the SBOM describes %q, want github.com/tetherdev/tether", c.Name)
	}
	listed := map[string]string{}
	for _, c := range bom.Components {
		listed[c.Name] = c.Version
		if strings.Contains(c.Purl, "goos=") || strings.Contains(c.Purl, "goarch=") {
			t.Errorf("%s: purl %q names a platform; the module graph is every platform's", c.Name, c.Purl)
		}
	}
	// Every module linked into a release binary is in the SBOM, at the
	// version the binary was built with.
	for _, p := range platforms {
		bi, err := buildinfo.ReadFile(extractTether(t, r.archive(r.a, p)))
		if err != nil {
			t.Fatalf("%s: %v", p, err)
		}
		for _, d := range bi.Deps {
			if d.Replace != nil {
				d = d.Replace
			}
			if v, ok := listed[d.Path]; !ok || v != d.Version {
				t.Errorf("%s links %s %s; the SBOM lists %q", p, d.Path, d.Version, v)
			}
		}
	}
}

// readArchive returns the headers of a .tar.gz in order, and the content of
// the entry named want ("" for none).
func readArchive(t *testing.T, path, want string) ([]*tar.Header, []byte) {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	zr, err := gzip.NewReader(f)
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	if zr.Name != "" || !zr.ModTime.IsZero() {
		t.Errorf("%s: the gzip header holds a name %q and time %s; want neither (gzip -n)", path, zr.Name, zr.ModTime)
	}
	var hdrs []*tar.Header
	var content []byte
	tr := tar.NewReader(zr)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		hdrs = append(hdrs, h)
		if want != "" && h.Name == want {
			if content, err = io.ReadAll(tr); err != nil {
				t.Fatalf("%s: %v", path, err)
			}
		}
	}
	return hdrs, content
}

// extractTether writes the tether binary of an archive into the test's
// temporary directory and returns its path.
func extractTether(t *testing.T, archive string) string {
	t.Helper()
	dir := strings.TrimSuffix(filepath.Base(archive), ".tar.gz")
	_, b := readArchive(t, archive, dir+"/tether")
	if b == nil {
		t.Fatalf("%s holds no %s/tether", archive, dir)
	}
	bin := filepath.Join(t.TempDir(), "tether")
	if err := os.WriteFile(bin, b, 0o755); err != nil {
		t.Fatal(err)
	}
	return bin
}

func names(t *testing.T, dir string) []string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range entries {
		out = append(out, e.Name())
	}
	return out
}

// output runs cmd and returns its stdout, trimmed; the error carries its
// stderr.
func output(cmd *exec.Cmd) (string, error) {
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("%s: %v: %s", strings.Join(cmd.Args, " "), err, stderr.Bytes())
	}
	return strings.TrimSpace(string(out)), nil
}

// withoutEnv is this process's environment less the named variables, so a
// developer's VERSION or PLATFORMS cannot change what the test builds.
func withoutEnv(names ...string) []string {
	var env []string
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		if !slices.Contains(names, k) {
			env = append(env, kv)
		}
	}
	return env
}
