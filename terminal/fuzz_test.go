//go:build !windows

package terminal_test

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/tetherdev/tether/protocol"
	"github.com/tetherdev/tether/terminal"
)

func TestParseSignalAcceptsNamesInAnyForm(t *testing.T) {
	for name, want := range map[string]unix.Signal{
		"SIGINT": unix.SIGINT, "INT": unix.SIGINT, "sigint": unix.SIGINT, " term ": unix.SIGTERM,
		"SIGKILL": unix.SIGKILL, "hup": unix.SIGHUP, "SIGUSR1": unix.SIGUSR1, "SIGCONT": unix.SIGCONT,
	} {
		if got, err := terminal.ParseSignal(name); err != nil || got != want {
			t.Errorf("ParseSignal(%q) = %v, %v; want %v", name, got, err, want)
		}
	}
	for _, name := range []string{"", "SIG", "SIGBOGUS", "9", "SIGINT2", "-INT"} {
		_, err := terminal.ParseSignal(name)
		wantCode(t, err, protocol.CodeInvalidPayload)
	}
}

func FuzzParseSignal(f *testing.F) {
	for _, s := range []string{"SIGINT", "int", "SIGTERM", "KILL", "", "SIG", "9", "sig\x00int", "ſigint"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, name string) {
		sig, err := terminal.ParseSignal(name)
		if err != nil {
			var pe *protocol.Error
			if !errors.As(err, &pe) || pe.Code != protocol.CodeInvalidPayload {
				t.Fatalf("error %v is not invalid_payload", err)
			}
			return
		}
		if sig < 1 || sig > 31 {
			t.Fatalf("ParseSignal(%q) = %d", name, sig)
		}
		if again, err := terminal.ParseSignal(unix.SignalName(sig)); err != nil || again != sig {
			t.Fatalf("round trip of %v: %v %v", sig, again, err)
		}
	})
}

func TestSentinelScannerFindsMarkersSplitAnywhere(t *testing.T) {
	in := []byte("out\x1b]633;D;abc123;0\x07tail\x1b]633;D;;130\x07\x1b]633;D;bad nonce;0\x07end")
	for k := range len(in) + 1 {
		data, markers, raw := terminal.ScanSentinels(in[:k], in[k:])
		if string(data) != "outtail\x1b]633;D;bad nonce;0\x07end" || !slices.Equal(markers, []string{"abc123;0", ";130"}) || !bytes.Equal(raw, in) {
			t.Fatalf("split at %d: data %q markers %q", k, data, markers)
		}
	}
}

func FuzzSentinelScanner(f *testing.F) {
	for _, s := range []string{
		"plain output\n",
		"\x1b]633;D;0123abcd;0\x07",
		"before\x1b]633;D;n;255\x07after",
		"\x1b]633;D;;0\x07",
		"\x1b]633;D;n;256\x07",
		"\x1b]633;D;n;\x07",
		"\x1b]633;D;\x1b]633;D;n;0\x07",
		"\x1b]633;D;" + strings.Repeat("a", 80) + ";0\x07",
		"\x1b[31mred\x1b[0m\x1b]0;title\x07",
		"\x1b]633;D;abc",
	} {
		f.Add([]byte(s), uint(len(s)/2))
	}
	f.Fuzz(func(t *testing.T, in []byte, split uint) {
		data1, markers1, raw1 := terminal.ScanSentinels(in)
		k := int(split % uint(len(in)+1))
		data2, markers2, raw2 := terminal.ScanSentinels(in[:k], in[k:])
		if !bytes.Equal(raw1, in) || !bytes.Equal(raw2, in) {
			t.Fatalf("bytes lost or reordered: %q / %q from %q", raw1, raw2, in)
		}
		if !bytes.Equal(data1, data2) || !slices.Equal(markers1, markers2) {
			t.Fatalf("splitting at %d changed the result: %q %q vs %q %q", k, data1, markers1, data2, markers2)
		}
		for _, m := range markers1 {
			if len(m) > 64+4 {
				t.Fatalf("marker %q too long", m)
			}
		}
	})
}

