package async

import (
	"context"
	"errors"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"

	"github.com/tetherdev/tether/broker/caller"
	"github.com/tetherdev/tether/broker/store"
	"github.com/tetherdev/tether/protocol"
)

// Config configures an Owner. Every field is required.
type Config struct {
	// Store keeps the records (the broker's, observed).
	Store store.Store
	// Caller is the broker's bus caller: it records submits.
	Caller *caller.BusCaller
	Logger zerolog.Logger
	// Grace is how long past its deadline a call's outcome is still
	// tried; SweepInterval how often the store is swept.
	Grace         time.Duration
	SweepInterval time.Duration
	// Outcomes counts the outcomes this broker wrote, by status.
	Outcomes *prometheus.CounterVec
	// Recorded, when set, is told of each outcome this broker wrote of a
	// call answered (the audit log's async_outcome line); not of the
	// calls the sweep ended, which it counts alone.
	Recorded func(rec *store.Record)
	// Spawn runs f on a goroutine the broker waits for at shutdown, or
	// returns false once it no longer starts any; Stopping is closed when
	// the broker stops the sweep and the outcomes' retries.
	Spawn    func(f func()) bool
	Stopping <-chan struct{}
}

// Owner is a broker's side of async calls. All methods are safe for
// concurrent use.
type Owner struct {
	cfg Config
	log zerolog.Logger
}

// New returns an Owner.
func New(cfg Config) *Owner { return &Owner{cfg: cfg, log: cfg.Logger} }

// Queue returns the drain of the workspace queue of h, a connection of
// this broker; make one per connection, when it begins.
func (o *Owner) Queue(h Holder) *Queue { return &Queue{o: o, h: h} }

// putOutcome records rec, delivered and not recorded yet, final with resp,
// and returns the final record; the outcome stands even when it could not
// be recorded.
func (o *Owner) putOutcome(ctx context.Context, rec store.Record, resp protocol.ToolResponse) store.Record {
	t := time.Now()
	resp.CorrelationID = rec.CorrelationID
	rec.Status, rec.FinishedAt, rec.Response = store.StatusOf(&resp), &t, &resp
	opCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), storeOp)
	stored, err := o.cfg.Store.Put(opCtx, rec)
	cancel()
	if err != nil {
		o.log.Warn().Err(err).Str("correlation_id", rec.CorrelationID).Str("endpoint", rec.Endpoint).Str("workspace_id", rec.WorkspaceID).Msg("async call outcome answered but not recorded")
		return rec
	}
	o.cfg.Outcomes.WithLabelValues(stored.Status).Inc()
	o.recorded(&stored)
	return stored
}

func (o *Owner) recorded(rec *store.Record) {
	if o.cfg.Recorded != nil {
		o.cfg.Recorded(rec)
	}
}

// Record writes an async call's one answer to the store, off the
// calling goroutine (the call table's finish never blocks). A Finish that
// loses (the call was cancelled, or the sweep ended it) changes nothing. A
// store that cannot be reached is tried again until the call's deadline
// plus grace; past that the sweep ends the call.
func (o *Owner) Record(call protocol.ToolCall, resp protocol.ToolResponse) {
	ok := o.cfg.Spawn(func() {
		until := time.UnixMilli(call.DeadlineMS).Add(o.cfg.Grace)
		backoff := 50 * time.Millisecond
		for {
			ctx, cancel := context.WithTimeout(context.Background(), storeOp)
			out, err := o.cfg.Store.Finish(ctx, call.CorrelationID, resp, time.Now())
			cancel()
			e := o.log.Debug().Str("correlation_id", call.CorrelationID).Str("endpoint", call.Endpoint)
			switch {
			case err == nil && out.Won:
				o.cfg.Outcomes.WithLabelValues(out.Record.Status).Inc()
				o.recorded(&out.Record)
				e.Str("workspace_id", out.Record.WorkspaceID).Str("status", out.Record.Status).Msg("async call outcome recorded")
				return
			case err == nil:
				e.Str("workspace_id", out.Record.WorkspaceID).Str("status", out.Record.Status).Msg("async call already had its outcome; this answer dropped")
				return
			case errors.Is(err, store.ErrNotFound), errors.Is(err, store.ErrClosed), !time.Now().Add(backoff).Before(until):
				o.log.Warn().Err(err).Str("correlation_id", call.CorrelationID).Str("endpoint", call.Endpoint).Msg("async call outcome not recorded")
				return
			}
			select {
			case <-time.After(backoff):
			case <-o.cfg.Stopping:
				return
			}
			backoff = min(2*backoff, time.Second)
		}
	})
	if !ok {
		o.log.Warn().Str("correlation_id", call.CorrelationID).Str("endpoint", call.Endpoint).Msg("async call answered after shutdown; outcome not recorded")
	}
}

// Sweep sweeps the store every Config.SweepInterval until Config.Stopping
// is closed; run it on a goroutine the broker waits for.
func (o *Owner) Sweep() {
	t := time.NewTicker(o.cfg.SweepInterval)
	defer t.Stop()
	failing := false
	for {
		select {
		case <-o.cfg.Stopping:
			return
		case <-t.C:
		}
		for {
			ctx, cancel := context.WithTimeout(context.Background(), storeOp)
			n, err := o.cfg.Store.Sweep(ctx, time.Now(), sweepMax)
			cancel()
			if err != nil {
				if !failing && !errors.Is(err, store.ErrClosed) {
					o.log.Warn().Err(err).Msg("sweeping async calls failed; retrying every interval")
				}
				failing = true
				break
			}
			if failing {
				o.log.Info().Msg("sweeping async calls works again")
				failing = false
			}
			if n > 0 {
				o.cfg.Outcomes.WithLabelValues(store.Failed).Add(float64(n))
				o.log.Debug().Int("calls", n).Msg("async calls ended by the sweep")
			}
			if n < sweepMax {
				break
			}
		}
	}
}
