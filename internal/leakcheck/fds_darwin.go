package leakcheck

import (
	"os"
	"strconv"

	"golang.org/x/sys/unix"
)

// runtimeFD reports whether a descriptor's target is one the Go runtime
// opens for itself and keeps: on macOS the netpoller's kqueue, opened
// once on the first network or timer use.
func runtimeFD(target string) bool { return target == "kqueue" }

// openFDs returns this process's open descriptors as "fd target" pairs.
// macOS has no /proc: the descriptors are listed in /dev/fd, and each
// target is named by fdTarget.
func openFDs() map[string]bool {
	dir, err := os.Open("/dev/fd")
	if err != nil {
		return nil
	}
	defer dir.Close()
	names, _ := dir.Readdirnames(-1)
	self := int(dir.Fd())
	out := make(map[string]bool, len(names))
	for _, name := range names {
		fd, err := strconv.Atoi(name)
		if err != nil || fd == self {
			continue
		}
		target, ok := fdTarget(fd)
		if !ok {
			continue // closed meanwhile
		}
		out[name+" "+target] = true
	}
	return out
}

// fdTarget names what fd refers to: its kind, and for a file or a
// directory its device and inode (the path needs fcntl F_GETPATH, whose
// buffer argument golang.org/x/sys/unix has no safe wrapper for).
func fdTarget(fd int) (string, bool) {
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return "", false
	}
	inode := strconv.FormatInt(int64(st.Dev), 10) + ":" + strconv.FormatUint(st.Ino, 10)
	switch st.Mode & unix.S_IFMT {
	case unix.S_IFREG:
		return "file " + inode, true
	case unix.S_IFDIR:
		return "directory " + inode, true
	case unix.S_IFSOCK:
		return "socket " + inode, true
	case unix.S_IFIFO:
		return "pipe " + inode, true
	case unix.S_IFCHR:
		return "device " + inode, true
	case 0:
		return "kqueue", true // a kqueue has no file type
	}
	return "mode " + strconv.FormatUint(uint64(st.Mode&unix.S_IFMT), 8) + " " + inode, true
}
