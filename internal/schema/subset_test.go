package schema

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"

	"pgregory.net/rapid"
)

// nest wraps inner in depth levels of {"type":"array","items":…}.
func nest(depth int, inner string) string {
	s := inner
	for range depth {
		s = `{"type":"array","items":` + s + `}`
	}
	return s
}

// AS-SCHEMA-001: raw schemas are checked against the subset at
// registration; anything outside it is an *Error naming the keyword and
// its location.
func TestSubset_AS_SCHEMA_001(t *testing.T) {
	accepted := []struct {
		name, schema string
	}{
		{"empty", `{}`},
		{"object", `{"type":"object","properties":{"ids":{"type":"array","items":{"type":"string"},"minItems":1,"maxItems":5,"uniqueItems":true}},"required":["ids"],"additionalProperties":false}`},
		{"additionalProperties true", `{"type":"object","additionalProperties":true}`},
		{"nullable", `{"type":["string","null"]}`},
		{"all types", `{"type":["object","array","string","number","integer","boolean","null"]}`},
		{"enum const", `{"enum":["a",1,null,{"x":[true]}],"const":"a"}`},
		{"strings", `{"type":"string","minLength":1,"maxLength":10,"pattern":"^[a-z]+$"}`},
		{"format date-time", `{"type":"string","format":"date-time"}`},
		{"format date", `{"type":"string","format":"date"}`},
		{"format uuid", `{"type":"string","format":"uuid"}`},
		{"format email", `{"type":"string","format":"email"}`},
		{"format uri", `{"type":"string","format":"uri"}`},
		{"numbers", `{"type":"number","minimum":0,"maximum":10,"exclusiveMinimum":-1,"exclusiveMaximum":11,"multipleOf":0.5}`},
		{"integer", `{"type":"integer","minimum":-9007199254740991}`},
		{"anyOf union", `{"anyOf":[{"type":"object","properties":{"kind":{"const":"a"}}},{"type":"object","properties":{"kind":{"const":"b"}}}]}`},
		{"annotations", `{"description":"d","title":"t","default":{"a":1},"examples":[1,"x"],"deprecated":true,"type":"integer"}`},
		{"defs and ref", `{"$defs":{"id":{"type":"string"}},"type":"object","properties":{"a":{"$ref":"#/$defs/id"}}}`},
		{"recursion through items", `{"$defs":{"node":{"type":"object","properties":{"children":{"type":"array","items":{"$ref":"#/$defs/node"}}}}},"$ref":"#/$defs/node"}`},
		{"recursion through properties", `{"$defs":{"l":{"anyOf":[{"type":"null"},{"type":"object","properties":{"next":{"$ref":"#/$defs/l"}}}]}},"$ref":"#/$defs/l"}`},
		{"escaped ref", `{"$defs":{"a/b~c":{"type":"string"}},"$ref":"#/$defs/a~1b~0c"}`},
		{"schema and id", `{"$schema":"https://json-schema.org/draft/2020-12/schema","$id":"urn:x","type":"object"}`},
		{"depth 8", nest(8, `{"type":"string"}`)},
		{"size 16384", `{"description":"` + strings.Repeat("x", 16384-len(`{"description":""}`)) + `"}`},
	}
	for _, tc := range accepted {
		t.Run("accept/"+tc.name, func(t *testing.T) {
			s, err := Parse([]byte(tc.schema))
			if err != nil {
				t.Fatalf("Parse: %v", err)
			}
			if s.Depth() > DefaultMaxDepth || s.Size() > DefaultMaxBytes {
				t.Fatalf("depth %d size %d beyond the defaults", s.Depth(), s.Size())
			}
		})
	}

	rejected := []struct {
		name, schema, keyword, path string
	}{
		// Keywords outside the subset.
		{"oneOf", `{"oneOf":[{}]}`, "oneOf", "/oneOf"},
		{"allOf", `{"allOf":[{}]}`, "allOf", "/allOf"},
		{"not", `{"not":{}}`, "not", "/not"},
		{"if", `{"if":{},"then":{}}`, "if", "/if"},
		{"then", `{"then":{}}`, "then", "/then"},
		{"else", `{"else":{}}`, "else", "/else"},
		{"patternProperties", `{"patternProperties":{"a":{}}}`, "patternProperties", "/patternProperties"},
		{"dependentRequired", `{"dependentRequired":{}}`, "dependentRequired", "/dependentRequired"},
		{"dependentSchemas", `{"dependentSchemas":{}}`, "dependentSchemas", "/dependentSchemas"},
		{"unevaluatedProperties", `{"unevaluatedProperties":false}`, "unevaluatedProperties", "/unevaluatedProperties"},
		{"unevaluatedItems", `{"unevaluatedItems":false}`, "unevaluatedItems", "/unevaluatedItems"},
		{"prefixItems", `{"prefixItems":[{}]}`, "prefixItems", "/prefixItems"},
		{"contains", `{"contains":{}}`, "contains", "/contains"},
		{"minContains", `{"minContains":1}`, "minContains", "/minContains"},
		{"propertyNames", `{"propertyNames":{}}`, "propertyNames", "/propertyNames"},
		{"minProperties", `{"minProperties":1}`, "minProperties", "/minProperties"},
		{"maxProperties", `{"maxProperties":1}`, "maxProperties", "/maxProperties"},
		{"additionalItems", `{"additionalItems":false}`, "additionalItems", "/additionalItems"},
		{"definitions", `{"definitions":{}}`, "definitions", "/definitions"},
		{"$anchor", `{"$anchor":"a"}`, "$anchor", "/$anchor"},
		{"$dynamicRef", `{"$dynamicRef":"#a"}`, "$dynamicRef", "/$dynamicRef"},
		{"$comment", `{"$comment":"c"}`, "$comment", "/$comment"},
		{"readOnly", `{"readOnly":true}`, "readOnly", "/readOnly"},
		{"contentEncoding", `{"contentEncoding":"base64"}`, "contentEncoding", "/contentEncoding"},
		{"nested forbidden", `{"properties":{"a/b":{"items":{"oneOf":[]}}}}`, "oneOf", "/properties/a~1b/items/oneOf"},
		{"forbidden in defs", `{"$defs":{"x":{"not":{}}}}`, "not", "/$defs/x/not"},
		{"forbidden in anyOf", `{"anyOf":[{},{"if":{}}]}`, "if", "/anyOf/1/if"},
		// Boolean schemas.
		{"root true", `true`, "", ""},
		{"root array", `[]`, "", ""},
		{"property false", `{"properties":{"a":false}}`, "", "/properties/a"},
		{"items true", `{"items":true}`, "items", "/items"},
		{"anyOf true", `{"anyOf":[true]}`, "", "/anyOf/0"},
		// additionalProperties is a boolean only.
		{"additionalProperties schema", `{"additionalProperties":{"type":"string"}}`, "additionalProperties", "/additionalProperties"},
		{"additionalProperties empty", `{"additionalProperties":{}}`, "additionalProperties", "/additionalProperties"},
		// Formats.
		{"format hostname", `{"format":"hostname"}`, "format", "/format"},
		{"format ipv4", `{"type":"string","format":"ipv4"}`, "format", "/format"},
		{"format not string", `{"format":1}`, "format", "/format"},
		// References.
		{"remote ref", `{"$ref":"https://example.com/s.json"}`, "$ref", "/$ref"},
		{"relative ref", `{"$ref":"other.json#/$defs/a"}`, "$ref", "/$ref"},
		{"definitions ref", `{"definitions":{},"$ref":"#/definitions/a"}`, "$ref", "/$ref"},
		{"root ref", `{"$ref":"#"}`, "$ref", "/$ref"},
		{"missing def", `{"$defs":{"a":{}},"$ref":"#/$defs/b"}`, "$ref", "/$ref"},
		{"ref without defs", `{"properties":{"x":{"$ref":"#/$defs/a"}}}`, "$ref", "/properties/x/$ref"},
		{"deep ref", `{"$defs":{"a":{"properties":{"b":{}}}},"$ref":"#/$defs/a/properties/b"}`, "$ref", "/$ref"},
		{"bad escape ref", `{"$defs":{"a":{}},"$ref":"#/$defs/a~2"}`, "$ref", "/$ref"},
		{"ref not string", `{"$ref":1}`, "$ref", "/$ref"},
		{"nested defs", `{"properties":{"a":{"$defs":{"b":{}}}}}`, "$defs", "/properties/a/$defs"},
		{"defs in defs", `{"$defs":{"a":{"$defs":{}}}}`, "$defs", "/$defs/a/$defs"},
		{"schema not at root", `{"items":{"$schema":"x"}}`, "$schema", "/items/$schema"},
		{"id not at root", `{"items":{"$id":"x"}}`, "$id", "/items/$id"},
		// Cycles that consume no input.
		{"self ref", `{"$defs":{"a":{"$ref":"#/$defs/a"}}}`, "$ref", "/$defs/a/$ref"},
		{"self ref via anyOf", `{"$defs":{"a":{"anyOf":[{"type":"null"},{"$ref":"#/$defs/a"}]}},"$ref":"#/$defs/a"}`, "$ref", "/$defs/a/anyOf/1/$ref"},
		{"two-step cycle", `{"$defs":{"a":{"$ref":"#/$defs/b"},"b":{"$ref":"#/$defs/a"}}}`, "$ref", "/$defs/a/$ref"},
		// Wrong keyword value types.
		{"type objekt", `{"type":"objekt"}`, "type", "/type"},
		{"type number value", `{"type":5}`, "type", "/type"},
		{"type empty array", `{"type":[]}`, "type", "/type"},
		{"type duplicate", `{"type":["string","string"]}`, "type", "/type"},
		{"type bad member", `{"type":["string","float"]}`, "type", "/type"},
		{"enum empty", `{"enum":[]}`, "enum", "/enum"},
		{"enum not array", `{"enum":"a"}`, "enum", "/enum"},
		{"required not array", `{"required":"a"}`, "required", "/required"},
		{"required number", `{"required":["a",1]}`, "required", "/required/1"},
		{"required duplicate", `{"required":["a","a"]}`, "required", "/required/1"},
		{"properties array", `{"properties":[]}`, "properties", "/properties"},
		{"items tuple", `{"items":[{}]}`, "items", "/items"},
		{"minLength negative", `{"minLength":-1}`, "minLength", "/minLength"},
		{"maxLength fraction", `{"maxLength":1.5}`, "maxLength", "/maxLength"},
		{"minItems string", `{"minItems":"1"}`, "minItems", "/minItems"},
		{"maxItems bool", `{"maxItems":true}`, "maxItems", "/maxItems"},
		{"uniqueItems string", `{"uniqueItems":"yes"}`, "uniqueItems", "/uniqueItems"},
		{"minimum string", `{"minimum":"0"}`, "minimum", "/minimum"},
		{"exclusiveMaximum bool", `{"exclusiveMaximum":true}`, "exclusiveMaximum", "/exclusiveMaximum"},
		{"multipleOf zero", `{"multipleOf":0}`, "multipleOf", "/multipleOf"},
		{"multipleOf negative", `{"multipleOf":-2}`, "multipleOf", "/multipleOf"},
		{"anyOf empty", `{"anyOf":[]}`, "anyOf", "/anyOf"},
		{"anyOf object", `{"anyOf":{}}`, "anyOf", "/anyOf"},
		{"description number", `{"description":5}`, "description", "/description"},
		{"title null", `{"title":null}`, "title", "/title"},
		{"examples object", `{"examples":{}}`, "examples", "/examples"},
		{"deprecated string", `{"deprecated":"no"}`, "deprecated", "/deprecated"},
		{"schema number", `{"$schema":5}`, "$schema", "/$schema"},
		{"defs array", `{"$defs":[]}`, "$defs", "/$defs"},
		{"pattern invalid", `{"pattern":"("}`, "pattern", "/pattern"},
		{"pattern lookahead", `{"pattern":"(?=a)"}`, "pattern", "/pattern"},
		{"pattern not string", `{"pattern":1}`, "pattern", "/pattern"},
		{"pattern too complex", `{"pattern":"` + strings.Repeat(`x{1000}`, 101) + `"}`, "pattern", "/pattern"},
		{"patterns too complex together", `{"properties":{"a":{"pattern":"` + strings.Repeat(`x{1000}`, 60) + `"},"b":{"pattern":"` + strings.Repeat(`x{1000}`, 60) + `"}}}`, "pattern", "/properties/b/pattern"},
		// Limits.
		{"depth 9", nest(9, `{"type":"string"}`), "", "/items/items/items/items/items/items/items/items/items"},
		{"depth 9 via properties", `{"properties":{"a":` + nest(8, `{}`) + `}}`, "", "/properties/a/items/items/items/items/items/items/items/items"},
		{"depth 9 via defs", `{"$defs":{"a":` + nest(8, `{}`) + `}}`, "", "/$defs/a/items/items/items/items/items/items/items/items"},
		{"depth 9 via anyOf", `{"anyOf":[` + nest(8, `{}`) + `]}`, "", "/anyOf/0/items/items/items/items/items/items/items/items"},
		{"depth 65", nest(65, `{}`), "", strings.Repeat("/items", 65)},
		{"size 16385", `{"description":"` + strings.Repeat("x", 16385-len(`{"description":""}`)) + `"}`, "", ""},
		{"hard size cap", `{"description":"` + strings.Repeat("x", HardMaxBytes) + `"}`, "", ""},
		// Not JSON.
		{"invalid json", `{"type":`, "", ""},
		{"trailing data", `{} {}`, "", ""},
		{"huge number", `{"minimum":1e400}`, "", ""},
	}
	for _, tc := range rejected {
		t.Run("reject/"+tc.name, func(t *testing.T) {
			s, err := Parse([]byte(tc.schema))
			if err == nil {
				t.Fatalf("Parse accepted %s: %s", tc.schema, s.JSON())
			}
			var se *Error
			if !errors.As(err, &se) {
				t.Fatalf("error %T %v is not a *schema.Error", err, err)
			}
			if se.Keyword != tc.keyword || se.Path != tc.path {
				t.Errorf("got keyword %q path %q (%v), want keyword %q path %q", se.Keyword, se.Path, err, tc.keyword, tc.path)
			}
			if se.Reason == "" || !strings.HasPrefix(err.Error(), "schema: ") {
				t.Errorf("bad error text %q", err.Error())
			}
		})
	}
}

