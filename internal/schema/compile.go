package schema

import (
	"math"
	"regexp"
	"regexp/syntax"
	"slices"
	"strconv"
	"strings"
)

// typeMask is a set of JSON Schema type names.
type typeMask uint8

const (
	tObject typeMask = 1 << iota
	tArray
	tString
	tNumber
	tInteger
	tBoolean
	tNull
)

// typeNames lists the type names in the order used in messages.
var typeNames = [...]struct {
	name string
	mask typeMask
}{
	{"object", tObject},
	{"array", tArray},
	{"string", tString},
	{"number", tNumber},
	{"integer", tInteger},
	{"boolean", tBoolean},
	{"null", tNull},
}

// typeByName returns the mask of a type name, or 0 when it is not one.
func typeByName(name string) typeMask {
	for _, t := range typeNames {
		if t.name == name {
			return t.mask
		}
	}
	return 0
}

// format is a supported value of the "format" keyword.
type format uint8

const (
	fmtNone format = iota
	fmtDateTime
	fmtDate
	fmtUUID
	fmtEmail
	fmtURI
)

// formats maps format names to formats.
var formats = map[string]format{
	"date-time": fmtDateTime,
	"date":      fmtDate,
	"uuid":      fmtUUID,
	"email":     fmtEmail,
	"uri":       fmtURI,
}

// Flags of the numeric bounds present on a node.
const (
	hasMinimum uint8 = 1 << iota
	hasMaximum
	hasExclMin
	hasExclMax
	hasMultipleOf
)

// prop is a named property schema.
type prop struct {
	name string
	node *node
}

// node is a compiled schema node. Nodes are immutable after compilation.
type node struct {
	// ref is the resolved target of "$ref", or nil.
	ref *node

	hasConst bool
	constVal any
	enum     []any
	anyOf    []*node

	types        typeMask // 0: any type
	typeMsg      string
	typeIsObject bool // "type" is exactly the string "object"

	// Strings. minLength/maxLength are -1 when absent.
	minLength, maxLength int
	pattern              *regexp.Regexp
	format               format

	// Numbers.
	numFlags                                       uint8
	minimum, maximum, exclMin, exclMax, multipleOf float64

	// Arrays. minItems/maxItems are -1 when absent.
	minItems, maxItems int
	uniqueItems        bool
	items              *node

	// Objects. props is sorted by name.
	required     []string
	props        []prop
	noAdditional bool
	// values is the schema of every member of an inferred Go map. It is
	// not part of the agent-visible schema (additionalProperties as a
	// schema is outside the subset) but enforces that a value which
	// validates decodes into the map's element type.
	values *node

	// Precomputed issue messages.
	msgs nodeMsgs

	// out records what a node compiled for comparison (see loose.go)
	// says beyond the subset, and what it reaches that does; nil when
	// nothing.
	out *outside
}

// nodeMsgs holds the parameterised issue messages of a node.
type nodeMsgs struct {
	minLength, maxLength, minItems, maxItems string
	minimum, maximum, exclMin, exclMax       string
	multipleOf                               string
	required                                 []string
}

// pendingRef is a "$ref" awaiting resolution once all of $defs is compiled.
type pendingRef struct {
	from *node
	name string
	path string
}

// patternBudget bounds the estimated number of program instructions of
// all the patterns of one schema, so that compiling them takes bounded time
// and memory (a 16 kB pattern such as \pL{1000}\pL{1000}… would otherwise
// need hundreds of megabytes).
const patternBudget = 100_000

// compiler checks a decoded schema document against the subset and
// compiles it into nodes.
type compiler struct {
	// inferred is set for documents produced by Infer: additionalProperties
	// may then be a schema (a Go map's values), compiled as a hidden node.
	inferred bool
	// loose is set for documents compiled for comparison (ParseLoose):
	// what lies outside the subset is recorded on the nodes instead of
	// refused; draft7 is set when the root's $schema names draft-07.
	loose, draft7 bool
	// defs holds the compiled root $defs entries by name.
	defs map[string]*node
	// refs are the "$ref"s met so far, resolved once all of $defs is known.
	refs []pendingRef
	// nodes lists every compiled node.
	nodes []*node
	// depth is the maximum visible depth met so far, at pointer deepest.
	depth   int
	deepest string
	// patternCost is the estimated size of the patterns compiled so far.
	patternCost int
}

