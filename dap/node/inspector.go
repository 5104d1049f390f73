//go:build !windows

package node

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"time"
)

// Finding a Node inspector: the URL a node started with --inspect prints on
// stderr, or the target list its HTTP endpoint serves (/json/list) when
// attaching by host and port. Both are outside input and fuzzed.

// inspectorPrefix starts the line node prints when its inspector listens.
const inspectorPrefix = "Debugger listening on "

// ParseInspectorURL returns the WebSocket URL of a "Debugger listening on
// ws://HOST:PORT/ID" line, or ok false if line is not one.
func ParseInspectorURL(line string) (string, bool) {
	rest, ok := strings.CutPrefix(strings.TrimSpace(line), inspectorPrefix)
	if !ok {
		return "", false
	}
	return checkWSURL(strings.TrimSpace(rest))
}

// checkWSURL accepts a ws:// URL with a host, a port and a path.
func checkWSURL(s string) (string, bool) {
	u, err := url.Parse(s)
	if err != nil || u.Scheme != "ws" || u.Port() == "" || u.Hostname() == "" || len(u.Path) < 2 || u.User != nil {
		return "", false
	}
	return u.String(), true
}

// inspectorNoise are the lines node writes to stderr about its inspector,
// which are not the program's output.
var inspectorNoise = []string{
	inspectorPrefix,
	"For help, see: https://nodejs.org/en/docs/inspector",
	"Debugger attached.",
	"Waiting for the debugger to disconnect...",
	"Debugger ending on ",
}

func isInspectorNoise(line string) bool {
	for _, p := range inspectorNoise {
		if strings.HasPrefix(line, p) {
			return true
		}
	}
	return false
}

// scanStderr reads node's stderr line by line: the first inspector URL goes
// to url (once), inspector noise is dropped, and every other line goes to
// out with its newline. It returns at EOF.
func scanStderr(r io.Reader, urlc chan<- string, out func(string)) {
	br := bufio.NewReaderSize(r, 64<<10)
	sent := false
	for {
		line, err := br.ReadString('\n')
		if line != "" {
			trimmed := strings.TrimRight(line, "\r\n")
			if u, ok := ParseInspectorURL(trimmed); ok && !sent {
				sent = true
				urlc <- u // buffered 1
			}
			if !isInspectorNoise(trimmed) {
				out(line)
			}
		}
		if err != nil {
			return
		}
	}
}

// target is one entry of an inspector's /json/list.
type target struct {
	Type                 string `json:"type"`
	Title                string `json:"title"`
	WebSocketDebuggerURL string `json:"webSocketDebuggerUrl"`
}

// parseTargets picks the WebSocket URL of the first node target of a
// /json/list answer.
func parseTargets(body []byte) (string, error) {
	var list []target
	if err := json.Unmarshal(body, &list); err != nil {
		return "", fmt.Errorf("reading the inspector's target list: %w", err)
	}
	for _, t := range list {
		if u, ok := checkWSURL(t.WebSocketDebuggerURL); ok && (t.Type == "node" || t.Type == "") {
			return u, nil
		}
	}
	return "", fmt.Errorf("the inspector lists no node target")
}

// targetURL asks the inspector at addr (host:port) for its target, retrying
// until ctx ends (a process sent SIGUSR1 opens its inspector a moment later).
func targetURL(ctx context.Context, addr string) (string, error) {
	client := &http.Client{Transport: &http.Transport{Proxy: nil, DisableKeepAlives: true}}
	var last error
	for {
		u, err := fetchTargets(ctx, client, addr)
		if err == nil {
			return u, nil
		}
		last = err
		select {
		case <-ctx.Done():
			return "", fmt.Errorf("no Node inspector answered at %s: %w", addr, last)
		case <-time.After(50 * time.Millisecond):
		}
	}
}

func fetchTargets(ctx context.Context, client *http.Client, addr string) (string, error) {
	if _, _, err := net.SplitHostPort(addr); err != nil {
		return "", err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+addr+"/json/list", nil)
	if err != nil {
		return "", err
	}
	res, err := client.Do(req)
	if err != nil {
		return "", err
	}
	defer res.Body.Close()
	body, err := io.ReadAll(io.LimitReader(res.Body, 1<<20))
	if err != nil {
		return "", err
	}
	return parseTargets(body)
}
