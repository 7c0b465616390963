package canonical

import (
	"encoding/json"
	"errors"
	"math"
	"strings"
	"testing"
)

// TestVectors checks the vectors of semantics.md §5 byte for byte, through
// Marshal (decoded Go values), Canonicalize (JSON text) and Digest.
func TestVectors(t *testing.T) {
	// Hashes of raw strings: vectors 1, 2 and 9.
	for _, tc := range []struct {
		name, s, want string
	}{
		{"1 empty", "", "cbf29ce484222325"},
		{"2 a", "a", "af63dc4c8601ec8c"},
		{"9 e-acute", "é", "af64644c8602d3a4"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := Hex(FNV1a64(tc.s)); got != tc.want {
				t.Errorf("FNV1a64(%q) = %s, want %s", tc.s, got, tc.want)
			}
			if got := Hex(FNV1a64Bytes([]byte(tc.s))); got != tc.want {
				t.Errorf("FNV1a64Bytes(%q) = %s, want %s", tc.s, got, tc.want)
			}
		})
	}
	// Vector 9: hashing UTF-8 bytes instead of UTF-16 units would give this.
	if got := Hex(FNV1a64("é")); got == "0ac21707b7181e01" {
		t.Errorf("FNV1a64(é) = %s, the UTF-8 byte hash", got)
	}

	for _, tc := range []struct {
		name  string
		value any    // decoded Go value; nil with noValue set means none
		text  string // JSON text, or "" for none
		want  string
		fnv   string // "" if the vector states none
	}{
		{
			name:  "3 nested sort",
			value: map[string]any{"b": 1.0, "a": map[string]any{"y": []any{1.0, 2.0}, "x": "s"}},
			text:  `{"b":1,"a":{"y":[1,2],"x":"s"}}`,
			want:  `{"a":{"x":"s","y":[1,2]},"b":1}`,
			fnv:   "894aef75227285cc",
		},
		{
			// In Go, "absent" is a key that is not in the map: Go maps have
			// no undefined, so {a:1,gone:undefined} is just {a:1}.
			name:  "4 absent member",
			value: map[string]any{"a": 1},
			text:  `{"a":1}`,
			want:  `{"a":1}`,
			fnv:   "9c3e82dd6fcae8b1",
		},
		{
			// An absent array element is null in JavaScript too.
			name:  "5 array with null",
			value: []any{1, nil, 3},
			text:  `[1,null,3]`,
			want:  `[1,null,3]`,
		},
		{
			name:  "5 negative zero",
			value: math.Copysign(0, -1),
			text:  `-0`,
			want:  `0`,
		},
		{
			name:  "5 negative zero member",
			value: map[string]any{"n": math.Copysign(0, -1)},
			text:  `{"n":-0}`,
			want:  `{"n":0}`,
		},
		{
			name:  "6 astral before U+FFFD",
			value: map[string]any{"😀": 1, "\uFFFD": 2},
			text:  `{"\uFFFD":2,"😀":1}`,
			want:  `{"😀":1,"�":2}`,
		},
		{
			name:  "7 numbers",
			value: []any{1e21, 0.1, 1.5e-7, 100.0},
			text:  `[1e21,0.1,1.5e-7,100]`,
			want:  `[1e+21,0.1,1.5e-7,100]`,
		},
		{
			name: "8 fingerprint",
			value: map[string]any{
				"capabilityId":   "view:devices.table.selectRows",
				"input":          map[string]any{"ids": []any{"d1"}, "mode": "replace"},
				"instanceId":     nil,
				"registrationId": nil,
				"surfaceVersion": nil,
				"confirmationId": nil,
			},
			text: `{"capabilityId":"view:devices.table.selectRows","registrationId":null,"instanceId":null,` +
				`"surfaceVersion":null,"input":{"mode":"replace","ids":["d1"]},"confirmationId":null}`,
			want: `{"capabilityId":"view:devices.table.selectRows","confirmationId":null,"input":{"ids":["d1"],"mode":"replace"},"instanceId":null,"registrationId":null,"surfaceVersion":null}`,
			fnv:  "d07828fbd19f720e",
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := Marshal(tc.value)
			if err != nil || string(got) != tc.want {
				t.Errorf("Marshal = %s, %v; want %s", got, err, tc.want)
			}
			got, err = Canonicalize([]byte(tc.text))
			if err != nil || string(got) != tc.want {
				t.Errorf("Canonicalize(%s) = %s, %v; want %s", tc.text, got, err, tc.want)
			}
			if tc.fnv == "" {
				return
			}
			if h := Hex(FNV1a64(tc.want)); h != tc.fnv {
				t.Errorf("FNV1a64(%s) = %s, want %s", tc.want, h, tc.fnv)
			}
			if d, err := Digest(tc.value); err != nil || d != tc.fnv {
				t.Errorf("Digest = %s, %v; want %s", d, err, tc.fnv)
			}
		})
	}
	// Vector 6 with the key escaped in the text as well.
	got, err := Canonicalize([]byte(`{"😀":1,"\ufffd":2}`))
	if err != nil || string(got) != `{"😀":1,"�":2}` {
		t.Errorf("Canonicalize(vector 6, escaped) = %s, %v", got, err)
	}
}

