package store

import (
	"container/heap"
	"context"
	"slices"
	"sync"
	"time"

	"github.com/tetherdev/tether/protocol"
)

// Memory is the Store of a broker without Redis: the records live in this
// process, for this broker's calls. All methods are safe for concurrent use;
// each is one critical section, which is what makes Finish and Claim
// atomic.
type Memory struct {
	opts  Options
	watch watchers

	mu     sync.Mutex
	recs   map[string]*memRecord
	idem   map[string]string   // workspace NUL idempotency key -> correlation id
	queues map[string][]string // workspace -> queued correlation ids, oldest first
	due    timeHeap            // when Sweep looks at a call
	expiry timeHeap            // when a record is forgotten
	closed bool
}

var _ Store = (*Memory)(nil)

type memRecord struct {
	rec      Record
	due      int64 // unix ms Sweep ends the call at; 0 once final
	expireAt int64 // unix ms the record is forgotten at
}

// NewMemory returns an empty in-process store.
func NewMemory(opts Options) *Memory {
	opts.setDefaults()
	return &Memory{
		opts:   opts,
		recs:   make(map[string]*memRecord),
		idem:   make(map[string]string),
		queues: make(map[string][]string),
	}
}

func idemScope(ws, key string) string { return ws + "\x00" + key }

// live returns the record of cid unless it is past its retention at now.
func (m *Memory) live(cid string, now int64) *memRecord {
	r := m.recs[cid]
	if r == nil || r.expireAt <= now {
		return nil
	}
	return r
}

// Create implements Store. The caller tells the holder (Told is -1).
func (m *Memory) Create(ctx context.Context, rec Record) (Created, error) {
	return m.create(rec, false)
}

// CreateDelivered implements Store.
func (m *Memory) CreateDelivered(ctx context.Context, rec Record) (Created, error) {
	return m.create(rec, true)
}

// create is Create, or CreateDelivered when delivered is set.
func (m *Memory) create(rec Record, delivered bool) (Created, error) {
	rec, err := checkNew(rec)
	if err != nil {
		return Created{}, err
	}
	rec.Payload = slices.Clone(rec.Payload) // the record outlives the caller's buffer
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return Created{}, ErrClosed
	}
	now := time.Now().UnixMilli()
	if rec.IdempotencyKey != "" {
		if cid, ok := m.idem[idemScope(rec.WorkspaceID, rec.IdempotencyKey)]; ok {
			if r := m.live(cid, now); r != nil {
				return Created{Record: r.rec.clone(), Existing: true, Told: -1}, nil
			}
		}
	}
	if m.live(rec.CorrelationID, now) != nil {
		return Created{}, ErrExists
	}
	claimed := delivered && len(m.queues[rec.WorkspaceID]) == 0
	if claimed {
		t := ms(time.UnixMilli(now))
		rec.Status, rec.DeliveredAt = Delivered, &t
	}
	r := &memRecord{rec: rec, expireAt: rec.Deadline.Add(m.opts.Grace + m.opts.Retention).UnixMilli()}
	r.due = dueAt(&r.rec, m.opts.Grace).UnixMilli()
	m.recs[rec.CorrelationID] = r
	heap.Push(&m.due, timed{r.due, rec.CorrelationID})
	heap.Push(&m.expiry, timed{r.expireAt, rec.CorrelationID})
	if !claimed {
		m.queues[rec.WorkspaceID] = append(m.queues[rec.WorkspaceID], rec.CorrelationID)
	}
	if rec.IdempotencyKey != "" {
		m.idem[idemScope(rec.WorkspaceID, rec.IdempotencyKey)] = rec.CorrelationID
	}
	return Created{Record: rec.clone(), Told: -1, Claimed: claimed}, nil
}

// Put implements Store.
func (m *Memory) Put(ctx context.Context, rec Record) (Record, error) {
	rec, err := checkPut(rec)
	if err != nil {
		return Record{}, err
	}
	rec.Payload = slices.Clone(rec.Payload)
	if rec.Response != nil {
		rec.Response.Result = slices.Clone(rec.Response.Result)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return Record{}, ErrClosed
	}
	if m.live(rec.CorrelationID, time.Now().UnixMilli()) != nil {
		return Record{}, ErrExists
	}
	r := &memRecord{rec: rec}
	if rec.FinishedAt != nil {
		r.expireAt = rec.FinishedAt.Add(m.opts.Retention).UnixMilli()
	} else {
		r.expireAt = rec.Deadline.Add(m.opts.Grace + m.opts.Retention).UnixMilli()
		r.due = dueAt(&r.rec, m.opts.Grace).UnixMilli()
		heap.Push(&m.due, timed{r.due, rec.CorrelationID})
	}
	m.recs[rec.CorrelationID] = r
	heap.Push(&m.expiry, timed{r.expireAt, rec.CorrelationID})
	return rec.clone(), nil
}

// Get implements Store.
func (m *Memory) Get(ctx context.Context, cid string) (Record, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return Record{}, ErrClosed
	}
	r := m.live(cid, time.Now().UnixMilli())
	if r == nil {
		return Record{}, ErrNotFound
	}
	return r.rec.clone(), nil
}

// Claim implements Store.
func (m *Memory) Claim(ctx context.Context, ws string, now time.Time, max int) ([]Record, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return nil, ErrClosed
	}
	q := m.queues[ws]
	var out []Record
	i := 0
	for ; i < len(q) && len(out) < max; i++ {
		r := m.live(q[i], now.UnixMilli())
		if r == nil || r.rec.Status != Queued || !claimable(&r.rec, now) {
			continue // Sweep ends it if nobody did
		}
		t := ms(now)
		r.rec.Status, r.rec.DeliveredAt = Delivered, &t
		r.due = dueAt(&r.rec, m.opts.Grace).UnixMilli()
		heap.Push(&m.due, timed{r.due, r.rec.CorrelationID})
		out = append(out, r.rec.clone())
	}
	if i == len(q) {
		delete(m.queues, ws)
	} else {
		m.queues[ws] = q[i:]
	}
	return out, nil
}

