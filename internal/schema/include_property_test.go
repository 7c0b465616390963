package schema

import (
	"encoding/json"
	"maps"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/agentsurface/agentsurface/internal/canonical"
	"github.com/google/jsonschema-go/jsonschema"
	"pgregory.net/rapid"
)

// checkPair checks the prover's guarantees on two schema texts and on
// candidate witness values (JSON texts):
//
//   - swapping the schemas swaps the directions;
//   - a schema of the subset is equivalent to itself;
//   - a change not called wider has no witness the new schema accepts and
//     the old one refuses, and a change not called narrower none of the
//     converse: by this package's validator when both schemas are in the
//     subset, and by jsonschema-go (an independent implementation of
//     draft 2020-12 and draft-07) when it reads both schemas.
//
// jsonschema-go is consulted where the subset means what the drafts
// mean: not for schemas with "format" (the subset asserts formats, the
// drafts annotate) or a "multipleOf" that is not a power of two (the
// subset allows a rounding tolerance), nor for witnesses with characters
// outside the Basic Multilingual Plane (the subset counts lengths in
// UTF-16 units, the drafts in code points).
func checkPair(t interface{ Fatalf(string, ...any) }, old, new []byte, witnesses ...[]byte) {
	d := Compare(old, new, nil)
	r := Compare(new, old, nil)
	if d.Wider != r.Narrower || d.Narrower != r.Wider {
		t.Fatalf("not symmetric: %+v, swapped %+v\nold %s\nnew %s", d, r, old, new)
	}
	lim := Limits{MaxBytes: HardMaxBytes, MaxDepth: HardMaxDepth}
	so, errO := ParseLimits(old, lim)
	sn, errN := ParseLimits(new, lim)
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
		self := Compare(s.text, append(c, ' '), nil)
		if (self.Wider || self.Narrower) && !strings.Contains(self.WhyWider+self.WhyNarrower, "too complex") {
			t.Fatalf("a schema is not equivalent to itself: %+v\n%s", self, s.text)
		}
	}
	useOracle := oracleComparable(old) && oracleComparable(new) && oracleSafe(old) && oracleSafe(new)
	var ro, rn *jsonschema.Resolved
	if useOracle {
		var okO, okN bool
		ro, okO = oracle(old)
		rn, okN = oracle(new)
		useOracle = okO && okN
	}
	for _, w := range witnesses {
		var v any
		if !json.Valid(w) || json.Unmarshal(w, &v) != nil {
			continue
		}
		if errO == nil && errN == nil {
			inOld, inNew := so.Validate(v) == nil, sn.Validate(v) == nil
			if inNew && !inOld && !d.Wider {
				t.Fatalf("the new schema accepts %s, which the old one refuses, but the change is not wider\nold %s\nnew %s", w, old, new)
			}
			if inOld && !inNew && !d.Narrower {
				t.Fatalf("the old schema accepts %s, which the new one refuses, but the change is not narrower\nold %s\nnew %s", w, old, new)
			}
		}
		if useOracle && bmpOnly(v) {
			inOld, inNew := oracleAccepts(ro, v), oracleAccepts(rn, v)
			if inNew && !inOld && !d.Wider {
				t.Fatalf("jsonschema-go: the new schema accepts %s, which the old one refuses, but the change is %+v\nold %s\nnew %s", w, d, old, new)
			}
			if inOld && !inNew && !d.Narrower {
				t.Fatalf("jsonschema-go: the old schema accepts %s, which the new one refuses, but the change is %+v\nold %s\nnew %s", w, d, old, new)
			}
		}
	}
}

// oracleComparable reports whether jsonschema-go reads a schema as the
// subset's validator does (see checkPair).
func oracleComparable(text []byte) bool {
	var doc any
	if json.Unmarshal(text, &doc) != nil {
		return false
	}
	ok := true
	var walk func(v any)
	walk = func(v any) {
		switch x := v.(type) {
		case map[string]any:
			for k, e := range x {
				switch k {
				case "format":
					ok = false
				case "multipleOf":
					if f, isNum := e.(float64); !isNum || !slices.Contains([]float64{0.25, 0.5, 1, 2, 4}, f) {
						ok = false
					}
				}
				walk(e)
			}
		case []any:
			for _, e := range x {
				walk(e)
			}
		}
	}
	walk(doc)
	return ok
}

