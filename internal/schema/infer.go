package schema

import (
	"encoding"
	"encoding/json"
	"fmt"
	"math"
	"reflect"
	"strings"
	"sync"
	"time"

	"github.com/google/jsonschema-go/jsonschema"
)

// maxSafeInteger is the largest integer n such that n and n+1 are exactly
// representable as float64 (Number.MAX_SAFE_INTEGER in JavaScript).
const maxSafeInteger = 1<<53 - 1

var (
	timeType        = reflect.TypeFor[time.Time]()
	rawMessageType  = reflect.TypeFor[json.RawMessage]()
	numberType      = reflect.TypeFor[json.Number]()
	jsonMarshaler   = reflect.TypeFor[json.Marshaler]()
	jsonUnmarshaler = reflect.TypeFor[json.Unmarshaler]()
	textMarshaler   = reflect.TypeFor[encoding.TextMarshaler]()
	textUnmarshaler = reflect.TypeFor[encoding.TextUnmarshaler]()
)

// maxFloat32Text bounds float32 values: it is how encoding/json writes
// math.MaxFloat32 (3.4028235e+38), so every marshalled float32 validates,
// and it lies below the smallest number that overflows float32
// (3.4028235677973366e+38), so every value that validates decodes.
const maxFloat32Text = 3.4028235e38

// inferred is a memoised result of inference.
type inferred struct {
	s   *Schema
	err error
}

// inferKey is what inference depends on: the type and the direction.
type inferKey struct {
	t      reflect.Type
	output bool
}

// inferCache memoises inference per type and direction. It is a pure
// cache: the result for a key never changes.
var inferCache sync.Map // inferKey → inferred

// For returns the schema inferred from the Go type T; see [Infer].
func For[T any]() (*Schema, error) {
	return Infer(reflect.TypeFor[T]())
}

// Infer returns the schema of values that decode into t, checked against
// the subset and the default limits. Results are memoised per type.
//
// Inference starts from github.com/google/jsonschema-go's ForType (json
// tag names; omitempty/omitzero make a field optional, any other field is
// required; a `jsonschema:"…"` tag is the field's description; structs
// get "additionalProperties": false) and then normalises the result so
// that a value which validates decodes into t with encoding/json:
//
//   - slices and arrays are "array" (never nullable); pointers make the
//     pointee nullable as a type array [T, "null"];
//   - integer kinds are "integer" with the exact range of 8-, 16- and
//     32-bit kinds and the safe-integer range ±(2^53−1) (0 to 2^53−1 when
//     unsigned) for wider ones; float32 is "number" bounded by
//     ±3.4028235e+38 (math.MaxFloat32 as encoding/json writes it);
//   - time.Time is {"type":"string","format":"date-time"}, json.Number is
//     "number", and any and json.RawMessage are {};
//   - map[string]T is {"type":"object"}: a value schema in
//     additionalProperties is outside the subset, so it is not shown to
//     agents, but Validate still checks every member against it.
//
// Because slices and maps are not nullable here, a Go value holding a nil
// slice or map in a field without omitempty marshals to null and does not
// validate; [InferOutput] describes produced values instead.
//
// Types whose JSON form cannot be inferred are rejected with an [*Error]:
// []byte (binary is not supported), channels, functions, complex numbers,
// unsafe pointers, non-empty interfaces, maps with non-string keys,
// recursive types, types with custom JSON or text (un)marshalers (other
// than time.Time and json.RawMessage), fields with the ",string" option,
// embedded fields with a json name or of a non-struct type, and structs
// with two fields of the same JSON name.
func Infer(t reflect.Type) (*Schema, error) {
	return InferLimits(t, Limits{})
}

// InferLimits is like [Infer] with the given limits instead of the
// defaults.
func InferLimits(t reflect.Type, lim Limits) (*Schema, error) {
	return inferLimits(inferKey{t, false}, lim)
}