// Finish implements Store.
func (m *Memory) Finish(ctx context.Context, cid string, resp protocol.ToolResponse, now time.Time) (Outcome, error) {
	return m.end(cid, resp, now, false)
}

// Withdraw implements Store.
func (m *Memory) Withdraw(ctx context.Context, cid string, resp protocol.ToolResponse, now time.Time) (Outcome, error) {
	return m.end(cid, resp, now, true)
}

// end is Finish, or Withdraw when queuedOnly is set.
func (m *Memory) end(cid string, resp protocol.ToolResponse, now time.Time, queuedOnly bool) (Outcome, error) {
	m.mu.Lock()
	if m.closed {
		m.mu.Unlock()
		return Outcome{}, ErrClosed
	}
	r := m.live(cid, now.UnixMilli())
	if r == nil {
		m.mu.Unlock()
		return Outcome{}, ErrNotFound
	}
	if IsFinal(r.rec.Status) || (queuedOnly && r.rec.Status != Queued) {
		out := Outcome{Record: r.rec.clone()}
		m.mu.Unlock()
		return out, nil
	}
	was := r.rec.Status
	m.finishLocked(r, resp, now)
	out := Outcome{Record: r.rec.clone(), Won: true, Was: was}
	m.mu.Unlock()
	m.watch.notify(cid, out.Record)
	return out, nil
}

// finishLocked writes r's outcome; the caller notifies the watchers.
func (m *Memory) finishLocked(r *memRecord, resp protocol.ToolResponse, now time.Time) {
	if r.rec.Status == Queued {
		// Out of the queue now rather than skipped at the next Claim: a
		// workspace that never connects must not hold memory.
		ws := r.rec.WorkspaceID
		q := slices.DeleteFunc(m.queues[ws], func(c string) bool { return c == r.rec.CorrelationID })
		if len(q) == 0 {
			delete(m.queues, ws)
		} else {
			m.queues[ws] = q
		}
	}
	resp.CorrelationID = r.rec.CorrelationID
	resp.Result = slices.Clone(resp.Result)
	t := ms(now)
	r.rec.Status, r.rec.FinishedAt, r.rec.Response = StatusOf(&resp), &t, &resp
	r.due = 0
	r.expireAt = now.Add(m.opts.Retention).UnixMilli()
	heap.Push(&m.expiry, timed{r.expireAt, r.rec.CorrelationID})
}

// Sweep implements Store.
func (m *Memory) Sweep(ctx context.Context, now time.Time, max int) (int, error) {
	m.mu.Lock()
	if m.closed {
		m.mu.Unlock()
		return 0, ErrClosed
	}
	t := now.UnixMilli()
	for len(m.expiry) > 0 && m.expiry[0].at <= t {
		e := heap.Pop(&m.expiry).(timed)
		if r := m.recs[e.cid]; r != nil && r.expireAt == e.at {
			delete(m.recs, e.cid)
			if k := r.rec.IdempotencyKey; k != "" && m.idem[idemScope(r.rec.WorkspaceID, k)] == e.cid {
				delete(m.idem, idemScope(r.rec.WorkspaceID, k))
			}
		}
	}
	var ended []Record
	for len(m.due) > 0 && m.due[0].at <= t && len(ended) < max {
		e := heap.Pop(&m.due).(timed)
		r := m.recs[e.cid]
		if r == nil || r.due != e.at || IsFinal(r.rec.Status) {
			continue // ended, or due again later (claimed)
		}
		m.finishLocked(r, sweepFailure(e.cid, r.rec.Status, !r.rec.OfflineAt.IsZero()), now)
		ended = append(ended, r.rec.clone())
	}
	m.mu.Unlock()
	for _, rec := range ended {
		m.watch.notify(rec.CorrelationID, rec)
	}
	return len(ended), nil
}

// Watch implements Store.
func (m *Memory) Watch(cid string) (<-chan Record, func()) { return m.watch.add(cid) }

// GetWatched implements Store: Get (one instance hears every outcome).
func (m *Memory) GetWatched(ctx context.Context, cid string) (Record, error) { return m.Get(ctx, cid) }

// Pending implements Store: never known (a wait reads the record first).
func (m *Memory) Pending(string) (Record, bool) { return Record{}, false }

// Close implements Store.
func (m *Memory) Close() error {
	m.mu.Lock()
	m.closed = true
	m.mu.Unlock()
	return nil
}

// clone copies r so that the caller may keep or change it.
func (r Record) clone() Record {
	if r.DeliveredAt != nil {
		t := *r.DeliveredAt
		r.DeliveredAt = &t
	}
	if r.FinishedAt != nil {
		t := *r.FinishedAt
		r.FinishedAt = &t
	}
	if r.Response != nil {
		resp := *r.Response
		r.Response = &resp
	}
	return r
}

// timed is a correlation id due at unix ms at.
type timed struct {
	at  int64
	cid string
}

// timeHeap is a min-heap of timed entries (container/heap). Entries are not
// removed when their call moves on; each names the time it was pushed for,
// and a popped entry that no longer matches its record is dropped.
type timeHeap []timed

func (h timeHeap) Len() int           { return len(h) }
func (h timeHeap) Less(i, j int) bool { return h[i].at < h[j].at }
func (h timeHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *timeHeap) Push(x any)        { *h = append(*h, x.(timed)) }
func (h *timeHeap) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}
