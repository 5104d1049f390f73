package chaos

import (
	"bytes"
	"context"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
	"time"

	"github.com/tetherdev/tether/broker/caller"
	"github.com/tetherdev/tether/protocol"
)

// The calls of a run: what each caller sends, how it is sent, and the
// checks made on each answer as it arrives. The checks that need the whole
// fault log are made at the end (verdict_test.go).

// way is how a call is sent.
type way uint8

const (
	wayHTTP  way = iota // caller.HTTP to an entry broker
	wayBus              // caller.BusCaller on the run's own Redis connection
	wayMCP              // an MCP tool call through an entry broker's MCP endpoint (mcp_test.go)
	wayAsync            // caller.HTTP's Submit, Wait and Status through the brokers (async_test.go)
	ways
)

var wayNames = [ways]string{"http", "bus", "mcp", "async"}

func (w way) String() string { return wayNames[w] }

// act is what the call asks of the workspace.
type act uint8

// terminalMinTimeout is the shortest timeout of a terminal call: its
// command takes 200 ms.
const terminalMinTimeout = 2500 * time.Millisecond

const (
	actPing     act = iota // bridge: /api/ping echoes the payload
	actTerminal            // bridge: a command that takes 200 ms and prints the nonce and its directory
	actAck                 // client: answer through the ack after delay_ms
	actEvent               // client: answer with a tool_response event
	actTwice               // client: answer twice (event, then ack)
	actLate                // client: answer after the call's timeout
	actSilent              // client: never answer
	actCancel              // client: answer after 1.5 s; the caller gives up before
	actRead                // bridge, over MCP: file_read of whoami.txt
	acts
)

var actNames = [acts]string{"ping", "terminal", "ack", "event", "twice", "late", "silent", "cancel", "read"}

func (a act) String() string { return actNames[a] }

// misbehaves reports whether the act itself keeps the call from
// succeeding: the workspace answers too late or never, or the caller
// gives up first.
func (a act) misbehaves() bool { return a == actLate || a == actSilent || a == actCancel }

// call is one call being made.
type call struct {
	seq     uint64
	cid     string
	nonce   string
	ws      *workspace
	entry   int // entry broker of an HTTP, MCP or async call; -1 for the bus
	way     way
	act     act
	timeout time.Duration
	// wait: the call waits for an offline workspace (wait_for_workspace_ms)
	// instead of answering workspace_offline.
	wait bool
	// giveUp, for actCancel: when the caller stops waiting (an async
	// call's caller cancels it).
	giveUp time.Duration
	// key, for some async calls: the idempotency key.
	key      string
	endpoint string
	payload  json.RawMessage
}

// record is what the run keeps of a call, compactly: a long run keeps a
// million of them. Times are offsets from the run's start.
type record struct {
	ws         int16
	entry      int8
	way        way
	act        act
	outcome    uint16 // index in the run's outcome names; 0 is "ok"
	wait       bool
	flags      uint8 // flagLost (async_test.go)
	timeout    time.Duration
	sent, done time.Duration
	checked    time.Duration // async: when the outcome was read back
	finished   bool
}

// outcomeOK is the outcome of a call that succeeded and passed every check
// made on its answer.
const outcomeOK = "ok"

// plan draws the next call: its workspace, way, act and timeout.
func (r *run) plan(rng *rand.Rand, seq uint64) *call {
	c := &call{seq: seq, cid: r.cid(seq), entry: -1}
	var nonce [8]byte
	for i := range nonce {
		nonce[i] = byte(rng.Uint32())
	}
	c.nonce = hex.EncodeToString(nonce[:])
	c.ws = r.topo.spaces[rng.IntN(len(r.topo.spaces))]
	switch n := rng.IntN(40); {
	case n < 2 && c.ws.bridge():
		c.way = wayMCP
	case n < 8:
		c.way = wayAsync
	case n < 24:
		c.way = wayHTTP
	default:
		c.way = wayBus
	}
	if c.way != wayBus {
		c.entry = rng.IntN(len(r.topo.brokers))
	}
	// Timeouts from 1 s to 4 s (terminal commands at least
	// terminalMinTimeout): long enough that a healthy path always
	// answers in time on a loaded machine, short enough that faults end
	// many of them.
	c.timeout = time.Second + time.Duration(rng.Int64N(int64(3*time.Second)))
	c.timeout = c.timeout.Truncate(time.Millisecond)
	if c.way == wayMCP {
		c.timeout = mcpToolTimeout
	}
	if c.way == wayAsync && rng.IntN(4) == 0 {
		c.key = "key-" + c.cid
	}
	c.wait = c.way != wayMCP && rng.IntN(10) == 0
	if c.way == wayMCP {
		c.act = actRead
	} else if c.ws.bridge() {
		c.act = actPing
		if rng.IntN(100) < 3 {
			c.act = actTerminal
			// The bridge ends a command 250 ms before the call's deadline,
			// and a bridge's first command also starts its terminal: on a
			// machine running other test packages at once that took over a
			// second (make test saw a clean 1.375 s call end timed out).
			c.timeout = max(c.timeout, terminalMinTimeout)
		}
	} else {
		switch n := rng.IntN(1000); {
		case n < 700:
			c.act = actAck
		case n < 900:
			c.act = actEvent
		case n < 980:
			c.act = actTwice
		case n < 985:
			c.act = actLate
		case n < 990:
			c.act = actSilent
		default:
			c.act = actCancel
			c.giveUp = 100*time.Millisecond + time.Duration(rng.Int64N(int64(400*time.Millisecond)))
		}
	}
	switch c.act {
	case actRead:
		c.endpoint = "mcp file_read"
	case actPing:
		c.endpoint = "/api/ping"
		c.payload = fmt.Appendf(nil, `{"nonce":%q,"ws":%q}`, c.nonce, c.ws.id)
	case actTerminal:
		c.endpoint = "/api/terminal/execute"
		c.payload = fmt.Appendf(nil, `{"command":"sleep 0.2; echo %s \"$PWD\"","hidden":true}`, c.nonce)
	default:
		// Delays up to 150 ms, well inside the shortest timeout.
		delay := rng.IntN(150)
		if c.act == actCancel {
			delay = 1500
		}
		c.endpoint = "/api/ping"
		c.payload = fmt.Appendf(nil, `{"nonce":%q,"ws":%q,"delay_ms":%d,"act":%q}`, c.nonce, c.ws.id, delay, c.act)
	}
	return c
}