// compileRoot compiles a whole document: the root, its $defs, the
// references between them, and rejects reference cycles that consume no
// input.
func (c *compiler) compileRoot(doc any) (*node, error) {
	root, err := c.compile(doc, "", 0)
	if err != nil {
		return nil, err
	}
	for _, r := range c.refs {
		target, ok := c.defs[r.name]
		if !ok {
			if c.loose {
				r.from.restrict("$ref")
				continue
			}
			return nil, &Error{Path: r.path, Keyword: "$ref", Reason: "reference to a missing $defs entry"}
		}
		r.from.ref = target
	}
	if err := c.checkCycles(); err != nil {
		return nil, err
	}
	return root, nil
}

// escapePointer escapes a JSON pointer reference token (RFC 6901).
func escapePointer(s string) string {
	if !strings.ContainsAny(s, "~/") {
		return s
	}
	s = strings.ReplaceAll(s, "~", "~0")
	return strings.ReplaceAll(s, "/", "~1")
}

// sortedKeys returns the keys of m in ascending order.
func sortedKeys(m map[string]any) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// compile checks and compiles the schema node v found at path and depth.
func (c *compiler) compile(v any, path string, depth int) (*node, error) {
	m, ok := v.(map[string]any)
	if !ok {
		if c.loose {
			return c.looseValue(v), nil
		}
		return nil, &Error{Path: path, Reason: "a schema must be a JSON object (boolean schemas are not supported)"}
	}
	if depth > HardMaxDepth {
		if c.loose {
			return c.opaque("a schema nested more than " + strconv.Itoa(HardMaxDepth) + " levels deep"), nil
		}
		return nil, &Error{Path: path, Reason: "schema is nested more than " + strconv.Itoa(HardMaxDepth) + " levels deep"}
	}
	if depth > c.depth {
		c.depth, c.deepest = depth, path
	}
	n := &node{minLength: -1, maxLength: -1, minItems: -1, maxItems: -1}
	c.nodes = append(c.nodes, n)

	if c.inferred {
		// Inferred maps carry their value schema in additionalProperties:
		// compile it as the hidden values node and drop it from the
		// document.
		if ap, ok := m["additionalProperties"].(bool); ok && ap {
			// map[string]any: "true" is the default; omit it.
			delete(m, "additionalProperties")
		}
		if ap, ok := m["additionalProperties"].(map[string]any); ok {
			// Hidden nodes do not count towards the visible depth.
			d, deepest := c.depth, c.deepest
			vn, err := c.compile(ap, path+"/additionalProperties", depth)
			if err != nil {
				return nil, err
			}
			c.depth, c.deepest = d, deepest
			if !vn.isTrivial() {
				n.values = vn
			}
			delete(m, "additionalProperties")
		}
	}

	for _, k := range sortedKeys(m) {
		if !c.loose {
			if err := c.keyword(n, m[k], k, path, depth); err != nil {
				return nil, err
			}
			continue
		}
		// A keyword the subset refuses leaves the node as it was and is
		// recorded instead.
		saved := *n
		if err := c.keyword(n, m[k], k, path, depth); err != nil {
			*n = saved
			c.outsideKeyword(n, k, path)
		}
	}
	if c.loose {
		c.interplay(n, m)
	}
	return n, nil
}

