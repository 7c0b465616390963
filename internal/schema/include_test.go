package schema

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/google/jsonschema-go/jsonschema"
)

// Each case compares an old and a new schema: wider says the new one may
// accept a value the old one refuses, narrower the converse.
func TestCompare(t *testing.T) {
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

		// Constructs outside the subset (issue 38 item 3): never safe
		// unless proven.
		{name: "patternProperties next to additionalProperties false", old: obj(`"a":{"type":"string"}`, `,"additionalProperties":false`),
			new: obj(`"a":{"type":"string"}`, `,"additionalProperties":false,"patternProperties":{"^x":{"type":"integer"}}`), wider: true, narrower: true, whyWider: `unproven: "patternProperties" next to "additionalProperties": false`},
		{name: "patternProperties on an open object only restricts", old: obj(`"a":{"type":"string"}`, ``),
			new: obj(`"a":{"type":"string"}`, `,"patternProperties":{"^x":{"type":"integer"}}`), narrower: true, whyNarr: "patternProperties"},
		{name: "prefixItems next to items", old: `{"type":"array","items":{"type":"string"}}`,
			new: `{"type":"array","prefixItems":[{"type":"integer"}],"items":{"type":"string"}}`, wider: true, narrower: true, whyWider: `unproven: "prefixItems" next to "items"`},
		{name: "prefixItems alone only restricts", old: `{"type":"array"}`, new: `{"type":"array","prefixItems":[{"type":"integer"}]}`, narrower: true},
		{name: "a true branch in anyOf", old: `{"anyOf":[{"type":"string"}]}`, new: `{"anyOf":[{"type":"string"},true]}`, wider: true, whyWider: "values of type object"},
		{name: "a false branch in anyOf accepts nothing", old: `{"anyOf":[{"type":"string"},false]}`, new: `{"type":"string"}`},
		{name: "a false property forbids it", old: obj(`"a":{"type":"string"},"b":false`, ``), new: obj(`"a":{"type":"string"}`, `,"additionalProperties":false`), narrower: true},
		{name: "an unknown keyword", old: `{"type":"string"}`, new: `{"type":"string","nullable":true}`, wider: true, narrower: true, whyWider: `unproven: the keyword "nullable"`},
		{name: "a keyword of another vocabulary", old: `{"type":"string"}`, new: `{"type":"string","$vocabulary":{}}`, wider: true, narrower: true},
		{name: "a dialect not known", old: `{"type":"string"}`, new: `{"$schema":"http://json-schema.org/draft-04/schema#","type":"string"}`, wider: true, narrower: true, whyWider: "dialect"},
		{name: "draft-07 ignores the siblings of $ref", old: `{"$schema":"http://json-schema.org/draft-07/schema#","$defs":{"s":{"type":"string"}},"type":"object","properties":{"a":{"$ref":"#/$defs/s","maxLength":3}}}`,
			new: `{"$schema":"http://json-schema.org/draft-07/schema#","$defs":{"s":{"type":"string"}},"type":"object","properties":{"a":{"$ref":"#/$defs/s","maxLength":2}}}`, wider: true, narrower: true, whyWider: "draft-07"},
		{name: "draft 2020-12 conjoins them", old: `{"$schema":"https://json-schema.org/draft/2020-12/schema","$defs":{"s":{"type":"string"}},"type":"object","properties":{"a":{"$ref":"#/$defs/s","maxLength":3}}}`,
			new: `{"$schema":"https://json-schema.org/draft/2020-12/schema","$defs":{"s":{"type":"string"}},"type":"object","properties":{"a":{"$ref":"#/$defs/s","maxLength":2}}}`, narrower: true},
		{name: "an $id inside changes what references mean", old: `{"type":"object","properties":{"a":{"type":"string"}}}`,
			new: `{"type":"object","properties":{"a":{"$id":"http://x/y","type":"string"}}}`, wider: true, narrower: true, whyWider: `"$id" inside`},
		{name: "a schema-valued additionalProperties only restricts", old: `{"type":"object"}`, new: `{"type":"object","additionalProperties":{"type":"string"}}`, narrower: true},
		{name: "a value that is not a schema", old: obj(`"a":{"type":"string"}`, ``), new: obj(`"a":5`, ``), wider: true, narrower: true, whyWider: "not a schema"},
		{name: "a percent-encoded reference", old: `{"$defs":{"a b":{"type":"string"},"a%20b":{"type":"integer"}},"$ref":"#/$defs/a%20b"}`,
			new: `{"type":"integer"}`, wider: true, narrower: true, whyWider: "does not resolve"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := Compare([]byte(tc.old), []byte(tc.new), nil)
			if d.Wider != tc.wider || d.Narrower != tc.narrower {
				t.Fatalf("wider %v (%s), narrower %v (%s); want %v, %v", d.Wider, d.WhyWider, d.Narrower, d.WhyNarrower, tc.wider, tc.narrower)
			}
			if !strings.Contains(d.WhyWider, tc.whyWider) || !strings.Contains(d.WhyNarrower, tc.whyNarr) {
				t.Fatalf("reasons %q / %q, want %q / %q", d.WhyWider, d.WhyNarrower, tc.whyWider, tc.whyNarr)
			}
			// Swapping the schemas swaps the directions.
			r := Compare([]byte(tc.new), []byte(tc.old), nil)
			if r.Wider != d.Narrower || r.Narrower != d.Wider {
				t.Fatalf("swapped: wider %v narrower %v", r.Wider, r.Narrower)
			}
		})
	}
}

