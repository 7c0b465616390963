package schema

import (
	"bytes"
	"encoding/json"
	"testing"

	"pgregory.net/rapid"
)

// Portable rewrites type arrays and schemas that constrain nothing, in
// place and nowhere else, keeping the other keys' order and text.
func TestPortable(t *testing.T) {
	for _, tc := range []struct{ name, in, want string }{
		{"nothing to rewrite",
			`{"type":"object","properties":{"ids":{"type":"array","items":{"type":"string"}}},"required":["ids"],"additionalProperties":false}`,
			`{"type":"object","properties":{"ids":{"type":"array","items":{"type":"string"}}},"required":["ids"],"additionalProperties":false}`},
		{"a nullable slice, where type was",
			`{"additionalProperties":false,"properties":{"rows":{"type":["array","null"],"items":{"type":"string"}},"n":{"type":"integer"}},"required":["rows"],"type":"object"}`,
			`{"additionalProperties":false,"properties":{"rows":{"anyOf":[{"type":"array"},{"type":"null"}],"items":{"type":"string"}},"n":{"type":"integer"}},"required":["rows"],"type":"object"}`},
		{"the root, and a type array of one",
			`{"items":{"type":["string"]},"type":["array","null"]}`,
			`{"items":{"type":"string"},"anyOf":[{"type":"array"},{"type":"null"}]}`},
		{"inside anyOf and $defs",
			`{"$defs":{"n":{"type":["integer","string"],"description":"a"}},"anyOf":[{"$ref":"#/$defs/n"},{"type":["boolean","null"]}]}`,
			`{"$defs":{"n":{"anyOf":[{"type":"integer"},{"type":"string"}],"description":"a"}},"anyOf":[{"$ref":"#/$defs/n"},{"anyOf":[{"type":"boolean"},{"type":"null"}]}]}`},
		{"a type array beside anyOf: one copy per type",
			`{"description":"d","type":["string","null"],"anyOf":[{"minLength":2},{"const":null}],"maxLength":5}`,
			`{"description":"d","anyOf":[{"type":"string","anyOf":[{"minLength":2},{"const":null}],"maxLength":5},{"type":"null","anyOf":[{"minLength":2},{"const":null}],"maxLength":5}]}`},
		{"at the root, the document's keys stay outside",
			`{"$schema":"https://json-schema.org/draft/2020-12/schema","$defs":{"x":{"type":"string"}},"type":["object","null"],"anyOf":[{"$ref":"#/$defs/x"},{"required":["a"]}]}`,
			`{"$schema":"https://json-schema.org/draft/2020-12/schema","$defs":{"x":{"type":"string"}},"anyOf":[{"type":"object","anyOf":[{"$ref":"#/$defs/x"},{"required":["a"]}]},{"type":"null","anyOf":[{"$ref":"#/$defs/x"},{"required":["a"]}]}]}`},
		{"a schema that constrains nothing",
			`{"type":"object","properties":{"any":{},"note":{"description":"free <form>"}}}`,
			`{"type":"object","properties":{"any":{"anyOf":[{"type":"object"},{"type":"array"},{"type":"string"},{"type":"number"},{"type":"boolean"},{"type":"null"}]},"note":{"description":"free <form>","anyOf":[{"type":"object"},{"type":"array"},{"type":"string"},{"type":"number"},{"type":"boolean"},{"type":"null"}]}}}`},
		{"values that are not schemas are left alone",
			`{"type":"object","properties":{"type":{"type":"string","default":{"type":["a","b"]},"enum":["x"]}}}`,
			`{"type":"object","properties":{"type":{"type":"string","default":{"type":["a","b"]},"enum":["x"]}}}`},
		{"not an object", `true`, `true`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := Portable([]byte(tc.in))
			if string(got) != tc.want {
				t.Fatalf("Portable(%s)\n got %s\nwant %s", tc.in, got, tc.want)
			}
			if again := Portable(got); !bytes.Equal(again, got) {
				t.Fatalf("not idempotent: %s", again)
			}
		})
	}
	in := []byte(`{"type":"string"}`)
	if out := Portable(in); &out[0] != &in[0] {
		t.Fatal("a schema with nothing to rewrite was copied")
	}
}

