package canonical

import (
	"encoding/json"
	"math"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"
)

// MaxDepth is the maximum nesting depth of arrays and objects accepted by
// [Append] and [Canonicalize]: a value nested deeper, or a cyclic Go value,
// is rejected with an [*Error] instead of exhausting the stack.
const MaxDepth = 1000

// Append appends the canonical encoding of v to dst.
//
// v may be nil, a bool, a string, a float64 or float32, any integer kind, a
// [json.Number], a []any, a map[string]any, a []string, a map[string]string
// or a [json.RawMessage] (whose text is parsed and canonicalised as by
// [Canonicalize]); elements of slices and maps may again be any of these.
// Any other Go value is encoded with [json.Marshal] and the result
// canonicalised, so struct tags, Marshaler implementations and the like are
// honoured.
//
// All numbers become doubles first, as in JavaScript: integers beyond 2^53
// and json.Number values are rounded to the nearest double. A float32 is
// taken as the double that encoding/json's text for it denotes (float32(0.1)
// encodes as 0.1), so a value encodes the same whether it is passed directly
// or after a round trip through encoding/json. A nil json.RawMessage is
// null, as in encoding/json.
//
// On failure (a non-finite number, invalid JSON text, nesting deeper than
// [MaxDepth], a value encoding/json cannot marshal) it returns dst with its
// original length and an [*Error].
func Append(dst []byte, v any) ([]byte, error) {
	e := encoder{buf: dst}
	if err := e.value(v, 0); err != nil {
		return dst, err
	}
	return e.buf, nil
}

// Marshal returns the canonical encoding of v; see [Append]. To hash or
// compare encodings without allocating each time, use [Digest] or Append to
// a reused buffer.
func Marshal(v any) ([]byte, error) {
	b, err := Append(nil, v)
	if err != nil {
		return nil, err
	}
	return b, nil
}

// Digest returns the fingerprint of v: [Hex]([FNV1a64]) of its canonical
// encoding (see [Append]). The encoding is hashed as it is produced, without
// keeping it whole in memory.
func Digest(v any) (string, error) {
	e := encoder{buf: make([]byte, 0, 2*digestChunk), hash: fnvOffset64, foldAt: digestChunk}
	if err := e.value(v, 0); err != nil {
		return "", err
	}
	return Hex(fnv1a64(e.hash, e.buf)), nil
}

// digestChunk is the buffered length beyond which [Digest] folds the
// encoding produced so far into the hash. It is small on purpose: FNV-1a
// is one multiply chain, a few cycles per byte of latency, and folding a
// few dozen bytes at a time lets the processor run that chain alongside
// the encoding of the next members (32 kB of rows: about 15 % faster than
// folding every kilobyte).
const digestChunk = 32

// encoder produces the canonical encoding of Go values.
type encoder struct {
	buf []byte
	// pairs is a stack holding, for each map being encoded, its members,
	// and order a stack holding their sort keys in key order.
	pairs []pair[any]
	order []sortKey
	// shapes holds, per depth (up to maxShapeDepth), the sorted keys of
	// the last map encoded there without duplicates, from the second map
	// at that depth on. A map with the same keys (the rows of a table,
	// say) is encoded in that order, looked up key by key, without
	// iterating and sorting it again. A value with one map per depth
	// remembers nothing.
	shapes [maxShapeDepth][]string
	sorted [maxShapeDepth]bool // a map at this depth was sorted
	// scan is reused for json.RawMessage values and the encoding/json
	// fallback.
	scan scanner

	// When foldAt > 0 (streaming for Digest), buf is folded into hash
	// (FNV-1a over UTF-16 units) and emptied whenever it reaches foldAt
	// bytes between two values.
	foldAt int
	hash   uint64
}

// pair is one member of a map being encoded.
type pair[V any] struct {
	key string
	val V
}

// flush folds the buffer into the hash when streaming and it is full. It is
// only called between values, where buf ends with a complete UTF-8 sequence.
func (e *encoder) flush() {
	switch {
	case e.foldAt > 0:
		if len(e.buf) >= e.foldAt {
			e.fold()
		}
	case len(e.buf) >= growMin && cap(e.buf)-len(e.buf) < growMin:
		// Double the buffer: append alone grows large slices by about
		// 1.25x, which for a 32 kB encoding means some 20 copies.
		e.buf = slices.Grow(e.buf, cap(e.buf))
	}
}

// growMin is the length from which, and the free space below which, the
// encoder doubles its buffer.
const growMin = 512

// fold folds the buffer into the hash and empties it.
func (e *encoder) fold() {
	e.hash = fnv1a64(e.hash, e.buf)
	e.buf = e.buf[:0]
}

