package canonical

import (
	"bytes"
	"cmp"
	"strconv"
	"unicode/utf16"
	"unicode/utf8"
)

// Canonicalize parses the JSON text raw and returns its canonical encoding.
//
// Parsing is strict RFC 8259 with JSON.parse semantics: exactly one value,
// optionally surrounded by whitespace; a duplicate object key keeps the last
// value; numbers are read as IEEE-754 doubles. As in encoding/json, an
// invalid UTF-8 byte inside a string is read as U+FFFD, and so is an escaped
// surrogate that is not part of a high-low pair (such as "\ud800"); in both
// cases the replacement character is emitted raw. A number too large for a
// double (such as 1e400) is an error, as non-finite numbers are.
//
// The text is re-emitted directly, without building a tree of Go values;
// only object members that are out of order are moved. On failure it returns
// nil and an [*Error] carrying the byte offset of the problem.
func Canonicalize(raw []byte) ([]byte, error) {
	out, err := AppendCanonicalize(make([]byte, 0, len(raw)), raw)
	if err != nil {
		return nil, err
	}
	return out, nil
}

// AppendCanonicalize is [Canonicalize] appending to dst, which must not
// overlap raw. On failure it returns dst with its original length and an
// [*Error].
func AppendCanonicalize(dst, raw []byte) ([]byte, error) {
	s := scanner{in: raw, out: dst}
	if err := s.document(0); err != nil {
		return dst, err
	}
	return s.out, nil
}

// scanner re-emits one JSON text canonically. Its stacks are shared by all
// nesting levels: each object uses the tail of members and keys beyond the
// length they had when it started, and truncates them when it ends.
type scanner struct {
	in  []byte // the JSON text
	pos int    // read offset in in
	out []byte // canonical output

	// members holds, for every object being scanned, the spans in out of
	// the members emitted so far.
	members []member
	// keys holds decoded object keys that differ from their text in in
	// (escapes, invalid UTF-8) and so cannot be sliced from it.
	keys []byte
	// scratch is the staging copy of an object's members while they are
	// written back in key order, and order their sort order.
	scratch []byte
	order   []sortKey
}

// stackCap is the initial capacity of the member and sort stacks, enough
// for typical objects without regrowing.
const stackCap = 16

// member is one emitted object member. It refers to its key by offsets
// rather than by a slice, so that it holds no pointers and storing it needs
// no write barrier.
type member struct {
	start, end int  // span of `"key":value` in out
	kOff, kEnd int  // span of the decoded key (UTF-8) in in, or in keys
	kBuf       bool // whether the key is in keys
}

// key returns the decoded key of m.
func (s *scanner) key(m member) []byte {
	if m.kBuf {
		return s.keys[m.kOff:m.kEnd]
	}
	return s.in[m.kOff:m.kEnd]
}

// Reasons used by the scanner. They are fixed strings: no input is echoed.
const (
	reasonEOF        = "invalid JSON: unexpected end of input"
	reasonChar       = "invalid JSON: unexpected character"
	reasonTrailing   = "invalid JSON: data after top-level value"
	reasonNumber     = "invalid JSON: malformed number"
	reasonControl    = "invalid JSON: control character in string"
	reasonEscape     = "invalid JSON: invalid escape in string"
	reasonUnterm     = "invalid JSON: unterminated string"
	reasonKey        = "invalid JSON: object key must be a string"
	reasonColon      = "invalid JSON: expected ':' after object key"
	reasonObjectSep  = "invalid JSON: expected ',' or '}' in object"
	reasonArraySep   = "invalid JSON: expected ',' or ']' in array"
	reasonNumberType = "invalid json.Number"
)

// fail returns an *Error for reason at the current offset.
func (s *scanner) fail(reason string) error {
	return &Error{Reason: reason, Offset: s.pos}
}

// peek returns the byte at the read offset, or 0 at the end of the input
// (0 is never valid there, so callers need no separate end check).
func (s *scanner) peek() byte {
	if s.pos < len(s.in) {
		return s.in[s.pos]
	}
	return 0
}

// skipWS skips JSON whitespace.
func (s *scanner) skipWS() {
	for s.pos < len(s.in) && s.in[s.pos] <= ' ' {
		switch s.in[s.pos] {
		case ' ', '\t', '\n', '\r':
			s.pos++
		default:
			return
		}
	}
}

// document scans a whole text: one value and nothing else but whitespace.
// depth is the number of containers enclosing it.
func (s *scanner) document(depth int) error {
	s.skipWS()
	if err := s.value(depth); err != nil {
		return err
	}
	s.skipWS()
	if s.pos < len(s.in) {
		return s.fail(reasonTrailing)
	}
	return nil
}

