package surface

import (
	"bytes"
	"cmp"
	"slices"
	"testing"
	"unicode/utf16"

	"pgregory.net/rapid"

	"github.com/agentsurface/agentsurface/internal/canonical"
)

// utf16Order is the spec's order of strings (semantics §5, §16.2): by
// UTF-16 code units, an invalid UTF-8 byte reading as U+FFFD (as a Go
// []rune conversion reads it).
func utf16Order(a, b string) int {
	return slices.Compare(utf16.Encode([]rune(a)), utf16.Encode([]rune(b)))
}

// sign reduces a comparison result to -1, 0 or 1.
func sign(n int) int { return cmp.Compare(n, 0) }

// wireText draws strings of ASCII, BMP characters on both sides of the
// surrogates, supplementary characters and invalid or truncated UTF-8.
var wireText = rapid.Custom(func(t *rapid.T) string {
	parts := rapid.SliceOfN(rapid.SampledFrom([]string{
		"a", "Z", "9", "#", "é", "\ue000", "\uffff", "\ufffd", "😀", "😁", "\xff", "\xfe", "\x80", "\xe2\x82", "\xf0\x9f", "€",
	}), 0, 6).Draw(t, "parts")
	var b bytes.Buffer
	for _, p := range parts {
		b.WriteString(p)
	}
	return b.String()
})

// AS-WIRE-005, AS-CONFIRM-002: property — wire names and canonical JSON
// order strings alike, by the spec's UTF-16 order: the catalog sort of
// wire keys agrees with canonical.CompareUTF16 wherever the keys differ
// in UTF-16, and canonical JSON writes object members in that same order.
// The catalog order stays total (distinct keys never compare equal) even
// for keys equal in UTF-16.
func TestUTF16OrderAgrees_AS_WIRE_005(t *testing.T) {
	for _, c := range []struct {
		a, b string
		want int
	}{
		{"a", "b", -1},
		{"ab", "a", 1},
		{"", "", 0},
		{"😀", "\uffff", -1}, // surrogate 0xD83D < 0xFFFF; bytes say the opposite
		{"\ue000", "😀", 1},
		{"x😀", "x\uffff", -1},
		{"\xff", "\xfe", 0},   // both U+FFFD
		{"\xff", "\ufffd", 0}, // an invalid byte is U+FFFD
		{"\xe2\x82", "€", 1},  // U+FFFD > U+20AC, though a byte prefix
		{"\xf0\x9f", "😀", 1},  // U+FFFD U+FFFD > U+D83D U+DE00
		{"é", "e", 1},
	} {
		if got := sign(canonical.CompareUTF16(c.a, c.b)); got != c.want || utf16Order(c.a, c.b) != c.want {
			t.Errorf("CompareUTF16(%q, %q) = %d, want %d", c.a, c.b, got, c.want)
		}
	}
	rapid.Check(t, func(t *rapid.T) {
		a, b := wireText.Draw(t, "a"), wireText.Draw(t, "b")
		want := utf16Order(a, b)
		if got := sign(canonical.CompareUTF16(a, b)); got != want {
			t.Fatalf("CompareUTF16(%q, %q) = %d, want %d", a, b, got, want)
		}
		ka, kb := wireKey{CapabilityID: "view:t." + a}, wireKey{CapabilityID: "view:t." + b}
		wa, wb := wireSortKey{&ka, ka.CapabilityID + "#"}, wireSortKey{&kb, kb.CapabilityID + "#"}
		got := sign(wa.compare(wb))
		switch {
		case want != 0 && got != want:
			t.Fatalf("wire order of %q and %q is %d, canonical order %d", a, b, got, want)
		case got != -sign(wb.compare(wa)) || (got == 0) != (a == b):
			t.Fatalf("wire order of %q and %q is not total: %d", a, b, got)
		}
		if want != 0 {
			text, err := canonical.Marshal(map[string]any{a: 1, b: 2})
			if err != nil {
				t.Fatal(err)
			}
			first := bytes.Index(text, []byte(`:1`)) < bytes.Index(text, []byte(`:2`))
			if first != (want < 0) {
				t.Fatalf("canonical JSON %s orders %q and %q against the wire order %d", text, a, b, want)
			}
		}
	})
}
