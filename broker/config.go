package broker

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/tetherdev/tether/audit"

	"github.com/google/uuid"
	"github.com/rs/zerolog"

	"github.com/tetherdev/tether/broker/api"
	"github.com/tetherdev/tether/broker/async"
	"github.com/tetherdev/tether/broker/auth"
	"github.com/tetherdev/tether/broker/bus"
	"github.com/tetherdev/tether/broker/caller"
	"github.com/tetherdev/tether/broker/eio"
	"github.com/tetherdev/tether/broker/proxy"
	"github.com/tetherdev/tether/broker/revoke"
	"github.com/tetherdev/tether/broker/store"
)

// Config configures a Broker. Zero values take the defaults named.
type Config struct {
	// Secret signs and verifies tokens (HS256) when Verifier is nil. With
	// neither, authentication is off, and every connection and call let in
	// is logged as a warning; the command allows that only with
	// --insecure-no-auth, on loopback.
	Secret []byte
	// Verifier, when set, checks tokens instead of one made of Secret: its
	// keys (a --keys file, JWKS URLs) are the caller's, who reloads and
	// closes it.
	Verifier *auth.Verifier
	// OAuthIssuers are the authorization servers the MCP endpoint names in
	// its protected-resource metadata (RFC 9728).
	OAuthIssuers []string
	// OAuthScopes are the scopes the MCP endpoint tells clients to ask
	// for (scopes_supported, and scope in its 401 challenge); advertised,
	// not checked.
	OAuthScopes []string
	// PublicURL is the broker's base URL as its clients reach it
	// (https://broker.example.com): the MCP endpoint's resource URL, and the
	// audience a provider's token must name there. Empty: each request's
	// own scheme and Host.
	PublicURL string
	// Bus routes calls between instances. Nil means a private in-memory bus
	// (one instance). The broker does not close a bus it was given.
	Bus bus.Bus
	// InstanceID names this broker in logs; default random.
	InstanceID string
	Logger     zerolog.Logger

	PingInterval   time.Duration // 25s
	PingTimeout    time.Duration // 20s
	ConnectTimeout time.Duration // 20s from open to CONNECT
	WriteTimeout   time.Duration // 10s per frame
	MaxPayload     int           // 1,000,000 bytes per message and per HTTP body
	MaxInFlight    int           // 1024 calls per workspace
	DrainTimeout   time.Duration // 10s for pending calls at shutdown
	// CallGrace is how long past a call's deadline the HTTP API waits for
	// the owner's answer before answering timeout itself; default
	// caller.DefaultGrace.
	CallGrace time.Duration

	// Store keeps the records of async calls (docs/async-calls.md). Nil
	// means a private in-memory store: async calls then work on this
	// instance alone. Brokers that share a Redis bus must share a store on
	// it (store.NewRedis, same Redis and prefix), created with the same
	// grace. The broker does not close a store it was given.
	Store store.Store
	// CallRetention is how long the private store keeps an async call's
	// record after its outcome; default store.DefaultRetention. A Store
	// given has its own.
	CallRetention time.Duration
	// SweepInterval is how often the broker ends the async calls whose time
	// passed without an outcome; default async.DefaultSweepInterval.
	SweepInterval time.Duration
	// SubmitDrainWait bounds how long an async submit for a workspace this
	// broker holds waits for the holder's drain of its queue to end, to be
	// handed over behind the calls that drain delivers; past it the submit
	// is queued. Default DefaultSubmitDrainWait.
	SubmitDrainWait time.Duration
	// MCP makes the server of the MCP endpoint,
	// /api/v1/workspaces/{id}/mcp, given the broker's own call path (wire
	// in package mcp: mcp.NewEndpoint); nil: there is none.
	MCP func(api.Caller) api.Mount
	// Connection limits per remote address (an IPv6 /64), see
	// eio/limit.go: new Engine.IO sessions at ConnRate per second with
	// bursts of ConnBurst (defaults eio.DefaultConnRate,
	// eio.DefaultConnBurst), and at most MaxHandshakesPerIP sessions open
	// without a CONNECT yet (default eio.DefaultMaxHandshakesPerIP).
	// Beyond them the handshake is answered HTTP 429. A negative ConnRate
	// or MaxHandshakesPerIP turns that limit off. Loopback peers are
	// exempt unless LimitLoopback.
	ConnRate           float64
	ConnBurst          int
	MaxHandshakesPerIP int
	LimitLoopback      bool
	// TrustedProxies are the reverse proxies whose X-Forwarded-For names
	// the client that the connection limits count and the logs show; the
	// zero value trusts none (--trusted-proxies).
	TrustedProxies proxy.Trust
	// CORSOrigins are the browser origins allowed to use the caller API
	// and the polling transport (--cors-origin; api.CORS); none by default.
	CORSOrigins []string
	// Collectors are more metrics for /metrics: those of what the caller
	// set up around the broker (tracing's dropped spans).
	Collectors []prometheus.Collector
	// Revocations is the list of revoked tokens every door's Verify asks,
	// which ends the sockets and MCP streams of a token it revokes (package
	// revoke). Brokers that share a Redis bus share one (revoke.NewShared,
	// same Redis and prefix). Nil means a private in-memory list: this
	// broker alone. The broker does not close a list it was given.
	Revocations *revoke.List
	// Audit is the audit log (--audit-log, package audit): every
	// connection event and call of every door gets a line; its metrics go
	// on /metrics. Nil: no audit log. The broker does not close it.
	Audit *audit.Log
}

func (c *Config) setDefaults() {
	if c.PingInterval == 0 {
		c.PingInterval = 25 * time.Second
	}
	if c.PingTimeout == 0 {
		c.PingTimeout = 20 * time.Second
	}
	if c.ConnectTimeout == 0 {
		c.ConnectTimeout = 20 * time.Second
	}
	if c.WriteTimeout == 0 {
		c.WriteTimeout = 10 * time.Second
	}
	if c.MaxPayload == 0 {
		c.MaxPayload = 1_000_000
	}
	if c.MaxInFlight == 0 {
		c.MaxInFlight = 1024
	}
	if c.DrainTimeout == 0 {
		c.DrainTimeout = 10 * time.Second
	}
	if c.CallGrace == 0 {
		c.CallGrace = caller.DefaultGrace
	}
	if c.ConnRate == 0 {
		c.ConnRate = eio.DefaultConnRate
	}
	if c.ConnBurst <= 0 {
		c.ConnBurst = eio.DefaultConnBurst
	}
	if c.MaxHandshakesPerIP == 0 {
		c.MaxHandshakesPerIP = eio.DefaultMaxHandshakesPerIP
	}
	if c.InstanceID == "" {
		c.InstanceID = uuid.NewString()[:8]
	}
	if c.SubmitDrainWait == 0 {
		c.SubmitDrainWait = DefaultSubmitDrainWait
	}
	if c.SweepInterval == 0 {
		c.SweepInterval = async.DefaultSweepInterval
	}
}
