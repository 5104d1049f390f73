package proctree

import (
	"os"
	"strconv"
	"strings"
)

// Cwd returns the current directory of process pid: "" when it is gone,
// not ours to read, or its directory was deleted.
func Cwd(pid int) string {
	p, err := os.Readlink("/proc/" + strconv.Itoa(pid) + "/cwd")
	if err != nil || strings.HasSuffix(p, " (deleted)") {
		return ""
	}
	return p
}
