package main

import (
	"context"
	"crypto/tls"
	"errors"
	"flag"
	"fmt"
	"strings"
	"time"

	"github.com/rs/zerolog"

	"github.com/tetherdev/tether/broker/bus"
	"github.com/tetherdev/tether/broker/store"
	"github.com/tetherdev/tether/internal/certfile"
	"github.com/tetherdev/tether/tlsclient"
)

// redisFlags select the Redis bus that lets several brokers share routing,
// and how the broker reaches it over TLS. Only `tether broker` has them:
// `tether up` is one process on the in-memory bus.
type redisFlags struct {
	url     string
	cluster string
	prefix  string
	// TLS: a private CA and a client certificate (Redis's
	// tls-auth-clients yes). They need TLS: a rediss:// URL, or rediss://
	// cluster seeds; given without it they are a usage error, since an
	// operator who names a CA expects the connection to use it.
	ca, cert, key string

	tls *tlsclient.Dialer // set by open when Redis is reached over TLS
}

// rediss is the scheme of a TLS Redis, in --redis and on --redis-cluster
// seeds.
const rediss = "rediss://"

func (f *redisFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&f.url, "redis", "", "Redis URL (redis://[user:pass@]host:port[/db], rediss:// for TLS) shared with the other brokers; default: in-memory bus, one broker")
	fs.StringVar(&f.cluster, "redis-cluster", "", "comma-separated host:port seeds of a Redis Cluster, used with sharded pub/sub (instead of --redis); rediss://host:port seeds (all of them) reach it over TLS")
	fs.StringVar(&f.prefix, "redis-prefix", bus.DefaultRedisPrefix, "prefix of every Redis channel name")
	fs.StringVar(&f.ca, "redis-ca", "", "PEM file of the CA that signed Redis's certificate, trusted instead of the system's roots (needs rediss://)")
	fs.StringVar(&f.cert, "redis-cert", "", "PEM client certificate shown to Redis (for tls-auth-clients yes; needs rediss:// and --redis-key); re-read on SIGHUP for new connections")
	fs.StringVar(&f.key, "redis-key", "", "PEM private key of --redis-cert")
}

// open connects the Redis bus the flags select; nil without --redis or
// --redis-cluster. onLost runs each time a pub/sub connection is lost,
// before it subscribes again, and onReconnect each time the bus has
// resubscribed after losing Redis. stop ends what the TLS flags started
// (the SIGHUP hook of the client certificate); it is never nil.
func (f *redisFlags) open(instanceID string, log zerolog.Logger, onLost, onReconnect func()) (rb *bus.Redis, stop func(), err error) {
	stop = func() {}
	if f.url == "" && f.cluster == "" {
		if f.ca != "" || f.cert != "" || f.key != "" {
			return nil, stop, usagef("--redis-ca, --redis-cert and --redis-key need --redis or --redis-cluster")
		}
		return nil, stop, nil
	}
	if f.url != "" && f.cluster != "" {
		return nil, stop, usagef("--redis and --redis-cluster exclude each other")
	}
	addrs, clusterTLS, err := f.clusterSeeds()
	if err != nil {
		return nil, stop, err
	}
	if f.cluster != "" && len(addrs) == 0 {
		return nil, stop, usagef("--redis-cluster needs at least one host:port")
	}
	if f.tls, stop, err = f.dialer(clusterTLS || strings.HasPrefix(f.url, rediss), log); err != nil {
		return nil, stop, err
	}
	cfg := bus.RedisConfig{URL: f.url, ClusterAddrs: addrs, TLS: f.tls, Prefix: f.prefix, InstanceID: instanceID, Logger: log, OnLost: onLost, OnReconnect: onReconnect}
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	rb, err = bus.NewRedis(ctx, cfg)
	if err != nil {
		return nil, stop, f.advise(err)
	}
	return rb, stop, nil
}