// value encodes v, which is enclosed in depth arrays and objects.
func (e *encoder) value(v any, depth int) error {
	switch x := v.(type) {
	case nil:
		e.buf = append(e.buf, "null"...)
	case bool:
		e.buf = strconv.AppendBool(e.buf, x)
	case string:
		e.buf = appendString(e.buf, x)
	case float64:
		return e.float(x)
	case float32:
		return e.float32(x)
	case int:
		e.int(int64(x))
	case int8:
		e.int(int64(x))
	case int16:
		e.int(int64(x))
	case int32:
		e.int(int64(x))
	case int64:
		e.int(x)
	case uint:
		e.uint(uint64(x))
	case uint8:
		e.uint(uint64(x))
	case uint16:
		e.uint(uint64(x))
	case uint32:
		e.uint(uint64(x))
	case uint64:
		e.uint(x)
	case uintptr:
		e.uint(uint64(x))
	case json.Number:
		return e.number(x)
	case []any:
		if depth+1 > MaxDepth {
			return &Error{Reason: reasonTooDeep, Offset: -1, Err: ErrTooDeep}
		}
		if x == nil {
			e.buf = append(e.buf, "null"...)
			return nil
		}
		e.buf = append(e.buf, '[')
		for i, el := range x {
			if i > 0 {
				e.buf = append(e.buf, ',')
			}
			if err := e.value(el, depth+1); err != nil {
				return err
			}
			e.flush()
		}
		e.buf = append(e.buf, ']')
	case map[string]any:
		if depth+1 > MaxDepth {
			return &Error{Reason: reasonTooDeep, Offset: -1, Err: ErrTooDeep}
		}
		if x == nil {
			e.buf = append(e.buf, "null"...)
			return nil
		}
		return e.object(x, depth+1)
	case []string:
		if depth+1 > MaxDepth {
			return &Error{Reason: reasonTooDeep, Offset: -1, Err: ErrTooDeep}
		}
		if x == nil {
			e.buf = append(e.buf, "null"...)
			return nil
		}
		e.buf = append(e.buf, '[')
		for i, s := range x {
			if i > 0 {
				e.buf = append(e.buf, ',')
			}
			e.buf = appendString(e.buf, s)
			e.flush()
		}
		e.buf = append(e.buf, ']')
	case map[string]string:
		if x == nil {
			e.buf = append(e.buf, "null"...)
			return nil
		}
		if depth+1 > MaxDepth {
			return &Error{Reason: reasonTooDeep, Offset: -1, Err: ErrTooDeep}
		}
		e.stringObject(x)
	case json.RawMessage:
		if x == nil {
			e.buf = append(e.buf, "null"...)
			return nil
		}
		return e.text(x, depth)
	default:
		raw, err := json.Marshal(v)
		if err != nil {
			return &Error{Reason: "cannot marshal value of type " + reflect.TypeOf(v).String(), Offset: -1, Err: err}
		}
		return e.text(raw, depth)
	}
	return nil
}

// object encodes the members of m in UTF-16 key order; depth counts m.
func (e *encoder) object(m map[string]any, depth int) error {
	if e.pairs == nil {
		e.pairs = make([]pair[any], 0, max(len(m), stackCap))
		e.order = make([]sortKey, 0, max(len(m), stackCap))
	}
	base, obase := len(e.pairs), len(e.order)
	if depth < maxShapeDepth && len(e.shapes[depth]) == len(m) && len(m) > 0 {
		if keys := e.shapes[depth]; e.lookupShape(m, keys) {
			err := e.members(e.pairs[base:], depth)
			e.pairs = e.pairs[:base]
			return err
		}
		e.pairs = e.pairs[:base]
	}
	for k, v := range m {
		e.order = append(e.order, sortKey{keyPrefix(k), len(e.pairs) - base})
		e.pairs = append(e.pairs, pair[any]{k, v})
	}
	ps, order := e.pairs[base:], e.order[obase:]
	dups := sortKeys(order, func(i int) string { return ps[i].key }, func(i, j int) int {
		// Distinct Go keys that differ only in invalid UTF-8 bytes (each
		// U+FFFD) encode alike: order them by bytes, as encoding/json emits
		// them; the last is kept, as JSON.parse keeps of that output.
		return strings.Compare(ps[i].key, ps[j].key)
	})
	if !dups && depth < maxShapeDepth {
		if e.sorted[depth] {
			e.rememberShape(depth, ps, order)
		}
		e.sorted[depth] = true
	}
	e.buf = append(e.buf, '{')
	first := true
	for i, o := range order {
		p := &ps[o.idx]
		if dups && i+1 < len(order) && compareUTF16(p.key, ps[order[i+1].idx].key) == 0 {
			continue
		}
		if !first {
			e.buf = append(e.buf, ',')
		}
		first = false
		if err := e.member(p, depth); err != nil {
			return err
		}
	}
	e.pairs, e.order = e.pairs[:base], e.order[:obase]
	e.buf = append(e.buf, '}')
	return nil
}

