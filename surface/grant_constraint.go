package surface

import (
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"strings"

	"github.com/agentsurface/agentsurface/internal/canonical"
	"github.com/agentsurface/agentsurface/internal/schema"
)

// ConstraintKind is the kind of a [Constraint].
type ConstraintKind string

// Constraint kinds.
const (
	// ConstraintIn: the value is one of a set of JSON values.
	ConstraintIn ConstraintKind = "in"
	// ConstraintRange: the value is a number within [min, max].
	ConstraintRange ConstraintKind = "range"
	// ConstraintPrefix: the value is a string starting with a prefix.
	ConstraintPrefix ConstraintKind = "prefix"
	// ConstraintKeys: the value is an object with no member outside a
	// set of names.
	ConstraintKeys ConstraintKind = "keys"
)

// Constraint bounds the effective input a [Grant] lets through: the value
// at Path must satisfy it, or the call asks as if there were no grant.
// Build one with [ValueIn], [InRange], [HasPrefix] or [OnlyKeys].
//
// Path names a property of the capability's input schema in the issue-path
// format of INVALID_INPUT ("ids", "filter.site"; "" is the input itself,
// for OnlyKeys): a grant naming a path the schema does not declare is
// refused when it is created. The check reads the canonical JSON value of
// the effective input (after bound fields are merged and the input is
// validated) and is exact:
//
//   - an absent value satisfies no constraint (and neither does null,
//     unless a ValueIn set holds null);
//   - types are JSON's: the string "3" is not the number 3, so it is in
//     no numeric range and in no set that holds only the number;
//   - strings compare as exact code points: no case folding, no Unicode
//     normalisation, so a look-alike ("аdmin" with a Cyrillic а, "é"
//     decomposed) matches nothing the person approved;
//   - when the value is an array, every element must satisfy the
//     constraint, and an empty array satisfies none (an application may
//     read an empty list as "all"): an id list with one id the set lacks
//     escapes the grant.
//
// OnlyKeys is a fourth kind beyond the three: it is what makes a
// grant derived from an approved input ([GrantSpec].FromInput) sound, since
// a property the person never saw (a "force" flag the approved input did
// not set) must not pass under the approval's name.
type Constraint struct {
	Kind ConstraintKind `json:"kind"`
	Path string         `json:"path"`
	// Values is the set of a ValueIn constraint, each value's canonical
	// JSON.
	Values []JSONText `json:"values,omitempty"`
	// Min and Max bound an InRange constraint, inclusive.
	Min *float64 `json:"min,omitempty"`
	Max *float64 `json:"max,omitempty"`
	// Prefix is a HasPrefix constraint's prefix.
	Prefix string `json:"prefix,omitempty"`
	// Keys are the member names an OnlyKeys constraint allows.
	Keys []string `json:"keys,omitempty"`

	bad string // why a constructor could not build it; refused at creation
}

// ValueIn constrains the value at path to one of values, compared as
// canonical JSON (1 and 1.0 are one number; "1" is a string). Each value
// must be JSON: nil, bool, a number, a string, or slices and maps of
// them.
func ValueIn(path string, values ...any) Constraint {
	c := Constraint{Kind: ConstraintIn, Path: path, Values: make([]JSONText, 0, len(values))}
	for _, v := range values {
		b, err := canonical.Marshal(v)
		if err != nil {
			c.bad = fmt.Sprintf("a value of the set is not JSON: %v", err)
			return c
		}
		c.Values = append(c.Values, JSONText(b))
	}
	return c
}

// InRange constrains the value at path to a number from min to max,
// inclusive.
func InRange(path string, min, max float64) Constraint {
	return Constraint{Kind: ConstraintRange, Path: path, Min: &min, Max: &max}
}

// HasPrefix constrains the value at path to a string starting with
// prefix, byte for byte.
func HasPrefix(path, prefix string) Constraint {
	return Constraint{Kind: ConstraintPrefix, Path: path, Prefix: prefix}
}

// OnlyKeys constrains the value at path ("" for the input itself) to an
// object whose members are all named in keys.
func OnlyKeys(path string, keys ...string) Constraint {
	return Constraint{Kind: ConstraintKeys, Path: path, Keys: slices.Clone(keys)}
}

// clone returns a Constraint sharing nothing mutable with c.
func (c Constraint) clone() Constraint {
	c.Values, c.Keys = slices.Clone(c.Values), slices.Clone(c.Keys)
	if c.Min != nil {
		c.Min = new(*c.Min)
	}
	if c.Max != nil {
		c.Max = new(*c.Max)
	}
	return c
}

// check is a compiled constraint.
type check struct {
	kind     ConstraintKind
	path     []string
	set      map[string]struct{} // in: canonical values; keys: names
	min, max float64
	prefix   string
}