// TestCrossImplementationRows checks the 32 kB cross-implementation vector.
func TestCrossImplementationRows(t *testing.T) {
	b, err := Marshal(rowsValue(400))
	if err != nil {
		t.Fatal(err)
	}
	if got := Hex(FNV1a64Bytes(b)); got != rowsDigest32KB {
		t.Errorf("fnv1a64(canonical(rows)) = %s, want %s", got, rowsDigest32KB)
	}
	if got, err := Digest(rowsValue(400)); err != nil || got != rowsDigest32KB {
		t.Errorf("Digest(rows) = %s, %v; want %s", got, err, rowsDigest32KB)
	}
	c, err := Canonicalize(rowsJSON(400))
	if err != nil || string(c) != string(b) {
		t.Errorf("Canonicalize(rows text) differs from Marshal(rows): %v", err)
	}
}

func TestStringEscapes(t *testing.T) {
	for _, tc := range []struct {
		name, in, want string
	}{
		{"plain", "abc", `"abc"`},
		{"empty", "", `""`},
		{"quote and backslash", `a"b\c`, `"a\"b\\c"`},
		{"short escapes", "\b\f\n\r\t", `"\b\f\n\r\t"`},
		{"other controls", "\x00\x01\x1b\x1f", `"\u0000\u0001\u001b\u001f"`},
		{"html raw", "<a href='x'>&amp;</a>", `"<a href='x'>&amp;</a>"`},
		{"slash raw", "a/b", `"a/b"`},
		{"DEL raw", "\x7f", "\"\x7f\""},
		{"line separators raw", "\u2028\u2029", "\"\u2028\u2029\""},
		{"non-ASCII raw", "é😀\uE000\uFFFF", "\"é😀\uE000\uFFFF\""},
		{"invalid byte", "a\xffb", "\"a\uFFFDb\""},
		{"each invalid byte", "\xe2\x82", "\"\uFFFD\uFFFD\""},
		{"encoded surrogate", "\xed\xa0\x80", "\"\uFFFD\uFFFD\uFFFD\""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := Marshal(tc.in)
			if err != nil || string(got) != tc.want {
				t.Errorf("Marshal(%q) = %s, %v; want %s", tc.in, got, err, tc.want)
			}
			// As a key too.
			got, err = Marshal(map[string]any{tc.in: 1})
			if want := "{" + tc.want + ":1}"; err != nil || string(got) != want {
				t.Errorf("Marshal(key %q) = %s, %v; want %s", tc.in, got, err, want)
			}
			// Through JSON text, raw (invalid UTF-8 kept as is) and as
			// encoding/json writes it (with \u003c etc.).
			raw := `"` + strings.NewReplacer(`\`, `\\`, `"`, `\"`, "\b", `\b`, "\f", `\f`, "\n", `\n`,
				"\r", `\r`, "\t", `\t`, "\x00", `\u0000`, "\x01", `\u0001`, "\x1b", `\u001B`, "\x1f", `\u001f`).Replace(tc.in) + `"`
			if got, err := Canonicalize([]byte(raw)); err != nil || string(got) != tc.want {
				t.Errorf("Canonicalize(%s) = %s, %v; want %s", raw, got, err, tc.want)
			}
			enc, _ := json.Marshal(tc.in)
			if got, err := Canonicalize(enc); err != nil || string(got) != tc.want {
				t.Errorf("Canonicalize(%s) = %s, %v; want %s", enc, got, err, tc.want)
			}
		})
	}
}

