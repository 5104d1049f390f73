//go:build unix

package runfile

import (
	"os"
	"syscall"
)

// OpenToOthers reports whether users other than the owner may read fi
// (or enter it, a directory): any group or other permission bit.
func OpenToOthers(fi os.FileInfo) bool { return fi.Mode().Perm()&0o077 != 0 }

// ownedBySelf reports whether st belongs to this process's user.
func ownedBySelf(st os.FileInfo) bool {
	s, ok := st.Sys().(*syscall.Stat_t)
	return ok && int(s.Uid) == os.Getuid()
}
