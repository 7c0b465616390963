package schema

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"math"
	"math/big"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"
	"unsafe"

	"github.com/agentsurface/agentsurface/internal/canonical"
	"pgregory.net/rapid"
)

var update = flag.Bool("update", false, "rewrite testdata/*.golden")

// SelectRows is a typical action input.
type SelectRows struct {
	IDs  []string `json:"ids" jsonschema:"Row ids to select"`
	Mode string   `json:"mode,omitempty" jsonschema:"replace, add or remove"`
}

// scalars covers every scalar kind.
type scalars struct {
	S    string          `json:"s"`
	B    bool            `json:"b"`
	I    int             `json:"i"`
	I8   int8            `json:"i8"`
	I16  int16           `json:"i16"`
	I32  int32           `json:"i32"`
	I64  int64           `json:"i64"`
	U    uint            `json:"u"`
	U8   uint8           `json:"u8"`
	U16  uint16          `json:"u16"`
	U32  uint32          `json:"u32"`
	U64  uint64          `json:"u64"`
	UP   uintptr         `json:"up"`
	F32  float32         `json:"f32"`
	F64  float64         `json:"f64"`
	T    time.Time       `json:"t"`
	Num  json.Number     `json:"num"`
	Any  any             `json:"any"`
	Raw  json.RawMessage `json:"raw"`
	Skip string          `json:"-"`
	Dash string          `json:"-,"`
	NoTg string
	priv int
}

// Inner is a nested struct.
type Inner struct {
	Name string   `json:"name"`
	Tags []string `json:"tags,omitempty"`
}

// Embedded is promoted into containers.
type Embedded struct {
	Created time.Time `json:"created" jsonschema:"Creation time"`
}

// containers covers pointers, slices, arrays, maps and embedding.
type containers struct {
	Embedded
	P     *string             `json:"p"`
	PP    **int8              `json:"pp"`
	PT    *time.Time          `json:"pt,omitempty"`
	PAny  *any                `json:"pany"`
	PRaw  *json.RawMessage    `json:"praw"`
	In    Inner               `json:"in"`
	PIn   *Inner              `json:"pin,omitzero"`
	Ins   []Inner             `json:"ins"`
	PIns  []*Inner            `json:"pins"`
	Arr   [3]byte             `json:"arr"`
	M     map[string]int      `json:"m"`
	MAny  map[string]any      `json:"many"`
	MIn   map[string][]Inner  `json:"min"`
	PM    *map[string]float32 `json:"pm"`
	Grid  [][]float64         `json:"grid"`
	Slice []string            `json:"slice,omitempty"`
}

func TestInferGolden(t *testing.T) {
	tests := []struct {
		name string
		typ  reflect.Type
	}{
		{"select_rows", reflect.TypeFor[SelectRows]()},
		{"scalars", reflect.TypeFor[scalars]()},
		{"containers", reflect.TypeFor[containers]()},
		{"map_of_slices", reflect.TypeFor[map[string][]uint16]()},
		{"pointer_root", reflect.TypeFor[*Inner]()},
		{"empty_struct", reflect.TypeFor[struct{}]()},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s, err := Infer(tc.typ)
			if err != nil {
				t.Fatalf("Infer(%s): %v", tc.typ, err)
			}
			// Inferred schemas are within the subset: their text parses.
			p, err := Parse([]byte(s.JSON()))
			if err != nil {
				t.Fatalf("inferred schema does not parse: %v", err)
			}
			if p.JSON() != s.JSON() || p.Depth() != s.Depth() {
				t.Errorf("re-parsed schema differs")
			}
			file := filepath.Join("testdata", tc.name+".golden")
			var pretty bytes.Buffer
			if err := json.Indent(&pretty, []byte(s.JSON()), "", "  "); err != nil {
				t.Fatal(err)
			}
			got := pretty.String() + "\n"
			if *update {
				if err := os.MkdirAll("testdata", 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(file, []byte(got), 0o644); err != nil {
					t.Fatal(err)
				}
				return
			}
			want, err := os.ReadFile(file)
			if err != nil {
				t.Fatalf("%v (run with -update)", err)
			}
			if got != string(want) {
				t.Errorf("Infer(%s) =\n%s\nwant (%s)\n%s", tc.typ, got, file, want)
			}
		})
	}
}

