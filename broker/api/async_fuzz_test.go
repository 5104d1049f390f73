package api

import (
	"math"
	"strconv"
	"strings"
	"testing"
	"time"
)

// FuzzAsyncRequestParsers feeds ?wait= and the Prefer header, the async
// API's outside input besides the body (which the protocol package's
// decoder reads and fuzzes): parseWait accepts exactly the numbers from 0 to
// 60 and never returns more than maxWait; parsePrefer never panics, and a
// wait it accepts is one parseWait accepts.
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
		p, err := parsePrefer([]string{s})
		if err == nil && (p.wait < 0 || p.wait > maxWait) {
			t.Fatalf("parsePrefer(%q) = %+v, wait outside [0, %v]", s, p, maxWait)
		}
		p, err = parsePrefer([]string{"respond-async, wait=" + s})
		if _, werr := parseWait(strings.Trim(strings.TrimSpace(s), `"`), true); err == nil && werr != nil && !strings.ContainsAny(s, ",;") {
			t.Fatalf("Prefer wait=%q accepted as %+v, but parseWait refuses it: %v", s, p, werr)
		}
	})
}

func TestParsePreferReadsRespondAsyncAndWait(t *testing.T) {
	for v, want := range map[string]preferences{
		"respond-async":               {async: true},
		"wait=10, respond-async":      {async: true, wait: 10 * time.Second, waitGiven: true},
		"Respond-Async; x=1":          {async: true},
		"respond-async, wait=\"2.5\"": {async: true, wait: 2500 * time.Millisecond, waitGiven: true},
		"respond-async, WAIT = 0":     {async: true, waitGiven: true},
		"respond-asyncx":              {},
		"return=minimal":              {},
		"":                            {},
	} {
		if got, err := parsePrefer([]string{v}); err != nil || got != want {
			t.Errorf("Prefer: %q -> %+v, %v; want %+v", v, got, err, want)
		}
	}
	for _, v := range []string{"wait=61", "wait=-1", "wait", "wait=soon", "respond-async, wait=NaN"} {
		got, err := parsePrefer([]string{v})
		if err == nil || !strings.Contains(err.Error(), "Prefer: wait") {
			t.Errorf("Prefer: %q -> %+v, %v; want an error naming Prefer: wait", v, got, err)
		}
		// respond-async still counts: the submit is refused as async,
		// never run as a synchronous call.
		if got.async != strings.Contains(v, "respond-async") {
			t.Errorf("Prefer: %q -> %+v: respond-async lost with the bad wait", v, got)
		}
	}
	if d, err := parseWait("0.5", true); err != nil || d != 500*time.Millisecond {
		t.Errorf("wait=0.5 -> %v, %v", d, err)
	}
}