// fuzzRoot builds a root with a subdirectory, a file and symlinks in and
// out.
func fuzzRoot(f *testing.F) string {
	root, err := filepath.EvalSymlinks(f.TempDir())
	if err != nil {
		f.Fatal(err)
	}
	for _, err := range []error{
		os.MkdirAll(filepath.Join(root, "a", "b"), 0o755),
		os.WriteFile(filepath.Join(root, "file"), nil, 0o644),
		os.Symlink("/etc", filepath.Join(root, "out")),
		os.Symlink("a/b", filepath.Join(root, "in")),
		os.Symlink("..", filepath.Join(root, "a", "up")),
	} {
		if err != nil {
			f.Fatal(err)
		}
	}
	return root
}

func FuzzResolveCwd(f *testing.F) {
	root := fuzzRoot(f)
	for _, s := range []string{".", "a", "a/b", "in", "out", "file", "..", "a/../..", "/", root, root + "/a", root + "/../x", "a/up/a", "a/up/..", "nope", "a//b/./", "\x00"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, cwd string) {
		got, err := terminal.ResolveCwd(root, cwd)
		if err != nil {
			var pe *protocol.Error
			if !errors.As(err, &pe) || pe.Code != protocol.CodeInvalidPayload {
				t.Fatalf("error %v is not invalid_payload", err)
			}
			return
		}
		if got != root && !strings.HasPrefix(got, root+"/") {
			t.Fatalf("ResolveCwd(%q) = %q, outside %q", cwd, got, root)
		}
		if real, err := filepath.EvalSymlinks(got); err != nil || real != got {
			t.Fatalf("ResolveCwd(%q) = %q is not a resolved path (%q, %v)", cwd, got, real, err)
		}
		if fi, err := os.Stat(got); err != nil || !fi.IsDir() {
			t.Fatalf("ResolveCwd(%q) = %q is not a directory", cwd, got)
		}
	})
}

func FuzzCapOutput(f *testing.F) {
	f.Add([]byte("short"), uint16(100), uint(2))
	f.Add([]byte(strings.Repeat("héllo wörld ", 50)), uint16(64), uint(7))
	f.Add([]byte(strings.Repeat("€", 100)), uint16(11), uint(0))
	f.Fuzz(func(t *testing.T, in []byte, limit16 uint16, split uint) {
		limit := int(limit16%4096) + 2
		k := int(split % uint(len(in)+1))
		got, truncated := terminal.CapOutput(limit, in[:k], in[k:])
		if len(in) <= limit {
			if truncated || got != string(in) {
				t.Fatalf("output within the cap changed: %q -> %q %v", in, got, truncated)
			}
			return
		}
		if !truncated {
			t.Fatal("long output not marked truncated")
		}
		head, tail, ok := strings.Cut(got, "\n[... ")
		if !ok {
			t.Fatalf("no omission marker in %q", got)
		}
		_, tail, ok = strings.Cut(tail, " bytes omitted ...]\n")
		if !ok || !bytes.HasPrefix(in, []byte(head)) || !bytes.HasSuffix(in, []byte(tail)) {
			t.Fatalf("%q is not a head and tail of %q", got, in)
		}
		if len(head)+len(tail) > limit {
			t.Fatalf("kept %d bytes, cap %d", len(head)+len(tail), limit)
		}
		if len(head)+len(tail) < limit-2*4 {
			t.Fatalf("kept only %d bytes of cap %d", len(head)+len(tail), limit)
		}
	})
}

func FuzzRing(f *testing.F) {
	f.Add([]byte("0123456789"), uint16(4), uint16(0), uint16(100), uint(3))
	f.Add([]byte("0123456789"), uint16(4), uint16(7), uint16(2), uint(9))
	f.Add([]byte("abc"), uint16(10), uint16(1), uint16(1), uint(0))
	f.Fuzz(func(t *testing.T, in []byte, size16, from16, limit16 uint16, split uint) {
		size := int(size16%512) + 1
		from := int64(from16) % int64(len(in)+1)
		limit := int(limit16 % 1024)
		k := int(split % uint(len(in)+1))
		got, start, total := terminal.RingRead(size, from, limit, in[:k], in[k:])
		if total != int64(len(in)) {
			t.Fatalf("total %d, wrote %d", total, len(in))
		}
		wantStart := max(from, int64(len(in)-size))
		wantEnd := min(int64(len(in)), wantStart+int64(limit))
		if start != wantStart || !bytes.Equal(got, in[wantStart:wantEnd]) {
			t.Fatalf("ReadAt(%d, %d) on ring %d = %q at %d; want %q at %d", from, limit, size, got, start, in[wantStart:wantEnd], wantStart)
		}
	})
}