func TestNumbers(t *testing.T) {
	// A variable, so that 0.1+0.2 is computed in float64 arithmetic rather
	// than as an exact constant.
	tenth := 0.1
	for _, tc := range []struct {
		name string
		in   any
		want string
	}{
		{"1e-7", 1e-7, "1e-7"},
		{"1e-6", 1e-6, "0.000001"},
		{"just below 1e21", 123456789012345680000.0, "123456789012345680000"},
		{"1e21", 1e21, "1e+21"},
		{"smallest", 5e-324, "5e-324"},
		{"largest", 1.7976931348623157e308, "1.7976931348623157e+308"},
		{"negative largest", -math.MaxFloat64, "-1.7976931348623157e+308"},
		{"negative zero", math.Copysign(0, -1), "0"},
		{"0.1+0.2", tenth + 2*tenth, "0.30000000000000004"},
		{"one point zero", 1.0, "1"},
		{"negative", -1.5, "-1.5"},
		{"1e15", 1e15, "1000000000000000"},
		{"1e20", 1e20, "100000000000000000000"},
		{"2^53+1 json.Number", json.Number("9007199254740993"), "9007199254740992"},
		{"2^53+1 int64", int64(1<<53 + 1), "9007199254740992"},
		{"2^53+1 uint64", uint64(1<<53 + 1), "9007199254740992"},
		{"2^53", int64(1 << 53), "9007199254740992"},
		{"-2^53", int64(-1 << 53), "-9007199254740992"},
		{"max int64", int64(math.MaxInt64), "9223372036854776000"},
		{"min int64", int64(math.MinInt64), "-9223372036854776000"},
		{"max uint64", uint64(math.MaxUint64), "18446744073709552000"},
		{"int", 42, "42"},
		{"int8", int8(-8), "-8"},
		{"int16", int16(16), "16"},
		{"int32", int32(-32), "-32"},
		{"uint", uint(7), "7"},
		{"uint8", uint8(255), "255"},
		{"uint16", uint16(16), "16"},
		{"uint32", uint32(32), "32"},
		{"uintptr", uintptr(9), "9"},
		{"float32 0.1", float32(0.1), "0.1"},
		{"float32 1e-7", float32(1e-7), "1e-7"},
		{"float32 max", float32(math.MaxFloat32), "3.4028235e+38"},
		{"json.Number exponent", json.Number("1E2"), "100"},
		{"json.Number fraction", json.Number("-0.0"), "0"},
		{"json.Number -0", json.Number("-0"), "0"},
		{"json.Number empty", json.Number(""), "0"},
		{"json.Number underflow", json.Number("1e-400"), "0"},
		{"json.Number long", json.Number("123456789012345678901234567890"), "1.2345678901234568e+29"},
		{"bool", true, "true"},
		{"false", false, "false"},
		{"nil", nil, "null"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := Marshal(tc.in)
			if err != nil || string(got) != tc.want {
				t.Errorf("Marshal(%v) = %s, %v; want %s", tc.in, got, err, tc.want)
			}
			// The same through JSON text, where encoding/json accepts it.
			if text, err := json.Marshal(tc.in); err == nil {
				if got, err := Canonicalize(text); err != nil || string(got) != tc.want {
					t.Errorf("Canonicalize(%s) = %s, %v; want %s", text, got, err, tc.want)
				}
			}
		})
	}
	for _, tc := range []struct{ text, want string }{
		{"1E+2", "100"},
		{"1e-7", "1e-7"},
		{"0.0000010", "0.000001"},
		{"-0.0e5", "0"},
		{"123456789012345", "123456789012345"},
		{"1234567890123456789", "1234567890123456800"},
		{"-1234567890123456789", "-1234567890123456800"},
		{"1e-400", "0"},
		{"-1e-400", "0"},
		{"9007199254740993", "9007199254740992"},
		{"1.7976931348623157e308", "1.7976931348623157e+308"},
		{"4.9e-324", "5e-324"},
		{" 12 ", "12"},
	} {
		if got, err := Canonicalize([]byte(tc.text)); err != nil || string(got) != tc.want {
			t.Errorf("Canonicalize(%s) = %s, %v; want %s", tc.text, got, err, tc.want)
		}
	}
}

