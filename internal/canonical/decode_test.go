package canonical

import (
	"encoding/json"
	"math"
	"reflect"
	"testing"

	"pgregory.net/rapid"
)

// unmarshal is what Decode must agree with.
func unmarshal(t testing.TB, text []byte) any {
	t.Helper()
	var v any
	if err := json.Unmarshal(text, &v); err != nil {
		t.Fatalf("json.Unmarshal(%q): %v", text, err)
	}
	return v
}

func TestDecode(t *testing.T) {
	for _, text := range []string{
		`{}`, `[]`, `null`, `true`, `false`, `0`, `-0`, `1`, `-1`, `123456789012345`,
		`1234567890123456789`, `1.5`, `-2.5e-7`, `1e+21`, `5e-324`, `1.7976931348623157e+308`,
		`""`, `"a"`, `"\"\\\/\b\f\n\r\t"`, `"\u0000\u001f"`, `"é😀"`, `"\ud83d\ude00"`, `"\ud800"`, `"\udc00\ud800x"`,
		"\"\xff\xfe\"", "\"a\\n\xff\"",
		`{"ids":["a"]}`, `{"a":1,"b":2,"a":3}`, `[1,[2,[3,{"x":null}]]]`,
	} {
		got, err := Decode([]byte(text))
		if err != nil {
			t.Errorf("Decode(%q): %v", text, err)
			continue
		}
		if want := unmarshal(t, []byte(text)); !reflect.DeepEqual(got, want) {
			t.Errorf("Decode(%q) = %#v, want %#v", text, got, want)
		}
	}
	if v, _ := Decode([]byte(`-0`)); !math.Signbit(v.(float64)) {
		t.Error("Decode(-0) lost the sign encoding/json keeps")
	}
}

func TestDecodeRejects(t *testing.T) {
	for _, text := range []string{
		``, ` 1`, `1 `, `{"a": 1}`, `[1, 2]`, `{`, `[`, `{"a"}`, `{"a":}`, `{a:1}`, `[1,]`, `{"a":1,}`,
		`tru`, `nul`, `01`, `1.`, `.5`, `-`, `1e`, `+1`, `"a`, `"\x"`, `"\u12"`, "\"\x01\"", `1e400`,
		`"a""b"`, `[1]]`, `{}x`,
	} {
		if v, err := Decode([]byte(text)); err == nil {
			t.Errorf("Decode(%q) = %#v, want an error", text, v)
		}
	}
	deep := make([]byte, 0, 2*MaxDepth+2)
	for range MaxDepth + 1 {
		deep = append(deep, '[')
	}
	for range MaxDepth + 1 {
		deep = append(deep, ']')
	}
	if _, err := Decode(deep); err == nil {
		t.Error("Decode accepted nesting deeper than MaxDepth")
	}
	if _, err := Decode(deep[1 : len(deep)-1]); err != nil {
		t.Errorf("Decode rejected nesting of MaxDepth: %v", err)
	}
}

// Property: decoding the canonical text of any value gives what
// encoding/json gives for the same text.
func TestDecodeCanonicalProperty(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		v := jsonDoc(true).Draw(t, "doc")
		text, err := Marshal(v)
		if err != nil {
			t.Skip("not marshalable:", err)
		}
		got, err := Decode(text)
		if err != nil {
			t.Fatalf("Decode(%q): %v", text, err)
		}
		var want any
		if err := json.Unmarshal(text, &want); err != nil {
			t.Fatalf("json.Unmarshal(%q): %v", text, err)
		}
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("Decode(%q) = %#v, want %#v", text, got, want)
		}
	})
}

// FuzzDecode: Decode never panics; on the canonical form of any JSON text
// it agrees with encoding/json; on any compact text it accepts, so does
// encoding/json, with the same value.
func FuzzDecode(f *testing.F) {
	for _, seed := range []string{
		`{"ids":["a"]}`, `{"a":1,"b":2,"a":3}`, `"\ud800"`, `"\ud83d\ude00"`, "\"\xff\"", `[1e21,-0,0.1]`,
		`{"a":[{"b":null}],"c":true}`, `[`, `"\u00`, `1e400`,
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		if v, err := Decode(in); err == nil {
			if want := unmarshal(t, in); !reflect.DeepEqual(v, want) {
				t.Fatalf("Decode(%q) = %#v, encoding/json %#v", in, v, want)
			}
		}
		canon, err := Canonicalize(in)
		if err != nil {
			return
		}
		v, err := Decode(canon)
		if err != nil {
			t.Fatalf("Decode(%q) of canonical text: %v", canon, err)
		}
		if want := unmarshal(t, canon); !reflect.DeepEqual(v, want) {
			t.Fatalf("Decode(%q) = %#v, encoding/json %#v", canon, v, want)
		}
	})
}

func BenchmarkDecode(b *testing.B) {
	text := []byte(`{"ids":["a"]}`)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Decode(text); err != nil {
			b.Fatal(err)
		}
	}
}
