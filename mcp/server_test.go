//go:build !windows

// These tests serve a workspace with a bridge in process, which does not
// build on Windows (docs/platforms.md).

package mcp_test

import (
	"context"
	"encoding/json"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/jsonschema-go/jsonschema"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/tetherdev/tether/bridge"
	"github.com/tetherdev/tether/broker/caller"
	"github.com/tetherdev/tether/internal/testwait"
	"github.com/tetherdev/tether/protocol"
	"github.com/tetherdev/tether/terminal"
)

// offline answers every call as a broker does for a workspace nobody serves.
func offline() *fakeWorkspace {
	return &fakeWorkspace{answer: func(context.Context, caller.Request) protocol.ToolResponse {
		return protocol.Failure("c", protocol.CodeWorkspaceOffline, `no client serves workspace "ws-test"`)
	}}
}

func TestToolsAreListedWithStrictInputSchemas(t *testing.T) {
	cs := client(t, offline(), nil)
	res, err := cs.ListTools(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	if n := len(res.Tools); n < 20 || n > 30 {
		t.Errorf("%d tools, want about 20 (20-30)", n)
	}
	seen := map[string]bool{}
	for _, tool := range res.Tools {
		if seen[tool.Name] {
			t.Errorf("tool %s listed twice", tool.Name)
		}
		seen[tool.Name] = true
		if len(tool.Description) < 40 {
			t.Errorf("%s: description %q too short to say when to use it", tool.Name, tool.Description)
		}
		raw, _ := json.Marshal(tool.InputSchema)
		var s jsonschema.Schema
		if err := json.Unmarshal(raw, &s); err != nil {
			t.Fatalf("%s: input schema %s: %v", tool.Name, raw, err)
		}
		if _, err := s.Resolve(nil); err != nil {
			t.Errorf("%s: input schema does not resolve: %v", tool.Name, err)
		}
		if s.Type != "object" || s.AdditionalProperties == nil || s.AdditionalProperties.Not == nil {
			t.Errorf("%s: input schema %s: want an object that refuses other properties", tool.Name, raw)
		}
		if tool.OutputSchema == nil {
			t.Errorf("%s: no output schema", tool.Name)
		}
	}
	for _, want := range []string{"terminal_run", "terminal_output", "file_read", "file_str_replace", "file_search", "git_diff", "git_commit", "git_push",
		"sandbox_acquire", "sandbox_release", "debug_start", "debug_attach", "debug_continue", "debug_step", "debug_run_to", "debug_snapshot", "debug_stop"} {
		if !seen[want] {
			t.Errorf("tool %s missing", want)
		}
	}
}

func TestUnknownArgumentIsRefusedBeforeAnyCall(t *testing.T) {
	ws := offline()
	cs := client(t, ws, nil)
	res, txt := callTool(t, cs, "terminal_run", map[string]any{"command": "true", "comand": "oops"})
	if !res.IsError || !strings.Contains(txt, "comand") {
		t.Fatalf("isError=%v %q, want the unknown argument named", res.IsError, txt)
	}
	res, txt = callTool(t, cs, "debug_start", map[string]any{"language": "c", "program": "p", "breakpoints": []any{map[string]any{"path": "a.c", "line": 3, "colum": 1}}})
	if !res.IsError || !strings.Contains(txt, "colum") {
		t.Fatalf("nested unknown argument: isError=%v %q", res.IsError, txt)
	}
	if n := len(ws.called()); n != 0 {
		t.Fatalf("%d tether calls made for refused arguments", n)
	}
}

func TestArgumentsFailingTheSchemaAreRefused(t *testing.T) {
	ws := offline()
	cs := client(t, ws, nil)
	for name, args := range map[string]map[string]any{
		"terminal_run":   {"command": 42},
		"file_read":      {},
		"debug_step":     {"session_id": "s", "kind": "sideways"},
		"debug_continue": {"session_id": "s", "timeout_s": 9999},
	} {
		if res, txt := callTool(t, cs, name, args); !res.IsError {
			t.Errorf("%s %v: not refused: %q", name, args, txt)
		}
	}
	if n := len(ws.called()); n != 0 {
		t.Fatalf("%d tether calls made for refused arguments", n)
	}
}

func TestRunToNeedsLineOrLineContent(t *testing.T) {
	ws := offline()
	cs := client(t, ws, nil)
	for _, args := range []map[string]any{{"session_id": "s", "path": "a.c"}, {"session_id": "s", "path": "a.c", "line": 3, "line_content": "x;"}} {
		if txt := fails(t, cs, "debug_run_to", args, protocol.CodeInvalidRequest); !strings.Contains(txt, "line_content") {
			t.Errorf("text %q does not name the arguments", txt)
		}
	}
	if n := len(ws.called()); n != 0 {
		t.Fatalf("%d tether calls made", n)
	}
}

func TestOfflineWorkspaceAnswersAtOnceWithNextStep(t *testing.T) {
	cs := client(t, offline(), nil)
	start := time.Now()
	txt := fails(t, cs, "debug_continue", map[string]any{"session_id": "s"}, protocol.CodeWorkspaceOffline)
	if took := time.Since(start); took > time.Second {
		t.Errorf("took %s", took)
	}
	if !strings.Contains(txt, "Next:") || !strings.Contains(txt, "bridge") {
		t.Errorf("text %q: want the next step", txt)
	}
}

func TestSessionRunningSaysWhatToCall(t *testing.T) {
	ws := &fakeWorkspace{answer: func(context.Context, caller.Request) protocol.ToolResponse {
		return protocol.Failure("c", protocol.CodeSessionRunning, "session dbg-1 is running; next needs it stopped")
	}}
	cs := client(t, ws, nil)
	txt := fails(t, cs, "debug_step", map[string]any{"session_id": "dbg-1"}, protocol.CodeSessionRunning)
	if !strings.Contains(txt, "call debug_continue with wait or debug_pause") {
		t.Errorf("text %q", txt)
	}
}

func TestUnreadableResultIsAnErrorNotAProtocolFailure(t *testing.T) {
	ws := &fakeWorkspace{answer: func(context.Context, caller.Request) protocol.ToolResponse {
		return protocol.Success("c", json.RawMessage(`{"exit_code":"zero","output":7}`))
	}}
	cs := client(t, ws, nil)
	fails(t, cs, "terminal_run", map[string]any{"command": "true"}, protocol.CodeInternalError)
}

// blocking answers every call when its ctx ends, and reports that end.
func blocking() (*fakeWorkspace, <-chan error) {
	ended := make(chan error, 16)
	return &fakeWorkspace{answer: func(ctx context.Context, req caller.Request) protocol.ToolResponse {
		if req.Endpoint == protocol.WorkspaceCapabilitiesEndpoint {
			return protocol.Failure("c", protocol.CodeUnknownRoute, "no route")
		}
		<-ctx.Done()
		ended <- ctx.Err()
		return protocol.Failure("c", protocol.CodeCancelled, "caller gave up")
	}}, ended
}

func TestClientCancelCancelsTheTetherCall(t *testing.T) {
	ws, ended := blocking()
	cs := client(t, ws, nil)
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() {
		_, err := cs.CallTool(ctx, &sdk.CallToolParams{Name: "terminal_run", Arguments: map[string]any{"command": "sleep 100", "timeout_s": 100}})
		errc <- err
	}()
	testwait.Until(t, 5*time.Second, func() bool { return len(ws.called()) >= 1 }, "the tether call")
	cancel()
	select {
	case err := <-ended:
		if err != context.Canceled {
			t.Fatalf("tether call ended with %v, want cancelled", err)
		}
	case <-time.After(2 * time.Second):
		t.Fatal("the tether call was not cancelled")
	}
	if err := <-errc; err == nil {
		t.Fatal("cancelled CallTool returned no error")
	}
}

func TestToolCallEndsByItsDeadline(t *testing.T) {
	ws, _ := blocking()
	cs := client(t, ws, nil)
	start := time.Now()
	res, txt := callTool(t, cs, "debug_snapshot", map[string]any{"session_id": "s", "timeout_s": 0.5})
	took := time.Since(start)
	if !res.IsError {
		t.Fatalf("not an error: %q", txt)
	}
	// timeout_s, plus the grace the tools keep for their last calls.
	if took > 6*time.Second {
		t.Errorf("took %s", took)
	}
	if reqs := ws.called(); len(reqs) != 1 || reqs[0].Timeout > 3*time.Second {
		t.Errorf("calls %+v: want one, bounded by timeout_s plus a little", reqs)
	}
}

func TestProgressIsNotifiedWhileWaiting(t *testing.T) {
	release := make(chan struct{})
	ws := &fakeWorkspace{answer: func(ctx context.Context, req caller.Request) protocol.ToolResponse {
		select {
		case <-release:
		case <-ctx.Done():
		}
		return success(terminal.ExecResult{Success: true, Command: "make", Output: "done\n"})
	}}
	var mu sync.Mutex
	var got []*sdk.ProgressNotificationParams
	cs := client(t, ws, &sdk.ClientOptions{ProgressNotificationHandler: func(_ context.Context, r *sdk.ProgressNotificationClientRequest) {
		mu.Lock()
		got = append(got, r.Params)
		n := len(got)
		mu.Unlock()
		if n == 2 {
			close(release)
		}
	}})
	params := &sdk.CallToolParams{Name: "terminal_run", Arguments: map[string]any{"command": "make"}}
	params.SetProgressToken("tok-1")
	res, err := cs.CallTool(context.Background(), params)
	if err != nil || res.IsError {
		t.Fatalf("%v %v", err, res)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(got) < 2 {
		t.Fatalf("%d progress notifications", len(got))
	}
	if got[0].ProgressToken != "tok-1" || got[1].Progress <= got[0].Progress || got[0].Total != 30 || !strings.Contains(got[0].Message, "make") {
		t.Errorf("progress %+v then %+v", got[0], got[1])
	}
}

func TestNoProgressWithoutAToken(t *testing.T) {
	ws := &fakeWorkspace{answer: func(ctx context.Context, req caller.Request) protocol.ToolResponse {
		// The call outlasting progressInterval (1s) is the subject: a
		// client with a token would be told of progress by now.
		time.Sleep(1500 * time.Millisecond)
		return success(terminal.ExecResult{Success: true})
	}}
	calls := 0
	var mu sync.Mutex
	cs := client(t, ws, &sdk.ClientOptions{ProgressNotificationHandler: func(context.Context, *sdk.ProgressNotificationClientRequest) {
		mu.Lock()
		calls++
		mu.Unlock()
	}})
	ok(t, cs, "terminal_run", map[string]any{"command": "true"}, nil)
	mu.Lock()
	defer mu.Unlock()
	if calls != 0 {
		t.Fatalf("%d progress notifications without a progress token", calls)
	}
}

func TestEveryToolIsListedWhenTheBridgeServesEverything(t *testing.T) {
	// Every tool's route patterns must match a route a real bridge serves:
	// a route renamed on the bridge would hide its tool.
	br := newInprocBridgeWith(t, nil, bridge.Config{SandboxDir: t.TempDir()})
	all := listNames(t, client(t, offline(), nil))
	if got := listNames(t, client(t, br, nil)); !slices.Equal(got, all) {
		t.Fatalf("listed %v, want every tool %v", got, all)
	}
}

func TestToolsListedFollowTheBridgesPolicy(t *testing.T) {
	for name, c := range map[string]struct {
		cfg           bridge.Config
		shown, hidden []string
	}{
		"read-only": {bridge.Config{ReadOnly: true},
			[]string{"file_read", "file_list", "file_search", "git_status", "git_diff", "debug_context"},
			[]string{"file_write", "file_str_replace", "terminal_run", "terminal_output", "debug_start", "debug_continue", "sandbox_acquire", "git_commit"}},
		"no sandbox dir": {bridge.Config{},
			[]string{"file_write", "terminal_run", "debug_start", "git_diff"},
			[]string{"sandbox_acquire", "sandbox_release", "git_commit", "git_push"}},
		// The session tools serve a sandbox's async sessions too.
		"files and terminal off, sandboxes on": {bridge.Config{Disable: []string{"files", "terminal", "git"}},
			[]string{"file_read", "file_write", "terminal_run", "git_diff", "git_commit", "debug_start", "terminal_output", "terminal_input", "terminal_signal"},
			nil},
	} {
		t.Run(name, func(t *testing.T) {
			cfg := c.cfg
			if name == "files and terminal off, sandboxes on" {
				cfg.SandboxDir = t.TempDir()
			}
			names := listNames(t, client(t, newInprocBridgeWith(t, nil, cfg), nil))
			for _, want := range c.shown {
				if !slices.Contains(names, want) {
					t.Errorf("%s not listed: %v", want, names)
				}
			}
			for _, hide := range c.hidden {
				if slices.Contains(names, hide) {
					t.Errorf("%s listed", hide)
				}
			}
		})
	}
}

func TestWorkspaceThatCannotTellGetsEveryTool(t *testing.T) {
	all := listNames(t, client(t, offline(), nil))
	unknown := &fakeWorkspace{answer: func(context.Context, caller.Request) protocol.ToolResponse {
		return protocol.Failure("c", protocol.CodeUnknownRoute, "no route")
	}}
	if got := listNames(t, client(t, unknown, nil)); !slices.Equal(got, all) {
		t.Fatalf("tools %v, want all %v", got, all)
	}
}

func listNames(t *testing.T, cs *sdk.ClientSession) []string {
	t.Helper()
	res, err := cs.ListTools(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, tool := range res.Tools {
		names = append(names, tool.Name)
	}
	slices.Sort(names)
	return names
}
