//go:build !windows

package dap

import (
	"context"
	"fmt"
	"strings"
	"time"
)

// lldbDAP is LLVM's lldb-dap (formerly lldb-vscode), over stdio. It also
// serves cppdbg (Microsoft C/C++) and lldb (CodeLLDB) configurations.
//
// Its quirks (lldb-dap 19): a stopOnEntry stop and a pause are both
// reported as exception "signal SIGSTOP", and a watchpoint's stop as
// breakpoint "watchpoint N" (fixStop); a pause may be answered without any
// stopped event (confirmPause); data breakpoints want addresses
// (watchName).
type lldbDAP struct{}

var (
	_ stopFixer      = lldbDAP{}
	_ pauseConfirmer = lldbDAP{}
)

func (lldbDAP) Name() string { return "lldb-dap" }
func (lldbDAP) Types() []string {
	return []string{"lldb-dap", "lldb", "cppdbg", "codelldb", "lldb-vscode"}
}
func (lldbDAP) Languages() []string {
	return []string{"c", "cpp", "c++", "rust", "objc", "objective-c", "swift"}
}
func (lldbDAP) InstallHint() string { return lldbInstallHint }

func (lldbDAP) Find(env *Env) (Command, error) {
	if p := env.findLLDBDAP(); p != "" {
		return Command{Path: p}, nil
	}
	return Command{}, fmt.Errorf("neither lldb-dap, lldb-dap-NN, lldb-vscode nor lldb-vscode-NN is on PATH%s", lldbElsewhere)
}

// findLLDBDAP is the lldb-dap to run: on PATH (or its older name
// lldb-vscode, or a Debian versioned one), else where the platform's
// developer tools install it (Xcode's on macOS); "" if none.
func (e *Env) findLLDBDAP() string {
	for _, name := range []string{"lldb-dap", "lldb-vscode"} {
		if p := e.lookVersioned(name); p != "" {
			return p
		}
	}
	return e.platformLLDBDAP()
}

func (lldbDAP) Arguments(cfg map[string]any) map[string]any {
	if c, ok := cfg["connect"].(map[string]any); ok && cfg["request"] == "attach" {
		// A remote attach: to an lldb-server gdbserver (or any gdb
		// remote stub) at the checked address (attach.go). lldb-dap's own
		// gdb-remote-port connects synchronously; attachCommands
		// ["gdb-remote …"] raced lldb-dap 19's wait for the stop, which
		// now and then saw the new process still unloaded ("process
		// unloaded during launch or attach", 1 attach in 5 here).
		delete(cfg, "connect")
		cfg["gdb-remote-hostname"] = fmt.Sprint(c["host"])
		cfg["gdb-remote-port"] = c["port"]
	}
	// cppdbg spelling → lldb-dap spelling.
	rename(cfg, "stopAtEntry", "stopOnEntry")
	rename(cfg, "processId", "pid")
	if pid, ok := cfg["pid"].(string); ok {
		var n int
		if _, err := fmt.Sscan(pid, &n); err == nil {
			cfg["pid"] = n
		}
	}
	if envList, ok := cfg["environment"].([]any); ok { // cppdbg: [{name, value}]
		delete(cfg, "environment")
		env := map[string]any{}
		for _, e := range envList {
			if kv, ok := e.(map[string]any); ok {
				if n, ok := kv["name"].(string); ok {
					env[n] = fmt.Sprint(kv["value"])
				}
			}
		}
		cfg["env"] = env
	}
	// lldb-dap 19 takes env as ["K=V"]; newer versions take both.
	if env, ok := cfg["env"].(map[string]any); ok {
		list := make([]any, 0, len(env))
		for _, k := range sortedKeys(env) {
			list = append(list, k+"="+fmt.Sprint(env[k]))
		}
		cfg["env"] = list
	}
	for _, k := range []string{"MIMode", "miDebuggerPath", "setupCommands", "externalConsole", "console", "terminal"} {
		delete(cfg, k)
	}
	return cfg
}

// fixStop turns lldb-dap's "signal SIGSTOP" exception back into the stop
// it stands for: the entry stop of a stopOnEntry launch, or a pause.
func (lldbDAP) fixStop(st *StopInfo, at stopContext) {
	sigstop := strings.Contains(st.Description+st.Text, "SIGSTOP")
	switch {
	case at.first && at.entry && st.Reason != "breakpoint" && st.Reason != "entry" && sigstop:
		st.Description = "entry (" + st.Description + ")"
		st.Reason = "entry"
	case at.pausing && st.Reason == "exception" && sigstop:
		st.Description = "pause (" + st.Description + ")"
		st.Reason = "pause"
	case st.Reason == "breakpoint" && strings.HasPrefix(st.Description, "watchpoint"):
		st.Reason = "data breakpoint" // DAP's reason for a watchpoint's stop
	}
}

// pauseEventWait is how long a pause waits for lldb-dap's stopped event
// before asking again.
const pauseEventWait = 500 * time.Millisecond

// pauseRetries is how many times a pause that brought no stopped event is
// sent again.
const pauseRetries = 3

// confirmPause: lldb-dap 19 answers pause but may send no stopped event,
// and a pause right after a continue can be lost (answered, never stopped);
// asking again stops it. If still no event came, a thread that yields a
// stack trace is stopped, whatever the events said.
func (lldbDAP) confirmPause(ctx context.Context, s *Session, c *Client, thread, before int, wait time.Duration) error {
	st, err := s.waitStop(ctx, before, boundBy(ctx, min(wait, pauseEventWait)))
	for retry := 0; err == nil && st == StateRunning && retry < pauseRetries; retry++ {
		if err = c.Do(ctx, CmdPause, map[string]any{"threadId": thread}, nil); err != nil {
			return s.adapterError(err)
		}
		st, err = s.waitStop(ctx, before, boundBy(ctx, min(wait, pauseEventWait)))
	}
	if err != nil {
		return err
	}
	if st == StateRunning {
		if frames, err := s.frames(ctx, c, thread, 1); err == nil && len(frames) > 0 {
			s.assumePaused(thread, before, "paused (the adapter sent no stopped event)")
		}
	}
	return nil
}

// watchName: lldb-dap 19's dataBreakpointInfo evaluates a name it does
// not find among the frame's variables as a pointer to the watched bytes,
// so an lvalue is sent as its address.
func (lldbDAP) watchName(expr string) string { return "&(" + expr + ")" }

// watchAddress: size bytes at addr, as a pointer to them.
func (lldbDAP) watchAddress(addr string, size int) string {
	return fmt.Sprintf("(char (*)[%d])%s", size, addr)
}