func TestLimits(t *testing.T) {
	deep := []byte(nest(12, `{}`))
	if _, err := Parse(deep); err == nil {
		t.Fatal("depth 12 accepted with the default limits")
	}
	s, err := ParseLimits(deep, Limits{MaxDepth: 12})
	if err != nil {
		t.Fatalf("ParseLimits: %v", err)
	}
	if s.Depth() != 12 {
		t.Errorf("Depth = %d, want 12", s.Depth())
	}
	if err := s.CheckLimits(DefaultMaxBytes, 11); err == nil {
		t.Error("CheckLimits(…, 11) = nil for depth 12")
	} else if se := err.(*Error); se.Path != "/items/items/items/items/items/items/items/items/items/items/items/items" {
		t.Errorf("depth error path %q", se.Path)
	}
	if err := s.CheckLimits(s.Size()-1, 0); err == nil {
		t.Error("CheckLimits(size-1) = nil")
	}
	if err := s.CheckLimits(s.Size(), s.Depth()); err != nil {
		t.Errorf("CheckLimits(size, depth) = %v", err)
	}
	if _, err := ParseLimits(deep, Limits{MaxDepth: 1000}); err != nil {
		t.Errorf("limits above the hard cap are clamped, not refused: %v", err)
	}
	if _, err := ParseLimits([]byte(nest(HardMaxDepth+1, `{}`)), Limits{MaxDepth: 1000}); err == nil {
		t.Error("depth beyond the hard cap accepted")
	}
	big := []byte(`{"description":"` + strings.Repeat("é", 9000) + `"}`)
	if _, err := Parse(big); err == nil {
		t.Error("18 kB of UTF-8 accepted (size counts UTF-8 bytes)")
	}
	if s, err := ParseLimits(big, Limits{MaxBytes: 20000}); err != nil || s.Size() != len(`{"description":""}`)+18000 {
		t.Errorf("ParseLimits(big) = %v, %v", s, err)
	}
}

