//go:build !windows

package main

import (
	"flag"
	"io"
	"net/http"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/tetherdev/tether/bridge"
	"github.com/tetherdev/tether/dap"
	"github.com/tetherdev/tether/terminal"
)

// reaperMain runs this binary as a bridge terminal's reaper when the
// bridge re-executed it as one, and returns otherwise.
func reaperMain() { terminal.ReaperMain() }

func runBridge(args []string, stderr io.Writer) error {
	fs := flag.NewFlagSet("bridge", flag.ContinueOnError)
	fs.SetOutput(stderr)
	brokerURL := fs.String("broker", "", "broker URL, http(s):// or ws(s)://")
	workspace := fs.String("workspace", "", "workspace id this bridge serves")
	token := fs.String("token", "", "bridge token")
	root := fs.String("root", ".", "directory served")
	httpAddr := fs.String("http", "", "also serve the routes over HTTP on this address (e.g. 127.0.0.1:8765)")
	maxInFlight := fs.Int("max-in-flight", 0, "handlers running at once before 'overloaded' (default 64)")
	outputCap := fs.Int("output-cap", 0, "bytes of a command's output a terminal result keeps, head and tail (default 80000)")
	sandboxDir := fs.String("sandbox-dir", "", "serve /api/sandbox/… with repo caches and workspaces kept in this directory (\"\" disables)")
	readOnly := fs.Bool("read-only", false, "serve only routes that neither write a file nor run a program (no terminal, debugger or sandbox)")
	attachAllow := fs.String("debug-attach-allow", "", "comma-separated CIDR prefixes or addresses a debug session may attach to over the network (default loopback: 127.0.0.0/8,::1)")
	var warm warmFlags
	warm.register(fs)
	disable := fs.String("disable", "", "comma-separated route groups to refuse: "+strings.Join(bridge.Groups(), ","))
	var ctr containerFlags
	ctr.register(fs)
	var cf caFlags
	cf.register(fs)
	var af auditFlags
	af.register(fs)
	mkLog := logFlags(fs, stderr)
	if err := parse(fs, args, 0); err != nil {
		return err
	}
	log, err := mkLog()
	if err != nil {
		return err
	}
	allow, err := dap.ParseAttachAllow(*attachAllow)
	if err != nil {
		return usagef("--debug-attach-allow: %v", err)
	}
	if *brokerURL == "" && *httpAddr == "" {
		return usagef("--broker (or --http) is required")
	}
	if *brokerURL != "" && *workspace == "" {
		return usagef("--workspace is required with --broker")
	}
	tlsDialer, err := cf.dialer(log)
	if err != nil {
		return err
	}
	stopTracing, err := bridgeTracing(*workspace, log)
	if err != nil {
		return err
	}
	defer stopTracing()
	if af.path != "" {
		// SIGHUP reopens the audit log rather than ending the bridge
		// (without one, a hangup ends it, as it always did).
		stopHangups := watchHangups(log)
		defer stopHangups()
	}
	auditLog, closeAudit, err := af.open("bridge", bridgeInstance(), log)
	if err != nil {
		return err
	}
	defer closeAudit() // after Run returned: its last calls' lines are written
	b, err := bridge.New(bridge.Config{
		HTTPClient:       &http.Client{Transport: tlsDialer.Transport()},
		BrokerURL:        *brokerURL,
		WorkspaceID:      *workspace,
		Token:            *token,
		Root:             *root,
		HTTPAddr:         *httpAddr,
		MaxInFlight:      *maxInFlight,
		Terminal:         terminal.Config{OutputCap: *outputCap},
		SandboxDir:       *sandboxDir,
		SandboxContainer: ctr.config(),
		ReadOnly:         *readOnly,
		Disable:          splitList(*disable),
		Logger:           log,
		Audit:            auditLog,

		DebugAttachAllow:  allow,
		DebugWarmAdapters: warm.on,
		DebugWarmIdle:     warm.idle,
	})
	if err != nil {
		return err
	}
	ctx, stop := signalContext()
	defer stop()
	return b.Run(ctx)
}

// warmFlags are the warm debug adapter flags, shared by tether bridge and
// tether up (bridge.Config.DebugWarmAdapters, DebugWarmIdle).
type warmFlags struct {
	on   bool
	idle time.Duration
}

func (w *warmFlags) register(fs *flag.FlagSet) {
	fs.BoolVar(&w.on, "warm-adapters", true, "keep one started and initialized debug adapter ready per adapter kind the workspace has used, and prebuild Go programs, for a faster first stop (docs/debugging.md, Warm adapters)")
	fs.DurationVar(&w.idle, "warm-adapters-idle", dap.DefaultWarmIdle, "end a warm debug adapter unused for this long")
}

// bridgeInstance names this bridge on its audit lines: the host and the
// process, which tell two bridges of one workspace apart.
func bridgeInstance() string {
	host, err := os.Hostname()
	if err != nil {
		host = "unknown"
	}
	return host + "/" + strconv.Itoa(os.Getpid())
}
