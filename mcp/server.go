package mcp

import (
	"context"
	"errors"
	"reflect"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/jsonschema-go/jsonschema"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/rs/zerolog"

	"github.com/tetherdev/tether/protocol"
)

// Options configure a Server.
type Options struct {
	// Caller makes the tether calls; required.
	Caller Caller
	// Workspace is the tether workspace every tool acts on; required.
	Workspace string
	// Version is reported to clients as the server's version.
	Version string
	Logger  zerolog.Logger
}

// Server is the MCP server of one tether workspace: the tool catalog, each
// tool mapped to tether calls on the workspace. It may serve any number of
// MCP sessions at once, over any transport. All methods are safe for
// concurrent use.
type Server struct {
	opts  Options
	sdk   *sdk.Server
	specs map[string]spec // by tool name; written only while New registers
	debug debugSessions
	root  rootCache // the bridge's root, from its capabilities
}

// New builds the server and registers its tools.
func New(opts Options) (*Server, error) {
	if opts.Caller == nil {
		return nil, errors.New("mcp: Options.Caller is required")
	}
	if opts.Workspace == "" {
		return nil, errors.New("mcp: Options.Workspace is required")
	}
	if opts.Version == "" {
		opts.Version = "dev"
	}
	s := &Server{opts: opts, specs: make(map[string]spec)}
	s.sdk = sdk.NewServer(&sdk.Implementation{Name: "tether", Title: "tether", Version: opts.Version}, &sdk.ServerOptions{
		Instructions: instructions,
		SchemaCache:  schemaCache,
	})
	s.sdk.AddReceivingMiddleware(s.listServed)
	addTerminalTools(s)
	addFileTools(s)
	addSandboxTools(s)
	addDebugTools(s)
	addDebugAttachTool(s)
	return s, nil
}

// schemaCache is shared by every Server: the tool schemas are the same for
// all workspaces.
var schemaCache = sdk.NewSchemaCache()

const instructions = `tether runs commands, edits files and debugs programs in one workspace: ` +
	`a directory on a developer's machine or server (the bridge's root), reached through a broker. ` +
	`Paths are relative to that root. To work on a repository in isolation instead, call sandbox_acquire ` +
	`and pass the sandbox_id it returns to the file, search, git and terminal tools. ` +
	`Debugging: debug_start (with breakpoints, by line or by the line's text), then debug_continue, ` +
	`which waits for the next stop and shows where it stopped, the stack, the locals and the source.`

// SDK returns the underlying MCP SDK server, for transports that need it
// (sdk.NewStreamableHTTPHandler).
func (s *Server) SDK() *sdk.Server { return s.sdk }

// Run serves one session on t (e.g. &sdk.StdioTransport{}) until the client
// disconnects or ctx ends. The session is closed when Run returns: the
// SDK's own Run leaves its keepalive running after a client disconnects.
func (s *Server) Run(ctx context.Context, t sdk.Transport) error {
	ss, err := s.sdk.Connect(ctx, t, nil)
	if err != nil {
		return err
	}
	stop := context.AfterFunc(ctx, func() { _ = ss.Close() })
	defer stop()
	err = ss.Wait()
	_ = ss.Close()
	if ctx.Err() != nil {
		return ctx.Err()
	}
	return err
}

// Sessions reports how many MCP sessions the server holds.
func (s *Server) Sessions() int {
	n := 0
	for range s.sdk.Sessions() {
		n++
	}
	return n
}

// Close ends every session; their tool calls in flight are cancelled.
func (s *Server) Close() {
	for ss := range s.sdk.Sessions() {
		_ = ss.Close()
	}
}

// spec describes one tool besides its schemas.
type spec struct {
	name        string
	title       string
	description string
	// routes are the bridge routes the tool calls (gin patterns, as
	// capabilities lists them); it is listed when one of them is served.
	routes []string
	// Annotations for the client.
	readOnly, destructive, idempotent bool
	// output is the output schema, from the result type (see add).
	output *jsonschema.Schema
}

// handler runs a tool: the structured result and the text a model reads.
type handler[In, Out any] func(ctx context.Context, tc *toolCall, in In) (Out, string, error)

// timed is implemented by tool arguments that bound a wait with timeout_s.
type timed interface{ timeout() time.Duration }

// Time bounds of a tool call. A tool call ends by its timeout plus
// toolGrace: the tether calls after the wait (a snapshot, the source
// around a stop) are bounded by that grace.
const (
	defaultTimeout = 30 * time.Second // below the TypeScript SDK's 60 s request timeout
	toolGrace      = 5 * time.Second
	quickCall      = 5 * time.Second // a tether call that does not wait for the program
)

