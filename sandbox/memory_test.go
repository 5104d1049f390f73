//go:build !windows

package sandbox_test

import (
	"math/big"
	"regexp"
	"strings"
	"testing"

	"github.com/tetherdev/tether/sandbox"
)

func TestContainerMemoryBytesTakesTheRangeAndRefusesTheRest(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want int64 // 0: refused
	}{
		{"512m", 512 << 20},
		{"2G", 2 << 30},
		{"6m", 6 << 20},
		{"1024g", 1 << 40},
		{"6291456", 6 << 20},
		{"7000k", 7000 << 10},
		{"5m", 0},
		{"1025g", 0},
		{"17179869185g", 0}, // wraps to 1g when shifted first
		{"9999999999999g", 0},
		{"9999999999999", 0},
		{"1t", 0},
		{"-1m", 0},
	} {
		o := sandbox.ContainerOptions{Memory: tc.in}
		got, err := o.MemoryBytes()
		if tc.want == 0 {
			if err == nil || !strings.Contains(err.Error(), "container.memory") {
				t.Errorf("%q: %d, %v; want refused naming container.memory", tc.in, got, err)
			}
			continue
		}
		if err != nil || got != tc.want {
			t.Errorf("%q: %d, %v; want %d", tc.in, got, err, tc.want)
		}
	}
}

var memoryForm = regexp.MustCompile(`^([0-9]+)([kKmMgG]?)[bB]?$`)

// FuzzContainerMemoryBytes holds MemoryBytes to exact arithmetic: a value
// it takes is the number times its unit, between 6m and 1024g; one in that
// range it refuses is not of the form.
func FuzzContainerMemoryBytes(f *testing.F) {
	for _, s := range []string{"512m", "1024g", "17179869185g", "6m", "1k", "0", "99999999999999"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		o := sandbox.ContainerOptions{Memory: s}
		got, err := o.MemoryBytes()
		var exact *big.Int
		if m := memoryForm.FindStringSubmatch(s); m != nil && len(m[1]) <= 13 {
			exact, _ = new(big.Int).SetString(m[1], 10)
			exact.Lsh(exact, map[string]uint{"": 0, "k": 10, "m": 20, "g": 30}[strings.ToLower(m[2])])
		}
		inRange := exact != nil && exact.Cmp(big.NewInt(6<<20)) >= 0 && exact.Cmp(big.NewInt(1<<40)) <= 0
		switch {
		case s == "":
			if err != nil || got != 0 {
				t.Fatalf("empty: %d, %v; want 0", got, err)
			}
		case err == nil && (!inRange || exact.Int64() != got):
			t.Fatalf("%q: took %d; exactly it is %v (6m to 1024g)", s, got, exact)
		case err != nil && inRange:
			t.Fatalf("%q: refused (%v), yet it is %v, in range", s, err, exact)
		}
	})
}