func TestInferShape(t *testing.T) {
	s, err := For[SelectRows]()
	if err != nil {
		t.Fatal(err)
	}
	// Properties in struct field order (semantics §10.8).
	want := `{"type":"object","properties":{"ids":{"type":"array","items":{"type":"string"},"description":"Row ids to select"},"mode":{"type":"string","description":"replace, add or remove"}},"required":["ids"],"additionalProperties":false}`
	if s.JSON() != want {
		t.Errorf("For[SelectRows]() =\n%s\nwant\n%s", s.JSON(), want)
	}
	if !s.IsObject() || s.Depth() != 2 {
		t.Errorf("IsObject %v Depth %d", s.IsObject(), s.Depth())
	}
	// Slices are not nullable (jsonschema-go's default would accept null).
	if got := s.Validate(decode(t, `{"ids":null}`)); len(got) != 1 || got[0].Path != "ids" || got[0].Message != "expected array" {
		t.Errorf("ids null: %v", got)
	}
	for typ, want := range map[reflect.Type]string{
		reflect.TypeFor[any]():                        `{}`,
		reflect.TypeFor[[]any]():                      `{"type":"array","items":{}}`,
		reflect.TypeFor[map[string]json.RawMessage](): `{"type":"object"}`,
		reflect.TypeFor[*[]int8]():                    `{"type":["array","null"],"items":{"type":"integer","minimum":-128,"maximum":127}}`,
		reflect.TypeFor[json.Number]():                `{"type":"number"}`,
	} {
		s, err := Infer(typ)
		if err != nil {
			t.Errorf("Infer(%s): %v", typ, err)
		} else if s.JSON() != want {
			t.Errorf("Infer(%s) = %s, want %s", typ, s.JSON(), want)
		}
	}
	// Memoised: the same *Schema every time.
	s2, _ := Infer(reflect.TypeFor[SelectRows]())
	if s2 != s {
		t.Error("Infer is not memoised")
	}
}

func TestInferConcurrent(t *testing.T) {
	type fresh struct {
		A []map[string]*Inner `json:"a"`
	}
	var wg sync.WaitGroup
	results := make([]*Schema, 8)
	for i := range results {
		wg.Go(func() {
			s, err := For[fresh]()
			if err != nil {
				t.Error(err)
			}
			results[i] = s
		})
	}
	wg.Wait()
	for _, s := range results {
		if s != results[0] {
			t.Fatal("different schemas for one type")
		}
	}
}

// marshalsItself has a custom JSON form.
type marshalsItself struct{ X int }

// MarshalJSON implements json.Marshaler.
func (marshalsItself) MarshalJSON() ([]byte, error) { return []byte(`"x"`), nil }

// textual has a custom text form.
type textual struct{ b [4]byte }

// UnmarshalText implements encoding.TextUnmarshaler.
func (t *textual) UnmarshalText([]byte) error { return nil }

// recursive refers to itself.
type recursive struct {
	Next *recursive `json:"next"`
}

// mutualA and mutualB refer to each other.
type mutualA struct {
	B []mutualB `json:"b"`
}

// mutualB refers back to mutualA.
type mutualB struct {
	A map[string]mutualA `json:"a"`
}

// stringer is a non-empty interface.
type stringer interface{ String() string }

// named is an exported non-struct type for embedding.
type Named string

// deep9 nests nine levels.
type deep9 struct {
	A struct {
		A struct {
			A struct {
				A struct {
					A struct {
						A struct {
							A struct {
								A struct {
									A struct{} `json:"a"`
								} `json:"a"`
							} `json:"a"`
						} `json:"a"`
					} `json:"a"`
				} `json:"a"`
			} `json:"a"`
		} `json:"a"`
	} `json:"a"`
}

