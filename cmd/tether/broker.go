package main

import (
	"context"
	"crypto/tls"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"sync/atomic"
	"time"

	"github.com/google/uuid"
	"github.com/rs/zerolog"

	"github.com/tetherdev/tether/broker"
	"github.com/tetherdev/tether/broker/api"
	"github.com/tetherdev/tether/broker/bus"
	"github.com/tetherdev/tether/broker/eio"
	"github.com/tetherdev/tether/broker/store"
	"github.com/tetherdev/tether/internal/buildinfo"
	"github.com/tetherdev/tether/internal/tracing"
	"github.com/tetherdev/tether/internal/tuning"
	"github.com/tetherdev/tether/mcp"
)

type brokerFlags struct {
	listen       string
	secret       string
	pingInterval time.Duration
	pingTimeout  time.Duration
	maxPayload   int
	maxInFlight  int
	drain        time.Duration
	instanceID   string
	// Connection limits per remote address (broker/eio/limit.go).
	connRate      float64
	connBurst     int
	maxHandshakes int
	limitLoopback bool
	retention     time.Duration
	doors         doorFlags // doors.go: secret file, --insecure-no-auth, CORS, trusted proxies
	// keysGiven: the command has keys beyond the secret (--keys, --jwks-url).
	keysGiven bool
}

func (f *brokerFlags) register(fs *flag.FlagSet, defListen string) {
	fs.StringVar(&f.listen, "listen", defListen, "address to listen on")
	fs.StringVar(&f.secret, "secret", "", "token signing secret (required off loopback; on loopback a broker without one generates one, kept in a private file)")
	fs.DurationVar(&f.pingInterval, "ping-interval", 25*time.Second, "Engine.IO ping interval")
	fs.DurationVar(&f.pingTimeout, "ping-timeout", 20*time.Second, "Engine.IO ping timeout")
	fs.IntVar(&f.maxPayload, "max-payload", 1_000_000, "largest message and HTTP body, bytes")
	fs.IntVar(&f.maxInFlight, "max-in-flight", 1024, "calls in flight per workspace before 'overloaded'")
	fs.DurationVar(&f.drain, "drain", 10*time.Second, "how long shutdown waits for calls in flight")
	fs.StringVar(&f.instanceID, "instance-id", "", "this broker's name in logs (default random)")
	fs.Float64Var(&f.connRate, "conn-rate", eio.DefaultConnRate, "new connections per second from one address (an IPv6 /64) before HTTP 429; 0 turns the limit off")
	fs.IntVar(&f.connBurst, "conn-burst", eio.DefaultConnBurst, "new connections one address may open at once, on top of --conn-rate")
	fs.IntVar(&f.maxHandshakes, "max-handshakes-per-ip", eio.DefaultMaxHandshakesPerIP, "connections of one address open without a Socket.IO CONNECT yet before HTTP 429; 0 turns the limit off")
	fs.BoolVar(&f.limitLoopback, "limit-loopback", false, "apply the connection limits to loopback peers too (exempt by default: a reverse proxy on this host shows every client as loopback)")
	fs.DurationVar(&f.retention, "call-retention", store.DefaultRetention, "how long an async call's record is kept after its outcome")
	f.doors.register(fs)
}

func (f *brokerFlags) config(log zerolog.Logger) broker.Config {
	cfg := broker.Config{
		Secret:       []byte(f.secret),
		InstanceID:   f.instanceID,
		Logger:       log,
		PingInterval: f.pingInterval,
		PingTimeout:  f.pingTimeout,
		MaxPayload:   f.maxPayload,
		MaxInFlight:  f.maxInFlight,
		DrainTimeout: f.drain,
		// 0 on the command line turns a limit off; in Config, 0 is the
		// default and a negative value is off.
		ConnRate:           offIfZero(f.connRate),
		ConnBurst:          f.connBurst,
		MaxHandshakesPerIP: int(offIfZero(float64(f.maxHandshakes))),
		LimitLoopback:      f.limitLoopback,
		CallRetention:      f.retention,
		// The MCP endpoint (/api/v1/workspaces/{id}/mcp): package mcp's
		// tools, on the broker's own call path.
		MCP: func(call api.Caller) api.Mount {
			return mcp.NewEndpoint(mcp.EndpointOptions{
				Caller:         call,
				MaxRequestBody: int64(f.maxPayload) + 64<<10, // a payload plus the JSON-RPC envelope
				Version:        buildinfo.Version(),
				Logger:         log,
			})
		},
	}
	f.doors.apply(&cfg)
	return cfg
}

func offIfZero(v float64) float64 {
	if v == 0 {
		return -1
	}
	return v
}

// isLoopback reports whether addr (host:port) only listens on loopback.
func isLoopback(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false
	}
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

