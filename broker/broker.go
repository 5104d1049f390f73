package broker

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/uuid"
	"github.com/rs/zerolog"
	"go.opentelemetry.io/otel/trace"

	"github.com/tetherdev/tether/broker/api"
	"github.com/tetherdev/tether/broker/async"
	"github.com/tetherdev/tether/broker/auth"
	"github.com/tetherdev/tether/broker/bus"
	"github.com/tetherdev/tether/broker/caller"
	"github.com/tetherdev/tether/broker/eio"
	"github.com/tetherdev/tether/broker/revoke"
	"github.com/tetherdev/tether/broker/store"
	"github.com/tetherdev/tether/protocol"
)

// Broker serves WebSocket clients and the caller HTTP API. Create it with
// New, serve Handler, and end it with Shutdown. All methods are safe for
// concurrent use.
type Broker struct {
	cfg      Config
	log      zerolog.Logger
	bus      bus.Bus
	ownBus   bool
	store    store.Store
	ownStore bool
	auth     *auth.Verifier
	revoked  *revoke.List
	ownRevs  bool
	metrics  *metrics
	caller   *caller.BusCaller
	api      *api.API
	// instances answers list requests from any instance's API.
	instances bus.Subscription

	// inlineReplies: the in-memory bus delivers in the publisher's
	// goroutine without blocking, so replies are published inline and
	// handed over without a copy; on a network bus no read loop or bus
	// delivery waits for Redis: replies go out with PublishAsync.
	inlineReplies bool

	// sockets is the Engine.IO server: it serves /socket.io/ and gives
	// each session a conn (newConn).
	sockets *eio.Server
	// asyncOwner drains the connections' queues of async calls, writes
	// their outcomes and sweeps the store (package async).
	asyncOwner *async.Owner

	mu         sync.Mutex
	conns      map[*conn]struct{}
	holders    map[string]*conn // workspace -> the local connection holding it
	draining   atomic.Bool
	drainWaits atomic.Int32   // submits waiting for a holder's drain to end (holderForSubmit)
	wg         sync.WaitGroup // a count per connection until it ended, and spawn's goroutines (drains, outcome writers, the sweep, takeover messages)
	stopping   chan struct{}  // closed when Shutdown stops the sweep and outcome retries
	stopped    bool           // under mu: Shutdown waits for wg; nothing may be added (spawn)
}

