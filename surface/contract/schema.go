package contract

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"reflect"
	"slices"
	"strings"

	"github.com/agentsurface/agentsurface/internal/canonical"
	"github.com/agentsurface/agentsurface/internal/schema"
)

// The schema comparison proves inclusions between the languages of two
// schemas: L(a) ⊆ L(b), every value a accepts is accepted by b. A schema
// change widens when the new schema's language is not proven included in
// the old one's, and narrows when the old one's is not proven included in
// the new one's. A proof may fail because the inclusion does not hold or
// because the checker cannot show it; either way the change is reported
// (as widening or narrowing), never as neutral. Only an inclusion proved
// both ways, an equivalence, is neutral.
//
// The rules are those of the validator (internal/schema): a node is the
// conjunction of its $ref target, const, enum, anyOf (a disjunction),
// type and the keywords of each type. The checker works on the decoded
// JSON, so it also compares schemas outside the subset (a hand-edited
// contract file, an MCP server of another implementation): keywords it
// does not know are ignored on the side whose language must be included
// (which can only make that language larger: sound) and fail the proof
// on the other side.

// schemaDiff is the outcome of comparing an old and a new schema.
type schemaDiff struct {
	// wider: the new schema may accept a value the old one refuses
	// (reason says where); narrower: the converse.
	wider, narrower bool
	whyWider        string
	whyNarrower     string
}

// emptyObjectSchema is the input of a capability that takes none: the
// empty object only.
var emptyObjectSchema = json.RawMessage(`{"additionalProperties":false,"properties":{},"type":"object"}`)

// compareSchemas compares two schema texts; nil stands for def.
func compareSchemas(old, new, def json.RawMessage) schemaDiff {
	if old == nil {
		old = def
	}
	if new == nil {
		new = def
	}
	if bytes.Equal(old, new) {
		return schemaDiff{}
	}
	a, errA := decodeSchemaDoc(old)
	b, errB := decodeSchemaDoc(new)
	if errA != nil || errB != nil {
		why := "a schema is not a JSON object, so no inclusion can be proved"
		return schemaDiff{wider: true, narrower: true, whyWider: why, whyNarrower: why}
	}
	var d schemaDiff
	d.whyWider = includes(b, a)
	d.whyNarrower = includes(a, b)
	d.wider, d.narrower = d.whyWider != "", d.whyNarrower != ""
	return d
}

// schemaDoc is a decoded schema document.
type schemaDoc struct {
	root map[string]any
	defs map[string]any
	// compiled caches the standalone validators of its nodes, by node
	// identity; a nil entry is a node the validator refuses.
	compiled map[uintptr]*schema.Schema
	// kept are the nodes made while comparing, kept alive so that their
	// identities stay unique.
	kept []map[string]any
}

// keep keeps m alive as long as d.
func (d *schemaDoc) keep(m map[string]any) { d.kept = append(d.kept, m) }

func decodeSchemaDoc(text json.RawMessage) (*schemaDoc, error) {
	var root map[string]any
	if err := json.Unmarshal(text, &root); err != nil {
		return nil, err
	}
	if root == nil {
		return nil, fmt.Errorf("not an object")
	}
	d := &schemaDoc{root: root, compiled: map[uintptr]*schema.Schema{}}
	d.defs, _ = root["$defs"].(map[string]any)
	return d, nil
}

// maxSteps bounds the work of one inclusion proof; a proof that needs
// more fails (the change is then reported, as for any unproved
// inclusion).
const maxSteps = 20000

// includer proves L(a) ⊆ L(b) for two documents.
type includer struct {
	a, b  *schemaDoc
	steps int
	// assumed are the pairs under proof on the current path at a descent
	// into items or properties: meeting one again (recursion through
	// $ref) assumes it. That is sound because the cycle descended into a
	// strictly smaller value, so a value refuting the pair would need an
	// infinitely deep counterexample.
	assumed map[string]bool
}

// includes returns "" when every value a accepts is accepted by b, else
// why that could not be proved.
func includes(a, b *schemaDoc) string {
	in := &includer{a: a, b: b, assumed: map[string]bool{}}
	return in.incl([]map[string]any{a.root}, b.root, "", 0)
}

// mapID identifies a map (maps are references). The maps compared are
// kept alive by the documents and the call stack, so no two live maps
// share one.
func mapID(m map[string]any) uintptr { return reflect.ValueOf(m).Pointer() }

// maxLevel bounds how many references and unions incl expands at one
// location: more means references that never reach a schema.
const maxLevel = 64

