//go:build !windows

package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"time"

	"github.com/tetherdev/tether/bridge"
	"github.com/tetherdev/tether/broker"
	"github.com/tetherdev/tether/broker/auth"
)

var nonIDChars = regexp.MustCompile(`[^a-z0-9_.-]+`)

// workspaceIDFor derives a readable workspace id from a directory name.
func workspaceIDFor(root string) string {
	id := strings.Trim(nonIDChars.ReplaceAllString(strings.ToLower(filepath.Base(root)), "-"), "-.")
	if id == "" {
		id = "workspace"
	}
	return id
}

func runUp(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("up", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var bf brokerFlags
	bf.register(fs, "127.0.0.1:8377")
	root := fs.String("root", ".", "directory the bridge serves")
	sandboxDir := fs.String("sandbox-dir", defaultSandboxDir(), "repo caches and workspaces of /api/sandbox/… (\"\" disables)")
	var ctr containerFlags
	ctr.register(fs)
	workspace := fs.String("workspace", "", "workspace id (default: the directory's name)")
	bridgeHTTP := fs.String("http", "127.0.0.1:0", "serve the bridge's routes and tether attach over HTTP on this address (\"\" disables)")
	var warm warmFlags
	warm.register(fs)
	mkLog := logFlags(fs, stderr)
	setDefault(fs, "log-format", "console")
	setDefault(fs, "log-level", "warn")
	if err := parse(fs, args, 0); err != nil {
		return err
	}
	log, err := mkLog()
	if err != nil {
		return err
	}
	absRoot, err := filepath.Abs(*root)
	if err != nil {
		return fmt.Errorf("resolving --root: %w", err)
	}
	if st, err := os.Stat(absRoot); err != nil || !st.IsDir() {
		return usagef("--root %s is not a directory", absRoot)
	}
	if *workspace == "" {
		*workspace = workspaceIDFor(absRoot)
	}
	// One process, one tracer provider: the broker's spans in tether up
	// carry the bridge's resource too.
	stopTracing, err := bridgeTracing(*workspace, log)
	if err != nil {
		return err
	}
	defer stopTracing()
	if bf.doors.insecureNoAuth {
		return usagef("tether up always authenticates: it makes its bridge's and your caller's tokens")
	}
	explicitListen := false
	fs.Visit(func(f *flag.Flag) { explicitListen = explicitListen || f.Name == "listen" })
	ln, err := net.Listen("tcp", bf.listen)
	if err != nil && !explicitListen {
		// The default port is taken (another tether up?): any free port will do.
		ln, err = net.Listen("tcp", "127.0.0.1:0")
	}
	if err != nil {
		return fmt.Errorf("listening: %w", err)
	}
	// As tether broker: a generated secret, kept in a private file.
	secretFile, err := bf.setupAuth(ln.Addr(), log)
	if err != nil {
		ln.Close()
		return err
	}
	secretNote := ""
	if secretFile != "" {
		secretNote = "; secret in " + secretFile
	}
	b, err := broker.New(bf.config(log))
	if err != nil {
		ln.Close()
		return err
	}
	url := "http://" + ln.Addr().String()
	bridgeTok, err := auth.IssueToken([]byte(bf.secret), auth.RoleBridge, []string{*workspace}, 365*24*time.Hour)
	if err != nil {
		return err
	}
	callerTok, err := auth.IssueToken([]byte(bf.secret), auth.RoleCaller, []string{*workspace}, 24*time.Hour)
	if err != nil {
		return err
	}
	var httpLn net.Listener // port 0 by default: listen here to learn the port
	if *bridgeHTTP != "" {
		if httpLn, err = net.Listen("tcp", *bridgeHTTP); err != nil {
			ln.Close()
			return fmt.Errorf("listening for the bridge's HTTP: %w", err)
		}
	}
	br, err := bridge.New(bridge.Config{BrokerURL: url, WorkspaceID: *workspace, Token: bridgeTok, Root: absRoot, HTTPListener: httpLn, SandboxDir: *sandboxDir, SandboxContainer: ctr.config(), Logger: log,
		DebugWarmAdapters: warm.on, DebugWarmIdle: warm.idle})
	if err != nil {
		if httpLn != nil {
			httpLn.Close()
		}
		return err
	}

	ctx, stop := signalContext()
	defer stop()
	bridgeCtx, stopBridge := context.WithCancel(context.Background())
	defer stopBridge()
	brokerDone := make(chan error, 1)
	bridgeDone := make(chan error, 1)
	go func() { brokerDone <- serveBroker(ctx, b, ln, nil, log) }()
	go func() { bridgeDone <- br.Run(bridgeCtx) }()

	waitCtx, cancelWait := context.WithTimeout(ctx, 10*time.Second)
	err = br.WaitConnected(waitCtx)
	cancelWait()
	if err == nil {
		self, _ := os.Executable()
		if self == "" {
			self = "tether"
		}
		attach := ""
		if httpLn != nil {
			attach = fmt.Sprintf("\nWatch the commands agents run in the bridge's terminal (--write to type into it):\n\n  %s attach --bridge-http %s\n\n"+
				"The bridge's HTTP listener needs the token in %s (tether attach reads it).\n",
				shellQuote(self), httpLn.Addr(), br.HTTPTokenFile())
		}
		fmt.Fprintf(stdout, `tether is up: a broker and a bridge serving %s

  broker        %s
  workspace     %s
  caller token  %s
                (valid 24h%s)

Paste this in another terminal:

  %s call --broker %s --workspace %s --token %s /api/ping '{"hello":"tether"}'
%s%s
Ctrl-C stops it.
`, absRoot, url, *workspace, callerTok, secretNote, shellQuote(self), url, *workspace, callerTok, attach, mcpHowTo(self, url, *workspace, callerTok))
	} else if ctx.Err() == nil {
		fmt.Fprintf(stderr, "tether up: the bridge did not connect within 10s: %v\n", err)
		stop()
	}
	// The broker drains first, so calls in flight can still be answered by
	// the bridge; then the bridge stops.
	brokerErr := <-brokerDone
	stopBridge()
	bridgeErr := <-bridgeDone
	return firstErr(brokerErr, bridgeErr)
}

// mcpHowTo tells how to add the workspace's tools to an agent: Claude Code
// by command, Cursor and VS Code by an mcp.json file; each over stdio
// (tether mcp) or over HTTP (the broker's MCP endpoint).
func mcpHowTo(self, brokerURL, ws, tok string) string {
	endpoint := brokerURL + "/api/v1/workspaces/" + ws + "/mcp"
	args := []string{"mcp", "--broker", brokerURL, "--workspace", ws, "--token", tok}
	type stdioServer struct {
		Type    string   `json:"type"`
		Command string   `json:"command"`
		Args    []string `json:"args"`
	}
	type httpServer struct {
		Type    string            `json:"type"`
		URL     string            `json:"url"`
		Headers map[string]string `json:"headers"`
	}
	file := func(server any) string {
		b, _ := json.Marshal(map[string]any{"mcpServers": map[string]any{"tether": server}})
		return string(b)
	}
	quoted := make([]string, len(args))
	for i, a := range args {
		quoted[i] = shellQuote(a)
	}
	return fmt.Sprintf(`
Give an agent this workspace's tools over MCP. Claude Code, over stdio or over HTTP:

  claude mcp add --transport stdio tether -- %s %s
  claude mcp add --transport http tether %s --header "Authorization: Bearer %s"

Cursor: .cursor/mcp.json, one of these (VS Code: .vscode/mcp.json, with "servers" for "mcpServers"):

  %s
  %s
`, shellQuote(self), strings.Join(quoted, " "), endpoint, tok,
		file(stdioServer{Type: "stdio", Command: self, Args: args}),
		file(httpServer{Type: "http", URL: endpoint, Headers: map[string]string{"Authorization": "Bearer " + tok}}))
}

// defaultSandboxDir is where `tether up` keeps sandbox workspaces: the
// user's cache directory, which survives restarts but may be cleaned.
func defaultSandboxDir() string {
	dir, err := os.UserCacheDir()
	if err != nil {
		return ""
	}
	return filepath.Join(dir, "tether", "sandbox")
}

func firstErr(errs ...error) error {
	for _, e := range errs {
		if e != nil {
			return e
		}
	}
	return nil
}

func shellQuote(s string) string {
	if s != "" && !strings.ContainsAny(s, " \t\n'\"\\$`*?[]{}()<>|&;#~!") {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}