// New returns a broker. It subscribes the API's caller inbox on the bus.
func New(cfg Config) (*Broker, error) {
	cfg.setDefaults()
	b := &Broker{
		cfg:      cfg,
		log:      cfg.Logger.With().Str("instance", cfg.InstanceID).Logger(),
		bus:      cfg.Bus,
		auth:     cfg.Verifier,
		metrics:  newMetrics(),
		conns:    make(map[*conn]struct{}),
		holders:  make(map[string]*conn),
		store:    cfg.Store,
		revoked:  cfg.Revocations,
		stopping: make(chan struct{}),
	}
	if err := cfg.Audit.Register(b.metrics.reg); err != nil {
		return nil, fmt.Errorf("audit log metrics: %w", err)
	}
	if b.auth == nil {
		b.auth = auth.NewVerifier(cfg.Secret)
	}
	if !b.auth.Enabled() {
		b.auth.OnUnchecked(b.warnUnchecked)
	}
	if b.revoked == nil {
		b.revoked = revoke.New(revoke.Options{Logger: b.log})
		b.ownRevs = true
	}
	b.auth.SetRevocations(b.revoked)
	if b.bus == nil {
		b.bus = bus.NewMemory()
		b.ownBus = true
	}
	if b.store == nil {
		b.store = store.NewMemory(store.Options{Retention: cfg.CallRetention, Grace: cfg.CallGrace})
		b.ownStore = true
	}
	b.store = store.Observe(b.store, b.metrics.observeStore)
	b.metrics.reg.MustRegister(cfg.Collectors...)
	if ip, ok := b.bus.(bus.InProcess); ok {
		b.inlineReplies = ip.InProcess()
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := caller.NewBusCaller(ctx, b.bus, caller.BusCallerOptions{
		Grace:       cfg.CallGrace,
		Logger:      b.log,
		OnUnmatched: b.metrics.dropped.Inc,
		Store:       b.store,
	})
	if err != nil {
		b.closeOwned()
		return nil, fmt.Errorf("starting broker: %w", err)
	}
	b.caller = c
	b.asyncOwner = async.New(async.Config{
		Store:         b.store,
		Caller:        c,
		Logger:        b.log,
		Grace:         cfg.CallGrace,
		SweepInterval: cfg.SweepInterval,
		Outcomes:      b.metrics.asyncOutcomes,
		Recorded:      b.auditOutcome,
		Spawn:         b.spawn,
		Stopping:      b.stopping,
	})
	if b.instances, err = b.bus.Subscribe(ctx, protocol.InstancesChannel, b.onInstancesMessage); err != nil {
		_ = c.Close()
		b.closeOwned()
		return nil, fmt.Errorf("starting broker: subscribing instances channel: %w", err)
	}
	b.sockets = eio.NewServer(eio.Config{
		PingInterval:       cfg.PingInterval,
		PingTimeout:        cfg.PingTimeout,
		ConnectTimeout:     cfg.ConnectTimeout,
		WriteTimeout:       cfg.WriteTimeout,
		MaxPayload:         cfg.MaxPayload,
		MaxQueue:           cfg.MaxInFlight + 64, // the calls, their cancels and a few pings
		ConnRate:           cfg.ConnRate,
		ConnBurst:          cfg.ConnBurst,
		MaxHandshakesPerIP: cfg.MaxHandshakesPerIP,
		LimitLoopback:      cfg.LimitLoopback,
		TrustedProxies:     cfg.TrustedProxies,
		Logger:             b.log,
		OnMalformed:        b.metrics.badPackets.Inc,
		OnRefused:          func(limit string) { b.metrics.connRefused.WithLabelValues(limit).Inc() },
	}, b.newConn)
	b.api = api.New(api.Config{
		Core:         b,
		Caller:       c,
		Verifier:     b.auth,
		Revocations:  b.revoked,
		Registry:     b.metrics.reg,
		Socket:       b.sockets,
		MCP:          cfg.MCP,
		OAuthIssuers: cfg.OAuthIssuers,
		OAuthScopes:  cfg.OAuthScopes,
		PublicURL:    cfg.PublicURL,
		InstanceID:   cfg.InstanceID,
		Logger:       b.log,
		MaxPayload:   cfg.MaxPayload,
		WriteTimeout: cfg.WriteTimeout,
		CallGrace:    cfg.CallGrace,
		CORSOrigins:  cfg.CORSOrigins,
		Audit:        cfg.Audit,
		Trust:        cfg.TrustedProxies,
	})
	b.spawn(b.asyncOwner.Sweep)
	return b, nil
}

// onInstancesMessage answers a list request with the workspaces this
// instance holds. It runs on the bus's goroutine and does not block.
func (b *Broker) onInstancesMessage(msg []byte) {
	var m protocol.BusMessage
	if err := json.Unmarshal(msg, &m); err != nil || m.Type != protocol.BusList || m.ReplyTo == "" || m.CorrelationID == "" {
		b.log.Debug().Err(err).Str("type", m.Type).Msg("unusable message on the instances channel ignored")
		return
	}
	result, err := json.Marshal(protocol.InstanceWorkspaces{Instance: b.cfg.InstanceID, Workspaces: b.Workspaces()})
	if err != nil {
		return // cannot happen: plain values
	}
	call := protocol.ToolCall{CorrelationID: m.CorrelationID, Endpoint: "(list workspaces)", ReplyTo: m.ReplyTo}
	b.reply(call, nil, protocol.Success(m.CorrelationID, result))
}

// AllWorkspaces asks every instance on the bus for the workspaces it holds,
// waiting until ctx ends at most. unanswered counts the instances the
// request reached that did not answer in time.
func (b *Broker) AllWorkspaces(ctx context.Context) (list []protocol.Workspace, unanswered int, err error) {
	cid := uuid.NewString()
	msg, _ := json.Marshal(protocol.BusMessage{Type: protocol.BusList, ToolCall: protocol.ToolCall{CorrelationID: cid, ReplyTo: b.caller.Inbox()}})
	replies, n, err := b.caller.Gather(ctx, protocol.InstancesChannel, cid, msg)
	if err != nil {
		return nil, 0, err
	}
	for _, r := range replies {
		var iw protocol.InstanceWorkspaces
		if !r.Success || json.Unmarshal(r.Result, &iw) != nil {
			continue
		}
		list = append(list, iw.Workspaces...)
	}
	slices.SortFunc(list, func(a, b protocol.Workspace) int {
		return cmp.Or(cmp.Compare(a.WorkspaceID, b.WorkspaceID), a.ConnectedAt.Compare(b.ConnectedAt))
	})
	return list, n - len(replies), nil
}

// Handler serves /socket.io/ and the HTTP API.
func (b *Broker) Handler() http.Handler { return b.api.Handler() }

// NewServer returns the call server of b's HTTP API (api.Server): serve it
// on a listener, and shut it down after b.
func NewServer(b *Broker, hs *http.Server) *api.Server { return api.NewServer(b.api, hs) }

// InstanceID names this broker (Config.InstanceID or a random one).
func (b *Broker) InstanceID() string { return b.cfg.InstanceID }

// AuthEnabled reports whether tokens are checked.
func (b *Broker) AuthEnabled() bool { return b.auth.Enabled() }

// warnUnchecked logs a connection or call let in without a token: with
// authentication off, any local process may act as any workspace, and
// the log is where that shows.
func (b *Broker) warnUnchecked(role, ws string) {
	b.log.Warn().Str("role", role).Str("workspace_id", ws).Msg("authentication is off (--insecure-no-auth): let in without a token")
}

func (b *Broker) isDraining() bool { return b.draining.Load() }

// Draining reports whether Shutdown has begun (api.Core).
func (b *Broker) Draining() bool { return b.isDraining() }

func (b *Broker) track(c *conn) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.draining.Load() {
		return false
	}
	b.conns[c] = struct{}{}
	// A connection holds a count in wg until it ended (Ended), so the
	// goroutines it starts are added while the counter is above zero
	// and Shutdown's Wait covers them.
	b.wg.Add(1)
	return true
}

