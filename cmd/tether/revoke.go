package main

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync/atomic"
	"time"

	"github.com/rs/zerolog"

	"github.com/tetherdev/tether/broker/bus"
	"github.com/tetherdev/tether/broker/revoke"
)

// revokeFlags are the broker's flags of revocation (package revoke), and
// the list they make: shared on the Redis of --redis/--redis-cluster, or
// the broker's own.
type revokeFlags struct {
	maxTokenTTL time.Duration
	list        atomic.Pointer[revoke.List] // set by open; read by resync from the bus's goroutine
}

func (f *revokeFlags) register(fs *flag.FlagSet) {
	fs.DurationVar(&f.maxTokenTTL, "max-token-ttl", revoke.DefaultMaxTokenTTL, "longest token lifetime (exp - iat) accepted; a longer-lived token is refused as revoked, and a revocation lasts this long at most")
}

// open makes the revocation list: on rb's Redis when there is one, else
// in memory. Close it after the broker's Shutdown.
func (f *revokeFlags) open(rf *redisFlags, rb *bus.Redis, log zerolog.Logger) (*revoke.List, error) {
	opts := revoke.Options{MaxTokenTTL: f.maxTokenTTL, Logger: log}
	if f.maxTokenTTL <= 0 {
		return nil, usagef("--max-token-ttl must be positive")
	}
	if rb == nil {
		l := revoke.New(opts)
		f.list.Store(l)
		return l, nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	l, err := revoke.NewShared(ctx, opts, revoke.RedisConfig{URL: rf.url, ClusterAddrs: rf.clusterAddrs(), TLS: rf.tls, Prefix: rf.prefix, Bus: rb})
	if err != nil {
		return nil, rf.advise(err)
	}
	f.list.Store(l)
	return l, nil
}

// resync reloads the shared list: the bus is back after losing Redis, and
// entries told meanwhile were missed.
func (f *revokeFlags) resync() {
	if l := f.list.Load(); l != nil {
		l.Resync()
	}
}

// runRevoke is `tether revoke`: it revokes a token (--jti) or a
// workspace's tokens issued before a time, or lists the revocations in
// effect (--list), through the broker's admin API. It prints the broker's
// JSON answer and exits 0 on success, 1 when the broker refused or could
// not be reached, 2 on a usage error.
func runRevoke(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("revoke", flag.ContinueOnError)
	fs.SetOutput(stderr)
	brokerURL := fs.String("broker", "http://127.0.0.1:8377", "broker URL")
	token := fs.String("token", "", "admin token (tether token --role admin)")
	jti := fs.String("jti", "", "revoke the token with this id (jti)")
	workspace := fs.String("workspace", "", "revoke this workspace's tokens issued before --issued-before")
	before := fs.String("issued-before", "", "RFC 3339 time, or 'now'")
	list := fs.Bool("list", false, "list the revocations in effect")
	var cf caFlags
	cf.register(fs)
	fs.Usage = func() {
		fmt.Fprintln(stderr, "usage: tether revoke --broker URL --token ADMIN_TOKEN (--jti J | --workspace W --issued-before T | --list)")
		fs.PrintDefaults()
	}
	if err := parseFlags(fs, args); err != nil {
		return parseStatus(fs, err)
	}
	forms := 0
	for _, set := range []bool{*jti != "", *workspace != "" || *before != "", *list} {
		if set {
			forms++
		}
	}
	if forms != 1 || fs.NArg() != 0 {
		fs.Usage()
		return 2
	}
	method, body := http.MethodGet, []byte(nil)
	if !*list {
		var req revoke.Request
		if *jti != "" {
			req.JTI = *jti
		} else {
			if *workspace == "" || *before == "" {
				fmt.Fprintln(stderr, "tether revoke: --workspace and --issued-before go together")
				return 2
			}
			req.WorkspaceID, req.IssuedBefore = *workspace, *before
			if *before == "now" {
				req.IssuedBefore = time.Now().UTC().Format(time.RFC3339Nano)
			}
		}
		method, body = http.MethodPost, mustJSON(req)
	}
	ctx, stop := signalContext()
	defer stop()
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	hreq, err := http.NewRequestWithContext(ctx, method, strings.TrimRight(*brokerURL, "/")+"/api/v1/admin/revocations", bytes.NewReader(body))
	if err != nil {
		fmt.Fprintf(stderr, "tether revoke: %v\n", err)
		return 2
	}
	hreq.Header.Set("Authorization", "Bearer "+*token)
	if body != nil {
		hreq.Header.Set("Content-Type", "application/json")
	}
	client, err := cf.callerClient(zerolog.New(stderr).With().Timestamp().Logger())
	if err != nil {
		fmt.Fprintf(stderr, "tether revoke: %v\n", err)
		return 2
	}
	resp, err := client.Do(hreq)
	if err != nil {
		fmt.Fprintf(stderr, "tether revoke: %v\n", err)
		return 1
	}
	defer resp.Body.Close()
	out, err := io.ReadAll(io.LimitReader(resp.Body, 16<<20))
	if err != nil {
		fmt.Fprintf(stderr, "tether revoke: reading the answer: %v\n", err)
		return 1
	}
	var pretty bytes.Buffer
	if json.Indent(&pretty, out, "", "  ") == nil {
		out = pretty.Bytes()
	}
	fmt.Fprintln(stdout, string(out))
	if resp.StatusCode/100 != 2 {
		return 1
	}
	return 0
}

func mustJSON(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err) // plain values
	}
	return b
}