func TestNonFinite(t *testing.T) {
	for _, v := range []any{
		math.NaN(),
		math.Inf(1),
		math.Inf(-1),
		float32(math.NaN()),
		float32(math.Inf(1)),
		[]any{1, math.NaN()},
		map[string]any{"a": map[string]any{"b": math.Inf(-1)}},
		json.Number("1e400"),
		json.Number("-1e309"),
	} {
		_, err := Marshal(v)
		var ce *Error
		if !errors.As(err, &ce) || ce.Reason != reasonNonFinite {
			t.Errorf("Marshal(%v) error = %v, want non-finite *Error", v, err)
		}
		if _, err := Digest(v); err == nil {
			t.Errorf("Digest(%v) succeeded", v)
		}
	}
	for _, text := range []string{"1e400", "-1e400", `{"a":[1,2e999]}`} {
		_, err := Canonicalize([]byte(text))
		var ce *Error
		if !errors.As(err, &ce) || ce.Reason != reasonNonFinite || ce.Offset < 0 {
			t.Errorf("Canonicalize(%s) error = %v, want non-finite *Error with offset", text, err)
		}
	}
	// A NaN inside a value that goes through encoding/json fails too.
	type withFloat struct{ F float64 }
	if _, err := Marshal(withFloat{math.NaN()}); err == nil {
		t.Error("Marshal(struct with NaN) succeeded")
	}
}

func TestInvalidJSONNumber(t *testing.T) {
	for _, n := range []json.Number{"abc", "1.", "01", "+1", "0x10", "Inf", "NaN", "1e", ".5", "1_000", "1 "} {
		_, err := Marshal(n)
		var ce *Error
		if !errors.As(err, &ce) || ce.Reason != reasonNumberType {
			t.Errorf("Marshal(json.Number(%q)) error = %v, want invalid json.Number", string(n), err)
		}
	}
}