func (b *Broker) untrack(c *conn) {
	b.mu.Lock()
	delete(b.conns, c)
	b.mu.Unlock()
	b.wg.Done()
}

// reply delivers the single answer of call: to its in-process waiter, or
// published to its caller's inbox.
func (b *Broker) reply(call protocol.ToolCall, waiter caller.Waiter, resp protocol.ToolResponse) {
	resp.CorrelationID = call.CorrelationID
	if call.Async {
		b.asyncOwner.Record(call, resp)
		return
	}
	if waiter != nil {
		waiter.Answer(resp) // the pending table hands each call out once
		b.log.Debug().Str("correlation_id", call.CorrelationID).Str("endpoint", call.Endpoint).Bool("success", resp.Success).Str("error", resp.Error).Msg("response delivered to caller")
		return
	}
	// A result comes from a client's answer, which DecodeResponse
	// validated: it is copied, not parsed again.
	msg := protocol.AppendToolResponse(make([]byte, 0, 96+len(resp.Result)+len(resp.Message)), &resp)
	done := func(n int, err error) {
		if err != nil || n == 0 {
			// The caller gave up or is gone; never retried.
			b.metrics.dropped.Inc()
			b.log.Debug().Err(err).Str("correlation_id", call.CorrelationID).Str("endpoint", call.Endpoint).Msg("reply reached no caller")
		}
	}
	if b.inlineReplies {
		done(b.bus.Publish(context.Background(), call.ReplyTo, msg)) // delivered at once, msg handed over
		return
	}
	// Written now (or with the batch under way); the count comes back
	// later. No goroutine waits for it.
	b.bus.PublishAsync(call.ReplyTo, msg, done)
}