func TestInferRejects(t *testing.T) {
	tests := []struct {
		name string
		typ  reflect.Type
		path string
		want string
	}{
		{"bytes", reflect.TypeFor[[]byte](), "", "binary"},
		{"bytes field", reflect.TypeFor[struct {
			B []byte `json:"b"`
		}](), "/properties/b", "binary"},
		{"chan", reflect.TypeFor[struct{ C chan int }](), "/properties/C", "kind chan"},
		{"func", reflect.TypeFor[func()](), "", "kind func"},
		{"complex", reflect.TypeFor[[]complex128](), "/items", "kind complex128"},
		{"unsafe pointer", reflect.TypeFor[unsafe.Pointer](), "", "kind unsafe.Pointer"},
		{"non-empty interface", reflect.TypeFor[struct {
			S stringer `json:"s"`
		}](), "/properties/s", "non-empty interface"},
		{"error interface", reflect.TypeFor[error](), "", "non-empty interface"},
		{"int keys", reflect.TypeFor[map[int]string](), "", "map keys"},
		{"recursive", reflect.TypeFor[recursive](), "/properties/next", "recursive"},
		{"mutually recursive", reflect.TypeFor[mutualA](), "/properties/b/items/properties/a/additionalProperties", "recursive"},
		{"custom marshaler", reflect.TypeFor[struct {
			M marshalsItself `json:"m"`
		}](), "/properties/m", "custom JSON"},
		{"text unmarshaler", reflect.TypeFor[map[string]textual](), "/additionalProperties", "custom JSON"},
		{"slog level", reflect.TypeFor[slog.Level](), "", "custom JSON"},
		{"big int", reflect.TypeFor[*big.Int](), "", "custom JSON"},
		{"string option", reflect.TypeFor[struct {
			N int `json:"n,string"`
		}](), "/properties/n", `",string"`},
		{"embedded with name", reflect.TypeFor[struct {
			Inner `json:"inner"`
		}](), "/properties/Inner", "json name"},
		{"embedded ignored", reflect.TypeFor[struct {
			Inner `json:"-"`
		}](), "/properties/Inner", `json:"-"`},
		{"embedded non-struct", reflect.TypeFor[struct{ Named }](), "/properties/Named", "non-struct"},
		{"embedded time", reflect.TypeFor[struct{ time.Time }](), "", "custom JSON"},
		{"duplicate names", reflect.StructOf([]reflect.StructField{
			{Name: "A", Type: reflect.TypeFor[string](), Tag: `json:"x"`},
			{Name: "B", Type: reflect.TypeFor[int](), Tag: `json:"x"`},
		}), "/properties/x", "JSON name"},
		{"empty jsonschema tag", reflect.TypeFor[struct {
			A string `json:"a" jsonschema:""`
		}](), "", "empty jsonschema tag"},
		{"depth 9", reflect.TypeFor[deep9](), "/properties/a/properties/a/properties/a/properties/a/properties/a/properties/a/properties/a/properties/a/properties/a", "levels deep"},
		{"nil", nil, "", "nil type"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s, err := Infer(tc.typ)
			if err == nil {
				t.Fatalf("Infer(%v) = %s", tc.typ, s.JSON())
			}
			var se *Error
			if !errors.As(err, &se) {
				t.Fatalf("error %T %v", err, err)
			}
			if se.Path != tc.path || !strings.Contains(se.Reason, tc.want) {
				t.Errorf("got path %q reason %q, want path %q reason containing %q", se.Path, se.Reason, tc.path, tc.want)
			}
			// Errors are memoised too.
			if _, err2 := Infer(tc.typ); !reflect.DeepEqual(err2, err) {
				t.Errorf("second error %v differs", err2)
			}
		})
	}
	// Larger limits admit the deep type.
	if s, err := InferLimits(reflect.TypeFor[deep9](), Limits{MaxDepth: 9}); err != nil || s.Depth() != 9 {
		t.Errorf("InferLimits depth 9: %v", err)
	}
}

// propInner is nested in propA.
type propInner struct {
	Name string   `json:"name"`
	Tags []string `json:"tags,omitempty"`
}

