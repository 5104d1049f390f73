package e2e_test

import "syscall"

// pipeCloexec makes a pipe whose two descriptors (p[0] to read, p[1] to
// write) no child inherits unless given them.
func pipeCloexec(p []int) error { return syscall.Pipe2(p, syscall.O_CLOEXEC) }
