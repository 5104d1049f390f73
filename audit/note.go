package audit

import (
	"context"
	"sync"
)

// Note gathers what the code serving a request adds to its line, which
// another part writes: the bridge's terminal adds a call's command line,
// its debugger the adapter, and the dispatcher, which knows neither,
// writes the line. It may be added to while the line is written (a
// handler past its deadline): its methods are safe for concurrent use. A
// nil *Note takes nothing.
type Note struct {
	mu   sync.Mutex
	adds []func(*Event)
}

// Add has f set fields of the line (Event.Command, Event.Adapter). Never
// a payload, a file's content or a secret.
func (n *Note) Add(f func(e *Event)) {
	if n == nil {
		return
	}
	n.mu.Lock()
	n.adds = append(n.adds, f)
	n.mu.Unlock()
}

// Apply sets on e what was added so far.
func (n *Note) Apply(e *Event) {
	if n == nil {
		return
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	for _, add := range n.adds {
		add(e)
	}
}

// WithCommand sets a terminal call's command line; WithAdapter a debug
// call's adapter.
func WithCommand(line string) func(*Event) { return func(e *Event) { e.Command = line } }
func WithAdapter(name string) func(*Event) { return func(e *Event) { e.Adapter = name } }

type noteKey struct{}

// WithNote returns ctx carrying a new Note for the request served under
// it.
func WithNote(ctx context.Context) context.Context {
	return context.WithValue(ctx, noteKey{}, &Note{})
}

// NoteFrom is the Note ctx carries; nil when none.
func NoteFrom(ctx context.Context) *Note {
	n, _ := ctx.Value(noteKey{}).(*Note)
	return n
}
