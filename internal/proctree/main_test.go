//go:build !windows

package proctree_test

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"syscall"
	"testing"

	"github.com/tetherdev/tether/internal/leakcheck"
	"github.com/tetherdev/tether/internal/proctree"
)

// ownerEnv makes the test binary a watchdog's owner (ownerMain) instead of
// running tests: the process a test kills with -9.
const ownerEnv = "PROCTREE_TEST_OWNER"

func TestMain(m *testing.M) {
	if os.Getenv(ownerEnv) != "" {
		ownerMain()
	}
	os.Exit(leakcheck.Main(m))
}

// ownerMain starts a watchdog and a `sleep` in a process group of its own
// that the watchdog guards, prints the sleep's pid, and waits to be killed.
//
// With ownerEnv=start it starts the sleep as macOS does, through Start
// without a parent-death signal (so only the package's own watchdog can
// end it); otherwise with a watchdog of its own, through Watch.
func ownerMain() {
	cmd := exec.Command("sleep", "60")
	if os.Getenv(ownerEnv) == "reaped" {
		// The leader exits at once, leaving the sleep in its group, and
		// is reaped: the group is not empty, so it stays guarded.
		// The pid is printed only after Reaped, so that the test's kill
		// follows it.
		proctree.WithoutDeathSignal()
		cmd = exec.Command("sh", "-c", "sleep 60 & echo $!")
		r, w, err := os.Pipe()
		if err != nil {
			fmt.Println("error", err)
			os.Exit(1)
		}
		cmd.Stdout = w // a file: Wait does not wait for the sleep to close it
		if err := proctree.Start(cmd); err != nil {
			fmt.Println("error", err)
			os.Exit(1)
		}
		_ = w.Close()
		_ = cmd.Wait()
		proctree.Reaped(cmd.Process.Pid)
		line, _ := bufio.NewReader(r).ReadString('\n')
		fmt.Print(line)
		select {}
	}
	if os.Getenv(ownerEnv) == "start" {
		proctree.WithoutDeathSignal()
		if err := proctree.Start(cmd); err != nil {
			fmt.Println("error", err)
			os.Exit(1)
		}
		if attr := cmd.SysProcAttr; proctree.DeathSignalOf(attr) != 0 || !attr.Setpgid {
			fmt.Println("error: Start set", attr)
			os.Exit(1)
		}
	} else {
		d, err := proctree.NewWatchdog()
		if err != nil {
			fmt.Println("error", err)
			os.Exit(1)
		}
		cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
		if err := cmd.Start(); err != nil {
			fmt.Println("error", err)
			os.Exit(1)
		}
		d.Watch(cmd.Process.Pid)
	}
	fmt.Println(cmd.Process.Pid)
	select {}
}
