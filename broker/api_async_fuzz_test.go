package broker

import (
	"math"
	"net/http"
	"strconv"
	"testing"
	"time"
)

// FuzzAsyncRequestParsers feeds ?wait= and the Prefer header, the async
// API's outside input besides the body (which the protocol package's
// decoder reads and fuzzes): parseWait accepts exactly the numbers from 0 to
// 60 and never returns more than maxWait; prefersAsync never panics.
func FuzzAsyncRequestParsers(f *testing.F) {
	for _, s := range []string{"", "0", "60", "60.0001", "-0", "0.25", "1e1", "NaN", "Inf", "+5", " 5", "0x10", "soon", "respond-async",
		"wait=10, respond-async", "RESPOND-ASYNC;x=1", "respond-asyncx", ",,,", "respond-async\x00"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		d, err := parseWait(s, true)
		x, perr := strconv.ParseFloat(s, 64)
		ok := perr == nil && !math.IsNaN(x) && x >= 0 && x <= maxWait.Seconds()
		if (err == nil) != ok {
			t.Fatalf("parseWait(%q) = %v, %v; ParseFloat = %v, %v", s, d, err, x, perr)
		}
		if err == nil && (d < 0 || d > maxWait) {
			t.Fatalf("parseWait(%q) = %v, outside [0, %v]", s, d, maxWait)
		}
		if d, err := parseWait(s, false); d != 0 || err != nil {
			t.Fatalf("no wait given: %v, %v", d, err)
		}
		_ = prefersAsync(http.Header{"Prefer": {s}})
	})
}

func TestPrefersAsyncReadsTheToken(t *testing.T) {
	for v, want := range map[string]bool{"respond-async": true, "wait=10, respond-async": true, "Respond-Async; x=1": true,
		"respond-asyncx": false, "return=minimal": false, "": false} {
		if got := prefersAsync(http.Header{"Prefer": {v}}); got != want {
			t.Errorf("Prefer: %q -> %v, want %v", v, got, want)
		}
	}
	if d, err := parseWait("0.5", true); err != nil || d != 500*time.Millisecond {
		t.Errorf("wait=0.5 -> %v, %v", d, err)
	}
}