func TestCanonicalizeErrors(t *testing.T) {
	for _, tc := range []struct {
		text   string
		offset int
	}{
		{"", 0},
		{" ", 1},
		{"{", 1},
		{"[", 1},
		{"[1,]", 3},
		{"[1 2]", 3},
		{`{"a"}`, 4},
		{`{"a`, 3},
		{`{"a"`, 4},
		{`{"a":1`, 6},
		{`{"a":1,`, 7},
		{`[1`, 2},
		{`[1,`, 3},
		{`{"a":}`, 5},
		{`{"a":1,}`, 7},
		{`{"a":1 "b":2}`, 7},
		{`{a:1}`, 1},
		{`{"a":1}x`, 7},
		{`1 2`, 2},
		{`01`, 1},
		{`-`, 1},
		{`-a`, 1},
		{`1.`, 2},
		{`1.e5`, 2},
		{`1e`, 2},
		{`1e+`, 3},
		{`.5`, 0},
		{`+1`, 0},
		{`tru`, 3},
		{`trux`, 0},
		{`nul`, 3},
		{`NaN`, 0},
		{`Infinity`, 0},
		{`"abc`, 4},
		{"\"a\x01\"", 2},
		{"\"a\nb\"", 2},
		{`"\x"`, 1},
		{`"\u12"`, 1},
		{`"\u12G4"`, 1},
		{`"\`, 1},
		{`'a'`, 0},
		{"\xef\xbb\xbf1", 0},
		{"\x00", 0},
		{`[1]]`, 3},
		{"\v1", 0},
		{"\u00a01", 0},
	} {
		got, err := Canonicalize([]byte(tc.text))
		var ce *Error
		if !errors.As(err, &ce) {
			t.Errorf("Canonicalize(%q) = %s, %v; want *Error", tc.text, got, err)
			continue
		}
		if got != nil {
			t.Errorf("Canonicalize(%q) returned output %q with an error", tc.text, got)
		}
		if ce.Offset != tc.offset {
			t.Errorf("Canonicalize(%q) error %q: offset %d, want %d", tc.text, ce, ce.Offset, tc.offset)
		}
		if !strings.HasPrefix(ce.Error(), "canonical: ") {
			t.Errorf("error %q lacks the package prefix", ce)
		}
		if json.Valid([]byte(tc.text)) {
			t.Errorf("test bug: %q is valid JSON", tc.text)
		}
	}
}

// TestErrorsDoNotEchoInput checks that error messages carry no input.
func TestErrorsDoNotEchoInput(t *testing.T) {
	const secret = "s3cr3t-value"
	for _, text := range []string{
		`{"` + secret + `":1e999}`,
		`["` + secret + `"`,
		`"` + secret + "\x01\"",
		`{"` + secret + `" 1}`,
	} {
		_, err := Canonicalize([]byte(text))
		if err == nil || strings.Contains(err.Error(), secret) {
			t.Errorf("Canonicalize(%s) error = %v", text, err)
		}
	}
	for _, v := range []any{
		map[string]any{secret: math.NaN()},
		json.Number(secret),
		json.RawMessage(`{"` + secret + `":}`),
		map[string]any{"f": func() {}},
		struct{ C chan string }{},
		marshalerFunc(func() ([]byte, error) { return nil, errors.New(secret) }),
	} {
		_, err := Marshal(v)
		if err == nil || strings.Contains(err.Error(), secret) {
			t.Errorf("Marshal(%T) error = %v", v, err)
		}
	}
}

// marshalerFunc is a json.Marshaler for tests.
type marshalerFunc func() ([]byte, error)

func (f marshalerFunc) MarshalJSON() ([]byte, error) { return f() }

func TestDuplicateKeys(t *testing.T) {
	for _, tc := range []struct{ text, want string }{
		{`{"a":1,"b":2,"a":3}`, `{"a":3,"b":2}`},
		{`{"a":1,"a":2,"a":{"x":[3]}}`, `{"a":{"x":[3]}}`},
		{`{"b":1,"a":2,"b":3,"a":4}`, `{"a":4,"b":3}`},
		{`{"a":1,"\u0061":2}`, `{"a":2}`},
		{"{\"\xff\":1,\"\\ufffd\":2}", `{"�":2}`},
		{`{"z":{"b":1,"b":2},"a":0}`, `{"a":0,"z":{"b":2}}`},
	} {
		got, err := Canonicalize([]byte(tc.text))
		if err != nil || string(got) != tc.want {
			t.Errorf("Canonicalize(%s) = %s, %v; want %s", tc.text, got, err, tc.want)
		}
		var v any
		if err := json.Unmarshal([]byte(tc.text), &v); err != nil {
			t.Fatal(err)
		}
		if m, err := Marshal(v); err != nil || string(m) != tc.want {
			t.Errorf("Marshal(json.Unmarshal(%s)) = %s, %v; want %s", tc.text, m, err, tc.want)
		}
	}
	// Distinct Go keys that differ only in invalid bytes encode to the same
	// key; the one encoding/json would emit last wins, so Marshal agrees
	// with Canonicalize of encoding/json's output and is deterministic.
	m := map[string]any{"\xff": 1, "\xfe": 2, "\uFFFD": 3, "a": 0}
	want := `{"a":0,"�":1}`
	for range 20 {
		got, err := Marshal(m)
		if err != nil || string(got) != want {
			t.Fatalf("Marshal(invalid keys) = %s, %v; want %s", got, err, want)
		}
	}
	enc, _ := json.Marshal(m)
	if got, err := Canonicalize(enc); err != nil || string(got) != want {
		t.Errorf("Canonicalize(%s) = %s, %v; want %s", enc, got, err, want)
	}
	ms := map[string]string{"\xff": "x", "\xfe": "y", "b": "z"}
	if got, err := Marshal(ms); err != nil || string(got) != `{"b":"z","�":"x"}` {
		t.Errorf("Marshal(map[string]string with invalid keys) = %s, %v", got, err)
	}
}

func TestLoneSurrogateEscapes(t *testing.T) {
	for _, tc := range []struct{ text, want string }{
		{`"\ud83d\ude00"`, `"😀"`},
		{`"\uD83D\uDE00"`, `"😀"`},
		{`"\ud800"`, `"�"`},
		{`"\udc00"`, `"�"`},
		{`"\ud800x"`, `"�x"`},
		{`"\ud800\n"`, `"�\n"`},
		{`"\ud800\ud800\udc00"`, `"�𐀀"`},
		{`"\udc00\ud800"`, `"��"`},
		{`"\ud800\u0041"`, `"�A"`},
		{`"\ufffd"`, `"�"`},
		{`"\u0000\u001F\u0020\u007f\u2028"`, "\"\\u0000\\u001f \x7f\u2028\""},
		{`"\/\"\\"`, `"/\"\\"`},
	} {
		got, err := Canonicalize([]byte(tc.text))
		if err != nil || string(got) != tc.want {
			t.Errorf("Canonicalize(%s) = %s, %v; want %s", tc.text, got, err, tc.want)
		}
		// encoding/json decodes the same.
		var s string
		if err := json.Unmarshal([]byte(tc.text), &s); err != nil {
			t.Fatal(err)
		}
		if m, _ := Marshal(s); string(m) != tc.want {
			t.Errorf("Marshal(json.Unmarshal(%s)) = %s, want %s", tc.text, m, tc.want)
		}
	}
}

// nest returns n nested one-element arrays around inner.
func nest(n int, inner any) any {
	v := inner
	for range n {
		v = []any{v}
	}
	return v
}

func TestMaxDepth(t *testing.T) {
	ok := nest(MaxDepth, 1.0)
	if _, err := Marshal(ok); err != nil {
		t.Errorf("Marshal(depth %d) = %v", MaxDepth, err)
	}
	deep := nest(MaxDepth+1, 1.0)
	var ce *Error
	if _, err := Marshal(deep); !errors.As(err, &ce) || ce.Reason != reasonTooDeep || !errors.Is(err, ErrTooDeep) {
		t.Errorf("Marshal(depth %d) error = %v, want too deep", MaxDepth+1, err)
	}
	deepMap := map[string]any{}
	for range MaxDepth {
		deepMap = map[string]any{"a": deepMap}
	}
	if _, err := Marshal(deepMap); !errors.As(err, &ce) || ce.Reason != reasonTooDeep {
		t.Errorf("Marshal(map depth %d) error = %v, want too deep", MaxDepth+1, err)
	}

	text := strings.Repeat("[", MaxDepth) + strings.Repeat("]", MaxDepth)
	if _, err := Canonicalize([]byte(text)); err != nil {
		t.Errorf("Canonicalize(depth %d) = %v", MaxDepth, err)
	}
	text = strings.Repeat(`{"a":`, MaxDepth+1) + "1" + strings.Repeat("}", MaxDepth+1)
	if _, err := Canonicalize([]byte(text)); !errors.As(err, &ce) || ce.Reason != reasonTooDeep || ce.Offset != 5*MaxDepth || !errors.Is(err, ErrTooDeep) {
		t.Errorf("Canonicalize(depth %d) error = %v, want too deep at %d", MaxDepth+1, err, 5*MaxDepth)
	}
	// Depth carries into raw messages, typed slices and fallback values.
	for _, inner := range []any{json.RawMessage(`[1]`), []string{"x"}, map[string]string{}, []int{1}} {
		if _, err := Marshal(nest(MaxDepth-1, inner)); err != nil {
			t.Errorf("Marshal(depth %d with %T) = %v", MaxDepth, inner, err)
		}
		if _, err := Marshal(nest(MaxDepth, inner)); !errors.As(err, &ce) || ce.Reason != reasonTooDeep {
			t.Errorf("Marshal(depth %d with %T) error = %v, want too deep", MaxDepth+1, inner, err)
		}
	}
	// Cycles are caught by the depth limit.
	cyc := []any{nil}
	cyc[0] = cyc
	if _, err := Marshal(cyc); !errors.As(err, &ce) {
		t.Errorf("Marshal(cycle) error = %v, want *Error", err)
	}
	cm := map[string]any{}
	cm["self"] = cm
	if _, err := Digest(cm); !errors.As(err, &ce) {
		t.Errorf("Digest(cycle) error = %v, want *Error", err)
	}
}

type tagged struct {
	Name    string            `json:"name"`
	Count   int               `json:"count,omitempty"`
	Skip    string            `json:"-"`
	Ratio   float32           `json:"ratio"`
	HTML    string            `json:"html"`
	Labels  map[string]string `json:"labels"`
	Nothing *int              `json:"nothing"`
}

func TestFallbackAndTypedValues(t *testing.T) {
	seven := 7
	for _, tc := range []struct {
		name string
		in   any
		want string
	}{
		{"struct", tagged{Name: "n", Skip: "x", Ratio: 0.1, HTML: "<&>\u2028", Labels: map[string]string{"😀": "a", "\uE000": "b"}},
			"{\"html\":\"<&>\u2028\",\"labels\":{\"😀\":\"a\",\"\uE000\":\"b\"},\"name\":\"n\",\"nothing\":null,\"ratio\":0.1}"},
		{"pointer", &seven, "7"},
		{"nil pointer", (*int)(nil), "null"},
		{"typed map", map[string]int{"b": 2, "a": 1}, `{"a":1,"b":2}`},
		{"int keys", map[int]bool{10: true, 9: false}, `{"10":true,"9":false}`},
		{"int slice", []int{3, 1, 2}, `[3,1,2]`},
		{"bytes", []byte("hi"), `"aGk="`},
		{"string slice", []string{"<", "\x00"}, `["<","\u0000"]`},
		{"nil string slice", []string(nil), `null`},
		{"string map", map[string]string{"z": "1", "a": "2"}, `{"a":"2","z":"1"}`},
		{"nil string map", map[string]string(nil), `null`},
		{"nil any slice", []any(nil), `null`},
		{"nil any map", map[string]any(nil), `null`},
		{"empty containers", []any{[]any{}, map[string]any{}, []string{}, map[string]string{}}, `[[],{},[],{}]`},
		{"raw message", json.RawMessage(` { "b" : [ 1.0 , "\u003c" ] , "a" : null } `), `{"a":null,"b":[1,"<"]}`},
		{"nil raw message", json.RawMessage(nil), `null`},
		{"raw in map", map[string]any{"x": json.RawMessage(`{"d":1,"c":2}`), "w": 0}, `{"w":0,"x":{"c":2,"d":1}}`},
		{"marshaler", marshalerFunc(func() ([]byte, error) { return []byte(`{"z":1e2,"y":"\u2028"}`), nil }), "{\"y\":\"\u2028\",\"z\":100}"},
		{"big int through fallback", []int64{1<<53 + 1}, `[9007199254740992]`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := Marshal(tc.in)
			if err != nil || string(got) != tc.want {
				t.Errorf("Marshal = %s, %v; want %s", got, err, tc.want)
			}
			d, err := Digest(tc.in)
			if want := Hex(FNV1a64(tc.want)); err != nil || d != want {
				t.Errorf("Digest = %s, %v; want %s", d, err, want)
			}
		})
	}
	var ce *Error
	for _, v := range []any{make(chan int), func() {}, complex(1, 2), json.RawMessage{}, json.RawMessage(`{"a":}`)} {
		if _, err := Marshal(v); !errors.As(err, &ce) {
			t.Errorf("Marshal(%T) error = %v, want *Error", v, err)
		}
	}
	_, err := Marshal(make(chan int))
	var ute *json.UnsupportedTypeError
	if !errors.As(err, &ute) {
		t.Errorf("Marshal(chan) error %v does not unwrap to *json.UnsupportedTypeError", err)
	}
}

