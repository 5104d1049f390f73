package audit

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"
)

// Stdout is the path that names the process's standard output (the JSON
// logs are on standard error).
const Stdout = "-"

// Defaults of Options.
const (
	DefaultQueue    = 8192
	DefaultWarnEach = 10 * time.Second
)

// maxBatch bounds the bytes the writer gathers into one write: lines that
// queued while a write ran go out together, and a write of whole lines to a
// file opened O_APPEND never interleaves with another writer's.
const maxBatch = 64 << 10

// Reasons a line is dropped (the reason label of
// tether_audit_lines_dropped_total).
const (
	dropQueueFull   = "queue_full"
	dropWriteFailed = "write_failed"
	dropClosed      = "closed"
)

// Options configure a Log.
type Options struct {
	// Instance and Component go on every line (Event.Instance,
	// Event.Component).
	Instance  string
	Component string
	// Logger gets the writer's troubles: a line dropped, a write or a
	// reopen that failed; at most one warning each WarnEach (default
	// DefaultWarnEach), with the counts so far.
	Logger   zerolog.Logger
	WarnEach time.Duration
	// Queue is how many lines may wait for the writer (default
	// DefaultQueue); past it lines are dropped and counted, so that a
	// stalled disk never holds up a call.
	Queue int
}

// Log is an audit log: Emit queues a line and returns at once; one
// goroutine writes the lines, in order. A nil *Log is a log that is off:
// every method does nothing. All methods are safe for concurrent use.
type Log struct {
	opts Options
	path string // "" for a writer given to New, Stdout for standard output

	// mu orders Emit's sends against Close closing ch.
	mu     sync.RWMutex
	closed bool
	ch     chan []byte

	reopens chan chan error
	done    chan struct{}
	// out is the writer's; only its goroutine touches it once started.
	out io.Writer

	written  prometheus.Counter
	dropped  *prometheus.CounterVec
	failures prometheus.Counter
	// droppedN and failedN feed the warnings; lastWarn is unix ns.
	droppedN atomic.Uint64
	failedN  atomic.Uint64
	lastWarn atomic.Int64
}

// Open opens the audit log at path, Stdout for the standard output: a
// file is created when missing, mode 0600 (its lines name principals),
// and appended to. The error names the path.
func Open(path string, o Options) (*Log, error) {
	if path == Stdout {
		l := New(os.Stdout, o)
		l.path = Stdout
		return l, nil
	}
	f, err := openFile(path)
	if err != nil {
		return nil, err
	}
	l := New(f, o)
	l.path = path
	return l, nil
}

func openFile(path string) (*os.File, error) {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("opening audit log %s: %w", path, errors.Unwrap(err))
	}
	return f, nil
}

// New starts a Log that writes to w, which the caller closes after Close.
func New(w io.Writer, o Options) *Log {
	if o.Queue <= 0 {
		o.Queue = DefaultQueue
	}
	if o.WarnEach <= 0 {
		o.WarnEach = DefaultWarnEach
	}
	l := &Log{
		opts:    o,
		ch:      make(chan []byte, o.Queue),
		reopens: make(chan chan error),
		done:    make(chan struct{}),
		out:     w,
		written: prometheus.NewCounter(prometheus.CounterOpts{Name: "tether_audit_lines_written_total", Help: "Audit log lines written."}),
		dropped: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "tether_audit_lines_dropped_total",
			Help: "Audit log lines lost: queue_full (the writer fell behind), write_failed (the write returned an error), closed (emitted after shutdown)."}, []string{"reason"}),
		failures: prometheus.NewCounter(prometheus.CounterOpts{Name: "tether_audit_write_failures_total", Help: "Writes to the audit log that failed."}),
	}
	for _, r := range []string{dropQueueFull, dropWriteFailed, dropClosed} {
		l.dropped.WithLabelValues(r)
	}
	go l.run()
	return l
}

// Register adds the log's metrics to reg: lines written, lines dropped (by
// reason) and failed writes.
func (l *Log) Register(reg prometheus.Registerer) error {
	if l == nil {
		return nil
	}
	for _, c := range []prometheus.Collector{l.written, l.dropped, l.failures} {
		if err := reg.Register(c); err != nil {
			return err
		}
	}
	return nil
}

// Emit queues e as a line; it never blocks. Time, when zero, is now;
// Instance and Component are the log's.
func (l *Log) Emit(e Event) {
	if l == nil {
		return
	}
	if e.Time.IsZero() {
		e.Time = time.Now()
	}
	e.Time = e.Time.UTC()
	e.Instance, e.Component = l.opts.Instance, l.opts.Component
	line, err := json.Marshal(&e)
	if err != nil { // Event holds nothing Marshal refuses
		l.drop(dropWriteFailed, 1, err)
		return
	}
	line = append(line, '\n')
	l.mu.RLock()
	defer l.mu.RUnlock()
	if l.closed {
		l.drop(dropClosed, 1, nil)
		return
	}
	select {
	case l.ch <- line:
	default:
		l.drop(dropQueueFull, 1, nil)
	}
}