func runBroker(args []string, stderr io.Writer) error {
	fs := flag.NewFlagSet("broker", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var f brokerFlags
	f.register(fs, "127.0.0.1:8377")
	var rf redisFlags
	rf.register(fs)
	var kf keyFlags
	kf.register(fs)
	var rv revokeFlags
	rv.register(fs)
	var tf tlsFlags
	tf.register(fs)
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
	// go-redis's own lines (a failed dial, a dropped connection) join
	// the JSON log rather than going to stderr as plain text.
	bus.LogRedisTo(log)
	// SIGHUP re-reads files (the key set, the certificate pair) from
	// here on, rather than ending the process.
	stopHangups := watchHangups(log)
	defer stopHangups()
	f.keysGiven = kf.hasKeys()
	if err := kf.checkOAuthScopes(); err != nil {
		return err
	}
	if err := kf.checkPublicURL(); err != nil {
		return err
	}
	if !f.hasKeys() && f.doors.secretFile == "" && !isLoopback(f.listen) {
		return usagef("refusing to listen on %s without --secret, --secret-file, --keys or --jwks-url: choose the keys of a broker others can reach", f.listen)
	}
	ln, err := net.Listen("tcp", f.listen)
	if err != nil {
		return fmt.Errorf("listening: %w", err)
	}
	defer ln.Close() // on an early return; serveBroker closes it otherwise
	tlsCfg, stopTLS, err := tf.serverConfig(log)
	if err != nil {
		return err
	}
	defer stopTLS()
	secretFile, err := f.setupAuth(ln.Addr(), log)
	if err != nil {
		return err
	}
	if secretFile != "" && f.doors.secretFile == "" {
		log.Warn().Str("secret_file", secretFile).Msg("no keys given: tokens are signed with the generated secret in secret_file (tether token --secret-file)")
	}
	if f.instanceID == "" {
		// One name for the broker's logs and its Redis connections.
		f.instanceID = uuid.NewString()[:8]
	}
	auditLog, closeAudit, err := af.open("broker", f.instanceID, log)
	if err != nil {
		return err
	}
	defer closeAudit() // after serveBroker's drain: the last calls' lines are written
	// Keys first: a key file that is not a key set stops the start here.
	verifier, closeVerifier, err := kf.verifier(f.secret, log)
	if err != nil {
		return err
	}
	defer closeVerifier()
	// The bus exists before the broker it serves; when a pub/sub
	// connection goes, the broker's holders stop delivering, and once it is
	// back they take their workspaces again.
	var served atomic.Pointer[broker.Broker]
	rb, stopRedisTLS, err := rf.open(f.instanceID, log, func() {
		if b := served.Load(); b != nil {
			b.BusLost()
		}
	}, func() {
		if b := served.Load(); b != nil {
			b.Reannounce()
		}
		rv.resync()
	})
	defer stopRedisTLS()
	if err != nil {
		return err
	}
	cfg := f.config(log)
	cfg.Verifier, cfg.OAuthIssuers, cfg.OAuthScopes, cfg.PublicURL = verifier, kf.oauthIssuers, kf.oauthScopes, kf.publicURL
	cfg.Audit = auditLog
	if rb != nil {
		cfg.Bus = rb
		defer rb.Close() // after the broker's Shutdown: it drains through the bus
		st, err := rf.openStore(rb, f.retention, log)
		if err != nil {
			return err
		}
		cfg.Store = st
		defer st.Close() // after the broker's Shutdown: its last outcomes go there
		log.Info().Str("redis", redactURL(rf.url)).Str("redis_cluster", rf.cluster).Str("prefix", rf.prefix).Dur("call_retention", f.retention).Msg("routing through redis")
	}
	if cfg.Revocations, err = rv.open(&rf, rb, log); err != nil {
		return err
	}
	defer cfg.Revocations.Close() // after the broker's Shutdown
	// Tracing (OTEL_*): set up before the broker serves, shut down after
	// it drained, so the spans of its last calls are exported.
	tr, err := tracing.Setup(context.Background(), tracing.Service{Name: "tether-broker", InstanceID: f.instanceID, Version: buildinfo.Version()}, log)
	if err != nil {
		return err
	}
	defer shutdownTracing(tr, log)
	cfg.Collectors = append(cfg.Collectors, tr.Collectors()...)
	b, err := broker.New(cfg)
	if err != nil {
		return err
	}
	served.Store(b)
	ctx, stop := signalContext()
	defer stop()
	return serveBroker(ctx, b, ln, tlsCfg, log)
}

// tracingShutdown bounds the export of the spans still queued at exit: an
// OTLP endpoint that is down does not hold the process.
const tracingShutdown = 5 * time.Second

func shutdownTracing(tr *tracing.Tracing, log zerolog.Logger) {
	ctx, cancel := context.WithTimeout(context.Background(), tracingShutdown)
	defer cancel()
	if err := tr.Shutdown(ctx); err != nil {
		log.Debug().Err(err).Msg("tracing shutdown: spans still queued were dropped")
	}
}

// redactURL hides the password of a redis:// URL for logs.
func redactURL(s string) string {
	u, err := url.Parse(s)
	if err != nil || u.User == nil {
		return s
	}
	return u.Redacted()
}

// serveBroker serves b on ln until ctx ends, then drains and shuts down;
// over TLS with tlsCfg, plaintext when it is nil.
func serveBroker(ctx context.Context, b *broker.Broker, ln net.Listener, tlsCfg *tls.Config, log zerolog.Logger) error {
	srv := broker.NewServer(b, &http.Server{ReadHeaderTimeout: 10 * time.Second, TLSConfig: tlsCfg})
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	e := log.Info().Str("listen", ln.Addr().String()).Str("instance", b.InstanceID()).Bool("auth", b.AuthEnabled()).Bool("tls", tlsCfg != nil)
	if off := tuning.Off(); len(off) > 0 {
		e = e.Strs("tuning_off", off) // TETHER_TUNING: the plain ways, for a comparison
	}
	e.Msg("broker listening")
	var serveErr error
	select {
	case <-ctx.Done():
	case serveErr = <-errc:
	}
	shutdownCtx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := b.Shutdown(shutdownCtx); err != nil {
		log.Warn().Err(err).Msg("broker shutdown")
	}
	if err := srv.Shutdown(shutdownCtx); err != nil {
		log.Warn().Err(err).Msg("http shutdown")
	}
	if serveErr != nil && !errors.Is(serveErr, http.ErrServerClosed) {
		return serveErr
	}
	return nil
}
