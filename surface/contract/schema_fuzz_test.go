package contract

import (
	"encoding/json"
	"maps"
	"slices"
	"strings"
	"testing"

	"github.com/agentsurface/agentsurface/internal/canonical"
	"github.com/agentsurface/agentsurface/internal/schema"
	"pgregory.net/rapid"
)

// checkSchemaPair checks the classifier's guarantees on two schema
// texts and, when witness is JSON, on one value: swapping the schemas
// swaps the directions; a schema of the subset is equivalent to itself;
// and a value the new schema accepts and the old one refuses (by the
// validator itself) is never missed: the change is reported wider (and
// narrower for the converse).
func checkSchemaPair(t interface{ Fatalf(string, ...any) }, old, new, witness []byte) {
	d := compareSchemas(old, new, anyValue)
	r := compareSchemas(new, old, anyValue)
	if d.wider != r.narrower || d.narrower != r.wider {
		t.Fatalf("not symmetric: %+v, swapped %+v\nold %s\nnew %s", d, r, old, new)
	}
	so, errO := schema.ParseLimits(old, schema.Limits{MaxBytes: schema.HardMaxBytes, MaxDepth: schema.HardMaxDepth})
	sn, errN := schema.ParseLimits(new, schema.Limits{MaxBytes: schema.HardMaxBytes, MaxDepth: schema.HardMaxDepth})
	for _, s := range []struct {
		text []byte
		err  error
	}{{old, errO}, {new, errN}} {
		if s.err != nil {
			continue
		}
		c, err := canonical.Canonicalize(s.text)
		if err != nil {
			continue
		}
		// Forces the proof: equal bytes are taken as equal at once.
		self := compareSchemas(s.text, append(c, ' '), anyValue)
		if (self.wider || self.narrower) && !strings.Contains(self.whyWider+self.whyNarrower, "too complex") {
			t.Fatalf("a schema is not equivalent to itself: %+v\n%s", self, s.text)
		}
	}
	if errO != nil || errN != nil || !json.Valid(witness) {
		return
	}
	var v any
	if json.Unmarshal(witness, &v) != nil {
		return
	}
	inOld, inNew := so.Validate(v) == nil, sn.Validate(v) == nil
	if inNew && !inOld && !d.wider {
		t.Fatalf("the new schema accepts %s, which the old one refuses, but the change is not wider\nold %s\nnew %s", witness, old, new)
	}
	if inOld && !inNew && !d.narrower {
		t.Fatalf("the old schema accepts %s, which the new one refuses, but the change is not narrower\nold %s\nnew %s", witness, old, new)
	}
}

// FuzzCompareSchemas runs checkSchemaPair on pairs of schemas and a
// value: the schemas are untrusted input (a hand-edited contract file, an
// MCP server's listing).
func FuzzCompareSchemas(f *testing.F) {
	seeds := [][3]string{
		{`{"type":"array","maxItems":100}`, `{"type":"array","maxItems":200}`, `[1,2,3]`},
		{`{"type":"string","enum":["a","b"]}`, `{"type":"string","enum":["a","b","c"]}`, `"c"`},
		{`{"type":["string","null"]}`, `{"anyOf":[{"type":"string"},{"type":"null"}]}`, `null`},
		{`{"type":"integer"}`, `{"type":"number"}`, `1.5`},
		{`{"type":"number","exclusiveMinimum":0}`, `{"type":"number","minimum":0}`, `0`},
		{`{"type":"object","properties":{"a":{"type":"string"}},"additionalProperties":false}`, `{"type":"object","properties":{"a":{"type":"string"},"b":{"type":"integer"}}}`, `{"b":1}`},
		{`{"$defs":{"n":{"type":"object","properties":{"k":{"type":"array","items":{"$ref":"#/$defs/n"}},"s":{"type":"string","maxLength":2}}}},"$ref":"#/$defs/n"}`,
			`{"$defs":{"n":{"type":"object","properties":{"k":{"type":"array","items":{"$ref":"#/$defs/n"}},"s":{"type":"string","maxLength":3}}}},"$ref":"#/$defs/n"}`, `{"k":[{"s":"abc"}]}`},
		{`{"type":"string","pattern":"^a"}`, `{"type":"string","pattern":"^[ab]"}`, `"b"`},
		{`{"enum":[true,false]}`, `{"type":"boolean"}`, `true`},
		{`{"type":"integer","multipleOf":1}`, `{"type":"integer"}`, `3`},
		{`{"type":"array","uniqueItems":true}`, `{"type":"array"}`, `[1,1]`},
		{`{"const":"a"}`, `{"enum":["a","b"]}`, `"b"`},
		{`{"type":"string","format":"email"}`, `{"type":"string"}`, `"x"`},
		{`true`, `{"type":"string","not":{}}`, `"x"`},
	}
	for _, s := range seeds {
		f.Add(s[0], s[1], s[2])
		f.Add(s[1], s[0], s[2])
	}
	f.Fuzz(func(t *testing.T, old, new, witness string) {
		if len(old)+len(new) > 4096 || !json.Valid([]byte(old)) || !json.Valid([]byte(new)) {
			return
		}
		checkSchemaPair(t, []byte(old), []byte(new), []byte(witness))
	})
}

