package protocol

import "strconv"

// AppendToolResponse appends the JSON of r to dst: the bytes json.Marshal
// writes, provided Result is valid JSON without whitespace between tokens.
// Result is copied, not checked: it must be valid JSON (it is when it came
// from DecodeToolResponse or DecodeResponse); whitespace in it stays.
func AppendToolResponse(dst []byte, r *ToolResponse) []byte {
	if !fast {
		return plainAppend(dst, r)
	}
	return appendToolResponse(dst, r, true)
}

// AppendToolResponseVerbatim is AppendToolResponse with Result copied byte
// for byte: json.Marshal, and so AppendToolResponse, escape <, >, & and
// U+2028, U+2029 in it for HTML, which changes the bytes the workspace sent.
// It is the form to keep an answer in, to be read back as it came (the
// async call store's records).
func AppendToolResponseVerbatim(dst []byte, r *ToolResponse) []byte {
	return appendToolResponse(dst, r, false)
}

// appendToolResponse is AppendToolResponse's fast path; escape says
// whether Result's bytes are escaped as json.Marshal escapes them.
func appendToolResponse(dst []byte, r *ToolResponse, escape bool) []byte {
	dst = append(dst, `{"correlation_id":`...)
	dst = appendString(dst, r.CorrelationID)
	if r.Success {
		dst = append(dst, `,"success":true`...)
	} else {
		dst = append(dst, `,"success":false`...)
	}
	if len(r.Result) > 0 {
		dst = append(dst, `,"result":`...)
		if escape {
			dst = appendRaw(dst, r.Result)
		} else {
			dst = append(dst, r.Result...)
		}
	}
	if r.Error != "" {
		dst = append(dst, `,"error":`...)
		dst = appendString(dst, r.Error)
	}
	if r.Message != "" {
		dst = append(dst, `,"message":`...)
		dst = appendString(dst, r.Message)
	}
	return append(dst, '}')
}

// AppendToolCall appends the JSON of c to dst: the bytes json.Marshal
// writes, provided Payload is valid JSON without whitespace between tokens
// and Timeout is finite. Payload is copied, not checked, as in
// AppendToolResponse. A NaN or infinite Timeout, which json.Marshal refuses,
// is written as null (as JavaScript's JSON.stringify does); Validate rejects
// such a call before it is sent.
func AppendToolCall(dst []byte, c *ToolCall) []byte {
	if !fast {
		return plainAppend(dst, c)
	}
	dst = append(dst, '{')
	dst = appendToolCallFields(dst, c)
	return append(dst, '}')
}

// AppendBusMessage appends the JSON of m to dst in json.Marshal's field
// order (type, the ToolCall's fields, reason, holder, since), under the
// conditions of AppendToolCall.
func AppendBusMessage(dst []byte, m *BusMessage) []byte {
	if !fast {
		return plainAppend(dst, m)
	}
	dst = append(dst, '{')
	if m.Type != "" {
		dst = append(dst, `"type":`...)
		dst = appendString(dst, m.Type)
		dst = append(dst, ',')
	}
	dst = appendToolCallFields(dst, &m.ToolCall)
	if m.Reason != "" {
		dst = append(dst, `,"reason":`...)
		dst = appendString(dst, m.Reason)
	}
	if m.Holder != "" {
		dst = append(dst, `,"holder":`...)
		dst = appendString(dst, m.Holder)
	}
	if m.Since != 0 {
		dst = append(dst, `,"since":`...)
		dst = strconv.AppendInt(dst, m.Since, 10)
	}
	return append(dst, '}')
}

func appendToolCallFields(dst []byte, c *ToolCall) []byte {
	dst = append(dst, `"correlation_id":`...)
	dst = appendString(dst, c.CorrelationID)
	dst = append(dst, `,"endpoint":`...)
	dst = appendString(dst, c.Endpoint)
	if len(c.Payload) > 0 {
		dst = append(dst, `,"payload":`...)
		dst = appendRaw(dst, c.Payload)
	}
	dst = append(dst, `,"timeout":`...)
	dst = appendFloat(dst, c.Timeout)
	if c.ReplyTo != "" {
		dst = append(dst, `,"reply_to":`...)
		dst = appendString(dst, c.ReplyTo)
	}
	if c.DeadlineMS != 0 {
		dst = append(dst, `,"deadline_ms":`...)
		dst = strconv.AppendInt(dst, c.DeadlineMS, 10)
	}
	if c.WaitForWorkspaceMS != 0 {
		dst = append(dst, `,"wait_for_workspace_ms":`...)
		dst = strconv.AppendInt(dst, c.WaitForWorkspaceMS, 10)
	}
	if c.Async {
		dst = append(dst, `,"async":true`...)
	}
	if c.IdempotencyKey != "" {
		dst = append(dst, `,"idempotency_key":`...)
		dst = appendString(dst, c.IdempotencyKey)
	}
	if c.Traceparent != "" {
		dst = append(dst, `,"traceparent":`...)
		dst = appendString(dst, c.Traceparent)
	}
	return dst
}