// maxShapeDepth bounds the depths at which the encoder remembers key
// orders.
const maxShapeDepth = 8

// lookupShape appends to e.pairs the members of m under keys, in that
// order, and reports whether m has them all. len(m) == len(keys), so m
// then has exactly those keys.
func (e *encoder) lookupShape(m map[string]any, keys []string) bool {
	for _, k := range keys {
		v, ok := m[k]
		if !ok {
			return false
		}
		e.pairs = append(e.pairs, pair[any]{k, v})
	}
	return true
}

// rememberShape keeps the keys of ps, in order, as the shape of depth.
func (e *encoder) rememberShape(depth int, ps []pair[any], order []sortKey) {
	keys := e.shapes[depth][:0]
	for _, o := range order {
		keys = append(keys, ps[o.idx].key)
	}
	e.shapes[depth] = keys
}

// members encodes ps, members in key order without duplicates, as an
// object.
func (e *encoder) members(ps []pair[any], depth int) error {
	e.buf = append(e.buf, '{')
	for i := range ps {
		if i > 0 {
			e.buf = append(e.buf, ',')
		}
		if err := e.member(&ps[i], depth); err != nil {
			return err
		}
	}
	e.buf = append(e.buf, '}')
	return nil
}

// member encodes one "key":value member.
func (e *encoder) member(p *pair[any], depth int) error {
	e.buf = appendString(e.buf, p.key)
	e.buf = append(e.buf, ':')
	if s, ok := p.val.(string); ok {
		e.buf = appendString(e.buf, s)
	} else if err := e.value(p.val, depth); err != nil {
		return err
	}
	e.flush()
	return nil
}

// stringObject encodes a map[string]string like [encoder.object].
func (e *encoder) stringObject(m map[string]string) {
	keys := make([]string, 0, len(m))
	order := make([]sortKey, 0, len(m))
	for k := range m {
		order = append(order, sortKey{keyPrefix(k), len(keys)})
		keys = append(keys, k)
	}
	dups := sortKeys(order, func(i int) string { return keys[i] }, func(i, j int) int {
		return strings.Compare(keys[i], keys[j]) // see encoder.object
	})
	e.buf = append(e.buf, '{')
	first := true
	for i, o := range order {
		k := keys[o.idx]
		if dups && i+1 < len(order) && compareUTF16(k, keys[order[i+1].idx]) == 0 {
			continue
		}
		if !first {
			e.buf = append(e.buf, ',')
		}
		first = false
		e.buf = appendString(e.buf, k)
		e.buf = append(e.buf, ':')
		e.buf = appendString(e.buf, m[k])
		e.flush()
	}
	e.buf = append(e.buf, '}')
}

// text canonicalises the JSON text raw, enclosed in depth containers.
func (e *encoder) text(raw []byte, depth int) error {
	e.scan.in, e.scan.pos, e.scan.out = raw, 0, e.buf
	err := e.scan.document(depth)
	e.buf = e.scan.out
	e.scan.in, e.scan.out = nil, nil
	return err
}

// float encodes a float64.
func (e *encoder) float(f float64) error {
	if math.IsNaN(f) || math.IsInf(f, 0) {
		return &Error{Reason: reasonNonFinite, Offset: -1}
	}
	e.buf = appendFloat(e.buf, f)
	return nil
}

// float32 encodes a float32 as the double its shortest decimal form denotes.
func (e *encoder) float32(f float32) error {
	g := float64(f)
	if math.IsNaN(g) || math.IsInf(g, 0) {
		return &Error{Reason: reasonNonFinite, Offset: -1}
	}
	var tmp [32]byte
	g, _ = strconv.ParseFloat(string(strconv.AppendFloat(tmp[:0], g, 'g', -1, 32)), 64)
	e.buf = appendFloat(e.buf, g)
	return nil
}

// maxExact is 2^53: integers up to it in magnitude are exact doubles.
const maxExact = 1 << 53

// int encodes an integer as the nearest double.
func (e *encoder) int(i int64) {
	if -maxExact <= i && i <= maxExact {
		e.buf = strconv.AppendInt(e.buf, i, 10)
		return
	}
	e.buf = appendFloat(e.buf, float64(i))
}