// annotationKeys are the keywords that assert nothing.
var annotationKeys = map[string]bool{"description": true, "title": true, "default": true, "examples": true,
	"deprecated": true, "$schema": true, "$id": true, "$defs": true, "$comment": true, "readOnly": true, "writeOnly": true}

// assertionKeys are the keywords the checker understands.
var assertionKeys = map[string]bool{"type": true, "enum": true, "const": true, "properties": true, "required": true,
	"additionalProperties": true, "items": true, "minItems": true, "maxItems": true, "uniqueItems": true,
	"minLength": true, "maxLength": true, "pattern": true, "format": true, "minimum": true, "maximum": true,
	"exclusiveMinimum": true, "exclusiveMaximum": true, "multipleOf": true, "anyOf": true, "$ref": true}

// onlyAnnotations reports whether m asserts nothing.
func onlyAnnotations(m map[string]any) bool {
	for k := range m {
		if !annotationKeys[k] {
			return false
		}
	}
	return true
}

// at names a location for a reason.
func at(path string) string {
	if path == "" {
		return "at the root"
	}
	return "at " + path
}

// descend proves the a-nodes as included in b at a member or item of the
// current value.
func (in *includer) descend(as []map[string]any, b map[string]any, path string) string {
	ids := make([]uintptr, 0, len(as))
	for _, m := range as {
		ids = append(ids, mapID(m))
	}
	slices.Sort(ids)
	key := fmt.Sprint(ids, mapID(b))
	if in.assumed[key] {
		return ""
	}
	in.assumed[key] = true
	defer delete(in.assumed, key)
	return in.incl(as, b, path, 0)
}

// incl proves that the conjunction of the a-nodes as is included in the
// b-node b, at path (of the value), and returns "" or why not. level
// counts the expansions made at this location.
func (in *includer) incl(as []map[string]any, b map[string]any, path string, level int) string {
	in.steps++
	if in.steps > maxSteps {
		return at(path) + ": the schemas are too complex to compare"
	}
	if level > maxLevel {
		return at(path) + ": references that never reach a schema"
	}

	// The a side: resolve references and distribute unions, so that
	// what is compared is a union of flat conjunctions.
	flat := make([]map[string]any, 0, len(as))
	for i, m := range as {
		ref, hasRef := m["$ref"]
		branches, hasAnyOf := m["anyOf"].([]any)
		if !hasRef && !hasAnyOf {
			flat = append(flat, m)
			continue
		}
		others := append(slices.Clone(as[:i]), as[i+1:]...)
		if rest := without(m, "$ref", "anyOf"); !onlyAnnotations(rest) {
			in.a.keep(rest)
			others = append(others, rest)
		}
		if hasRef {
			// An unresolvable reference is dropped: a's language can only
			// grow.
			if target := in.a.resolve(ref); target != nil {
				others = append(others, target)
			}
			if hasAnyOf {
				u := map[string]any{"anyOf": m["anyOf"]}
				in.a.keep(u)
				others = append(others, u)
			}
			return in.incl(others, b, path, level+1)
		}
		for _, br := range branches {
			bm, ok := br.(map[string]any)
			if !ok {
				continue // not a schema: the validator would refuse it
			}
			if why := in.incl(append(slices.Clone(others), bm), b, path, level+1); why != "" {
				return why
			}
		}
		return ""
	}

	// A finite language is checked value by value, with the validator,
	// against the whole b-node.
	if values, ok := finiteValues(flat); ok {
		for _, v := range values {
			if in.a.acceptsAll(flat, v) && !in.b.accepts(b, v) {
				return fmt.Sprintf("%s: the value %s", at(path), jsonText(v))
			}
		}
		return ""
	}

	// The b side: a reference and a union.
	if ref, ok := b["$ref"]; ok {
		target := in.b.resolve(ref)
		if target == nil {
			return at(path) + ": a reference that does not resolve"
		}
		if why := in.incl(flat, target, path, level+1); why != "" {
			return why
		}
		rest := without(b, "$ref")
		in.b.keep(rest)
		return in.incl(flat, rest, path, level+1)
	}
	if raw, ok := b["anyOf"]; ok {
		branches, ok := raw.([]any)
		if !ok || len(branches) == 0 {
			return at(path) + ": anyOf is not a list of schemas"
		}
		rest := without(b, "anyOf")
		in.b.keep(rest)
		if why := in.incl(flat, rest, path, level+1); why != "" {
			return why
		}
		// Each kind of value a accepts may match its own branch.
		if ks := conjKinds(flat); ks.count() > 1 {
			for _, k := range ks.list() {
				typed := map[string]any{"type": k.typeNames()}
				in.a.keep(typed)
				if why := in.inclBranches(append(slices.Clone(flat), typed), branches, path, level+1); why != "" {
					return why
				}
			}
			return ""
		}
		return in.inclBranches(flat, branches, path, level+1)
	}
	return in.flatIncl(flat, b, path)
}

