package schema

import (
	"encoding/json"
	"fmt"
	"math"
	"reflect"
	"strings"
	"testing"
	"time"
)

// mustParse parses a schema with generous limits or fails the test.
func mustParse(t testing.TB, raw string) *Schema {
	t.Helper()
	s, err := ParseLimits([]byte(raw), Limits{MaxBytes: HardMaxBytes, MaxDepth: HardMaxDepth})
	if err != nil {
		t.Fatalf("Parse(%s): %v", raw, err)
	}
	return s
}

// decode decodes JSON text into an any, as the surface does.
func decode(t testing.TB, text string) any {
	t.Helper()
	var v any
	if err := json.Unmarshal([]byte(text), &v); err != nil {
		t.Fatalf("decode %s: %v", text, err)
	}
	return v
}

// ok is the expectation of no issues.
var ok []Issue

// iss builds an expected issue list from path/message pairs.
func iss(pm ...string) []Issue {
	var out []Issue
	for i := 0; i < len(pm); i += 2 {
		out = append(out, Issue{Path: pm[i], Message: pm[i+1]})
	}
	return out
}

func TestValidateKeywords(t *testing.T) {
	tests := []struct {
		name, schema, value string
		want                []Issue
	}{
		// type
		{"type string ok", `{"type":"string"}`, `"x"`, ok},
		{"type string bad", `{"type":"string"}`, `1`, iss("", "expected string")},
		{"type object", `{"type":"object"}`, `[]`, iss("", "expected object")},
		{"type array", `{"type":"array"}`, `{}`, iss("", "expected array")},
		{"type boolean", `{"type":"boolean"}`, `"true"`, iss("", "expected boolean")},
		{"type null", `{"type":"null"}`, `0`, iss("", "expected null")},
		{"type number ok", `{"type":"number"}`, `1.5`, ok},
		{"type number bad", `{"type":"number"}`, `"1"`, iss("", "expected number")},
		{"type integer ok", `{"type":"integer"}`, `3`, ok},
		{"type integer 1.0", `{"type":"integer"}`, `1.0`, ok},
		{"type integer 1e2", `{"type":"integer"}`, `1e2`, ok},
		{"type integer bad", `{"type":"integer"}`, `1.5`, iss("", "expected integer")},
		{"type nullable null", `{"type":["string","null"]}`, `null`, ok},
		{"type nullable bad", `{"type":["string","null"]}`, `1`, iss("", "expected string or null")},
		{"type three", `{"type":["integer","boolean","null"]}`, `"x"`, iss("", "expected integer, boolean or null")},
		{"type number accepts integer", `{"type":["number"]}`, `7`, ok},
		// const and enum
		{"const ok", `{"const":{"a":[1,"x"],"b":null}}`, `{"b":null,"a":[1.0,"x"]}`, ok},
		{"const bad", `{"const":"a"}`, `"b"`, iss("", "must equal the constant value")},
		{"const -0", `{"const":0}`, `-0`, ok},
		{"const null", `{"const":null}`, `false`, iss("", "must equal the constant value")},
		{"const array order", `{"const":[1,2]}`, `[2,1]`, iss("", "must equal the constant value")},
		{"const object extra", `{"const":{"a":1}}`, `{"a":1,"b":2}`, iss("", "must equal the constant value")},
		{"enum ok", `{"enum":["a",2,null]}`, `2`, ok},
		{"enum null", `{"enum":["a",2,null]}`, `null`, ok},
		{"enum bad", `{"enum":["a",2,null]}`, `"2"`, iss("", "must be one of the allowed values")},
		{"enum stops node", `{"enum":["a"],"type":"integer"}`, `"b"`, iss("", "must be one of the allowed values")},
		// anyOf
		{"anyOf ok", `{"anyOf":[{"type":"string"},{"type":"integer"}]}`, `3`, ok},
		{"anyOf bad", `{"anyOf":[{"type":"string"},{"type":"integer"}]}`, `true`, iss("", "does not match any allowed shape")},
		{"anyOf discriminated", `{"anyOf":[{"type":"object","properties":{"k":{"const":"a"},"x":{"type":"string"}},"required":["k","x"]},{"type":"object","properties":{"k":{"const":"b"}},"required":["k"]}]}`, `{"k":"a","x":1}`, iss("", "does not match any allowed shape")},
		{"anyOf then type", `{"anyOf":[{"minLength":2}],"type":"string"}`, `5`, iss("", "expected string")},
		// strings
		{"minLength ok", `{"minLength":2}`, `"ab"`, ok},
		{"minLength bad", `{"minLength":2}`, `"a"`, iss("", "must be at least 2 characters")},
		{"maxLength bad", `{"maxLength":2}`, `"abc"`, iss("", "must be at most 2 characters")},
		{"length utf16 astral", `{"maxLength":1}`, `"😀"`, iss("", "must be at most 1 characters")},
		{"length utf16 astral ok", `{"minLength":2,"maxLength":2}`, `"😀"`, ok},
		{"length utf16 bmp", `{"maxLength":1}`, `"é"`, ok},
		{"length ignores non-strings", `{"minLength":5}`, `1`, ok},
		{"pattern ok", `{"pattern":"b+"}`, `"abbc"`, ok},
		{"pattern anchored", `{"pattern":"^b"}`, `"abbc"`, iss("", "must match the pattern")},
		{"string all failures", `{"minLength":5,"pattern":"^z","format":"uuid"}`, `"ab"`, iss("", "must be at least 5 characters", "", "must match the pattern", "", "must be a UUID")},
		// numbers
		{"minimum ok", `{"minimum":1}`, `1`, ok},
		{"minimum bad", `{"minimum":1}`, `0.5`, iss("", "must be >= 1")},
		{"maximum bad", `{"maximum":1.5}`, `2`, iss("", "must be <= 1.5")},
		{"exclusiveMinimum bad", `{"exclusiveMinimum":1}`, `1`, iss("", "must be > 1")},
		{"exclusiveMaximum bad", `{"exclusiveMaximum":1}`, `1`, iss("", "must be < 1")},
		{"exclusiveMaximum ok", `{"exclusiveMaximum":1}`, `0.999`, ok},
		{"multipleOf ok", `{"multipleOf":0.1}`, `0.3`, ok},
		{"multipleOf int ok", `{"multipleOf":3}`, `-9`, ok},
		{"multipleOf bad", `{"multipleOf":0.1}`, `0.35`, iss("", "must be a multiple of 0.1")},
		{"bounds big", `{"maximum":9007199254740991}`, `9007199254740992`, iss("", "must be <= 9007199254740991")},
		{"bounds tiny", `{"minimum":1e-7}`, `0`, iss("", "must be >= 1e-7")},
		{"bounds huge", `{"maximum":1e21}`, `1e22`, iss("", "must be <= 1e+21")},
		{"number all failures", `{"minimum":5,"multipleOf":2}`, `3`, iss("", "must be >= 5", "", "must be a multiple of 2")},
		{"bounds ignore strings", `{"minimum":5}`, `"1"`, ok},
		// arrays
		{"minItems bad", `{"minItems":1}`, `[]`, iss("", "must have at least 1 items")},
		{"maxItems bad", `{"maxItems":1}`, `[1,2]`, iss("", "must have at most 1 items")},
		{"uniqueItems ok", `{"uniqueItems":true}`, `[1,"1",[1],{"a":1},{"a":"1"},null,true,false]`, ok},
		{"uniqueItems numbers", `{"uniqueItems":true}`, `[1,1.0]`, iss("", "must not contain duplicate items")},
		{"uniqueItems objects", `{"uniqueItems":true}`, `[{"a":1,"b":2},{"b":2,"a":1}]`, iss("", "must not contain duplicate items")},
		{"uniqueItems false", `{"uniqueItems":false}`, `[1,1]`, ok},
		{"items", `{"items":{"type":"string"}}`, `["a",1,"b",2]`, iss("[1]", "expected string", "[3]", "expected string")},
		{"array all failures", `{"maxItems":1,"uniqueItems":true,"items":{"type":"integer"}}`, `["a","a"]`, iss("", "must have at most 1 items", "", "must not contain duplicate items", "[0]", "expected integer", "[1]", "expected integer")},
		// objects
		{"required ok", `{"required":["a"]}`, `{"a":null}`, ok},
		{"required bad", `{"required":["a","b"]}`, `{"b":1}`, iss("a", `missing required property "a"`)},
		{"required ignores non-objects", `{"required":["a"]}`, `[]`, ok},
		{"properties", `{"properties":{"a":{"type":"string"},"b":{"type":"integer"}}}`, `{"a":1,"b":"x","c":true}`, iss("a", "expected string", "b", "expected integer")},
		{"additionalProperties false", `{"properties":{"a":{}},"additionalProperties":false}`, `{"a":1,"z":2,"b/c":3,"m~n":4}`, iss("b/c", "unexpected property", "m~n", "unexpected property", "z", "unexpected property")},
		{"additionalProperties true", `{"properties":{"a":{}},"additionalProperties":true}`, `{"z":2}`, ok},
		{"object order", `{"properties":{"a":{"type":"string"}},"required":["r"],"additionalProperties":false}`, `{"a":1,"x":1}`, iss("r", `missing required property "r"`, "a", "expected string", "x", "unexpected property")},
		// $ref
		{"ref ok", `{"$defs":{"s":{"type":"string"}},"properties":{"a":{"$ref":"#/$defs/s"}}}`, `{"a":"x"}`, ok},
		{"ref bad", `{"$defs":{"s":{"type":"string"}},"properties":{"a":{"$ref":"#/$defs/s"}}}`, `{"a":1}`, iss("a", "expected string")},
		{"ref then siblings", `{"$defs":{"s":{"type":"string"}},"$ref":"#/$defs/s","minLength":3}`, `"ab"`, iss("", "must be at least 3 characters")},
		{"ref stops node", `{"$defs":{"s":{"type":"string"}},"$ref":"#/$defs/s","const":"a"}`, `1`, iss("", "expected string")},
		{"recursive", `{"$defs":{"n":{"type":"object","properties":{"c":{"type":"array","items":{"$ref":"#/$defs/n"}},"v":{"type":"integer"}},"additionalProperties":false}},"$ref":"#/$defs/n"}`, `{"c":[{"c":[{"v":1},{"v":"x","w":0}]}]}`, iss("c[0].c[1].v", "expected integer", "c[0].c[1].w", "unexpected property")},
		// default is never applied, annotations do nothing
		{"default not applied", `{"type":"object","properties":{"a":{"default":1}},"required":["a"]}`, `{}`, iss("a", `missing required property "a"`)},
		{"annotations", `{"title":"t","description":"d","examples":[1],"deprecated":true}`, `"anything"`, ok},
		// paths
		{"deep path", `{"properties":{"ids":{"items":{"properties":{"x":{"type":"null"}}}}}}`, `{"ids":[{},{"x":1}]}`, iss("ids[1].x", "expected null")},
		{"empty key path", `{"properties":{"":{"type":"null"}}}`, `{"":1}`, iss("", "expected null")},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := mustParse(t, tc.schema)
			got := s.Validate(decode(t, tc.value))
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("Validate(%s) against %s\n got %q\nwant %q", tc.value, tc.schema, got, tc.want)
			}
			// json.Number input gives the same result.
			dec := json.NewDecoder(strings.NewReader(tc.value))
			dec.UseNumber()
			var v any
			if err := dec.Decode(&v); err != nil {
				t.Fatal(err)
			}
			if got := s.Validate(v); !reflect.DeepEqual(got, tc.want) {
				t.Errorf("with json.Number: got %q", got)
			}
		})
	}
}