// Dispatch implements api.Core: it starts a call of this broker's API for
// ws without waiting for it, when the call needs no bus: to the holder in
// this process on the in-memory bus, or on any bus when this broker holds
// the workspace and may hand it the call (localHolder). Its one answer
// goes to w: at once (holder nil; the workspace is offline), or from the
// holder's call table. ok is false when the call must go through the bus:
// nothing was done then. span is the API's call span: the delivery is an
// event on it (deliverSpan).
func (b *Broker) Dispatch(ws string, req *protocol.ToolCall, w caller.Waiter, span trace.Span) (holder api.Holder, ok bool) {
	var c *conn
	if b.inlineReplies && req.WaitForWorkspaceMS <= 0 {
		b.mu.Lock()
		c = b.holders[ws]
		b.mu.Unlock()
		if c == nil {
			b.log.Debug().Str("correlation_id", req.CorrelationID).Str("endpoint", req.Endpoint).Str("workspace_id", ws).Msg("workspace offline")
			w.Answer(protocol.Failure(req.CorrelationID, protocol.CodeWorkspaceOffline, fmt.Sprintf("no client serves workspace %q", ws)))
			return nil, true
		}
	} else if c = b.localHolder(ws); c == nil {
		return nil, false
	}
	b.callLocal(c, req, w, span)
	return c, true
}

// localHolder returns the connection of this broker that holds ws when the
// API may hand it a call itself, on any bus (Dispatch): connected and
// done joining, not replaced or closed. Otherwise nil: the call goes
// through the bus.
//
// Handing the call over skips the workspace channel, whose order splits
// calls at a takeover (design.md, Routing): a call that reaches a holder
// this way reaches that one connection, and only it answers (the call
// table's one answer), so no call reaches two clients. What it gives up is
// the takeover's exact cut: a call handed over after a newer connection on
// another instance took the workspace, but before this holder heard the
// takeover, is the old connection's, which answers it or, once it yields,
// answers workspace_disconnected, as for any call only it had. A holder
// that lost the bus is joining again (BusLost) and gets nothing this way.
func (b *Broker) localHolder(ws string) *conn {
	c, _ := b.localHolderReady(ws, false)
	return c
}

// localHolderReady is localHolder, and holderForSubmit when submit is set. A
// submit's holder that is ready but for a drain of its queue is not
// returned; that drain's end is (idle).
func (b *Broker) localHolderReady(ws string, submit bool) (c *conn, idle <-chan struct{}) {
	b.mu.Lock()
	c = b.holders[ws]
	b.mu.Unlock()
	if c == nil || c.joining.Load() || b.isDraining() {
		return nil, nil
	}
	c.mu.Lock()
	gone := c.closed || c.replaced || c.WorkspaceID() != ws
	c.mu.Unlock()
	if gone {
		return nil, nil
	}
	if !submit {
		return c, nil // a call: the queue is not its business
	}
	// The queue's lock is taken after c's, never inside it (async.Queue's
	// lock order): the two looks are a snapshot, as any look would be.
	if idle = c.queue.Idle(); idle != nil { // draining its queue
		return nil, idle
	}
	return c, nil
}

// callLocal delivers a call of this broker's API to c, a connection of this
// broker; its one answer comes back to w as a value. The call's deadline
// starts now.
func (b *Broker) callLocal(c *conn, call *protocol.ToolCall, w caller.Waiter, span trace.Span) {
	call.DeadlineMS = time.Now().Add(call.TimeoutDuration()).UnixMilli()
	c.callEvent(b.log.Debug(), call).Msg("call routed to local holder")
	c.deliver(*call, w, false, span)
}

// holderConns lists the connections holding a workspace here now.
func (b *Broker) holderConns() []*conn {
	b.mu.Lock()
	defer b.mu.Unlock()
	conns := make([]*conn, 0, len(b.holders))
	for _, c := range b.holders {
		conns = append(conns, c)
	}
	return conns
}