// oracleSafe reports whether jsonschema-go can validate against a schema
// without recursing forever: every reference is "#", "#/$defs/<name>" or
// "#/definitions/<name>" (into the root), and no chain of references and
// in-place applicators (allOf, anyOf, oneOf, not, if, then, else,
// dependentSchemas) leads from a schema back to itself without consuming
// input.
func oracleSafe(text []byte) bool {
	var doc any
	if json.Unmarshal(text, &doc) != nil {
		return false
	}
	root, ok := doc.(map[string]any)
	if !ok {
		return true
	}
	target := func(ref string) (any, bool) {
		if ref == "#" {
			return root, true
		}
		for _, c := range []string{"$defs", "definitions"} {
			if name, ok := strings.CutPrefix(ref, "#/"+c+"/"); ok && !strings.ContainsAny(name, "/~%") {
				defs, _ := root[c].(map[string]any)
				t, ok := defs[name]
				return t, ok
			}
		}
		return nil, false
	}
	safe := true
	const (
		grey = 1 + iota
		black
	)
	// Schema objects are identified by their address in the decoded
	// document: maps are references.
	color := map[uintptr]int{}
	var visit func(v any)
	visit = func(v any) {
		m, ok := v.(map[string]any)
		if !ok || !safe {
			return
		}
		id := mapAddr(m)
		switch color[id] {
		case grey:
			safe = false
			return
		case black:
			return
		}
		color[id] = grey
		for k, e := range m {
			switch k {
			case "$ref":
				ref, _ := e.(string)
				t, ok := target(ref)
				if !ok {
					safe = false
					return
				}
				visit(t)
			case "$dynamicRef", "$recursiveRef":
				safe = false
			case "allOf", "anyOf", "oneOf":
				if arr, ok := e.([]any); ok {
					for _, x := range arr {
						visit(x)
					}
				}
			case "not", "if", "then", "else":
				visit(e)
			case "dependentSchemas":
				if dm, ok := e.(map[string]any); ok {
					for _, x := range dm {
						visit(x)
					}
				}
			}
		}
		color[id] = black
	}
	// Every schema of the document may be validated in place: start
	// from each object.
	var all func(v any)
	all = func(v any) {
		switch x := v.(type) {
		case map[string]any:
			visit(x)
			for _, e := range x {
				all(e)
			}
		case []any:
			for _, e := range x {
				all(e)
			}
		}
	}
	all(root)
	return safe
}

// mapAddr identifies a map.
func mapAddr(m map[string]any) uintptr { return reflect.ValueOf(m).Pointer() }

// bmpOnly reports whether no string of v has a character outside the
// Basic Multilingual Plane.
func bmpOnly(v any) bool {
	switch x := v.(type) {
	case string:
		return !strings.ContainsFunc(x, func(r rune) bool { return r > 0xFFFF })
	case []any:
		return !slices.ContainsFunc(x, func(e any) bool { return !bmpOnly(e) })
	case map[string]any:
		for k, e := range x {
			if !bmpOnly(k) || !bmpOnly(e) {
				return false
			}
		}
	}
	return true
}

// compareSeeds are FuzzCompare's seeds: old, new and a witness.
var compareSeeds = [][3]string{
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
	// Issue 38 item 3.
	{`{"type":"object","properties":{"a":{"type":"string"}},"additionalProperties":false}`,
		`{"type":"object","properties":{"a":{"type":"string"}},"additionalProperties":false,"patternProperties":{"^x":{"type":"integer"}}}`, `{"x1":1}`},
	{`{"type":"array","items":{"type":"string"}}`, `{"type":"array","prefixItems":[{"type":"integer"}],"items":{"type":"string"}}`, `[1]`},
	{`{"anyOf":[{"type":"string"}]}`, `{"anyOf":[{"type":"string"},true]}`, `1`},
	{`{"$schema":"http://json-schema.org/draft-07/schema#","definitions":{"s":{"type":"string"}},"properties":{"a":{"$ref":"#/definitions/s","maxLength":1}}}`,
		`{"$schema":"http://json-schema.org/draft-07/schema#","definitions":{"s":{"type":"string"}},"properties":{"a":{"$ref":"#/definitions/s"}}}`, `{"a":"abc"}`},
	{`{"type":"array","items":[{"type":"string"}],"additionalItems":false}`, `{"type":"array","items":[{"type":"string"}]}`, `["a",1]`},
	{`{"type":"object","unevaluatedProperties":false,"properties":{"a":{}}}`, `{"type":"object","properties":{"a":{}}}`, `{"b":1}`},
}

