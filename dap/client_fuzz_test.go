//go:build !windows

package dap_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tetherdev/tether/dap"
)

// frame is one DAP base-protocol message.
func frame(body string) string { return fmt.Sprintf("Content-Length: %d\r\n\r\n%s", len(body), body) }

// FuzzClientReadsAdapterOutput feeds arbitrary adapter output to a
// Client with a request waiting: the read loop never panics, the request
// is answered (by a response or by the connection's end) and the client
// ends when the output does. Adapters are real programs that can crash,
// mix their own logging into stdout or speak a later DAP; none of that
// may hang a session.
func FuzzClientReadsAdapterOutput(f *testing.F) {
	for _, s := range []string{
		"",
		frame(`{"seq":1,"type":"response","request_seq":1,"command":"initialize","success":true,"body":{"supportsConfigurationDoneRequest":true}}`),
		frame(`{"seq":1,"type":"response","request_seq":1,"command":"initialize","success":false,"message":"nope","body":{"error":{"id":1,"format":"bad {x}"}}}`),
		frame(`{"seq":2,"type":"event","event":"stopped","body":{"reason":"breakpoint","threadId":1,"hitBreakpointIds":[1]}}`) +
			frame(`{"seq":3,"type":"response","request_seq":1,"success":true}`),
		frame(`{"seq":4,"type":"request","command":"runInTerminal","arguments":{"args":["x"]}}`),
		frame(`{"seq":5,"type":"event","event":"output","body":{"category":"stdout","output":"hi\n"}}`),
		frame(`not json`) + frame(`{"type":"response","request_seq":1,"success":true}`),
		frame(`{"type":"response","request_seq":"1"}`), frame(`[]`), frame(`null`), frame(``),
		"Content-Length: 99999999999\r\n\r\n{}", "Content-Length: 5\r\n\r\n{}", "Content-Length: -1\r\n\r\n",
		"Content-Type: x\r\nContent-Length: 2\r\n\r\n{}", "Content-Length: 2\n\n{}", "garbage before\r\n\r\n",
		frame(`{"type":"response","request_seq":1,"success":true,"body":` + strings.Repeat("[", 10001) + `}`),
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		r, w := io.Pipe()
		var events atomic.Int64
		c := dap.NewClient(r, io.Discard, func(*dap.Message) { events.Add(1) })
		ch, err := c.Send(context.Background(), "initialize", map[string]any{"adapterID": "fuzz"})
		if err != nil {
			t.Fatal(err)
		}
		wrote := make(chan struct{})
		go func() {
			defer close(wrote)
			_, _ = w.Write(data)
			_ = w.Close()
		}()
		// A client that stopped reading early leaves the rest unread:
		// closing the read side ends the write.
		defer func() { _ = r.Close(); <-wrote }()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		var body map[string]any
		err = c.Await(ctx, "initialize", ch, &body)
		if errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("the request was not answered within 10s of the adapter's output ending (%d events)", events.Load())
		}
		select {
		case <-c.Done():
		case <-time.After(10 * time.Second):
			t.Fatal("the client did not end with the adapter's output")
		}
		if c.Err() == nil {
			t.Fatal("an ended client reports no error")
		}
	})
}