// On random schemas of the subset, with type arrays, unions and schemas
// that constrain nothing mixed in, Portable's schema is of the subset,
// has neither construct left, is idempotent, accepts exactly the values
// the original accepts, by this package's validator and by jsonschema-go
// (an independent implementation of draft 2020-12), and the inclusion
// prover proves the two equivalent (so a contract read from what MCP
// lists diffs as unchanged against the registry's).
func TestPortableEquivalent(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		doc := loosen(rt, gen{}.schema(rt, 3), 0)
		orig, _ := json.Marshal(doc)
		port := Portable(orig)
		so, err := Parse(orig)
		if err != nil {
			rt.Skip("not in the subset: " + err.Error())
		}
		sp, err := Parse(port)
		if err != nil {
			rt.Fatalf("Portable left the subset: %v\n%s\n%s", err, orig, port)
		}
		if again := Portable(port); !bytes.Equal(again, port) {
			rt.Fatalf("not idempotent:\n%s\n%s", port, again)
		}
		if d := Compare(orig, port, nil); d.Wider || d.Narrower {
			rt.Fatalf("not proven equivalent: %+v\n%s\n%s", d, orig, port)
		}
		var pdoc any
		_ = json.Unmarshal(port, &pdoc)
		if where := unportable(pdoc, "", true); where != "" {
			rt.Fatalf("%s is not portable in %s (from %s)", where, port, orig)
		}
		ro, okO := oracle(orig)
		rp, okP := oracle(port)
		useOracle := okO && okP && oracleComparable(orig) && oracleSafe(orig)
		for i := range 16 {
			var v any
			if i%2 == 0 {
				v = genValue(rt, 3, i)
			} else {
				v = sample(rt, doc, doc, 4, i)
			}
			b, _ := json.Marshal(v)
			_ = json.Unmarshal(b, &v)
			if a, p := so.Validate(v) == nil, sp.Validate(v) == nil; a != p {
				rt.Fatalf("%s: valid %v against %s, %v against its portable form %s", b, a, orig, p, port)
			}
			if useOracle && bmpOnly(v) {
				if a, p := oracleAccepts(ro, v), oracleAccepts(rp, v); a != p {
					rt.Fatalf("jsonschema-go: %s valid %v against %s, %v against its portable form %s", b, a, orig, p, port)
				}
			}
		}
	})
}

// loosen mixes into a generated schema what Portable rewrites: type
// arrays of two or three types (also beside anyOf), and subschemas that
// constrain nothing, with or without annotations.
func loosen(rt *rapid.T, s map[string]any, depth int) map[string]any {
	label := func(l string) string { return l + string(rune('a'+depth)) }
	if props, ok := s["properties"].(map[string]any); ok {
		for k, p := range props {
			if m, ok := p.(map[string]any); ok {
				props[k] = loosen(rt, m, depth+1)
			}
		}
	}
	if m, ok := s["items"].(map[string]any); ok {
		s["items"] = loosen(rt, m, depth+1)
	}
	if br, ok := s["anyOf"].([]any); ok {
		for i, b := range br {
			if m, ok := b.(map[string]any); ok {
				br[i] = loosen(rt, m, depth+1)
			}
		}
	}
	switch rapid.IntRange(0, 5).Draw(rt, label("loosen")) {
	case 0:
		types := rapid.SliceOfNDistinct(rapid.SampledFrom([]string{"string", "integer", "number", "boolean", "null", "object", "array"}),
			1, 3, func(s string) string { return s }).Draw(rt, label("types"))
		list := make([]any, len(types))
		for i, t := range types {
			list[i] = t
		}
		s["type"] = list
	case 1:
		if depth > 0 {
			return map[string]any{}
		}
	case 2:
		if depth > 0 {
			return map[string]any{"description": "anything"}
		}
	}
	return s
}

// unportable returns the path of the first subschema of doc that has a
// type array or constrains nothing, as the MCP Inspector's --strict lint
// reports them, or "".
func unportable(doc any, path string, root bool) string {
	m, ok := doc.(map[string]any)
	if !ok {
		return ""
	}
	if _, isArray := m["type"].([]any); isArray {
		return path + "/type"
	}
	if !hasConstraint(m) {
		return path
	}
	for _, k := range []string{"properties", "$defs"} {
		if k == "$defs" && !root {
			continue
		}
		if sub, ok := m[k].(map[string]any); ok {
			for name, s := range sub {
				if w := unportable(s, path+"/"+k+"/"+name, false); w != "" {
					return w
				}
			}
		}
	}
	if w := unportable(m["items"], path+"/items", false); m["items"] != nil && w != "" {
		return w
	}
	if br, ok := m["anyOf"].([]any); ok {
		for _, b := range br {
			if w := unportable(b, path+"/anyOf", false); w != "" {
				return w
			}
		}
	}
	return ""
}

func hasConstraint(m map[string]any) bool {
	for k := range m {
		if constraining[k] {
			return true
		}
	}
	return false
}
