package bus

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

// Defaults of a pipe's timeouts when the Redis URL sets none.
const (
	pipeReadTimeout  = 3 * time.Second // for a reply once its command is out
	pipeWriteTimeout = 3 * time.Second
	// maxPipeQueue bounds the commands waiting for a connection (while one
	// is being dialled); more fail at once.
	maxPipeQueue = 100_000
	// maxOwnWrites bounds the writes a publishing goroutine makes for
	// others before it leaves the rest to a goroutine of the pipe.
	maxOwnWrites = 4
)

// errPipeBusy is what a publish gets when the queue for a connection that is
// being dialled is full.
var errPipeBusy = errors.New("redis publish queue full while reconnecting")

// pipe is the publisher of a bus on a single server: it publishes on one
// Redis connection of its own without waiting for the replies. The goroutine
// that publishes writes the command (at low load, at once and by itself,
// with no handoff); publishes that arrive while a write is under way are
// appended and go out with the next write, so under load many share one
// syscall (a flat combining writer). A reader goroutine takes the replies in
// order and hands each count to its command's pubDone, which runs on that
// goroutine (or on the publisher's, for an error found while sending).
//
// go-redis (v9.23) reports no reply as it arrives: a command, pipelined or
// not, waits for its reply on the caller's goroutine, and so does one sent
// through Client.AutoPipeline. Client.AsyncAutoPipeline (experimental) does
// return at once, but it has no completion callback: the outcome is known
// only by blocking on the command's result or its AutoFuture's Wait. Either
// way a broker would spend a goroutine (or a blocked read loop) per reply it
// forwards, which is why the pipe stays. What it earns, against go-redis's
// pipelines (clusterPublisher with PUBLISH, TETHER_TUNING=no-redispipe;
// make bench-peers, 2026-12-04, two instances on one Redis, medians of
// five rounds' ratios): without it the brokers made 0.90x the calls per
// CPU-second at c=1, at 1.05x the p99; at c=64 the two were within the
// rounds' spread (1.01x, 1.02x).
//
// The connection is dialled on first use and again after it fails; commands
// issued meanwhile wait for the dial (up to maxPipeQueue). A failed
// connection fails every command sent on it and not yet answered; those
// queued behind them wait for the next connection (the retry rule of
// publisher).
type pipe struct {
	opts   *redis.Options
	prefix string // of every channel
	dial   func(ctx context.Context, network, addr string) (net.Conn, error)
	name   string // CLIENT SETNAME
	// wg counts the reader and dial goroutines (the bus's group).
	wg *sync.WaitGroup

	mu      sync.Mutex
	conn    net.Conn // nil while down or dialling
	dialing bool
	closed  bool
	out     []byte    // commands not yet written
	outN    int       // how many
	spare   []byte    // the other write buffer
	writing bool      // a goroutine is writing out
	waiting []pubDone // one per command written or queued, in order
	head    int       // waiting[head] gets the next reply
	// since is when waiting[head] became the oldest command owed a
	// reply: the read timeout runs from then.
	since time.Time
}

var _ publisher = (*pipe)(nil)

func newPipe(opts *redis.Options, prefix, name string, wg *sync.WaitGroup) *pipe {
	dial := opts.Dialer
	if dial == nil {
		dial = redis.NewDialer(opts)
	}
	return &pipe{opts: opts, prefix: prefix, dial: dial, name: name, wg: wg}
}

func (p *pipe) readTimeout() time.Duration {
	if p.opts.ReadTimeout > 0 {
		return p.opts.ReadTimeout
	}
	return pipeReadTimeout
}

func (p *pipe) writeTimeout() time.Duration {
	if p.opts.WriteTimeout > 0 {
		return p.opts.WriteTimeout
	}
	return pipeWriteTimeout
}