// keyword checks and compiles the value val of keyword k of node n, the
// node at path and depth.
func (c *compiler) keyword(n *node, val any, k, path string, depth int) error {
	kp := path + "/" + escapePointer(k)
	bad := func(reason string) error { return &Error{Path: kp, Keyword: k, Reason: reason} }
	switch k {
	case "type":
		if err := c.compileType(n, val, bad); err != nil {
			return err
		}
	case "enum":
		arr, ok := val.([]any)
		if !ok || len(arr) == 0 {
			return bad("must be a non-empty array")
		}
		n.enum = arr
	case "const":
		n.hasConst, n.constVal = true, val
	case "properties":
		pm, ok := val.(map[string]any)
		if !ok {
			return bad("must be an object of schemas")
		}
		for _, name := range sortedKeys(pm) {
			pn, err := c.compile(pm[name], kp+"/"+escapePointer(name), depth+1)
			if err != nil {
				return err
			}
			n.props = append(n.props, prop{name: name, node: pn})
		}
	case "required":
		arr, ok := val.([]any)
		if !ok {
			return bad("must be an array of strings")
		}
		for i, e := range arr {
			s, ok := e.(string)
			if !ok {
				return &Error{Path: kp + "/" + strconv.Itoa(i), Keyword: k, Reason: "must be an array of strings"}
			}
			if slices.Contains(n.required, s) {
				return &Error{Path: kp + "/" + strconv.Itoa(i), Keyword: k, Reason: "must not repeat a name"}
			}
			n.required = append(n.required, s)
			n.msgs.required = append(n.msgs.required, "missing required property "+strconv.Quote(s))
		}
	case "additionalProperties":
		b, ok := val.(bool)
		if !ok {
			return bad("must be a boolean (schemas are not supported)")
		}
		n.noAdditional = !b
	case "items":
		if _, ok := val.(map[string]any); !ok {
			return bad("must be a single schema object")
		}
		in, err := c.compile(val, kp, depth+1)
		if err != nil {
			return err
		}
		n.items = in
	case "minItems", "maxItems", "minLength", "maxLength":
		x, ok := nonNegInt(val)
		if !ok {
			return bad("must be a non-negative integer")
		}
		switch k {
		case "minItems":
			n.minItems, n.msgs.minItems = x, "must have at least "+strconv.Itoa(x)+" items"
		case "maxItems":
			n.maxItems, n.msgs.maxItems = x, "must have at most "+strconv.Itoa(x)+" items"
		case "minLength":
			n.minLength, n.msgs.minLength = x, "must be at least "+strconv.Itoa(x)+" characters"
		case "maxLength":
			n.maxLength, n.msgs.maxLength = x, "must be at most "+strconv.Itoa(x)+" characters"
		}
	case "uniqueItems":
		b, ok := val.(bool)
		if !ok {
			return bad("must be a boolean")
		}
		n.uniqueItems = b
	case "pattern":
		s, ok := val.(string)
		if !ok {
			return bad("must be a string")
		}
		re, err := c.compilePattern(s)
		if err != nil {
			return bad(err.Error())
		}
		n.pattern = re
	case "format":
		s, ok := val.(string)
		if !ok {
			return bad("must be a string")
		}
		f, ok := formats[s]
		if !ok {
			return bad("must be one of date-time, date, uuid, email, uri")
		}
		n.format = f
	case "minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "multipleOf":
		f, ok := val.(float64)
		if !ok || math.IsNaN(f) || math.IsInf(f, 0) {
			return bad("must be a number")
		}
		txt := formatNumber(f)
		switch k {
		case "minimum":
			n.numFlags |= hasMinimum
			n.minimum, n.msgs.minimum = f, "must be >= "+txt
		case "maximum":
			n.numFlags |= hasMaximum
			n.maximum, n.msgs.maximum = f, "must be <= "+txt
		case "exclusiveMinimum":
			n.numFlags |= hasExclMin
			n.exclMin, n.msgs.exclMin = f, "must be > "+txt
		case "exclusiveMaximum":
			n.numFlags |= hasExclMax
			n.exclMax, n.msgs.exclMax = f, "must be < "+txt
		case "multipleOf":
			if f <= 0 {
				return bad("must be a number greater than 0")
			}
			n.numFlags |= hasMultipleOf
			n.multipleOf, n.msgs.multipleOf = f, "must be a multiple of "+txt
		}
	case "anyOf":
		arr, ok := val.([]any)
		if !ok || len(arr) == 0 {
			return bad("must be a non-empty array of schemas")
		}
		for i, e := range arr {
			bn, err := c.compile(e, kp+"/"+strconv.Itoa(i), depth+1)
			if err != nil {
				return err
			}
			n.anyOf = append(n.anyOf, bn)
		}
	case "description", "title":
		if _, ok := val.(string); !ok {
			return bad("must be a string")
		}
	case "default":
		// Any JSON value; never applied.
	case "examples":
		if _, ok := val.([]any); !ok {
			return bad("must be an array")
		}
	case "deprecated":
		if _, ok := val.(bool); !ok {
			return bad("must be a boolean")
		}
	case "$schema", "$id":
		if path != "" {
			return bad("is only allowed at the root")
		}
		s, ok := val.(string)
		if !ok {
			return bad("must be a string")
		}
		if c.loose && k == "$schema" && dialectOf(s) == dialectUnknown {
			return bad("names a dialect the comparison does not know")
		}
	case "$defs":
		if path != "" {
			return bad("is only allowed at the root")
		}
		dm, ok := val.(map[string]any)
		if !ok {
			return bad("must be an object of schemas")
		}
		c.defs = make(map[string]*node, len(dm))
		for _, name := range sortedKeys(dm) {
			dn, err := c.compile(dm[name], kp+"/"+escapePointer(name), depth+1)
			if err != nil {
				return err
			}
			c.defs[name] = dn
		}
	case "$ref":
		s, ok := val.(string)
		if !ok {
			return bad("must be a string")
		}
		name, ok := refName(s)
		if !ok {
			return bad(`must be an internal reference "#/$defs/<name>"`)
		}
		if c.loose && strings.Contains(s, "%") {
			// A URI fragment is percent-decoded before it is read as a
			// pointer; the subset reads it as written.
			return bad("is percent-encoded")
		}
		c.refs = append(c.refs, pendingRef{from: n, name: name, path: kp})
	default:
		return bad("is not supported")
	}
	return nil
}

