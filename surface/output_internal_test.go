package surface

import (
	"bytes"
	"encoding/json"
	"math"
	"testing"
	"time"

	"pgregory.net/rapid"
)

// outputSample covers what handler outputs are made of: strings needing
// escapes (HTML, control, invalid UTF-8, U+2028), edge floats, integers,
// maps, slices (nil and empty), pointers, omitempty, embedded structs,
// time.Time, raw JSON and a custom marshaler.
type outputSample struct {
	S      string            `json:"s"`
	F      float64           `json:"f"`
	F32    float32           `json:"f32"`
	I      int64             `json:"i"`
	U      uint8             `json:"u,omitempty"`
	M      map[string]int    `json:"m"`
	L      []string          `json:"l"`
	P      *string           `json:"p,omitempty"`
	T      time.Time         `json:"t"`
	Raw    json.RawMessage   `json:"raw,omitempty"`
	C      custom            `json:"c"`
	Any    any               `json:"any"`
	Nested map[string][]bool `json:"nested,omitempty"`
	embedded
}

type embedded struct {
	E string `json:"e"`
}

type custom struct{ n int }

func (c custom) MarshalJSON() ([]byte, error) {
	return []byte(`{ "n" : ` + string(rune('0'+c.n%10)) + ` }`), nil
}

var sampleStrings = rapid.OneOf(rapid.String(), rapid.SampledFrom([]string{
	"<script>&amp;</script>", "\u2028\u2029", "\x00\x1f\x7f", "\xff\xfe", "é😀", `"\`, "",
}))

var sampleFloats = rapid.OneOf(rapid.Float64(), rapid.SampledFrom([]float64{
	0, math.Copysign(0, -1), 1e21, 1e20, 1e-6, 1e-7, 5e-324, math.MaxFloat64, 0.1, 123456789.125,
}))

// The output encoder produces exactly json.Marshal's bytes.
func TestMarshalOutputMatchesEncodingJSON(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		s := sampleStrings.Draw(t, "p")
		v := outputSample{
			S:   sampleStrings.Draw(t, "s"),
			F:   sampleFloats.Draw(t, "f"),
			F32: float32(sampleFloats.Draw(t, "f32")),
			I:   rapid.Int64().Draw(t, "i"),
			U:   rapid.Uint8().Draw(t, "u"),
			M:   rapid.MapOf(sampleStrings, rapid.Int()).Draw(t, "m"),
			L:   rapid.SliceOf(sampleStrings).Draw(t, "l"),
			T:   time.Unix(rapid.Int64Range(-1e10, 1e10).Draw(t, "t"), rapid.Int64Range(0, 1e9-1).Draw(t, "ns")).UTC(),
			C:   custom{rapid.IntRange(0, 9).Draw(t, "c")},
			Any: rapid.SampledFrom([]any{nil, 1.5, "x<y", []any{true, nil}, map[string]any{"b": 1, "a": "<"}}).Draw(t, "any"),
		}
		if rapid.Bool().Draw(t, "hasP") {
			v.P = &s
		}
		if rapid.Bool().Draw(t, "hasRaw") {
			v.Raw = json.RawMessage(`[1, {"z":"<"} ]`)
		}
		if rapid.Bool().Draw(t, "nilL") {
			v.L = nil
		}
		v.E = sampleStrings.Draw(t, "e")
		want, wantErr := json.Marshal(v)
		got, gotErr := marshalOutput(nil, v)
		if (wantErr == nil) != (gotErr == nil) {
			t.Fatalf("errors differ: %v vs %v", wantErr, gotErr)
		}
		if !bytes.Equal(got, want) {
			t.Fatalf("output differs:\n got %s\nwant %s", got, want)
		}
	})
	for _, bad := range []any{math.NaN(), math.Inf(1), map[bool]int{true: 1}, make(chan int)} {
		if _, err := marshalOutput(nil, bad); err == nil {
			t.Errorf("marshalOutput(%T) accepted what json.Marshal rejects", bad)
		}
	}
}