// value scans one value at the read offset, which must not be whitespace.
func (s *scanner) value(depth int) error {
	if s.pos >= len(s.in) {
		return s.fail(reasonEOF)
	}
	switch c := s.in[s.pos]; c {
	case '{':
		return s.object(depth + 1)
	case '[':
		return s.array(depth + 1)
	case '"':
		_, _, _, err := s.str(false)
		return err
	case 't':
		return s.literal("true")
	case 'f':
		return s.literal("false")
	case 'n':
		return s.literal("null")
	default:
		if c == '-' || '0' <= c && c <= '9' {
			return s.number()
		}
		return s.fail(reasonChar)
	}
}

// literal scans the keyword word.
func (s *scanner) literal(word string) error {
	if !bytes.HasPrefix(s.in[s.pos:], []byte(word)) {
		if len(s.in)-s.pos < len(word) && bytes.HasPrefix([]byte(word), s.in[s.pos:]) {
			s.pos = len(s.in)
			return s.fail(reasonEOF)
		}
		return s.fail(reasonChar)
	}
	s.pos += len(word)
	s.out = append(s.out, word...)
	return nil
}

// array scans an array; depth already counts it.
func (s *scanner) array(depth int) error {
	if depth > MaxDepth {
		return &Error{Reason: reasonTooDeep, Offset: s.pos, Err: ErrTooDeep}
	}
	s.pos++
	s.out = append(s.out, '[')
	s.skipWS()
	if s.peek() == ']' {
		s.pos++
		s.out = append(s.out, ']')
		return nil
	}
	for {
		if err := s.value(depth); err != nil {
			return err
		}
		s.skipWS()
		switch s.peek() {
		case ',':
			s.pos++
			s.out = append(s.out, ',')
			s.skipWS()
		case ']':
			s.pos++
			s.out = append(s.out, ']')
			return nil
		default:
			if s.pos >= len(s.in) {
				return s.fail(reasonEOF)
			}
			return s.fail(reasonArraySep)
		}
	}
}

// object scans an object; depth already counts it. Members are emitted in
// input order; if their keys turn out not to be strictly increasing in
// UTF-16 order they are sorted afterwards, dropping all but the last of
// equal keys. An object of one member needs no stack: its member goes on
// it when a second one comes.
func (s *scanner) object(depth int) error {
	if depth > MaxDepth {
		return &Error{Reason: reasonTooDeep, Offset: s.pos, Err: ErrTooDeep}
	}
	s.pos++
	s.out = append(s.out, '{')
	region := len(s.out)
	base, keyMark := len(s.members), len(s.keys)
	s.skipWS()
	if s.peek() == '}' {
		s.pos++
		s.out = append(s.out, '}')
		return nil
	}
	ordered := true
	var prev member // the member before m
	for n := 0; ; n++ {
		if s.peek() != '"' {
			if s.pos >= len(s.in) {
				return s.fail(reasonEOF)
			}
			return s.fail(reasonKey)
		}
		if n > 0 {
			s.out = append(s.out, ',')
		}
		m := member{start: len(s.out)}
		var err error
		if m.kOff, m.kEnd, m.kBuf, err = s.str(true); err != nil {
			return err
		}
		s.skipWS()
		if s.peek() != ':' {
			if s.pos >= len(s.in) {
				return s.fail(reasonEOF)
			}
			return s.fail(reasonColon)
		}
		s.pos++
		s.out = append(s.out, ':')
		s.skipWS()
		if err := s.value(depth); err != nil {
			return err
		}
		m.end = len(s.out)
		if n > 0 {
			if ordered && compareUTF16(s.key(prev), s.key(m)) >= 0 {
				ordered = false
			}
			if n == 1 {
				if s.members == nil {
					s.members = make([]member, 0, 4) // small: requests are small
				}
				s.members = append(s.members, prev)
			}
			s.members = append(s.members, m)
		}
		prev = m
		s.skipWS()
		switch s.peek() {
		case ',':
			s.pos++
			s.skipWS()
			continue
		case '}':
			s.pos++
		default:
			if s.pos >= len(s.in) {
				return s.fail(reasonEOF)
			}
			return s.fail(reasonObjectSep)
		}
		break
	}
	if !ordered {
		s.reorder(region, s.members[base:])
	}
	s.members = s.members[:base]
	s.keys = s.keys[:keyMark]
	s.out = append(s.out, '}')
	return nil
}