// patternError is why a pattern is refused.
type patternError string

// Error returns the reason.
func (e patternError) Error() string { return string(e) }

// compilePattern compiles a "pattern" within the schema's pattern budget.
func (c *compiler) compilePattern(src string) (*regexp.Regexp, error) {
	re, err := syntax.Parse(src, syntax.Perl)
	if err != nil {
		return nil, patternError("is not a valid regular expression (Go RE2 syntax)")
	}
	c.patternCost += patternSize(re, patternBudget-c.patternCost+1)
	if c.patternCost > patternBudget {
		return nil, patternError("is too complex (the schema's patterns together are limited to about " + strconv.Itoa(patternBudget) + " instructions)")
	}
	compiled, err := regexp.Compile(src)
	if err != nil {
		return nil, patternError("is not a valid regular expression (Go RE2 syntax)")
	}
	return compiled, nil
}

// patternSize estimates the number of instructions of the program compiled
// from re, saturating at limit.
func patternSize(re *syntax.Regexp, limit int) int {
	sat := func(x int) int { return min(x, limit) }
	switch re.Op {
	case syntax.OpRepeat:
		n := re.Max
		if n < 0 {
			n = re.Min + 1
		}
		n = max(n, 1)
		sub := patternSize(re.Sub[0], limit)
		if sub > limit/n {
			return limit
		}
		return sat(sub*n + 1)
	case syntax.OpStar, syntax.OpPlus, syntax.OpQuest, syntax.OpCapture, syntax.OpConcat, syntax.OpAlternate:
		total := 2
		for _, sub := range re.Sub {
			total = sat(total + patternSize(sub, limit))
		}
		return total
	case syntax.OpLiteral:
		return sat(max(len(re.Rune), 1))
	}
	return 1
}

// compileType checks and compiles the value of "type".
func (c *compiler) compileType(n *node, val any, bad func(string) error) error {
	switch t := val.(type) {
	case string:
		m := typeByName(t)
		if m == 0 {
			return bad("must be one of object, array, string, number, integer, boolean, null")
		}
		n.types = m
		n.typeIsObject = m == tObject
	case []any:
		if len(t) == 0 {
			return bad("must not be an empty array")
		}
		for _, e := range t {
			s, ok := e.(string)
			if !ok {
				return bad("must be a type name or an array of type names")
			}
			m := typeByName(s)
			if m == 0 {
				return bad("must be one of object, array, string, number, integer, boolean, null")
			}
			if n.types&m != 0 {
				return bad("must not repeat a type name")
			}
			n.types |= m
		}
	default:
		return bad("must be a type name or an array of type names")
	}
	n.typeMsg = typeMessage(n.types)
	return nil
}

