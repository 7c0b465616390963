package canonical

import (
	"math/bits"
	"slices"
	"unicode/utf16"
	"unicode/utf8"
)

// text is the set of types holding UTF-8 text, so that the comparison and
// hashing code below serves both Go strings and byte slices without copying.
type text interface{ ~string | ~[]byte }

// decodeRune decodes the first rune of s like [utf8.DecodeRuneInString]:
// an invalid byte yields (utf8.RuneError, 1), an empty s (utf8.RuneError, 0).
func decodeRune[T text](s T) (rune, int) {
	if len(s) > 0 && s[0] < utf8.RuneSelf {
		return rune(s[0]), 1
	}
	// At most UTFMax bytes are converted; the conversion does not escape, so
	// the compiler keeps it on the stack (and it is free for strings).
	return utf8.DecodeRuneInString(string(s[:min(len(s), utf8.UTFMax)]))
}

// CompareUTF16 orders a and b by their UTF-16 code units, as JavaScript's
// default string comparison (and therefore Array.prototype.sort on object
// keys) does. It returns -1 if a sorts first, +1 if b does and 0 if they are
// equal.
//
// The strings are UTF-8; each invalid byte counts as U+FFFD, as it does
// when encoding/json decodes or encodes such a string. UTF-16 order equals
// UTF-8 byte order except between supplementary characters (U+10000 and up,
// which become surrogates D800–DFFF) and BMP characters from U+E000: "😀"
// sorts before "\uFFFD". The common case, two strings that first differ in
// an ASCII byte, costs one byte comparison per shared byte.
func CompareUTF16(a, b string) int { return compareUTF16(a, b) }

// compareUTF16 is [CompareUTF16] for either representation of text.
func compareUTF16[T text](a, b T) int {
	n := min(len(a), len(b))
	i := 0
	for i < n && a[i] == b[i] {
		i++
	}
	if i == n {
		// One is a prefix of the other. The shorter sorts first unless it
		// ends in an incomplete UTF-8 sequence that the longer one
		// continues: "\xf0\x9f" is U+FFFD U+FFFD, "\xf0\x9f\x98\x80" U+D83D U+DE00.
		if len(a) == len(b) {
			return 0
		}
		long := len(a) > len(b)
		var next byte
		if long {
			next = a[n]
		} else {
			next = b[n]
		}
		if n == 0 || a[n-1] < utf8.RuneSelf || next < 0x80 || next >= 0xC0 {
			if long {
				return 1
			}
			return -1
		}
	} else if ca, cb := a[i], b[i]; ca < utf8.RuneSelf && cb < utf8.RuneSelf {
		// An ASCII byte is always a rune of its own, and the identical prefix
		// decodes identically in both strings, so the bytes are the units.
		if ca < cb {
			return -1
		}
		return 1
	}
	// Back up to just after the last ASCII byte of the shared prefix: that
	// is a rune boundary in both strings (no UTF-8 sequence, valid or not,
	// extends over an ASCII byte), and everything before it is equal.
	for i > 0 && a[i-1] >= utf8.RuneSelf {
		i--
	}
	return compareUnits(a[i:], b[i:])
}

// compareUnits compares a and b unit by unit after decoding them to UTF-16.
func compareUnits[T text](a, b T) int {
	var ia, ib int
	var pa, pb rune // pending low surrogate of the previous rune, or 0
	for {
		var ua, ub rune
		var okA, okB bool
		ua, pa, ia, okA = nextUnit(a, ia, pa)
		ub, pb, ib, okB = nextUnit(b, ib, pb)
		switch {
		case !okA && !okB:
			return 0
		case !okA:
			return -1
		case !okB:
			return 1
		case ua < ub:
			return -1
		case ua > ub:
			return 1
		}
	}
}

// nextUnit returns the next UTF-16 code unit of s, reading from byte offset
// i with pending the not yet returned low surrogate (or 0). ok is false at
// the end of s.
func nextUnit[T text](s T, i int, pending rune) (unit, nextPending rune, next int, ok bool) {
	if pending != 0 {
		return pending, 0, i, true
	}
	if i >= len(s) {
		return 0, 0, i, false
	}
	r, size := decodeRune(s[i:])
	if r >= 0x10000 {
		hi, lo := utf16.EncodeRune(r)
		return hi, lo, i + size, true
	}
	return r, 0, i + size, true
}

// plainPrefix returns the length of the longest prefix of s made of bytes
// that are plain (see the plain table), checking eight bytes at a time.
func plainPrefix[T text](s T) int {
	const (
		lo = 0x0101010101010101
		hi = 0x8080808080808080
	)
	i := 0
	for ; i+8 <= len(s); i += 8 {
		w := uint64(s[i]) | uint64(s[i+1])<<8 | uint64(s[i+2])<<16 | uint64(s[i+3])<<24 |
			uint64(s[i+4])<<32 | uint64(s[i+5])<<40 | uint64(s[i+6])<<48 | uint64(s[i+7])<<56
		// With no byte >= 0x80, a byte is below 0x20, '"' or '\\' exactly
		// when the corresponding subtraction borrows into its top bit.
		if w&hi != 0 || ((w-0x20*lo)|((w^'"'*lo)-lo)|((w^'\\'*lo)-lo))&hi != 0 {
			break
		}
	}
	for i < len(s) && plain[s[i]] != 0 {
		i++
	}
	return i
}

