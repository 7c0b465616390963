package schema

import (
	"encoding/json"
	"math"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"
)

// Validate checks v against the schema and returns the issues found, at
// most [MaxIssues], or nil when v is valid. v is a decoded JSON value: what
// encoding/json produces when decoding into an any (map[string]any, []any,
// float64, string, bool, nil), optionally with [json.Number] numbers; other
// Go numeric types are accepted as numbers. Any other Go value matches no
// JSON type. v must be a tree (no cycles), as decoded values are.
// Validation never applies "default" and allocates only when it reports
// issues (or checks "uniqueItems" on more than 16 items).
//
// The work is bounded: a value nested deeper than 10000 levels gets the
// issue "value is nested too deeply", and one needing more than about a
// million node checks (anyOf branches recursing through $ref) gets "value
// is too complex to validate".
//
// Keywords are checked per node in this order, as the reference validator
// does: "$ref", "const", "enum", "anyOf", "type" (a failure of any of these
// ends the node's checks), then the string, number, array and object
// keywords that apply to v's type.
func (s *Schema) Validate(v any) []Issue {
	var vd validator
	vd.limit = maxSteps
	vd.check(s.root, v)
	if vd.exhausted {
		is := Issue{Path: "", Message: "value is too complex to validate"}
		if len(vd.issues) < MaxIssues {
			vd.issues = append(vd.issues, is)
		} else {
			vd.issues[MaxIssues-1] = is
		}
	}
	return vd.issues
}

// maxSteps bounds the number of (node, value) checks of one validation.
// Branches of anyOf that recurse through $ref could otherwise take time
// exponential in the nesting of the value; a legitimate value needs a few
// checks per member or element, far below the bound.
const maxSteps = 1 << 20

// seg is one step of the location of the value being validated: an
// object member (index < 0) or an array element.
type seg struct {
	key   string
	index int
}

// stackSegs is the depth of the path stack kept inside the validator;
// deeper values spill into a heap slice.
const stackSegs = 32

// validator holds the state of one validation. It lives on the stack of
// Validate; paths are rendered only when an issue is reported.
type validator struct {
	issues []Issue
	// quiet > 0 while validating anyOf branches or probing: issues are not
	// recorded and checks stop at the first failure.
	quiet int
	// full is set once MaxIssues issues are recorded.
	full bool
	// steps counts checks; exhausted is set when it passes limit
	// (maxSteps for Validate), and stops everything.
	steps, limit int
	exhausted    bool
	// unit, when > 0, weighs each check by the values it may compare
	// (see weight): the prover bounds its work in steps.
	unit int
	// depth is the number of path segments; the first stackSegs are in
	// segs, the rest in extra.
	depth int
	segs  [stackSegs]seg
	extra []seg
}

// push enters an object member (index < 0) or an array element.
func (vd *validator) push(key string, index int) {
	if vd.depth < stackSegs {
		vd.segs[vd.depth] = seg{key, index}
	} else {
		vd.extra = append(vd.extra, seg{key, index})
	}
	vd.depth++
}

// pop leaves the innermost member or element.
func (vd *validator) pop() {
	vd.depth--
	if vd.depth >= stackSegs {
		vd.extra = vd.extra[:len(vd.extra)-1]
	}
}

// path renders the current location in the spec's issue-path format
// (semantics.md §4.2): property names joined with ".", "[i]" for array
// indexes, "" for the root — "ids", "ids[0]", "filter.site", "[2].name".
// Names are written as they are, without escaping.
func (vd *validator) path() string {
	if vd.depth == 0 {
		return ""
	}
	b := make([]byte, 0, 32)
	for i := 0; i < vd.depth; i++ {
		var sg seg
		if i < stackSegs {
			sg = vd.segs[i]
		} else {
			sg = vd.extra[i-stackSegs]
		}
		if sg.index >= 0 {
			b = append(b, '[')
			b = strconv.AppendInt(b, int64(sg.index), 10)
			b = append(b, ']')
			continue
		}
		if i > 0 {
			b = append(b, '.')
		}
		b = append(b, sg.key...)
	}
	return string(b)
}

// report records an issue at the current location unless quiet or full,
// and reports whether the caller must stop checking.
func (vd *validator) report(msg string) (stop bool) {
	if vd.quiet > 0 || vd.full || vd.exhausted {
		return true
	}
	vd.issues = append(vd.issues, Issue{Path: vd.path(), Message: msg})
	if len(vd.issues) >= MaxIssues {
		vd.full = true
	}
	return vd.full
}

// halted reports whether validation should stop after a failure.
func (vd *validator) halted() bool { return vd.quiet > 0 || vd.full || vd.exhausted }

// kind classifies a decoded JSON value.
type kind uint8

const (
	kOther kind = iota
	kNull
	kBool
	kNumber
	kString
	kArray
	kObject
)