func TestSchemaJSON(t *testing.T) {
	raw := `{
		"type": "object",
		"title": "T",
		"properties": {"b": {"type": "integer", "minimum": 1.0, "default": 10}, "a": {"type": "string", "description": "<&>\u2028"}},
		"required": ["b", "a"],
		"additionalProperties": false,
		"examples": [{"b": 1e21, "a": "x"}],
		"$defs": {"u": {"enum": [0.1, -0, 1e-7]}}
	}`
	s, err := Parse([]byte(raw))
	if err != nil {
		t.Fatal(err)
	}
	// As authored (semantics §10.8): the author's key order, numbers and
	// escapes, without the whitespace.
	want := `{"type":"object","title":"T","properties":{"b":{"type":"integer","minimum":1.0,"default":10},"a":{"type":"string","description":"<&>\u2028"}},"required":["b","a"],"additionalProperties":false,"examples":[{"b":1e21,"a":"x"}],"$defs":{"u":{"enum":[0.1,-0,1e-7]}}}`
	if s.JSON() != want {
		t.Errorf("JSON() =\n%s\nwant\n%s", s.JSON(), want)
	}
	if s.Size() != len(want) {
		t.Errorf("Size() = %d, want %d", s.Size(), len(want))
	}
	if !s.IsObject() {
		t.Error("IsObject() = false")
	}
	var b strings.Builder
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(struct {
		S *Schema `json:"s"`
	}{s}); err != nil || b.String() != `{"s":`+want+"}\n" {
		t.Errorf("json.Marshal = %s, %v", b.String(), err)
	}
	for _, raw := range []string{`{"type":["object","null"]}`, `{"type":["object"]}`, `{"$defs":{"o":{"type":"object"}},"$ref":"#/$defs/o"}`, `{}`} {
		s, err := Parse([]byte(raw))
		if err != nil {
			t.Fatal(err)
		}
		if s.IsObject() {
			t.Errorf("IsObject() = true for %s", raw)
		}
	}
}

