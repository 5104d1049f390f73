//go:build !windows

package proctree

import (
	"bytes"
	"encoding/binary"
)

// environHas reports whether env, NUL-separated "key=value" strings as
// the kernel keeps them, holds key with a value that contains part.
func environHas(env []byte, key, part string) bool {
	prefix := []byte(key + "=")
	for kv := range bytes.SplitSeq(env, []byte{0}) {
		if v, ok := bytes.CutPrefix(kv, prefix); ok && bytes.Contains(v, []byte(part)) {
			return true
		}
	}
	return false
}

// procargsEnv returns the environment block of a kern.procargs2 answer:
// argc (a native int32), the executable's path, NUL padding, argc
// NUL-terminated arguments, then the environment's NUL-terminated strings.
func procargsEnv(b []byte) ([]byte, bool) {
	if len(b) < 4 {
		return nil, false
	}
	argc := int(int32(binary.NativeEndian.Uint32(b)))
	b = b[4:]
	i := bytes.IndexByte(b, 0) // the executable's path
	if i < 0 {
		return nil, false
	}
	b = bytes.TrimLeft(b[i:], "\x00")
	for ; argc > 0; argc-- {
		i := bytes.IndexByte(b, 0)
		if i < 0 {
			return nil, false
		}
		b = b[i+1:]
	}
	return b, true
}