// toNumber converts a numeric Go value to float64.
func toNumber(v any) (float64, bool) {
	switch x := v.(type) {
	case float64:
		return x, true
	case json.Number:
		f, err := strconv.ParseFloat(string(x), 64)
		if err != nil && !math.IsInf(f, 0) {
			return 0, false
		}
		return f, true
	case float32:
		return float64(x), true
	case int:
		return float64(x), true
	case int8:
		return float64(x), true
	case int16:
		return float64(x), true
	case int32:
		return float64(x), true
	case int64:
		return float64(x), true
	case uint:
		return float64(x), true
	case uint8:
		return float64(x), true
	case uint16:
		return float64(x), true
	case uint32:
		return float64(x), true
	case uint64:
		return float64(x), true
	case uintptr:
		return float64(x), true
	}
	return 0, false
}

// classify returns the kind of v and, for numbers, its value.
func classify(v any) (kind, float64) {
	switch v.(type) {
	case nil:
		return kNull, 0
	case bool:
		return kBool, 0
	case string:
		return kString, 0
	case map[string]any:
		return kObject, 0
	case []any:
		return kArray, 0
	}
	if f, ok := toNumber(v); ok {
		return kNumber, f
	}
	return kOther, 0
}

// matchesType reports whether a value of kind k (and number f) has one of
// the types in m.
func matchesType(m typeMask, k kind, f float64) bool {
	switch k {
	case kNull:
		return m&tNull != 0
	case kBool:
		return m&tBoolean != 0
	case kString:
		return m&tString != 0
	case kArray:
		return m&tArray != 0
	case kObject:
		return m&tObject != 0
	case kNumber:
		if math.IsNaN(f) || math.IsInf(f, 0) {
			return false
		}
		if m&tNumber != 0 {
			return true
		}
		return m&tInteger != 0 && f == math.Trunc(f)
	}
	return false
}

// check validates v against n at the current location and reports whether
// it is valid.
func (vd *validator) check(n *node, v any) bool { return vd.checkParts(n, v, 0) }

// checkParts is check without the parts of n that skip names (skipRef,
// skipAnyOf): the prover validates parts of nodes.
func (vd *validator) checkParts(n *node, v any, skip uint8) bool {
	vd.steps++
	if vd.unit > 0 {
		vd.steps += vd.weight(n)
	}
	if vd.steps > vd.limit {
		vd.exhausted = true
	}
	if vd.exhausted {
		return false
	}
	if vd.depth > maxValueDepth {
		vd.report("value is nested too deeply")
		return false
	}
	if skip&skipRef == 0 && n.ref != nil && !vd.check(n.ref, v) {
		return false
	}
	if n.hasConst && !jsonEqual(v, n.constVal) {
		vd.report("must equal the constant value")
		return false
	}
	if n.enum != nil && !inEnum(n.enum, v) {
		vd.report("must be one of the allowed values")
		return false
	}
	if skip&skipAnyOf == 0 && n.anyOf != nil {
		vd.quiet++
		ok := false
		for _, b := range n.anyOf {
			if vd.check(b, v) {
				ok = true
				break
			}
		}
		vd.quiet--
		if !ok {
			vd.report("does not match any allowed shape")
			return false
		}
	}
	k, f := classify(v)
	if n.types != 0 && !matchesType(n.types, k, f) {
		vd.report(n.typeMsg)
		return false
	}
	switch k {
	case kString:
		return vd.checkString(n, v.(string))
	case kNumber:
		return vd.checkNumber(n, f)
	case kArray:
		return vd.checkArray(n, v.([]any))
	case kObject:
		return vd.checkObject(n, v.(map[string]any))
	}
	return true
}

// weight is the cost, beyond one step, of checking a value of unit
// steps against n: comparing it with each enum value and the constant,
// and looking for duplicates among its items.
func (vd *validator) weight(n *node) int {
	w := len(n.enum)
	if n.hasConst {
		w++
	}
	if n.uniqueItems {
		w++
	}
	return w * vd.unit
}

// maxValueDepth bounds the nesting of validated values (encoding/json
// refuses deeper input anyway), so a cyclic Go value cannot recurse
// forever.
const maxValueDepth = 10000

// inEnum reports whether v equals one of the values.
func inEnum(values []any, v any) bool {
	for _, e := range values {
		if jsonEqual(v, e) {
			return true
		}
	}
	return false
}

// checkString applies the string keywords.
func (vd *validator) checkString(n *node, s string) bool {
	ok := true
	if n.minLength >= 0 || n.maxLength >= 0 {
		l := utf16Len(s)
		if n.minLength >= 0 && l < n.minLength {
			ok = false
			if vd.report(n.msgs.minLength) {
				return false
			}
		}
		if n.maxLength >= 0 && l > n.maxLength {
			ok = false
			if vd.report(n.msgs.maxLength) {
				return false
			}
		}
	}
	if n.pattern != nil && !n.pattern.MatchString(s) {
		ok = false
		if vd.report("must match the pattern") {
			return false
		}
	}
	if n.format != fmtNone && !checkFormat(n.format, s) {
		ok = false
		if vd.report(formatMessages[n.format]) {
			return false
		}
	}
	return ok
}

