//go:build unix && !linux

package e2e_test

import "syscall"

// pipeCloexec makes a pipe whose two descriptors (p[0] to read, p[1] to
// write) no child inherits unless given them. Without pipe2 the flag is set
// after pipe(2), under ForkLock so that no fork sees the descriptors
// between the two, as the os package does.
func pipeCloexec(p []int) error {
	syscall.ForkLock.RLock()
	defer syscall.ForkLock.RUnlock()
	if err := syscall.Pipe(p); err != nil {
		return err
	}
	syscall.CloseOnExec(p[0])
	syscall.CloseOnExec(p[1])
	return nil
}
