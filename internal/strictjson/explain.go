package strictjson

import (
	"bytes"
	"encoding"
	"encoding/json"
	"reflect"
	"strconv"
	"strings"
	"sync"
)

// explain finds the first member of data, in document order, that does not
// fit ptr (a pointer type): the one encoding/json's first error is about.
// It follows encoding/json's rules for which field a key selects, and
// returns nil when it finds nothing (the caller then reports
// encoding/json's own error). data is valid JSON: encoding/json checked it
// before it reported a field error.
func explain(data []byte, ptr reflect.Type) *FieldError {
	if ptr == nil || ptr.Kind() != reflect.Pointer {
		return nil
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	fe, _ := (&walker{dec: dec}).value(ptr.Elem(), "")
	return fe
}

// walker reads one JSON value token by token against a Go type.
type walker struct{ dec *json.Decoder }

var (
	unmarshalerType     = reflect.TypeFor[json.Unmarshaler]()
	textUnmarshalerType = reflect.TypeFor[encoding.TextUnmarshaler]()
)

// value reads the value at path, which decodes into t. It returns the
// first member that does not fit, or an error if the input ends or breaks.
func (w *walker) value(t reflect.Type, path string) (*FieldError, error) {
	pt := reflect.PointerTo(t)
	if t.Kind() == reflect.Interface || pt.Implements(unmarshalerType) || t.Implements(unmarshalerType) {
		return nil, w.skip() // free-form: the type decides what it takes
	}
	tok, err := w.dec.Token()
	if err != nil {
		return nil, err
	}
	if tok == nil {
		return nil, nil // null fits everything
	}
	if pt.Implements(textUnmarshalerType) || t.Implements(textUnmarshalerType) {
		if _, ok := tok.(string); ok {
			return nil, nil
		}
		return w.mismatch(path, "a string", tok)
	}
	return w.valueAfter(t, path, tok)
}

// valueAfter checks the value that starts with tok (not null) against t.
func (w *walker) valueAfter(t reflect.Type, path string, tok json.Token) (*FieldError, error) {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch t.Kind() {
	case reflect.Struct:
		if tok != json.Delim('{') {
			return w.mismatch(path, "an object", tok)
		}
		return w.object(t, path)
	case reflect.Map:
		if tok != json.Delim('{') {
			return w.mismatch(path, "an object", tok)
		}
		return w.mapValues(t.Elem(), path)
	case reflect.Slice, reflect.Array:
		if t.Kind() == reflect.Slice && t.Elem().Kind() == reflect.Uint8 {
			if _, ok := tok.(string); ok {
				return nil, nil
			}
			return w.mismatch(path, "a base64 string", tok)
		}
		if tok != json.Delim('[') {
			return w.mismatch(path, "an array", tok)
		}
		for i := 0; w.dec.More(); i++ {
			if fe, err := w.value(t.Elem(), path+"["+strconv.Itoa(i)+"]"); fe != nil || err != nil {
				return fe, err
			}
		}
		_, err := w.dec.Token() // ]
		return nil, err
	case reflect.String:
		if _, ok := tok.(string); !ok {
			return w.mismatch(path, "a string", tok)
		}
	case reflect.Bool:
		if _, ok := tok.(bool); !ok {
			return w.mismatch(path, "a boolean", tok)
		}
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		n, ok := tok.(json.Number)
		if !ok {
			return w.mismatch(path, "an integer", tok)
		}
		if _, err := strconv.ParseInt(n.String(), 10, t.Bits()); err != nil {
			return w.mismatch(path, "an integer that fits "+t.Kind().String(), tok)
		}
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr:
		n, ok := tok.(json.Number)
		if !ok {
			return w.mismatch(path, "a non-negative integer", tok)
		}
		if _, err := strconv.ParseUint(n.String(), 10, t.Bits()); err != nil {
			return w.mismatch(path, "a non-negative integer that fits "+t.Kind().String(), tok)
		}
	case reflect.Float32, reflect.Float64:
		n, ok := tok.(json.Number)
		if !ok {
			return w.mismatch(path, "a number", tok)
		}
		if _, err := strconv.ParseFloat(n.String(), t.Bits()); err != nil {
			return w.mismatch(path, "a number that fits "+t.Kind().String(), tok)
		}
	default:
		// Nothing encoding/json decodes JSON into (channels, funcs):
		// leave the failure to its own message.
		return w.skipAfter(tok)
	}
	return nil, nil
}

// object reads the members of an object (its '{' already read) that
// decodes into the struct t.
func (w *walker) object(t reflect.Type, path string) (*FieldError, error) {
	fields := fieldsOf(t)
	for w.dec.More() {
		tok, err := w.dec.Token()
		if err != nil {
			return nil, err
		}
		key, _ := tok.(string)
		f, ok := fields.lookup(key)
		if !ok {
			return fields.unknown(key, path), nil
		}
		sub := join(path, f.name)
		if f.quoted {
			if fe, err := w.quoted(f.typ, sub); fe != nil || err != nil {
				return fe, err
			}
			continue
		}
		if fe, err := w.value(f.typ, sub); fe != nil || err != nil {
			return fe, err
		}
	}
	_, err := w.dec.Token() // }
	return nil, err
}

// quoted reads the value at path of a field with the ",string" option: a
// string holding a value of t (a number, a boolean, a quoted string), or
// null.
func (w *walker) quoted(t reflect.Type, path string) (*FieldError, error) {
	tok, err := w.dec.Token()
	if err != nil || tok == nil {
		return nil, err
	}
	s, ok := tok.(string)
	if !ok {
		return w.mismatch(path, "a string", tok)
	}
	want := "a value of type " + t.String()
	switch t.Kind() {
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Float32, reflect.Float64:
		want = "a number"
	case reflect.Bool:
		want = "a boolean"
	case reflect.String:
		want = "a quoted string"
	}
	if strings.Trim(s, " \t\r\n") != s {
		// encoding/json takes the string's bytes as they are: no white
		// space around the value.
		want += " and nothing around it"
	} else if fe := explain([]byte(s), reflect.PointerTo(t)); fe != nil {
		want = fe.Want
	} else if json.Valid([]byte(s)) {
		return nil, nil
	}
	return &FieldError{Path: path, Want: "a string holding " + want, Got: "the string " + strconv.Quote(s)}, nil
}

// mapValues reads the members of an object (its '{' read) that decodes
// into a map with values of type elem. Any key is allowed.
func (w *walker) mapValues(elem reflect.Type, path string) (*FieldError, error) {
	for w.dec.More() {
		tok, err := w.dec.Token()
		if err != nil {
			return nil, err
		}
		key, _ := tok.(string)
		if fe, err := w.value(elem, join(path, key)); fe != nil || err != nil {
			return fe, err
		}
	}
	_, err := w.dec.Token()
	return nil, err
}

func (w *walker) mismatch(path, want string, tok json.Token) (*FieldError, error) {
	return &FieldError{Path: path, Want: want, Got: describe(tok)}, nil
}

// skip reads and drops one value.
func (w *walker) skip() error {
	var raw json.RawMessage
	return w.dec.Decode(&raw)
}

// skipAfter drops the rest of a value that started with tok.
func (w *walker) skipAfter(tok json.Token) (*FieldError, error) {
	if d, ok := tok.(json.Delim); ok && (d == '{' || d == '[') {
		for w.dec.More() {
			if d == '{' {
				if _, err := w.dec.Token(); err != nil {
					return nil, err
				}
			}
			if err := w.skip(); err != nil {
				return nil, err
			}
		}
		_, err := w.dec.Token()
		return nil, err
	}
	return nil, nil
}

// describe names what a token starts: "a string", "the number 3.5".
func describe(tok json.Token) string {
	switch v := tok.(type) {
	case string:
		return "a string"
	case json.Number:
		return "the number " + v.String()
	case bool:
		return "a boolean"
	case json.Delim:
		if v == '{' {
			return "an object"
		}
		return "an array"
	}
	return "null"
}

// join appends the member key to path: after a dot when the key is a
// name, else in brackets and single quotes ("env['A B']"); a top-level
// key stays as it is.
func join(path, key string) string {
	switch {
	case path == "":
		return key
	case isName(key):
		return path + "." + key
	}
	quoted := strings.NewReplacer(`\`, `\\`, `'`, `\'`).Replace(key)
	return path + "['" + quoted + "']"
}

func isName(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c == '_' || c == '-' || '0' <= c && c <= '9' || 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z') {
			return false
		}
	}
	return true
}

