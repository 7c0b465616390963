package schema

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"

	"github.com/agentsurface/agentsurface/internal/canonical"
)

// Inclusion proofs.
//
// Compare classifies a schema change by proving inclusions between the
// languages of two schemas: L(a) ⊆ L(b), every value a accepts is
// accepted by b. A change widens when the new schema's language is not
// proven included in the old one's, and narrows when the old one's is not
// proven included in the new one's. A proof may fail because the
// inclusion does not hold or because the prover cannot show it; either
// way the change is reported (as widening or narrowing), never as
// neutral. Only an inclusion proved both ways, an equivalence, is neutral.
//
// The prover works on compiled nodes, so a keyword means to it what it
// means to the validator: a node is the conjunction of its $ref target,
// const, enum, anyOf (a disjunction), type and the keywords of each
// type. What a node compiled by parseLoose says beyond the subset (see
// outside) is treated by one rule: it never makes a change look safe. A
// keyword that can only restrict is left out on the side whose language
// must be included (a), which can only make that language larger, and
// fails the proof on the other side (b); anything else the model does not
// see fails the proof on either side.

// Parts of a node the prover has already expanded: a term or goal with
// skipRef stands for its node without the "$ref", with skipAnyOf without
// the "anyOf".
const (
	skipRef uint8 = 1 << iota
	skipAnyOf
)

// ProofWork is the work one inclusion proof may do, in steps (about one
// node, property or value visited each; some tens of nanoseconds). A
// proof that needs more fails: the change is reported as unproven, too
// complex. [Compare] makes two proofs.
const ProofWork = 100_000

// maxLevel bounds how many references and unions a proof expands at one
// location of the value.
const maxLevel = 64

// maxDescents bounds how deep into a value a proof descends (through
// items and properties); recursive schemas are cut short by assuming the
// pairs already under proof.
const maxDescents = 4 * HardMaxDepth

// tooComplex is the reason of a proof that ran out of work.
const tooComplex = "unproven: too complex to compare within the prover's budget"

// Budget is the work that the inclusion proofs of a run of comparisons may
// still do, in the prover's steps: [Compare] takes from it what its two
// proofs did, and once less than a comparison may need is left, reports
// every further change as unproven without trying. A Budget is not safe
// for concurrent use.
type Budget struct{ left int }

// NewBudget returns a budget of the given steps.
func NewBudget(steps int) *Budget { return &Budget{left: steps} }

// Left returns the steps left.
func (b *Budget) Left() int { return b.left }

// Difference is how the language of a new schema relates to the old
// one's, as far as the prover can show.
type Difference struct {
	// Wider is set when the new schema may accept a value the old one
	// refuses: the inclusion of the new language in the old one is not
	// proven. WhyWider says where and why.
	Wider    bool
	WhyWider string
	// Narrower is set when the old schema may accept a value the new one
	// refuses; WhyNarrower says where and why.
	Narrower    bool
	WhyNarrower string
}

// Compare compares an old and a new schema text, which need not lie in
// the subset. The proofs are sound, not complete: a change it calls wider
// may in fact accept nothing new, but a change it does not call wider
// accepts nothing the old schema refuses, under the validator's rules and
// under draft 2020-12's. A text that cannot be read (not a JSON object,
// longer than [HardMaxBytes], a key given twice, a reference cycle that
// consumes no input) is wider and narrower, unproven. Equal texts are
// equivalent.
//
// Each of the two proofs may do [ProofWork] steps. With a budget, Compare
// takes from it the steps its proofs did (and the length of the texts
// over 64); when less than that may need is left, it reports the change
// as wider and narrower, unproven, without trying, so that the outcome
// never depends on which schema is old. A nil budget sets no bound across
// comparisons.
func Compare(old, new []byte, budget *Budget) Difference {
	if bytes.Equal(old, new) {
		return Difference{}
	}
	unproven := func(why string) Difference {
		return Difference{Wider: true, WhyWider: why, Narrower: true, WhyNarrower: why}
	}
	read := (len(old) + len(new)) / 64
	if budget != nil && budget.left < read+2*ProofWork {
		return unproven("unproven: too complex: the budget of this run of comparisons is spent")
	}
	a, errA := parseLoose(old)
	b, errB := parseLoose(new)
	if budget != nil {
		budget.left -= read
	}
	switch {
	case errA != nil:
		return unproven("unproven: the old schema cannot be read (" + errA.Error() + ")")
	case errB != nil:
		return unproven("unproven: the new schema cannot be read (" + errB.Error() + ")")
	}
	wider, w1 := includes(b, a, ProofWork)
	narrower, w2 := includes(a, b, ProofWork)
	if budget != nil {
		budget.left -= w1 + w2
	}
	return Difference{Wider: wider != "", WhyWider: wider, Narrower: narrower != "", WhyNarrower: narrower}
}

