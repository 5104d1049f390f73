package store

import (
	"bytes"
	"encoding/json"
	"testing"
	"time"

	"github.com/tetherdev/tether/protocol"
)

// FuzzRecordAppendJSONIsJSONMarshal: AppendJSON writes the bytes
// json.Marshal writes for any record (the result compact, as one decoded
// from a client is once it has been through json.Marshal).
func FuzzRecordAppendJSONIsJSONMarshal(f *testing.F) {
	f.Add("c-1", "ws", "ping", "succeeded", int64(1764700000123), int64(456789), true, true, true, `{"pong":true}`, "", "")
	f.Add("c<&>\u2028", "w\x00s", "fs/\xffread", "failed", int64(-5), int64(0), false, false, true, "", "timeout", "the call \"timed out\"")
	f.Add("", "", "", "queued", int64(0), int64(1), false, true, false, "", "", "")
	f.Fuzz(func(t *testing.T, cid, ws, ep, status string, ms, ns int64, delivered, finished, withResp bool, result, code, msg string) {
		at := time.UnixMilli(ms % (1 << 45)).Add(time.Duration(ns % 1e9))
		if ns%2 == 0 {
			at = at.UTC()
		}
		r := Record{CorrelationID: cid, WorkspaceID: ws, Endpoint: ep, Status: status, CreatedAt: at, Deadline: at.Add(time.Minute)}
		if delivered {
			d := at.Add(time.Millisecond)
			r.DeliveredAt = &d
		}
		if finished {
			fin := at.Add(time.Second)
			r.FinishedAt = &fin
		}
		if withResp {
			resp := protocol.ToolResponse{CorrelationID: cid, Success: code == "", Error: code, Message: msg}
			if json.Valid([]byte(result)) {
				var b bytes.Buffer
				if json.Compact(&b, []byte(result)) == nil {
					resp.Result = b.Bytes()
				}
			}
			r.Response = &resp
		}
		want, err := json.Marshal(&r)
		if err != nil {
			t.Skip(err) // a time json.Marshal refuses (a year past 9999)
		}
		if got := r.AppendJSON(nil); !bytes.Equal(got, want) {
			t.Fatalf("AppendJSON:\n%s\njson.Marshal:\n%s", got, want)
		}
	})
}
