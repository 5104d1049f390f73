//go:build !windows

package dap_test

import (
	"fmt"
	"os"
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	runFakeJSDebug()
	becomeSubreaper()
	code := m.Run()
	if code == 0 {
		if err := goleak.Find(); err != nil {
			fmt.Fprintln(os.Stderr, "goroutine leak:", err)
			code = 1
		}
		if left := descendants(); len(left) > 0 {
			fmt.Fprintln(os.Stderr, "processes left behind:", left)
			code = 1
		}
	}
	os.Exit(code)
}
