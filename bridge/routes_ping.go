//go:build !windows

package bridge

import (
	"context"
	"encoding/json"

	"github.com/tetherdev/tether/protocol"
)

func mountPing(r *Router) {
	Handle(r, protocol.PingEndpoint, func(_ context.Context, _ *Call, payload json.RawMessage) (json.RawMessage, error) {
		return payload, nil
	})
}
