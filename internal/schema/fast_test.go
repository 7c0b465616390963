package schema

import (
	"bytes"
	"encoding/json"
	"testing"

	"pgregory.net/rapid"

	"github.com/agentsurface/agentsurface/internal/canonical"
)

// validCanonicalSound checks the one promise of ValidCanonical: when it
// says valid, Validate of the decoded text reports nothing.
func validCanonicalSound(t interface {
	Helper()
	Fatalf(string, ...any)
}, s *Schema, text []byte) bool {
	t.Helper()
	if !s.ValidCanonical(text) {
		return false
	}
	v, err := canonical.Decode(text)
	if err != nil {
		t.Fatalf("Decode(%s): %v", text, err)
	}
	if issues := s.Validate(v); issues != nil {
		t.Fatalf("ValidCanonical(%s) = true, but Validate reports %v\nschema %s", text, issues, s.JSON())
	}
	return true
}

// Property: for every inferred type, values of the type (which validate)
// whose canonical text has no escapes are decided valid without decoding
// (escaped strings are left to Validate by design), and for mutated or
// arbitrary values a "valid" answer is never wrong.
func TestValidCanonicalProperty(t *testing.T) {
	for _, tc := range typeCases {
		t.Run(tc.name, func(t *testing.T) {
			s, err := Infer(tc.typ)
			if err != nil {
				t.Fatal(err)
			}
			rapid.Check(t, func(t *rapid.T) {
				raw, err := json.Marshal(tc.values.Draw(t, "goValue"))
				if err != nil {
					t.Fatal(err)
				}
				text, err := canonical.Canonicalize(raw)
				if err != nil {
					t.Fatal(err)
				}
				if decided := validCanonicalSound(t, s, text); !decided && !bytes.ContainsRune(text, '\\') {
					t.Fatalf("conforming value %s, without escapes, was not decided", text)
				}
				v, _ := canonical.Decode(text)
				if rapid.Bool().Draw(t, "arbitrary") {
					v = arbitraryJSON(t, 3)
				} else {
					v = mutate(t, v)
				}
				if text, err = canonical.Marshal(v); err == nil {
					validCanonicalSound(t, s, text)
				}
			})
		})
	}
}

func TestValidCanonical(t *testing.T) {
	ids := mustParse(t, `{"type":"object","properties":{"ids":{"type":"array","items":{"type":"string","minLength":1},"minItems":1,"maxItems":3},"mode":{"type":"string","format":"uuid"},"n":{"type":"integer","minimum":0}},"required":["ids"],"additionalProperties":false}`)
	for _, tc := range []struct {
		text  string
		valid bool
	}{
		{`{"ids":["a"]}`, true},
		{`{"ids":["a","b","c"],"n":3}`, true},
		{`{"ids":["a"],"mode":"123e4567-e89b-12d3-a456-426614174000"}`, true},
		{`{"ids":[]}`, false},                // minItems
		{`{"ids":["a","b","c","d"]}`, false}, // maxItems
		{`{"ids":[""]}`, false},              // minLength
		{`{"ids":[1]}`, false},               // type
		{`{}`, false},                        // required
		{`{"ids":["a"],"x":1}`, false},       // additionalProperties
		{`{"ids":["a"],"n":1.5}`, false},     // integer
		{`{"ids":["a"],"n":-1}`, false},      // minimum
		{`{"ids":["a"],"mode":"x"}`, false},  // format
		{`{"ids":["a\"b"]}`, false},          // escapes: left to Validate (which accepts it)
		{`[]`, false}, {`null`, false}, {`{"ids":["a"]}x`, false},
	} {
		if got := validCanonicalSound(t, ids, []byte(tc.text)); got != tc.valid {
			t.Errorf("ValidCanonical(%s) = %v, want %v", tc.text, got, tc.valid)
		}
	}
	anyOf := mustParse(t, `{"anyOf":[{"type":"string"},{"type":"null"}]}`)
	if anyOf.ValidCanonical([]byte(`"a"`)) {
		t.Error("anyOf must be left to Validate")
	}
}

func BenchmarkValidCanonical(b *testing.B) {
	s, err := For[struct {
		IDs []string `json:"ids"`
	}]()
	if err != nil {
		b.Fatal(err)
	}
	text := []byte(`{"ids":["a"]}`)
	if !s.ValidCanonical(text) {
		b.Fatal("not decided")
	}
	b.ReportAllocs()
	for b.Loop() {
		s.ValidCanonical(text)
	}
}