// TestCompareSchemasProperties checks the guarantees on random schemas of
// the subset, each compared with a mutation of itself or with another
// random schema, against values drawn to probe both.
func TestCompareSchemasProperties(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		a := genSchema(rt, 3)
		var b map[string]any
		if rapid.Bool().Draw(rt, "related") {
			b = mutate(rt, deepCopy(a), 3)
		} else {
			b = genSchema(rt, 3)
		}
		old, _ := json.Marshal(a)
		new, _ := json.Marshal(b)
		for i := range 12 {
			w, _ := json.Marshal(genValue(rt, 3, i))
			checkSchemaPair(rt, old, new, w)
		}
	})
}

var (
	patterns = []string{"^a", "b", "^[ab]+$"}
	formats  = []string{"email", "date"}
	pool     = []any{"a", "b", "ab", 1.0, 2.0, 0.5, true, false, nil}
	keys     = []string{"a", "b", "c"}
)

func small(rt *rapid.T, label string) float64 {
	return float64(rapid.IntRange(-3, 4).Draw(rt, label))
}

// genSchema draws a schema of the subset.
func genSchema(rt *rapid.T, depth int) map[string]any {
	kinds := []string{"string", "integer", "number", "boolean", "null", "enum", "const", "nullable"}
	if depth > 0 {
		kinds = append(kinds, "array", "object", "anyOf", "array", "object")
	}
	s := map[string]any{}
	switch k := rapid.SampledFrom(kinds).Draw(rt, "kind"); k {
	case "string":
		s["type"] = "string"
		addStringKeywords(rt, s)
	case "integer", "number":
		s["type"] = k
		addNumberKeywords(rt, s)
	case "boolean", "null":
		s["type"] = k
	case "nullable":
		s["type"] = []any{"string", "null"}
		addStringKeywords(rt, s)
	case "enum":
		s["enum"] = distinct(rapid.SliceOfNDistinct(rapid.IntRange(0, len(pool)-1), 1, 4, rapid.ID).Draw(rt, "enum"))
	case "const":
		s["const"] = rapid.SampledFrom(pool).Draw(rt, "const")
	case "array":
		s["type"] = "array"
		if rapid.Bool().Draw(rt, "items") {
			s["items"] = genSchema(rt, depth-1)
		}
		for _, kw := range []string{"minItems", "maxItems"} {
			if rapid.Bool().Draw(rt, kw) {
				s[kw] = float64(rapid.IntRange(0, 3).Draw(rt, kw+"N"))
			}
		}
		if rapid.Bool().Draw(rt, "unique") {
			s["uniqueItems"] = true
		}
	case "object":
		s["type"] = "object"
		props := map[string]any{}
		for _, k := range keys {
			if rapid.Bool().Draw(rt, "prop "+k) {
				props[k] = genSchema(rt, depth-1)
			}
		}
		s["properties"] = props
		var req []any
		for _, k := range keys {
			if rapid.IntRange(0, 3).Draw(rt, "req "+k) == 0 {
				req = append(req, k)
			}
		}
		if req != nil {
			s["required"] = req
		}
		if rapid.Bool().Draw(rt, "closed?") {
			s["additionalProperties"] = rapid.Bool().Draw(rt, "additional")
		}
	case "anyOf":
		n := rapid.IntRange(1, 3).Draw(rt, "branches")
		var br []any
		for range n {
			br = append(br, genSchema(rt, depth-1))
		}
		s["anyOf"] = br
	}
	return s
}

func distinct(idx []int) []any {
	out := make([]any, len(idx))
	for i, k := range idx {
		out[i] = pool[k]
	}
	return out
}

