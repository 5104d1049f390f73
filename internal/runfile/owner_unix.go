//go:build unix

package runfile

import (
	"os"
	"syscall"
)

// ownedBySelf reports whether st belongs to this process's user.
func ownedBySelf(st os.FileInfo) bool {
	s, ok := st.Sys().(*syscall.Stat_t)
	return ok && int(s.Uid) == os.Getuid()
}