// keyPrefix packs the first 8 bytes of key, zero-padded, into a big-endian
// word, for [comparePrefixes].
func keyPrefix[T text](key T) uint64 {
	if len(key) >= 8 {
		// One big-endian load.
		return uint64(key[0])<<56 | uint64(key[1])<<48 | uint64(key[2])<<40 | uint64(key[3])<<32 |
			uint64(key[4])<<24 | uint64(key[5])<<16 | uint64(key[6])<<8 | uint64(key[7])
	}
	var p uint64
	n := min(len(key), 8)
	for i := 0; i < n; i++ {
		p |= uint64(key[i]) << (56 - 8*i)
	}
	return p
}

// comparePrefixes orders two keys by their [keyPrefix] words when that
// decides [CompareUTF16]: when the first byte where the words differ is
// ASCII in both. A zero padding byte against an ASCII byte means the shorter
// key is a prefix of the longer one, continued by a byte that cannot
// complete a UTF-8 sequence, so it sorts first. ok is false when the words
// are equal or the differing bytes are not both ASCII.
func comparePrefixes(a, b uint64) (c int, ok bool) {
	x := a ^ b
	if x == 0 {
		return 0, false
	}
	shift := 56 - uint(bits.LeadingZeros64(x))&^7
	if (a>>shift)&0xff >= utf8.RuneSelf || (b>>shift)&0xff >= utf8.RuneSelf {
		return 0, false
	}
	if a < b {
		return -1, true
	}
	return 1, true
}

// sortKey is a pointer-free handle on one object member, so that sorting
// members moves 16 bytes and needs no write barriers.
type sortKey struct {
	prefix uint64 // keyPrefix of the member's key
	idx    int    // index of the member
}

// sortKeys sorts order into UTF-16 order of the keys key(idx). Members
// whose keys are equal are ordered by tie(idx1, idx2), and sortKeys reports
// whether there were any. (A comparison sort compares every two elements
// that end up adjacent, so it sees all equal keys.)
func sortKeys[T text](order []sortKey, key func(int) T, tie func(a, b int) int) (dups bool) {
	slices.SortFunc(order, func(a, b sortKey) int {
		if c, ok := comparePrefixes(a.prefix, b.prefix); ok {
			return c
		}
		if c := compareUTF16(key(a.idx), key(b.idx)); c != 0 {
			return c
		}
		dups = true
		return tie(a.idx, b.idx)
	})
	return dups
}

// FNV-1a 64-bit parameters.
const (
	fnvOffset64 = 0xcbf29ce484222325
	fnvPrime64  = 0x100000001b3
)

// FNV1a64 returns the 64-bit FNV-1a hash of the UTF-16 code units of s, the
// function the TypeScript reference calls fnv1a64: starting from the offset
// basis 0xcbf29ce484222325, each code unit (not each UTF-8 byte) is XORed
// into the hash, which is then multiplied by 0x100000001b3 modulo 2^64.
//
// s is UTF-8: a rune above U+FFFF hashes as its two surrogates and an
// invalid byte as U+FFFD. For ASCII text the result equals FNV-1a over the
// bytes.
func FNV1a64(s string) uint64 { return fnv1a64(fnvOffset64, s) }

// FNV1a64Bytes is [FNV1a64] over UTF-8 text held in a byte slice, without
// converting it to a string.
func FNV1a64Bytes(b []byte) uint64 { return fnv1a64(fnvOffset64, b) }

// fnv1a64 continues the hash h over the UTF-16 code units of s.
func fnv1a64[T text](h uint64, s T) uint64 {
	for i := 0; i < len(s); {
		if c := s[i]; c < utf8.RuneSelf {
			h = (h ^ uint64(c)) * fnvPrime64
			i++
			continue
		}
		r, size := decodeRune(s[i:])
		i += size
		if r >= 0x10000 {
			hi, lo := utf16.EncodeRune(r)
			h = (h ^ uint64(hi)) * fnvPrime64
			h = (h ^ uint64(lo)) * fnvPrime64
			continue
		}
		h = (h ^ uint64(r)) * fnvPrime64
	}
	return h
}

// Hex formats h as 16 lowercase hexadecimal digits, zero-padded, the form
// in which the reference prints fingerprints.
func Hex(h uint64) string {
	const digits = "0123456789abcdef"
	var b [16]byte
	for i := 15; i >= 0; i-- {
		b[i] = digits[h&0xf]
		h >>= 4
	}
	return string(b[:])
}