// propA has a field of every shape the property test exercises.
type propA struct {
	S   string         `json:"s"`
	I8  int8           `json:"i8"`
	I   int            `json:"i"`
	U32 uint32         `json:"u32"`
	U   uint64         `json:"u"`
	F32 float32        `json:"f32"`
	F64 float64        `json:"f64"`
	B   bool           `json:"b"`
	L   []string       `json:"l"`
	P   *string        `json:"p"`
	M   map[string]int `json:"m"`
	T   time.Time      `json:"t"`
	In  propInner      `json:"in"`
	O   *propInner     `json:"o,omitempty"`
	Opt int16          `json:"opt,omitempty"`
	PT  *time.Time     `json:"pt,omitzero"`
}

// typeCase is a Go type under the validates ⇒ decodes property, with a
// generator of its values (safe integers, non-nil slices and maps: the
// JSON forms the schema describes).
type typeCase struct {
	name   string
	typ    reflect.Type
	values *rapid.Generator[any]
}

var (
	genTime = rapid.Custom(func(t *rapid.T) time.Time {
		sec := rapid.Int64Range(-62135596800+86400, 253402300799-86400).Draw(t, "sec")
		nsec := rapid.Int64Range(0, 999999999).Draw(t, "nsec")
		off := rapid.IntRange(-23*60, 23*60).Draw(t, "off")
		return time.Unix(sec, nsec).In(time.FixedZone("", off*60))
	})
	genSafeInt = rapid.Int64Range(-maxSafeInteger, maxSafeInteger)
	genF32     = rapid.Custom(func(t *rapid.T) float32 {
		f := rapid.Float32().Draw(t, "f32")
		if math.IsNaN(float64(f)) || math.IsInf(float64(f), 0) {
			return 0
		}
		return f
	})
	genF64 = rapid.Custom(func(t *rapid.T) float64 {
		f := rapid.Float64().Draw(t, "f64")
		if math.IsNaN(f) || math.IsInf(f, 0) {
			return 0
		}
		return f
	})
	genInner = rapid.Custom(func(t *rapid.T) propInner {
		return propInner{Name: rapid.String().Draw(t, "name"), Tags: rapid.SliceOf(rapid.String()).Draw(t, "tags")}
	})
)

var typeCases = []typeCase{
	{"propA", reflect.TypeFor[propA](), rapid.Custom(func(t *rapid.T) any {
		v := propA{
			S:   rapid.String().Draw(t, "s"),
			I8:  rapid.Int8().Draw(t, "i8"),
			I:   int(genSafeInt.Draw(t, "i")),
			U32: rapid.Uint32().Draw(t, "u32"),
			U:   rapid.Uint64Range(0, maxSafeInteger).Draw(t, "u"),
			F32: genF32.Draw(t, "f32"),
			F64: genF64.Draw(t, "f64"),
			B:   rapid.Bool().Draw(t, "b"),
			L:   rapid.SliceOf(rapid.String()).Draw(t, "l"),
			M:   rapid.MapOf(rapid.String(), rapid.Custom(func(t *rapid.T) int { return int(genSafeInt.Draw(t, "mv")) })).Draw(t, "m"),
			T:   genTime.Draw(t, "t"),
			In:  genInner.Draw(t, "in"),
			Opt: rapid.Int16().Draw(t, "opt"),
		}
		if rapid.Bool().Draw(t, "hasP") {
			s := rapid.String().Draw(t, "p")
			v.P = &s
		}
		if rapid.Bool().Draw(t, "hasO") {
			o := genInner.Draw(t, "o")
			v.O = &o
		}
		if rapid.Bool().Draw(t, "hasPT") {
			pt := genTime.Draw(t, "pt")
			v.PT = &pt
		}
		return v
	}).AsAny()},
	{"[]int8", reflect.TypeFor[[]int8](), rapid.Custom(func(t *rapid.T) any {
		return rapid.SliceOf(rapid.Int8()).Draw(t, "v")
	})},
	{"map[string]uint16", reflect.TypeFor[map[string]uint16](), rapid.Custom(func(t *rapid.T) any {
		return rapid.MapOf(rapid.String(), rapid.Uint16()).Draw(t, "v")
	})},
	{"[]*float32", reflect.TypeFor[[]*float32](), rapid.Custom(func(t *rapid.T) any {
		n := rapid.IntRange(0, 4).Draw(t, "n")
		v := make([]*float32, n)
		for i := range v {
			if rapid.Bool().Draw(t, "nonNil") {
				f := genF32.Draw(t, "f")
				v[i] = &f
			}
		}
		return v
	})},
	{"[2]time.Time", reflect.TypeFor[[2]time.Time](), rapid.Custom(func(t *rapid.T) any {
		return [2]time.Time{genTime.Draw(t, "a"), genTime.Draw(t, "b")}
	})},
	{"map[string]map[string]bool", reflect.TypeFor[map[string]map[string]bool](), rapid.Custom(func(t *rapid.T) any {
		return rapid.MapOf(rapid.String(), rapid.MapOf(rapid.String(), rapid.Bool())).Draw(t, "v")
	})},
}

