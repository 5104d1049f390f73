package mcp

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/tetherdev/tether/dap"
	"github.com/tetherdev/tether/protocol"
	"github.com/tetherdev/tether/sandbox"
)

// StopView is what the debug tools that move a session return: where and
// why it stopped with the stack and locals (Snapshot) and the source around
// the stop, or that it ended (ExitCode, the end of its output), or that it
// still runs.
type StopView struct {
	SessionID string        `json:"session_id"`
	State     string        `json:"state"`
	Snapshot  *dap.Snapshot `json:"snapshot,omitempty"`
	Source    *Source       `json:"source,omitempty"`
	ExitCode  *int          `json:"exit_code,omitempty"`
	// Output is the end of what the program printed, when it ended.
	Output string `json:"output,omitempty"`
	// Note says what else happened, e.g. that run-to stopped elsewhere.
	Note string `json:"note,omitempty"`

	// root is the bridge's root, so the text shows paths relative to it
	// (as the file tools take them).
	root string
	// picked is whether the caller chose the snapshot's frame.
	picked bool
}

// Source is a few lines of a file around a line.
type Source struct {
	Path      string   `json:"path"`
	FirstLine int      `json:"first_line"`
	Lines     []string `json:"lines"`
}

// sourceContext is how many lines around the stop line are shown.
const sourceContext = 3

// viewOpts are the snapshot options of a view.
type viewOpts struct {
	expressions []string
	maxFrames   int
	depth       int
	frame       *int
}

// view shows session id as it is now, waiting up to wait for it to stop
// if it runs.
func (tc *toolCall) view(ctx context.Context, id string, wait time.Duration, o viewOpts) (StopView, error) {
	v := StopView{SessionID: id}
	var snap dap.Snapshot
	req := dap.SnapshotRequest{SessionID: id, WaitTimeoutMS: max(int(wait/time.Millisecond), 1), Expressions: o.expressions, MaxFrames: o.maxFrames, VariableDepth: o.depth, FrameIndex: o.frame}
	tc.wait("waiting for the session to stop")
	err := tc.call(ctx, protocol.DebugSnapshotEndpoint, req, wait+syncSlack, &snap)
	var te *toolError
	switch {
	case err == nil:
	case errors.As(err, &te) && te.Code == protocol.CodeSessionRunning:
		v.State = dap.StateRunning
		return v, nil
	case errors.As(err, &te) && te.Code == protocol.CodeSessionEnded:
		return tc.ended(ctx, id, nil)
	default:
		return v, err
	}
	v.State, v.Snapshot, v.picked = snap.State, &snap, o.frame != nil
	v.root = tc.s.workspaceRoot(ctx)
	if f, ok := focused(&snap); ok && f.Line > 0 {
		if rel, ok := relative(v.root, f.Path); ok {
			v.Source = tc.source(ctx, rel, f.Line)
		}
	}
	return v, nil
}

// ended shows a session that ended: its exit code (from the control
// result, or the session list) and the end of its output.
func (tc *toolCall) ended(ctx context.Context, id string, exit *int) (StopView, error) {
	v := StopView{SessionID: id, State: dap.StateEnded, ExitCode: exit}
	if exit == nil {
		var list dap.SessionList
		if tc.call(ctx, protocol.DebugListEndpoint, struct{}{}, quickCall, &list) == nil {
			for _, s := range list.Sessions {
				if s.SessionID == id {
					v.ExitCode = s.ExitCode
					v.Note = s.EndReason
				}
			}
		}
	}
	var out dap.OutputResult
	if tc.call(ctx, protocol.DebugOutputEndpoint, dap.OutputRequest{SessionID: id}, quickCall, &out) == nil {
		v.Output = tailRunes(out.Output, endedOutput)
	}
	return v, nil
}

// endedOutput is how much of an ended program's output a view keeps.
const endedOutput = 4000

