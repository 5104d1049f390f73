// Package strictjson decodes JSON that must match a Go type: a member the
// type has no field for is an error, not ignored, and so is a value of the
// wrong kind. The error names the member by its JSON path
// ("breakpoints[0].line") and, for an unknown member, the field it
// probably meant, so a caller (often an agent) can fix its request from
// the message alone.
//
// Decoding itself is encoding/json's, with DisallowUnknownFields: the
// fields, defaults and matching rules every route was written against stay
// as they are. What is hand-written here is only the explanation of a
// failure (explain.go): encoding/json reports an unknown member as
// `json: unknown field "x"` without saying where, and a type error without
// array indexes. encoding/json/v2 reports JSON pointers, but in Go 1.26 it
// is still behind GOEXPERIMENT=jsonv2. The explanation walks the input a
// second time, only when decoding failed, so a good request pays nothing
// for it.
package strictjson

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"reflect"
	"strconv"
	"strings"
)

// Decode decodes the one JSON value in data into v, a non-nil pointer, as
// json.Unmarshal does but refusing a member v has no field for and
// anything after the value. Free-form parts of v (maps, interfaces,
// json.RawMessage and other json.Unmarshalers) take what they are given.
// When a member is unknown or a value has the wrong kind, the error is a
// *FieldError naming it; other failures (malformed JSON) are
// encoding/json's errors.
func Decode(data []byte, v any) error {
	if raw, ok := v.(*json.RawMessage); ok {
		// Any one value fits, and json.Unmarshal refuses trailing data
		// too, without the Decoder's buffer: the ping route's payload.
		return json.Unmarshal(data, raw)
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	err := dec.Decode(v)
	if err == nil {
		if _, err := dec.Token(); err != io.EOF {
			return errors.New("data after the JSON value")
		}
		return nil
	}
	var typeErr *json.UnmarshalTypeError
	if errors.As(err, &typeErr) || strings.HasPrefix(err.Error(), "json: unknown field ") {
		if fe := explain(data, reflect.TypeOf(v)); fe != nil {
			return fe
		}
	}
	return err
}

// FieldError is a member of the input that does not fit the type decoded
// into: one it has no field for (Unknown), or a value of the wrong kind
// (Want and Got).
type FieldError struct {
	// Path is the member's JSON path: names joined by dots, array
	// indexes in brackets ("breakpoints[0].line"), a nested key that is
	// not a name in brackets and single quotes ("env['A B']"); "" is the
	// whole value.
	Path string
	// Unknown: the object at the path's parent has no field of that name.
	Unknown bool
	// Suggestion is the path of the field an unknown member probably
	// meant ("" when none is close); "[]" stands for any index.
	Suggestion string
	// Known are the fields of the object an unknown member is in.
	Known []string
	// Want and Got describe a type error: "an integer", "a string".
	Want, Got string
}

func (e *FieldError) Error() string {
	if e.Unknown {
		msg := "unknown field " + strconv.Quote(e.Path)
		switch {
		case e.Suggestion != "":
			return msg + " (did you mean " + strconv.Quote(e.Suggestion) + "?)"
		case len(e.Known) == 0:
			return msg + " (no fields are allowed here)"
		default:
			return msg + " (known fields: " + strings.Join(e.Known, ", ") + ")"
		}
	}
	msg := "expected " + e.Want + ", got " + e.Got
	if e.Path == "" {
		return msg
	}
	return "field " + strconv.Quote(e.Path) + ": " + msg
}

// UnknownField is the error for a member named key, at the top level of an
// object whose fields are known, with the suggestion Suggest makes.
func UnknownField(key string, known []string) *FieldError {
	return &FieldError{Path: key, Unknown: true, Suggestion: Suggest(key, known), Known: known}
}