// arbitraryJSON draws any JSON value, biased towards the edge cases of
// decoding into Go types.
func arbitraryJSON(t *rapid.T, depth int) any {
	max := 7
	if depth <= 0 {
		max = 5
	}
	switch rapid.IntRange(0, max).Draw(t, "kind") {
	case 0:
		return nil
	case 1:
		return rapid.Bool().Draw(t, "bool")
	case 2:
		return rapid.SampledFrom([]float64{0, math.Copysign(0, -1), 1, -1, 1.5, 127, 128, -128, -129, 255, 256, 32767, 65535, 65536,
			math.MaxInt32, math.MaxInt32 + 1, math.MaxUint32, math.MaxUint32 + 1, maxSafeInteger, maxSafeInteger + 1, -maxSafeInteger - 1,
			1e21, -1e300, 1e-7, 3.4028234663852886e38, 3.4028235677973366e38, -3.5e38, 1e39, 5e-324}).Draw(t, "edgeNumber")
	case 3:
		return rapid.Float64().Draw(t, "number")
	case 4:
		return rapid.OneOf(rapid.String(), rapid.SampledFrom([]string{
			"2024-01-02T03:04:05Z", "2024-02-30T00:00:00Z", "2024-01-02T03:04:05.999999999999+23:59",
			"2024-01-02T24:00:00Z", "0000-01-01T00:00:00-00:01", "9999-12-31T23:59:59+00:00", "2024-01-02T03:04:05",
		})).Draw(t, "string")
	case 5:
		return float64(rapid.IntRange(-300, 70000).Draw(t, "smallInt"))
	case 6:
		n := rapid.IntRange(0, 3).Draw(t, "len")
		a := make([]any, n)
		for i := range a {
			a[i] = arbitraryJSON(t, depth-1)
		}
		return a
	default:
		m := map[string]any{}
		for range rapid.IntRange(0, 4).Draw(t, "len") {
			m[rapid.SampledFrom([]string{"s", "i8", "i", "u32", "u", "f32", "f64", "b", "l", "p", "m", "t", "in", "o", "opt", "pt", "name", "tags", "x", "S", "I8"}).Draw(t, "key")] = arbitraryJSON(t, depth-1)
		}
		return m
	}
}

// mutate perturbs a decoded JSON value at random places.
func mutate(t *rapid.T, v any) any {
	if rapid.IntRange(0, 9).Draw(t, "mutateHere") == 0 {
		return arbitraryJSON(t, 2)
	}
	switch x := v.(type) {
	case []any:
		for i := range x {
			x[i] = mutate(t, x[i])
		}
	case map[string]any:
		for _, k := range sortedKeys(x) {
			switch rapid.IntRange(0, 19).Draw(t, "memberOp") {
			case 0:
				delete(x, k)
			default:
				x[k] = mutate(t, x[k])
			}
		}
	}
	return v
}