func TestAppend(t *testing.T) {
	dst := []byte("prefix:")
	got, err := Append(dst, map[string]any{"b": 1, "a": "x"})
	if err != nil || string(got) != `prefix:{"a":"x","b":1}` {
		t.Errorf("Append = %s, %v", got, err)
	}
	got, err = Append(dst, []any{1, math.NaN()})
	if err == nil || string(got) != "prefix:" {
		t.Errorf("Append(NaN) = %q, %v; want original dst and an error", got, err)
	}
	got, err = AppendCanonicalize(dst, []byte(`{"b":1,"a":2}`))
	if err != nil || string(got) != `prefix:{"a":2,"b":1}` {
		t.Errorf("AppendCanonicalize = %s, %v", got, err)
	}
	got, err = AppendCanonicalize(dst, []byte(`{"b":1,"a":}`))
	if err == nil || string(got) != "prefix:" {
		t.Errorf("AppendCanonicalize(invalid) = %q, %v; want original dst and an error", got, err)
	}
	if got, err := Marshal(math.NaN()); got != nil || err == nil {
		t.Errorf("Marshal(NaN) = %q, %v; want nil and an error", got, err)
	}
}

func TestCompareUTF16(t *testing.T) {
	for _, tc := range []struct {
		a, b string
		want int
	}{
		{"", "", 0},
		{"", "a", -1},
		{"a", "", 1},
		{"a", "b", -1},
		{"ab", "a", 1},
		{"abc", "abd", -1},
		{"B", "a", -1},
		{"😀", "\uFFFD", -1},
		{"😀", "\uE000", -1},
		{"\uD7FF", "😀", -1},
		{"😀", "😁", -1},
		{"x😀", "x\uFFFF", -1},
		{"é", "e", 1},
		{"\u00ff", "\u0100", -1},
		{"\u07ff", "\u0800", -1},
		{"\U0010FFFF", "\uE000", -1},
		{"\x80", "\uE000", 1}, // invalid byte is U+FFFD
		{"\xff", "\uFFFD", 0}, // both U+FFFD
		{"\xff", "😀", 1},      // U+FFFD after a surrogate
		{"\xe2\x82x", "€", 1}, // U+FFFD U+FFFD 'x' vs U+20AC
		{"\xe2\x82x", "\xe2\x82y", -1},
		{"a\xf0\x9f", "a\xf0\x9f\x98\x80", 1}, // U+FFFD U+FFFD vs U+D83D U+DE00
	} {
		if got := CompareUTF16(tc.a, tc.b); got != tc.want {
			t.Errorf("CompareUTF16(%q, %q) = %d, want %d", tc.a, tc.b, got, tc.want)
		}
		if got := CompareUTF16(tc.b, tc.a); got != -tc.want {
			t.Errorf("CompareUTF16(%q, %q) = %d, want %d", tc.b, tc.a, got, -tc.want)
		}
		if got := compareUTF16([]byte(tc.a), []byte(tc.b)); got != tc.want {
			t.Errorf("compareUTF16([]byte(%q), []byte(%q)) = %d, want %d", tc.a, tc.b, got, tc.want)
		}
	}
}

