package canonical

import (
	"errors"
	"strconv"
	"unicode/utf16"
	"unicode/utf8"
)

// errDecode is the error of Decode on text that is not JSON.
var errDecode = errors.New("canonical: invalid JSON text")

// Decode parses a compact JSON text into the values encoding/json produces when
// decoding into an any: map[string]any, []any, float64, string, bool and
// nil. It is meant for the output of [Canonicalize] (compact, valid UTF-8),
// which it decodes several times faster than encoding/json, but any
// compact JSON text decodes to the same value json.Unmarshal gives (a
// duplicate key keeps the last value; an escaped lone surrogate becomes
// U+FFFD). Whitespace between tokens, or any other malformed text, is an
// error.
//
// The strings of the value (keys and values) that need no unescaping are
// cut from one copy of text, made when the first is met: one allocation
// for them all, which the value keeps alive as long as it keeps any of
// them.
func Decode(text []byte) (any, error) {
	d := decoder{in: text}
	v, ok := d.value(0)
	if !ok || d.pos != len(text) {
		return nil, errDecode
	}
	return v, nil
}

type decoder struct {
	in   []byte
	pos  int
	text string // in as a string, made by the first plain string; "" before
}

func (d *decoder) value(depth int) (any, bool) {
	if d.pos >= len(d.in) {
		return nil, false
	}
	switch c := d.in[d.pos]; {
	case (c == '{' || c == '[') && depth >= MaxDepth:
		return nil, false
	case c == '{':
		return d.object(depth)
	case c == '[':
		return d.array(depth)
	case c == '"':
		return d.str()
	case c == 't':
		return true, d.word("true")
	case c == 'f':
		return false, d.word("false")
	case c == 'n':
		return nil, d.word("null")
	default:
		return d.number()
	}
}

func (d *decoder) word(w string) bool {
	if len(d.in)-d.pos < len(w) || string(d.in[d.pos:d.pos+len(w)]) != w {
		return false
	}
	d.pos += len(w)
	return true
}

func (d *decoder) object(depth int) (any, bool) {
	d.pos++ // {
	m := make(map[string]any)
	if d.pos < len(d.in) && d.in[d.pos] == '}' {
		d.pos++
		return m, true
	}
	for {
		if d.pos >= len(d.in) || d.in[d.pos] != '"' {
			return nil, false
		}
		k, ok := d.str()
		if !ok || d.pos >= len(d.in) || d.in[d.pos] != ':' {
			return nil, false
		}
		d.pos++
		v, ok := d.value(depth + 1)
		if !ok {
			return nil, false
		}
		m[k] = v
		if d.pos >= len(d.in) {
			return nil, false
		}
		switch d.in[d.pos] {
		case ',':
			d.pos++
		case '}':
			d.pos++
			return m, true
		default:
			return nil, false
		}
	}
}

func (d *decoder) array(depth int) (any, bool) {
	d.pos++ // [
	a := []any{}
	if d.pos < len(d.in) && d.in[d.pos] == ']' {
		d.pos++
		return a, true
	}
	for {
		v, ok := d.value(depth + 1)
		if !ok {
			return nil, false
		}
		a = append(a, v)
		if d.pos >= len(d.in) {
			return nil, false
		}
		switch d.in[d.pos] {
		case ',':
			d.pos++
		case ']':
			d.pos++
			return a, true
		default:
			return nil, false
		}
	}
}

// str reads a string token. Strings without escapes are cut from the
// text; escaped ones are rebuilt.
func (d *decoder) str() (string, bool) {
	start := d.pos + 1
	for i := start; i < len(d.in); i++ {
		switch c := d.in[i]; {
		case c == '"':
			s := d.in[start:i]
			d.pos = i + 1
			switch {
			case !utf8.Valid(s):
				return string([]rune(string(s))), true // invalid bytes become U+FFFD, as encoding/json does
			case len(s) == 0:
				return "", true
			case d.text == "":
				d.text = string(d.in)
			}
			return d.text[start:i], true
		case c == '\\':
			return d.strSlow(start, i)
		case c < 0x20:
			return "", false
		}
	}
	return "", false
}

func (d *decoder) strSlow(start, i int) (string, bool) {
	b := make([]byte, 0, i-start+8)
	b = append(b, d.in[start:i]...)
	for i < len(d.in) {
		c := d.in[i]
		switch {
		case c == '"':
			d.pos = i + 1
			if !utf8.Valid(b) {
				return string([]rune(string(b))), true
			}
			return string(b), true
		case c < 0x20:
			return "", false
		case c != '\\':
			b = append(b, c)
			i++
			continue
		}
		if i+1 >= len(d.in) {
			return "", false
		}
		switch e := d.in[i+1]; e {
		case '"', '\\', '/':
			b = append(b, e)
		case 'b':
			b = append(b, '\b')
		case 'f':
			b = append(b, '\f')
		case 'n':
			b = append(b, '\n')
		case 'r':
			b = append(b, '\r')
		case 't':
			b = append(b, '\t')
		case 'u':
			r, n := unicodeEscape(d.in[i:])
			if n == 0 {
				return "", false
			}
			b = utf8.AppendRune(b, r)
			i += n
			continue
		default:
			return "", false
		}
		i += 2
	}
	return "", false
}

// unicodeEscape decodes \uXXXX, or a surrogate pair of two, at the start
// of b. It returns the rune (U+FFFD for a lone surrogate) and the bytes
// read, 0 if malformed.
func unicodeEscape(b []byte) (rune, int) {
	r1, ok := hex4u(b)
	if !ok {
		return 0, 0
	}
	if !utf16.IsSurrogate(r1) {
		return r1, 6
	}
	if r2, ok := hex4u(b[6:]); ok {
		if r := utf16.DecodeRune(r1, r2); r != utf8.RuneError {
			return r, 12
		}
	}
	return utf8.RuneError, 6
}

func hex4u(b []byte) (rune, bool) {
	if len(b) < 6 || b[0] != '\\' || b[1] != 'u' {
		return 0, false
	}
	var r rune
	for _, c := range b[2:6] {
		switch {
		case '0' <= c && c <= '9':
			c -= '0'
		case 'a' <= c && c <= 'f':
			c -= 'a' - 10
		case 'A' <= c && c <= 'F':
			c -= 'A' - 10
		default:
			return 0, false
		}
		r = r<<4 | rune(c)
	}
	return r, true
}

// number reads a number token as a float64. Integers of up to 15 digits
// are exact in a double and converted directly.
func (d *decoder) number() (any, bool) {
	end, _ := scanNumber(d.in[d.pos:])
	if end <= 0 {
		return nil, false
	}
	num := d.in[d.pos : d.pos+end]
	d.pos += end
	if n, ok := smallInt(num); ok {
		return n, true
	}
	f, err := strconv.ParseFloat(string(num), 64)
	if err != nil {
		return nil, false
	}
	return f, true
}

// smallInt converts an optionally negative integer of at most 15 digits.
func smallInt(num []byte) (float64, bool) {
	neg := num[0] == '-'
	if neg {
		num = num[1:]
	}
	if len(num) == 0 || len(num) > 15 {
		return 0, false
	}
	var n int64
	for _, c := range num {
		if c < '0' || c > '9' {
			return 0, false
		}
		n = n*10 + int64(c-'0')
	}
	if neg {
		if n == 0 {
			return 0, false // -0: let ParseFloat keep the sign, as encoding/json does
		}
		n = -n
	}
	return float64(n), true
}
