package mcp

import (
	"encoding/json"
	"fmt"
	"reflect"
	"strconv"
	"strings"

	"github.com/google/jsonschema-go/jsonschema"

	"github.com/tetherdev/tether/dap"
)

// Tool schemas come from Go structs (jsonschema.For): a field's json name
// is the property, its `jsonschema` tag the description, and a field
// without omitempty is required. Structs allow no other properties, so an
// unknown argument name is refused before a tool runs.
//
// Input fields may carry three more tags, applied here:
//
//	enum:"sync,async"   the allowed values
//	min:"0.1" max:"600" bounds of a number
//	default:"30"        the value the SDK fills in when the argument is absent

// schemaTypes maps Go types whose reflected schema would be wrong or
// unusable: json.RawMessage is any JSON value, not an array of bytes; an
// empty schema would be written as `true`, which clients (the TypeScript
// SDK) refuse as a property's schema; a debugger variable holds variables
// (a recursive type has no reflected schema).
var schemaTypes = map[reflect.Type]*jsonschema.Schema{
	reflect.TypeFor[json.RawMessage](): {Description: "any JSON value"},
	reflect.TypeFor[any]():             {Description: "any JSON value"},
	reflect.TypeFor[dap.Variable](): {
		Type:        "object",
		Description: "a variable: name, value, type, variables_reference, and its children (variables) to the requested depth",
	},
}

// inputSchema is the input schema of tool arguments of type t.
func inputSchema(t reflect.Type) (*jsonschema.Schema, error) {
	s, err := jsonschema.ForType(t, &jsonschema.ForOptions{TypeSchemas: schemaTypes})
	if err != nil {
		return nil, err
	}
	if err := applyTags(s, t); err != nil {
		return nil, fmt.Errorf("%s: %w", t, err)
	}
	return s, nil
}

func applyTags(s *jsonschema.Schema, t reflect.Type) error {
	for t.Kind() == reflect.Pointer || t.Kind() == reflect.Slice {
		t = t.Elem()
		if s.Items != nil {
			s = s.Items
		}
	}
	if t.Kind() != reflect.Struct {
		return nil
	}
	for _, f := range reflect.VisibleFields(t) {
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		p := s.Properties[name]
		if p == nil {
			continue
		}
		if v, ok := f.Tag.Lookup("enum"); ok {
			for _, e := range strings.Split(v, ",") {
				p.Enum = append(p.Enum, e)
			}
		}
		for tag, dst := range map[string]**float64{"min": &p.Minimum, "max": &p.Maximum} {
			if v, ok := f.Tag.Lookup(tag); ok {
				n, err := strconv.ParseFloat(v, 64)
				if err != nil {
					return fmt.Errorf("field %s: %s tag: %w", f.Name, tag, err)
				}
				*dst = &n
			}
		}
		if v, ok := f.Tag.Lookup("default"); ok {
			if f.Type.Kind() == reflect.String {
				v = strconv.Quote(v)
			}
			if !json.Valid([]byte(v)) {
				return fmt.Errorf("field %s: default %q is not JSON", f.Name, v)
			}
			p.Default = json.RawMessage(v)
		}
		if err := applyTags(p, f.Type); err != nil {
			return err
		}
	}
	return nil
}

// outputSchema is the output schema of results of type t. It describes the
// result (every property and its type) without requiring any: results come
// from workspaces of other versions too (IDE extensions, older bridges),
// and a field a workspace leaves out must not turn a good answer into a
// protocol error. Every value may be null (Go encodes nil maps and slices
// so), and objects may carry properties not listed.
func outputSchema(t reflect.Type) (*jsonschema.Schema, error) {
	s, err := jsonschema.ForType(t, &jsonschema.ForOptions{TypeSchemas: schemaTypes})
	if err != nil {
		return nil, err
	}
	loosen(s)
	// The root of a structured result is an object.
	s.Types, s.Type = nil, "object"
	return s, nil
}

func loosen(s *jsonschema.Schema) {
	if s == nil {
		return
	}
	s.Required = nil
	if s.AdditionalProperties != nil && s.AdditionalProperties.Not != nil {
		s.AdditionalProperties = nil // the false schema
	}
	if s.Type != "" {
		s.Types, s.Type = []string{"null", s.Type}, ""
	}
	for _, p := range s.Properties {
		loosen(p)
	}
	loosen(s.Items)
	loosen(s.AdditionalProperties)
}
