package protocol

import (
	"encoding/base64"
	"encoding/json"
)

// BinaryAssembler collects the binary frames that follow a BINARY_EVENT or
// BINARY_ACK header. It is not safe for concurrent use; a connection's read
// loop owns one.
type BinaryAssembler struct {
	header  SIOPacket
	buffers [][]byte
	active  bool
}

// Start begins collecting attachments for header. A header without
// attachments is complete at once (Start returns true).
func (a *BinaryAssembler) Start(header SIOPacket) (done bool) {
	a.header = header
	a.header.Data = append(json.RawMessage(nil), header.Data...)
	a.buffers = a.buffers[:0]
	a.active = header.Attachments > 0
	return !a.active
}

// Active reports whether the assembler waits for more binary frames.
func (a *BinaryAssembler) Active() bool { return a.active }

// Add appends one binary frame and reports whether all attachments arrived.
func (a *BinaryAssembler) Add(frame []byte) (done bool) {
	a.buffers = append(a.buffers, append([]byte(nil), frame...))
	if len(a.buffers) >= a.header.Attachments {
		a.active = false
		return true
	}
	return false
}

// Packet returns the assembled packet with every placeholder replaced by the
// base64 text of its attachment (JSON has no bytes; tether payloads are JSON),
// and the raw attachments themselves.
func (a *BinaryAssembler) Packet() (SIOPacket, [][]byte, error) {
	p := a.header
	var v any
	if err := json.Unmarshal(p.Data, &v); err != nil {
		return p, nil, malformed("binary packet payload: %v", err)
	}
	v, err := replacePlaceholders(v, a.buffers)
	if err != nil {
		return p, nil, err
	}
	data, err := json.Marshal(v)
	if err != nil {
		return p, nil, malformed("binary packet payload: %v", err)
	}
	p.Data = data
	if p.Type == SIOBinaryEvent {
		p.Type = SIOEvent
	} else {
		p.Type = SIOAck
	}
	p.Attachments = 0
	return p, a.buffers, nil
}

func replacePlaceholders(v any, bufs [][]byte) (any, error) {
	switch x := v.(type) {
	case map[string]any:
		if ph, ok := x["_placeholder"].(bool); ok && ph {
			num, ok := x["num"].(float64)
			if !ok || num < 0 || int(num) >= len(bufs) || float64(int(num)) != num {
				return nil, malformed("binary placeholder refers to no attachment")
			}
			return base64.StdEncoding.EncodeToString(bufs[int(num)]), nil
		}
		for k, e := range x {
			r, err := replacePlaceholders(e, bufs)
			if err != nil {
				return nil, err
			}
			x[k] = r
		}
	case []any:
		for i, e := range x {
			r, err := replacePlaceholders(e, bufs)
			if err != nil {
				return nil, err
			}
			x[i] = r
		}
	}
	return v, nil
}
