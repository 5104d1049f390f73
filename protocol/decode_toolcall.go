package protocol

import (
	"encoding/json"
	"slices"
	"strings"

	"github.com/tetherdev/tether/internal/strictjson"
)

// toolCallField decodes the member key of a ToolCall; known is false for a
// key that is not one of its fields.
func (d *objectDecoder) toolCallField(key []byte, c *ToolCall) (known bool, err error) {
	switch {
	case keyIs(key, "correlation_id"):
		err = d.str(&c.CorrelationID)
	case keyIs(key, "endpoint"):
		err = d.str(&c.Endpoint)
	case keyIs(key, "payload"):
		err = d.raw(&c.Payload)
	case keyIs(key, "timeout"):
		err = d.float(&c.Timeout)
	case keyIs(key, "reply_to"):
		err = d.str(&c.ReplyTo)
	case keyIs(key, "deadline_ms"):
		err = d.int(&c.DeadlineMS)
	case keyIs(key, "wait_for_workspace_ms"):
		err = d.int(&c.WaitForWorkspaceMS)
	case keyIs(key, "async"):
		err = d.boolean(&c.Async)
	case keyIs(key, "idempotency_key"):
		err = d.str(&c.IdempotencyKey)
	case keyIs(key, "traceparent"):
		err = d.str(&c.Traceparent)
	default:
		return false, nil
	}
	return true, err
}

// DecodeToolCall decodes the JSON object b into c as json.Unmarshal(b, c)
// would: same fields set (others keep their values), an error whenever
// json.Unmarshal returns one (the text differs). It also rejects a top-level
// null, which json.Unmarshal ignores. Payload aliases b. Members that are
// not ToolCall fields are skipped: a tool_call from a newer broker may
// carry fields this version does not know.
//
// The key loop is written out in each decoder rather than shared through a
// callback: passing the decoder to a func value makes it escape, which costs
// an allocation per message on the hot path.
func DecodeToolCall(b []byte, c *ToolCall) error { return decodeToolCall(b, c, false) }

// callerFields are the members of a caller's call body (POST
// /api/v1/workspaces/{id}/calls): the ToolCall fields but reply_to and
// deadline_ms, which only the broker sets.
var callerFields = []string{"correlation_id", "endpoint", "payload", "timeout", "wait_for_workspace_ms", "async", "idempotency_key"}

// DecodeCallRequest decodes a caller's call body into c as DecodeToolCall
// does, but strictly: a member other than correlation_id, endpoint,
// payload, timeout, wait_for_workspace_ms, async and idempotency_key
// (reply_to, deadline_ms and traceparent included: the broker sets those;
// a caller's trace context is its traceparent header) is an error
// that names it and, when one is close, the field it probably meant
// (`unknown field "timout" (did you mean "timeout"?)`).
func DecodeCallRequest(b []byte, c *ToolCall) error { return decodeToolCall(b, c, true) }

func decodeToolCall(b []byte, c *ToolCall, caller bool) error {
	saved := *c
	if !fast {
		saved.Payload = cloneRaw(saved.Payload)
		if caller {
			if err := onlyCallerFields(b); err != nil {
				return err
			}
		}
		return plainDecode(b, c, saved)
	}
	d, err := openObject(b)
	for err == nil {
		var key []byte
		var ok bool
		if key, ok, err = d.next(); !ok || err != nil {
			break
		}
		if caller && (keyIs(key, "reply_to") || keyIs(key, "deadline_ms") || keyIs(key, "traceparent")) {
			err = strictjson.UnknownField(string(key), callerFields)
		} else if known, ferr := d.toolCallField(key, c); ferr != nil {
			err = fieldError(key, ferr)
		} else if !known && caller {
			err = strictjson.UnknownField(string(key), callerFields)
		} else if !known {
			err = d.skip()
		}
	}
	if err == nil {
		return d.end()
	}
	if err == errSlowKey {
		saved.Payload = cloneRaw(saved.Payload)
		if caller {
			if err := onlyCallerFields(b); err != nil {
				*c = saved
				return err
			}
		}
		return unmarshalFrom(b, c, saved)
	}
	return err
}

// onlyCallerFields checks the keys of the object b against callerFields
// the way encoding/json matches them (ignoring case), for a body whose
// keys need encoding/json's unescaping. The first unknown key in sorted
// order is reported: a map keeps no order.
func onlyCallerFields(b []byte) error {
	var members map[string]json.RawMessage
	if err := json.Unmarshal(b, &members); err != nil {
		return err
	}
	keys := make([]string, 0, len(members))
	for k := range members {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		if !slices.ContainsFunc(callerFields, func(f string) bool { return strings.EqualFold(f, k) }) {
			return strictjson.UnknownField(k, callerFields)
		}
	}
	return nil
}
