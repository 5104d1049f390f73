//go:build !windows

package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/coder/websocket"
	"golang.org/x/sys/unix"

	"github.com/tetherdev/tether/bridge"
	"github.com/tetherdev/tether/internal/termios"
)

// detachKey ends `tether attach --write` on a terminal, where Ctrl-C is
// typed into the shell like any other key: Ctrl-], as in telnet.
const detachKey = 0x1d

// attachReadLimit bounds one message from the bridge; the first one is the
// terminal's recent transcript (64 KiB).
const attachReadLimit = 4 << 20

func runAttach(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("attach", flag.ContinueOnError)
	fs.SetOutput(stderr)
	addr := fs.String("bridge-http", "", "the bridge's local HTTP address (its --http; tether up prints it)")
	token := fs.String("bridge-token", "", "the listener's token (default: read from the token file the bridge wrote for that address)")
	write := fs.Bool("write", false, "also type into the terminal (Ctrl-] detaches when stdin is a terminal)")
	if err := parse(fs, args, 0); err != nil {
		return err
	}
	if *addr == "" {
		return usagef("--bridge-http is required (the address the bridge's --http listens on)")
	}
	u, err := attachURL(*addr, *write)
	if err != nil {
		return usagef("--bridge-http: %v", err)
	}
	if *token == "" {
		if *token, err = bridge.ReadToken(*addr); err != nil {
			return fmt.Errorf("%w (or pass --bridge-token)", err)
		}
	}

	sigCtx, stop := signalContext()
	defer stop()
	dialCtx, cancelDial := context.WithTimeout(sigCtx, 10*time.Second)
	conn, res, err := websocket.Dial(dialCtx, u, &websocket.DialOptions{
		HTTPClient: &http.Client{Transport: &http.Transport{Proxy: nil}},
		HTTPHeader: http.Header{"Authorization": {"Bearer " + *token}},
	})
	cancelDial()
	if err != nil {
		if res != nil && res.StatusCode == http.StatusForbidden {
			return fmt.Errorf("the bridge at %s refused: attach is served to loopback clients only", *addr)
		}
		if res != nil && res.StatusCode == http.StatusUnauthorized {
			return fmt.Errorf("the bridge at %s refused the token: it is not this listener's (a bridge restarted on that port?)", *addr)
		}
		return fmt.Errorf("connecting to the bridge at %s: %w", *addr, err)
	}
	defer conn.CloseNow()
	conn.SetReadLimit(attachReadLimit)

	ctx, cancel := context.WithCancelCause(sigCtx)
	defer cancel(nil)
	nl := "\n"
	switch {
	case !*write:
		fmt.Fprintf(stderr, "tether attach: watching the visible terminal at %s (read-only; Ctrl-C detaches)\n", *addr)
		// Nothing is sent; reading the socket below handles control frames.
	default:
		restore, raw := makeRaw(int(os.Stdin.Fd()))
		defer restore()
		if raw {
			nl = "\r\n"
			fmt.Fprintf(stderr, "tether attach: typing into the visible terminal at %s (Ctrl-] detaches)\r\n", *addr)
		} else {
			fmt.Fprintf(stderr, "tether attach: typing stdin into the visible terminal at %s (Ctrl-C detaches)\n", *addr)
		}
		// The goroutine blocks in a read of stdin that nothing can
		// interrupt; it ends with the process, which exits when this
		// function returns.
		go func() { cancel(typeInto(ctx, conn, os.Stdin, raw)) }()
	}

	for {
		_, p, err := conn.Read(ctx)
		if err != nil {
			return attachEnded(sigCtx, ctx, err, stderr, nl)
		}
		if _, err := stdout.Write(p); err != nil {
			return fmt.Errorf("writing to stdout: %w", err)
		}
	}
}

// errDetached ends an attach the person chose to leave.
var errDetached = errors.New("detached")

// typeInto sends what is read from in to the terminal until in ends (then
// it keeps the attach open and returns nil only when ctx ends) or, in raw
// mode, until the detach key.
func typeInto(ctx context.Context, conn *websocket.Conn, in io.Reader, raw bool) error {
	buf := make([]byte, 4096)
	for {
		n, err := in.Read(buf)
		p := buf[:n]
		detach := false
		if raw {
			if i := bytes.IndexByte(p, detachKey); i >= 0 {
				p, detach = p[:i], true
			}
		}
		if len(p) > 0 {
			if werr := conn.Write(ctx, websocket.MessageBinary, p); werr != nil {
				return werr
			}
		}
		if detach {
			return errDetached
		}
		if err != nil {
			// End of input is not the end of the attach: the terminal's
			// answer to what was typed is still to come.
			<-ctx.Done()
			return nil
		}
	}
}

// attachEnded turns the end of the stream into the command's result:
// sigCtx ends with SIGINT or SIGTERM, ctx also when typing ended.
func attachEnded(sigCtx, ctx context.Context, err error, stderr io.Writer, nl string) error {
	if cause := context.Cause(ctx); sigCtx.Err() != nil || errors.Is(cause, errDetached) {
		fmt.Fprint(stderr, nl+"tether attach: detached"+nl)
		return nil
	} else if ctx.Err() != nil {
		return fmt.Errorf("typing into the terminal: %w", cause)
	}
	var ce websocket.CloseError
	if errors.As(err, &ce) {
		fmt.Fprintf(stderr, "%stether attach: the bridge closed the stream: %s%s", nl, ce.Reason, nl)
		if ce.Code == websocket.StatusNormalClosure || ce.Code == websocket.StatusGoingAway {
			return nil
		}
		return fmt.Errorf("stream closed with status %d", ce.Code)
	}
	return fmt.Errorf("reading the terminal stream: %w", err)
}

// attachURL builds the WebSocket URL from host:port or an http(s)/ws(s) URL.
func attachURL(addr string, write bool) (string, error) {
	u := strings.TrimRight(addr, "/")
	switch {
	case strings.HasPrefix(u, "http://"):
		u = "ws://" + strings.TrimPrefix(u, "http://")
	case strings.HasPrefix(u, "https://"):
		u = "wss://" + strings.TrimPrefix(u, "https://")
	case strings.HasPrefix(u, "ws://"), strings.HasPrefix(u, "wss://"):
	case strings.Contains(u, "://"):
		return "", fmt.Errorf("%q: want host:port or an http:// URL", addr)
	default:
		u = "ws://" + u
	}
	u += bridge.AttachPath
	if write {
		u += "?write=1"
	}
	return u, nil
}

// makeRaw puts the terminal fd in raw mode, so every key (Ctrl-C
// included) goes to the remote shell as typed. It reports false, and
// changes nothing, when fd is not a terminal.
func makeRaw(fd int) (restore func(), ok bool) {
	old, err := termios.Get(fd)
	if err != nil {
		return func() {}, false
	}
	t := *old
	t.Iflag &^= unix.IGNBRK | unix.BRKINT | unix.PARMRK | unix.ISTRIP | unix.INLCR | unix.IGNCR | unix.ICRNL | unix.IXON
	t.Oflag &^= unix.OPOST
	t.Lflag &^= unix.ECHO | unix.ECHONL | unix.ICANON | unix.ISIG | unix.IEXTEN
	t.Cflag &^= unix.CSIZE | unix.PARENB
	t.Cflag |= unix.CS8
	t.Cc[unix.VMIN], t.Cc[unix.VTIME] = 1, 0
	if err := termios.Set(fd, &t); err != nil {
		return func() {}, false
	}
	return func() { _ = termios.Set(fd, old) }, true
}