// uint encodes an unsigned integer as the nearest double.
func (e *encoder) uint(u uint64) {
	if u <= maxExact {
		e.buf = strconv.AppendUint(e.buf, u, 10)
		return
	}
	e.buf = appendFloat(e.buf, float64(u))
}

// number encodes a json.Number as the nearest double. Like encoding/json,
// it treats the empty Number as 0 and rejects text that is not a JSON
// number.
func (e *encoder) number(n json.Number) error {
	if n == "" {
		e.buf = append(e.buf, '0')
		return nil
	}
	end, simple := scanNumber(n)
	if end != len(n) {
		return &Error{Reason: reasonNumberType, Offset: -1}
	}
	if simple {
		e.buf = appendSimpleInt(e.buf, n)
		return nil
	}
	f, err := strconv.ParseFloat(string(n), 64)
	if err != nil {
		return &Error{Reason: reasonNonFinite, Offset: -1}
	}
	e.buf = appendFloat(e.buf, f)
	return nil
}

// appendFloat appends the ECMAScript Number::toString form of the finite
// double f: the shortest decimal that round-trips, without exponent from
// 1e-6 up to (excluding) 1e21, and -0 as 0. This is encoding/json's float64
// encoding.
func appendFloat(dst []byte, f float64) []byte {
	if f == 0 {
		return append(dst, '0') // also -0
	}
	abs := math.Abs(f)
	if abs < 1e15 && f == math.Trunc(f) {
		return strconv.AppendInt(dst, int64(f), 10)
	}
	format := byte('f')
	if abs < 1e-6 || abs >= 1e21 {
		format = 'e'
	}
	dst = strconv.AppendFloat(dst, f, format, -1, 64)
	if format == 'e' {
		// Clean up e-07 to e-7, as ECMAScript prints exponents.
		n := len(dst)
		if n >= 4 && dst[n-4] == 'e' && dst[n-3] == '-' && dst[n-2] == '0' {
			dst[n-2] = dst[n-1]
			dst = dst[:n-1]
		}
	}
	return dst
}

// appendString appends s as a canonical JSON string: only '"', '\\' and
// code units below U+0020 are escaped (the latter as \b \f \n \r \t or
// \u00xx); everything else, including '<', '>', '&', U+007F and
// U+2028/U+2029, is copied raw. Each invalid UTF-8 byte becomes U+FFFD.
// AppendString appends the canonical encoding of the string s (invalid
// UTF-8 bytes as U+FFFD). It never fails and does not allocate beyond dst.
func AppendString(dst []byte, s string) []byte { return appendString(dst, s) }

func appendString(dst []byte, s string) []byte {
	// Short strings are the common case: scan them bytewise, inline.
	i := 0
	for i < len(s) && i < 16 && plain[s[i]] != 0 {
		i++
	}
	if i == 16 {
		i += plainPrefix(s[i:])
	}
	if i < len(s) {
		return appendStringSlow(dst, s, i)
	}
	n := len(dst)
	if cap(dst)-n < len(s)+2 {
		dst = slices.Grow(dst, len(s)+2)
	}
	dst = dst[:n+len(s)+2]
	dst[n] = '"'
	copy(dst[n+1:], s)
	dst[len(dst)-1] = '"'
	return dst
}

// appendStringSlow is [appendString] for a string whose byte i is not plain.
func appendStringSlow(dst []byte, s string, i int) []byte {
	dst = append(dst, '"')
	start := 0
	for i < len(s) {
		c := s[i]
		if plain[c] != 0 {
			i++
			continue
		}
		if c < utf8.RuneSelf {
			dst = append(dst, s[start:i]...)
			dst = appendRune(dst, rune(c))
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			dst = append(dst, s[start:i]...)
			dst = append(dst, replacement...)
			i++
			start = i
			continue
		}
		i += size
	}
	dst = append(dst, s[start:]...)
	return append(dst, '"')
}

// appendRune appends r as it appears inside a canonical JSON string.
func appendRune(dst []byte, r rune) []byte {
	switch r {
	case '"':
		return append(dst, '\\', '"')
	case '\\':
		return append(dst, '\\', '\\')
	case '\b':
		return append(dst, '\\', 'b')
	case '\f':
		return append(dst, '\\', 'f')
	case '\n':
		return append(dst, '\\', 'n')
	case '\r':
		return append(dst, '\\', 'r')
	case '\t':
		return append(dst, '\\', 't')
	}
	if r < 0x20 {
		const digits = "0123456789abcdef"
		return append(dst, '\\', 'u', '0', '0', digits[r>>4], digits[r&0xf])
	}
	return utf8.AppendRune(dst, r)
}