func TestValidateFormats(t *testing.T) {
	tests := []struct {
		format string
		valid  []string
		bad    []string
	}{
		{"date-time",
			[]string{"2024-01-02T03:04:05Z", "2024-01-02T03:04:05.123456789Z", "2024-02-29T23:59:59+05:30", "2023-12-31T00:00:00-23:59", "0000-01-01T00:00:00Z", "9999-12-31T23:59:59.1234567891234Z", "2000-02-29T00:00:00Z"},
			[]string{"", "2024-01-02", "2024-01-02T03:04:05", "2024-01-02t03:04:05Z", "2024-01-02T03:04:05z", "2024-01-02 03:04:05Z", "2024-01-02T03:04:05.Z", "2024-01-02T03:04Z", "2024-1-02T03:04:05Z", "2024-01-02T03:04:05+0100", "2024-01-02T03:04:05+01", "2024-13-01T00:00:00Z", "2024-00-01T00:00:00Z", "2023-02-29T00:00:00Z", "1900-02-29T00:00:00Z", "2024-04-31T00:00:00Z", "2024-01-00T00:00:00Z", "2024-01-01T24:00:00Z", "2024-01-01T00:60:00Z", "2024-01-01T00:00:60Z", "2024-01-01T00:00:00+24:00", "2024-01-01T00:00:00+00:60", "2024-01-01T00:00:00,5Z", "２０２４-01-01T00:00:00Z", "2024-01-01T00:00:00Z ", " 2024-01-01T00:00:00Z", "2024-01-01T00:00:00ZZ"}},
		{"date",
			[]string{"2024-01-02", "0000-99-99"},
			[]string{"", "2024-1-02", "2024-01-02T00:00:00Z", "24-01-02", "2024/01/02", "2024-01-0a", "2024-01-02 "}},
		{"uuid",
			[]string{"123e4567-e89b-12d3-a456-426614174000", "ABCDEF00-0000-0000-0000-000000000000", "00000000-0000-0000-0000-000000000000"},
			[]string{"", "123e4567e89b12d3a456426614174000", "123e4567-e89b-12d3-a456-42661417400", "123e4567-e89b-12d3-a456-4266141740000", "g23e4567-e89b-12d3-a456-426614174000", "{123e4567-e89b-12d3-a456-426614174000}", "123e4567-e89b-12d3-a456_426614174000"}},
		{"email",
			[]string{"a@b.c", "first.last+tag@example.co.uk", "ü@ñ.é", "a@b..c", "a@.b.c"[0:0] + "x@y.z"},
			[]string{"", "a", "a@b", "@b.c", "a@.c", "a@b.", "a@@b.c", "a@b@c.d", "a b@c.d", "a@b .c", "a@b.c\n", "a\u00a0b@c.d", "a@b\u2003c.d", "a@b.c\ufeff"}},
		{"uri",
			[]string{"https://example.com", "mailto:x@y.z", "urn:isbn:0451450523", "a:", "x+y.z-w:rest"},
			[]string{"", "example.com", "//example.com", "1http://x", ":x", "ht tp://x", "http", "é:x"}},
	}
	for _, tc := range tests {
		s := mustParse(t, `{"format":"`+tc.format+`"}`)
		for _, v := range tc.valid {
			if got := s.Validate(v); got != nil {
				t.Errorf("%s: %q rejected: %v", tc.format, v, got)
			}
		}
		for _, v := range tc.bad {
			got := s.Validate(v)
			if len(got) != 1 || got[0].Path != "" || got[0].Message != formatMessages[formats[tc.format]] {
				t.Errorf("%s: %q: got %v", tc.format, v, got)
			}
		}
	}
	// Formats apply to strings only.
	if got := mustParse(t, `{"format":"email"}`).Validate(1.0); got != nil {
		t.Errorf("format on a number: %v", got)
	}
}

