package bus

import (
	"context"
	"fmt"
	"net"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/tetherdev/tether/internal/rawnet"
	"github.com/tetherdev/tether/tlsclient"
)

// RawDial makes opts dial plain TCP connections whose reads, writes and
// pool health checks do not tell the Go runtime they enter a system call
// (rawnet.DialChecked). go-redis peeks a pooled connection before each
// command with a system call the runtime is told of, and every such call
// made while all Ps are idle wakes sysmon, which then polls every 20 µs; a
// broker making one store script at a time went idle between each. With
// the raw dialer, a held workspace's async submit that waits, at c=1 on 2
// cores, alternating builds three times: broker CPU per call 262/258/289
// µs → 197/194/211, p50 0.49 → 0.42 ms.
//
// A TLS connection (rediss://, its dialer set by the bus: see redisTLS) or
// a dialer already set is left as it is.
// Call it before the client is made from opts.
func RawDial(opts *redis.Options) {
	if opts.TLSConfig == nil && opts.Dialer == nil {
		opts.Dialer = rawDialer(opts.DialTimeout)
	}
}

// RawDialCluster is RawDial for a Redis Cluster client's options.
func RawDialCluster(opts *redis.ClusterOptions) {
	if opts.TLSConfig == nil && opts.Dialer == nil {
		opts.Dialer = rawDialer(opts.DialTimeout)
	}
}

func rawDialer(timeout time.Duration) func(ctx context.Context, network, addr string) (net.Conn, error) {
	if timeout <= 0 {
		timeout = redisDialTimeout // go-redis's default too
	}
	return rawnet.DialChecked(&net.Dialer{Timeout: timeout, KeepAlive: 5 * time.Minute})
}

// NewSideClient makes the client a part of tether keeps beside the bus on
// the same Redis (the async call store, the revocation list), from the
// URL or the Cluster seeds the bus was given (exactly one of them), with
// its TLS (RedisConfig.TLS): RESP2 and context deadlines as the bus,
// RawDial's connections or the bus's TLS dialer, and no retries of its own
// (a script is resent, or not, by its caller). publish is the command that
// reaches the bus's subscribers: PUBLISH, or SPUBLISH on a Cluster, where
// the bus subscribes with sharded pub/sub.
func NewSideClient(url string, clusterAddrs []string, tlsDialer *tlsclient.Dialer) (client redis.UniversalClient, publish string, err error) {
	if url != "" {
		opts, err := redis.ParseURL(url)
		if err != nil {
			return nil, "", fmt.Errorf("parsing redis URL: %w", err)
		}
		opts.MaxRetries = -1
		opts.ContextTimeoutEnabled = true
		if opts.Protocol == 0 {
			opts.Protocol = 2 // as the bus: no push notifications to look for
		}
		if err := redisTLS(opts, tlsDialer); err != nil {
			return nil, "", fmt.Errorf("redis URL: %w", err)
		}
		RawDial(opts)
		return redis.NewClient(opts), "PUBLISH", nil
	}
	copts := &redis.ClusterOptions{Addrs: clusterAddrs, MaxRetries: -1, ContextTimeoutEnabled: true}
	clusterTLS(copts, nil, tlsDialer)
	RawDialCluster(copts)
	return redis.NewClusterClient(copts), "SPUBLISH", nil
}

// clusterTLS makes a Cluster client's connections, and those of the bus's
// own pub/sub clients (base, if not nil), TLS connections with d's trust
// and client certificate; nothing when d is nil. Every node is dialled by
// the address the cluster announces, and its certificate checked for that
// host.
func clusterTLS(copts *redis.ClusterOptions, base *redis.Options, d *tlsclient.Dialer) {
	if d == nil {
		return
	}
	copts.TLSConfig = d.Config() // tells go-redis the nodes speak TLS; the dialer does the handshake
	copts.Dialer = redisTLSDialer(d)
	copts.DialerRetries = 1 // see redisTLS
	if base != nil {
		base.TLSConfig = copts.TLSConfig
		base.Dialer = copts.Dialer
		base.DialerRetries = 1
	}
}
