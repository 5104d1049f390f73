package caller_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log"
	"time"

	"github.com/tetherdev/tether/broker/bus"
	"github.com/tetherdev/tether/broker/caller"
)

// A backend worker that shares the brokers' Redis calls workspaces directly:
// one caller.BusCaller per process, used from any number of goroutines. The
// prefix must be the brokers' --redis-prefix.
func ExampleBusCaller() {
	ctx := context.Background()
	rb, err := bus.NewRedis(ctx, bus.RedisConfig{URL: "redis://127.0.0.1:6379", Prefix: "tether:"})
	if err != nil {
		log.Fatal(err)
	}
	defer rb.Close()
	c, err := caller.NewBusCaller(ctx, rb, caller.BusCallerOptions{})
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()

	resp := c.Call(ctx, caller.Request{
		WorkspaceID: "ws-1",
		Endpoint:    "/api/terminal/execute",
		Payload:     json.RawMessage(`{"command":"go test ./..."}`),
		Timeout:     35 * time.Second,
	})
	if !resp.Success {
		fmt.Println("failed:", resp.Error, resp.Message) // e.g. workspace_offline, timeout
		return
	}
	fmt.Println(string(resp.Result))
}

// Any other process calls through a broker's HTTP API with a caller token.
func ExampleHTTP() {
	c := &caller.HTTP{BaseURL: "http://127.0.0.1:8377", Token: "<caller token>"}
	resp := c.Call(context.Background(), caller.Request{
		WorkspaceID:      "ws-1",
		Endpoint:         "/api/ping",
		Payload:          json.RawMessage(`{"hello":"tether"}`),
		Timeout:          5 * time.Second,
		WaitForWorkspace: 3 * time.Second, // ride out a reconnecting client
	})
	fmt.Println(resp.Success, string(resp.Result))
}
