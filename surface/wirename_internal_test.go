package surface

import (
	"slices"
	"testing"
	"unicode/utf16"

	"pgregory.net/rapid"
)

// AS-WIRE-005: catalog keys sort in UTF-16 code-unit order, as the
// reference's JavaScript sort does, and the order is total even for
// invalid UTF-8.
func TestWireCompareUTF16_AS_WIRE_005(t *testing.T) {
	for _, c := range []struct {
		a, b string
		want int
	}{
		{"a", "b", -1},
		{"ab", "a", 1},
		{"", "", 0},
		{"😀", "\uffff", -1}, // surrogate 0xD83D < 0xFFFF; bytes say the opposite
		{"\ue000", "😀", 1},
		{"😀", "😁", -1},
		{"x😀", "x\uffff", -1},
		{"\xff", "\xfe", 1},  // both U+FFFD: by bytes
		{"\xe2\x82", "€", 1}, // U+FFFD > U+20AC, though a byte prefix
		{"é", "e", 1},
	} {
		if got := compareUTF16(c.a, c.b); wireSign(got) != c.want {
			t.Errorf("compareUTF16(%q, %q) = %d, want %d", c.a, c.b, got, c.want)
		}
	}
	str := rapid.StringOf(rapid.RuneFrom([]rune("aZ9#é\ue000\uffff😀😁")))
	rapid.Check(t, func(t *rapid.T) {
		a, b := str.Draw(t, "a"), str.Draw(t, "b")
		want := slices.Compare(utf16.Encode([]rune(a)), utf16.Encode([]rune(b)))
		if got := wireSign(compareUTF16(a, b)); got != want {
			t.Fatalf("compareUTF16(%q, %q) = %d, want %d", a, b, got, want)
		}
	})
	bytes := rapid.SliceOfN(rapid.SampledFrom([]byte("a\x80\xbf\xe2\x82\xac\xf0\x9f\x98\x80\xff")), 0, 8)
	rapid.Check(t, func(t *rapid.T) {
		a, b, c := string(bytes.Draw(t, "a")), string(bytes.Draw(t, "b")), string(bytes.Draw(t, "c"))
		ab, ba := wireSign(compareUTF16(a, b)), wireSign(compareUTF16(b, a))
		if ab != -ba || (ab == 0) != (a == b) {
			t.Fatalf("compareUTF16(%q, %q) = %d, reversed %d", a, b, ab, ba)
		}
		if ab <= 0 && wireSign(compareUTF16(b, c)) <= 0 && wireSign(compareUTF16(a, c)) > 0 {
			t.Fatalf("not transitive: %q ≤ %q ≤ %q", a, b, c)
		}
	})
}

func wireSign(n int) int {
	switch {
	case n < 0:
		return -1
	case n > 0:
		return 1
	}
	return 0
}
