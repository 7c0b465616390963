package contract

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"reflect"
	"slices"
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

// fact is one field of surface.Declaration: its JSON name and Go type.
type fact struct {
	name string
	typ  reflect.Type
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
		out = append(out, fact{name, f.Type})
	}
	return out
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
	var out Facts
	for name, v := range f {
		d, ok := factNamed(name)
		if !ok || d.name != name {
			return nil, fmt.Errorf("%w: unknown fact %q", ErrFormat, name)
		}
		if noValue(v) {
			continue
		}
		c, err := canonicalText(v, name)
		if err != nil {
			return nil, err
		}
		if err := json.Unmarshal(c, reflect.New(d.typ).Interface()); err != nil {
			return nil, fmt.Errorf("%w: %s: %v", ErrFormat, name, err)
		}
		if out == nil {
			out = make(Facts, len(f))
		}
		out[name] = c
	}
	return out, nil
}

// plainCapability is a Capability without its JSON methods: its fields
// but the facts.
type plainCapability Capability

// afterFacts are the JSON names of Capability's fields after Declared,
// before the first of which a capability's file form places its facts.
var afterFacts = func() map[string]bool {
	t := reflect.TypeFor[Capability]()
	f, _ := t.FieldByName("Declared")
	out := map[string]bool{}
	for g := range t.Fields() {
		if g.Index[0] > f.Index[0] {
			name, _, _ := strings.Cut(g.Tag.Get("json"), ",")
			out[name] = true
		}
	}
	return out
}()

// MarshalJSON encodes the capability in its contract-file form: its
// fields in order, and in the place of Declared each known fact as a
// field, in surface.Declaration's order (see [Facts]).
func (c Capability) MarshalJSON() ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false) // the caller's encoder escapes, or not, as it was told
	if err := enc.Encode(plainCapability(c)); err != nil {
		return nil, err
	}
	dec := json.NewDecoder(&buf)
	if _, err := dec.Token(); err != nil { // {
		return nil, err
	}
	out := []byte{'{'}
	put := func(key string, v json.RawMessage) {
		if len(out) > 1 {
			out = append(out, ',')
		}
		k, _ := json.Marshal(key)
		out = append(append(append(out, k...), ':'), v...)
	}
	putFacts := func() {
		for _, d := range declared {
			if v, ok := c.Declared[d.name]; ok && !noValue(v) {
				put(d.name, v)
			}
		}
		for _, name := range slices.Sorted(maps.Keys(c.Declared)) { // not of surface.Declaration: normalized refuses them
			if _, ok := factNamed(name); !ok && !noValue(c.Declared[name]) {
				put(name, c.Declared[name])
			}
		}
	}
	placed := false
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return nil, err
		}
		key, _ := tok.(string)
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			return nil, err
		}
		if !placed && afterFacts[key] {
			putFacts()
			placed = true
		}
		put(key, v)
	}
	if !placed {
		putFacts()
	}
	return append(out, '}'), nil
}

// UnmarshalJSON decodes a capability from its contract-file form, each
// field of surface.Declaration's into Declared. Like [Parse], it refuses
// a field the format does not have.
func (c *Capability) UnmarshalJSON(data []byte) error { return c.decode(data, true) }

// decode decodes a capability, each field of surface.Declaration's into
// Declared; strict refuses a field the format does not have, else it is
// ignored. Keys match fields as encoding/json matches them (exactly, or
// else but for case; the last of a field's keys wins).
func (c *Capability) decode(data []byte, strict bool) error {
	var p plainCapability
	unmarshal := func(data []byte) error {
		dec := json.NewDecoder(bytes.NewReader(data))
		if strict {
			dec.DisallowUnknownFields()
		}
		return dec.Decode(&p)
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		return unmarshal(data) // null, or not an object: encoding/json says what it makes of it
	}
	var facts Facts
	rest := []byte{'{'} // the fields but the facts, in their order
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return err
		}
		key, _ := tok.(string)
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			return err
		}
		if d, ok := factNamed(key); ok {
			if facts == nil {
				facts = Facts{}
			}
			facts[d.name] = v
			continue
		}
		if len(rest) > 1 {
			rest = append(rest, ',')
		}
		k, _ := json.Marshal(key)
		rest = append(append(append(rest, k...), ':'), v...)
	}
	if err := unmarshal(append(rest, '}')); err != nil {
		return err
	}
	*c = Capability(p)
	c.Declared = facts
	return nil
}
