package store

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strconv"
	"time"

	"github.com/tetherdev/tether/protocol"
)

// A call's record as the Redis store keeps it: a hash of named fields,
// written by fields and putFields and read back by parseRecord (from a
// script's reply) or setField (from HGETALL). FuzzParseRecord holds them
// to reading back what they wrote.

// putFields are the hash fields of a record Put writes (checkPut's): a
// new record's, and a final one's outcome.
func (r *Redis) putFields(rec *Record) []any {
	f := r.fields(rec, "", false)
	if rec.FinishedAt != nil {
		f = append(f, "finished_at", rec.FinishedAt.UnixMilli(), "response", protocol.AppendToolResponseVerbatim(nil, rec.Response))
	}
	return f
}

// fields are the hash fields of a new record.
func (r *Redis) fields(rec *Record, idemKey string, hasIdem bool) []any {
	f := []any{
		"correlation_id", rec.CorrelationID,
		"workspace_id", rec.WorkspaceID,
		"endpoint", rec.Endpoint,
		"status", rec.Status,
		"created_at", rec.CreatedAt.UnixMilli(),
		"deadline", rec.Deadline.UnixMilli(),
		"delivered_due", rec.Deadline.Add(r.opts.Grace).UnixMilli(),
		"timeout", strconv.FormatFloat(rec.Timeout, 'g', -1, 64),
		"origin", r.id,
	}
	if rec.DeliveredAt != nil {
		f = append(f, "delivered_at", rec.DeliveredAt.UnixMilli())
	}
	if !rec.OfflineAt.IsZero() {
		f = append(f, "offline_at", rec.OfflineAt.UnixMilli())
	}
	if len(rec.Payload) > 0 {
		f = append(f, "payload", []byte(rec.Payload))
	}
	if hasIdem {
		f = append(f, "idempotency_key", rec.IdempotencyKey, "idem_ref", idemKey)
	}
	if rec.Fingerprint != "" {
		f = append(f, "fingerprint", rec.Fingerprint)
	}
	if rec.Traceparent != "" {
		f = append(f, "traceparent", rec.Traceparent)
	}
	return f
}

// parseRecord reads a record from a script's HGETALL reply.
func parseRecord(v any) (Record, error) {
	list, ok := v.([]any)
	if !ok || len(list)%2 != 0 {
		return Record{}, fmt.Errorf("reading call record: unexpected reply %T", v)
	}
	var rec Record
	for i := 0; i < len(list); i += 2 {
		k, _ := list[i].(string)
		val, _ := list[i+1].(string)
		if err := rec.setField(k, val); err != nil {
			return Record{}, err
		}
	}
	return rec, rec.complete()
}

// setField sets the record field named k of a Redis hash to v.
func (rec *Record) setField(k, v string) error {
	msTime := func() (time.Time, error) {
		n, err := strconv.ParseInt(v, 10, 64)
		return fromMS(n), err
	}
	var err error
	switch k {
	case "correlation_id":
		rec.CorrelationID = v
	case "workspace_id":
		rec.WorkspaceID = v
	case "endpoint":
		rec.Endpoint = v
	case "status":
		rec.Status = v
	case "created_at":
		rec.CreatedAt, err = msTime()
	case "deadline":
		rec.Deadline, err = msTime()
	case "offline_at":
		rec.OfflineAt, err = msTime()
	case "delivered_at":
		var t time.Time
		t, err = msTime()
		rec.DeliveredAt = &t
	case "finished_at":
		var t time.Time
		t, err = msTime()
		rec.FinishedAt = &t
	case "timeout":
		if rec.Timeout, err = strconv.ParseFloat(v, 64); err == nil && (math.IsNaN(rec.Timeout) || math.IsInf(rec.Timeout, 0)) {
			err = errors.New("not a finite number") // no call has one; its JSON could not carry it
		}
	case "payload":
		if v != "" { // none, as Put and Create write it
			rec.Payload = json.RawMessage(v)
		}
	case "response":
		rec.Response = new(protocol.ToolResponse)
		err = protocol.DecodeToolResponse([]byte(v), rec.Response) // json.Unmarshal's result, without its reflection
	case "idempotency_key":
		rec.IdempotencyKey = v
	case "fingerprint":
		rec.Fingerprint = v
	case "traceparent":
		rec.Traceparent = v
	}
	if err != nil {
		return fmt.Errorf("reading call record field %s: %w", k, err)
	}
	return nil
}

// complete checks a record read field by field; the response carries the
// record's correlation id (a sweep wrote it through Lua's JSON encoder).
func (rec *Record) complete() error {
	if rec.CorrelationID == "" {
		return errors.New("reading call record: no correlation_id")
	}
	if rec.Response != nil {
		rec.Response.CorrelationID = rec.CorrelationID
	}
	return nil
}