// InferOutput is like [InferLimits] for values a program produces rather
// than values it decodes: encoding/json writes a nil slice or map as null,
// so slices and maps are nullable ([T, "null"]). Everything a Go value of
// type t marshals to validates.
func InferOutput(t reflect.Type, lim Limits) (*Schema, error) {
	return inferLimits(inferKey{t, true}, lim)
}

func inferLimits(key inferKey, lim Limits) (*Schema, error) {
	lim = lim.resolve()
	r, ok := inferCache.Load(key)
	if !ok {
		s, err := infer(key.t, key.output)
		r, _ = inferCache.LoadOrStore(key, inferred{s, err})
	}
	res := r.(inferred)
	if res.err != nil {
		return nil, res.err
	}
	if err := res.s.CheckLimits(lim.MaxBytes, lim.MaxDepth); err != nil {
		return nil, err
	}
	return res.s, nil
}

// infer computes the schema of t without applying limits.
func infer(t reflect.Type, output bool) (*Schema, error) {
	if t == nil {
		return nil, &Error{Reason: "cannot infer a schema from a nil type"}
	}
	if err := preflight(t, "", map[reflect.Type]bool{}); err != nil {
		return nil, err
	}
	js, err := jsonschema.ForType(t, &jsonschema.ForOptions{
		TypeSchemas: map[reflect.Type]*jsonschema.Schema{
			timeType:       {Type: "string", Format: "date-time"},
			rawMessageType: {},
		},
	})
	if err != nil {
		return nil, &Error{Reason: "cannot infer a schema: " + err.Error()}
	}
	if err := normalize(t, js, "", output); err != nil {
		return nil, err
	}
	raw, err := json.Marshal(js)
	if err != nil {
		return nil, &Error{Reason: "cannot encode the inferred schema: " + err.Error()}
	}
	var doc any
	if err := json.Unmarshal(raw, &doc); err != nil {
		return nil, &Error{Reason: "cannot decode the inferred schema: " + err.Error()}
	}
	text, err := inferredText(raw)
	if err != nil {
		return nil, err
	}
	return build(emptyForTrue(doc), text, true)
}

// emptyForTrue replaces the boolean schema true, which jsonschema-go
// writes for an unconstrained schema, by the equivalent {} wherever a
// schema is expected (boolean schemas are outside the subset).
func emptyForTrue(v any) any {
	if b, ok := v.(bool); ok && b {
		return map[string]any{}
	}
	m, ok := v.(map[string]any)
	if !ok {
		return v
	}
	if items, ok := m["items"]; ok {
		m["items"] = emptyForTrue(items)
	}
	if ap, ok := m["additionalProperties"].(map[string]any); ok {
		m["additionalProperties"] = emptyForTrue(ap)
	}
	if props, ok := m["properties"].(map[string]any); ok {
		for k, p := range props {
			props[k] = emptyForTrue(p)
		}
	}
	return m
}

// typeError returns an *Error about the Go type at a schema path.
func typeError(path string, t reflect.Type, reason string) error {
	return &Error{Path: path, Reason: fmt.Sprintf("Go type %s: %s", t, reason)}
}

// hasCustomJSON reports whether t or *t has its own JSON or text
// marshalling, so its wire form is not its structure.
func hasCustomJSON(t reflect.Type) bool {
	pt := reflect.PointerTo(t)
	for _, i := range []reflect.Type{jsonMarshaler, jsonUnmarshaler, textMarshaler, textUnmarshaler} {
		if t.Implements(i) || pt.Implements(i) {
			return true
		}
	}
	return false
}

// jsonField describes how encoding/json sees a struct field.
type jsonField struct {
	name     string
	optional bool
	quoted   bool // ",string" option
}