// oracle compiles a schema with github.com/google/jsonschema-go, an
// implementation of draft 2020-12 and draft-07 independent of this
// package's; ok is false when it refuses the schema.
func oracle(text []byte) (r *jsonschema.Resolved, ok bool) {
	defer func() {
		if recover() != nil {
			r, ok = nil, false
		}
	}()
	var s jsonschema.Schema
	if err := json.Unmarshal(text, &s); err != nil {
		return nil, false
	}
	r, err := s.Resolve(nil)
	if err != nil {
		return nil, false
	}
	return r, true
}

// oracleAccepts reports whether r accepts the value v.
func oracleAccepts(r *jsonschema.Resolved, v any) (ok bool) {
	defer func() {
		if recover() != nil {
			ok = false
		}
	}()
	return r.Validate(v) == nil
}

// The three widenings of issue 38 item 3 that were classified narrowing or
// neutral: each has a witness, checked with jsonschema-go, that the new
// schema accepts and the old one refuses, and each is now wider.
func TestCompareOutsideWidenings(t *testing.T) {
	for _, tc := range []struct{ name, old, new, witness string }{
		{"patternProperties next to additionalProperties false",
			`{"type":"object","properties":{"a":{"type":"string"}},"additionalProperties":false}`,
			`{"type":"object","properties":{"a":{"type":"string"}},"additionalProperties":false,"patternProperties":{"^x":{"type":"integer"}}}`,
			`{"x1":1}`},
		{"prefixItems next to items",
			`{"type":"array","items":{"type":"string"}}`,
			`{"type":"array","prefixItems":[{"type":"integer"}],"items":{"type":"string"}}`,
			`[1]`},
		{"a true branch inside anyOf",
			`{"anyOf":[{"type":"string"}]}`,
			`{"anyOf":[{"type":"string"},true]}`,
			`1`},
		{"all three deep inside a property",
			`{"type":"object","properties":{"p":{"type":"object","properties":{"q":{"anyOf":[{"type":"string"}]}}}}}`,
			`{"type":"object","properties":{"p":{"type":"object","properties":{"q":{"anyOf":[{"type":"string"},true]}}}}}`,
			`{"p":{"q":1}}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ro, ok1 := oracle([]byte(tc.old))
			rn, ok2 := oracle([]byte(tc.new))
			if !ok1 || !ok2 {
				t.Fatal("jsonschema-go refuses a schema")
			}
			var w any
			if err := json.Unmarshal([]byte(tc.witness), &w); err != nil {
				t.Fatal(err)
			}
			if !oracleAccepts(rn, w) || oracleAccepts(ro, w) {
				t.Fatalf("jsonschema-go: new accepts %s: %v, old: %v; want true, false", tc.witness, oracleAccepts(rn, w), oracleAccepts(ro, w))
			}
			if d := Compare([]byte(tc.old), []byte(tc.new), nil); !d.Wider {
				t.Fatalf("not wider: %+v", d)
			}
		})
	}
}

// A schema that takes the prover too long is a change it could not
// prove, never an equivalence.
func TestCompareBudget(t *testing.T) {
	// Nested unions multiply the cases to check.
	s := `{"type":"string"}`
	for range 12 {
		s = `{"anyOf":[` + s + `,` + s + `,{"type":"integer"}]}`
	}
	d := Compare([]byte(s), []byte(s+" "), nil)
	if !d.Wider || !strings.Contains(d.WhyWider, "too complex") || !d.Narrower || !strings.Contains(d.WhyNarrower, "too complex") {
		t.Fatalf("%+v", d)
	}
}

// defsUnion is a schema of n definitions, each an object of one constant
// member, all under one anyOf: proving it included in itself tries each
// branch against the branches before its own, so the work grows as n².
func defsUnion(n int, extra string) []byte {
	var defs, refs []string
	for i := range n {
		defs = append(defs, fmt.Sprintf(`"d%d":{"type":"object","properties":{"k":{"const":%d}},"required":["k"]}`, i, i))
		refs = append(refs, fmt.Sprintf(`{"$ref":"#/$defs/d%d"}`, i))
	}
	return []byte(`{"$defs":{` + strings.Join(defs, ",") + `},"anyOf":[` + strings.Join(refs, ",") + `]` + extra + `}`)
}

// The prover's work is bounded whatever the schema: 4,000 definitions
// under one anyOf (quadratic to prove, and once minutes of work) take at
// most two proofs' budget and come out unproven, too complex; a run's
// budget is taken from. Smaller unions are proved.
func TestCompareDefsBounded(t *testing.T) {
	old, new := defsUnion(4000, ""), defsUnion(4000, `,"description":"x"`)
	budget := NewBudget(10 * ProofWork)
	d := Compare(old, new, budget)
	if !d.Wider || !d.Narrower || !strings.Contains(d.WhyWider, "too complex") || !strings.Contains(d.WhyNarrower, "too complex") {
		t.Fatalf("%+v", d)
	}
	used := 10*ProofWork - budget.Left()
	if limit := 2*ProofWork + (len(old)+len(new))/64; used <= 0 || used > limit {
		t.Fatalf("used %d steps, want 1..%d", used, limit)
	}
	if d := Compare(defsUnion(50, ""), defsUnion(50, `,"description":"x"`), nil); d.Wider || d.Narrower {
		t.Fatalf("50 definitions: %+v", d)
	}
	// A run whose budget is spent reports every further change unproven
	// without trying, the same whichever schema is old.
	spent := NewBudget(2*ProofWork - 1)
	a, b := []byte(`{"type":"string"}`), []byte(`{"type":"string","maxLength":3}`)
	for _, d := range []Difference{Compare(a, b, spent), Compare(b, a, spent)} {
		if !d.Wider || !d.Narrower || !strings.Contains(d.WhyWider, "budget") {
			t.Fatalf("spent budget: %+v", d)
		}
	}
	if spent.Left() != 2*ProofWork-1 {
		t.Fatalf("a spent budget was taken from: %d", spent.Left())
	}
}
