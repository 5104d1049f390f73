package bus

import (
	"bufio"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/tetherdev/tether/tlsclient"
)

// Errors a Redis connection's setup is explained with; errors.Is finds them
// in what NewRedis, NewSideClient's commands and the bus's reconnects
// return, so that a command line can add the option to change.
var (
	// ErrRedisNotTLS: a rediss:// connection reached a Redis that speaks
	// plaintext on that port.
	ErrRedisNotTLS = errors.New("the server does not speak TLS")
	// ErrRedisTLSOnly: a redis:// connection reached a port that speaks
	// TLS only (Redis's --tls-port), which closed it at the first command.
	ErrRedisTLSOnly = errors.New("the server closed the plaintext connection at once")
	// ErrRedisClientCert: Redis asks for a client certificate
	// (tls-auth-clients yes) and got none, or refused the one it got.
	ErrRedisClientCert = errors.New("redis refused the TLS client")
)

// plainProbeAfter is how long a TLS handshake with Redis may go without a
// byte from the server before a second connection asks the same port a
// plaintext PING. A plaintext Redis never answers a ClientHello (its
// inline-command reader waits for a newline that may never come), so
// without the probe a rediss:// URL pointed at it would wait out the whole
// dial timeout — and go-redis would dial it again five times. A TLS
// server answers the probe with nothing or an alert, never with a RESP
// reply, so the probe cannot mistake a slow TLS server for a plaintext
// one; it only finds the plaintext one sooner.
const plainProbeAfter = 200 * time.Millisecond

// redisTLSDialer dials TLS connections to Redis nodes with d's trust and
// client certificate. The whole dial (TCP, handshake) ends at ctx's
// deadline, which go-redis sets to the dial timeout, and fails early, with
// ErrRedisNotTLS, when the server turns out to speak plaintext. The name
// the certificate must carry is the host of the address dialled: the
// URL's host, or a cluster node's as the cluster announces it.
func redisTLSDialer(d *tlsclient.Dialer) func(ctx context.Context, network, addr string) (net.Conn, error) {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		return dialRedisTLS(ctx, d, network, addr)
	}
}

func dialRedisTLS(ctx context.Context, d *tlsclient.Dialer, network, addr string) (net.Conn, error) {
	nc, err := (&net.Dialer{KeepAlive: 5 * time.Minute}).DialContext(ctx, network, addr)
	if err != nil {
		return nil, err
	}
	seen := &readSeen{Conn: nc}
	hctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var plain atomic.Bool
	probed := make(chan struct{})
	probe := time.AfterFunc(plainProbeAfter, func() {
		defer close(probed)
		if !seen.any.Load() && speaksPlainRESP(hctx, network, addr) {
			plain.Store(true)
			cancel() // ends the handshake: HandshakeContext closes nc
		}
	})
	tc, err := d.Client(hctx, seen, addr)
	if !probe.Stop() {
		<-probed // the probe runs: wait for it, it owns a connection
	}
	if err == nil {
		return tc, nil
	}
	_ = nc.Close()
	var rh tls.RecordHeaderError
	switch {
	case plain.Load() || errors.As(err, &rh):
		return nil, notTLSError(addr)
	case ctx.Err() != nil:
		return nil, fmt.Errorf("TLS handshake with redis at %s did not finish within the dial timeout (does this port speak TLS? Redis serves it on its --tls-port): %w", addr, ctx.Err())
	case isClientCertRefusal(err):
		return nil, clientCertError(addr, err)
	}
	return nil, fmt.Errorf("TLS handshake with redis at %s: %w", addr, err)
}

func notTLSError(addr string) error {
	return fmt.Errorf("redis at %s answered in plaintext: %w on this port; use a redis:// URL for a plaintext Redis, or point rediss:// at the port Redis serves TLS on (its --tls-port)", addr, ErrRedisNotTLS)
}

func clientCertError(addr string, err error) error {
	return fmt.Errorf("redis at %s: %w (%v): it most likely asks for a client certificate (tls-auth-clients yes) signed by the CA it trusts (its --tls-ca-cert-file)", addr, ErrRedisClientCert, err)
}

