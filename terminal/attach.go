//go:build !windows

package terminal

import (
	"bytes"
	"context"
)

const (
	// transcriptSize is how much recent terminal output Attach replays.
	transcriptSize = 64 << 10
	// subscriberBuffer is how many chunks an attached viewer may lag
	// before it is dropped; the terminal never waits for a viewer.
	subscriberBuffer = 256
)

// Attach subscribes to the visible terminal as `tether attach` shows it:
// each command the agent ran (as a "tether:<cwd>$ command" line), what
// came back, and what a person typed. It returns the recent transcript
// and a channel of what follows, with nothing lost or repeated between
// the two. Chunks use \r\n line ends for a raw terminal and must not be
// modified. The channel is closed when ctx ends, when the Manager closes,
// or when the viewer falls behind by more than 256 chunks (attach again).
// Attach does not start the shell; the first command or WriteTerminal
// does.
func (m *Manager) Attach(ctx context.Context) (snapshot []byte, live <-chan []byte) {
	ch := make(chan []byte, subscriberBuffer)
	vt := &m.vt
	vt.mu.Lock()
	if m.isClosed() {
		vt.mu.Unlock()
		close(ch)
		return nil, ch
	}
	snapshot, _ = vt.transcript.ReadAt(0, -1)
	vt.subs[ch] = struct{}{}
	vt.mu.Unlock()
	context.AfterFunc(ctx, func() {
		vt.mu.Lock()
		defer vt.mu.Unlock()
		if _, ok := vt.subs[ch]; ok {
			delete(vt.subs, ch)
			close(ch)
		}
	})
	return snapshot, ch
}

// WriteTerminal types p into the visible terminal as keystrokes (tether
// attach --write), starting the shell if there is none. While a line a
// person typed runs, agent commands run hidden instead of queueing
// behind it; a half-typed line is discarded when the agent's next
// command is typed.
func (m *Manager) WriteTerminal(ctx context.Context, p []byte) error {
	vt := &m.vt
	vt.mu.Lock()
	if m.isClosed() {
		vt.mu.Unlock()
		return ErrClosed
	}
	sh := vt.sh
	if sh != nil && sh.dead {
		sh = nil
	}
	start := sh == nil && !vt.busy
	if start {
		vt.busy = true
	}
	vt.mu.Unlock()
	if start {
		var err error
		sh, err = m.startShell(ctx)
		m.releaseTerminal()
		if err != nil {
			return err
		}
	}
	if sh == nil {
		return errStarting
	}
	vt.mu.Lock()
	if sh.current == nil && bytes.ContainsAny(p, "\r\n") {
		vt.humanBusy = true
	}
	vt.mu.Unlock()
	m.echoInput(sh, p)
	return sh.write(ctx, p)
}

// echoInput shows typed input in the transcript when the terminal itself
// would not: tether keeps echo off so its own typing never shows as
// output, but a program in raw mode echoes for itself.
func (m *Manager) echoInput(sh *shell, p []byte) {
	if len(p) == 0 || !sh.canonicalSilent() {
		return
	}
	e := bytes.ReplaceAll(p, []byte("\r"), []byte("\n"))
	m.vt.mu.Lock()
	m.broadcastLocked(e)
	m.vt.mu.Unlock()
}

// broadcastLocked appends p to the transcript and sends it to every
// viewer, turning bare \n into \r\n (the terminal's own translation is
// off). A viewer whose buffer is full is dropped. vt.mu must be held.
func (m *Manager) broadcastLocked(p []byte) {
	if len(p) == 0 {
		return
	}
	vt := &m.vt
	out := make([]byte, 0, len(p)+bytes.Count(p, []byte("\n")))
	prev := vt.lastByte
	for _, c := range p {
		if c == '\n' && prev != '\r' {
			out = append(out, '\r')
		}
		out = append(out, c)
		prev = c
	}
	vt.lastByte = prev
	_, _ = vt.transcript.Write(out)
	for ch := range vt.subs {
		select {
		case ch <- out:
		default:
			delete(vt.subs, ch)
			close(ch)
		}
	}
}
