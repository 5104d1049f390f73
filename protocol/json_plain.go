package protocol

import (
	"bytes"
	"encoding/json"
	"errors"
	"slices"

	"github.com/tetherdev/tether/internal/tuning"
)

// fast is whether the codec takes its one-pass path (tuning.FastJSON).
// Off (TETHER_TUNING=no-fastjson), every message of the hot path goes
// through encoding/json instead: the plain way its figures are measured
// against, and kept tested (CI runs the e2e suite with it off).
var fast = tuning.On(tuning.FastJSON)

// errNotObject is the plain path's refusal of a top-level null, which
// json.Unmarshal ignores and the decoders reject.
var errNotObject = errors.New("json: a message must be an object")

// plainDecode is the plain path of the decoders: json.Unmarshal into *v
// from what it held (saved), refusing a top-level null.
func plainDecode[T any](b []byte, v *T, saved T) error {
	if bytes.Equal(bytes.TrimSpace(b), []byte("null")) {
		return errNotObject
	}
	err := unmarshalFrom(b, v, saved)
	var te *json.UnmarshalTypeError
	if errors.As(err, &te) && te.Field != "" {
		return &fieldErr{key: te.Field, err: err} // named, as the fast path names it
	}
	return err
}

// plainAppend is the plain path of the encoders: json.Marshal's bytes,
// which the fast path writes too.
func plainAppend(dst []byte, v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		return append(dst, "null"...)
	}
	return append(dst, b...)
}

// plainSplitArray is SplitArray through encoding/json.
func plainSplitArray(b []byte) ([]json.RawMessage, error) {
	if bytes.Equal(bytes.TrimSpace(b), []byte("null")) {
		return nil, errors.New("json: null is not an array")
	}
	elems := []json.RawMessage{}
	if err := json.Unmarshal(b, &elems); err != nil {
		return nil, err
	}
	for i, e := range elems {
		elems[i] = slices.Clip(e) // appending to one cannot overwrite the next
	}
	return elems, nil
}