// formatMessages are the issue messages of the formats.
var formatMessages = [...]string{
	fmtDateTime: "must be an RFC 3339 date-time",
	fmtDate:     "must be a date (YYYY-MM-DD)",
	fmtUUID:     "must be a UUID",
	fmtEmail:    "must be an email address",
	fmtURI:      "must be a URI",
}

// checkNumber applies the number keywords.
func (vd *validator) checkNumber(n *node, f float64) bool {
	if n.numFlags == 0 {
		return true
	}
	ok := true
	fail := func(msg string) bool {
		ok = false
		return vd.report(msg)
	}
	if n.numFlags&hasMinimum != 0 && !(f >= n.minimum) && fail(n.msgs.minimum) {
		return false
	}
	if n.numFlags&hasMaximum != 0 && !(f <= n.maximum) && fail(n.msgs.maximum) {
		return false
	}
	if n.numFlags&hasExclMin != 0 && !(f > n.exclMin) && fail(n.msgs.exclMin) {
		return false
	}
	if n.numFlags&hasExclMax != 0 && !(f < n.exclMax) && fail(n.msgs.exclMax) {
		return false
	}
	if n.numFlags&hasMultipleOf != 0 {
		q := f / n.multipleOf
		if !(math.Abs(q-math.Round(q)) < 1e-9) && fail(n.msgs.multipleOf) {
			return false
		}
	}
	return ok
}

// checkArray applies the array keywords.
func (vd *validator) checkArray(n *node, a []any) bool {
	ok := true
	if n.minItems >= 0 && len(a) < n.minItems {
		ok = false
		if vd.report(n.msgs.minItems) {
			return false
		}
	}
	if n.maxItems >= 0 && len(a) > n.maxItems {
		ok = false
		if vd.report(n.msgs.maxItems) {
			return false
		}
	}
	if n.uniqueItems && !allUnique(a) {
		ok = false
		if vd.report("must not contain duplicate items") {
			return false
		}
	}
	if n.items != nil {
		for i, e := range a {
			vd.push("", i)
			valid := vd.check(n.items, e)
			vd.pop()
			if !valid {
				ok = false
				if vd.halted() {
					return false
				}
			}
		}
	}
	return ok
}

// checkObject applies the object keywords.
func (vd *validator) checkObject(n *node, o map[string]any) bool {
	ok := true
	for i, name := range n.required {
		if _, present := o[name]; !present {
			ok = false
			vd.push(name, -1) // a missing property is reported at its own path
			stop := vd.report(n.msgs.required[i])
			vd.pop()
			if stop {
				return false
			}
		}
	}
	matched := 0
	for i := range n.props {
		pr := &n.props[i]
		e, present := o[pr.name]
		if !present {
			continue
		}
		matched++
		vd.push(pr.name, -1)
		valid := vd.check(pr.node, e)
		vd.pop()
		if !valid {
			ok = false
			if vd.halted() {
				return false
			}
		}
	}
	if n.noAdditional && len(o) > matched {
		ok = false
		if vd.quiet > 0 {
			return false
		}
		for _, k := range n.unknownKeys(o) {
			vd.push(k, -1)
			stop := vd.report("unexpected property")
			vd.pop()
			if stop {
				return false
			}
		}
	}
	if n.values != nil && !vd.checkValues(n, o) {
		ok = false
	}
	return ok
}

// checkValues validates the members of an inferred Go map against the
// hidden values schema: first quietly in map order, then, on failure,
// again in key order so the issues are deterministic.
func (vd *validator) checkValues(n *node, o map[string]any) bool {
	vd.quiet++
	good := true
	for k, e := range o {
		if n.hasProp(k) {
			continue
		}
		if !vd.check(n.values, e) {
			good = false
			break
		}
	}
	vd.quiet--
	if good {
		return true
	}
	if vd.halted() {
		return false
	}
	keys := make([]string, 0, len(o))
	for k := range o {
		if !n.hasProp(k) {
			keys = append(keys, k)
		}
	}
	slices.Sort(keys)
	for _, k := range keys {
		vd.push(k, -1)
		valid := vd.check(n.values, o[k])
		vd.pop()
		if !valid && vd.halted() {
			break
		}
	}
	return false
}

// hasProp reports whether n declares the property name.
func (n *node) hasProp(name string) bool {
	_, found := slices.BinarySearchFunc(n.props, name, func(pr prop, name string) int {
		return strings.Compare(pr.name, name)
	})
	return found
}

// unknownKeys returns the keys of o that n does not declare, sorted.
func (n *node) unknownKeys(o map[string]any) []string {
	var keys []string
	for k := range o {
		if !n.hasProp(k) {
			keys = append(keys, k)
		}
	}
	slices.Sort(keys)
	return keys
}

// utf16Len returns the length of s in UTF-16 code units, counting each
// invalid UTF-8 byte as one unit (it decodes to U+FFFD).
func utf16Len(s string) int {
	n := 0
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			n++
			i++
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r >= 0x10000 {
			n += 2
		} else {
			n++
		}
		i += size
	}
	return n
}
