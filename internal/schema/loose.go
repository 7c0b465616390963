package schema

import (
	"encoding/json"
	"strconv"
	"strings"
)

// Schemas compiled for comparison.
//
// A contract compares schemas that need not lie in the subset: a
// hand-edited contract file, the listing of an MCP server of another
// implementation. parseLoose compiles such a document with the same
// compiler as Parse, so that every keyword of the subset means what the
// validator makes of it, and records on each node what the subset does
// not model instead of refusing it. The prover (include.go) then treats
// what is recorded as the rule says: a construct it does not model never
// makes a change look safe.

// outside is what a node compiled by parseLoose says beyond the subset,
// and what it reaches that does.
type outside struct {
	// restricting lists keywords outside the subset, or with a value the
	// subset refuses, that can only restrict the values the node accepts
	// whatever they say: the in-place assertions and applicators of
	// draft 2020-12 and draft-07 ("not", "allOf", "minProperties", ...),
	// a "format" the subset does not know, a "$ref" that does not resolve
	// to a root $defs entry. Leaving them out can only make the node
	// accept more.
	restricting []string
	// unmodeled lists, as phrases for a reason, what may make the node
	// accept values the compiled keywords refuse, or whose meaning is not
	// known: a keyword of no known vocabulary, "patternProperties" next to
	// "additionalProperties": false, "prefixItems" next to "items", a
	// value that is not a schema.
	unmodeled []string
	// reachesOutside is set when the node or a node it reaches (through
	// $ref, anyOf, items or properties) has restricting or unmodeled
	// entries; reachesUnmodeled when one has unmodeled entries.
	reachesOutside, reachesUnmodeled bool
}

// looseAnnotations are the keywords that assert nothing in draft 2020-12
// and draft-07, whatever their value; a loose node ignores them. "$defs"
// and "definitions" only hold schemas for references ("$defs" at the
// root is compiled).
var looseAnnotations = map[string]bool{
	"description": true, "title": true, "default": true, "examples": true, "deprecated": true,
	"$comment": true, "readOnly": true, "writeOnly": true, "contentEncoding": true,
	"contentMediaType": true, "contentSchema": true, "$anchor": true, "$dynamicAnchor": true,
	"$recursiveAnchor": true, "$defs": true, "definitions": true,
}

// looseRestricting are the keywords that can only restrict what a node
// accepts, whatever their value: the subset's own keywords when their
// value is refused (a "type" name it does not know, a schema-valued
// "additionalProperties", an "items" array, a "$ref" outside $defs) and
// the other in-place assertions and applicators. "patternProperties" and
// "prefixItems" restrict too, unless they change the meaning of a keyword
// beside them (see interplay).
var looseRestricting = map[string]bool{
	"type": true, "enum": true, "required": true, "additionalProperties": true, "items": true,
	"minItems": true, "maxItems": true, "uniqueItems": true, "minLength": true, "maxLength": true,
	"pattern": true, "format": true, "minimum": true, "maximum": true, "exclusiveMinimum": true,
	"exclusiveMaximum": true, "multipleOf": true, "anyOf": true, "$ref": true,
	"not": true, "allOf": true, "oneOf": true, "if": true, "then": true, "else": true,
	"dependentRequired": true, "dependentSchemas": true, "dependencies": true, "propertyNames": true,
	"minProperties": true, "maxProperties": true, "contains": true, "minContains": true,
	"maxContains": true, "unevaluatedProperties": true, "unevaluatedItems": true,
	"additionalItems": true, "patternProperties": true, "prefixItems": true,
	"$dynamicRef": true, "$recursiveRef": true,
}

// dialect is a JSON Schema dialect a root's "$schema" may name.
type dialect uint8

const (
	dialect2020 dialect = iota // draft 2020-12, or no "$schema"
	dialectDraft7
	dialectUnknown
)

// dialectOf reads a "$schema" value.
func dialectOf(s string) dialect {
	switch strings.TrimSuffix(s, "#") {
	case "https://json-schema.org/draft/2020-12/schema", "http://json-schema.org/draft/2020-12/schema":
		return dialect2020
	case "http://json-schema.org/draft-07/schema", "https://json-schema.org/draft-07/schema":
		return dialectDraft7
	}
	return dialectUnknown
}