// fieldInfo returns how encoding/json names a non-embedded field, and
// false when the field is not serialised (unexported or tagged "-").
func fieldInfo(f reflect.StructField) (jsonField, bool) {
	if !f.IsExported() {
		return jsonField{}, false
	}
	info := jsonField{name: f.Name}
	tag, ok := f.Tag.Lookup("json")
	if !ok {
		return info, true
	}
	name, opts, found := strings.Cut(tag, ",")
	if name == "-" && !found {
		return jsonField{}, false
	}
	if name != "" {
		info.name = name
	}
	for _, o := range strings.Split(opts, ",") {
		switch o {
		case "omitempty", "omitzero":
			info.optional = true
		case "string":
			info.quoted = true
		}
	}
	return info, true
}

// derefType strips pointers from t and reports whether there were any.
func derefType(t reflect.Type) (reflect.Type, bool) {
	ptr := false
	for t.Kind() == reflect.Pointer {
		t, ptr = t.Elem(), true
	}
	return t, ptr
}

// structFields returns the serialised fields of struct type t by JSON
// name, in field order, rejecting the field shapes inference does not
// support.
func structFields(t reflect.Type, path string) ([]reflect.StructField, []jsonField, error) {
	var fields []reflect.StructField
	var infos []jsonField
	seen := map[string]bool{}
	for _, f := range reflect.VisibleFields(t) {
		fp := path + "/properties/" + escapePointer(f.Name)
		if f.Anonymous {
			et, ptr := derefType(f.Type)
			name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
			switch {
			case name == "-" && f.Tag.Get("json") == "-":
				return nil, nil, typeError(fp, t, "embedded field "+f.Name+` tagged json:"-" is not supported`)
			case name != "":
				return nil, nil, typeError(fp, t, "embedded field "+f.Name+" with a json name is not supported")
			case et.Kind() != reflect.Struct:
				if f.IsExported() {
					return nil, nil, typeError(fp, t, "embedded non-struct field "+f.Name+" is not supported")
				}
			case ptr && !f.IsExported():
				return nil, nil, typeError(fp, t, "embedded pointer to unexported struct "+f.Name+" cannot be decoded")
			case hasCustomJSON(et):
				return nil, nil, typeError(fp, t, "embedded field "+f.Name+" has custom JSON marshalling")
			}
			continue
		}
		info, ok := fieldInfo(f)
		if !ok {
			continue
		}
		if seen[info.name] {
			return nil, nil, typeError(path+"/properties/"+escapePointer(info.name), t, "two fields have the JSON name "+fmt.Sprintf("%q", info.name))
		}
		seen[info.name] = true
		fields = append(fields, f)
		infos = append(infos, info)
	}
	return fields, infos, nil
}

// preflight rejects Go types whose JSON form inference cannot describe
// faithfully. stack holds the types being visited, to reject recursion.
func preflight(t reflect.Type, path string, stack map[reflect.Type]bool) error {
	t, _ = derefType(t)
	if t == timeType || t == rawMessageType || t == numberType {
		return nil
	}
	if stack[t] {
		return typeError(path, t, "recursive types are not supported")
	}
	if hasCustomJSON(t) {
		return typeError(path, t, "custom JSON or text marshalling is not supported; declare the schema as raw JSON")
	}
	stack[t] = true
	defer delete(stack, t)
	switch t.Kind() {
	case reflect.Bool, reflect.String,
		reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr,
		reflect.Float32, reflect.Float64:
		return nil
	case reflect.Interface:
		if t.NumMethod() > 0 {
			return typeError(path, t, "a non-empty interface cannot be decoded")
		}
		return nil
	case reflect.Slice:
		if t.Elem().Kind() == reflect.Uint8 {
			return typeError(path, t, "binary data ([]byte) is not supported")
		}
		return preflight(t.Elem(), path+"/items", stack)
	case reflect.Array:
		return preflight(t.Elem(), path+"/items", stack)
	case reflect.Map:
		k := t.Key()
		if k.Kind() != reflect.String || hasCustomJSON(k) {
			return typeError(path, t, "map keys must be of a string kind")
		}
		return preflight(t.Elem(), path+"/additionalProperties", stack)
	case reflect.Struct:
		fields, infos, err := structFields(t, path)
		if err != nil {
			return err
		}
		for i, f := range fields {
			fp := path + "/properties/" + escapePointer(infos[i].name)
			if infos[i].quoted {
				switch et, _ := derefType(f.Type); et.Kind() {
				case reflect.Bool, reflect.String,
					reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
					reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr,
					reflect.Float32, reflect.Float64:
					return typeError(fp, t, `the ",string" option of field `+f.Name+" is not supported")
				}
			}
			if err := preflight(f.Type, fp, stack); err != nil {
				return err
			}
		}
		return nil
	}
	return typeError(path, t, "kind "+t.Kind().String()+" has no JSON form")
}