// field is a struct field as encoding/json sees it.
type field struct {
	name   string
	typ    reflect.Type
	quoted bool // the ",string" option
}

// fieldSet is the fields of one struct type in declaration order.
type fieldSet struct {
	fields []field
	names  []string
}

var fieldCache sync.Map // reflect.Type -> *fieldSet

// fieldsOf lists the JSON fields of struct type t: exported fields under
// their tag's name (or their Go name), "-" left out, the fields of an
// embedded struct without a tag name promoted unless a shallower field
// has the name. It is encoding/json's rule minus its tie-breaking between
// equally deep duplicates, which no request type has.
func fieldsOf(t reflect.Type) *fieldSet {
	if fs, ok := fieldCache.Load(t); ok {
		return fs.(*fieldSet)
	}
	fs := &fieldSet{}
	seen := map[string]bool{}
	level := []reflect.Type{t}
	visited := map[reflect.Type]bool{}
	for len(level) > 0 {
		var next []reflect.Type
		var found []field
		for _, st := range level {
			if visited[st] {
				continue
			}
			visited[st] = true
			for i := range st.NumField() {
				sf := st.Field(i)
				tag := sf.Tag.Get("json")
				if tag == "-" {
					continue
				}
				name, opts, _ := strings.Cut(tag, ",")
				ft := sf.Type
				if sf.Anonymous {
					if ft.Kind() == reflect.Pointer {
						ft = ft.Elem()
					}
					if name == "" && ft.Kind() == reflect.Struct {
						next = append(next, ft)
						continue
					}
				}
				if !sf.IsExported() {
					continue
				}
				if name == "" {
					name = sf.Name
				}
				found = append(found, field{name: name, typ: sf.Type, quoted: strings.Contains(","+opts+",", ",string,")})
			}
		}
		for _, f := range found {
			if !seen[f.name] {
				seen[f.name] = true
				fs.fields = append(fs.fields, f)
				fs.names = append(fs.names, f.name)
			}
		}
		level = next
	}
	v, _ := fieldCache.LoadOrStore(t, fs)
	return v.(*fieldSet)
}