// publish implements publisher.
func (p *pipe) publish(ctx context.Context, channel string, msg []byte) (int, error) {
	ch := make(chan pubResult, 1)
	p.publishAsync(channel, msg, func(n int, err error) { ch <- pubResult{n, err} })
	select {
	case res := <-ch:
		return res.n, res.err
	case <-ctx.Done():
		// The command is out or queued; its outcome is dropped.
		return 0, ctx.Err()
	}
}

type pubResult struct {
	n   int
	err error
}

// publishAsync implements publisher with PUBLISH. It never waits for Redis'
// reply; it may write, and then waits at most for the write (bounded by the
// write timeout).
func (p *pipe) publishAsync(channel string, msg []byte, done pubDone) {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		done(0, ErrClosed)
		return
	}
	if p.conn == nil && len(p.waiting)-p.head >= maxPipeQueue {
		p.mu.Unlock()
		done(0, errPipeBusy)
		return
	}
	p.out = appendPublish(p.out, p.prefix, channel, msg)
	p.outN++
	if p.head == len(p.waiting) {
		p.since = time.Now()
	}
	p.waiting = append(p.waiting, done)
	if p.conn == nil {
		if !p.dialing {
			p.dialing = true
			p.wg.Add(1)
			go p.connect()
		}
		p.mu.Unlock()
		return
	}
	p.flushLocked()
}

// flushLocked writes the queued commands unless another goroutine is at it
// (it then writes them too); p.mu is held on entry and released on return.
// A publisher writes at most maxOwnWrites times: if commands keep coming, a
// goroutine of the pipe takes over, so no publisher is kept writing for
// others.
func (p *pipe) flushLocked() {
	if p.writing {
		p.mu.Unlock()
		return
	}
	p.writing = true
	p.writeOut(maxOwnWrites)
}

// writeOut writes what is queued, up to rounds writes (0: until the queue
// is empty), then gives up the writing; p.mu is held on entry and released
// on return.
func (p *pipe) writeOut(rounds int) {
	for n := 0; len(p.out) > 0 && p.conn != nil; n++ {
		if rounds > 0 && n == rounds {
			p.wg.Add(1)
			go func() {
				defer p.wg.Done()
				p.mu.Lock()
				p.writeOut(0)
			}()
			p.mu.Unlock()
			return
		}
		conn, buf := p.conn, p.out
		p.out, p.outN = p.spare[:0], 0
		p.mu.Unlock()
		_ = conn.SetWriteDeadline(time.Now().Add(p.writeTimeout()))
		_, err := conn.Write(buf)
		p.mu.Lock()
		p.spare = buf[:0]
		if err != nil {
			// The reader fails what was sent; what is queued after it
			// waits for the next connection.
			p.brokenLocked(conn, fmt.Errorf("writing to redis: %w", err))
		}
	}
	p.writing = false
	p.mu.Unlock()
}

// connect dials and sets up a connection, then writes what queued up
// meanwhile and reads replies until the connection fails.
func (p *pipe) connect() {
	defer p.wg.Done()
	conn, err := p.open()
	p.mu.Lock()
	p.dialing = false
	if err == nil && p.closed {
		err = ErrClosed
		_ = conn.Close()
	}
	if err != nil {
		fail := p.takeAllLocked()
		p.out, p.outN = p.out[:0], 0
		p.mu.Unlock()
		for _, done := range fail {
			done(0, err)
		}
		return
	}
	p.conn = conn
	p.wg.Add(1)
	go p.read(conn)
	p.flushLocked()
}

