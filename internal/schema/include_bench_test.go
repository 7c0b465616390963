package schema

import (
	"strconv"
	"testing"
)

// BenchmarkCompareDefs compares a union of n definitions with itself
// (whitespace apart, so the proof runs): the proof is quadratic in n, and
// the budget bounds it, so the cost stops growing once the budget is
// reached (from a few hundred definitions on); what remains grows with
// the text, which is read once.
func BenchmarkCompareDefs(b *testing.B) {
	for _, n := range []int{250, 1000, 2000, 4000} {
		old, new := defsUnion(n, ""), defsUnion(n, `,"description":"x"`)
		b.Run(strconv.Itoa(n), func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				Compare(old, new, nil)
			}
		})
	}
}

// BenchmarkCompareTypical compares the typical schema with itself, the
// proof run in full both ways.
func BenchmarkCompareTypical(b *testing.B) {
	old, new := []byte(typicalSchema), []byte(typicalSchema+" ")
	b.ReportAllocs()
	for b.Loop() {
		if d := Compare(old, new, nil); d.Wider || d.Narrower {
			b.Fatal(d)
		}
	}
}

// BenchmarkProofStep measures the cost of a proof step: two proofs that
// run out of ProofWork on nested unions, the text read beforehand.
func BenchmarkProofStep(b *testing.B) {
	s := `{"type":"string"}`
	for range 12 {
		s = `{"anyOf":[` + s + `,` + s + `,{"type":"integer"}]}`
	}
	a, err := parseLoose([]byte(s))
	if err != nil {
		b.Fatal(err)
	}
	c, _ := parseLoose([]byte(s))
	b.ReportAllocs()
	for b.Loop() {
		if why, _ := includes(a, c, ProofWork); why != tooComplex {
			b.Fatal(why)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/ProofWork, "ns/step")
}