func TestValidateNonJSONValues(t *testing.T) {
	s := mustParse(t, `{"type":"integer","minimum":0}`)
	for _, v := range []any{int(3), int8(3), uint64(3), float32(3), json.Number("3")} {
		if got := s.Validate(v); got != nil {
			t.Errorf("%T: %v", v, got)
		}
	}
	if got := s.Validate(int64(-1)); len(got) != 1 {
		t.Errorf("int64(-1): %v", got)
	}
	for _, v := range []any{struct{}{}, []string{"a"}, map[string]string{}, json.Number("x")} {
		if got := s.Validate(v); len(got) != 1 || got[0].Message != "expected integer" {
			t.Errorf("%T: %v", v, got)
		}
	}
	if got := mustParse(t, `{}`).Validate(struct{}{}); got != nil {
		t.Errorf("{} rejects a Go struct: %v", got)
	}
}

func TestValidateIssueCap(t *testing.T) {
	s := mustParse(t, `{"type":"array","items":{"type":"string"}}`)
	a := make([]any, 100)
	for i := range a {
		a[i] = float64(i)
	}
	got := s.Validate(a)
	if len(got) != MaxIssues {
		t.Fatalf("%d issues, want %d", len(got), MaxIssues)
	}
	if got[MaxIssues-1].Path != fmt.Sprintf("[%d]", MaxIssues-1) {
		t.Errorf("last issue %v", got[MaxIssues-1])
	}
	o := map[string]any{}
	for i := range 50 {
		o[fmt.Sprintf("k%02d", i)] = 1.0
	}
	s = mustParse(t, `{"type":"object","properties":{"a":{}},"additionalProperties":false,"required":["a"]}`)
	got = s.Validate(o)
	if len(got) != MaxIssues || got[0].Message != `missing required property "a"` || got[0].Path != "a" || got[1].Path != "k00" || got[MaxIssues-1].Path != "k18" {
		t.Errorf("issues %v", got)
	}
}

