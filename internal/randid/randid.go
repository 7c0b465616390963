// Package randid makes the random ids of the module, in one place.
//
// Where an id's format is free, it is [Text]: crypto/rand.Text, 26
// base32 characters (A–Z, 2–7) holding 130 random bits, unguessable and
// safe in URLs, headers, cookies and file names. Where the specification
// fixes a base62 format (the registry's srf_, inv_ and cnf_ ids,
// semantics §1), it is [Base62]: characters drawn uniformly and
// independently from 0–9, A–Z, a–z.
package randid

import (
	"crypto/rand"
	mrand "math/rand/v2"
)

// Alphabet62 is the base62 alphabet of the specification, in its order.
const Alphabet62 = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"

// Text returns 26 random base32 characters (130 bits from crypto/rand):
// an id nobody can guess, for sessions, tokens and names.
func Text() string { return rand.Text() }

// Source is a source of uniformly distributed 64-bit values; every
// math/rand/v2 Source is one.
type Source interface {
	Uint64() uint64
}

// runtimeSource is math/rand/v2's runtime generator (ChaCha8, seeded
// from the operating system per thread).
type runtimeSource struct{}

func (runtimeSource) Uint64() uint64 { return mrand.Uint64() }

// Base62 returns prefix followed by n random base62 characters, drawn
// from math/rand/v2's runtime generator: ids that must not collide, not
// secrets (use [Text] for those).
func Base62(prefix string, n int) string {
	return string(AppendBase62(make([]byte, 0, len(prefix)+n), runtimeSource{}, prefix, n))
}

// pow62 is 62^10, the most base62 digits one 64-bit draw can hold.
const pow62 = 839299365868340224

// accept bounds the draws that are used: the largest multiple of pow62
// not above 2^64. A draw below it is uniform modulo pow62, so its ten
// base62 digits are uniform and independent; the rest (4.5%) are drawn
// again. Taking digits of any draw instead would favour the low digits
// of the tenth place.
const accept = 21 * pow62

// AppendBase62 appends prefix and n base62 characters drawn uniformly
// from src to b and returns the extended slice.
func AppendBase62(b []byte, src Source, prefix string, n int) []byte {
	b = append(b, prefix...)
	for n > 0 {
		v := src.Uint64()
		if v >= accept {
			continue
		}
		for k := 0; k < 10 && n > 0; k++ {
			b = append(b, Alphabet62[v%62])
			v /= 62
			n--
		}
	}
	return b
}
