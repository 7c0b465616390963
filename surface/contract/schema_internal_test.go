package contract

import (
	"encoding/json"
	"strings"
	"testing"
)

var anyValue = json.RawMessage(`{}`)

// Each case compares an old and a new schema: wider says the new one may
// accept a value the old one refuses, narrower the converse.
func TestCompareSchemas(t *testing.T) {
	obj := func(props string, extra string) string {
		return `{"type":"object","properties":{` + props + `}` + extra + `}`
	}
	ids := func(items string) string {
		return obj(`"ids":{"type":"array","items":`+items+`,"maxItems":100}`, `,"required":["ids"],"additionalProperties":false`)
	}
	for _, tc := range []struct {
		name, old, new    string
		wider, narrower   bool
		whyWider, whyNarr string // substrings of the reasons, when set
	}{
		{name: "equal", old: `{"type":"string"}`, new: `{"type":"string"}`},
		{name: "key order and annotations", old: `{"type":"string","description":"a"}`, new: `{"title":"t","type":"string","description":"b","examples":["x"]}`},
		{name: "maxItems raised", old: `{"type":"array","maxItems":100}`, new: `{"type":"array","maxItems":200}`, wider: true, whyWider: "maxItems"},
		{name: "maxItems lowered", old: `{"type":"array","maxItems":200}`, new: `{"type":"array","maxItems":100}`, narrower: true},
		{name: "maxItems dropped", old: `{"type":"array","maxItems":200}`, new: `{"type":"array"}`, wider: true},
		{name: "property added to a closed object", old: obj(`"a":{"type":"string"}`, `,"additionalProperties":false`),
			new: obj(`"a":{"type":"string"},"b":{"type":"string"}`, `,"additionalProperties":false`), wider: true, whyWider: `"b"`},
		{name: "required dropped", old: obj(`"a":{"type":"string"}`, `,"required":["a"]`), new: obj(`"a":{"type":"string"}`, ``), wider: true, whyWider: `without the property "a"`},
		{name: "required added", old: obj(`"a":{"type":"string"}`, ``), new: obj(`"a":{"type":"string"}`, `,"required":["a"]`), narrower: true},
		{name: "enum value added", old: `{"type":"string","enum":["a","b"]}`, new: `{"type":"string","enum":["a","b","c"]}`, wider: true, whyWider: `"c"`},
		{name: "enum value removed", old: `{"enum":["a","b","c"]}`, new: `{"enum":["a","b"]}`, narrower: true},
		{name: "enum to any string", old: `{"type":"string","enum":["a"]}`, new: `{"type":"string"}`, wider: true},
		{name: "any string to enum", old: `{"type":"string"}`, new: `{"type":"string","enum":["a"]}`, narrower: true},
		{name: "enum reordered", old: `{"enum":["a","b"]}`, new: `{"enum":["b","a"]}`},
		{name: "integer to number", old: `{"type":"integer"}`, new: `{"type":"number"}`, wider: true, whyWider: "number"},
		{name: "number to integer", old: `{"type":"number"}`, new: `{"type":"integer"}`, narrower: true},
		{name: "pattern added", old: `{"type":"string"}`, new: `{"type":"string","pattern":"^a"}`, narrower: true},
		{name: "pattern removed", old: `{"type":"string","pattern":"^a"}`, new: `{"type":"string"}`, wider: true, whyWider: "pattern"},
		{name: "pattern changed", old: `{"type":"string","pattern":"^a"}`, new: `{"type":"string","pattern":"^[ab]"}`, wider: true, narrower: true},
		{name: "format added", old: `{"type":"string"}`, new: `{"type":"string","format":"email"}`, narrower: true},
		{name: "anyOf branch added", old: `{"anyOf":[{"type":"string"}]}`, new: `{"anyOf":[{"type":"string"},{"type":"integer"}]}`, wider: true},
		{name: "nullable as a type list or as anyOf", old: `{"type":["string","null"]}`, new: `{"anyOf":[{"type":"string"},{"type":"null"}]}`},
		{name: "number split into integer and the rest", old: `{"type":"number","minimum":0}`, new: `{"anyOf":[{"type":"integer","minimum":0},{"type":"number","minimum":0}]}`},
		{name: "a reference or the same schema inline", old: `{"$defs":{"s":{"type":"string","maxLength":5}},"type":"object","properties":{"a":{"$ref":"#/$defs/s"}}}`,
			new: `{"type":"object","properties":{"a":{"type":"string","maxLength":5}}}`},
		{name: "recursive tree, deep bound raised", old: `{"$defs":{"n":{"type":"object","properties":{"kids":{"type":"array","items":{"$ref":"#/$defs/n"}},"name":{"type":"string","maxLength":5}}}},"$ref":"#/$defs/n"}`,
			new: `{"$defs":{"n":{"type":"object","properties":{"kids":{"type":"array","items":{"$ref":"#/$defs/n"}},"name":{"type":"string","maxLength":6}}}},"$ref":"#/$defs/n"}`, wider: true, whyWider: "name"},
		{name: "recursive tree, equal", old: `{"$defs":{"n":{"type":"object","properties":{"kids":{"type":"array","items":{"$ref":"#/$defs/n"}}}}},"$ref":"#/$defs/n"}`,
			new: `{"$defs":{"m":{"type":"object","properties":{"kids":{"type":"array","items":{"$ref":"#/$defs/m"}}}}},"$ref":"#/$defs/m"}`},
		{name: "a keyword the checker does not know", old: `{"type":"string"}`, new: `{"type":"string","not":{"const":"a"}}`, wider: false, narrower: true, whyNarr: "not"},
		{name: "an unknown keyword on both sides", old: `{"type":"string","not":{"const":"a"}}`, new: `{"type":"string","not":{"const":"b"}}`, wider: true, narrower: true},
		{name: "not an object", old: `{"type":"string"}`, new: `true`, wider: true, narrower: true},
		{name: "minimum made exclusive", old: `{"type":"number","minimum":0}`, new: `{"type":"number","exclusiveMinimum":0}`, narrower: true},
		{name: "exclusive minimum made inclusive", old: `{"type":"number","exclusiveMinimum":0}`, new: `{"type":"number","minimum":0}`, wider: true},
		{name: "multipleOf 1 on integers", old: `{"type":"integer"}`, new: `{"type":"integer","multipleOf":1}`},
		{name: "multipleOf 1 on numbers", old: `{"type":"number"}`, new: `{"type":"number","multipleOf":1}`, narrower: true},
		{name: "additionalProperties closed", old: `{"type":"object"}`, new: `{"type":"object","additionalProperties":false}`, narrower: true},
		{name: "const widened to an enum", old: `{"const":"a"}`, new: `{"enum":["a","b"]}`, wider: true},
		{name: "values of one type matching different branches", old: `{"enum":["a","b"]}`, new: `{"anyOf":[{"const":"a"},{"const":"b"}]}`},
		{name: "booleans by enum or by type", old: `{"enum":[true,false]}`, new: `{"type":"boolean"}`},
		{name: "an enum value the rest of the old schema refused", old: `{"type":"string","enum":["a",1]}`, new: `{"type":"string","enum":["a"]}`},
		{name: "deep item bound", old: ids(`{"type":"string","maxLength":64}`), new: ids(`{"type":"string","maxLength":65}`), wider: true, whyWider: "ids[]"},
		{name: "deep item type", old: ids(`{"type":"string"}`), new: ids(`{"type":["string","integer"]}`), wider: true, whyWider: "integer"},
		{name: "uniqueItems dropped", old: `{"type":"array","uniqueItems":true}`, new: `{"type":"array"}`, wider: true},
		{name: "uniqueItems on at most one item", old: `{"type":"array","maxItems":1}`, new: `{"type":"array","maxItems":1,"uniqueItems":true}`},
		{name: "a contradiction accepts nothing", old: `{"type":"string","minLength":3,"maxLength":2}`, new: `{"type":"integer","minimum":3,"maximum":2}`},
		{name: "a reference that does not resolve", old: `{"type":"string"}`, new: `{"$ref":"#/$defs/missing"}`, wider: true, narrower: true},
		{name: "references that never reach a schema", old: `{"$defs":{"a":{"$ref":"#/$defs/a"}},"$ref":"#/$defs/a"}`, new: `{"type":"string"}`, wider: true, narrower: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := compareSchemas(json.RawMessage(tc.old), json.RawMessage(tc.new), anyValue)
			if d.wider != tc.wider || d.narrower != tc.narrower {
				t.Fatalf("wider %v (%s), narrower %v (%s); want %v, %v", d.wider, d.whyWider, d.narrower, d.whyNarrower, tc.wider, tc.narrower)
			}
			if !strings.Contains(d.whyWider, tc.whyWider) || !strings.Contains(d.whyNarrower, tc.whyNarr) {
				t.Fatalf("reasons %q / %q, want %q / %q", d.whyWider, d.whyNarrower, tc.whyWider, tc.whyNarr)
			}
			// Swapping the schemas swaps the directions.
			r := compareSchemas(json.RawMessage(tc.new), json.RawMessage(tc.old), anyValue)
			if r.wider != d.narrower || r.narrower != d.wider {
				t.Fatalf("swapped: wider %v narrower %v", r.wider, r.narrower)
			}
		})
	}
}

// An absent schema compares as its default: no input is the empty
// object.
func TestCompareSchemasDefault(t *testing.T) {
	if d := compareSchemas(nil, json.RawMessage(`{"type":"object","properties":{"a":{"type":"string"}}}`), emptyObjectSchema); !d.wider || d.narrower {
		t.Fatalf("%+v", d)
	}
	if d := compareSchemas(nil, json.RawMessage(emptyObjectSchema), emptyObjectSchema); d.wider || d.narrower {
		t.Fatalf("%+v", d)
	}
}

// A schema that takes the checker too long is a change it could not
// prove, never an equivalence.
func TestCompareSchemasBudget(t *testing.T) {
	// Nested unions multiply the cases to check.
	s := `{"type":"string"}`
	for range 12 {
		s = `{"anyOf":[` + s + `,` + s + `,{"type":"integer"}]}`
	}
	d := compareSchemas(json.RawMessage(s), json.RawMessage(s+" "), anyValue)
	if !d.wider || !strings.Contains(d.whyWider, "too complex") {
		t.Fatalf("%+v", d)
	}
}