// lookup finds the field key selects: by exact name, else ignoring case,
// as encoding/json matches.
func (fs *fieldSet) lookup(key string) (field, bool) {
	for _, f := range fs.fields {
		if f.name == key {
			return f, true
		}
	}
	for _, f := range fs.fields {
		if strings.EqualFold(f.name, key) {
			return f, true
		}
	}
	return field{}, false
}

// unknown is the error for key in an object of these fields at path, with
// a suggestion: a field of a close name, else a field of that name (or a
// close one) in an object nested up to two levels down, for a member
// given flat that belongs inside ("line" for breakpoints[].line).
func (fs *fieldSet) unknown(key, path string) *FieldError {
	fe := &FieldError{Path: join(path, key), Unknown: true, Known: fs.names}
	if s := Suggest(key, fs.names); s != "" {
		fe.Suggestion = join(path, s)
		return fe
	}
	fe.Suggestion = fs.nested(key, path, 2)
	return fe
}

// nested looks for key among the fields of the objects nested in these
// fields, breadth first, depth levels down at most, and returns the path
// of the first it finds.
func (fs *fieldSet) nested(key, path string, depth int) string {
	type inner struct {
		fs   *fieldSet
		path string
	}
	level := []inner{{fs, path}}
	for range depth {
		var next []inner
		for _, o := range level {
			for _, f := range o.fs.fields {
				t, hop := f.typ, ""
				for t.Kind() == reflect.Pointer || t.Kind() == reflect.Slice || t.Kind() == reflect.Array {
					if t.Kind() != reflect.Pointer {
						hop += "[]"
					}
					t = t.Elem()
				}
				if t.Kind() != reflect.Struct || t.Implements(unmarshalerType) || reflect.PointerTo(t).Implements(unmarshalerType) {
					continue
				}
				next = append(next, inner{fieldsOf(t), join(o.path, f.name) + hop})
			}
		}
		for _, o := range next {
			if g, ok := o.fs.lookup(key); ok {
				return join(o.path, g.name)
			}
		}
		for _, o := range next {
			if name := Suggest(key, o.fs.names); name != "" {
				return join(o.path, name)
			}
		}
		level = next
	}
	return ""
}