// cid is the correlation id of call seq; seqOf reads it back.
func (r *run) cid(seq uint64) string { return r.id + "-" + strconv.FormatUint(seq, 10) }

func (r *run) seqOf(cid string) (uint64, bool) {
	rest, ok := strings.CutPrefix(cid, r.id+"-")
	if !ok {
		return 0, false
	}
	seq, err := strconv.ParseUint(rest, 10, 64)
	return seq, err == nil
}

// send makes the call the way it was planned and returns the answer.
func (r *run) send(c *call) protocol.ToolResponse {
	// A margin past the timeout so that the run always ends, even if
	// tether never answered: the lateness check reports such a call.
	limit := c.timeout + 5*time.Second
	if c.act == actCancel {
		limit = c.giveUp
	}
	ctx, cancel := context.WithTimeout(context.Background(), limit)
	defer cancel()
	req := caller.Request{WorkspaceID: c.ws.id, Endpoint: c.endpoint, Payload: c.payload, Timeout: c.timeout, CorrelationID: c.cid}
	if c.wait {
		// Up to its deadline, which then answers.
		req.WaitForWorkspace = c.timeout
	}
	switch c.way {
	case wayHTTP:
		return r.http[c.entry].Call(ctx, req)
	default:
		return r.bus.Call(ctx, req)
	}
}

// judge checks an answer against its call and returns the call's outcome:
// "ok", the error code, or a violation's description (bad set).
func (r *run) judge(c *call, resp protocol.ToolResponse) (outcome string, bad string) {
	if resp.CorrelationID != c.cid {
		return "wrong_correlation_id", fmt.Sprintf("the answer carries correlation id %q", resp.CorrelationID)
	}
	if !resp.Success {
		if resp.Error == "" {
			return "no_error_code", "a failure without an error code: " + resp.Message
		}
		return resp.Error, ""
	}
	if c.act.misbehaves() {
		return "accepted_after_deadline", fmt.Sprintf("succeeded although the workspace answered %s: %.200s", c.act, resp.Result)
	}
	switch c.act {
	case actPing:
		var echo struct{ Nonce, WS string }
		if err := json.Unmarshal(resp.Result, &echo); err != nil || echo.Nonce != c.nonce || echo.WS != c.ws.id || !bytes.Equal(bytes.TrimSpace(resp.Result), c.payload) {
			return "wrong_result", fmt.Sprintf("the echo %.200s is not the payload %s", resp.Result, c.payload)
		}
	case actTerminal:
		var res struct {
			Success  bool
			TimedOut bool `json:"timed_out"`
			Output   string
		}
		if err := json.Unmarshal(resp.Result, &res); err != nil {
			return "wrong_result", fmt.Sprintf("the result %.200s is not a terminal result: %v", resp.Result, err)
		}
		if res.TimedOut {
			// Delivered with less time left than the command takes (it
			// waited for its workspace): it ran, and was ended in time.
			return "command_timed_out", ""
		}
		want := c.nonce + " " + c.ws.root
		if strings.TrimSpace(res.Output) != want {
			if strings.Contains(res.Output, c.nonce) {
				return "wrong_workspace", fmt.Sprintf("the command ran in %q, not in %s's root %q", res.Output, c.ws.id, c.ws.root)
			}
			return "wrong_result", fmt.Sprintf("the command printed %q, want %q", res.Output, want)
		}
		if !res.Success {
			return "command_failed", ""
		}
	default:
		var res struct {
			Workspace string
			Forged    bool
			Echo      struct{ Nonce, WS string }
		}
		if err := json.Unmarshal(resp.Result, &res); err != nil {
			return "wrong_result", fmt.Sprintf("the result %.200s is not a client's echo: %v", resp.Result, err)
		}
		switch {
		case res.Forged:
			return "forged_answer", fmt.Sprintf("the answer %.200s was forged by workspace %s, which was not given the call", resp.Result, res.Workspace)
		case res.Workspace != c.ws.id:
			return "wrong_workspace", fmt.Sprintf("answered by workspace %q, not %s", res.Workspace, c.ws.id)
		case res.Echo.Nonce != c.nonce || res.Echo.WS != c.ws.id:
			return "wrong_result", fmt.Sprintf("the echo %.200s is not this call's payload %s", resp.Result, c.payload)
		}
	}
	return outcomeOK, ""
}