// source reads the lines around line of file (relative to the bridge's
// root) through the root's read-file route; nil when the workspace cannot
// (the route is not served, the file is not text).
func (tc *toolCall) source(ctx context.Context, file string, at int) *Source {
	var r sandbox.ReadFileResult
	req := sandbox.ReadFileRequest{Path: file, StartLine: max(at-sourceContext, 1), EndLine: at + sourceContext}
	if err := tc.call(ctx, protocol.WorkspaceReadFileEndpoint, req, quickCall, &r); err != nil || r.Encoding != "" || r.StartLine == 0 {
		return nil
	}
	lines := strings.Split(strings.TrimSuffix(r.Content, "\n"), "\n")
	return &Source{Path: file, FirstLine: r.StartLine, Lines: lines}
}

// relative is path relative to root, when it is inside root.
func relative(root, path string) (string, bool) {
	if root == "" || !filepath.IsAbs(path) {
		return "", false
	}
	rel, err := filepath.Rel(root, path)
	if err != nil || rel == ".." || strings.HasPrefix(rel, "../") {
		return "", false
	}
	return filepath.ToSlash(rel), true
}

// Caps of a stop's text.
const (
	shownFrames   = 5
	shownLocals   = 40
	shownChildren = 8
)

func renderView(v StopView, next string) string {
	var b strings.Builder
	switch v.State {
	case dap.StateEnded:
		fmt.Fprintf(&b, "Session %s has ended", line(v.SessionID, maxValue))
		if v.ExitCode != nil {
			fmt.Fprintf(&b, " (exit code %d)", *v.ExitCode)
		}
		b.WriteString(".")
		if v.Note != "" {
			fmt.Fprintf(&b, " %s.", sentence(line(strings.TrimSuffix(v.Note, "."), maxMessage)))
		}
		if v.Output != "" {
			b.WriteString("\nProgram output (end):\n")
			b.WriteString(block(v.Output, endedOutput))
		}
		b.WriteString("\nNext: debug_start to run it again.")
		return b.String()
	case dap.StateStopped:
	default:
		fmt.Fprintf(&b, "Session %s is %s", line(v.SessionID, maxValue), line(v.State, maxValue))
		if v.Note != "" {
			fmt.Fprintf(&b, " (%s)", line(v.Note, maxMessage))
		}
		b.WriteString(". Next: debug_continue (it waits for the next stop) or debug_pause.")
		return b.String()
	}
	if v.Note != "" {
		b.WriteString(line(v.Note, maxMessage))
		b.WriteString("\n")
	}
	renderSnapshot(&b, v.Snapshot, v.root, v.picked)
	if v.Source != nil {
		at := 0
		if f, ok := focused(v.Snapshot); ok {
			at = f.Line
		}
		fmt.Fprintf(&b, "Source %s:\n", line(v.Source.Path, maxValue))
		for i, l := range v.Source.Lines {
			n := v.Source.FirstLine + i
			mark := "  "
			if n == at {
				mark = "→ "
			}
			fmt.Fprintf(&b, "%s%5d  %s\n", mark, n, line(l, maxValue))
		}
	}
	b.WriteString("Next: ")
	b.WriteString(next)
	return b.String()
}