// FuzzCompare runs checkPair on pairs of schemas and a value: the
// schemas are untrusted input (a hand-edited contract file, an MCP
// server's listing).
func FuzzCompare(f *testing.F) {
	for _, s := range compareSeeds {
		f.Add(s[0], s[1], s[2])
		f.Add(s[1], s[0], s[2])
	}
	f.Fuzz(func(t *testing.T, old, new, witness string) {
		if len(old)+len(new) > 4096 || !json.Valid([]byte(old)) || !json.Valid([]byte(new)) {
			return
		}
		checkPair(t, []byte(old), []byte(new), []byte(witness))
	})
}

// TestCompareProperties checks the guarantees on random schemas of the
// subset, each compared with a mutation of itself or with another random
// schema, against values drawn to probe both.
func TestCompareProperties(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		g := gen{}
		a := g.schema(rt, 3)
		var b map[string]any
		if rapid.Bool().Draw(rt, "related") {
			b = g.mutate(rt, deepCopy(a), 3)
		} else {
			b = g.schema(rt, 3)
		}
		checkRandomPair(rt, a, b)
	})
}

// TestCompareOutsideProperties checks the guarantees on random schemas
// with keywords and constructs outside the subset (patternProperties,
// prefixItems, boolean subschemas, not, allOf, if/then/else, unknown
// keywords, draft-07, ...), against jsonschema-go as the oracle: whatever
// the prover does not model never makes a change look safe.
func TestCompareOutsideProperties(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		g := gen{outside: true}
		a := g.schema(rt, 3)
		var b map[string]any
		if rapid.Bool().Draw(rt, "related") {
			b = g.mutate(rt, deepCopy(a), 3)
		} else {
			b = g.schema(rt, 3)
		}
		if rapid.IntRange(0, 4).Draw(rt, "draft-07?") == 0 {
			a["$schema"] = "http://json-schema.org/draft-07/schema#"
			b["$schema"] = "http://json-schema.org/draft-07/schema#"
		}
		checkRandomPair(rt, a, b)
	})
}

// checkRandomPair runs checkPair on two generated schemas, with witnesses
// drawn at random and taken from the schemas' constants.
func checkRandomPair(rt *rapid.T, a, b map[string]any) {
	old, _ := json.Marshal(a)
	new, _ := json.Marshal(b)
	var ws [][]byte
	for i := range 12 {
		w, _ := json.Marshal(genValue(rt, 3, i))
		ws = append(ws, w)
	}
	for i := range 8 {
		doc := a
		if i%2 == 1 {
			doc = b
		}
		w, _ := json.Marshal(sample(rt, doc, doc, 4, i))
		ws = append(ws, w)
	}
	for _, v := range constants(a, b) {
		w, _ := json.Marshal(v)
		ws = append(ws, w)
	}
	checkPair(rt, old, new, ws...)
}