// inclBranches proves as included in one of branches.
func (in *includer) inclBranches(as []map[string]any, branches []any, path string, level int) string {
	first := ""
	for _, br := range branches {
		bm, ok := br.(map[string]any)
		if !ok {
			continue
		}
		why := in.incl(as, bm, path, level)
		if why == "" {
			return ""
		}
		if first == "" {
			first = why
		}
	}
	if first == "" {
		first = at(path) + ": anyOf has no schema"
	}
	return first
}

// resolve returns the $defs entry a reference names, or nil.
func (d *schemaDoc) resolve(ref any) map[string]any {
	s, _ := ref.(string)
	name, ok := strings.CutPrefix(s, "#/$defs/")
	if !ok {
		return nil
	}
	name = strings.ReplaceAll(strings.ReplaceAll(name, "~1", "/"), "~0", "~")
	m, _ := d.defs[name].(map[string]any)
	return m
}

// without returns a copy of m without keys.
func without(m map[string]any, keys ...string) map[string]any {
	c := make(map[string]any, len(m))
	for k, v := range m {
		if !slices.Contains(keys, k) {
			c[k] = v
		}
	}
	return c
}

// flatIncl proves a flat conjunction (no $ref, no anyOf) included in a
// flat b-node.
func (in *includer) flatIncl(as []map[string]any, b map[string]any, path string) string {
	for _, k := range sortedKeys(b) {
		if !annotationKeys[k] && !assertionKeys[k] {
			return fmt.Sprintf("%s: the keyword %q is not understood", at(path), k)
		}
	}
	if _, ok := b["const"]; ok {
		return at(path) + ": a constant where any value of a type was allowed"
	}
	if _, ok := b["enum"]; ok {
		return at(path) + ": a list of values where any value of a type was allowed"
	}
	ka := conjKinds(as) &^ emptyKinds(as)
	kb, ok := nodeKinds(b)
	if !ok {
		return at(path) + ": a type that is not understood"
	}
	if ka == 0 {
		return "" // a accepts nothing
	}
	if extra := ka &^ kb; extra != 0 {
		return fmt.Sprintf("%s: values of type %s", at(path), strings.Join(extra.names(), ", "))
	}
	if ka&kString != 0 {
		if why := stringIncl(as, b, path); why != "" {
			return why
		}
	}
	if ka&(kInteger|kFraction) != 0 {
		if why := numberIncl(as, b, ka, path); why != "" {
			return why
		}
	}
	if ka&kArray != 0 {
		if why := in.arrayIncl(as, b, path); why != "" {
			return why
		}
	}
	if ka&kObject != 0 {
		if why := in.objectIncl(as, b, path); why != "" {
			return why
		}
	}
	return ""
}

// kinds is a set of kinds of JSON values; numbers are split into
// integers and the others, as "integer" and "number" need.
type kinds uint8

const (
	kObject kinds = 1 << iota
	kArray
	kString
	kInteger
	kFraction
	kBoolean
	kNull
	kAll = kObject | kArray | kString | kInteger | kFraction | kBoolean | kNull
)

var kindNames = []struct {
	k    kinds
	name string
}{{kObject, "object"}, {kArray, "array"}, {kString, "string"}, {kInteger, "integer"}, {kFraction, "number"}, {kBoolean, "boolean"}, {kNull, "null"}}

func (k kinds) count() int { return len(k.list()) }

func (k kinds) list() []kinds {
	var out []kinds
	for _, n := range kindNames {
		if k&n.k != 0 {
			out = append(out, n.k)
		}
	}
	return out
}

func (k kinds) names() []string {
	var out []string
	for _, n := range kindNames {
		if k&n.k != 0 {
			out = append(out, n.name)
		}
	}
	return out
}

// typeNames is a "type" value meaning exactly k, a single kind.
func (k kinds) typeNames() any {
	if k == kFraction {
		return "number" // fractions with integers: as narrow as a type can say; the integers are checked too
	}
	return k.names()[0]
}

