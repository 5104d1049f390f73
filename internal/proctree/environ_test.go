//go:build !windows

package proctree

import (
	"encoding/binary"
	"testing"
)

// procargs builds a kern.procargs2 answer as macOS lays it out.
func procargs(path string, args, env []string) []byte {
	b := binary.NativeEndian.AppendUint32(nil, uint32(len(args)))
	b = append(b, path...)
	b = append(b, 0, 0, 0, 0) // the path's NUL and padding
	for _, a := range append(args, env...) {
		b = append(append(b, a...), 0)
	}
	return b
}

func TestProcargsEnvFindsTheEnvironmentAfterTheArguments(t *testing.T) {
	b := procargs("/bin/sleep", []string{"sleep", "MARK=not-the-env"}, []string{"HOME=/x", "MARK=a/123.4/b"})
	env, ok := procargsEnv(b)
	if !ok {
		t.Fatal("procargsEnv failed on a well-formed answer")
	}
	if !environHas(env, "MARK", "123.4") {
		t.Fatalf("environment %q: MARK with 123.4 not found", env)
	}
	if environHas(env, "MARK", "not-the-env") {
		t.Fatal("an argument was taken for the environment")
	}
	for _, bad := range [][]byte{nil, {1, 0}, procargs("/bin/sleep", nil, nil)[:6]} {
		if env, ok := procargsEnv(bad); ok && environHas(env, "MARK", "") {
			t.Fatalf("procargsEnv(%q) found a MARK", bad)
		}
	}
}

func FuzzProcargsEnv(f *testing.F) {
	f.Add(procargs("/bin/sh", []string{"sh", "-c", "x"}, []string{"A=1"}))
	f.Add([]byte{0xff, 0xff, 0xff, 0x7f, '/', 0})
	f.Fuzz(func(t *testing.T, b []byte) {
		if env, ok := procargsEnv(b); ok && len(env) > len(b) {
			t.Fatalf("environment longer than the answer")
		}
	})
}
