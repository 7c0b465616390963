package schema

import (
	"reflect"
	"unsafe"

	"github.com/agentsurface/agentsurface/internal/canonical"
)

// maxPresized bounds the slice fields a Presizer sizes.
const maxPresized = 8

// Presizer gives the top-level slice fields of a struct the capacity of
// the arrays a JSON object holds for them, before a decoder that reuses
// capacity (encoding/json and its drop-ins append to the slice from
// length 0) fills them: one allocation of the exact size instead of a
// fixed first capacity (ten elements in segmentio's decoder) and doubling
// from there.
type Presizer struct {
	typ    reflect.Type
	keys   []string // member names as canonical JSON spells them
	fields []int    // the struct field of each key
}

// NewPresizer returns the Presizer of struct type t, or nil when t is not
// a struct, has JSON or text unmarshalling of its own, or has no field to
// size: an exported, non-embedded slice field (not []byte, which JSON
// carries as base64 text) without custom unmarshalling. Names follow
// encoding/json; a decoder's case-insensitive matches are not sized.
func NewPresizer(t reflect.Type) *Presizer {
	if t.Kind() != reflect.Struct || hasCustomJSON(t) {
		return nil
	}
	p := &Presizer{typ: t}
	for i := range t.NumField() {
		f := t.Field(i)
		info, ok := fieldInfo(f)
		if !ok || f.Anonymous || info.quoted || f.Type.Kind() != reflect.Slice || f.Type.Elem().Kind() == reflect.Uint8 || hasCustomJSON(f.Type) {
			continue
		}
		quoted := canonical.AppendString(nil, info.name)
		p.keys = append(p.keys, string(quoted[1:len(quoted)-1]))
		p.fields = append(p.fields, i)
		if len(p.keys) == maxPresized {
			break
		}
	}
	if len(p.keys) == 0 {
		return nil
	}
	return p
}

// Presize sizes the slice fields of *v (v points to a value of the
// Presizer's type) for the JSON object text, growing only nil or shorter
// slices. Text that is not an object sizes nothing; it never fails.
func (p *Presizer) Presize(text []byte, v unsafe.Pointer) {
	var lens [maxPresized]int
	canonical.ArrayLens(text, p.keys, lens[:])
	s := reflect.NewAt(p.typ, v).Elem()
	for i, n := range lens[:len(p.keys)] {
		if f := s.Field(p.fields[i]); n > f.Cap() {
			f.Grow(n - f.Len())
		}
	}
}