// typeKinds reads a "type" value.
func typeKinds(v any) (kinds, bool) {
	one := func(s string) (kinds, bool) {
		switch s {
		case "object":
			return kObject, true
		case "array":
			return kArray, true
		case "string":
			return kString, true
		case "integer":
			return kInteger, true
		case "number":
			return kInteger | kFraction, true
		case "boolean":
			return kBoolean, true
		case "null":
			return kNull, true
		}
		return 0, false
	}
	switch t := v.(type) {
	case string:
		return one(t)
	case []any:
		var k kinds
		for _, e := range t {
			s, ok := e.(string)
			if !ok {
				return 0, false
			}
			x, ok := one(s)
			if !ok {
				return 0, false
			}
			k |= x
		}
		return k, len(t) > 0
	}
	return 0, false
}

// nodeKinds is the kinds a b-node's "type" admits; ok is false when it
// cannot be read.
func nodeKinds(m map[string]any) (kinds, bool) {
	t, ok := m["type"]
	if !ok {
		return kAll, true
	}
	return typeKinds(t)
}

// conjKinds is the kinds a conjunction of a-nodes admits: an unreadable
// "type" restricts nothing.
func conjKinds(as []map[string]any) kinds {
	k := kAll
	for _, m := range as {
		if t, ok := m["type"]; ok {
			if x, ok := typeKinds(t); ok {
				k &= x
			}
		}
	}
	return k
}

// emptyKinds are the kinds of which a conjunction's bounds admit no
// value (a minimum length above the maximum, and so on).
func emptyKinds(as []map[string]any) kinds {
	var k kinds
	lo, hi := lengths(as, "minLength", "maxLength")
	if lo > hi {
		k |= kString
	}
	if lo, hi := lengths(as, "minItems", "maxItems"); lo > hi {
		k |= kArray
	}
	if l, h := numericRange(as); l.set && h.set && (l.v > h.v || l.v == h.v && (l.exclusive || h.exclusive)) {
		k |= kInteger | kFraction
	}
	return k
}

// lengths returns the tightest bounds of a count keyword pair.
func lengths(as []map[string]any, minKey, maxKey string) (lo, hi float64) {
	lo, hi = 0, math.Inf(1)
	for _, m := range as {
		if x, ok := count(m[minKey]); ok {
			lo = max(lo, x)
		}
		if x, ok := count(m[maxKey]); ok {
			hi = min(hi, x)
		}
	}
	return lo, hi
}

// numericRange returns the tightest numeric bounds of a conjunction.
func numericRange(as []map[string]any) (lo, hi bound) {
	for _, m := range as {
		if x, ok := number(m["minimum"]); ok {
			lo = tighter(lo, bound{true, x, false}, true)
		}
		if x, ok := number(m["exclusiveMinimum"]); ok {
			lo = tighter(lo, bound{true, x, true}, true)
		}
		if x, ok := number(m["maximum"]); ok {
			hi = tighter(hi, bound{true, x, false}, false)
		}
		if x, ok := number(m["exclusiveMaximum"]); ok {
			hi = tighter(hi, bound{true, x, true}, false)
		}
	}
	return lo, hi
}

// finiteValues returns a finite set of values including every value the
// conjunction accepts, when it has one: a const, an enum, or only null
// and booleans.
func finiteValues(as []map[string]any) ([]any, bool) {
	var best []any
	found := false
	for _, m := range as {
		if c, ok := m["const"]; ok {
			return []any{c}, true
		}
		if e, ok := m["enum"].([]any); ok && (!found || len(e) < len(best)) {
			best, found = e, true
		}
	}
	if found {
		return best, true
	}
	if k := conjKinds(as); k&^(kNull|kBoolean) == 0 {
		var vs []any
		if k&kNull != 0 {
			vs = append(vs, nil)
		}
		if k&kBoolean != 0 {
			vs = append(vs, false, true)
		}
		return vs, true
	}
	return nil, false
}

// acceptsAll reports whether every node of as may accept v: a node the
// validator refuses counts as accepting (the a side may only grow).
func (d *schemaDoc) acceptsAll(as []map[string]any, v any) bool {
	for _, m := range as {
		if s := d.standalone(m); s != nil && s.Validate(v) != nil {
			return false
		}
	}
	return true
}

// accepts reports whether node m surely accepts v.
func (d *schemaDoc) accepts(m map[string]any, v any) bool {
	s := d.standalone(m)
	return s != nil && s.Validate(v) == nil
}

