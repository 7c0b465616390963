package contract

import (
	"bytes"
	"encoding"
	"encoding/json"
	"fmt"
	"reflect"
	"slices"
	"strconv"
	"strings"

	"github.com/agentsurface/agentsurface/surface"
)

// Facts are the facts a capability declares about its calls
// ([surface.Declaration]), each under the JSON name of its field there
// ("effect", "idempotent", "reversible", "confirmation") with its JSON
// value. A contract records a Declaration fact by fact, without a Go
// field per fact, so that a field added to surface.Declaration reaches
// every contract with no change here ([Compare] still needs a rule row
// for it: see the rule table of the package documentation).
//
// A fact the contract does not know is absent, never a default: an MCP
// contract knows fewer than a registry contract (see the package
// documentation), a hidden capability shows none, and only actions
// declare reversibility. A value that is null or "" is no value: the
// fact is absent. In a contract file each fact is a field of its
// capability, after its description, in surface.Declaration's order.
type Facts map[string]json.RawMessage

// The facts the contract itself reads, by JSON name: every kind of
// capability has them, and MCP annotations derive from them.
const (
	factEffect       = "effect"
	factIdempotent   = "idempotent"
	factConfirmation = "confirmation"
)

// fact is one field of surface.Declaration: its JSON name, and whether
// a JSON value is one of its Go type.
type fact struct {
	name string
	fits func(v json.RawMessage) bool
}

// declared are the facts a capability may declare, in
// surface.Declaration's order.
var declared = factsOf(reflect.TypeFor[surface.Declaration]())

// factsOf lists the JSON-encoded fields of struct type t.
func factsOf(t reflect.Type) []fact {
	var out []fact
	for f := range t.Fields() {
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if !f.IsExported() || name == "-" {
			continue
		}
		if name == "" {
			name = f.Name
		}
		out = append(out, fact{name, fitsType(f.Type)})
	}
	return out
}

// fitsType returns whether a JSON value decodes into a typ: for a plain
// boolean or string type by its first byte, else by decoding it.
func fitsType(typ reflect.Type) func(v json.RawMessage) bool {
	p := reflect.PointerTo(typ)
	if !p.Implements(reflect.TypeFor[json.Unmarshaler]()) && !p.Implements(reflect.TypeFor[encoding.TextUnmarshaler]()) {
		switch typ.Kind() {
		case reflect.Bool:
			return func(v json.RawMessage) bool { return string(v) == "true" || string(v) == "false" }
		case reflect.String:
			return func(v json.RawMessage) bool { return len(v) > 0 && v[0] == '"' }
		}
	}
	return func(v json.RawMessage) bool { return json.Unmarshal(v, reflect.New(typ).Interface()) == nil }
}

// factNamed returns the fact whose JSON name is name, or one that
// matches it but for case (as encoding/json matches a struct's fields).
func factNamed(name string) (fact, bool) {
	if i := slices.IndexFunc(declared, func(f fact) bool { return f.name == name }); i >= 0 {
		return declared[i], true
	}
	if i := slices.IndexFunc(declared, func(f fact) bool { return strings.EqualFold(f.name, name) }); i >= 0 {
		return declared[i], true
	}
	return fact{}, false
}

// noValue reports whether a JSON text leaves a fact unknown.
func noValue(v json.RawMessage) bool {
	s := string(bytes.TrimSpace(v))
	return s == "" || s == "null" || s == `""`
}

// Set records the fact called name as the JSON encoding of v, allocating
// f if it is nil; a v that encodes to null or "" removes the fact (it is
// unknown). A v that does not encode to JSON is a programming error: Set
// panics.
func (f *Facts) Set(name string, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		panic("contract: fact " + name + " does not encode: " + err.Error())
	}
	if noValue(b) {
		delete(*f, name)
		return
	}
	if *f == nil {
		*f = Facts{}
	}
	(*f)[name] = b
}

// Fact returns the fact called name of f decoded into a T, and whether f
// knows it as a T.
func Fact[T any](f Facts, name string) (T, bool) {
	return valueOf[T](f[name])
}

// valueOf decodes a fact's JSON value v into a T; ok is false when v is
// no value or not a T.
func valueOf[T any](v json.RawMessage) (T, bool) {
	var out T
	if noValue(v) || json.Unmarshal(v, &out) != nil {
		var zero T
		return zero, false
	}
	return out, true
}

