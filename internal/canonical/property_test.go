package canonical

import (
	"bytes"
	"encoding/json"
	"math"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"
	"unicode/utf16"

	"pgregory.net/rapid"
)

// specialRunes are characters whose handling differs between encoders or
// whose UTF-16 order differs from their UTF-8 order.
var specialRunes = []rune{
	'a', 'b', 'B', 'z', '0', ' ', '"', '\\', '/', '<', '>', '&',
	0x00, 0x01, '\b', '\t', '\n', '\f', '\r', 0x1f, 0x7f, 0x80, 0xe9,
	0x2028, 0x2029, 0xd7ff, 0xe000, 0xf8ff, 0xfeff, 0xfffd, 0xffff,
	0x10000, 0x1f600, 0x1f601, 0x10ffff,
}

// jsonString draws a valid UTF-8 string biased towards special characters.
func jsonString(maxRunes int) *rapid.Generator[string] {
	return rapid.StringOfN(rapid.OneOf(rapid.SampledFrom(specialRunes), rapid.Rune()), 0, maxRunes, -1)
}

// extremeFloats are doubles at the edges of the formatting rules.
var extremeFloats = []float64{
	0, math.Copysign(0, -1), 5e-324, -5e-324, math.MaxFloat64, -math.MaxFloat64,
	1e21, 1e21 - 131072, 999999999999999900000, 1e-6, 1e-7, 9.999999999999999e-7,
	1 << 53, 1<<53 + 2, -(1 << 53), 1e15, 1e15 + 0.5, 0.1, 1.5e-7, 123456789012345680000,
	2.2250738585072014e-308, 2.225073858507201e-308,
}

// jsonFloat draws a finite double.
func jsonFloat() *rapid.Generator[float64] {
	return rapid.OneOf(
		rapid.Float64(),
		rapid.SampledFrom(extremeFloats),
		rapid.Map(rapid.Int64Range(-1<<60, 1<<60), func(i int64) float64 { return float64(i) }),
		rapid.Map(rapid.IntRange(-400, 400), func(e int) float64 {
			f, _ := strconv.ParseFloat("1e"+strconv.Itoa(e), 64)
			return f
		}),
	).Filter(func(f float64) bool { return !math.IsInf(f, 0) && !math.IsNaN(f) })
}

// jsonValue draws a decoded JSON value: nil, bool, float64, string, []any
// or map[string]any, nested up to depth levels. With numbers, integers and
// json.Number values appear too.
func jsonValue(depth int, numbers bool) *rapid.Generator[any] {
	return rapid.Custom(func(t *rapid.T) any {
		// rapid draws small numbers most often, so containers get the small
		// choices; past the depth limit they turn into scalars.
		kind := rapid.IntRange(0, 5).Draw(t, "kind")
		if depth <= 0 && kind < 2 {
			kind += 2
		}
		switch kind {
		case 0:
			n := rapid.IntRange(0, 8).Draw(t, "members")
			m := make(map[string]any, n)
			for range n {
				k := rapid.OneOf(jsonString(3), rapid.SampledFrom([]string{"a", "b", "😀", "\uE000", "\uFFFD", "ab"})).Draw(t, "key")
				m[k] = jsonValue(depth-1, numbers).Draw(t, "member")
			}
			return m
		case 1:
			n := rapid.IntRange(0, 8).Draw(t, "len")
			a := make([]any, n)
			for i := range a {
				a[i] = jsonValue(depth-1, numbers).Draw(t, "elem")
			}
			return a
		case 2:
			return jsonString(12).Draw(t, "string")
		case 3:
			if numbers {
				switch rapid.IntRange(0, 3).Draw(t, "numKind") {
				case 1:
					return rapid.Int64().Draw(t, "int64")
				case 2:
					return rapid.Uint64().Draw(t, "uint64")
				case 3:
					return json.Number(strconv.FormatFloat(jsonFloat().Draw(t, "f"), 'g', -1, 64))
				}
			}
			return jsonFloat().Draw(t, "float")
		case 4:
			if rapid.Bool().Draw(t, "isNull") {
				return nil
			}
			return rapid.Bool().Draw(t, "bool")
		default:
			return rapid.SampledFrom([]any{"", "😀", "\uFFFD", 0.0, 1.0, "a"}).Draw(t, "small")
		}
	})
}