// open dials Redis and authenticates, within the dial timeout.
func (p *pipe) open() (net.Conn, error) {
	timeout := p.opts.DialTimeout
	if timeout <= 0 {
		timeout = redisDialTimeout
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	network := p.opts.Network
	if network == "" {
		network = "tcp"
	}
	conn, err := p.dial(ctx, network, p.opts.Addr)
	if err != nil {
		return nil, fmt.Errorf("dialling redis at %s: %w", p.opts.Addr, err)
	}
	// The setup commands go out together; each must answer +OK.
	var setup []byte
	n := 0
	if p.opts.Password != "" {
		if p.opts.Username != "" {
			setup = appendArray(setup, "AUTH", p.opts.Username, p.opts.Password)
		} else {
			setup = appendArray(setup, "AUTH", p.opts.Password)
		}
		n++
	}
	if p.name != "" {
		setup = appendArray(setup, "CLIENT", "SETNAME", p.name)
		n++
	}
	if n == 0 {
		return conn, nil
	}
	deadline, _ := ctx.Deadline()
	_ = conn.SetDeadline(deadline)
	if _, err := conn.Write(setup); err != nil {
		_ = conn.Close()
		return nil, fmt.Errorf("setting up redis connection: %w", err)
	}
	rd := bufio.NewReader(conn)
	for i := range n {
		line, err := rd.ReadSlice('\n')
		if err == nil && !bytes.HasPrefix(line, []byte("+OK")) && !(i == 0 && authNotNeeded(p.opts, line)) {
			err = errors.New(string(bytes.TrimSpace(line)))
		}
		if err != nil {
			_ = conn.Close()
			return nil, fmt.Errorf("setting up redis connection: %w", explainRedisError(err, p.opts.Addr, p.opts.TLSConfig != nil))
		}
	}
	if rd.Buffered() > 0 {
		_ = conn.Close()
		return nil, errors.New("setting up redis connection: unexpected data from redis")
	}
	_ = conn.SetDeadline(time.Time{})
	return conn, nil
}

// authNotNeeded reports whether reply refuses a password-only AUTH because
// the server has no password configured: the connection is then as
// authorised as it can be, and go-redis's subscriber (whose HELLO carries
// the password as the default user's) accepts the same URL, so the pipe does
// too rather than failing every publish of a broker that started fine.
func authNotNeeded(opts *redis.Options, reply []byte) bool {
	return opts.Password != "" && opts.Username == "" &&
		bytes.HasPrefix(reply, []byte("-ERR")) && bytes.Contains(reply, []byte("without any password configured"))
}

// read hands each reply on conn to its command's pubDone until conn fails.
// The oldest command owed a reply may wait the read timeout for it; an idle
// connection may stay silent.
func (p *pipe) read(conn net.Conn) {
	defer p.wg.Done()
	rd := bufio.NewReaderSize(conn, 16<<10)
	timeout := p.readTimeout()
	for {
		if rd.Buffered() == 0 {
			// About to block: wait at most until the oldest command's
			// reply is overdue, or a timeout's length when none is owed.
			p.mu.Lock()
			deadline := time.Now().Add(timeout)
			if p.head < len(p.waiting) {
				deadline = p.since.Add(timeout)
			}
			p.mu.Unlock()
			_ = conn.SetReadDeadline(deadline)
		}
		line, err := rd.ReadSlice('\n')
		if err != nil {
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() && len(line) == 0 && !p.overdue(conn, timeout) {
				continue
			}
			p.mu.Lock()
			p.brokenLocked(conn, fmt.Errorf("reading from redis: %w", err))
			p.mu.Unlock()
			return
		}
		n, rerr := parseIntReply(line)
		if rerr == errUnexpectedReply {
			p.mu.Lock()
			p.brokenLocked(conn, fmt.Errorf("redis sent %q to a publish", bytes.TrimSpace(line)))
			p.mu.Unlock()
			return
		}
		p.mu.Lock()
		if p.head == len(p.waiting) {
			p.brokenLocked(conn, fmt.Errorf("redis sent %q with no publish waiting", bytes.TrimSpace(line)))
			p.mu.Unlock()
			return
		}
		done := p.waiting[p.head]
		p.waiting[p.head] = nil
		p.head++
		if p.head == len(p.waiting) {
			p.waiting, p.head = p.waiting[:0], 0
		} else {
			p.since = time.Now()
		}
		p.mu.Unlock()
		done(n, rerr)
	}
}

// overdue reports whether a reply on conn is overdue: conn is no longer
// current, or its oldest command waited the timeout.
func (p *pipe) overdue(conn net.Conn, timeout time.Duration) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.conn != conn {
		return true
	}
	return p.head < len(p.waiting) && time.Since(p.since) >= timeout
}