// standalone compiles node m of d with the document's definitions, or
// returns nil when the validator refuses it.
func (d *schemaDoc) standalone(m map[string]any) *schema.Schema {
	if s, ok := d.compiled[mapID(m)]; ok {
		return s
	}
	doc := m
	if _, ok := m["$defs"]; !ok && d.defs != nil {
		doc = without(m)
		doc["$defs"] = d.defs
	}
	var s *schema.Schema
	if text, err := json.Marshal(doc); err == nil {
		s, _ = schema.ParseLimits(text, schema.Limits{MaxBytes: schema.HardMaxBytes, MaxDepth: schema.HardMaxDepth})
	}
	d.keep(m)
	d.compiled[mapID(m)] = s
	return s
}

// stringIncl compares the string keywords.
func stringIncl(as []map[string]any, b map[string]any, path string) string {
	minA, maxA := lengths(as, "minLength", "maxLength")
	if why := countBounds(b, "minLength", "maxLength", minA, maxA, path, "string length"); why != "" {
		return why
	}
	for _, kw := range []string{"pattern", "format"} {
		raw, ok := b[kw]
		if !ok {
			continue
		}
		want, ok := raw.(string)
		if !ok {
			return fmt.Sprintf("%s: %s is not a string", at(path), kw)
		}
		if !slices.ContainsFunc(as, func(m map[string]any) bool { s, _ := m[kw].(string); return s == want }) {
			return fmt.Sprintf("%s: strings that need not match the %s %s", at(path), kw, jsonText(want))
		}
	}
	return ""
}

// countBounds checks b's minimum and maximum count keywords against a's
// bounds.
func countBounds(b map[string]any, minKey, maxKey string, minA, maxA float64, path, what string) string {
	if raw, ok := b[minKey]; ok {
		x, ok := count(raw)
		if !ok {
			return fmt.Sprintf("%s: %s is not a count", at(path), minKey)
		}
		if minA < x {
			return fmt.Sprintf("%s: a %s below %s %s", at(path), what, minKey, jsonText(raw))
		}
	}
	if raw, ok := b[maxKey]; ok {
		x, ok := count(raw)
		if !ok {
			return fmt.Sprintf("%s: %s is not a count", at(path), maxKey)
		}
		if maxA > x {
			return fmt.Sprintf("%s: a %s above %s %s", at(path), what, maxKey, jsonText(raw))
		}
	}
	return ""
}

// count reads a non-negative integer keyword value.
func count(v any) (float64, bool) {
	f, ok := v.(float64)
	return f, ok && f >= 0 && f == math.Trunc(f)
}

// bound is one side of a numeric range.
type bound struct {
	set       bool
	v         float64
	exclusive bool
}

// tighter returns the tighter of two lower (low) or upper bounds.
func tighter(x, y bound, low bool) bound {
	beyond := y.v < x.v
	if low {
		beyond = y.v > x.v
	}
	switch {
	case !x.set:
		return y
	case !y.set:
		return x
	case beyond || y.v == x.v && y.exclusive:
		return y
	}
	return x
}

func number(v any) (float64, bool) {
	f, ok := v.(float64)
	return f, ok && !math.IsNaN(f) && !math.IsInf(f, 0)
}

// numberIncl compares the number keywords.
func numberIncl(as []map[string]any, b map[string]any, ka kinds, path string) string {
	lo, hi := numericRange(as)
	check := func(key string, exclusive, low bool) string {
		raw, ok := b[key]
		if !ok {
			return ""
		}
		x, ok := number(raw)
		if !ok {
			return fmt.Sprintf("%s: %s is not a number", at(path), key)
		}
		a := hi
		if low {
			a = lo
		}
		holds := a.set && (low && (a.v > x || a.v == x && (a.exclusive || !exclusive)) ||
			!low && (a.v < x || a.v == x && (a.exclusive || !exclusive)))
		if !holds {
			return fmt.Sprintf("%s: numbers outside %s %s", at(path), key, jsonText(raw))
		}
		return ""
	}
	for _, c := range []struct {
		key            string
		exclusive, low bool
	}{{"minimum", false, true}, {"exclusiveMinimum", true, true}, {"maximum", false, false}, {"exclusiveMaximum", true, false}} {
		if why := check(c.key, c.exclusive, c.low); why != "" {
			return why
		}
	}
	if raw, ok := b["multipleOf"]; ok {
		x, ok := number(raw)
		if !ok || x <= 0 {
			return at(path) + ": multipleOf is not a positive number"
		}
		same := slices.ContainsFunc(as, func(m map[string]any) bool { y, ok := number(m["multipleOf"]); return ok && y == x })
		if !same && !(x == 1 && ka&kFraction == 0) {
			return fmt.Sprintf("%s: numbers that need not be multiples of %s", at(path), jsonText(raw))
		}
	}
	return ""
}