func TestValidateDeepValues(t *testing.T) {
	s := mustParse(t, `{"$defs":{"a":{"type":"array","items":{"$ref":"#/$defs/a"}}},"$ref":"#/$defs/a"}`)
	// Deeper than the path stack kept inside the validator.
	var v any = []any{1.0}
	want := "[0]"
	for range 40 {
		v = []any{v}
		want = "[0]" + want
	}
	got := s.Validate(v)
	if len(got) != 1 || got[0].Path != want || got[0].Message != "expected array" {
		t.Errorf("got %v", got)
	}
	// A cyclic Go value cannot make validation loop.
	cyc := []any{nil}
	cyc[0] = cyc
	got = s.Validate(cyc)
	if len(got) != 1 || got[0].Message != "value is nested too deeply" {
		t.Errorf("cyclic: got %d issues %.1v", len(got), got)
	}
}

func TestValidateUniqueItemsLarge(t *testing.T) {
	s := mustParse(t, `{"uniqueItems":true}`)
	a := make([]any, 200)
	for i := range a {
		a[i] = map[string]any{"i": float64(i), "s": []any{"x", float64(i % 7)}}
	}
	if got := s.Validate(a); got != nil {
		t.Fatalf("distinct items: %v", got)
	}
	a[150] = map[string]any{"s": []any{"x", 3.0}, "i": 10.0}
	if got := s.Validate(a); len(got) != 1 {
		t.Fatalf("duplicate not found: %v", got)
	}
	b := make([]any, 100)
	for i := range b {
		b[i] = float64(i)
	}
	b[99] = math.Copysign(0, -1) // a real negative zero
	b[0] = 0.0
	if got := s.Validate(b); len(got) != 1 {
		t.Fatalf("-0 and 0 are equal: %v", got)
	}
}