// clusterSeeds are the --redis-cluster seeds, and whether they are
// rediss:// ones (all or none).
func (f *redisFlags) clusterSeeds() (addrs []string, tls bool, err error) {
	plain := 0
	for _, addr := range strings.Split(f.cluster, ",") {
		addr = strings.TrimSpace(addr)
		if addr == "" {
			continue
		}
		if a, ok := strings.CutPrefix(addr, rediss); ok {
			addr, tls = a, true
		} else {
			plain++
		}
		if strings.Contains(addr, "://") {
			return nil, false, usagef("--redis-cluster: %q is not host:port or rediss://host:port", addr)
		}
		addrs = append(addrs, addr)
	}
	if tls && plain > 0 {
		return nil, false, usagef("--redis-cluster: give every seed as rediss://host:port, or none")
	}
	return addrs, tls, nil
}

// clusterAddrs are the --redis-cluster seeds as host:port (open checked
// them).
func (f *redisFlags) clusterAddrs() []string {
	addrs, _, _ := f.clusterSeeds()
	return addrs
}

// dialer is the TLS trust and client certificate of the broker's Redis
// connections: nil without TLS (wantTLS false), where the TLS flags are a
// usage error. The client certificate is re-read on SIGHUP, for the
// connections made from then on; stop ends that.
func (f *redisFlags) dialer(wantTLS bool, log zerolog.Logger) (*tlsclient.Dialer, func(), error) {
	noop := func() {}
	if !wantTLS {
		if f.ca != "" || f.cert != "" || f.key != "" {
			return nil, noop, usagef("--redis-ca, --redis-cert and --redis-key need TLS: a rediss:// URL in --redis, or rediss://host:port seeds in --redis-cluster")
		}
		return nil, noop, nil
	}
	if (f.cert == "") != (f.key == "") {
		return nil, noop, usagef("--redis-cert and --redis-key go together")
	}
	o := tlsclient.Options{CAFile: f.ca, Peer: "Redis", CAFlag: "--redis-ca", Protocols: []string{}, Logger: log}
	stop := noop
	if f.cert != "" {
		pair, err := certfile.LoadClient(f.cert, f.key, log.With().Str("component", "redis").Logger())
		if err != nil {
			return nil, noop, fmt.Errorf("--redis-cert/--redis-key: %w", err)
		}
		o.ClientCertificate = func(*tls.CertificateRequestInfo) (*tls.Certificate, error) { return pair.GetCertificate(nil) }
		stop = onHangup(func() {
			log.Info().Msg("SIGHUP: reloading the redis client certificate")
			_ = pair.Reload() // a failure is logged; the old pair stays
		})
	}
	d, err := tlsclient.New(o)
	if err != nil {
		stop()
		return nil, noop, fmt.Errorf("--redis-ca: %w", err)
	}
	return d, stop, nil
}

// advise adds the flag to change to a failed connection to Redis.
func (f *redisFlags) advise(err error) error {
	if errors.Is(err, bus.ErrRedisClientCert) {
		if f.cert == "" {
			return fmt.Errorf("%w; pass --redis-cert and --redis-key", err)
		}
		return fmt.Errorf("%w; check that --redis-cert %s is signed by that CA", err, f.cert)
	}
	return err
}

// openStore connects the store of async call records on the Redis the
// flags select, with the prefix of rb, the bus open returned: every broker
// on that Redis reads and ends every async call.
func (f *redisFlags) openStore(rb *bus.Redis, retention time.Duration, log zerolog.Logger) (*store.Redis, error) {
	cfg := store.RedisConfig{URL: f.url, ClusterAddrs: f.clusterAddrs(), TLS: f.tls, Prefix: f.prefix, Bus: rb, Options: store.Options{Retention: retention}, Logger: log}
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	st, err := store.NewRedis(ctx, cfg)
	if err != nil {
		return nil, f.advise(err)
	}
	return st, nil
}