// forbiddenKeywords are keywords outside the subset, each with a value
// that would be well-formed in full JSON Schema.
var forbiddenKeywords = map[string]any{
	"oneOf":                 []any{map[string]any{}},
	"allOf":                 []any{map[string]any{}},
	"not":                   map[string]any{},
	"if":                    map[string]any{},
	"then":                  map[string]any{},
	"else":                  map[string]any{},
	"patternProperties":     map[string]any{},
	"dependentRequired":     map[string]any{},
	"dependentSchemas":      map[string]any{},
	"unevaluatedProperties": false,
	"unevaluatedItems":      false,
	"prefixItems":           []any{},
	"contains":              map[string]any{},
	"propertyNames":         map[string]any{},
	"minProperties":         1.0,
	"maxProperties":         1.0,
	"additionalItems":       false,
	"definitions":           map[string]any{},
	"$anchor":               "a",
	"$dynamicRef":           "#a",
	"$comment":              "c",
	"readOnly":              true,
	"writeOnly":             true,
	"contentMediaType":      "text/plain",
	"minContains":           1.0,
	"x-extension":           "x",
}

// schemaGen generates schemas of the subset. It records the pointer of
// every schema node so that properties can mutate them.
type schemaGen struct {
	defs  []string
	nodes []genNode
}

