package bench

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os/exec"
	"strings"
	"syscall"
	"testing"

	"github.com/tetherdev/tether/internal/proctree"
)

// A lean MCP client: just enough of the protocol to open a session and
// call a tool, over streamable HTTP or over a process's stdio. The load
// generator shares the machine with what it measures, so it is kept lean,
// as runLoad is: the figures are then the server's, not an SDK client's
// (the Go SDK decodes each message with a fresh 32 KB buffer).

// mcpProtocolVersion is the version the lean client asks for.
const mcpProtocolVersion = "2025-06-18"

const (
	mcpInitialize  = `{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"` + mcpProtocolVersion + `","capabilities":{},"clientInfo":{"name":"bench","version":"0"}}}`
	mcpInitialized = `{"jsonrpc":"2.0","method":"notifications/initialized"}`
	mcpCallTrue    = `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"terminal_run","arguments":{"command":"true"}}}`
)

// checkToolTrue checks a tools/call response for terminal_run `true`.
func checkToolTrue(msg []byte) error {
	var resp struct {
		Result *struct {
			IsError bool `json:"isError"`
			Content []struct {
				Text string `json:"text"`
			} `json:"content"`
		} `json:"result"`
		Error *struct {
			Message string `json:"message"`
		} `json:"error"`
	}
	if err := json.Unmarshal(msg, &resp); err != nil {
		return fmt.Errorf("decoding %.300q: %w", msg, err)
	}
	switch {
	case resp.Error != nil:
		return fmt.Errorf("tools/call: %s", resp.Error.Message)
	case resp.Result == nil || resp.Result.IsError || len(resp.Result.Content) == 0 || !strings.HasPrefix(resp.Result.Content[0].Text, "Exit code 0"):
		return fmt.Errorf("terminal_run true: %.300s", msg)
	}
	return nil
}

// leanHTTP is an MCP session over streamable HTTP.
type leanHTTP struct {
	client  *http.Client
	url     string
	token   string
	session string
}

func dialLeanHTTP(tb testing.TB, client *http.Client, url, token string) *leanHTTP {
	tb.Helper()
	c := &leanHTTP{client: client, url: url, token: token}
	res, body, err := c.post(mcpInitialize)
	if err != nil || res.StatusCode != http.StatusOK {
		tb.Fatalf("MCP initialize: %v %v %s", err, res, body)
	}
	if c.session = res.Header.Get("Mcp-Session-Id"); c.session == "" {
		tb.Fatal("MCP initialize: no Mcp-Session-Id")
	}
	if res, body, err := c.post(mcpInitialized); err != nil || res.StatusCode != http.StatusAccepted {
		tb.Fatalf("MCP initialized: %v %v %s", err, res, body)
	}
	tb.Cleanup(func() {
		req, _ := http.NewRequest(http.MethodDelete, c.url, nil)
		c.headers(req)
		if res, err := c.client.Do(req); err == nil {
			res.Body.Close()
		}
	})
	return c
}

func (c *leanHTTP) headers(req *http.Request) {
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Authorization", "Bearer "+c.token)
	if c.session != "" {
		req.Header.Set("Mcp-Session-Id", c.session)
		req.Header.Set("Mcp-Protocol-Version", mcpProtocolVersion)
	}
}

func (c *leanHTTP) post(body string) (*http.Response, []byte, error) {
	req, err := http.NewRequest(http.MethodPost, c.url, strings.NewReader(body))
	if err != nil {
		return nil, nil, err
	}
	c.headers(req)
	res, err := c.client.Do(req)
	if err != nil {
		return nil, nil, err
	}
	raw, err := io.ReadAll(res.Body)
	_ = res.Body.Close()
	return res, raw, err
}

// callTrue calls terminal_run `true`: the answer is an event stream whose
// data line is the response.
func (c *leanHTTP) callTrue() error {
	res, raw, err := c.post(mcpCallTrue)
	if err != nil {
		return err
	}
	if res.StatusCode != http.StatusOK {
		return fmt.Errorf("HTTP %d: %.300s", res.StatusCode, raw)
	}
	for l := range bytes.SplitSeq(raw, []byte("\n")) {
		if data, ok := bytes.CutPrefix(l, []byte("data: ")); ok {
			return checkToolTrue(data)
		}
	}
	return checkToolTrue(raw) // a JSON answer
}

// leanStdio is an MCP session with a process over its stdin and stdout.
type leanStdio struct {
	in  io.WriteCloser
	out *bufio.Reader
}

func startLeanStdio(tb testing.TB, cmd *exec.Cmd) *leanStdio {
	tb.Helper()
	in, err := cmd.StdinPipe()
	if err != nil {
		tb.Fatal(err)
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		tb.Fatal(err)
	}
	cmd.SysProcAttr = proctree.DieWithParent(&syscall.SysProcAttr{}, syscall.SIGKILL)
	if err := cmd.Start(); err != nil {
		tb.Fatalf("starting %s: %v", cmd.Path, err)
	}
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	tb.Cleanup(func() { _ = in.Close(); <-done }) // EOF on stdin ends tether mcp
	c := &leanStdio{in: in, out: bufio.NewReaderSize(out, 64<<10)}
	if _, err := c.request(mcpInitialize); err != nil {
		tb.Fatalf("MCP initialize: %v", err)
	}
	if _, err := io.WriteString(c.in, mcpInitialized+"\n"); err != nil {
		tb.Fatal(err)
	}
	return c
}

// request writes one request and returns the next message that is not a
// notification.
func (c *leanStdio) request(msg string) ([]byte, error) {
	if _, err := io.WriteString(c.in, msg+"\n"); err != nil {
		return nil, err
	}
	for {
		l, err := c.out.ReadBytes('\n')
		if err != nil {
			return nil, err
		}
		if !bytes.Contains(l, []byte(`"method"`)) || bytes.Contains(l, []byte(`"result"`)) {
			return l, nil
		}
	}
}

func (c *leanStdio) callTrue() error {
	msg, err := c.request(mcpCallTrue)
	if err != nil {
		return err
	}
	return checkToolTrue(msg)
}
