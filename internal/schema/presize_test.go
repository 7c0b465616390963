package schema

import (
	"encoding/json"
	"reflect"
	"testing"
	"unsafe"

	fastjson "github.com/segmentio/encoding/json"
	"pgregory.net/rapid"
)

type presizeIn struct {
	IDs    []string         `json:"ids"`
	Nums   []float64        `json:"nums,omitempty"`
	Rows   []presizeRow     `json:"rows"`
	Nested [][]int          `json:"nested"`
	Raw    []byte           `json:"raw"`
	Named  presizeList      `json:"named"`
	Skip   []string         `json:"-"`
	Dash   []string         `json:"-,"`
	Plain  []int            // named by the field: "Plain"
	Tags   map[string][]int `json:"tags"`
	hidden []string
}

type presizeRow struct {
	ID   string   `json:"id"`
	Tags []string `json:"tags"`
}

// presizeList decodes itself: not sized.
type presizeList []string

func (l *presizeList) UnmarshalJSON(b []byte) error {
	var s []string
	if err := json.Unmarshal(b, &s); err != nil {
		return err
	}
	*l = s
	return nil
}

func TestNewPresizer(t *testing.T) {
	p := NewPresizer(reflect.TypeFor[presizeIn]())
	if want := []string{"ids", "nums", "rows", "nested", "-", "Plain"}; p == nil || !reflect.DeepEqual(p.keys, want) {
		t.Fatalf("keys = %v, want %v", p, want)
	}
	for _, typ := range []reflect.Type{
		reflect.TypeFor[[]string](),
		reflect.TypeFor[struct{ N int }](),
		reflect.TypeFor[struct{ B []byte }](),
		reflect.TypeFor[struct {
			S []string `json:"-"`
		}](),
		reflect.TypeFor[presizeList](),
		reflect.TypeFor[json.RawMessage](),
	} {
		if p := NewPresizer(typ); p != nil {
			t.Errorf("NewPresizer(%v) = %v, want nil", typ, p.keys)
		}
	}
}

// Property: whatever the value, decoding its JSON into a presized value
// gives what decoding into a zero value gives, and every sized top-level
// slice has the capacity of its array, give or take the allocator's
// rounding up to a size class (at most a quarter more).
func TestPresizeProperty(t *testing.T) {
	p := NewPresizer(reflect.TypeFor[presizeIn]())
	strs := rapid.SliceOf(rapid.StringN(0, 3, -1))
	rapid.Check(t, func(rt *rapid.T) {
		in := presizeIn{
			IDs:    strs.Draw(rt, "ids"),
			Nums:   rapid.SliceOf(rapid.Float64Range(-1e6, 1e6)).Draw(rt, "nums"),
			Nested: rapid.SliceOf(rapid.SliceOf(rapid.Int())).Draw(rt, "nested"),
			Raw:    rapid.SliceOf(rapid.Byte()).Draw(rt, "raw"),
			Named:  strs.Draw(rt, "named"),
			Dash:   strs.Draw(rt, "dash"),
			Plain:  rapid.SliceOf(rapid.Int()).Draw(rt, "plain"),
		}
		for range rapid.IntRange(0, 4).Draw(rt, "rows") {
			in.Rows = append(in.Rows, presizeRow{ID: rapid.String().Draw(rt, "id"), Tags: strs.Draw(rt, "tags")})
		}
		text, err := json.Marshal(in)
		if err != nil {
			rt.Fatal(err)
		}
		var plain, sized presizeIn
		p.Presize(text, unsafe.Pointer(&sized))
		errPlain, errSized := fastjson.Unmarshal(text, &plain), fastjson.Unmarshal(text, &sized)
		if errPlain != nil || errSized != nil {
			rt.Fatalf("decode: %v, %v", errPlain, errSized)
		}
		if !reflect.DeepEqual(plain, sized) {
			rt.Fatalf("presized decode = %+v, plain decode = %+v", sized, plain)
		}
		for _, s := range []reflect.Value{reflect.ValueOf(sized.IDs), reflect.ValueOf(sized.Nums), reflect.ValueOf(sized.Rows), reflect.ValueOf(sized.Nested), reflect.ValueOf(sized.Plain)} {
			if s.Len() > 0 && s.Cap()-s.Len() > s.Len()/4+1 {
				rt.Fatalf("%v: len %d, cap %d", s.Type(), s.Len(), s.Cap())
			}
		}
	})
}

// Text that is not an object, or is cut short, sizes what it reached and
// leaves the rest; it never panics.
func TestPresizeBadText(t *testing.T) {
	p := NewPresizer(reflect.TypeFor[presizeIn]())
	for _, text := range []string{``, `[`, `{"ids":["a","b"],"rows":[{`, `{"ids":`, `null`, `{"ids":"x"}`} {
		var v presizeIn
		p.Presize([]byte(text), unsafe.Pointer(&v))
		if text == `{"ids":["a","b"],"rows":[{` && cap(v.IDs) != 2 {
			t.Errorf("%s: cap(ids) = %d, want 2", text, cap(v.IDs))
		}
		if text != `{"ids":["a","b"],"rows":[{` && (v.IDs != nil || v.Rows != nil) {
			t.Errorf("%s: sized %v %v", text, v.IDs, v.Rows)
		}
	}
}