// isClientCertRefusal reports whether err is the server's TLS alert for a
// client certificate missing or not accepted. crypto/tls's alert type is
// unexported; its text is what there is to go by.
func isClientCertRefusal(err error) bool {
	s := err.Error()
	return strings.Contains(s, "tls: certificate required") || strings.Contains(s, "tls: bad certificate") ||
		strings.Contains(s, "tls: unknown certificate authority")
}

// explainRedisError adds to err, the failure of the first command on a new
// Redis connection, what it most likely means: under TLS 1.3 a server that
// refuses the client's certificate says so only after the handshake, when
// the client reads; and a TLS-only port closes a plaintext connection
// without a word. tlsURL tells which kind of connection it was. Other
// errors are returned as they are.
func explainRedisError(err error, addr string, tlsURL bool) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, ErrRedisNotTLS) || errors.Is(err, ErrRedisClientCert) || errors.Is(err, ErrRedisTLSOnly):
		return err
	case tlsURL && isClientCertRefusal(err):
		return clientCertError(addr, err)
	case tlsURL && isClosed(err):
		// Redis checks a client certificate after the TLS 1.3 handshake
		// the client saw succeed, and refuses a missing or unknown one by
		// closing the connection without an alert: the first command
		// meets a reset or EOF.
		return clientCertError(addr, fmt.Errorf("the connection was closed after the TLS handshake: %w", err))
	case !tlsURL && isClosed(err):
		return fmt.Errorf("redis at %s: %w (%v): if this port serves TLS only (Redis's --tls-port), use rediss://", addr, ErrRedisTLSOnly, err)
	}
	return err
}

// isClosed reports whether err is the server closing the connection.
func isClosed(err error) bool {
	return errors.Is(err, io.EOF) || errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE)
}

// speaksPlainRESP asks addr a plaintext PING on a connection of its own
// and reports whether a RESP reply comes back (+PONG, or an error such as
// -NOAUTH: either way a plaintext Redis) before ctx ends.
func speaksPlainRESP(ctx context.Context, network, addr string) bool {
	c, err := (&net.Dialer{}).DialContext(ctx, network, addr)
	if err != nil {
		return false
	}
	defer c.Close()
	stop := context.AfterFunc(ctx, func() { _ = c.SetDeadline(time.Now()) })
	defer stop()
	if deadline, ok := ctx.Deadline(); ok {
		_ = c.SetDeadline(deadline)
	}
	if _, err := io.WriteString(c, "PING\r\n"); err != nil {
		return false
	}
	line, err := bufio.NewReaderSize(c, 256).ReadSlice('\n')
	return err == nil && len(line) >= 3 && (line[0] == '+' || line[0] == '-') && line[len(line)-2] == '\r'
}

// readSeen is a connection that notes whether the server has sent anything.
type readSeen struct {
	net.Conn
	any atomic.Bool
}

func (c *readSeen) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	if n > 0 {
		c.any.Store(true)
	}
	return n, err
}

// redisTLS makes the TLS part of opts, which redis.ParseURL set from a
// rediss:// URL, tether's: d's trust and client certificate (the system's
// roots when d is nil), the handshake made by redisTLSDialer, and one dial
// attempt per connection rather than go-redis's five, since a handshake
// that failed (not TLS, a certificate refused) fails again the same way,
// and each could cost the dial timeout. skip_verify=true in the URL is
// honoured only without d.
func redisTLS(opts *redis.Options, d *tlsclient.Dialer) error {
	if opts.TLSConfig == nil {
		if d != nil {
			return errors.New("a TLS configuration for redis needs a rediss:// URL")
		}
		return nil
	}
	if d == nil {
		var err error
		d, err = tlsclient.New(tlsclient.Options{Peer: "Redis", Protocols: []string{}, InsecureSkipVerify: opts.TLSConfig.InsecureSkipVerify})
		if err != nil {
			return err
		}
	} else if opts.TLSConfig.InsecureSkipVerify {
		return errors.New("skip_verify=true in the redis URL and a CA for redis exclude each other")
	}
	opts.Dialer = redisTLSDialer(d)
	opts.DialerRetries = 1
	return nil
}