// Issue messages are fixed templates: they never repeat input values,
// however distinctive.
func TestIssueMessagesNeverEchoInput(t *testing.T) {
	const secret = "SECRET-internal_url-7f3a"
	schemas := []string{
		`{"type":"integer"}`,
		`{"const":"a"}`,
		`{"enum":["a","b"]}`,
		`{"anyOf":[{"type":"integer"},{"type":"null"}]}`,
		`{"minLength":100}`,
		`{"maxLength":2}`,
		`{"pattern":"^[0-9]+$"}`,
		`{"format":"date-time"}`,
		`{"format":"date"}`,
		`{"format":"uuid"}`,
		`{"format":"email"}`,
		`{"format":"uri"}`,
		`{"type":"object","properties":{"x":{"type":"integer"}},"required":["x"],"additionalProperties":false}`,
		`{"type":"array","items":{"type":"integer"},"maxItems":1,"uniqueItems":true}`,
	}
	values := []string{
		`"` + secret + `"`,
		`{"` + secret + `":"` + secret + `","x":"` + secret + `"}`,
		`["` + secret + `","` + secret + `"]`,
		`{"x":{"` + secret + `":1}}`,
	}
	n := 0
	for _, raw := range schemas {
		s := mustParse(t, raw)
		for _, val := range values {
			for _, is := range s.Validate(decode(t, val)) {
				n++
				if strings.Contains(is.Message, "SECRET") || strings.Contains(is.Message, "7f3a") {
					t.Errorf("message %q echoes the input", is.Message)
				}
			}
		}
	}
	if n < len(schemas) {
		t.Fatalf("only %d issues checked", n)
	}
}

