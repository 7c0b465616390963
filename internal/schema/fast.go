package schema

import (
	"math"
	"slices"
	"strconv"
	"strings"
	"unsafe"
)

// ValidCanonical reports whether the canonical JSON text b (the output of
// canonical.Canonicalize: compact, valid UTF-8, no duplicate keys)
// certainly satisfies the schema, reading the text directly: no decoded
// value is built and nothing is allocated. It answers false not only for
// invalid values but whenever it meets something it does not decide on
// its own (anyOf, const, enum, uniqueItems, escaped strings or keys, very
// large inputs); callers then decode and run [Schema.Validate], which
// gives the issues. So ValidCanonical(b) implies Validate of the decoded
// b reports nothing, and for the usual inputs of the usual schemas it is
// the whole check.
func (s *Schema) ValidCanonical(b []byte) bool {
	f := fastValidator{in: b}
	return f.value(s.root) && f.pos == len(b)
}

// fastValidator walks canonical text against the schema nodes.
type fastValidator struct {
	in    []byte
	pos   int
	steps int
}

// value checks the value at pos against n and moves past it.
func (f *fastValidator) value(n *node) bool {
	if f.steps++; f.steps > maxSteps || f.pos >= len(f.in) {
		return false
	}
	for n.ref != nil {
		if n.hasConst || n.enum != nil || n.anyOf != nil || n.types != 0 || n.numFlags != 0 ||
			n.minLength >= 0 || n.maxLength >= 0 || n.pattern != nil || n.format != fmtNone ||
			n.minItems >= 0 || n.maxItems >= 0 || n.uniqueItems || n.items != nil ||
			n.required != nil || n.props != nil || n.noAdditional || n.values != nil {
			return false // a $ref beside other keywords: leave it to Validate
		}
		n = n.ref
	}
	if n.hasConst || n.enum != nil || n.anyOf != nil {
		return false
	}
	switch c := f.in[f.pos]; {
	case c == '{':
		return (n.types == 0 || n.types&tObject != 0) && f.object(n)
	case c == '[':
		return (n.types == 0 || n.types&tArray != 0) && f.array(n)
	case c == '"':
		return (n.types == 0 || n.types&tString != 0) && f.str(n)
	case c == 't':
		return (n.types == 0 || n.types&tBoolean != 0) && f.literal("true")
	case c == 'f':
		return (n.types == 0 || n.types&tBoolean != 0) && f.literal("false")
	case c == 'n':
		return (n.types == 0 || n.types&tNull != 0) && f.literal("null")
	default:
		return f.number(n)
	}
}

// literal moves past word.
func (f *fastValidator) literal(word string) bool {
	if !strings.HasPrefix(unsafeString(f.in[f.pos:]), word) {
		return false
	}
	f.pos += len(word)
	return true
}

// unsafeString views b as a string without copying. The validator never
// modifies its input, and the strings it makes do not outlive the call.
func unsafeString(b []byte) string { return unsafe.String(unsafe.SliceData(b), len(b)) }

// str checks a string without escapes.
func (f *fastValidator) str(n *node) bool {
	s, ok := f.plainString()
	if !ok {
		return false
	}
	if n.minLength >= 0 || n.maxLength >= 0 {
		l := utf16Len(s)
		if n.minLength >= 0 && l < n.minLength || n.maxLength >= 0 && l > n.maxLength {
			return false
		}
	}
	if n.pattern != nil && !n.pattern.MatchString(s) {
		return false
	}
	return n.format == fmtNone || checkFormat(n.format, s)
}

// plainString reads a string token with no escapes and returns its text,
// which shares the input's memory only for the duration of the check.
func (f *fastValidator) plainString() (string, bool) {
	start := f.pos + 1
	i := strings.IndexAny(unsafeString(f.in[start:]), "\"\\")
	if i < 0 || f.in[start+i] != '"' {
		return "", false
	}
	f.pos = start + i + 1
	return unsafeString(f.in[start : start+i]), true
}

// number checks a number token.
func (f *fastValidator) number(n *node) bool {
	end := f.pos
	for end < len(f.in) && strings.IndexByte("-+.eE0123456789", f.in[end]) >= 0 {
		end++
	}
	if end == f.pos {
		return false
	}
	v, err := strconv.ParseFloat(unsafeString(f.in[f.pos:end]), 64)
	f.pos = end
	if err != nil || !matchesType(orNumber(n.types), kNumber, v) {
		return false
	}
	if n.numFlags == 0 {
		return true
	}
	if n.numFlags&hasMinimum != 0 && !(v >= n.minimum) ||
		n.numFlags&hasMaximum != 0 && !(v <= n.maximum) ||
		n.numFlags&hasExclMin != 0 && !(v > n.exclMin) ||
		n.numFlags&hasExclMax != 0 && !(v < n.exclMax) {
		return false
	}
	if n.numFlags&hasMultipleOf != 0 {
		q := v / n.multipleOf
		return math.Abs(q-math.Round(q)) < 1e-9
	}
	return true
}

// orNumber is the type mask a number is checked against: any number when
// the node declares no type.
func orNumber(m typeMask) typeMask {
	if m == 0 {
		return tNumber
	}
	return m
}

func (f *fastValidator) array(n *node) bool {
	if n.uniqueItems {
		return false
	}
	f.pos++ // [
	count := 0
	if f.pos < len(f.in) && f.in[f.pos] == ']' {
		f.pos++
	} else {
		for {
			items := n.items
			if items == nil {
				items = anyNode
			}
			if !f.value(items) {
				return false
			}
			count++
			if f.pos >= len(f.in) {
				return false
			}
			if f.in[f.pos] == ']' {
				f.pos++
				break
			}
			if f.in[f.pos] != ',' {
				return false
			}
			f.pos++
		}
	}
	return (n.minItems < 0 || count >= n.minItems) && (n.maxItems < 0 || count <= n.maxItems)
}

func (f *fastValidator) object(n *node) bool {
	f.pos++           // {
	var seen [64]bool // required names met, by index
	if len(n.required) > len(seen) {
		return false
	}
	if f.pos < len(f.in) && f.in[f.pos] == '}' {
		f.pos++
		return len(n.required) == 0
	}
	for {
		if f.pos >= len(f.in) || f.in[f.pos] != '"' {
			return false
		}
		key, ok := f.plainString()
		if !ok || f.pos >= len(f.in) || f.in[f.pos] != ':' {
			return false
		}
		f.pos++
		if i := slices.Index(n.required, key); i >= 0 {
			seen[i] = true
		}
		sub := anyNode
		if i, found := slices.BinarySearchFunc(n.props, key, func(pr prop, k string) int { return strings.Compare(pr.name, k) }); found {
			sub = n.props[i].node
		} else if n.noAdditional {
			return false
		} else if n.values != nil {
			sub = n.values
		}
		if !f.value(sub) {
			return false
		}
		if f.pos >= len(f.in) {
			return false
		}
		if f.in[f.pos] == '}' {
			f.pos++
			break
		}
		if f.in[f.pos] != ',' {
			return false
		}
		f.pos++
	}
	for i := range n.required {
		if !seen[i] {
			return false
		}
	}
	return true
}

// anyNode accepts every value.
var anyNode = &node{minLength: -1, maxLength: -1, minItems: -1, maxItems: -1}
