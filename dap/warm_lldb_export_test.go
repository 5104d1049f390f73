//go:build !windows

package dap

import (
	"context"
	"errors"
)

// WarmCommand runs an lldb command in the ready warm adapter of that name,
// as prepareWarm does (evaluate in repl context), and returns its result.
// The adapter stays ready.
func (m *Manager) WarmCommand(ctx context.Context, adapter, cmd string) (string, error) {
	m.warm.mu.Lock()
	w := m.warm.ready[adapter]
	m.warm.mu.Unlock()
	if w == nil {
		return "", errors.New("no warm " + adapter)
	}
	var body struct {
		Result string `json:"result"`
	}
	err := w.proc.client.Do(ctx, "evaluate", map[string]any{"expression": "`" + cmd, "context": "repl"}, &body)
	return body.Result, err
}
