package protocol

// Messages between broker instances and callers travel on a bus (in-process
// or Redis pub/sub) as JSON. A plain ToolCall with reply_to and deadline_ms
// is a call, so a worker in any language publishes a call as one JSON
// object; control messages add a "type". See docs/redis-protocol.md.

// Bus message types. A message without a type is a call.
const (
	BusCall     = ""
	BusCancel   = "cancel"   // the caller no longer waits for correlation_id
	BusTakeover = "takeover" // a newer connection now serves the workspace
	// BusYield is published by a holder that yields to a newer takeover:
	// holder and since are its own, reason is the holder it yields to. A
	// holder taking its workspace again after losing the bus waits for the
	// yields of the holders that heard its takeover (see Broker.BusLost).
	BusYield = "yield"
	// BusDrain tells the holder that async calls wait in the workspace's
	// queue in the call store: it claims and delivers them
	// (docs/async-calls.md).
	BusDrain = "drain"
	// BusList, on InstancesChannel, asks every broker instance for the
	// workspaces it serves; each answers reply_to with a ToolResponse for
	// correlation_id whose result is an InstanceWorkspaces.
	BusList = "list"
)

// InstancesChannel is subscribed by every broker instance.
const InstancesChannel = "instances"

// OnlineChannel carries the id of every workspace that starts being served,
// so calls waiting for it can be sent.
const OnlineChannel = "online"

// WorkspaceChannel is the channel of the instance serving workspaceID.
func WorkspaceChannel(workspaceID string) string { return "ws:" + workspaceID }

// BusMessage is the union of everything published on a workspace channel.
type BusMessage struct {
	Type string `json:"type,omitempty"`
	ToolCall
	// Reason explains a cancel; in a yield, the holder yielded to.
	Reason string `json:"reason,omitempty"`
	// Holder and Since identify the connection taking over (takeover): the
	// newest connection wins, ties broken by Holder.
	Holder string `json:"holder,omitempty"`
	Since  int64  `json:"since,omitempty"`
}