func TestFNV1a64(t *testing.T) {
	for _, tc := range []struct{ s, want string }{
		{"😀", Hex(fnvUnits(0xD83D, 0xDE00))},
		{"\xff", Hex(fnvUnits(0xFFFD))},
		{"a\xe2\x82", Hex(fnvUnits('a', 0xFFFD, 0xFFFD))},
		{"\uFFFF\U0010FFFF", Hex(fnvUnits(0xFFFF, 0xDBFF, 0xDFFF))},
	} {
		if got := Hex(FNV1a64(tc.s)); got != tc.want {
			t.Errorf("FNV1a64(%q) = %s, want %s", tc.s, got, tc.want)
		}
		if got := Hex(FNV1a64Bytes([]byte(tc.s))); got != tc.want {
			t.Errorf("FNV1a64Bytes(%q) = %s, want %s", tc.s, got, tc.want)
		}
	}
}

// fnvUnits is a reference FNV-1a 64 over explicit UTF-16 code units.
func fnvUnits(units ...uint16) uint64 {
	h := uint64(0xcbf29ce484222325)
	for _, u := range units {
		h ^= uint64(u)
		h *= 0x100000001b3
	}
	return h
}

func TestHex(t *testing.T) {
	for _, tc := range []struct {
		h    uint64
		want string
	}{
		{0, "0000000000000000"},
		{0xabc, "0000000000000abc"},
		{math.MaxUint64, "ffffffffffffffff"},
		{0x0123456789abcdef, "0123456789abcdef"},
	} {
		if got := Hex(tc.h); got != tc.want {
			t.Errorf("Hex(%#x) = %s, want %s", tc.h, got, tc.want)
		}
	}
}