// includes returns "" when it proves that every value a accepts is
// accepted by b, else why not; and the steps it took (at most about
// limit).
func includes(a, b *Schema, limit int) (why string, work int) {
	p := &prover{limit: limit, assumed: map[string]bool{}, ids: map[*node]uint32{}}
	why = p.incl([]term{{n: a.root}}, goal{n: b.root}, "", 0)
	if p.exhausted {
		why = tooComplex
	}
	return why, min(p.work, limit)
}

// term is one conjunct of the a side: its node less the parts skip
// names, or, when n is nil, the values of the kinds.
type term struct {
	n     *node
	skip  uint8
	kinds typeMask
}

// goal is the b side: a node less the parts skip names.
type goal struct {
	n    *node
	skip uint8
}

// prover holds the state of one inclusion proof.
type prover struct {
	work, limit int
	exhausted   bool
	// assumed are the pairs under proof on the current path at a
	// descent into items or properties: meeting one again (recursion
	// through $ref) assumes it. That is sound because the cycle descended
	// into a strictly smaller value, so a value refuting the pair would
	// need an infinitely deep counterexample.
	assumed map[string]bool
	// ids number the nodes met, for the keys of assumed.
	ids      map[*node]uint32
	descents int
}

// charge adds w steps and reports whether the proof ran out of work.
func (p *prover) charge(w int) bool {
	p.work += w
	if p.work > p.limit {
		p.exhausted = true
	}
	return p.exhausted
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
func (p *prover) descend(as []*node, b *node, path string) string {
	key := p.pairKey(as, b)
	if p.assumed[key] {
		return ""
	}
	if p.descents >= maxDescents {
		return at(path) + ": unproven: values nested too deeply to compare"
	}
	p.assumed[key] = true
	p.descents++
	defer func() {
		delete(p.assumed, key)
		p.descents--
	}()
	ts := make([]term, len(as))
	for i, n := range as {
		ts[i] = term{n: n}
	}
	return p.incl(ts, goal{n: b}, path, 0)
}

// pairKey identifies a conjunction of a-nodes and a b-node.
func (p *prover) pairKey(as []*node, b *node) string {
	id := func(n *node) uint32 {
		x, ok := p.ids[n]
		if !ok {
			x = uint32(len(p.ids))
			p.ids[n] = x
		}
		return x
	}
	ids := make([]uint32, 0, len(as))
	for _, n := range as {
		ids = append(ids, id(n))
	}
	slices.Sort(ids)
	buf := make([]byte, 0, 4*len(ids)+5)
	for _, x := range ids {
		buf = binary.LittleEndian.AppendUint32(buf, x)
	}
	buf = append(buf, '|')
	buf = binary.LittleEndian.AppendUint32(buf, id(b))
	return string(buf)
}

// incl proves that the conjunction of the terms as is included in the
// goal b, at path (of the value), and returns "" or why not. level counts
// the expansions made at this location.
func (p *prover) incl(as []term, b goal, path string, level int) string {
	if p.charge(1 + len(as)) {
		return at(path) + ": " + tooComplex
	}
	if level > maxLevel {
		return at(path) + ": unproven: references and unions nested more than " + strconv.Itoa(maxLevel) + " deep"
	}
	// What the model does not see on the a side: its language cannot be
	// bounded.
	for _, t := range as {
		if t.n != nil && t.n.out != nil && len(t.n.out.unmodeled) > 0 {
			return fmt.Sprintf("%s: unproven: %s is not modeled", at(path), t.n.out.unmodeled[0])
		}
	}

	// The a side: resolve references and distribute unions, so that
	// what is compared is a union of flat conjunctions.
	for i, t := range as {
		if t.n == nil {
			continue
		}
		n := t.n
		hasRef := t.skip&skipRef == 0 && n.ref != nil
		hasAnyOf := t.skip&skipAnyOf == 0 && n.anyOf != nil
		if !hasRef && !hasAnyOf {
			continue
		}
		others := make([]term, 0, len(as)+2)
		others = append(others, as[:i]...)
		others = append(others, as[i+1:]...)
		if hasRef {
			if !n.localTrivial() || hasAnyOf {
				others = append(others, term{n: n, skip: t.skip | skipRef})
			}
			others = append(others, term{n: n.ref})
			return p.incl(others, b, path, level+1)
		}
		if !n.localTrivial() {
			others = append(others, term{n: n, skip: t.skip | skipAnyOf})
		}
		for _, br := range n.anyOf {
			if why := p.incl(append(slices.Clip(others), term{n: br}), b, path, level+1); why != "" {
				return why
			}
		}
		return ""
	}

	// A finite language is checked value by value, with the validator,
	// against the whole b-node.
	if values, ok := finiteValues(as); ok {
		for _, v := range values {
			refuted := p.acceptsAll(as, v) && !p.accepts(b, v)
			if p.exhausted {
				return at(path) + ": " + tooComplex
			}
			if refuted {
				return fmt.Sprintf("%s: the value %s", at(path), jsonText(v))
			}
		}
		return ""
	}

	// The b side: a reference and a union.
	if b.skip&skipRef == 0 && b.n.ref != nil {
		if why := p.incl(as, goal{n: b.n.ref}, path, level+1); why != "" {
			return why
		}
		return p.incl(as, goal{n: b.n, skip: b.skip | skipRef}, path, level+1)
	}
	if b.skip&skipAnyOf == 0 && b.n.anyOf != nil {
		if why := p.incl(as, goal{n: b.n, skip: b.skip | skipAnyOf}, path, level+1); why != "" {
			return why
		}
		// Each kind of value a accepts may match its own branch.
		if ks := conjKinds(as); kindCount(ks) > 1 {
			for _, k := range kindList(ks) {
				if why := p.inclBranches(append(slices.Clip(as), term{kinds: k}), b.n.anyOf, path, level+1); why != "" {
					return why
				}
			}
			return ""
		}
		return p.inclBranches(as, b.n.anyOf, path, level+1)
	}
	return p.flatIncl(as, b.n, path)
}

// inclBranches proves as included in one of branches.
func (p *prover) inclBranches(as []term, branches []*node, path string, level int) string {
	first := ""
	for _, br := range branches {
		why := p.incl(as, goal{n: br}, path, level)
		if why == "" {
			return ""
		}
		if p.exhausted {
			return at(path) + ": " + tooComplex
		}
		if first == "" {
			first = why
		}
	}
	return first
}

// localTrivial reports whether n asserts nothing but its "$ref" and
// "anyOf" (what it records outside the subset aside).
func (n *node) localTrivial() bool {
	return !n.hasConst && n.enum == nil && n.types == 0 &&
		n.minLength < 0 && n.maxLength < 0 && n.pattern == nil && n.format == fmtNone &&
		n.numFlags == 0 && n.minItems < 0 && n.maxItems < 0 && !n.uniqueItems && n.items == nil &&
		n.required == nil && n.props == nil && !n.noAdditional && n.values == nil
}

// prop returns the schema n declares for property name, or nil.
func (n *node) prop(name string) *node {
	i, found := slices.BinarySearchFunc(n.props, name, func(pr prop, name string) int {
		return strings.Compare(pr.name, name)
	})
	if !found {
		return nil
	}
	return n.props[i].node
}

// accepts nothing: the false schema of a loose document.
func (n *node) never() bool { return n.enum != nil && len(n.enum) == 0 }

// flatIncl proves a flat conjunction (no $ref, no anyOf left to expand)
// included in the b-node b, less its $ref and anyOf.
func (p *prover) flatIncl(as []term, b *node, path string) string {
	if o := b.out; o != nil && (len(o.restricting) > 0 || len(o.unmodeled) > 0) {
		switch {
		case len(o.unmodeled) > 0:
			return fmt.Sprintf("%s: unproven: %s is not modeled", at(path), o.unmodeled[0])
		case o.restricting[0] == "$ref":
			return at(path) + ": a reference that does not resolve"
		}
		return fmt.Sprintf("%s: the keyword %q is not understood", at(path), o.restricting[0])
	}
	if b.values != nil {
		return at(path) + ": the values of a map, which its schema does not show"
	}
	if b.hasConst {
		return at(path) + ": a constant where any value of a type was allowed"
	}
	if b.enum != nil {
		return at(path) + ": a list of values where any value of a type was allowed"
	}
	ka := conjKinds(as) &^ emptyKinds(as)
	if ka == 0 {
		return "" // a accepts nothing
	}
	if extra := ka &^ kindsOf(b.types); extra != 0 {
		return fmt.Sprintf("%s: values of type %s", at(path), strings.Join(kindNames(extra), ", "))
	}
	if ka&tString != 0 {
		if why := stringIncl(as, b, path); why != "" {
			return why
		}
	}
	if ka&(tInteger|tFraction) != 0 {
		if why := numberIncl(as, b, ka, path); why != "" {
			return why
		}
	}
	if ka&tArray != 0 {
		if why := p.arrayIncl(as, b, path); why != "" {
			return why
		}
	}
	if ka&tObject != 0 {
		if why := p.objectIncl(as, b, path); why != "" {
			return why
		}
	}
	return ""
}

// tFraction is, for the prover, the numbers that are not integers: it
// splits "number" into tInteger and tFraction, so that kinds are disjoint.
const tFraction typeMask = 1 << 7

// allKinds are the kinds of every JSON value.
const allKinds = tObject | tArray | tString | tInteger | tFraction | tBoolean | tNull

// kindOrder lists the kinds in the order of reasons.
var kindOrder = [...]struct {
	k    typeMask
	name string
}{{tObject, "object"}, {tArray, "array"}, {tString, "string"}, {tInteger, "integer"}, {tFraction, "number"}, {tBoolean, "boolean"}, {tNull, "null"}}

// kindsOf returns the kinds a "type" admits (0: any).
func kindsOf(m typeMask) typeMask {
	if m == 0 {
		return allKinds
	}
	if m&tNumber != 0 {
		m = m&^tNumber | tInteger | tFraction
	}
	return m
}

// kindList returns the single kinds of k.
func kindList(k typeMask) []typeMask {
	var out []typeMask
	for _, x := range kindOrder {
		if k&x.k != 0 {
			out = append(out, x.k)
		}
	}
	return out
}

// kindCount returns the number of kinds in k.
func kindCount(k typeMask) int { return len(kindList(k)) }

// kindNames names the kinds of k.
func kindNames(k typeMask) []string {
	var out []string
	for _, x := range kindOrder {
		if k&x.k != 0 {
			out = append(out, x.name)
		}
	}
	return out
}

// kindOfValue returns the kind of a decoded JSON value (0 for what is not
// JSON).
func kindOfValue(v any) typeMask {
	k, f := classify(v)
	switch k {
	case kNull:
		return tNull
	case kBool:
		return tBoolean
	case kString:
		return tString
	case kArray:
		return tArray
	case kObject:
		return tObject
	case kNumber:
		switch {
		case math.IsNaN(f) || math.IsInf(f, 0):
			return 0
		case f == math.Trunc(f):
			return tInteger
		}
		return tFraction
	}
	return 0
}

// conjKinds is the kinds a conjunction admits.
func conjKinds(as []term) typeMask {
	k := allKinds
	for _, t := range as {
		if t.n == nil {
			k &= t.kinds
		} else {
			k &= kindsOf(t.n.types)
		}
	}
	return k
}

// emptyKinds are the kinds of which a conjunction's bounds admit no value
// (a minimum length above the maximum, and so on).
func emptyKinds(as []term) typeMask {
	var k typeMask
	if lo, hi := lengths(as, stringLengths); lo > hi {
		k |= tString
	}
	if lo, hi := lengths(as, itemCounts); lo > hi {
		k |= tArray
	}
	if l, h := numericRange(as); l.set && h.set && (l.v > h.v || l.v == h.v && (l.exclusive || h.exclusive)) {
		k |= tInteger | tFraction
	}
	return k
}

func stringLengths(n *node) (int, int) { return n.minLength, n.maxLength }
func itemCounts(n *node) (int, int)    { return n.minItems, n.maxItems }

// lengths returns the tightest bounds of a count keyword pair (-1:
// absent) over a conjunction.
func lengths(as []term, get func(*node) (int, int)) (lo, hi int) {
	lo, hi = 0, math.MaxInt
	for _, t := range as {
		if t.n == nil {
			continue
		}
		l, h := get(t.n)
		if l >= 0 {
			lo = max(lo, l)
		}
		if h >= 0 {
			hi = min(hi, h)
		}
	}
	return lo, hi
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

// numericRange returns the tightest numeric bounds of a conjunction.
func numericRange(as []term) (lo, hi bound) {
	for _, t := range as {
		n := t.n
		if n == nil {
			continue
		}
		if n.numFlags&hasMinimum != 0 {
			lo = tighter(lo, bound{true, n.minimum, false}, true)
		}
		if n.numFlags&hasExclMin != 0 {
			lo = tighter(lo, bound{true, n.exclMin, true}, true)
		}
		if n.numFlags&hasMaximum != 0 {
			hi = tighter(hi, bound{true, n.maximum, false}, false)
		}
		if n.numFlags&hasExclMax != 0 {
			hi = tighter(hi, bound{true, n.exclMax, true}, false)
		}
	}
	return lo, hi
}

// finiteValues returns a finite set of values including every value the
// conjunction accepts, when it has one: a const, an enum, or only null
// and booleans.
func finiteValues(as []term) ([]any, bool) {
	var best []any
	found := false
	for _, t := range as {
		n := t.n
		if n == nil {
			continue
		}
		if n.hasConst {
			return []any{n.constVal}, true
		}
		if n.enum != nil && (!found || len(n.enum) < len(best)) {
			best, found = n.enum, true
		}
	}
	if found {
		return best, true
	}
	if k := conjKinds(as); k&^(tNull|tBoolean) == 0 {
		var vs []any
		if k&tNull != 0 {
			vs = append(vs, nil)
		}
		if k&tBoolean != 0 {
			vs = append(vs, false, true)
		}
		return vs, true
	}
	return nil, false
}

// acceptsAll reports whether every term of as may accept v. A node that
// reaches what the model does not see counts as accepting (the a side
// may only grow), and what it records as restricting is not checked.
func (p *prover) acceptsAll(as []term, v any) bool {
	for _, t := range as {
		switch {
		case t.n == nil:
			if kindOfValue(v)&t.kinds == 0 {
				return false
			}
		case t.n.out != nil && t.n.out.reachesUnmodeled:
		case !p.validate(t.n, v, t.skip, true):
			return false
		}
	}
	return true
}

// accepts reports whether goal b surely accepts v: never when it reaches
// anything outside the subset.
func (p *prover) accepts(b goal, v any) bool {
	if b.n.out != nil && b.n.out.reachesOutside {
		return false
	}
	return p.validate(b.n, v, b.skip, false)
}

// validate runs the validator on v against n less the parts skip names,
// within the proof's work; when the work runs out it returns exhausted.
func (p *prover) validate(n *node, v any, skip uint8, exhausted bool) bool {
	unit := valueCost(v)
	if p.charge(unit) {
		return exhausted
	}
	vd := validator{quiet: 1, limit: p.limit - p.work, unit: unit}
	ok := vd.checkParts(n, v, skip)
	p.charge(vd.steps)
	if vd.exhausted || p.exhausted {
		p.exhausted = true
		return exhausted
	}
	return ok
}

// valueCost is the size of a decoded JSON value in steps: one per value,
// and one per 16 bytes of a string or member name.
func valueCost(v any) int {
	switch x := v.(type) {
	case string:
		return 1 + len(x)/16
	case []any:
		c := 1
		for _, e := range x {
			c += valueCost(e)
		}
		return c
	case map[string]any:
		c := 1
		for k, e := range x {
			c += 1 + len(k)/16 + valueCost(e)
		}
		return c
	}
	return 1
}

// countBounds checks b's minimum and maximum (-1: absent) of a count
// against a's bounds.
func countBounds(bMin, bMax, minA, maxA int, minKey, maxKey, path, what string) string {
	if bMin >= 0 && minA < bMin {
		return fmt.Sprintf("%s: a %s below %s %d", at(path), what, minKey, bMin)
	}
	if bMax >= 0 && maxA > bMax {
		return fmt.Sprintf("%s: a %s above %s %d", at(path), what, maxKey, bMax)
	}
	return ""
}

// formatName returns the name of a format.
func formatName(f format) string {
	for name, g := range formats {
		if g == f {
			return name
		}
	}
	return ""
}

// stringIncl compares the string keywords.
func stringIncl(as []term, b *node, path string) string {
	minA, maxA := lengths(as, stringLengths)
	if why := countBounds(b.minLength, b.maxLength, minA, maxA, "minLength", "maxLength", path, "string length"); why != "" {
		return why
	}
	if b.pattern != nil {
		want := b.pattern.String()
		if !slices.ContainsFunc(as, func(t term) bool { return t.n != nil && t.n.pattern != nil && t.n.pattern.String() == want }) {
			return fmt.Sprintf("%s: strings that need not match the pattern %s", at(path), jsonText(want))
		}
	}
	if b.format != fmtNone {
		if !slices.ContainsFunc(as, func(t term) bool { return t.n != nil && t.n.format == b.format }) {
			return fmt.Sprintf("%s: strings that need not match the format %s", at(path), jsonText(formatName(b.format)))
		}
	}
	return ""
}

// numberIncl compares the number keywords.
func numberIncl(as []term, b *node, ka typeMask, path string) string {
	lo, hi := numericRange(as)
	check := func(flag uint8, x float64, key string, exclusive, low bool) string {
		if b.numFlags&flag == 0 {
			return ""
		}
		a := hi
		if low {
			a = lo
		}
		holds := a.set && (low && (a.v > x || a.v == x && (a.exclusive || !exclusive)) ||
			!low && (a.v < x || a.v == x && (a.exclusive || !exclusive)))
		if !holds {
			return fmt.Sprintf("%s: numbers outside %s %s", at(path), key, formatNumber(x))
		}
		return ""
	}
	for _, c := range []struct {
		flag           uint8
		x              float64
		key            string
		exclusive, low bool
	}{
		{hasMinimum, b.minimum, "minimum", false, true}, {hasExclMin, b.exclMin, "exclusiveMinimum", true, true},
		{hasMaximum, b.maximum, "maximum", false, false}, {hasExclMax, b.exclMax, "exclusiveMaximum", true, false},
	} {
		if why := check(c.flag, c.x, c.key, c.exclusive, c.low); why != "" {
			return why
		}
	}
	if b.numFlags&hasMultipleOf != 0 {
		x := b.multipleOf
		same := slices.ContainsFunc(as, func(t term) bool {
			return t.n != nil && t.n.numFlags&hasMultipleOf != 0 && t.n.multipleOf == x
		})
		if !same && !(x == 1 && ka&tFraction == 0) {
			return fmt.Sprintf("%s: numbers that need not be multiples of %s", at(path), formatNumber(x))
		}
	}
	return ""
}

// arrayIncl compares the array keywords.
func (p *prover) arrayIncl(as []term, b *node, path string) string {
	minA, maxA := lengths(as, itemCounts)
	unique := false
	var items []*node
	for _, t := range as {
		if t.n == nil {
			continue
		}
		if t.n.uniqueItems {
			unique = true
		}
		if t.n.items != nil {
			items = append(items, t.n.items)
		}
	}
	if why := countBounds(b.minItems, b.maxItems, minA, maxA, "minItems", "maxItems", path, "number of items"); why != "" {
		return why
	}
	if b.uniqueItems && !unique && maxA > 1 {
		return at(path) + ": arrays with duplicate items"
	}
	if b.items != nil && maxA > 0 {
		return p.descend(items, b.items, path+"[]")
	}
	return ""
}

// objectIncl compares the object keywords.
func (p *prover) objectIncl(as []term, b *node, path string) string {
	required := map[string]bool{}
	names := map[string]bool{}
	closedA := false
	for _, t := range as {
		if t.n == nil {
			continue
		}
		for _, r := range t.n.required {
			required[r] = true
		}
		for _, pr := range t.n.props {
			names[pr.name] = true
		}
		closedA = closedA || t.n.noAdditional
	}
	for _, r := range b.required {
		if !required[r] {
			return fmt.Sprintf("%s: objects without the property %q", at(path), r)
		}
	}
	for _, pr := range b.props {
		names[pr.name] = true
	}
	if p.charge(len(names) * (1 + len(as))) {
		return at(path) + ": " + tooComplex
	}
	for _, name := range sortedNames(names) {
		var decls []*node
		forbidden := false
		for _, t := range as {
			if t.n == nil {
				continue
			}
			switch d := t.n.prop(name); {
			case d != nil && d.never():
				forbidden = true
			case d != nil:
				decls = append(decls, d)
			case t.n.noAdditional:
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
		bd := b.prop(name)
		if bd == nil {
			if b.noAdditional {
				return fmt.Sprintf("%s: the property %q", at(path), name)
			}
			continue
		}
		if why := p.descend(decls, bd, sub); why != "" {
			return why
		}
	}
	if b.noAdditional && !closedA {
		return at(path) + ": properties not listed in the schema"
	}
	return ""
}

// sortedNames returns the keys of a set in order.
func sortedNames(m map[string]bool) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// jsonText is the canonical JSON of a decoded value, shortened, for
// reasons.
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
