package schema

import (
	"bytes"
	"encoding/json"
	"reflect"
	"strings"
	"testing"
)

// Schemas reach the model as authored (semantics §10.8): a raw schema's
// keys in the author's order, byte for byte but for whitespace; an
// inferred one's properties in struct field order.
func TestSchemasAsAuthored(t *testing.T) {
	raw := "{\n  \"type\": \"object\",\n  \"properties\": {\n    \"zeta\": {\"type\": \"string\", \"description\": \"Z \\u00e9\"},\n    \"alpha\": {\"type\": \"number\", \"maximum\": 1.50}\n  },\n  \"required\": [\"zeta\"]\n}"
	s, err := Parse([]byte(raw))
	if err != nil {
		t.Fatal(err)
	}
	const want = `{"type":"object","properties":{"zeta":{"type":"string","description":"Z \u00e9"},"alpha":{"type":"number","maximum":1.50}},"required":["zeta"]}`
	if s.JSON() != want || s.Size() != len(want) {
		t.Fatalf("JSON() = %s (%d bytes), want %s", s.JSON(), s.Size(), want)
	}
	type zetaFirst struct {
		Zeta  string  `json:"zeta"`
		Alpha float64 `json:"alpha"`
		Mid   []int   `json:"mid,omitempty"`
	}
	inf, err := For[zetaFirst]()
	if err != nil {
		t.Fatal(err)
	}
	if got := inf.JSON(); strings.Index(got, `"zeta"`) > strings.Index(got, `"alpha"`) || strings.Index(got, `"alpha"`) > strings.Index(got, `"mid"`) {
		t.Fatalf("inferred properties out of field order: %s", got)
	}
}

// A text shown as written must mean what it shows: a key given twice in
// one object (decoding would keep the last silently) and invalid UTF-8
// are refused.
func TestSchemaTextRefused(t *testing.T) {
	for _, raw := range []string{
		`{"type":"string","type":"object"}`,
		`{"type":"object","properties":{"a":{"type":"string"},"a":{"type":"number"}}}`,
		`{"anyOf":[{"type":"string","description":"x","description":"y"}]}`,
		"{\"description\":\"\xff\"}",
	} {
		if s, err := Parse([]byte(raw)); err == nil {
			t.Errorf("Parse(%q) = %s, want an error", raw, s.JSON())
		} else if _, ok := err.(*Error); !ok {
			t.Errorf("Parse(%q): %T", raw, err)
		}
	}
}

// Reduce removes and annotates properties and trims required, keeping
// the order and the text of the rest. AS-BIND-001.
func TestReduceKeepsOrder_AS_BIND_001(t *testing.T) {
	s := mustParse(t, `{"type":"object","description":"Disable","properties":{"zeta":{"type":"string"},"ids":{"type":"array","items":{"type":"string"}},"reason":{"type":"string","description":"Why"},"alpha":{"type":"integer","minimum":1.0}},"required":["ids","zeta","reason"],"additionalProperties":false}`)
	r, err := Reduce(s, []string{"ids"}, []string{"reason", "alpha"}, "Defaults to the UI.", Limits{})
	if err != nil {
		t.Fatal(err)
	}
	const want = `{"type":"object","description":"Disable","properties":{"zeta":{"type":"string"},"reason":{"type":"string","description":"Why Defaults to the UI."},"alpha":{"type":"integer","minimum":1.0,"description":"Defaults to the UI."}},"required":["zeta"],"additionalProperties":false}`
	if r.JSON() != want {
		t.Fatalf("Reduce =\n%s\nwant\n%s", r.JSON(), want)
	}
	all, err := Reduce(s, []string{"zeta", "ids", "reason", "alpha"}, nil, "", Limits{})
	if err != nil || all.JSON() != emptyObjectText {
		t.Fatalf("everything bound: %v %v", all, err)
	}
	none, err := Reduce(s, nil, nil, "", Limits{})
	if err != nil || none.JSON() != s.JSON() {
		t.Fatalf("nothing bound: %s %v", none.JSON(), err)
	}
}

// FuzzParseKeepsText checks that a schema Parse accepts is shown as its
// author wrote it: its text is the input without insignificant
// whitespace, and means the same document.
func FuzzParseKeepsText(f *testing.F) {
	for _, s := range parseSeeds {
		f.Add([]byte(s))
	}
	f.Add([]byte("{ \"type\" : \"object\" ,\n \"properties\" : { \"z\" : { } , \"a\" : { \"enum\" : [ 1.0 , -0 ] } } }"))
	f.Fuzz(func(t *testing.T, raw []byte) {
		s, err := Parse(raw)
		if err != nil {
			return
		}
		var want bytes.Buffer
		if err := json.Compact(&want, raw); err != nil {
			t.Fatalf("Parse accepted text json.Compact refuses: %v", err)
		}
		if s.JSON() != want.String() {
			t.Fatalf("JSON() = %s, want %s", s.JSON(), want.String())
		}
		var a, b any
		if json.Unmarshal(raw, &a) != nil || json.Unmarshal([]byte(s.JSON()), &b) != nil || !reflect.DeepEqual(a, b) {
			t.Fatalf("JSON() %s means another document than %s", s.JSON(), raw)
		}
	})
}