// reorder rewrites the members ms, emitted in input order from offset region
// of out to its end, in UTF-16 key order. Of members with equal keys only
// the last in input order is kept, as JSON.parse does.
func (s *scanner) reorder(region int, ms []member) {
	if s.order == nil {
		s.order = make([]sortKey, 0, max(len(ms), stackCap))
		s.scratch = make([]byte, 0, max(len(s.out)-region, 1024))
	}
	order := s.order[:0]
	for i, m := range ms {
		order = append(order, sortKey{keyPrefix(s.key(m)), i})
	}
	s.order = order
	dups := sortKeys(order, func(i int) []byte { return s.key(ms[i]) }, cmp.Compare[int])
	s.scratch = append(s.scratch[:0], s.out[region:]...)
	s.out = s.out[:region]
	for i, o := range order {
		m := ms[o.idx]
		if dups && i+1 < len(order) && bytes.Equal(s.key(m), s.key(ms[order[i+1].idx])) {
			continue // a later duplicate wins
		}
		if len(s.out) > region {
			s.out = append(s.out, ',')
		}
		s.out = append(s.out, s.scratch[m.start-region:m.end-region]...)
	}
}

// str scans a string and emits it canonically. For an object key (isKey)
// it also returns where the decoded key is: in[off:end], when the key has
// no escapes and is valid UTF-8, or else keys[off:end] (inKeys).
func (s *scanner) str(isKey bool) (off, end int, inKeys bool, err error) {
	in := s.in
	start := s.pos + 1
	i := start
	for i < len(in) && i-start < 16 && plain[in[i]] != 0 {
		i++
	}
	if i-start == 16 {
		i += plainPrefix(in[i:])
	}
	if i < len(in) && in[i] == '"' {
		// Printable ASCII without escapes: the text is already canonical.
		s.out = append(s.out, in[start-1:i+1]...)
		s.pos = i + 1
		return start, i, false, nil
	}
	return s.strSlow(start, i, isKey)
}

// strSlow continues [scanner.str] at offset i, where in[start:i] is plain
// ASCII already known not to need escaping.
func (s *scanner) strSlow(start, i int, isKey bool) (off, end int, inKeys bool, err error) {
	in := s.in
	s.out = append(s.out, in[start-1:i]...)
	keyMark := len(s.keys)
	verbatim := true // the decoded key so far is in[start:i]
	for {
		if i >= len(in) {
			s.pos = i
			return 0, 0, false, s.fail(reasonUnterm)
		}
		c := in[i]
		switch {
		case plain[c] != 0:
			j := i + 1
			for j < len(in) && plain[in[j]] != 0 {
				j++
			}
			s.out = append(s.out, in[i:j]...)
			if !verbatim {
				s.keys = append(s.keys, in[i:j]...)
			}
			i = j
		case c == '"':
			s.out = append(s.out, '"')
			s.pos = i + 1
			if verbatim {
				return start, i, false, nil
			}
			return keyMark, len(s.keys), true, nil
		case c == '\\':
			r, n := decodeEscape(in[i:])
			if n == 0 {
				s.pos = i
				if i+1 >= len(in) {
					return 0, 0, false, s.fail(reasonUnterm)
				}
				return 0, 0, false, s.fail(reasonEscape)
			}
			if isKey && verbatim {
				s.keys = append(s.keys, in[start:i]...)
				verbatim = false
			}
			i += n
			s.out = appendRune(s.out, r)
			if !verbatim {
				s.keys = utf8.AppendRune(s.keys, r)
			}
		case c < 0x20:
			s.pos = i
			return 0, 0, false, s.fail(reasonControl)
		default:
			r, size := utf8.DecodeRune(in[i:])
			if r == utf8.RuneError && size == 1 {
				if isKey && verbatim {
					s.keys = append(s.keys, in[start:i]...)
					verbatim = false
				}
				s.out = append(s.out, replacement...)
				if !verbatim {
					s.keys = append(s.keys, replacement...)
				}
			} else {
				s.out = append(s.out, in[i:i+size]...)
				if !verbatim {
					s.keys = append(s.keys, in[i:i+size]...)
				}
			}
			i += size
		}
	}
}

// replacement is the UTF-8 encoding of U+FFFD.
const replacement = "\uFFFD"

