//go:build !windows

package audit_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"

	"github.com/tetherdev/tether/audit"
	"github.com/tetherdev/tether/internal/leakcheck"
)

func TestMain(m *testing.M) { os.Exit(leakcheck.Main(m)) }

func closeLog(t *testing.T, l *audit.Log) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := l.Close(ctx); err != nil {
		t.Fatal(err)
	}
}

// readLines parses every line of path as an Event.
func readLines(t *testing.T, path string) []audit.Event {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var out []audit.Event
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		var e audit.Event
		dec := json.NewDecoder(bytes.NewReader(sc.Bytes()))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&e); err != nil {
			t.Fatalf("line %q: %v", sc.Text(), err)
		}
		out = append(out, e)
	}
	return out
}

func TestOpenWritesOneJSONLinePerEventInUTCAndMode0600(t *testing.T) {
	path := filepath.Join(t.TempDir(), "audit.log")
	l, err := audit.Open(path, audit.Options{Instance: "b1", Component: "broker"})
	if err != nil {
		t.Fatal(err)
	}
	at := time.Date(2026, 1, 2, 3, 4, 5, 123456789, time.FixedZone("X", 3600))
	l.Emit(audit.Event{Time: at, Event: audit.Call, Workspace: "ws", Endpoint: "/x", CorrelationID: "c1", Outcome: audit.OutcomeOK,
		Principal: &audit.Principal{Sub: "alice", JTI: "j1", KID: "k1", Role: "caller"}, DurationMS: 1.5})
	l.Emit(audit.Event{Event: audit.Disconnect, Reason: "bye"})
	closeLog(t, l)

	st, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if st.Mode().Perm() != 0o600 {
		t.Errorf("mode %v, want 0600", st.Mode().Perm())
	}
	raw, _ := os.ReadFile(path)
	if !strings.Contains(string(raw), `"time":"2026-01-02T02:04:05.123456789Z"`) {
		t.Errorf("time not RFC 3339 UTC with sub-seconds: %s", raw)
	}
	lines := readLines(t, path)
	if len(lines) != 2 {
		t.Fatalf("%d lines, want 2", len(lines))
	}
	if e := lines[0]; e.Instance != "b1" || e.Component != "broker" || e.Principal.Sub != "alice" || e.Principal.KID != "k1" || e.Outcome != "ok" {
		t.Errorf("first line %+v", e)
	}
	if lines[1].Time.IsZero() || lines[1].Time.Location() != time.UTC {
		t.Errorf("second line's time %v: want now, UTC", lines[1].Time)
	}
}

func TestOpenOfAnUnopenablePathFailsNamingIt(t *testing.T) {
	path := filepath.Join(t.TempDir(), "no", "such", "dir", "audit.log")
	_, err := audit.Open(path, audit.Options{})
	if err == nil || !strings.Contains(err.Error(), path) {
		t.Fatalf("err %v, want one naming %s", err, path)
	}
}

func TestOpenAppendsToAnExistingFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "audit.log")
	if err := os.WriteFile(path, []byte(`{"event":"connect","time":"2026-01-01T00:00:00Z","instance":"x","component":"broker"}`+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	l, err := audit.Open(path, audit.Options{})
	if err != nil {
		t.Fatal(err)
	}
	l.Emit(audit.Event{Event: audit.Disconnect})
	closeLog(t, l)
	if n := len(readLines(t, path)); n != 2 {
		t.Fatalf("%d lines, want the old one and the new one", n)
	}
}

// failingWriter fails every write, as a full disk does.
type failingWriter struct{}

func (failingWriter) Write([]byte) (int, error) { return 0, errors.New("no space left on device") }

func TestWriteFailureIsCountedLoggedAndEmitReturnsAtOnce(t *testing.T) {
	var logged bytes.Buffer
	var mu sync.Mutex
	l := audit.New(failingWriter{}, audit.Options{Logger: zerolog.New(lockedWriter{&mu, &logged})})
	reg := prometheus.NewRegistry()
	if err := l.Register(reg); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	for range 100 {
		l.Emit(audit.Event{Event: audit.Call})
	}
	if d := time.Since(start); d > 100*time.Millisecond {
		t.Errorf("100 Emits took %v on a failing writer", d)
	}
	closeLog(t, l)
	if got := value(t, reg, "tether_audit_lines_dropped_total", "write_failed"); got != 100 {
		t.Errorf("lines dropped write_failed %v, want 100", got)
	}
	if got := gauge(t, reg, "tether_audit_write_failures_total"); got < 1 {
		t.Errorf("write failures %v, want at least 1", got)
	}
	mu.Lock()
	defer mu.Unlock()
	// At most one warning per WarnEach (10s): one here.
	if n := strings.Count(logged.String(), "audit log lines lost"); n != 1 {
		t.Errorf("%d warnings logged, want 1: %s", n, logged.String())
	}
}

type lockedWriter struct {
	mu *sync.Mutex
	w  *bytes.Buffer
}

func (w lockedWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.w.Write(p)
}

// stalledWriter blocks every write until release is closed: a stalled disk.
// entered gets a value when a write starts.
type stalledWriter struct{ release, entered chan struct{} }

func (w stalledWriter) Write(p []byte) (int, error) {
	select {
	case w.entered <- struct{}{}:
	default:
	}
	<-w.release
	return len(p), nil
}

func TestFullQueueDropsAndCountsInsteadOfBlocking(t *testing.T) {
	w := stalledWriter{release: make(chan struct{}), entered: make(chan struct{}, 1)}
	l := audit.New(w, audit.Options{Queue: 4})
	reg := prometheus.NewRegistry()
	if err := l.Register(reg); err != nil {
		t.Fatal(err)
	}
	// The first line goes to the writer, which stalls writing it alone.
	l.Emit(audit.Event{Event: audit.Call})
	select {
	case <-w.entered:
	case <-time.After(5 * time.Second):
		t.Fatal("the writer did not start writing the first line within 5s")
	}
	start := time.Now()
	for range 49 {
		l.Emit(audit.Event{Event: audit.Call})
	}
	if d := time.Since(start); d > 100*time.Millisecond {
		t.Errorf("49 Emits took %v on a stalled writer", d)
	}
	// One line is in the stalled write, 4 wait in the queue: the other 45
	// are dropped.
	dropped := value(t, reg, "tether_audit_lines_dropped_total", "queue_full")
	if dropped != 45 {
		t.Errorf("dropped %v, want 45", dropped)
	}
	close(w.release)
	closeLog(t, l)
	if got := gauge(t, reg, "tether_audit_lines_written_total"); got+dropped != 50 {
		t.Errorf("written %v + dropped %v, want 50", got, dropped)
	}
}

func TestReopenAfterRenameSendsLaterLinesToTheNewFileLosingNone(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "audit.log")
	l, err := audit.Open(path, audit.Options{})
	if err != nil {
		t.Fatal(err)
	}
	const each = 500
	for i := range each {
		l.Emit(audit.Event{Event: audit.Call, CorrelationID: "before-" + itoa(i)})
	}
	if err := os.Rename(path, path+".1"); err != nil { // what logrotate does
		t.Fatal(err)
	}
	if err := l.Reopen(); err != nil {
		t.Fatal(err)
	}
	for i := range each {
		l.Emit(audit.Event{Event: audit.Call, CorrelationID: "after-" + itoa(i)})
	}
	closeLog(t, l)
	old, cur := readLines(t, path+".1"), readLines(t, path)
	if len(old) != each || len(cur) != each {
		t.Fatalf("%d lines in the rotated file and %d in the new, want %d and %d", len(old), len(cur), each, each)
	}
	for i := range each {
		if old[i].CorrelationID != "before-"+itoa(i) || cur[i].CorrelationID != "after-"+itoa(i) {
			t.Fatalf("line %d: %q / %q, out of order or misplaced", i, old[i].CorrelationID, cur[i].CorrelationID)
		}
	}
}

func TestReopenThatCannotOpenKeepsWritingTheOldFile(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "sub", "audit.log")
	if err := os.Mkdir(filepath.Dir(path), 0o700); err != nil {
		t.Fatal(err)
	}
	l, err := audit.Open(path, audit.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(filepath.Dir(path), filepath.Join(dir, "moved")); err != nil {
		t.Fatal(err)
	}
	if err := l.Reopen(); err == nil || !strings.Contains(err.Error(), path) {
		t.Errorf("Reopen: %v, want an error naming %s", err, path)
	}
	l.Emit(audit.Event{Event: audit.Call})
	closeLog(t, l)
	if n := len(readLines(t, filepath.Join(dir, "moved", "audit.log"))); n != 1 {
		t.Errorf("%d lines in the old file, want 1", n)
	}
}

func TestEmitAfterCloseIsDroppedAndCounted(t *testing.T) {
	var buf bytes.Buffer
	l := audit.New(&buf, audit.Options{})
	reg := prometheus.NewRegistry()
	if err := l.Register(reg); err != nil {
		t.Fatal(err)
	}
	closeLog(t, l)
	l.Emit(audit.Event{Event: audit.Call})
	if got := value(t, reg, "tether_audit_lines_dropped_total", "closed"); got != 1 {
		t.Errorf("dropped closed %v, want 1", got)
	}
	if buf.Len() != 0 {
		t.Errorf("wrote %q after Close", buf.String())
	}
}

func TestNilLogIsOff(t *testing.T) {
	var l *audit.Log
	l.Emit(audit.Event{Event: audit.Call})
	if err := l.Reopen(); err != nil {
		t.Error(err)
	}
	if err := l.Close(context.Background()); err != nil {
		t.Error(err)
	}
}

func TestEventDurationIsMilliseconds(t *testing.T) {
	ms := audit.Since(time.Now().Add(-1500 * time.Millisecond))
	if ms < 1500 || ms > 2500 {
		t.Errorf("Since 1.5s ago = %v ms", ms)
	}
}

func itoa(i int) string { b, _ := json.Marshal(i); return string(b) }

func gauge(t *testing.T, reg *prometheus.Registry, name string) float64 {
	return value(t, reg, name, "")
}

func value(t *testing.T, reg *prometheus.Registry, name, reason string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			if reason == "" {
				return m.GetCounter().GetValue()
			}
			for _, lp := range m.GetLabel() {
				if lp.GetName() == "reason" && lp.GetValue() == reason {
					return m.GetCounter().GetValue()
				}
			}
		}
	}
	t.Fatalf("no metric %s{reason=%q}", name, reason)
	return 0
}
