package schema

import (
	"reflect"
	"testing"
)

// Lookup finds declared properties through nesting, $ref and anyOf, and
// says which types they may hold; undeclared paths and map members are
// not declared.
func TestLookup(t *testing.T) {
	s, err := Parse([]byte(`{"type":"object","properties":{
		"ids":{"type":"array","items":{"type":"string"}},
		"count":{"type":"integer"},
		"filter":{"$ref":"#/$defs/f"},
		"either":{"anyOf":[{"type":"object","properties":{"a":{"type":"number"}}},{"type":"string"}]},
		"free":{}
	},"$defs":{"f":{"type":"object","properties":{"site":{"type":"string"}}}}}`))
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		path     []string
		declared bool
		allows   map[string]bool
	}{
		{nil, true, map[string]bool{"object": true, "string": false}},
		{[]string{"ids"}, true, map[string]bool{"string": true, "array": true, "number": false}},
		{[]string{"count"}, true, map[string]bool{"number": true, "string": false}},
		{[]string{"filter", "site"}, true, map[string]bool{"string": true, "number": false}},
		{[]string{"filter", "other"}, false, nil},
		{[]string{"either", "a"}, true, map[string]bool{"number": true, "string": false}},
		{[]string{"either"}, true, map[string]bool{"string": true, "object": true, "number": false}},
		{[]string{"free"}, true, map[string]bool{"number": true, "string": true}},
		{[]string{"missing"}, false, nil},
		{[]string{"ids", "x"}, false, nil},
	} {
		pl, ok := s.Lookup(c.path)
		if ok != c.declared {
			t.Errorf("%q: declared %v, want %v", c.path, ok, c.declared)
			continue
		}
		for typ, want := range c.allows {
			if got := pl.Allows(typ); got != want {
				t.Errorf("%q allows %s: %v, want %v", c.path, typ, got, want)
			}
		}
	}
	m, err := Infer(reflectMapType())
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := m.Lookup([]string{"labels", "x"}); ok {
		t.Error("a Go map's member is a declared property")
	}
}

func reflectMapType() reflect.Type {
	type withMap struct {
		Labels map[string]string `json:"labels"`
	}
	return reflect.TypeFor[withMap]()
}
