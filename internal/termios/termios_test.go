//go:build !windows

package termios_test

import (
	"os"
	"testing"

	"github.com/creack/pty"
	"golang.org/x/sys/unix"

	"github.com/tetherdev/tether/internal/leakcheck"
	"github.com/tetherdev/tether/internal/termios"
)

func TestMain(m *testing.M) { os.Exit(leakcheck.Main(m)) }

// A mode set on a pty's slave through Set is what Get reads back, from
// the slave and from the master.
func TestSetThenGetRoundTripsOnAPty(t *testing.T) {
	ptmx, tty, err := pty.Open()
	if err != nil {
		t.Fatal(err)
	}
	defer ptmx.Close()
	defer tty.Close()
	fd := int(tty.Fd())
	orig, err := termios.Get(fd)
	if err != nil {
		t.Fatalf("Get: %v", err)
	}
	want := *orig
	want.Lflag ^= unix.ECHO | unix.ICANON
	want.Oflag ^= unix.ONLCR
	if err := termios.Set(fd, &want); err != nil {
		t.Fatalf("Set: %v", err)
	}
	for name, f := range map[string]*os.File{"slave": tty, "master": ptmx} {
		got, err := termios.Get(int(f.Fd()))
		if err != nil {
			t.Fatalf("Get on the %s: %v", name, err)
		}
		if got.Lflag != want.Lflag || got.Oflag != want.Oflag || got.Iflag != want.Iflag {
			t.Fatalf("the %s reads lflag %#x oflag %#x iflag %#x, want %#x %#x %#x", name,
				got.Lflag, got.Oflag, got.Iflag, want.Lflag, want.Oflag, want.Iflag)
		}
	}
}

// Get on a descriptor that is no terminal fails instead of inventing one.
func TestGetOnAFileFails(t *testing.T) {
	f, err := os.Open(os.DevNull)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := termios.Get(int(f.Fd())); err == nil {
		t.Fatal("Get on /dev/null succeeded")
	}
}