// add registers a tool on s. The SDK decodes and checks the arguments
// against the input schema before h runs. The output schema, reflected from
// Out like the input's, is published with the tool in tools/list
// (listServed) rather than given to AddTool: the SDK would decode every
// structured result again (a fresh 32 KB buffer a decode) to check it
// against the schema, which costs a third of a tool call's time in the SDK,
// for results that are values of Out, the type the schema describes.
// Clients still check them (the TypeScript SDK does; so do the tests).
func add[In, Out any](s *Server, sp spec, h handler[In, Out]) {
	in, err := inputSchema(reflect.TypeFor[In]())
	if err != nil {
		panic("mcp: input schema of " + sp.name + ": " + err.Error())
	}
	out, err := outputSchema(reflect.TypeFor[Out]())
	if err != nil {
		panic("mcp: output schema of " + sp.name + ": " + err.Error())
	}
	tool := &sdk.Tool{
		Name:        sp.name,
		Title:       sp.title,
		Description: sp.description,
		InputSchema: in,
		Annotations: &sdk.ToolAnnotations{
			Title:           sp.title,
			ReadOnlyHint:    sp.readOnly,
			DestructiveHint: &sp.destructive,
			IdempotentHint:  sp.idempotent,
			OpenWorldHint:   new(false),
		},
	}
	sp.output = out
	s.specs[sp.name] = sp
	sdk.AddTool(s.sdk, tool, func(ctx context.Context, req *sdk.CallToolRequest, args In) (*sdk.CallToolResult, any, error) {
		timeout := defaultTimeout
		if t, ok := any(args).(timed); ok {
			timeout = t.timeout()
		}
		ctx, cancel := context.WithTimeout(s.traceContext(ctx, req), timeout+toolGrace)
		defer cancel()
		tc := &toolCall{s: s, name: sp.name, timeout: timeout, started: time.Now()}
		stop := tc.reportProgress(ctx, req)
		result, text, err := h(ctx, tc, args)
		stop()
		tc.log(err)
		if err != nil {
			return nil, nil, asToolError(ctx, err)
		}
		return &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: text}}, StructuredContent: result}, nil, nil
	})
}

// asToolError gives every failure a tether code: a tool error as it is, the
// tool call's own deadline as timeout.
func asToolError(ctx context.Context, err error) *toolError {
	var te *toolError
	if errors.As(err, &te) {
		return te
	}
	if errors.Is(ctx.Err(), context.DeadlineExceeded) {
		return &toolError{Code: protocol.CodeTimeout, Message: err.Error()}
	}
	return &toolError{Code: protocol.CodeInternalError, Message: err.Error()}
}

// toolCall is one tool call in progress. Its handler runs on one
// goroutine; waiting is also read by the progress reporter.
type toolCall struct {
	s       *Server
	name    string
	timeout time.Duration
	started time.Time
	calls   int // tether calls made
	waiting atomic.Pointer[string]
}

// wait tells progress notifications what the tool waits for.
func (tc *toolCall) wait(what string) { tc.waiting.Store(&what) }

// progressInterval is how often a tool call that waits tells a client that
// asked for progress (a progress token) how long it has waited.
const progressInterval = time.Second

// reportProgress sends progress notifications while the tool call runs, if
// the client gave a progress token. The returned function stops them and
// waits for the sender.
func (tc *toolCall) reportProgress(ctx context.Context, req *sdk.CallToolRequest) func() {
	token := req.Params.GetProgressToken()
	if token == nil || req.Session == nil {
		return func() {}
	}
	ctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Go(func() {
		tick := time.NewTicker(progressInterval)
		defer tick.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
			msg := "working"
			if w := tc.waiting.Load(); w != nil {
				msg = *w
			}
			elapsed := time.Since(tc.started)
			_ = req.Session.NotifyProgress(ctx, &sdk.ProgressNotificationParams{
				ProgressToken: token,
				Progress:      elapsed.Seconds(),
				Total:         tc.timeout.Seconds(),
				Message:       msg + " (" + elapsed.Round(time.Second).String() + " of " + tc.timeout.String() + ")",
			})
		}
	})
	return func() { cancel(); wg.Wait() }
}

func (tc *toolCall) log(err error) {
	ev := tc.s.opts.Logger.Debug()
	if ev == nil {
		return
	}
	ev = ev.Str("workspace_id", tc.s.opts.Workspace).Str("tool", tc.name).Int("tether_calls", tc.calls).Dur("took", time.Since(tc.started))
	if te := (*toolError)(nil); errors.As(err, &te) {
		ev = ev.Str("error", te.Code)
	}
	ev.Msg("mcp tool call")
}
