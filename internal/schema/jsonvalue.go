package schema

import (
	"math"
	"slices"
)

// jsonEqual reports whether two decoded JSON values are equal as JSON:
// numbers compare as float64 (so -0 equals 0 and 1 equals 1.0), objects
// regardless of key order, arrays element by element.
func jsonEqual(a, b any) bool {
	ka, fa := classify(a)
	kb, fb := classify(b)
	if ka != kb {
		return false
	}
	switch ka {
	case kNull:
		return true
	case kBool:
		return a.(bool) == b.(bool)
	case kNumber:
		return fa == fb
	case kString:
		return a.(string) == b.(string)
	case kArray:
		x, y := a.([]any), b.([]any)
		if len(x) != len(y) {
			return false
		}
		for i := range x {
			if !jsonEqual(x[i], y[i]) {
				return false
			}
		}
		return true
	case kObject:
		x, y := a.(map[string]any), b.(map[string]any)
		if len(x) != len(y) {
			return false
		}
		for k, xv := range x {
			yv, ok := y[k]
			if !ok || !jsonEqual(xv, yv) {
				return false
			}
		}
		return true
	}
	// Values that are not JSON are never equal to anything.
	return false
}

// allUnique reports whether no two elements of a are equal as JSON.
func allUnique(a []any) bool {
	if len(a) <= 16 {
		for i := 1; i < len(a); i++ {
			for j := 0; j < i; j++ {
				if jsonEqual(a[i], a[j]) {
					return false
				}
			}
		}
		return true
	}
	type entry struct {
		h uint64
		i int
	}
	es := make([]entry, len(a))
	for i, e := range a {
		es[i] = entry{jsonHash(e), i}
	}
	slices.SortFunc(es, func(x, y entry) int {
		switch {
		case x.h < y.h:
			return -1
		case x.h > y.h:
			return 1
		}
		return x.i - y.i
	})
	for i := 1; i < len(es); i++ {
		for j := i - 1; j >= 0 && es[j].h == es[i].h; j-- {
			if jsonEqual(a[es[i].i], a[es[j].i]) {
				return false
			}
		}
	}
	return true
}

// FNV-1a constants used by jsonHash.
const (
	hashBasis = 0xcbf29ce484222325
	hashPrime = 0x100000001b3
)

// hashBytes folds s into h with FNV-1a.
func hashBytes(h uint64, s string) uint64 {
	for i := 0; i < len(s); i++ {
		h ^= uint64(s[i])
		h *= hashPrime
	}
	return h
}

// hashWord folds x into h.
func hashWord(h, x uint64) uint64 {
	for i := 0; i < 8; i++ {
		h ^= x & 0xff
		h *= hashPrime
		x >>= 8
	}
	return h
}

// mix finalises a hash so that sums of hashes stay well distributed.
func mix(x uint64) uint64 {
	x ^= x >> 33
	x *= 0xff51afd7ed558ccd
	x ^= x >> 33
	x *= 0xc4ceb9fe1a85ec53
	x ^= x >> 33
	return x
}

// jsonHash returns a hash of a decoded JSON value consistent with
// jsonEqual: equal values hash equally.
func jsonHash(v any) uint64 {
	k, f := classify(v)
	h := hashWord(hashBasis, uint64(k))
	switch k {
	case kBool:
		if v.(bool) {
			h = hashWord(h, 1)
		}
	case kNumber:
		if f == 0 {
			f = 0 // -0 hashes as 0
		}
		h = hashWord(h, math.Float64bits(f))
	case kString:
		h = hashBytes(h, v.(string))
	case kArray:
		for _, e := range v.([]any) {
			h = hashWord(h, jsonHash(e))
		}
	case kObject:
		// Order-independent: a sum of per-member hashes.
		var sum uint64
		for key, e := range v.(map[string]any) {
			sum += mix(hashWord(hashBytes(hashBasis, key), jsonHash(e)))
		}
		h = hashWord(h, sum)
	}
	return mix(h)
}