// jsonDoc draws a document: usually an object or array, sometimes a scalar.
func jsonDoc(numbers bool) *rapid.Generator[any] {
	return rapid.Custom(func(t *rapid.T) any {
		for {
			v := jsonValue(4, numbers).Draw(t, "v")
			switch v.(type) {
			case map[string]any, []any:
				return v
			}
			if rapid.IntRange(0, 9).Draw(t, "scalarDoc") == 0 {
				return v
			}
		}
	})
}

// normalize converts every number in v to float64, as JSON.parse would.
func normalize(v any) any {
	switch x := v.(type) {
	case int64:
		return float64(x)
	case uint64:
		return float64(x)
	case json.Number:
		f, err := strconv.ParseFloat(string(x), 64)
		if err != nil {
			panic(err)
		}
		return f
	case float64:
		if x == 0 {
			return 0.0 // -0 → 0
		}
		return x
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			out[i] = normalize(e)
		}
		return out
	case map[string]any:
		out := make(map[string]any, len(x))
		for k, e := range x {
			out[k] = normalize(e)
		}
		return out
	}
	return v
}

// writeText writes v as JSON text the way a sloppy client might: members in
// a random order, random whitespace, strings with random escapes
// (including \u escapes of surrogate pairs) and numbers in random but
// equivalent spellings.
func writeText(t *rapid.T, b *bytes.Buffer, v any) {
	ws := func() {
		b.WriteString(rapid.SampledFrom([]string{"", "", "", " ", "\n\t", "\r\n  "}).Draw(t, "ws"))
	}
	ws()
	switch x := v.(type) {
	case nil:
		b.WriteString("null")
	case bool:
		b.WriteString(strconv.FormatBool(x))
	case float64:
		writeNumber(t, b, x)
	case int64, uint64, json.Number:
		enc, _ := json.Marshal(x)
		b.Write(enc)
	case string:
		writeString(t, b, x)
	case []any:
		b.WriteByte('[')
		for i, e := range x {
			if i > 0 {
				b.WriteByte(',')
			}
			writeText(t, b, e)
		}
		ws()
		b.WriteByte(']')
	case map[string]any:
		keys := make([]string, 0, len(x))
		for k := range x {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		keys = rapid.Permutation(keys).Draw(t, "order")
		b.WriteByte('{')
		for i, k := range keys {
			if i > 0 {
				b.WriteByte(',')
			}
			ws()
			writeString(t, b, k)
			ws()
			b.WriteByte(':')
			writeText(t, b, x[k])
		}
		ws()
		b.WriteByte('}')
	default:
		panic("unexpected type")
	}
	ws()
}

// writeNumber writes f in one of several equivalent JSON spellings.
func writeNumber(t *rapid.T, b *bytes.Buffer, f float64) {
	switch rapid.IntRange(0, 3).Draw(t, "numFormat") {
	case 0:
		b.WriteString(strconv.FormatFloat(f, 'g', -1, 64))
	case 1:
		b.WriteString(strconv.FormatFloat(f, 'E', -1, 64))
	case 2:
		b.WriteString(strconv.FormatFloat(f, 'e', 20, 64)) // more digits than needed
	default:
		enc, _ := json.Marshal(f)
		b.Write(enc)
	}
}

// writeString writes s as a JSON string, escaping characters at random.
func writeString(t *rapid.T, b *bytes.Buffer, s string) {
	b.WriteByte('"')
	for _, r := range s {
		escape := rapid.IntRange(0, 3).Draw(t, "escape") == 0
		switch {
		case r == '"' || r == '\\':
			b.WriteByte('\\')
			b.WriteRune(r)
		case r < 0x20 || escape:
			if r >= 0x10000 {
				hi, lo := utf16.EncodeRune(r)
				b.WriteString(`\u` + hex16(hi) + `\u` + hex16(lo))
			} else if r == '/' && escape {
				b.WriteString(`\/`)
			} else {
				b.WriteString(`\u` + hex16(r))
			}
		default:
			b.WriteRune(r)
		}
	}
	b.WriteByte('"')
}

// hex16 formats a code unit as four hex digits, in upper or lower case.
func hex16(r rune) string {
	s := strconv.FormatInt(int64(r)+0x10000, 16)[1:]
	if r%3 == 0 {
		return strings.ToUpper(s)
	}
	return s
}

// marshalAgrees checks that Marshal of v equals Canonicalize of its
// encoding/json text, and returns it.
func marshalAgrees(t *rapid.T, v any) []byte {
	want, err := Marshal(v)
	if err != nil {
		t.Fatalf("Marshal: %v", err)
	}
	enc, err := json.Marshal(v)
	if err != nil {
		t.Fatalf("json.Marshal: %v", err)
	}
	if got, err := Canonicalize(enc); err != nil || !bytes.Equal(got, want) {
		t.Fatalf("Canonicalize(%s) = %s, %v; want %s", enc, got, err, want)
	}
	return want
}

func TestCanonicalProperties(t *testing.T) {
	t.Run("json.Marshal then Canonicalize equals Marshal", func(t *testing.T) {
		rapid.Check(t, func(t *rapid.T) {
			marshalAgrees(t, jsonDoc(true).Draw(t, "v"))
		})
	})
	t.Run("objects sharing, or nearly sharing, their keys", func(t *testing.T) {
		// Rows with keys from a small set: the same key sets repeat at a
		// depth (encoded in a remembered order) and sets of the same size
		// differ (which must not be).
		keys := []string{"id", "name", "status", "tags", "😀", "\uFFFD", "\xff", "\xfe"}
		rapid.Check(t, func(t *rapid.T) {
			rows := make([]any, rapid.IntRange(1, 12).Draw(t, "rows"))
			for i := range rows {
				m := map[string]any{}
				for _, k := range rapid.SliceOfNDistinct(rapid.SampledFrom(keys), 0, 4, rapid.ID[string]).Draw(t, "keys") {
					if rapid.IntRange(0, 4).Draw(t, "nested") == 0 {
						m[k] = map[string]any{k: float64(i), "id": "x"}
					} else {
						m[k] = jsonString(3).Draw(t, "val")
					}
				}
				rows[i] = m
			}
			v := map[string]any{"rows": rows}
			want := marshalAgrees(t, v)
			d, err := Digest(v)
			if err != nil || d != Hex(FNV1a64Bytes(want)) {
				t.Fatalf("Digest = %s, %v; want the hash of %s", d, err, want)
			}
		})
	})
	t.Run("idempotent", func(t *testing.T) {
		rapid.Check(t, func(t *rapid.T) {
			v := jsonDoc(true).Draw(t, "v")
			want, err := Marshal(v)
			if err != nil {
				t.Fatalf("Marshal: %v", err)
			}
			got, err := Canonicalize(want)
			if err != nil || !bytes.Equal(got, want) {
				t.Fatalf("Canonicalize(%s) = %s, %v", want, got, err)
			}
		})
	})
	t.Run("member order and spelling independence", func(t *testing.T) {
		rapid.Check(t, func(t *rapid.T) {
			v := jsonDoc(false).Draw(t, "v")
			want, err := Marshal(v)
			if err != nil {
				t.Fatalf("Marshal: %v", err)
			}
			// Two maps built with the same members in different orders.
			if m, ok := v.(map[string]any); ok {
				keys := make([]string, 0, len(m))
				for k := range m {
					keys = append(keys, k)
				}
				slices.Sort(keys)
				m2 := make(map[string]any, len(m))
				for _, k := range rapid.Permutation(keys).Draw(t, "insertion") {
					m2[k] = m[k]
				}
				if got, err := Marshal(m2); err != nil || !bytes.Equal(got, want) {
					t.Fatalf("Marshal(reordered) = %s, %v; want %s", got, err, want)
				}
			}
			// The same value as text with members shuffled, whitespace and
			// escapes.
			var b bytes.Buffer
			writeText(t, &b, v)
			got, err := Canonicalize(b.Bytes())
			if err != nil || !bytes.Equal(got, want) {
				t.Fatalf("Canonicalize(%s) = %s, %v; want %s", b.Bytes(), got, err, want)
			}
		})
	})
	t.Run("output is valid JSON decoding to the input", func(t *testing.T) {
		rapid.Check(t, func(t *rapid.T) {
			v := jsonDoc(true).Draw(t, "v")
			out, err := Marshal(v)
			if err != nil {
				t.Fatalf("Marshal: %v", err)
			}
			if !json.Valid(out) {
				t.Fatalf("invalid JSON: %s", out)
			}
			var back any
			if err := json.Unmarshal(out, &back); err != nil {
				t.Fatalf("json.Unmarshal(%s): %v", out, err)
			}
			if want := normalize(v); !reflect.DeepEqual(back, want) {
				t.Fatalf("round trip of %s = %#v, want %#v", out, back, want)
			}
			// No whitespace outside strings: compacting changes nothing.
			var c bytes.Buffer
			if err := json.Compact(&c, out); err != nil || !bytes.Equal(c.Bytes(), out) {
				t.Fatalf("output %s contains whitespace outside strings", out)
			}
			d, err := Digest(v)
			if want := Hex(FNV1a64Bytes(out)); err != nil || d != want {
				t.Fatalf("Digest = %s, %v; want %s", d, err, want)
			}
		})
	})
	t.Run("CompareUTF16 and FNV1a64 agree with utf16.Encode", func(t *testing.T) {
		piece := rapid.OneOf(
			jsonString(3),
			rapid.Map(rapid.SliceOfN(rapid.Byte(), 1, 3), func(b []byte) string { return string(b) }),
			rapid.SampledFrom([]string{"\xf0\x9f", "\x98\x80", "\xef\xbf", "\xbd", "\xed\xa0\x80", "\xee", "\x80"}),
		)
		str := rapid.Map(rapid.SliceOfN(piece, 0, 4), func(p []string) string { return strings.Join(p, "") })
		rapid.Check(t, func(t *rapid.T) {
			a := str.Draw(t, "a")
			b := str.Draw(t, "b")
			if rapid.Bool().Draw(t, "sharePrefix") {
				b = a[:rapid.IntRange(0, len(a)).Draw(t, "cut")] + b
			}
			ua, ub := utf16.Encode([]rune(a)), utf16.Encode([]rune(b))
			want := slices.Compare(ua, ub)
			if got := CompareUTF16(a, b); got != want {
				t.Fatalf("CompareUTF16(%q, %q) = %d, want %d", a, b, got, want)
			}
			if got := compareUTF16([]byte(a), []byte(b)); got != want {
				t.Fatalf("compareUTF16 on bytes (%q, %q) = %d, want %d", a, b, got, want)
			}
			if got, ok := comparePrefixes(keyPrefix(a), keyPrefix(b)); ok && got != want {
				t.Fatalf("comparePrefixes(%q, %q) = %d, want %d", a, b, got, want)
			}
			if got, want := FNV1a64(a), fnvUnits(ua...); got != want {
				t.Fatalf("FNV1a64(%q) = %x, want %x", a, got, want)
			}
			if got, want := FNV1a64Bytes([]byte(b)), fnvUnits(ub...); got != want {
				t.Fatalf("FNV1a64Bytes(%q) = %x, want %x", b, got, want)
			}
		})
	})
}
