package schema

import (
	"bytes"
	"encoding/json"
	"reflect"
	"testing"
)

// parseSeeds are FuzzParse's seed corpus.
var parseSeeds = []string{
	`{}`,
	`true`,
	`{"type":"object","properties":{"ids":{"type":"array","items":{"type":"string"},"minItems":1}},"required":["ids"],"additionalProperties":false}`,
	`{"type":["string","null"],"minLength":1,"maxLength":5,"pattern":"^a","format":"email"}`,
	`{"type":"number","minimum":0,"exclusiveMaximum":1e21,"multipleOf":0.01}`,
	`{"anyOf":[{"const":"a"},{"enum":[1,null,{"x":[]}]}],"description":"d","default":3,"examples":[1]}`,
	`{"$defs":{"n":{"type":"object","properties":{"c":{"type":"array","items":{"$ref":"#/$defs/n"}}}}},"$ref":"#/$defs/n"}`,
	`{"$defs":{"a":{"$ref":"#/$defs/b"},"b":{"anyOf":[{"$ref":"#/$defs/a"}]}}}`,
	`{"$defs":{"a~b/c":{}},"$ref":"#/$defs/a~0b~1c"}`,
	`{"$schema":"https://json-schema.org/draft/2020-12/schema","$id":"x","oneOf":[]}`,
	`{"items":{"items":{"items":{"items":{"items":{"items":{"items":{"items":{"items":{}}}}}}}}}}`,
	`{"pattern":"(?P<x>a+)\\1"}`,
	`{"minimum":-0,"maximum":1e-7,"title":"\u2028<>&\ud800"}`,
	`{"properties":{"":{},"~":{"type":"null"}},"required":["","~"]}`,
}

// FuzzParse checks that Parse never panics and that a parsed schema's
// canonical text parses again to the same text.
func FuzzParse(f *testing.F) {
	for _, s := range parseSeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		s, err := Parse(raw)
		if err != nil {
			if _, ok := err.(*Error); !ok {
				t.Fatalf("error %T is not *Error: %v", err, err)
			}
			return
		}
		s2, err := Parse([]byte(s.JSON()))
		if err != nil {
			t.Fatalf("JSON() %s does not re-parse: %v", s.JSON(), err)
		}
		if s2.JSON() != s.JSON() || s2.Depth() != s.Depth() || s2.IsObject() != s.IsObject() {
			t.Fatalf("re-parse differs:\n%s\n%s", s.JSON(), s2.JSON())
		}
		// A parsed schema validates its own examples without panicking.
		var doc map[string]any
		if json.Unmarshal(raw, &doc) == nil {
			if ex, ok := doc["examples"].([]any); ok {
				for _, e := range ex {
					s.Validate(e)
				}
			}
		}
	})
}

// validateSchemas are FuzzValidate's fixed schemas, covering every keyword.
var validateSchemas = []string{
	`{"type":"object","properties":{"ids":{"type":"array","items":{"type":"string"}}},"required":["ids"],"additionalProperties":false}`,
	`{"type":["object","null"],"properties":{"a":{"type":"integer","minimum":-5,"exclusiveMaximum":100,"multipleOf":3},"b":{"type":"string","minLength":1,"maxLength":4,"pattern":"^[a-c]+$"},"c":{"enum":["x",1,null,[1,{"k":true}]]},"d":{"const":{"z":[0]}},"e":{"type":"array","minItems":1,"maxItems":3,"uniqueItems":true}},"required":["a"]}`,
	`{"anyOf":[{"type":"string","format":"date-time"},{"type":"string","format":"uuid"},{"type":"string","format":"email"},{"type":"string","format":"uri"},{"type":"string","format":"date"},{"type":"number","maximum":0}]}`,
	`{"$defs":{"n":{"type":"object","properties":{"c":{"type":"array","items":{"$ref":"#/$defs/n"}},"v":{"type":"integer"}},"additionalProperties":false}},"$ref":"#/$defs/n"}`,
	`{"type":"array","items":{"anyOf":[{"type":"object","properties":{"k":{"const":"a"}},"required":["k"]},{"type":"array","uniqueItems":true}]},"uniqueItems":true}`,
}

// validateInferred adds an inferred schema with a hidden map value schema.
type validateInferred struct {
	M  map[string]int8 `json:"m"`
	T  *[]string       `json:"t,omitempty"`
	F  float32         `json:"f"`
	Ts []uint          `json:"ts"`
}

// FuzzValidate checks that Validate never panics, is deterministic, and
// agrees between float64 and json.Number decoding.
func FuzzValidate(f *testing.F) {
	schemas := make([]*Schema, 0, len(validateSchemas)+1)
	for _, raw := range validateSchemas {
		schemas = append(schemas, mustParse(f, raw))
	}
	inf, err := For[validateInferred]()
	if err != nil {
		f.Fatal(err)
	}
	schemas = append(schemas, inf)
	for i, v := range []string{
		`{"ids":["a"]}`, `{"ids":null}`, `{"ids":["a",1],"x":2}`, `null`, `{"a":3,"b":"abc","c":[1,{"k":true}],"d":{"z":[0]},"e":[1,"1"]}`,
		`"2024-01-02T03:04:05Z"`, `"a@b.c"`, `-1`, `{"c":[{"c":[{"v":1.5}]}]}`, `[{"k":"a"},{"k":"a"},[1,1]]`,
		`{"m":{"a":1,"b":300},"f":3.4028235e38,"ts":[0,-1]}`, `[[[[[[[[[[[]]]]]]]]]]]`, `{"a":-0,"b":"\ud800"}`,
	} {
		f.Add(uint8(i), []byte(v))
	}
	f.Fuzz(func(t *testing.T, which uint8, text []byte) {
		s := schemas[int(which)%len(schemas)]
		var v any
		if err := json.Unmarshal(text, &v); err != nil {
			return
		}
		first := s.Validate(v)
		if len(first) > MaxIssues {
			t.Fatalf("%d issues", len(first))
		}
		if second := s.Validate(v); !reflect.DeepEqual(first, second) {
			t.Fatalf("nondeterministic:\n%v\n%v", first, second)
		}
		var n any
		dec := json.NewDecoder(bytes.NewReader(text))
		dec.UseNumber()
		if err := dec.Decode(&n); err != nil {
			t.Fatal(err)
		}
		if withNumbers := s.Validate(n); !reflect.DeepEqual(first, withNumbers) {
			t.Fatalf("json.Number differs:\n%v\n%v", first, withNumbers)
		}
	})
}