// normalized returns a checked copy of f: every fact one of
// surface.Declaration, of its field's type, in canonical JSON; facts of
// no value left out; nil when none is left.
func (f Facts) normalized() (Facts, error) {
	var (
		out Facts
		err error
	)
	if name, ok := unknownFact(f); ok {
		return nil, fmt.Errorf("%w: unknown fact %q", ErrFormat, name)
	}
	for name, v := range f {
		d, _ := factNamed(name)
		if noValue(v) {
			continue
		}
		var c json.RawMessage
		if s := string(v); s == "true" || s == "false" { // canonical already
			c = slices.Clone(v)
		} else if c, err = canonicalText(v, name); err != nil {
			return nil, err
		}
		if !d.fits(c) {
			return nil, fmt.Errorf("%w: fact %s: %s is not a value of it", ErrFormat, name, c)
		}
		if out == nil {
			out = make(Facts, len(f))
		}
		out[name] = c
	}
	return out, nil
}

// plainCapability is a Capability without its JSON methods.
type plainCapability Capability

// fileForm is the struct type of a capability in a contract file:
// Capability's fields, but in the place of Declared one field per fact
// of surface.Declaration, in its order, under the fact's JSON name. It
// is made once, so that a capability encodes and decodes as a struct
// with a field per fact would, with encoding/json's own rules (omitted
// when empty, keys matched but for case, unknown fields refused at any
// depth when asked).
var fileForm, capToForm, factToForm = func() (reflect.Type, []int, []int) {
	var fields []reflect.StructField
	var capTo, factTo []int
	for f := range reflect.TypeFor[plainCapability]().Fields() {
		if f.Name != "Declared" {
			capTo = append(capTo, len(fields))
			fields = append(fields, f)
			continue
		}
		capTo = append(capTo, -1)
		for k, d := range declared {
			factTo = append(factTo, len(fields))
			fields = append(fields, reflect.StructField{Name: "Fact" + strconv.Itoa(k), Type: reflect.TypeFor[json.RawMessage](),
				Tag: reflect.StructTag(`json:"` + d.name + `,omitempty"`)})
		}
	}
	return reflect.StructOf(fields), capTo, factTo
}()

// unknownFact returns the least name of f that is not the JSON name of a
// field of surface.Declaration.
func unknownFact(f Facts) (string, bool) {
	var out string
	found := false
	for name := range f {
		if d, ok := factNamed(name); (!ok || d.name != name) && (!found || name < out) {
			out, found = name, true
		}
	}
	return out, found
}

// MarshalJSON encodes the capability in its contract-file form: its
// fields in order, and in the place of Declared each known fact as a
// field, in surface.Declaration's order (see [Facts]). A fact
// surface.Declaration does not have is an error ([ErrFormat]).
func (c Capability) MarshalJSON() ([]byte, error) {
	if name, ok := unknownFact(c.Declared); ok {
		return nil, fmt.Errorf("%w: unknown fact %q", ErrFormat, name)
	}
	form := reflect.New(fileForm).Elem()
	src := reflect.ValueOf(plainCapability(c))
	for i, j := range capToForm {
		if j >= 0 {
			form.Field(j).Set(src.Field(i))
		}
	}
	for k, j := range factToForm {
		if v := c.Declared[declared[k].name]; !noValue(v) {
			form.Field(j).SetBytes(v)
		}
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false) // the caller's encoder escapes, or not, as it was told
	if err := enc.Encode(form.Interface()); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte{'\n'}), nil
}

// UnmarshalJSON decodes a capability from its contract-file form, each
// field of surface.Declaration's into Declared. Like [Parse], it refuses
// a field the format does not have.
func (c *Capability) UnmarshalJSON(data []byte) error { return c.decode(data, true) }

// decode decodes a capability, each field of surface.Declaration's into
// Declared; strict refuses a field the format does not have, else it is
// ignored.
func (c *Capability) decode(data []byte, strict bool) error {
	data = bytes.TrimSpace(data)
	if len(data) == 0 || data[0] != '{' {
		// null (nothing to do) or not an object: say so of a Capability
		return json.Unmarshal(data, (*plainCapability)(c))
	}
	form := reflect.New(fileForm)
	dec := json.NewDecoder(bytes.NewReader(data))
	if strict {
		dec.DisallowUnknownFields()
	}
	if err := dec.Decode(form.Interface()); err != nil {
		return err
	}
	var p plainCapability
	dst, f := reflect.ValueOf(&p).Elem(), form.Elem()
	for i, j := range capToForm {
		if j >= 0 {
			dst.Field(i).Set(f.Field(j))
		}
	}
	for k, j := range factToForm {
		if v := f.Field(j).Bytes(); len(v) > 0 {
			if p.Declared == nil {
				p.Declared = Facts{}
			}
			p.Declared[declared[k].name] = v
		}
	}
	*c = Capability(p)
	return nil
}