// arrayIncl compares the array keywords.
func (in *includer) arrayIncl(as []map[string]any, b map[string]any, path string) string {
	minA, maxA := lengths(as, "minItems", "maxItems")
	unique := false
	var items []map[string]any
	for _, m := range as {
		if u, _ := m["uniqueItems"].(bool); u {
			unique = true
		}
		if it, ok := m["items"].(map[string]any); ok {
			items = append(items, it)
		}
	}
	if why := countBounds(b, "minItems", "maxItems", minA, maxA, path, "number of items"); why != "" {
		return why
	}
	if raw, ok := b["uniqueItems"]; ok {
		u, ok := raw.(bool)
		if !ok {
			return at(path) + ": uniqueItems is not a boolean"
		}
		if u && !unique && maxA > 1 {
			return at(path) + ": arrays with duplicate items"
		}
	}
	if raw, ok := b["items"]; ok && maxA > 0 {
		bi, ok := raw.(map[string]any)
		if !ok {
			if raw == true {
				return ""
			}
			return at(path) + ": items is not a schema"
		}
		return in.descend(items, bi, path+"[]")
	}
	return ""
}

// objectIncl compares the object keywords.
func (in *includer) objectIncl(as []map[string]any, b map[string]any, path string) string {
	required := map[string]bool{}
	for _, m := range as {
		if req, ok := m["required"].([]any); ok {
			for _, r := range req {
				if s, ok := r.(string); ok {
					required[s] = true
				}
			}
		}
	}
	if raw, ok := b["required"]; ok {
		req, ok := raw.([]any)
		if !ok {
			return at(path) + ": required is not a list of names"
		}
		for _, r := range req {
			s, ok := r.(string)
			if !ok {
				return at(path) + ": required is not a list of names"
			}
			if !required[s] {
				return fmt.Sprintf("%s: objects without the property %q", at(path), s)
			}
		}
	}
	closedA := slices.ContainsFunc(as, func(m map[string]any) bool { return m["additionalProperties"] == false })
	var propsB map[string]any
	if raw, ok := b["properties"]; ok {
		if propsB, ok = raw.(map[string]any); !ok {
			return at(path) + ": properties is not an object of schemas"
		}
	}
	closedB := false
	if raw, ok := b["additionalProperties"]; ok {
		v, ok := raw.(bool)
		if !ok {
			return at(path) + ": additionalProperties is not a boolean"
		}
		closedB = !v
	}
	names := map[string]bool{}
	for _, m := range as {
		if p, ok := m["properties"].(map[string]any); ok {
			for k := range p {
				names[k] = true
			}
		}
	}
	for k := range propsB {
		names[k] = true
	}
	for _, name := range sortedKeys(names) {
		var decls []map[string]any
		forbidden := false
		for _, m := range as {
			p, _ := m["properties"].(map[string]any)
			d, declared := p[name]
			switch {
			case declared:
				if dm, ok := d.(map[string]any); ok {
					decls = append(decls, dm)
				} else if d == false {
					forbidden = true
				}
			case m["additionalProperties"] == false:
				forbidden = true
			}
		}
		if forbidden {
			continue
		}
		sub := path + "." + name
		if path == "" {
			sub = name
		}
		bd, declared := propsB[name]
		if !declared {
			if closedB {
				return fmt.Sprintf("%s: the property %q", at(path), name)
			}
			continue
		}
		bm, ok := bd.(map[string]any)
		if !ok {
			if bd == true {
				continue
			}
			return fmt.Sprintf("%s: the property %q", at(path), name)
		}
		if why := in.descend(decls, bm, sub); why != "" {
			return why
		}
	}
	if closedB && !closedA {
		return at(path) + ": properties not listed in the schema"
	}
	return ""
}

// sortedKeys returns m's keys in order.
func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// jsonText is the canonical JSON of a decoded value, for reasons.
func jsonText(v any) string {
	b, err := canonical.Marshal(v)
	if err != nil {
		return fmt.Sprint(v)
	}
	if len(b) > 60 {
		return string(b[:57]) + "…"
	}
	return string(b)
}