// genNode is a generated schema node and its pointer.
type genNode struct {
	path  string
	m     map[string]any
	depth int
}

// jsonValue draws a small arbitrary JSON value.
func jsonValue(t *rapid.T, depth int, label string) any {
	max := 5
	if depth <= 0 {
		max = 3
	}
	switch rapid.IntRange(0, max).Draw(t, label+".kind") {
	case 0:
		return nil
	case 1:
		return rapid.Bool().Draw(t, label+".bool")
	case 2:
		return float64(rapid.IntRange(-1000, 1000).Draw(t, label+".int"))
	case 3:
		return rapid.StringN(0, 8, -1).Draw(t, label+".str")
	case 4:
		n := rapid.IntRange(0, 3).Draw(t, label+".len")
		a := make([]any, n)
		for i := range a {
			a[i] = jsonValue(t, depth-1, label)
		}
		return a
	default:
		n := rapid.IntRange(0, 3).Draw(t, label+".len")
		m := map[string]any{}
		for range n {
			m[rapid.StringN(1, 4, -1).Draw(t, label+".key")] = jsonValue(t, depth-1, label)
		}
		return m
	}
}

// node draws a schema node at depth (of at most maxDepth).
func (g *schemaGen) node(t *rapid.T, path string, depth, maxDepth int) map[string]any {
	m := map[string]any{}
	g.nodes = append(g.nodes, genNode{path, m, depth})
	typeNames := []string{"object", "array", "string", "number", "integer", "boolean", "null"}
	kws := rapid.SliceOfNDistinct(rapid.SampledFrom([]string{
		"type", "enum", "const", "properties", "required", "additionalProperties", "items",
		"minItems", "maxItems", "uniqueItems", "minLength", "maxLength", "pattern", "format",
		"minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "multipleOf", "anyOf",
		"description", "default", "examples", "title", "deprecated", "$ref",
	}), 0, 6, rapid.ID).Draw(t, "keywords")
	for _, k := range kws {
		child := func(kp string) map[string]any {
			return g.node(t, kp, depth+1, maxDepth)
		}
		nested := depth < maxDepth
		switch k {
		case "type":
			if rapid.Bool().Draw(t, "typeArray") {
				ts := rapid.SliceOfNDistinct(rapid.SampledFrom(typeNames), 1, 3, rapid.ID).Draw(t, "types")
				a := make([]any, len(ts))
				for i, s := range ts {
					a[i] = s
				}
				m[k] = a
			} else {
				m[k] = rapid.SampledFrom(typeNames).Draw(t, "type")
			}
		case "enum":
			n := rapid.IntRange(1, 3).Draw(t, "enumLen")
			a := make([]any, n)
			for i := range a {
				a[i] = jsonValue(t, 2, "enum")
			}
			m[k] = a
		case "const", "default":
			m[k] = jsonValue(t, 2, k)
		case "examples":
			m[k] = []any{jsonValue(t, 2, k)}
		case "properties":
			if !nested {
				continue
			}
			props := map[string]any{}
			for _, name := range rapid.SliceOfNDistinct(rapid.StringN(1, 6, -1), 0, 3, rapid.ID).Draw(t, "propNames") {
				props[name] = child(path + "/properties/" + escapePointer(name))
			}
			m[k] = props
		case "required":
			names := rapid.SliceOfNDistinct(rapid.StringN(1, 6, -1), 0, 3, rapid.ID).Draw(t, "required")
			a := make([]any, len(names))
			for i, s := range names {
				a[i] = s
			}
			m[k] = a
		case "additionalProperties", "uniqueItems", "deprecated":
			m[k] = rapid.Bool().Draw(t, k)
		case "items":
			if nested {
				m[k] = child(path + "/items")
			}
		case "minItems", "maxItems", "minLength", "maxLength":
			m[k] = float64(rapid.IntRange(0, 20).Draw(t, k))
		case "pattern":
			m[k] = rapid.SampledFrom([]string{"^a", "[0-9]+", "x|y", "^$", `\d{2}-\w`, "(?i)abc"}).Draw(t, k)
		case "format":
			m[k] = rapid.SampledFrom([]string{"date-time", "date", "uuid", "email", "uri"}).Draw(t, k)
		case "minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum":
			m[k] = rapid.Float64Range(-1e6, 1e6).Draw(t, k)
		case "multipleOf":
			m[k] = rapid.SampledFrom([]float64{0.01, 0.5, 1, 3, 1e3}).Draw(t, k)
		case "anyOf":
			if !nested {
				continue
			}
			n := rapid.IntRange(1, 3).Draw(t, "anyOfLen")
			a := make([]any, n)
			for i := range a {
				a[i] = child(path + "/anyOf/" + fmt.Sprint(i))
			}
			m[k] = a
		case "description", "title":
			m[k] = rapid.String().Draw(t, k)
		case "$ref":
			if len(g.defs) > 0 {
				m[k] = "#/$defs/" + escapePointer(rapid.SampledFrom(g.defs).Draw(t, "ref"))
			}
		}
	}
	return m
}

