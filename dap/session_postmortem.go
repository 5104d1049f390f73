//go:build !windows

package dap

import (
	"context"
	"os"
	"strings"

	"github.com/tetherdev/tether/protocol"
)

// Post-mortem sessions: start-session with core_file opens a core dump of
// program instead of running it. The session is stopped at the crash, with
// its stack, locals and the signal (StopInfo.Signal, read from the core);
// nothing can run, so continue and the steps answer unsupported.

// coreOpener is an adapter that opens core dumps: openCore turns cfg (its
// launch arguments for program) into the arguments that open core.
type coreOpener interface {
	openCore(cfg map[string]any, core string)
}

var (
	_ coreOpener = lldbDAP{}
	_ coreOpener = delveAdapter{}
)

// openCore: lldb-dap opens a core by attach with coreFile.
func (lldbDAP) openCore(cfg map[string]any, core string) {
	cfg["request"] = "attach"
	cfg["coreFile"] = core
	for _, k := range []string{"args", "env", "stopOnEntry", "cwd", "pid"} {
		delete(cfg, k)
	}
}

// openCore: delve opens a core by launch in mode core (dlv core).
func (delveAdapter) openCore(cfg map[string]any, core string) {
	cfg["request"] = "launch"
	cfg["mode"] = "core"
	cfg["coreFilePath"] = core
	for _, k := range []string{"args", "env", "stopOnEntry"} {
		delete(cfg, k)
	}
}

// coreAdapters names the adapters that open core files, for the error
// that answers any other.
func coreAdapters() string {
	var names []string
	for _, a := range Adapters {
		if _, ok := a.(coreOpener); ok {
			names = append(names, a.Name()+" ("+strings.Join(a.Languages()[:min(2, len(a.Languages()))], ", ")+")")
		}
	}
	return strings.Join(names, " and ")
}

// postMortem checks a start request with core_file and rewrites cfg (the
// adapter's arguments) to open the core. Every failure is answered before
// any adapter starts, naming the field.
func postMortem(root string, a Adapter, cfg map[string]any, req *StartRequest) (*coreInfo, error) {
	co, ok := a.(coreOpener)
	if !ok {
		return nil, protocol.Errorf(protocol.CodeUnsupported, "core_file: the %s adapter cannot open core dumps; %s can", a.Name(), coreAdapters())
	}
	program, _ := cfg["program"].(string)
	if program == "" || cfg["request"] != "launch" {
		return nil, protocol.Errorf(protocol.CodeInvalidPayload, "core_file needs program (the executable that dumped it), not an attach")
	}
	if _, err := os.Stat(program); err != nil {
		return nil, protocol.Errorf(protocol.CodeInvalidPayload, "program %s does not exist", program)
	}
	core := absIn(root, req.CoreFile)
	if fi, err := os.Stat(core); err != nil || fi.IsDir() {
		return nil, protocol.Errorf(protocol.CodeInvalidPayload, "core_file %s does not exist", core)
	}
	ci, err := readCore(core)
	if err != nil {
		return nil, protocol.Errorf(protocol.CodeInvalidPayload, "core_file %s %v", core, err)
	}
	if ok, by := ci.dumpedBy(program); !ok {
		return nil, protocol.Errorf(protocol.CodeInvalidPayload, "core_file %s does not match program %s: it was dumped by %s", core, program, by)
	}
	co.openCore(cfg, core)
	return ci, nil
}

// awaitCrashStop waits (bounded like a stopOnEntry start) for the stop a
// core opens at, so that start-session already answers stopped.
func (s *Session) awaitCrashStop(ctx context.Context, res *StartResult) {
	_, _ = s.waitStop(ctx, 0, boundBy(ctx, entryWait))
	s.mu.Lock()
	res.State = s.state
	res.Stop = s.stopIfStoppedLocked()
	s.mu.Unlock()
}

// refusePostMortem answers an execution-control command on a core.
func (s *Session) refusePostMortem(cmd string) error {
	if s.core == nil || cmd == CmdPause {
		return nil
	}
	return protocol.Errorf(protocol.CodeUnsupported, "session %s is a post-mortem of core file %s: its program cannot %s; read it with snapshot and evaluate, or start a new session to run the program", s.id, s.core.path, cmd)
}