func renderSnapshot(b *strings.Builder, s *dap.Snapshot, root string, picked bool) {
	if s == nil {
		return
	}
	reason := "stopped"
	if s.Stop != nil && s.Stop.Reason != "" {
		reason = s.Stop.Reason
	}
	fmt.Fprintf(b, "Stopped (%s)", line(reason, maxValue))
	if len(s.Frames) > 0 {
		f := s.Frames[0]
		fmt.Fprintf(b, " in %s at %s", line(f.Name, maxValue), where(f, root))
	}
	fmt.Fprintf(b, ", thread %d.\n", s.ThreadID)
	if s.Stop != nil && s.Stop.Signal != "" {
		fmt.Fprintf(b, "Post-mortem: the core was dumped on %s.\n", line(s.Stop.Signal, maxValue))
	}
	if s.Stop != nil && s.Stop.Exception != nil {
		renderException(b, s.Stop.Exception)
	} else if s.Stop != nil {
		for _, t := range []string{s.Stop.Description, s.Stop.Text} {
			if t != "" && t != reason {
				fmt.Fprintf(b, "%s\n", line(t, maxMessage))
			}
		}
	}
	focus, hasFocus := focused(s)
	if len(s.Frames) > 1 {
		b.WriteString("Stack:\n")
		for i, f := range s.Frames {
			if i == max(shownFrames, s.FrameIndex+1) {
				fmt.Fprintf(b, "  … %d more frames\n", len(s.Frames)-i)
				break
			}
			mark := "  "
			if i == s.FrameIndex && i > 0 {
				mark = "→ "
			}
			fmt.Fprintf(b, "%s#%d %s at %s\n", mark, i, line(f.Name, maxValue), where(f, root))
		}
	}
	switch {
	case hasFocus && s.FrameIndex > 0 && !picked:
		fmt.Fprintf(b, "Locals of #%d %s, the first frame of the workspace's own code (debug_evaluate reads there too; frame_index shows another):", s.FrameIndex, line(focus.Name, maxValue))
	case hasFocus && s.FrameIndex > 0:
		fmt.Fprintf(b, "Locals of #%d %s:", s.FrameIndex, line(focus.Name, maxValue))
	case hasFocus:
		fmt.Fprintf(b, "Locals of %s:", line(focus.Name, maxValue))
	default:
		b.WriteString("Locals:")
	}
	if len(s.Locals) == 0 {
		b.WriteString(" (none)")
	}
	b.WriteString("\n")
	renderVariables(b, s.Locals, "  ", shownLocals)
	for _, e := range s.Expressions {
		if e.Error != "" {
			fmt.Fprintf(b, "%s: error: %s\n", line(e.Expression, maxValue), line(e.Error, maxValue))
		} else {
			fmt.Fprintf(b, "%s = %s\n", line(e.Expression, maxValue), line(e.Result, maxValue))
		}
	}
}

func renderVariables(b *strings.Builder, vars []dap.Variable, indent string, limit int) {
	for i, v := range vars {
		if i == limit {
			fmt.Fprintf(b, "%s… %d more\n", indent, len(vars)-i)
			return
		}
		fmt.Fprintf(b, "%s%s = %s", indent, line(v.Name, maxValue), line(v.Value, maxValue))
		if v.Type != "" {
			fmt.Fprintf(b, " (%s)", line(v.Type, maxValue))
		}
		b.WriteString("\n")
		if len(v.Children) > 0 {
			renderVariables(b, v.Children, indent+"  ", shownChildren)
		}
	}
}

// sentence starts s with a capital letter.
func sentence(s string) string {
	r, n := utf8.DecodeRuneInString(s)
	return string(unicode.ToUpper(r)) + s[n:]
}

// focused is the frame a snapshot's locals are of (Snapshot.FrameIndex).
func focused(s *dap.Snapshot) (dap.Frame, bool) {
	if s == nil || s.FrameIndex < 0 || s.FrameIndex >= len(s.Frames) {
		return dap.Frame{}, false
	}
	return s.Frames[s.FrameIndex], true
}

// where is a frame's file:line, the file relative to the bridge's root
// when it is inside it.
func where(f dap.Frame, root string) string {
	file := f.Path
	if rel, ok := relative(root, f.Path); ok {
		file = rel
	}
	if file == "" {
		file = f.Source
	}
	if file == "" {
		return fmt.Sprintf("line %d", f.Line)
	}
	return fmt.Sprintf("%s:%d", line(file, maxValue), f.Line)
}

// stoppedNext is the next step after a stop.
const stoppedNext = "debug_step (over, into, out), debug_continue, debug_run_to, debug_evaluate, or debug_stop."