// Workspaces lists the workspaces whose socket this broker holds and that
// a call from any broker reaches: a holder still subscribing to its
// workspace's channel (hold) is not listed yet, since a call published
// meanwhile would find no one and answer workspace_offline.
func (b *Broker) Workspaces() []protocol.Workspace {
	conns := b.holderConns()
	out := make([]protocol.Workspace, 0, len(conns))
	for _, c := range conns {
		if !c.reachable() {
			continue
		}
		out = append(out, protocol.Workspace{
			WorkspaceID: c.WorkspaceID(),
			ConnectedAt: time.Unix(0, c.since).UTC(),
			Instance:    b.cfg.InstanceID,
			InFlight:    c.calls.count(),
		})
	}
	return out
}

// Ready reports whether the broker can route calls: not draining, its
// tokens' keys fetched (every JWKS URL once), and the bus (if it can fail)
// live.
func (b *Broker) Ready(ctx context.Context) error {
	if b.isDraining() {
		return errors.New("shutting down")
	}
	if err := b.auth.Ready(); err != nil {
		return err
	}
	if ch, ok := b.bus.(bus.Checker); ok {
		return ch.Ready(ctx)
	}
	return nil
}

// Shutdown stops taking calls and connections, waits (up to DrainTimeout or
// ctx) for calls in flight to be answered, answers the rest broker_shutdown,
// disconnects every client and waits for the broker's goroutines. The HTTP
// server serving Handler should be shut down after it returns.
func (b *Broker) Shutdown(ctx context.Context) error {
	if !b.draining.CompareAndSwap(false, true) {
		return errors.New("broker already shut down")
	}
	b.sockets.Drain()
	b.log.Info().Msg("draining")
	drainCtx, cancel := context.WithTimeout(ctx, b.cfg.DrainTimeout)
	defer cancel()
	tick := time.NewTicker(10 * time.Millisecond)
	for (b.inFlight() > 0 || b.api.InFlight() > 0) && drainCtx.Err() == nil {
		select {
		case <-tick.C:
		case <-drainCtx.Done():
		}
	}
	tick.Stop()

	b.mu.Lock()
	conns := make([]*conn, 0, len(b.conns))
	for c := range b.conns {
		conns = append(conns, c)
	}
	b.mu.Unlock()
	for _, c := range conns {
		c.calls.failAll(protocol.CodeBrokerShutdown, "broker is shutting down")
		c.close(eio.ReasonShutdown, true)
	}
	// HTTP calls still waiting on another instance's answer are released
	// by closing the caller; the API answers them broker_shutdown.
	unsubCtx, unsubCancel := context.WithTimeout(ctx, 5*time.Second)
	if uerr := b.instances.Unsubscribe(unsubCtx); uerr != nil {
		b.log.Warn().Err(uerr).Msg("unsubscribing instances channel failed")
	}
	unsubCancel()
	err := b.caller.Close()
	close(b.stopping)
	waitCtx(ctx, b.api.Wait)
	b.api.Close()
	b.mu.Lock()
	b.stopped = true
	b.mu.Unlock()
	waitCtx(ctx, b.sockets.Wait)
	waitCtx(ctx, b.wg.Wait)
	b.sockets.Close()
	b.closeOwned()
	b.log.Info().Msg("shut down")
	return err
}

// closeOwned closes the bus, store and revocation list the broker made
// itself.
func (b *Broker) closeOwned() {
	if b.ownRevs {
		_ = b.revoked.Close()
	}
	if b.ownStore {
		_ = b.store.Close()
	}
	if b.ownBus {
		_ = b.bus.Close()
	}
}

func (b *Broker) inFlight() int {
	b.mu.Lock()
	conns := make([]*conn, 0, len(b.conns))
	for c := range b.conns {
		conns = append(conns, c)
	}
	b.mu.Unlock()
	n := 0
	for _, c := range conns {
		n += c.calls.count()
	}
	return n
}

// waitCtx runs wait (a wait group's Wait) until it returns or ctx ends. A
// wait cut short leaves its goroutine to end with the group.
func waitCtx(ctx context.Context, wait func()) {
	done := make(chan struct{})
	go func() { wait(); close(done) }()
	select {
	case <-done:
	case <-ctx.Done():
	}
}
