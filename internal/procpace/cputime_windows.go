package procpace

import (
	"syscall"
	"time"
)

// cpuTime is the process's CPU time so far, user and system, all threads
// (GetProcessTimes, Windows' getrusage).
func cpuTime() time.Duration {
	h, err := syscall.GetCurrentProcess()
	if err != nil {
		return 0
	}
	var created, exited, kernel, user syscall.Filetime
	if syscall.GetProcessTimes(h, &created, &exited, &kernel, &user) != nil {
		return 0
	}
	return time.Duration(filetime(kernel) + filetime(user))
}

// filetime is a FILETIME duration (100 ns units) in nanoseconds; a
// Filetime's own Nanoseconds counts from 1601, which suits only instants.
func filetime(f syscall.Filetime) int64 {
	return (int64(f.HighDateTime)<<32 | int64(f.LowDateTime)) * 100
}
