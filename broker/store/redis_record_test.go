package store

import (
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"
)

// FuzzParseRecord: reading a call's hash (Get's HGETALL, a claim's or a
// create's reply) never panics on what Redis holds; and a record it reads
// is written back by Put as a hash that reads as the same record, so what
// one instance puts, every instance reads as it was put.
func FuzzParseRecord(f *testing.F) {
	seed := func(kv ...string) { f.Add(strings.Join(kv, "\x00")) }
	seed("correlation_id", "c-1", "workspace_id", "ws", "endpoint", "/api/ping", "status", "succeeded",
		"created_at", "1764700000123", "deadline", "1764700030123", "delivered_due", "1764700040123",
		"delivered_at", "1764700000200", "finished_at", "1764700000300", "timeout", "30",
		"payload", `{"hello":"tether"}`, "response", `{"correlation_id":"c-1","success":true,"result":{"pong":true}}`)
	seed("correlation_id", "c-2", "workspace_id", "ws", "endpoint", "/api/ping", "status", "delivered",
		"created_at", "5", "deadline", "9", "delivered_at", "6", "timeout", "0.5", "fingerprint", "f")
	seed("correlation_id", "c-3", "workspace_id", "ws", "status", "failed", "created_at", "5", "deadline", "9",
		"delivered_at", "6", "finished_at", "9", "response", `{"success":false,"error":"timeout","message":"m"}`)
	seed("correlation_id", "c-4", "timeout", "NaN")
	seed("correlation_id", "c-5", "created_at", "soon")
	seed("response", "{", "correlation_id", "c-6")
	seed("workspace_id", "no id")
	r := &Redis{opts: Options{Grace: 10 * time.Second, Retention: time.Minute}}
	f.Fuzz(func(t *testing.T, raw string) {
		kv := strings.Split(raw, "\x00")
		reply := make([]any, 0, len(kv))
		for _, s := range kv[:len(kv)&^1] {
			reply = append(reply, s)
		}
		rec, err := parseRecord(reply)
		if err != nil {
			return
		}
		want, err := checkPut(rec)
		if err != nil {
			return // not a record Put takes
		}
		hash := r.putFields(&want)
		for i := range hash {
			hash[i] = hashValue(t, hash[i])
		}
		got, err := parseRecord(hash)
		if err != nil {
			t.Fatalf("the hash Put writes for %+v does not read: %v", want, err)
		}
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("put %+v (%+v)\nread %+v (%+v)", want, want.Response, got, got.Response)
		}
	})
}

// hashValue is v as Redis keeps an argument of HSET, as go-redis writes it.
func hashValue(t *testing.T, v any) string {
	switch v := v.(type) {
	case string:
		return v
	case []byte:
		return string(v)
	case int64:
		return strconv.FormatInt(v, 10)
	}
	t.Fatalf("a hash field of type %T", v)
	return ""
}