// TestDigestStreaming checks that Digest, which hashes in chunks, equals
// hashing the whole encoding, with multi-byte text around chunk boundaries.
func TestDigestStreaming(t *testing.T) {
	for _, n := range []int{0, 1, 50, 400, 2000} {
		v := rowsValue(n)
		rows := v["rows"].([]any)
		for i, r := range rows {
			if i%3 == 0 {
				r.(map[string]any)["name"] = strings.Repeat("é😀\uE000", i%7)
				r.(map[string]any)["raw"] = json.RawMessage(`{"b":[1,2],"a":"\ud83d\ude00"}`)
				r.(map[string]any)["labels"] = map[string]string{"k": "v😀"}
				r.(map[string]any)["list"] = []string{"x", "é"}
			}
		}
		b, err := Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		d, err := Digest(v)
		if want := Hex(FNV1a64Bytes(b)); err != nil || d != want {
			t.Errorf("n=%d: Digest = %s, %v; want %s", n, d, err, want)
		}
	}
}

func TestPlainPrefix(t *testing.T) {
	for n := 0; n < 24; n++ {
		for c := 0; c < 256; c++ {
			for pos := 0; pos < n; pos++ {
				b := []byte(strings.Repeat("x", n))
				b[pos] = byte(c)
				want := 0
				for want < len(b) && plain[b[want]] != 0 {
					want++
				}
				if got := plainPrefix(b); got != want {
					t.Fatalf("plainPrefix(%q) = %d, want %d", b, got, want)
				}
				if got := plainPrefix(string(b)); got != want {
					t.Fatalf("plainPrefix(string %q) = %d, want %d", b, got, want)
				}
			}
		}
	}
}

func TestAppendString(t *testing.T) {
	for _, s := range []string{"", "plain", "q\"uote\\", "tab\t<>&\u2028", "bad\xffbyte", "😀"} {
		want, err := Marshal(s)
		if err != nil {
			t.Fatal(err)
		}
		if got := AppendString([]byte("x"), s); string(got) != "x"+string(want) {
			t.Errorf("AppendString(%q) = %s, want x%s", s, got, want)
		}
	}
}
