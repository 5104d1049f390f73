//go:build !windows

package dap_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/tetherdev/tether/dap"
)

// fakeXcode lays out a fake developer tree in a temporary directory: the
// command line tools' folder, an Xcode developer folder, and xcode-select
// and xcrun scripts; each script records that it ran. It returns the
// folders and programs, and a function that says whether xcrun ran.
type fakeXcode struct {
	clt, dev, xcodeSelect, xcrun, ranXcrun string
}

func newFakeXcode(t *testing.T, selectWorks bool, xcrunAnswer string) fakeXcode {
	t.Helper()
	d := t.TempDir()
	f := fakeXcode{
		clt: filepath.Join(d, "CommandLineTools"), dev: filepath.Join(d, "Xcode.app/Contents/Developer"),
		xcodeSelect: filepath.Join(d, "xcode-select"), xcrun: filepath.Join(d, "xcrun"),
		ranXcrun: filepath.Join(d, "ran-xcrun"),
	}
	sel := "#!/bin/sh\necho " + f.dev + "\n"
	if !selectWorks {
		sel = "#!/bin/sh\necho 'xcode-select: error: unable to get active developer directory' >&2\nexit 2\n"
	}
	writeExec(t, f.xcodeSelect, sel)
	writeExec(t, f.xcrun, "#!/bin/sh\ntouch "+f.ranXcrun+"\necho "+xcrunAnswer+"\n")
	return f
}

func writeExec(t *testing.T, path, content string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), 0o755); err != nil {
		t.Fatal(err)
	}
}

func (f fakeXcode) find() string {
	return dap.NewEnv("/usr/bin:/bin", os.Environ()).XcodeLLDBDAP(f.clt, f.xcodeSelect, f.xcrun)
}

// The macOS search order for lldb-dap, run over a fake tree: the command
// line tools first, then Xcode's folder and its default toolchain, then
// xcrun; and no xcrun when xcode-select names no folder.
func TestXcodeLLDBDAPSearchOrder(t *testing.T) {
	t.Run("command line tools", func(t *testing.T) {
		f := newFakeXcode(t, true, "")
		want := filepath.Join(f.clt, "usr/bin/lldb-dap")
		writeExec(t, want, "")
		writeExec(t, filepath.Join(f.dev, "usr/bin/lldb-dap"), "")
		if got := f.find(); got != want {
			t.Fatalf("found %q, want the command line tools' %q", got, want)
		}
	})
	t.Run("xcode default toolchain", func(t *testing.T) {
		f := newFakeXcode(t, true, "")
		want := filepath.Join(f.dev, "Toolchains/XcodeDefault.xctoolchain/usr/bin/lldb-dap")
		writeExec(t, want, "")
		if got := f.find(); got != want {
			t.Fatalf("found %q, want Xcode's %q", got, want)
		}
		if _, err := os.Stat(f.ranXcrun); err == nil {
			t.Fatal("xcrun ran although lldb-dap was found without it")
		}
	})
	t.Run("xcrun", func(t *testing.T) {
		d := t.TempDir()
		want := filepath.Join(d, "elsewhere/lldb-dap")
		writeExec(t, want, "")
		f := newFakeXcode(t, true, want)
		if got := f.find(); got != want {
			t.Fatalf("found %q, want xcrun's answer %q", got, want)
		}
	})
	t.Run("no developer folder", func(t *testing.T) {
		f := newFakeXcode(t, false, "/bin/sh")
		if got := f.find(); got != "" {
			t.Fatalf("found %q with no tools installed, want none", got)
		}
		if _, err := os.Stat(f.ranXcrun); err == nil {
			t.Fatal("xcrun ran although xcode-select named no folder (the shim would offer an install)")
		}
	})
}