// brokenLocked retires conn (if still current) and fails the commands sent
// on it; commands still queued stay for the next connection, which a
// goroutine starts dialling.
func (p *pipe) brokenLocked(conn net.Conn, err error) {
	if p.conn != conn {
		return
	}
	p.conn = nil
	_ = conn.Close()
	// Commands in p.out were not written to conn: they keep their places
	// at the end of waiting.
	sent := len(p.waiting) - p.head - p.outN
	fail := make([]pubDone, sent)
	copy(fail, p.waiting[p.head:p.head+sent])
	rest := append([]pubDone(nil), p.waiting[p.head+sent:]...)
	p.waiting, p.head, p.since = rest, 0, time.Now()
	if len(rest) > 0 && !p.closed && !p.dialing {
		p.dialing = true
		p.wg.Add(1)
		go p.connect()
	}
	if len(fail) > 0 {
		// Not under p.mu: a pubDone may publish again.
		p.wg.Add(1)
		go func() {
			defer p.wg.Done()
			for _, done := range fail {
				done(0, err)
			}
		}()
	}
}

// takeAllLocked removes and returns every waiting pubDone.
func (p *pipe) takeAllLocked() []pubDone {
	fail := append([]pubDone(nil), p.waiting[p.head:]...)
	p.waiting, p.head = p.waiting[:0], 0
	return fail
}

// close implements publisher: it fails everything waiting, sent or not, and
// closes the connection.
func (p *pipe) close() {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return
	}
	p.closed = true
	conn := p.conn
	p.conn = nil
	fail := p.takeAllLocked()
	p.out = nil
	p.mu.Unlock()
	if conn != nil {
		_ = conn.Close()
	}
	for _, done := range fail {
		done(0, ErrClosed)
	}
}

var errUnexpectedReply = errors.New("unexpected reply")

// parseIntReply reads a RESP2 reply line to a PUBLISH: ":n" or an error.
func parseIntReply(line []byte) (int, error) {
	line = bytes.TrimSuffix(line, []byte("\r\n"))
	if len(line) == 0 {
		return 0, errUnexpectedReply
	}
	switch line[0] {
	case ':':
		n, err := strconv.Atoi(string(line[1:]))
		if err != nil {
			return 0, errUnexpectedReply
		}
		return n, nil
	case '-':
		return 0, redisError(line[1:])
	}
	return 0, errUnexpectedReply
}

// redisError is an error reply from Redis.
type redisError string

func (e redisError) Error() string { return string(e) }

// appendPublish appends PUBLISH prefix+channel msg as a RESP array of bulk
// strings.
func appendPublish(b []byte, prefix, channel string, msg []byte) []byte {
	b = append(b, "*3\r\n$7\r\nPUBLISH\r\n$"...)
	b = strconv.AppendInt(b, int64(len(prefix)+len(channel)), 10)
	b = append(b, "\r\n"...)
	b = append(b, prefix...)
	b = append(b, channel...)
	b = append(b, "\r\n$"...)
	b = strconv.AppendInt(b, int64(len(msg)), 10)
	b = append(b, "\r\n"...)
	b = append(b, msg...)
	return append(b, "\r\n"...)
}

func appendArray(b []byte, args ...string) []byte {
	b = append(b, '*')
	b = strconv.AppendInt(b, int64(len(args)), 10)
	b = append(b, "\r\n"...)
	for _, a := range args {
		b = appendBulk(b, a)
	}
	return b
}

func appendBulk(b []byte, s string) []byte {
	b = append(b, '$')
	b = strconv.AppendInt(b, int64(len(s)), 10)
	b = append(b, "\r\n"...)
	b = append(b, s...)
	return append(b, "\r\n"...)
}
