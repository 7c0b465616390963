package randid

import (
	"math/rand/v2"
	"regexp"
	"strings"
	"testing"
)

// Minted ids are the prefix and n base62 characters (semantics §1).
func TestBase62Format(t *testing.T) {
	re := regexp.MustCompile(`^inv_[0-9A-Za-z]{12}$`)
	seen := map[string]bool{}
	for range 1000 {
		id := Base62("inv_", 12)
		if !re.MatchString(id) {
			t.Fatalf("%q is not inv_ and 12 base62 characters", id)
		}
		if seen[id] {
			t.Fatalf("%q drawn twice", id)
		}
		seen[id] = true
	}
	for _, n := range []int{0, 1, 9, 10, 11, 22} {
		if got := Base62("p", n); len(got) != 1+n || !strings.HasPrefix(got, "p") {
			t.Errorf("Base62(p, %d) = %q", n, got)
		}
	}
}

func TestText(t *testing.T) {
	re := regexp.MustCompile(`^[A-Z2-7]{26}$`)
	a, b := Text(), Text()
	if !re.MatchString(a) || !re.MatchString(b) || a == b {
		t.Fatalf("Text() = %q, %q", a, b)
	}
}

// chiSquare is Pearson's statistic of counts against the uniform
// distribution.
func chiSquare(counts []int) float64 {
	total := 0
	for _, c := range counts {
		total += c
	}
	want := float64(total) / float64(len(counts))
	x := 0.0
	for _, c := range counts {
		d := float64(c) - want
		x += d * d / want
	}
	return x
}

// critical61 is the chi-square critical value for 61 degrees of freedom
// at significance 0.001: a uniform source exceeds it once in 1000 tests.
const critical61 = 100.89

// draws is how many ids of idLen characters the bias test draws: enough
// to see the bias that taking the base62 digits of every 64-bit draw
// gives the tenth character (22 draws in 1363 for 61 of the symbols, 21
// for the other).
const (
	draws = 3_000_000
	idLen = 12
)

// maxChiSquare returns the largest statistic over the positions of ids
// that gen appends, drawing from a fixed-seed source.
func maxChiSquare(gen func(b []byte, src Source) []byte) (worst float64, at int) {
	src := rand.NewPCG(1, 2)
	var index [256]int
	for i := range len(Alphabet62) {
		index[Alphabet62[i]] = i
	}
	counts := make([][62]int, idLen)
	b := make([]byte, 0, idLen)
	for range draws {
		b = gen(b[:0], src)
		for i, c := range b {
			counts[i][index[c]]++
		}
	}
	for i := range counts {
		if x := chiSquare(counts[i][:]); x > worst {
			worst, at = x, i
		}
	}
	return worst, at
}

// Every position of a base62 id is uniform over the alphabet: a chi-square
// test per position, over three million ids from a fixed-seed source, so the
// test is deterministic. The same test fails the two generators the
// module had before (a byte modulo 62, and the digits of every 64-bit
// draw), so it can tell.
func TestBase62Unbiased(t *testing.T) {
	x, at := maxChiSquare(func(b []byte, src Source) []byte { return AppendBase62(b, src, "", idLen) })
	t.Logf("AppendBase62: worst chi-square %.1f at position %d", x, at)
	if x > critical61 {
		t.Fatalf("position %d: chi-square %.1f > %.1f: biased", at, x, critical61)
	}
	byteMod := func(b []byte, src Source) []byte {
		for len(b) < idLen {
			v := src.Uint64()
			for k := 0; k < 8 && len(b) < idLen; k++ {
				b = append(b, Alphabet62[int(byte(v>>(8*k)))%62])
			}
		}
		return b
	}
	allDigits := func(b []byte, src Source) []byte {
		for len(b) < idLen {
			v := src.Uint64()
			for k := 0; k < 10 && len(b) < idLen; k++ {
				b = append(b, Alphabet62[v%62])
				v /= 62
			}
		}
		return b
	}
	for name, gen := range map[string]func([]byte, Source) []byte{"byte%62": byteMod, "digits of every draw": allDigits} {
		x, at := maxChiSquare(gen)
		t.Logf("%s: worst chi-square %.1f at position %d", name, x, at)
		if x <= critical61 {
			t.Errorf("the test cannot see the bias of %s: worst chi-square %.1f at position %d", name, x, at)
		}
	}
}

func BenchmarkBase62(b *testing.B) {
	for b.Loop() {
		_ = Base62("inv_", 12)
	}
}
