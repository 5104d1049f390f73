package leakcheck

import (
	"os"
	"strconv"
)

// runtimeFD reports whether a descriptor's target is one the Go runtime
// opens for itself and keeps (the netpoller's epoll and its wakeup
// eventfd or pipe are opened once, on the first network or timer use).
func runtimeFD(target string) bool {
	return target == "anon_inode:[eventpoll]" || target == "anon_inode:[eventfd]"
}

// openFDs returns this process's open descriptors as "fd target" pairs.
func openFDs() map[string]bool {
	dir, err := os.Open("/proc/self/fd")
	if err != nil {
		return nil
	}
	defer dir.Close()
	names, _ := dir.Readdirnames(-1)
	self := strconv.Itoa(int(dir.Fd()))
	out := make(map[string]bool, len(names))
	for _, name := range names {
		if name == self {
			continue
		}
		target, err := os.Readlink("/proc/self/fd/" + name)
		if err != nil {
			continue // closed meanwhile
		}
		out[name+" "+target] = true
	}
	return out
}