// parseLoose compiles any JSON Schema document for comparison: the
// subset's keywords as Parse compiles them, boolean subschemas (true
// accepts every value, false none), and what lies outside the subset
// recorded on its node (see outside). Its schema is for comparison only:
// its validator checks only the compiled keywords. It fails with an
// [*Error] for a text that is not a JSON object, is longer than
// [HardMaxBytes], is not valid JSON or UTF-8 or repeats a key, and for
// reference cycles that consume no input.
func parseLoose(raw []byte) (*Schema, error) {
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
	m, ok := doc.(map[string]any)
	if !ok {
		return nil, &Error{Reason: "a schema must be a JSON object"}
	}
	c := compiler{loose: true}
	if s, ok := m["$schema"].(string); ok {
		c.draft7 = dialectOf(s) == dialectDraft7
	}
	root, err := c.compileRoot(doc)
	if err != nil {
		return nil, err
	}
	c.markReach()
	return &Schema{root: root}, nil
}

// newNode returns a node with no keyword.
func newNode() *node {
	return &node{minLength: -1, maxLength: -1, minItems: -1, maxItems: -1}
}

// looseValue compiles a subschema that is not an object: true accepts
// every value, false none (an empty enum), anything else is not a schema.
func (c *compiler) looseValue(v any) *node {
	n := newNode()
	c.nodes = append(c.nodes, n)
	switch v {
	case true:
	case false:
		n.enum = []any{}
	default:
		n.unmodel("a value that is not a schema")
	}
	return n
}

// opaque returns a node of unknown meaning.
func (c *compiler) opaque(why string) *node {
	n := newNode()
	c.nodes = append(c.nodes, n)
	n.unmodel(why)
	return n
}

// restrict records a restricting keyword on n.
func (n *node) restrict(k string) {
	if n.out == nil {
		n.out = &outside{}
	}
	n.out.restricting = append(n.out.restricting, k)
}

// unmodel records on n what the model does not see.
func (n *node) unmodel(why string) {
	if n.out == nil {
		n.out = &outside{}
	}
	n.out.unmodeled = append(n.out.unmodeled, why)
}

// outsideKeyword records keyword k of node n, at path, which the subset
// refuses (the keyword, or its value, or its place).
func (c *compiler) outsideKeyword(n *node, k, path string) {
	switch {
	case k == "$id" && path == "":
		// Names the document; references are resolved in it anyway.
	case k == "$schema" && path == "":
		// A dialect not known: any keyword may mean something else.
		n.unmodel(`"$schema" naming a dialect the comparison does not know`)
	case k == "$schema" || k == "$id":
		n.unmodel(strconv.Quote(k) + " inside a schema, which changes how what it holds is read")
	case looseAnnotations[k]:
	case k == "properties":
		n.unmodel(`"properties" that are not an object of schemas`)
	case looseRestricting[k]:
		n.restrict(k)
	default:
		n.unmodel("the keyword " + strconv.Quote(k))
	}
}

// interplay records, once node n's keywords m are compiled, the keywords
// that change the meaning of one the subset compiled beside them.
func (c *compiler) interplay(n *node, m map[string]any) {
	if _, ok := m["patternProperties"]; ok && n.noAdditional {
		n.unmodel(`"patternProperties" next to "additionalProperties": false`)
	}
	if _, ok := m["prefixItems"]; ok && n.items != nil {
		n.unmodel(`"prefixItems" next to "items"`)
	}
	if _, ok := m["$ref"]; ok && c.draft7 {
		for k := range m {
			if k != "$ref" && k != "$schema" && k != "$id" && !looseAnnotations[k] {
				n.unmodel(`"$ref" next to other keywords, which draft-07 ignores`)
				break
			}
		}
	}
}

// markReach sets the reach flags of every node that has, or reaches,
// keywords outside the subset.
func (c *compiler) markReach() {
	preds := make(map[*node][]*node)
	var queue []*node
	for _, n := range c.nodes {
		edge := func(to *node) {
			if to != nil {
				preds[to] = append(preds[to], n)
			}
		}
		edge(n.ref)
		for _, b := range n.anyOf {
			edge(b)
		}
		edge(n.items)
		for _, p := range n.props {
			edge(p.node)
		}
		edge(n.values)
		if n.out != nil {
			n.out.reachesOutside = true
			n.out.reachesUnmodeled = len(n.out.unmodeled) > 0
			queue = append(queue, n)
		}
	}
	for len(queue) > 0 {
		n := queue[0]
		queue = queue[1:]
		for _, p := range preds[n] {
			if p.out == nil {
				p.out = &outside{}
			}
			changed := false
			if !p.out.reachesOutside {
				p.out.reachesOutside, changed = true, true
			}
			if n.out.reachesUnmodeled && !p.out.reachesUnmodeled {
				p.out.reachesUnmodeled, changed = true, true
			}
			if changed {
				queue = append(queue, p)
			}
		}
	}
}