// drop counts n lines lost, and warns when the last warning is old enough.
func (l *Log) drop(reason string, n int, err error) {
	l.dropped.WithLabelValues(reason).Add(float64(n))
	l.droppedN.Add(uint64(n))
	l.warn(reason, err)
}

func (l *Log) warn(what string, err error) {
	now := time.Now().UnixNano()
	last := l.lastWarn.Load()
	if now-last < int64(l.opts.WarnEach) || !l.lastWarn.CompareAndSwap(last, now) {
		return
	}
	l.opts.Logger.Warn().Err(err).Str("audit_log", l.path).Str("last", what).
		Uint64("lines_dropped", l.droppedN.Load()).Uint64("write_failures", l.failedN.Load()).
		Msg("audit log lines lost")
}

// run is the writer: it writes the queued lines, in batches, until Close
// closes the queue and the queue is empty, and reopens the file when
// asked.
func (l *Log) run() {
	defer close(l.done)
	buf := make([]byte, 0, maxBatch)
	for {
		select {
		case line, ok := <-l.ch:
			if !ok || !l.writeBatch(&buf, line) {
				l.closeFile()
				return
			}
		case reply := <-l.reopens:
			// The lines queued before the signal go to the old file.
			open := true
			for open {
				select {
				case line, ok := <-l.ch:
					open = ok && l.writeBatch(&buf, line)
				default:
					open = false
				}
			}
			reply <- l.reopen()
		}
	}
}

// writeBatch writes line and the lines queued behind it, up to maxBatch
// bytes, in one write; false when the queue was closed meanwhile.
func (l *Log) writeBatch(buf *[]byte, line []byte) (open bool) {
	b := append((*buf)[:0], line...)
	n := 1
	open = true
gather:
	for len(b) < maxBatch {
		select {
		case more, ok := <-l.ch:
			if !ok {
				open = false
				break gather
			}
			b = append(b, more...)
			n++
		default:
			break gather
		}
	}
	l.write(b, n)
	if cap(b) <= 2*maxBatch {
		*buf = b
	}
	return open
}

func (l *Log) write(buf []byte, n int) {
	if _, err := l.out.Write(buf); err != nil {
		l.failures.Inc()
		l.failedN.Add(1)
		l.drop(dropWriteFailed, n, err)
		return
	}
	l.written.Add(float64(n))
}

// reopen opens the path again (logrotate renamed the file): the new file
// gets the lines from here on. When the path cannot be opened, the old
// file is kept and the error returned.
func (l *Log) reopen() error {
	old, ok := l.out.(*os.File)
	if !ok || l.path == "" || l.path == Stdout {
		return nil
	}
	f, err := openFile(l.path)
	if err != nil {
		return err
	}
	l.out = f
	if err := old.Close(); err != nil {
		l.opts.Logger.Warn().Err(err).Str("audit_log", l.path).Msg("closing the rotated audit log")
	}
	return nil
}

func (l *Log) closeFile() {
	f, ok := l.out.(*os.File)
	if !ok || l.path == "" || l.path == Stdout {
		return
	}
	if err := f.Sync(); err != nil && !errors.Is(err, os.ErrInvalid) {
		l.opts.Logger.Debug().Err(err).Str("audit_log", l.path).Msg("syncing the audit log")
	}
	if err := f.Close(); err != nil {
		l.opts.Logger.Warn().Err(err).Str("audit_log", l.path).Msg("closing the audit log")
	}
}

// reopenWait bounds how long Reopen waits for a writer that is stuck in a
// write: the SIGHUP goroutine must not hang on a stalled disk.
const reopenWait = 5 * time.Second

// Reopen makes the writer open the log's path again, after the lines
// queued so far: logrotate renames the file and sends SIGHUP, and the lines
// after it go to a new file at the path. It does nothing for standard
// output or a writer given to New.
func (l *Log) Reopen() error {
	if l == nil {
		return nil
	}
	l.mu.RLock()
	closed := l.closed
	l.mu.RUnlock()
	if closed {
		return errors.New("audit log closed")
	}
	reply := make(chan error, 1)
	select {
	case l.reopens <- reply:
	case <-l.done:
		return errors.New("audit log closed")
	case <-time.After(reopenWait):
		return errors.New("audit log writer busy: not reopened")
	}
	return <-reply
}

// Path is the path the log was opened at; "" for a writer given to New.
func (l *Log) Path() string {
	if l == nil {
		return ""
	}
	return l.path
}

// Close writes the lines queued and closes the file (not standard output,
// nor a writer given to New); lines emitted after it are dropped. It waits
// until the writer is done or ctx ends.
func (l *Log) Close(ctx context.Context) error {
	if l == nil {
		return nil
	}
	l.mu.Lock()
	if !l.closed {
		l.closed = true
		close(l.ch)
	}
	l.mu.Unlock()
	select {
	case <-l.done:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("audit log: lines still queued: %w", ctx.Err())
	}
}