func TestValidateDeterministic(t *testing.T) {
	s := mustParse(t, `{"type":"object","properties":{"a":{"type":"string"},"b":{"type":"integer"}},"additionalProperties":false}`)
	v := decode(t, `{"z":1,"y":2,"x":3,"w":4,"a":1,"b":"x","v":5,"u":6}`)
	first := s.Validate(v)
	for range 50 {
		if got := s.Validate(v); !reflect.DeepEqual(got, first) {
			t.Fatalf("nondeterministic: %v vs %v", got, first)
		}
	}
}

func TestValidateAllocationFree(t *testing.T) {
	s, err := For[struct {
		IDs  []string `json:"ids"`
		Mode string   `json:"mode,omitempty"`
		N    *int     `json:"n,omitempty"`
	}]()
	if err != nil {
		t.Fatal(err)
	}
	v := decode(t, `{"ids":["a","b"],"mode":"x","n":3}`)
	if allocs := testing.AllocsPerRun(100, func() {
		if s.Validate(v) != nil {
			t.Fatal("invalid")
		}
	}); allocs != 0 {
		t.Errorf("%v allocations per valid Validate", allocs)
	}
	f := mustParse(t, `{"type":"object","properties":{"t":{"format":"date-time"},"u":{"format":"uuid"},"e":{"format":"email"},"p":{"pattern":"^a+$"},"k":{"enum":[1,"x"]},"a":{"anyOf":[{"type":"null"},{"type":"string"}]}}}`)
	v = decode(t, `{"t":"2024-01-02T03:04:05+01:00","u":"123e4567-e89b-12d3-a456-426614174000","e":"a@b.c","p":"aaa","k":"x","a":"s"}`)
	if allocs := testing.AllocsPerRun(100, func() {
		if f.Validate(v) != nil {
			t.Fatal("invalid")
		}
	}); allocs != 0 {
		t.Errorf("%v allocations per valid Validate with formats", allocs)
	}
}

// anyOf branches that recurse through $ref cannot make validation take
// exponential time.
func TestValidateWorkBounded(t *testing.T) {
	s := mustParse(t, `{"$defs":{"n":{"anyOf":[{"type":"array","items":{"$ref":"#/$defs/n"}},{"type":"array","items":{"$ref":"#/$defs/n"}},{"type":"null"}]}},"$ref":"#/$defs/n"}`)
	var v any = 1.0
	for range 40 {
		v = []any{v}
	}
	start := time.Now()
	got := s.Validate(v)
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("took %v", d)
	}
	want := iss("", "value is too complex to validate")
	if !reflect.DeepEqual(got, want) {
		t.Errorf("got %v", got)
	}
	// A legitimate deep value is fine.
	var ok any
	for range 40 {
		ok = []any{ok}
	}
	if got := s.Validate(ok); got != nil {
		t.Errorf("valid value: %v", got)
	}
}