// decodeEscape decodes the escape sequence at the start of b (b[0] is a
// backslash) and returns the rune and the number of bytes it spans, or n == 0
// if it is malformed.
//
// Like encoding/json (and unlike JSON.parse, which would keep a lone
// surrogate), a \u escape of a surrogate that is not a high surrogate
// immediately followed by an escaped low surrogate decodes to U+FFFD. Go
// strings cannot hold lone surrogates, so this keeps Canonicalize and the
// encoding of the value encoding/json decodes from the same text identical.
func decodeEscape(b []byte) (r rune, n int) {
	if len(b) < 2 {
		return 0, 0
	}
	switch b[1] {
	case '"', '\\', '/':
		return rune(b[1]), 2
	case 'b':
		return '\b', 2
	case 'f':
		return '\f', 2
	case 'n':
		return '\n', 2
	case 'r':
		return '\r', 2
	case 't':
		return '\t', 2
	case 'u':
		r := hex4(b[2:])
		if r < 0 {
			return 0, 0
		}
		if !utf16.IsSurrogate(r) {
			return r, 6
		}
		if len(b) >= 12 && b[6] == '\\' && b[7] == 'u' {
			if r2 := hex4(b[8:]); r2 >= 0 {
				if dec := utf16.DecodeRune(r, r2); dec != utf8.RuneError {
					return dec, 12
				}
			}
		}
		return utf8.RuneError, 6
	}
	return 0, 0
}

// hex4 decodes four hexadecimal digits at the start of b, or returns -1.
func hex4(b []byte) rune {
	if len(b) < 4 {
		return -1
	}
	var r rune
	for _, c := range b[:4] {
		switch {
		case '0' <= c && c <= '9':
			c -= '0'
		case 'a' <= c && c <= 'f':
			c = c - 'a' + 10
		case 'A' <= c && c <= 'F':
			c = c - 'A' + 10
		default:
			return -1
		}
		r = r<<4 | rune(c)
	}
	return r
}

// number scans a number and emits it in ECMAScript form.
func (s *scanner) number() error {
	start := s.pos
	end, simple := scanNumber(s.in[start:])
	if end < 0 {
		s.pos = start - end - 1
		if s.pos >= len(s.in) {
			return s.fail(reasonEOF)
		}
		return s.fail(reasonNumber)
	}
	s.pos = start + end
	num := s.in[start:s.pos]
	if simple {
		s.out = appendSimpleInt(s.out, num)
		return nil
	}
	f, err := strconv.ParseFloat(string(num), 64)
	if err != nil {
		// The grammar is checked, so this is overflow to ±Infinity.
		return &Error{Reason: reasonNonFinite, Offset: start}
	}
	s.out = appendFloat(s.out, f)
	return nil
}

// scanNumber matches the JSON number grammar at the start of b. It returns
// the length of the number, and whether it is an integer of at most 15
// characters (so exactly representable and already in canonical form, but
// for "-0"). On a syntax error end is -1-k, k being the offset of the
// offending byte.
func scanNumber[T text](b T) (end int, simple bool) {
	i := 0
	if i < len(b) && b[i] == '-' {
		i++
	}
	switch {
	case i >= len(b):
		return -1 - i, false
	case b[i] == '0':
		i++
	case '1' <= b[i] && b[i] <= '9':
		i++
		for i < len(b) && '0' <= b[i] && b[i] <= '9' {
			i++
		}
	default:
		return -1 - i, false
	}
	simple = i <= 15
	if i < len(b) && b[i] == '.' {
		simple = false
		i++
		d := i
		for i < len(b) && '0' <= b[i] && b[i] <= '9' {
			i++
		}
		if i == d {
			return -1 - i, false
		}
	}
	if i < len(b) && (b[i] == 'e' || b[i] == 'E') {
		simple = false
		i++
		if i < len(b) && (b[i] == '+' || b[i] == '-') {
			i++
		}
		d := i
		for i < len(b) && '0' <= b[i] && b[i] <= '9' {
			i++
		}
		if i == d {
			return -1 - i, false
		}
	}
	return i, simple
}

// appendSimpleInt appends a short integer literal, already canonical except
// that "-0" becomes "0".
func appendSimpleInt[T text](dst []byte, num T) []byte {
	if len(num) == 2 && num[0] == '-' && num[1] == '0' {
		return append(dst, '0')
	}
	for i := 0; i < len(num); i++ {
		dst = append(dst, num[i])
	}
	return dst
}

// plain has a 1 at every byte that may appear unescaped in a canonical
// string and stands for itself: printable ASCII and U+007F, other than '"'
// and '\\'. (A constant string, so that the table cannot be modified.)
const plain = "\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00" +
	"\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00" +
	"\x01\x01\x00\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01" +
	"\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01" +
	"\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01" +
	"\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01\x00\x01\x01\x01" +
	"\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01" +
	"\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01" +
	"\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00" +
	"\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00" +
	"\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00" +
	"\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00" +
	"\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00" +
	"\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00" +
	"\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00" +
	"\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00"