func addStringKeywords(rt *rapid.T, s map[string]any) {
	for _, kw := range []string{"minLength", "maxLength"} {
		if rapid.IntRange(0, 2).Draw(rt, kw) == 0 {
			s[kw] = float64(rapid.IntRange(0, 3).Draw(rt, kw+"N"))
		}
	}
	if rapid.IntRange(0, 3).Draw(rt, "pattern?") == 0 {
		s["pattern"] = rapid.SampledFrom(patterns).Draw(rt, "pattern")
	}
	if rapid.IntRange(0, 5).Draw(rt, "format?") == 0 {
		s["format"] = rapid.SampledFrom(formats).Draw(rt, "format")
	}
}

func addNumberKeywords(rt *rapid.T, s map[string]any) {
	for _, kw := range []string{"minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum"} {
		if rapid.IntRange(0, 3).Draw(rt, kw) == 0 {
			s[kw] = small(rt, kw+"N")
		}
	}
	if rapid.IntRange(0, 4).Draw(rt, "multipleOf?") == 0 {
		s["multipleOf"] = rapid.SampledFrom([]float64{1, 2, 0.5}).Draw(rt, "multipleOf")
	}
}

// mutate changes one thing in s, at some depth.
func mutate(rt *rapid.T, s map[string]any, depth int) map[string]any {
	// Descend into a subschema now and then.
	if depth > 0 && rapid.IntRange(0, 2).Draw(rt, "descend") == 0 {
		if props, ok := s["properties"].(map[string]any); ok && len(props) > 0 {
			k := rapid.SampledFrom(slices.Sorted(maps.Keys(props))).Draw(rt, "prop")
			props[k] = mutate(rt, props[k].(map[string]any), depth-1)
			return s
		}
		if it, ok := s["items"].(map[string]any); ok {
			s["items"] = mutate(rt, it, depth-1)
			return s
		}
		if br, ok := s["anyOf"].([]any); ok {
			i := rapid.IntRange(0, len(br)-1).Draw(rt, "branch")
			br[i] = mutate(rt, br[i].(map[string]any), depth-1)
			return s
		}
	}
	switch rapid.IntRange(0, 5).Draw(rt, "mutation") {
	case 0: // drop a keyword
		if len(s) > 0 {
			delete(s, rapid.SampledFrom(slices.Sorted(maps.Keys(s))).Draw(rt, "drop"))
		}
	case 1: // move a bound
		for _, kw := range []string{"minLength", "maxLength", "minItems", "maxItems", "minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum"} {
			if x, ok := s[kw].(float64); ok {
				s[kw] = max(0, x+float64(rapid.IntRange(-1, 1).Draw(rt, "delta")))
				return s
			}
		}
		addNumberKeywords(rt, s)
	case 2: // add keywords
		addStringKeywords(rt, s)
	case 3: // a union with another schema
		return map[string]any{"anyOf": []any{s, genSchema(rt, 1)}}
	case 4: // replace entirely
		return genSchema(rt, depth)
	case 5: // widen or narrow the type
		switch s["type"] {
		case "integer":
			s["type"] = "number"
		case "number":
			s["type"] = "integer"
		case "string":
			s["type"] = []any{"string", "null"}
		default:
			delete(s, "type")
		}
	}
	return s
}

// genValue draws a JSON value (decoded form).
func genValue(rt *rapid.T, depth, i int) any {
	label := func(s string) string { return s + string(rune('a'+i)) }
	n := 5
	if depth > 0 {
		n = 7
	}
	switch rapid.IntRange(0, n).Draw(rt, label("value")) {
	case 0:
		return rapid.SampledFrom([]string{"", "a", "ab", "b", "abc", "x@y.z", "2024-01-02"}).Draw(rt, label("string"))
	case 1:
		return rapid.SampledFrom([]float64{-3, -1, 0, 0.5, 1, 2, 3, 4}).Draw(rt, label("number"))
	case 2:
		return rapid.Bool().Draw(rt, label("bool"))
	case 3:
		return nil
	case 4, 5:
		return rapid.SampledFrom(pool).Draw(rt, label("pooled"))
	case 6:
		var a []any
		for range rapid.IntRange(0, 3).Draw(rt, label("len")) {
			a = append(a, genValue(rt, depth-1, i))
		}
		if a == nil {
			a = []any{}
		}
		return a
	default:
		o := map[string]any{}
		for _, k := range append(keys, "d") {
			if rapid.Bool().Draw(rt, label("has "+k)) {
				o[k] = genValue(rt, depth-1, i)
			}
		}
		return o
	}
}

func deepCopy(s map[string]any) map[string]any {
	b, _ := json.Marshal(s)
	var c map[string]any
	_ = json.Unmarshal(b, &c)
	return c
}
