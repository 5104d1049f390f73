// Package tuningtest runs a package's tests again with a hand-tuned piece
// off (internal/tuning), so that the plain way behind a piece, which other
// platforms use (docs/platforms.md), is tested here too.
package tuningtest

import (
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/tetherdev/tether/internal/tuning"
)

// RerunWithout runs the tests named in the calling test binary again, in
// a child whose TETHER_TUNING turns piece off, and fails t unless each
// passed there. In that child (where piece is off) it skips t instead.
func RerunWithout(t *testing.T, piece tuning.Piece, tests ...string) {
	t.Helper()
	if !tuning.On(piece) {
		t.Skipf("this is the run with %s off", piece)
	}
	cmd := exec.Command(os.Args[0], "-test.run", "^("+strings.Join(tests, "|")+")$", "-test.v", "-test.count=1")
	cmd.Env = append(os.Environ(), tuning.Env+"=no-"+string(piece))
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("the run with %s off failed: %v\n%s", piece, err, out)
	}
	for _, name := range tests {
		if !strings.Contains(string(out), "--- PASS: "+name+" ") {
			t.Errorf("the run with %s off did not pass %s:\n%s", piece, name, out)
		}
	}
}