// normalize rewrites s, the schema jsonschema-go inferred for t, into the
// shape described at [Infer]. preflight has accepted t.
func normalize(t reflect.Type, s *jsonschema.Schema, path string, output bool) error {
	if s == nil {
		return &Error{Path: path, Reason: fmt.Sprintf("Go type %s: no schema was inferred", t)}
	}
	t, nullable := derefType(t)
	if output && (t.Kind() == reflect.Slice || t.Kind() == reflect.Map) {
		nullable = true // a nil slice or map marshals to null
	}
	if t == rawMessageType || t.Kind() == reflect.Interface {
		s.Type, s.Types = "", nil
		return nil
	}
	var base string
	bounds := func(lo, hi float64) {
		s.Minimum, s.Maximum = &lo, &hi
	}
	switch {
	case t == timeType:
		base = "string"
		s.Format = "date-time"
	case t == numberType:
		// encoding/json reads and writes a json.Number as a JSON number.
		base = "number"
	default:
		switch t.Kind() {
		case reflect.Bool:
			base = "boolean"
		case reflect.String:
			base = "string"
		case reflect.Int, reflect.Int64:
			base = "integer"
			bounds(-maxSafeInteger, maxSafeInteger)
		case reflect.Int8:
			base = "integer"
			bounds(math.MinInt8, math.MaxInt8)
		case reflect.Int16:
			base = "integer"
			bounds(math.MinInt16, math.MaxInt16)
		case reflect.Int32:
			base = "integer"
			bounds(math.MinInt32, math.MaxInt32)
		case reflect.Uint, reflect.Uint64, reflect.Uintptr:
			base = "integer"
			bounds(0, maxSafeInteger)
		case reflect.Uint8:
			base = "integer"
			bounds(0, math.MaxUint8)
		case reflect.Uint16:
			base = "integer"
			bounds(0, math.MaxUint16)
		case reflect.Uint32:
			base = "integer"
			bounds(0, math.MaxUint32)
		case reflect.Float32:
			base = "number"
			bounds(-maxFloat32Text, maxFloat32Text)
		case reflect.Float64:
			base = "number"
		case reflect.Slice, reflect.Array:
			base = "array"
			if err := normalize(t.Elem(), s.Items, path+"/items", output); err != nil {
				return err
			}
		case reflect.Map:
			base = "object"
			if err := normalize(t.Elem(), s.AdditionalProperties, path+"/additionalProperties", output); err != nil {
				return err
			}
		case reflect.Struct:
			base = "object"
			fields, infos, err := structFields(t, path)
			if err != nil {
				return err
			}
			for i, f := range fields {
				name := infos[i].name
				if err := normalize(f.Type, s.Properties[name], path+"/properties/"+escapePointer(name), output); err != nil {
					return err
				}
			}
		default:
			return typeError(path, t, "kind "+t.Kind().String()+" has no JSON form")
		}
	}
	if nullable {
		s.Type, s.Types = "", []string{base, "null"}
	} else {
		s.Type, s.Types = base, nil
	}
	return nil
}
