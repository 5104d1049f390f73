//go:build unix

package certfile

import (
	"os"
	"syscall"
)

// inode is fi's inode number: a file replaced by another (a renamed-over
// certificate) is a change even with the same time and size.
func inode(fi os.FileInfo) uint64 {
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		return st.Ino
	}
	return 0
}