// sample draws a value meant to match node, a schema of the document
// root, or to come close: a branch of a union, the members a pattern of
// patternProperties matches, the items of prefixItems, bounds just met.
func sample(rt *rapid.T, root map[string]any, node any, depth, i int) any {
	label := func(s string) string { return s + string(rune('a'+i)) }
	m, ok := node.(map[string]any)
	if !ok || depth < 0 || rapid.IntRange(0, 9).Draw(rt, label("wild")) == 0 {
		return genValue(rt, 1, i)
	}
	if c, ok := m["const"]; ok {
		return c
	}
	if e, ok := m["enum"].([]any); ok && len(e) > 0 {
		return rapid.SampledFrom(e).Draw(rt, label("enum"))
	}
	if ref, ok := m["$ref"].(string); ok && rapid.Bool().Draw(rt, label("follow")) {
		var t any = root
		for _, c := range []string{"$defs", "definitions"} {
			if name, ok := strings.CutPrefix(ref, "#/"+c+"/"); ok {
				defs, _ := root[c].(map[string]any)
				t = defs[name]
			}
		}
		return sample(rt, root, t, depth-1, i)
	}
	for _, k := range []string{"anyOf", "oneOf", "allOf"} {
		if br, ok := m[k].([]any); ok && len(br) > 0 && rapid.Bool().Draw(rt, label("branch?")) {
			return sample(rt, root, rapid.SampledFrom(br).Draw(rt, label("branch")), depth-1, i)
		}
	}
	var types []string
	switch t := m["type"].(type) {
	case string:
		types = []string{t}
	case []any:
		for _, e := range t {
			if s, ok := e.(string); ok {
				types = append(types, s)
			}
		}
	}
	if types == nil {
		switch {
		case m["properties"] != nil || m["patternProperties"] != nil:
			types = []string{"object"}
		case m["items"] != nil || m["prefixItems"] != nil:
			types = []string{"array"}
		default:
			return genValue(rt, 1, i)
		}
	}
	count := func(minKey, maxKey string) int {
		lo, hi := 0, 3
		if x, ok := m[minKey].(float64); ok {
			lo = min(int(x), 3)
		}
		if x, ok := m[maxKey].(float64); ok {
			hi = max(min(int(x), 3), lo)
		}
		return rapid.IntRange(lo, hi).Draw(rt, label(minKey))
	}
	switch rapid.SampledFrom(types).Draw(rt, label("type")) {
	case "object":
		o := map[string]any{}
		props, _ := m["properties"].(map[string]any)
		req, _ := m["required"].([]any)
		for _, k := range slices.Sorted(maps.Keys(props)) {
			if slices.Contains(req, any(k)) || rapid.Bool().Draw(rt, label("member "+k)) {
				o[k] = sample(rt, root, props[k], depth-1, i)
			}
		}
		if pp, ok := m["patternProperties"].(map[string]any); ok && rapid.Bool().Draw(rt, label("x1")) {
			o["x1"] = sample(rt, root, pp["^x"], depth-1, i)
		}
		if rapid.IntRange(0, 3).Draw(rt, label("extra")) == 0 {
			o[rapid.SampledFrom([]string{"d", "x1"}).Draw(rt, label("extra key"))] = genValue(rt, 1, i)
		}
		return o
	case "array":
		a := []any{}
		prefix, _ := m["prefixItems"].([]any)
		if arr, ok := m["items"].([]any); ok {
			prefix = arr
		}
		for j := range count("minItems", "maxItems") {
			switch {
			case j < len(prefix):
				a = append(a, sample(rt, root, prefix[j], depth-1, i))
			case m["items"] != nil:
				a = append(a, sample(rt, root, m["items"], depth-1, i))
			default:
				a = append(a, genValue(rt, 1, i))
			}
		}
		return a
	case "string":
		n := count("minLength", "maxLength")
		return strings.Repeat(rapid.SampledFrom([]string{"a", "b", "x"}).Draw(rt, label("letter")), n)
	case "integer":
		return float64(rapid.IntRange(-3, 4).Draw(rt, label("integer")))
	case "number":
		return rapid.SampledFrom([]float64{-3, -1, 0, 0.5, 1, 1.5, 2, 3, 4}).Draw(rt, label("number"))
	case "boolean":
		return rapid.Bool().Draw(rt, label("boolean"))
	}
	return nil
}

// constants returns the values of the const and enum keywords of the
// schemas: values near what they accept.
func constants(docs ...any) []any {
	var out []any
	var walk func(v any)
	walk = func(v any) {
		switch x := v.(type) {
		case map[string]any:
			for _, k := range slices.Sorted(maps.Keys(x)) {
				switch e := x[k]; k {
				case "const":
					out = append(out, e)
				case "enum":
					if arr, ok := e.([]any); ok {
						out = append(out, arr...)
					}
				default:
					walk(e)
				}
			}
		case []any:
			for _, e := range x {
				walk(e)
			}
		}
	}
	for _, d := range docs {
		walk(d)
	}
	return out
}

var (
	genPatterns = []string{"^a", "b", "^[ab]+$"}
	genFormats  = []string{"email", "date"}
	genPool     = []any{"a", "b", "ab", 1.0, 2.0, 0.5, true, false, nil}
	genKeys     = []string{"a", "b", "c"}
)

// gen draws schemas: of the subset, or, with outside, with keywords and
// constructs outside it.
type gen struct{ outside bool }

