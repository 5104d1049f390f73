package redistest

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"strconv"
	"strings"
	"time"
)

// Do runs one command against the server at addr (host:port) on a fresh
// connection and returns the reply: simple and bulk strings as they are,
// integers in decimal, arrays as their items joined by newlines, a nil
// reply as "". A Redis error reply is returned as an error. It is meant
// for administering and inspecting servers in tests, without a client
// library.
func Do(addr string, args ...string) (string, error) {
	return do("tcp", addr, 5*time.Second, args...)
}

func do(network, addr string, timeout time.Duration, args ...string) (string, error) {
	conn, err := net.DialTimeout(network, addr, timeout)
	if err != nil {
		return "", err
	}
	defer conn.Close()
	if err := conn.SetDeadline(time.Now().Add(timeout)); err != nil {
		return "", err
	}
	var b strings.Builder
	fmt.Fprintf(&b, "*%d\r\n", len(args))
	for _, a := range args {
		fmt.Fprintf(&b, "$%d\r\n%s\r\n", len(a), a)
	}
	if _, err := conn.Write([]byte(b.String())); err != nil {
		return "", fmt.Errorf("writing %s: %w", args[0], err)
	}
	return readReply(bufio.NewReader(conn))
}

func readReply(r *bufio.Reader) (string, error) {
	line, err := r.ReadString('\n')
	if err != nil {
		return "", fmt.Errorf("reading reply: %w", err)
	}
	line = strings.TrimSuffix(line, "\r\n")
	if line == "" {
		return "", errors.New("reading reply: empty line")
	}
	switch body := line[1:]; line[0] {
	case '+', ':':
		return body, nil
	case '-':
		return "", errors.New(body)
	case '$':
		n, err := strconv.Atoi(body)
		if err != nil {
			return "", fmt.Errorf("reading bulk length %q: %w", body, err)
		}
		if n < 0 {
			return "", nil
		}
		buf := make([]byte, n+2)
		if _, err := io.ReadFull(r, buf); err != nil {
			return "", fmt.Errorf("reading bulk: %w", err)
		}
		return string(buf[:n]), nil
	case '*':
		n, err := strconv.Atoi(body)
		if err != nil {
			return "", fmt.Errorf("reading array length %q: %w", body, err)
		}
		items := make([]string, 0, max(n, 0))
		for range n {
			item, err := readReply(r)
			if err != nil {
				return "", err
			}
			items = append(items, item)
		}
		return strings.Join(items, "\n"), nil
	default:
		return "", fmt.Errorf("reading reply: unexpected %q", line)
	}
}