// typeMessage returns the issue message for a value of none of the types.
func typeMessage(m typeMask) string {
	var names []string
	for _, t := range typeNames {
		if m&t.mask != 0 {
			names = append(names, t.name)
		}
	}
	switch len(names) {
	case 1:
		return "expected " + names[0]
	default:
		return "expected " + strings.Join(names[:len(names)-1], ", ") + " or " + names[len(names)-1]
	}
}

// isTrivial reports whether n accepts every value.
func (n *node) isTrivial() bool {
	return n.ref == nil && !n.hasConst && n.enum == nil && n.anyOf == nil && n.types == 0 &&
		n.minLength < 0 && n.maxLength < 0 && n.pattern == nil && n.format == fmtNone &&
		n.numFlags == 0 && n.minItems < 0 && n.maxItems < 0 && !n.uniqueItems && n.items == nil &&
		n.required == nil && n.props == nil && !n.noAdditional && n.values == nil
}

// refName returns the $defs entry named by an internal reference
// "#/$defs/<name>", with the JSON pointer escapes ~0 and ~1 decoded.
func refName(ref string) (string, bool) {
	const prefix = "#/$defs/"
	if !strings.HasPrefix(ref, prefix) {
		return "", false
	}
	tok := ref[len(prefix):]
	if strings.Contains(tok, "/") {
		return "", false
	}
	for i := 0; i < len(tok); i++ {
		if tok[i] == '~' && (i+1 == len(tok) || (tok[i+1] != '0' && tok[i+1] != '1')) {
			return "", false
		}
	}
	tok = strings.ReplaceAll(tok, "~1", "/")
	return strings.ReplaceAll(tok, "~0", "~"), true
}

// nonNegInt converts a keyword value to a non-negative int, clamping
// values beyond the int range.
func nonNegInt(v any) (int, bool) {
	f, ok := v.(float64)
	if !ok || f < 0 || f != math.Trunc(f) || math.IsInf(f, 0) {
		return 0, false
	}
	if f >= math.MaxInt32 {
		// Beyond any realistic length; clamping keeps arithmetic safe.
		return math.MaxInt32, true
	}
	return int(f), true
}

// formatNumber formats a number for a message as JavaScript would.
func formatNumber(f float64) string {
	if f == 0 {
		return "0"
	}
	a := math.Abs(f)
	if a >= 1e-6 && a < 1e21 {
		return strconv.FormatFloat(f, 'f', -1, 64)
	}
	s := strconv.FormatFloat(f, 'e', -1, 64)
	// Go writes e+21 and e-07; JavaScript writes e+21 and e-7.
	if i := strings.IndexByte(s, 'e'); i >= 0 && i+2 < len(s) && s[i+2] == '0' {
		s = s[:i+2] + s[i+3:]
	}
	return s
}

// checkCycles rejects reference cycles that consume no input: a path from
// a node back to itself through "$ref" and "anyOf" edges only. Such a cycle
// would let validation loop forever.
func (c *compiler) checkCycles() error {
	const (
		white = iota
		grey
		black
	)
	color := make(map[*node]int, len(c.nodes))
	refPath := make(map[*node]string, len(c.refs))
	for _, r := range c.refs {
		refPath[r.from] = r.path
	}
	var visit func(n *node) *node
	visit = func(n *node) *node {
		switch color[n] {
		case grey:
			return n
		case black:
			return nil
		}
		color[n] = grey
		if n.ref != nil {
			if hit := visit(n.ref); hit != nil {
				return hit
			}
		}
		for _, b := range n.anyOf {
			if hit := visit(b); hit != nil {
				return hit
			}
		}
		color[n] = black
		return nil
	}
	for _, r := range c.refs {
		if hit := visit(r.from); hit != nil {
			return &Error{Path: r.path, Keyword: "$ref", Reason: "reference cycle that consumes no input"}
		}
	}
	return nil
}