// Values that validate decode into the Go type the schema was inferred
// from, and every value of the Go type (in the JSON forms the schema
// describes) validates.
func TestInferValidatesImpliesDecodes(t *testing.T) {
	for _, tc := range typeCases {
		t.Run(tc.name, func(t *testing.T) {
			s, err := Infer(tc.typ)
			if err != nil {
				t.Fatal(err)
			}
			rapid.Check(t, func(t *rapid.T) {
				goVal := tc.values.Draw(t, "goValue")
				raw, err := json.Marshal(goVal)
				if err != nil {
					t.Fatalf("json.Marshal: %v", err)
				}
				var v any
				if err := json.Unmarshal(raw, &v); err != nil {
					t.Fatal(err)
				}
				if issues := s.Validate(v); issues != nil {
					t.Fatalf("marshalled Go value %s does not validate: %v", raw, issues)
				}

				// Conforming-ish (a mutated Go value) or arbitrary JSON.
				if rapid.Bool().Draw(t, "arbitrary") {
					v = arbitraryJSON(t, 3)
				} else {
					v = mutate(t, v)
				}
				if issues := s.Validate(v); issues != nil {
					return
				}
				text, err := canonical.Marshal(v)
				if err != nil {
					t.Fatal(err)
				}
				dst := reflect.New(tc.typ)
				if err := json.Unmarshal(text, dst.Interface()); err != nil {
					t.Fatalf("%s validates but does not decode into %s: %v", text, tc.typ, err)
				}
			})
		})
	}
}

// date-time strings that validate decode into time.Time, for any string.
func TestDateTimeDecodes(t *testing.T) {
	s, err := For[time.Time]()
	if err != nil {
		t.Fatal(err)
	}
	rapid.Check(t, func(t *rapid.T) {
		str := rapid.OneOf(
			rapid.StringMatching(`[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}(\.[0-9]{1,12})?(Z|[+-][0-9]{2}:[0-9]{2})`),
			rapid.String(),
		).Draw(t, "s")
		if s.Validate(str) != nil {
			return
		}
		var tm time.Time
		if err := json.Unmarshal(fmt.Appendf(nil, "%q", str), &tm); err != nil {
			t.Fatalf("%q validates as date-time but does not decode: %v", str, err)
		}
	})
}

// InferOutput describes what a Go value marshals to: nil slices and maps
// are null, so they are nullable, while Infer (for decoding) keeps them
// strict.
func TestInferOutputNullableCollections(t *testing.T) {
	type row struct {
		Tags []string       `json:"tags"`
		Attr map[string]int `json:"attr"`
		Grid [2]int         `json:"grid"`
		Name string         `json:"name"`
	}
	type out struct {
		Rows []row `json:"rows"`
	}
	s, err := InferOutput(reflect.TypeFor[out](), Limits{})
	if err != nil {
		t.Fatal(err)
	}
	for _, v := range []out{{}, {Rows: []row{{}}}, {Rows: []row{{Tags: []string{"a"}, Attr: map[string]int{"x": 1}, Name: "n"}}}} {
		b, _ := json.Marshal(v)
		var doc any
		if err := json.Unmarshal(b, &doc); err != nil {
			t.Fatal(err)
		}
		if issues := s.Validate(doc); issues != nil {
			t.Errorf("%s: %v", b, issues)
		}
	}
	want := `{"type":"object","properties":{"rows":{"type":["array","null"],"items":{"type":"object","properties":{"tags":{"type":["array","null"],"items":{"type":"string"}},"attr":{"type":["object","null"]},"grid":{"type":"array","items":{"type":"integer","minimum":-9007199254740991,"maximum":9007199254740991},"minItems":2,"maxItems":2},"name":{"type":"string"}},"required":["tags","attr","grid","name"],"additionalProperties":false}}},"required":["rows"],"additionalProperties":false}`
	if s.JSON() != want {
		t.Errorf("InferOutput JSON:\n%s\nwant\n%s", s.JSON(), want)
	}
	in, err := Infer(reflect.TypeFor[out]())
	if err != nil {
		t.Fatal(err)
	}
	if issues := in.Validate(map[string]any{"rows": nil}); issues == nil {
		t.Error("Infer must keep slices non-nullable for inputs")
	}
}