// compile checks c against the input schema and compiles it. It returns
// the reason it is refused, or "".
func (c *Constraint) compile(in *schema.Schema) (check, string) {
	if c.bad != "" {
		return check{}, c.bad
	}
	var path []string
	if c.Path != "" {
		path = strings.Split(c.Path, ".")
		if slices.Contains(path, "") {
			return check{}, fmt.Sprintf("path %q is not a property path", c.Path)
		}
	}
	place, ok := in.Lookup(path)
	if !ok {
		return check{}, fmt.Sprintf("the input schema declares no property %q", c.Path)
	}
	k := check{kind: c.Kind, path: path}
	needs := ""
	switch c.Kind {
	case ConstraintIn:
		if len(c.Values) == 0 {
			return check{}, "a value set must not be empty"
		}
		k.set = make(map[string]struct{}, len(c.Values))
		for _, v := range c.Values {
			b, err := canonical.Canonicalize([]byte(v))
			if err != nil {
				return check{}, fmt.Sprintf("a value of the set is not JSON: %v", err)
			}
			k.set[string(b)] = struct{}{}
		}
	case ConstraintRange:
		if c.Min == nil || c.Max == nil || math.IsNaN(*c.Min) || math.IsNaN(*c.Max) || *c.Min > *c.Max {
			return check{}, "a range needs a min no greater than its max"
		}
		k.min, k.max, needs = *c.Min, *c.Max, "number"
	case ConstraintPrefix:
		if c.Prefix == "" {
			return check{}, "an empty prefix constrains nothing"
		}
		k.prefix, needs = c.Prefix, "string"
	case ConstraintKeys:
		k.set = make(map[string]struct{}, len(c.Keys))
		for _, name := range c.Keys {
			k.set[name] = struct{}{}
		}
		needs = "object"
	default:
		return check{}, fmt.Sprintf("unknown constraint kind %q", c.Kind)
	}
	if needs != "" && !place.Allows(needs) {
		return check{}, fmt.Sprintf("the input schema allows no %s at %q", needs, c.Path)
	}
	return k, ""
}

// satisfied reports whether the effective input value v satisfies k.
// buf is scratch space for canonical encodings.
func (k *check) satisfied(v any, buf *[]byte) bool {
	for _, name := range k.path {
		m, ok := v.(map[string]any)
		if !ok {
			return false
		}
		if v, ok = m[name]; !ok {
			return false
		}
	}
	if k.kind == ConstraintKeys { // an object is the value itself, not a list of them
		m, ok := v.(map[string]any)
		if !ok {
			return false
		}
		for name := range m {
			if _, ok := k.set[name]; !ok {
				return false
			}
		}
		return true
	}
	if arr, ok := v.([]any); ok {
		if len(arr) == 0 {
			return false
		}
		for _, e := range arr {
			if !k.one(e, buf) {
				return false
			}
		}
		return true
	}
	return k.one(v, buf)
}

// one checks one value (not a list).
func (k *check) one(v any, buf *[]byte) bool {
	switch k.kind {
	case ConstraintIn:
		var b []byte
		if s, ok := v.(string); ok { // the common case, without an allocation
			*buf = canonical.AppendString((*buf)[:0], s)
			b = *buf
		} else {
			var err error
			if b, err = canonical.Marshal(v); err != nil {
				return false
			}
		}
		_, ok := k.set[string(b)]
		return ok
	case ConstraintRange:
		f, ok := v.(float64)
		return ok && f >= k.min && f <= k.max
	case ConstraintPrefix:
		s, ok := v.(string)
		return ok && strings.HasPrefix(s, k.prefix)
	}
	return false
}

// deriveConstraints returns the constraints that bound a grant to an
// approved input and what is less: the input's members, and for each
// member its value (for an array, each element of it) among the
// approved ones. A later input passes when it sets every member the
// approved one set and no other, each holding approved values only: the
// same ids or fewer, the same mode. An approved empty list gives no
// bound (and an application may read it as "all"): derivation refuses
// it.
func deriveConstraints(input []byte) ([]Constraint, error) {
	var m map[string]json.RawMessage
	if err := json.Unmarshal(input, &m); err != nil {
		return nil, fmt.Errorf("the approved input is not an object")
	}
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	out := []Constraint{OnlyKeys("", keys...)}
	for _, k := range keys {
		if strings.Contains(k, ".") || k == "" {
			return nil, fmt.Errorf("the member %q cannot be named by a property path", k)
		}
		var v any
		if err := json.Unmarshal(m[k], &v); err != nil {
			return nil, err
		}
		values := []any{v}
		if arr, ok := v.([]any); ok {
			if len(arr) == 0 { // no value a later list could be bounded by, and "none" may mean "all"
				return nil, fmt.Errorf("the approved input's %q is an empty list", k)
			}
			values = arr
		}
		out = append(out, ValueIn(k, values...))
	}
	return out, nil
}