// root draws a whole schema document: $defs without references first,
// then a root that may refer to them.
func (g *schemaGen) root(t *rapid.T, maxDepth int) map[string]any {
	defs := map[string]any{}
	if maxDepth > 0 && rapid.Bool().Draw(t, "hasDefs") {
		for _, name := range rapid.SliceOfNDistinct(rapid.StringN(1, 5, -1), 1, 3, rapid.ID).Draw(t, "defNames") {
			defs[name] = g.node(t, "/$defs/"+escapePointer(name), 1, maxDepth)
			g.defs = append(g.defs, name)
		}
	}
	root := g.node(t, "", 0, maxDepth)
	if len(defs) > 0 {
		root["$defs"] = defs
	}
	return root
}

// AS-SCHEMA-003: schemas built only from allow-listed keywords within the
// limits are accepted; a forbidden keyword anywhere, or nesting beyond
// depth 8, is rejected.
func TestSubsetProperty_AS_SCHEMA_003(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		var g schemaGen
		doc := g.root(t, rapid.IntRange(0, DefaultMaxDepth).Draw(t, "maxDepth"))
		raw, err := json.Marshal(doc)
		if err != nil {
			t.Fatal(err)
		}
		s, err := ParseLimits(raw, Limits{MaxBytes: HardMaxBytes})
		if err != nil {
			t.Fatalf("allow-listed schema rejected: %v\n%s", err, raw)
		}
		if s.Depth() > DefaultMaxDepth {
			t.Fatalf("depth %d", s.Depth())
		}
		if s.Size() <= DefaultMaxBytes {
			if _, err := Parse(raw); err != nil {
				t.Fatalf("Parse: %v", err)
			}
		}
		// The canonical text parses back to the same schema.
		s2, err := ParseLimits([]byte(s.JSON()), Limits{MaxBytes: HardMaxBytes})
		if err != nil || s2.JSON() != s.JSON() || s2.Depth() != s.Depth() {
			t.Fatalf("re-parse: %v", err)
		}

		switch rapid.IntRange(0, 1).Draw(t, "mutation") {
		case 0:
			// A forbidden keyword at any node.
			at := rapid.SampledFrom(g.nodes).Draw(t, "at")
			kw := rapid.SampledFrom(sortedKeys(forbiddenKeywords)).Draw(t, "forbidden")
			at.m[kw] = forbiddenKeywords[kw]
			raw, _ := json.Marshal(doc)
			_, err := ParseLimits(raw, Limits{MaxBytes: HardMaxBytes})
			var se *Error
			if !errors.As(err, &se) {
				t.Fatalf("forbidden %q at %q accepted: %v", kw, at.path, err)
			}
			if se.Keyword != kw || se.Path != at.path+"/"+escapePointer(kw) {
				t.Fatalf("forbidden %q at %q: got %v", kw, at.path, err)
			}
		case 1:
			// Nesting beyond depth 8 below any node.
			at := rapid.SampledFrom(g.nodes).Draw(t, "at")
			extra := DefaultMaxDepth - at.depth + rapid.IntRange(0, 3).Draw(t, "extra")
			var deep any = map[string]any{}
			for range extra {
				deep = map[string]any{"items": deep}
			}
			at.m["items"] = deep
			raw, _ := json.Marshal(doc)
			_, err := ParseLimits(raw, Limits{MaxBytes: HardMaxBytes})
			var se *Error
			if !errors.As(err, &se) || se.Keyword != "" || !strings.Contains(se.Reason, "levels deep") {
				t.Fatalf("nesting %d below %q (depth %d): got %v", extra+1, at.path, at.depth, err)
			}
		}
	})
}
