package schema

import (
	"encoding/json"
	"strconv"
)

// DefaultMaxBytes is the default limit on [Schema.Size]: the UTF-8 length
// of a schema's compact JSON text.
const DefaultMaxBytes = 16384

// DefaultMaxDepth is the default limit on [Schema.Depth].
const DefaultMaxDepth = 8

// HardMaxBytes and HardMaxDepth bound every schema whatever the [Limits]:
// [Parse] refuses raw text longer than HardMaxBytes before decoding it and
// stops descending at depth HardMaxDepth, so hostile input can exhaust
// neither memory nor the stack. Larger limits are clamped to them.
const (
	HardMaxBytes = 1 << 20
	HardMaxDepth = 64
)

// MaxIssues is the maximum number of issues [Schema.Validate] reports; it
// stops validating once it has found that many.
const MaxIssues = 20

// Limits bounds the size and depth of a schema. A zero field takes the
// default ([DefaultMaxBytes], [DefaultMaxDepth]); values above the hard
// caps ([HardMaxBytes], [HardMaxDepth]) are clamped to them.
type Limits struct {
	// MaxBytes is the maximum [Schema.Size].
	MaxBytes int
	// MaxDepth is the maximum [Schema.Depth].
	MaxDepth int
}

// resolve returns l with defaults filled in and hard caps applied.
func (l Limits) resolve() Limits {
	if l.MaxBytes <= 0 {
		l.MaxBytes = DefaultMaxBytes
	}
	if l.MaxBytes > HardMaxBytes {
		l.MaxBytes = HardMaxBytes
	}
	if l.MaxDepth <= 0 {
		l.MaxDepth = DefaultMaxDepth
	}
	if l.MaxDepth > HardMaxDepth {
		l.MaxDepth = HardMaxDepth
	}
	return l
}

// Schema is a compiled, immutable schema of the supported subset. It is
// safe for concurrent use; the zero value is not usable (get one from
// [Parse], [Infer] or [For]).
type Schema struct {
	root *node
	// text is the agent-visible schema: compact JSON, keys in the order
	// they were authored (see ordered.go).
	text string
	// depth is the maximum nesting depth; deepest is the JSON pointer of
	// the first node (in key order) found at that depth.
	depth   int
	deepest string
	// object reports whether the root's "type" is the string "object".
	object bool
}

// JSON returns the agent-visible schema as authored, without whitespace:
// a raw schema's text as written (keys in the author's order, numbers and
// escapes as written), an inferred schema's properties in struct field
// order. Every keyword of the subset is kept, annotations included. The
// string is immutable and may be shared.
func (s *Schema) JSON() string { return s.text }

// Size returns the length of [Schema.JSON] in UTF-8 bytes, the unit of
// every schema size limit.
func (s *Schema) Size() int { return len(s.text) }

// Depth returns the schema's maximum nesting depth: the root is at depth 0
// and each step into "items", "properties"/x, "anyOf"/i or "$defs"/x adds
// one. References are not followed.
func (s *Schema) Depth() int { return s.depth }

// IsObject reports whether the root declares "type": "object" as a single
// string (not a type array, so not nullable). Tool input schemas must.
func (s *Schema) IsObject() bool { return s.object }

// CheckLimits returns an [*Error] when [Schema.Size] exceeds maxBytes or
// [Schema.Depth] exceeds maxDepth, and nil otherwise. A limit ≤ 0 is not
// checked.
func (s *Schema) CheckLimits(maxBytes, maxDepth int) error {
	if maxBytes > 0 && s.Size() > maxBytes {
		return &Error{Reason: "schema is " + strconv.Itoa(s.Size()) + " bytes, more than the maximum " + strconv.Itoa(maxBytes)}
	}
	if maxDepth > 0 && s.depth > maxDepth {
		return &Error{Path: s.deepest, Reason: "schema is nested " + strconv.Itoa(s.depth) + " levels deep, more than the maximum " + strconv.Itoa(maxDepth)}
	}
	return nil
}

// MarshalJSON returns [Schema.JSON], so a *Schema can be embedded in JSON
// payloads such as tool lists.
func (s *Schema) MarshalJSON() ([]byte, error) { return []byte(s.text), nil }

// Error reports why a schema, or a Go type whose schema is inferred, lies
// outside the supported subset or its limits. Callers map it to the
// UNSUPPORTED_SCHEMA definition error. It is meant for the application's
// developer: Reason may name Go types but never contains validated data.
type Error struct {
	// Path is a JSON pointer (RFC 6901) into the schema to the offending
	// keyword or node; "" is the root.
	Path string
	// Keyword is the offending keyword, or "" when the node as a whole is
	// at fault (not an object, too deep, too large, an unsupported Go type).
	Keyword string
	// Reason says what is wrong. It may quote the schema, a JSON syntax
	// error or the Go type, never validated data.
	Reason string
}

// Error returns "schema: " followed by the location, the keyword and the
// reason.
func (e *Error) Error() string {
	msg := "schema: "
	if e.Path != "" {
		msg += "at " + strconv.Quote(e.Path) + ": "
	}
	if e.Keyword != "" {
		msg += "keyword " + strconv.Quote(e.Keyword) + ": "
	}
	return msg + e.Reason
}

// Issue is one reason a value does not validate. Path locates the value in
// the spec's issue-path format: property names joined with ".", "[i]" for
// array indexes, "" for the root ("ids", "ids[0]", "filter.site"); a
// missing required property is reported at its own path. Message is a
// fixed template that never repeats any part of the value.
type Issue struct {
	Path    string `json:"path"`
	Message string `json:"message"`
}

// Parse decodes raw as a JSON Schema, checks it against the supported
// subset and the default limits, and compiles it. Any violation is
// reported as an [*Error].
func Parse(raw []byte) (*Schema, error) {
	return ParseLimits(raw, Limits{})
}

// ParseLimits is like [Parse] with the given limits instead of the
// defaults.
func ParseLimits(raw []byte, lim Limits) (*Schema, error) {
	lim = lim.resolve()
	if len(raw) > HardMaxBytes {
		return nil, &Error{Reason: "schema text is longer than " + strconv.Itoa(HardMaxBytes) + " bytes"}
	}
	var doc any
	if err := json.Unmarshal(raw, &doc); err != nil {
		return nil, &Error{Reason: "not valid JSON: " + err.Error()}
	}
	if err := checkText(raw); err != nil {
		return nil, err
	}
	text, err := compactText(raw)
	if err != nil {
		return nil, err
	}
	s, err := build(doc, text, false)
	if err != nil {
		return nil, err
	}
	if err := s.CheckLimits(lim.MaxBytes, lim.MaxDepth); err != nil {
		return nil, err
	}
	return s, nil
}

// build checks and compiles a decoded schema document, whose
// agent-visible text is text. The document is owned by build: in
// inferred mode it strips the hidden map value schemas from it.
func build(doc any, text string, inferred bool) (*Schema, error) {
	c := compiler{inferred: inferred}
	root, err := c.compileRoot(doc)
	if err != nil {
		return nil, err
	}
	s := &Schema{
		root:    root,
		text:    text,
		depth:   c.depth,
		deepest: c.deepest,
		object:  root.typeIsObject,
	}
	return s, nil
}
