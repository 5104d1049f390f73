package bridge

import (
	"context"
	"encoding/json"
)

// PingEndpoint echoes its payload as the result. It exists for tests,
// benchmarks and "is this workspace alive?" probes, so it does nothing else.
const PingEndpoint = "/api/ping"

func mountPing(r *Router) {
	Handle(r, PingEndpoint, func(_ context.Context, _ *Call, payload json.RawMessage) (json.RawMessage, error) {
		return payload, nil
	})
}
