package tuning_test

import (
	"strings"
	"testing"

	"github.com/tetherdev/tether/internal/tuning"
)

func TestParseTurnsOffWhatItNames(t *testing.T) {
	for _, tc := range []struct {
		v    string
		want []tuning.Piece
	}{
		{"", nil},
		{"on", nil},
		{"off", tuning.Pieces},
		{"no-poller", []tuning.Piece{tuning.Poller}},
		{" no-callserver , no-fastjson ", []tuning.Piece{tuning.CallServer, tuning.FastJSON}},
	} {
		off, err := tuning.Parse(tc.v)
		if err != nil {
			t.Fatalf("Parse(%q): %v", tc.v, err)
		}
		if len(off) != len(tc.want) {
			t.Fatalf("Parse(%q) = %v, want %v off", tc.v, off, tc.want)
		}
		for _, p := range tc.want {
			if !off[p] {
				t.Fatalf("Parse(%q) left %s on", tc.v, p)
			}
		}
	}
}

func TestParseRefusesAPieceItDoesNotKnow(t *testing.T) {
	for _, v := range []string{"poller", "no-pollr", "no-", "off,no-poller", "yes"} {
		if _, err := tuning.Parse(v); err == nil || !strings.Contains(err.Error(), "TETHER_TUNING") {
			t.Fatalf("Parse(%q) = %v, want an error naming TETHER_TUNING", v, err)
		}
	}
}
