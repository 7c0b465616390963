package canonical

import (
	"bytes"
	"encoding/json"
	"testing"

	"pgregory.net/rapid"
)

func TestArrayLens(t *testing.T) {
	for _, c := range []struct {
		text string
		keys []string
		want []int
	}{
		{`{"ids":["a"]}`, []string{"ids"}, []int{1}},
		{`{"a":[],"b":[1,[2,3],{"x":[4,5]},"],[,"],"c":"[1,2]"}`, []string{"a", "b", "c"}, []int{0, 4, -1}},
		{` { "b" : [ 1 , 2 ] , "a" : { "b" : [ 1 ] } } `, []string{"a", "b"}, []int{-1, 2}},
		{`{"q\"k":[1,2,3],"z":[null]}`, []string{`q\"k`, "z"}, []int{3, 1}},
		{`{"a":[1,2],"b":`, []string{"a", "b"}, []int{2, -1}}, // cut short: what was reached counts
		{`{"a":[1,2`, []string{"a"}, []int{-1}},               // unterminated array
		{`[{"a":[1]}]`, []string{"a"}, []int{-1}},             // not an object
		{`{"a":1,"b":true,"c":null,"d":[]}`, []string{"d"}, []int{0}},
	} {
		lens := []int{-1, -1, -1}
		ArrayLens([]byte(c.text), c.keys, lens)
		for i, want := range c.want {
			if lens[i] != want {
				t.Errorf("ArrayLens(%s, %q) = %v, want %v", c.text, c.keys, lens[:len(c.want)], c.want)
				break
			}
		}
	}
}

// Property: on the canonical text of any object, ArrayLens finds exactly
// the array members and their lengths; on the same object written
// sloppily (whitespace, escapes, any member order) it never reports a
// wrong length.
func TestArrayLensProperty(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		v := jsonValue(3, false).Filter(func(v any) bool { _, ok := v.(map[string]any); return ok }).Draw(t, "object")
		m := v.(map[string]any)
		keys := make([]string, 0, len(m))
		for k := range m {
			quoted := AppendString(nil, k)
			keys = append(keys, string(quoted[1:len(quoted)-1]))
		}
		text, err := Marshal(m)
		if err != nil {
			t.Fatal(err)
		}
		var sloppy bytes.Buffer
		writeText(t, &sloppy, m)
		for _, doc := range [][]byte{text, sloppy.Bytes()} {
			lens := make([]int, len(keys))
			for i := range lens {
				lens[i] = -1
			}
			ArrayLens(doc, keys, lens)
			for j, k := range mapKeys(m) {
				a, isArray := m[k].([]any)
				switch {
				case isArray && lens[keyIndex(keys, k)] == len(a):
				case !bytes.Equal(doc, text) && lens[keyIndex(keys, k)] == -1: // sloppy text may spell the key otherwise
				case !isArray && lens[keyIndex(keys, k)] == -1:
				default:
					t.Fatalf("member %d %q (%v) of %s: length %d", j, k, m[k], doc, lens[keyIndex(keys, k)])
				}
			}
		}
	})
}

func mapKeys(m map[string]any) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	return out
}

// keyIndex returns the index in keys (escaped as in canonical text) of
// the member key k.
func keyIndex(keys []string, k string) int {
	quoted := AppendString(nil, k)
	for i, e := range keys {
		if e == string(quoted[1:len(quoted)-1]) {
			return i
		}
	}
	return -1
}

// FuzzArrayLens feeds arbitrary text and a key: ArrayLens must not panic,
// and on text encoding/json reads as an object whose member key is an
// array, any length it reports is that array's.
func FuzzArrayLens(f *testing.F) {
	for _, seed := range []string{`{"ids":["a"]}`, `{"a":[1,[2],"]"],"b":{}}`, `{"a":[`, `{"a":"\"[`, `{"a" :[ ] }`, `[]`, `{`, `{"a":[1,2]}x`} {
		f.Add([]byte(seed), "a")
	}
	f.Fuzz(func(t *testing.T, text []byte, key string) {
		lens := []int{-1}
		ArrayLens(text, []string{key}, lens)
		var m map[string]json.RawMessage
		if json.Unmarshal(text, &m) != nil || lens[0] == -1 {
			return
		}
		quoted := AppendString(nil, key)
		var raw json.RawMessage
		for k, v := range m {
			q := AppendString(nil, k)
			if bytes.Equal(q, quoted) {
				raw = v
			}
		}
		var a []json.RawMessage
		if raw == nil || json.Unmarshal(raw, &a) != nil {
			return // a spelling of the key canonical text would not use, or a duplicate
		}
		if lens[0] != len(a) {
			t.Fatalf("ArrayLens(%q, %q) = %d, want %d", text, key, lens[0], len(a))
		}
	})
}