// schema draws a schema.
func (g gen) schema(rt *rapid.T, depth int) map[string]any {
	kinds := []string{"string", "integer", "number", "boolean", "null", "enum", "const", "nullable"}
	if depth > 0 {
		kinds = append(kinds, "array", "object", "anyOf", "array", "object")
	}
	s := map[string]any{}
	switch k := rapid.SampledFrom(kinds).Draw(rt, "kind"); k {
	case "string":
		s["type"] = "string"
		g.addStringKeywords(rt, s)
	case "integer", "number":
		s["type"] = k
		addNumberKeywords(rt, s)
	case "boolean", "null":
		s["type"] = k
	case "nullable":
		s["type"] = []any{"string", "null"}
		g.addStringKeywords(rt, s)
	case "enum":
		s["enum"] = pooled(rapid.SliceOfNDistinct(rapid.IntRange(0, len(genPool)-1), 1, 4, rapid.ID).Draw(rt, "enum"))
	case "const":
		s["const"] = rapid.SampledFrom(genPool).Draw(rt, "const")
	case "array":
		s["type"] = "array"
		if rapid.Bool().Draw(rt, "items") {
			s["items"] = g.sub(rt, depth-1)
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
		for _, k := range genKeys {
			if rapid.Bool().Draw(rt, "prop "+k) {
				props[k] = g.sub(rt, depth-1)
			}
		}
		s["properties"] = props
		var req []any
		for _, k := range genKeys {
			if rapid.IntRange(0, 3).Draw(rt, "req "+k) == 0 {
				req = append(req, k)
			}
		}
		if req != nil {
			s["required"] = req
		}
		if rapid.Bool().Draw(rt, "closed?") {
			s["additionalProperties"] = g.outside && rapid.IntRange(0, 3).Draw(rt, "additional") == 0 ||
				!g.outside && rapid.Bool().Draw(rt, "additional")
		}
	case "anyOf":
		n := rapid.IntRange(1, 3).Draw(rt, "branches")
		var br []any
		for range n {
			br = append(br, g.sub(rt, depth-1))
		}
		s["anyOf"] = br
	}
	if g.outside && rapid.IntRange(0, 2).Draw(rt, "outside?") == 0 {
		g.addOutside(rt, s, depth)
	}
	return s
}

// sub draws a subschema: a schema, or, outside the subset, now and then
// a boolean.
func (g gen) sub(rt *rapid.T, depth int) any {
	if g.outside && rapid.IntRange(0, 5).Draw(rt, "boolean?") == 0 {
		return rapid.Bool().Draw(rt, "boolean schema")
	}
	return g.schema(rt, depth)
}

// outsideKeywords are keywords outside the subset with values drawn for
// them; the witnesses' keys (a, b, c, d, x1) and values meet them.
var outsideKeywords = []string{
	"patternProperties", "prefixItems", "additionalItems", "items array", "not", "allOf", "oneOf",
	"if", "contains", "minProperties", "maxProperties", "propertyNames", "dependentRequired",
	"dependentSchemas", "unevaluatedProperties", "unevaluatedItems", "nullable", "ref root",
	"definitions", "additionalProperties schema", "format unknown", "type unknown", "$id inside",
}

// addOutside adds a keyword outside the subset to s.
func (g gen) addOutside(rt *rapid.T, s map[string]any, depth int) {
	small := func() any { return g.sub(rt, max(depth-1, 0)) }
	kw := rapid.SampledFrom(outsideKeywords).Draw(rt, "outside")
	// Keywords that change the meaning of the subset's beside them, more
	// often where they do.
	switch {
	case s["type"] == "object" && rapid.Bool().Draw(rt, "pattern properties?"):
		kw = "patternProperties"
	case s["type"] == "array" && rapid.Bool().Draw(rt, "prefix items?"):
		kw = "prefixItems"
	}
	switch kw {
	case "patternProperties":
		s[kw] = map[string]any{"^x": small()}
	case "prefixItems":
		s[kw] = []any{small()}
	case "additionalItems":
		s[kw] = small()
	case "items array":
		s["items"] = []any{small()}
	case "not":
		s[kw] = small()
	case "allOf", "oneOf":
		s[kw] = []any{small(), small()}
	case "if":
		s["if"], s["then"] = small(), small()
		if rapid.Bool().Draw(rt, "else?") {
			s["else"] = small()
		}
	case "contains":
		s[kw] = small()
		if rapid.Bool().Draw(rt, "minContains?") {
			s["minContains"] = float64(rapid.IntRange(0, 2).Draw(rt, "minContains"))
		}
	case "minProperties", "maxProperties":
		s[kw] = float64(rapid.IntRange(0, 2).Draw(rt, kw))
	case "propertyNames":
		s[kw] = map[string]any{"maxLength": 1.0}
	case "dependentRequired":
		s[kw] = map[string]any{"a": []any{"b"}}
	case "dependentSchemas":
		s[kw] = map[string]any{"a": small()}
	case "unevaluatedProperties", "unevaluatedItems":
		s[kw] = false
	case "nullable":
		s[kw] = true
	case "ref root":
		s["items"] = map[string]any{"$ref": "#"}
	case "definitions":
		s["$ref"] = "#/definitions/d"
		s["definitions"] = map[string]any{"d": gen{}.schema(rt, max(depth-1, 0))}
	case "additionalProperties schema":
		s["additionalProperties"] = small()
	case "format unknown":
		s["format"] = "hostname"
	case "type unknown":
		s["type"] = "float"
	case "$id inside":
		s["$id"] = "http://example.com/inside"
	}
}

func pooled(idx []int) []any {
	out := make([]any, len(idx))
	for i, k := range idx {
		out[i] = genPool[k]
	}
	return out
}

func (g gen) addStringKeywords(rt *rapid.T, s map[string]any) {
	for _, kw := range []string{"minLength", "maxLength"} {
		if rapid.IntRange(0, 2).Draw(rt, kw) == 0 {
			s[kw] = float64(rapid.IntRange(0, 3).Draw(rt, kw+"N"))
		}
	}
	if rapid.IntRange(0, 3).Draw(rt, "pattern?") == 0 {
		s["pattern"] = rapid.SampledFrom(genPatterns).Draw(rt, "pattern")
	}
	if !g.outside && rapid.IntRange(0, 5).Draw(rt, "format?") == 0 {
		s["format"] = rapid.SampledFrom(genFormats).Draw(rt, "format")
	}
}

func addNumberKeywords(rt *rapid.T, s map[string]any) {
	for _, kw := range []string{"minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum"} {
		if rapid.IntRange(0, 3).Draw(rt, kw) == 0 {
			s[kw] = float64(rapid.IntRange(-3, 4).Draw(rt, kw+"N"))
		}
	}
	if rapid.IntRange(0, 4).Draw(rt, "multipleOf?") == 0 {
		s["multipleOf"] = rapid.SampledFrom([]float64{1, 2, 0.5}).Draw(rt, "multipleOf")
	}
}

// mutate changes one thing in s, at some depth.
func (g gen) mutate(rt *rapid.T, s map[string]any, depth int) map[string]any {
	// Descend into a subschema now and then.
	if depth > 0 && rapid.IntRange(0, 2).Draw(rt, "descend") == 0 {
		if props, ok := s["properties"].(map[string]any); ok && len(props) > 0 {
			k := rapid.SampledFrom(slices.Sorted(maps.Keys(props))).Draw(rt, "prop")
			if m, ok := props[k].(map[string]any); ok {
				props[k] = g.mutate(rt, m, depth-1)
				return s
			}
		}
		if it, ok := s["items"].(map[string]any); ok {
			s["items"] = g.mutate(rt, it, depth-1)
			return s
		}
		if br, ok := s["anyOf"].([]any); ok {
			i := rapid.IntRange(0, len(br)-1).Draw(rt, "branch")
			if m, ok := br[i].(map[string]any); ok {
				br[i] = g.mutate(rt, m, depth-1)
				return s
			}
		}
	}
	n := 5
	if g.outside {
		n = 9
	}
	switch min(rapid.IntRange(0, n).Draw(rt, "mutation"), 7) {
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
		g.addStringKeywords(rt, s)
	case 3: // a union with another schema
		return map[string]any{"anyOf": []any{s, g.sub(rt, 1)}}
	case 4: // replace entirely
		return g.schema(rt, depth)
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
	case 6: // a keyword outside the subset
		g.addOutside(rt, s, depth)
	case 7: // a boolean schema in a union, or a keyword outside the subset
		if br, ok := s["anyOf"].([]any); ok && rapid.Bool().Draw(rt, "into the union") {
			s["anyOf"] = append(br, rapid.Bool().Draw(rt, "branch"))
			return s
		}
		if rapid.Bool().Draw(rt, "boolean branch?") {
			return map[string]any{"anyOf": []any{s, rapid.Bool().Draw(rt, "branch")}}
		}
		g.addOutside(rt, s, depth)
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
		return rapid.SampledFrom(genPool).Draw(rt, label("pooled"))
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
		for _, k := range append(slices.Clone(genKeys), "d", "x1") {
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
