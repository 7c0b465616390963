package contract

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/agentsurface/agentsurface/internal/schema"
	"github.com/agentsurface/agentsurface/surface"
)

// Class is how a change of a contract moves what a consumer may do.
type Class string

// Classes.
const (
	// Widening: the consumer may do more, or the change cannot be shown
	// not to give it more.
	Widening Class = "widening"
	// Narrowing: the consumer may do less.
	Narrowing Class = "narrowing"
	// Neutral: what the consumer may do is unchanged.
	Neutral Class = "neutral"
)

// Change is one difference between two contracts, classified by the rule
// table of the package documentation.
type Change struct {
	Class Class `json:"class"`
	// Mixed marks a change that both widens and narrows, or that the
	// classifier cannot order: it is a widening whichever contract is the
	// old one.
	Mixed bool `json:"mixed,omitempty"`
	// Consumer is the consumer's name.
	Consumer string `json:"consumer"`
	// Capability is the capability's key (see [Capability.Key]); empty
	// for a change of a consumer or a component.
	Capability string `json:"capability,omitempty"`
	// Field is what changed: a field of the contract ("confirmation",
	// "inputSchema"), with the item inside it where there are several
	// ("policies[registry authenticated]", "boundFields[ids]",
	// "annotations.destructiveHint"); "consumer", "capability" or
	// "component <type>/<instanceId>" when a whole entry came or went.
	Field string `json:"field"`
	// Before and After are the old and new values, absent when there was
	// none.
	Before json.RawMessage `json:"before,omitempty"`
	After  json.RawMessage `json:"after,omitempty"`
	// Note says what the change means, for a person: where a schema now
	// accepts more, which rule classed it.
	Note string `json:"note,omitempty"`
}

// ErrSources reports two contracts taken from different sources: an MCP
// contract knows fewer fields than a registry one, so comparing them would
// report what one source cannot see as changes.
var ErrSources = errors.New("contract: contracts from different sources cannot be compared")

// Compare returns every difference between an old and a new contract, one
// Change per difference, classified by the rule table of the package
// documentation. The changes are ordered by consumer, then components,
// then capability key, then field in the order of the rule table. Two
// equal contracts have no changes.
// Compare fails for contracts that are not well formed ([ErrFormat]),
// that come from different sources ([ErrSources]) or whose schemas exceed
// a size limit ([ErrTooLarge]); its schema proofs together do at most
// [CompareWork].
func Compare(old, new *Contract) ([]Change, error) {
	if err := checkSizes(old); err != nil {
		return nil, fmt.Errorf("old contract: %w", err)
	}
	if err := checkSizes(new); err != nil {
		return nil, fmt.Errorf("new contract: %w", err)
	}
	a, err := old.normalized()
	if err != nil {
		return nil, fmt.Errorf("old contract: %w", err)
	}
	b, err := new.normalized()
	if err != nil {
		return nil, fmt.Errorf("new contract: %w", err)
	}
	if a.Source != b.Source {
		return nil, fmt.Errorf("%w: %s and %s", ErrSources, a.Source, b.Source)
	}
	var out []Change
	budget := schema.NewBudget(CompareWork)
	merge(a.Consumers, b.Consumers, func(v ConsumerView) string { return v.Name },
		func(o, n *ConsumerView) {
			switch {
			case o == nil:
				out = append(out, wholeConsumer(n, false))
			case n == nil:
				out = append(out, wholeConsumer(o, true))
			default:
				out = append(out, compareViews(a.Source, o, n, budget)...)
			}
		})
	return out, nil
}

// merge walks two lists sorted by key and calls fn for each key with the
// entries of both (nil where a list has none).
func merge[T any](a, b []T, key func(T) string, fn func(o, n *T)) {
	i, j := 0, 0
	for i < len(a) || j < len(b) {
		switch {
		case j == len(b) || i < len(a) && key(a[i]) < key(b[j]):
			fn(&a[i], nil)
			i++
		case i == len(a) || key(b[j]) < key(a[i]):
			fn(nil, &b[j])
			j++
		default:
			fn(&a[i], &b[j])
			i++
			j++
		}
	}
}

// seen counts the capabilities of a view that are not hidden.
func seen(v *ConsumerView) int {
	n := 0
	for _, c := range v.Capabilities {
		if c.Visibility != Hidden {
			n++
		}
	}
	return n
}

// wholeConsumer is the change of a consumer that came (removed false) or
// went.
func wholeConsumer(v *ConsumerView, removed bool) Change {
	n := seen(v)
	ch := Change{Class: Neutral, Consumer: v.Name, Field: "consumer",
		Note: fmt.Sprintf("sees %d capabilities (%d hidden)", n, len(v.Capabilities)-n)}
	summary := jsonOf(map[string]int{"capabilities": n})
	if removed {
		ch.Before = summary
		if n > 0 {
			ch.Class = Narrowing
		}
		ch.Note = "consumer removed; it saw " + strings.TrimPrefix(ch.Note, "sees ")
	} else {
		ch.After = summary
		if n > 0 {
			ch.Class = Widening
		}
		ch.Note = "consumer added; it " + ch.Note
	}
	return ch
}

// compareViews compares one consumer's two views; budget bounds the
// work of the schema proofs.
func compareViews(source Source, o, n *ConsumerView, budget *schema.Budget) []Change {
	var out []Change
	merge(o.Components, n.Components, func(c Component) string { return c.Type + "\x00" + c.InstanceID },
		func(a, b *Component) {
			out = append(out, compareComponents(o.Name, a, b)...)
		})
	if o.Kind != n.Kind || o.ID != n.ID {
		out = append(out, Change{Class: Neutral, Consumer: o.Name, Field: "identity",
			Before: jsonOf(map[string]string{"kind": string(o.Kind), "id": o.ID}), After: jsonOf(map[string]string{"kind": string(n.Kind), "id": n.ID}),
			Note: "consumers are compared by name"})
	}
	if !slices.Equal(o.Grants, n.Grants) {
		out = append(out, Change{Class: Neutral, Consumer: o.Name, Field: "grants", Before: jsonOf(o.Grants), After: jsonOf(n.Grants),
			Note: "grants only matter through policies, whose votes are compared"})
	}
	merge(o.Capabilities, n.Capabilities, func(c Capability) string { return c.Key() },
		func(a, b *Capability) {
			switch {
			case a == nil:
				out = append(out, wholeCapability(o.Name, b, false))
			case b == nil:
				out = append(out, wholeCapability(o.Name, a, true))
			default:
				d := capDiff{consumer: o.Name, key: a.Key(), source: source, budget: budget}
				d.compare(a, b)
				out = append(out, d.out...)
			}
		})
	return out
}

// compareComponents compares one component of two views; every component
// change is neutral (its capabilities carry the class).
func compareComponents(consumer string, a, b *Component) []Change {
	c := a
	if c == nil {
		c = b
	}
	field := "component " + c.Type + "/" + c.InstanceID
	row := func(sub string, before, after any) Change {
		return Change{Class: Neutral, Consumer: consumer, Field: field + sub, Before: jsonOf(before), After: jsonOf(after),
			Note: "components carry no authority: their capabilities are compared"}
	}
	switch {
	case a == nil:
		return []Change{{Class: Neutral, Consumer: consumer, Field: field, After: jsonOf(b), Note: "component listed"}}
	case b == nil:
		return []Change{{Class: Neutral, Consumer: consumer, Field: field, Before: jsonOf(a), Note: "component no longer listed"}}
	}
	var out []Change
	if a.Description != b.Description {
		out = append(out, row(".description", a.Description, b.Description))
	}
	if !equalJSON(jsonOf(a.Parent), jsonOf(b.Parent)) {
		out = append(out, row(".parent", a.Parent, b.Parent))
	}
	if !equalJSON(a.Meta, b.Meta) {
		out = append(out, row(".meta", a.Meta, b.Meta))
	}
	return out
}

// wholeCapability is the change of a capability that came (removed
// false) or went.
func wholeCapability(consumer string, c *Capability, removed bool) Change {
	ch := Change{Class: Neutral, Consumer: consumer, Capability: c.Key(), Field: "capability"}
	summary := jsonOf(struct {
		Visibility Visibility      `json:"visibility"`
		Effect     json.RawMessage `json:"effect,omitempty"`
	}{c.Visibility, c.Declared[factEffect]})
	visible := c.Visibility != Hidden
	if removed {
		ch.Before, ch.Note = summary, "capability removed"
		if visible {
			ch.Class = Narrowing
		} else {
			ch.Note += "; it was hidden from this consumer"
		}
	} else {
		ch.After, ch.Note = summary, "capability added"
		if visible {
			ch.Class = Widening
		} else {
			ch.Note += "; it is hidden from this consumer"
		}
	}
	return ch
}

// capDiff collects the changes of one capability present in both views.
type capDiff struct {
	consumer, key string
	source        Source
	budget        *schema.Budget
	out           []Change
}

// row adds a change.
func (d *capDiff) row(class Class, mixed bool, field string, before, after any, note string) {
	d.out = append(d.out, Change{Class: class, Mixed: mixed, Consumer: d.consumer, Capability: d.key, Field: field,
		Before: jsonOf(before), After: jsonOf(after), Note: note})
}

// ordered adds the change of a field whose values are ranked: a higher
// rank gives the consumer more. ok false (values that cannot be ranked,
// or equal ranks of different values) is a mixed widening.
func (d *capDiff) ordered(field string, before, after any, rb, ra int, ok bool, note string) {
	switch {
	case !ok || ra == rb:
		d.row(Widening, true, field, before, after, note+": the values cannot be ordered")
	case ra > rb:
		d.row(Widening, false, field, before, after, note)
	default:
		d.row(Narrowing, false, field, before, after, note)
	}
}

// compare adds the changes from a to b of one capability.
func (d *capDiff) compare(a, b *Capability) {
	if a.Visibility != b.Visibility {
		d.ordered("visibility", a.Visibility, b.Visibility, a.Visibility.rank(), b.Visibility.rank(),
			a.Visibility.known() && b.Visibility.known(), "what the consumer is shown")
	}
	if a.Description != b.Description {
		d.row(Neutral, false, "description", a.Description, b.Description, "descriptions confer no authority")
	}
	if a.Visibility == Hidden || b.Visibility == Hidden {
		// The consumer is or was shown nothing else: what changed of the
		// rest is listed for the reviewer, and the visibility row, if
		// any, carries the class.
		rest := capDiff{consumer: d.consumer, key: d.key, source: d.source, budget: d.budget}
		rest.details(a, b)
		note := "of a capability hidden from this consumer"
		switch {
		case a.Visibility == Hidden && b.Visibility != Hidden:
			note = "shown now that the capability is not hidden"
		case a.Visibility != Hidden && b.Visibility == Hidden:
			note = "no longer shown: the capability is hidden"
		}
		for _, c := range rest.out {
			c.Class, c.Mixed, c.Note = Neutral, false, note
			d.out = append(d.out, c)
		}
		return
	}
	d.details(a, b)
}

// details adds the changes of the fields a visible capability shows.
func (d *capDiff) details(a, b *Capability) {
	if a.Kind != b.Kind {
		d.row(Widening, true, "kind", a.Kind, b.Kind, "the kind changed: what a call does cannot be compared")
	}
	if a.WireName != b.WireName {
		d.row(Neutral, false, "wireName", a.WireName, b.WireName, "a name confers no authority")
	}
	if !equalJSON(jsonOf(a.Context), jsonOf(b.Context)) {
		d.row(Neutral, false, "context", a.Context, b.Context, "the component the reference is bound to")
	}
	if a.DisabledReason != b.DisabledReason {
		d.row(Neutral, false, "disabledReason", a.DisabledReason, b.DisabledReason, "a reason is text")
	}
	d.facts(a.Declared, b.Declared)
	if a.ConfirmationByPolicy != b.ConfirmationByPolicy {
		ra, okA := confirmationRank(a.ConfirmationByPolicy)
		rb, okB := confirmationRank(b.ConfirmationByPolicy)
		d.ordered("confirmationByPolicy", a.ConfirmationByPolicy, b.ConfirmationByPolicy, -ra, -rb, okA && okB, "the level policies may raise it to")
	}
	if !equalJSON(jsonOf(a.RequiresConfirmation), jsonOf(b.RequiresConfirmation)) {
		if a.Declared[factConfirmation] != nil && b.Declared[factConfirmation] != nil {
			d.row(Neutral, false, "requiresConfirmation", a.RequiresConfirmation, b.RequiresConfirmation, "follows from the confirmation level")
		} else {
			// Announcing a confirmation gives the consumer less.
			rank := func(p *bool) int {
				if p != nil && *p {
					return 0
				}
				return 1
			}
			d.ordered("requiresConfirmation", a.RequiresConfirmation, b.RequiresConfirmation, rank(a.RequiresConfirmation), rank(b.RequiresConfirmation),
				a.RequiresConfirmation != nil && b.RequiresConfirmation != nil, "whether calls are announced as requiring confirmation")
		}
	}
	d.schema("inputSchema", a.InputSchema, b.InputSchema, emptyObjectSchema, "inputs")
	d.schema("outputSchema", a.OutputSchema, b.OutputSchema, json.RawMessage(`{}`), "outputs")
	d.standingGrants(a.StandingGrants, b.StandingGrants)
	d.boundFields(a.BoundFields, b.BoundFields)
	d.annotations(a, b)
	if !equalJSON(a.Meta, b.Meta) {
		d.row(Neutral, false, "meta", a.Meta, b.Meta, "meta records confer no authority")
	}
	d.policies(a.Policies, b.Policies)
}

// factRule is the rule row of one declared fact: compare adds the change
// of the fact called name from a to b, its JSON values (nil when
// unknown), which differ.
type factRule struct {
	name    string
	compare func(d *capDiff, name string, a, b json.RawMessage)
}

// factRules are the rule rows of the facts a capability declares
// ([Facts]), in the order of the rule table. A fact of
// [surface.Declaration] with no row here is compared as a mixed
// widening: what its change means is not known.
var factRules = []factRule{
	{factEffect, rankRule(effectRank, 1, "the effect's reach")},
	{factIdempotent, flagRule("calls may be retried as idempotent")},
	{"reversible", flagRule("declared undoable")},
	{factConfirmation, rankRule(confirmationRank, -1, "the declared confirmation level")},
}

// facts adds the changes of the declared facts, by their rule rows, then
// those of facts no row classifies.
func (d *capDiff) facts(a, b Facts) {
	for _, r := range factRules {
		if x, y := a[r.name], b[r.name]; !equalJSON(x, y) {
			r.compare(d, r.name, x, y)
		}
	}
	for _, f := range declared {
		if x, y := a[f.name], b[f.name]; !equalJSON(x, y) && !slices.ContainsFunc(factRules, func(r factRule) bool { return r.name == f.name }) {
			d.row(Widening, true, f.name, x, y, "no rule classifies a change of this fact")
		}
	}
}

// rankRule is the rule of a fact whose values rank: sign times the rank is
// what the consumer is given (1: a higher rank gives it more; -1: less).
// A value rank cannot place is a mixed widening.
func rankRule[T ~string](rank func(T) (int, bool), sign int, note string) func(d *capDiff, name string, a, b json.RawMessage) {
	return func(d *capDiff, name string, a, b json.RawMessage) {
		x, _ := valueOf[T](a)
		y, _ := valueOf[T](b)
		ra, okA := rank(x)
		rb, okB := rank(y)
		d.ordered(name, x, y, sign*ra, sign*rb, okA && okB, note)
	}
}

// flagRule is the rule of a boolean fact whose true gives the consumer
// more; an unknown side cannot be ordered.
func flagRule(note string) func(d *capDiff, name string, a, b json.RawMessage) {
	return func(d *capDiff, name string, a, b json.RawMessage) {
		d.flag(name, boolOf(a), boolOf(b), note)
	}
}

// boolOf is a boolean fact's value, nil when unknown.
func boolOf(v json.RawMessage) *bool {
	b, ok := valueOf[bool](v)
	if !ok {
		return nil
	}
	return &b
}

// known reports whether v is a visibility of the format.
func (v Visibility) known() bool {
	return v == Hidden || v == Disabled || v == Exposed || v == Listed
}

// flag compares a boolean whose true gives the consumer more; an unknown
// side (nil) cannot be ordered.
func (d *capDiff) flag(field string, a, b *bool, note string) {
	if equalJSON(jsonOf(a), jsonOf(b)) {
		return
	}
	rank := func(p *bool) int {
		if p != nil && *p {
			return 1
		}
		return 0
	}
	d.ordered(field, a, b, rank(a), rank(b), a != nil && b != nil, note)
}

// effectRank ranks effects by reach; effects of one rank cannot be
// ordered against each other.
func effectRank(e surface.Effect) (int, bool) {
	switch e {
	case surface.EffectRead:
		return 0, true
	case surface.EffectLocalState, surface.EffectNavigation:
		return 1, true
	case surface.EffectServerQuery:
		return 2, true
	case surface.EffectServerMutation:
		return 3, true
	case surface.EffectExternalSideEffect, surface.EffectDestructive:
		return 4, true
	}
	return 0, false
}

// confirmationRank ranks levels; "" (no level a policy may raise to)
// ranks as never.
func confirmationRank(c surface.Confirmation) (int, bool) {
	switch c {
	case "", surface.ConfirmNever:
		return 0, true
	case surface.ConfirmOptional:
		return 1, true
	case surface.ConfirmRequired:
		return 2, true
	}
	return 0, false
}

// schema compares a schema field; def stands for an absent one.
func (d *capDiff) schema(field string, a, b, def json.RawMessage, what string) {
	if equalJSON(a, b) {
		return
	}
	sd := compareSchemas(a, b, def, d.budget)
	switch {
	case sd.wider && sd.narrower:
		d.row(Widening, true, field, a, b, "accepts other "+what+": new "+sd.whyWider+"; no longer "+sd.whyNarrower)
	case sd.wider:
		d.row(Widening, false, field, a, b, "may accept more "+what+": "+sd.whyWider)
	case sd.narrower:
		d.row(Narrowing, false, field, a, b, "accepts fewer "+what+": no longer "+sd.whyNarrower)
	default:
		d.row(Neutral, false, field, a, b, "an equivalent schema")
	}
}

// standingGrants compares whether standing grants may let calls skip the
// confirmation question, and their ceiling: becoming grantable, or a
// longer TTL or more uses, gives the consumer more.
func (d *capDiff) standingGrants(a, b *GrantCeiling) {
	const field = "standingGrants"
	switch {
	case a == nil && b == nil:
	case a == nil:
		d.row(Widening, false, field, a, b, "became grantable: a person may let calls through without asking")
	case b == nil:
		d.row(Narrowing, false, field, a, b, "no longer grantable: every call that needs confirmation asks")
	case *a != *b:
		wider := b.MaxTTLMs > a.MaxTTLMs || b.usesRank() > a.usesRank()
		narrower := b.MaxTTLMs < a.MaxTTLMs || b.usesRank() < a.usesRank()
		switch {
		case wider && narrower:
			d.row(Widening, true, field, a, b, "the grant ceiling's TTL and uses moved apart")
		case wider:
			d.row(Widening, false, field, a, b, "the grant ceiling widened: longer or more uses")
		default:
			d.row(Narrowing, false, field, a, b, "the grant ceiling narrowed: shorter or fewer uses")
		}
	}
}

// boundFields compares a procedure reference's bound fields, by path.
func (d *capDiff) boundFields(a, b []BoundField) {
	key := func(f BoundField) string { return f.Path }
	sa, sb := slices.Clone(a), slices.Clone(b)
	slices.SortFunc(sa, func(x, y BoundField) int { return strings.Compare(x.Path, y.Path) })
	slices.SortFunc(sb, func(x, y BoundField) int { return strings.Compare(x.Path, y.Path) })
	merge(sa, sb, key, func(x, y *BoundField) {
		switch {
		case x == nil:
			d.row(Narrowing, false, "boundFields["+y.Path+"]", nil, y, "now filled from UI state")
		case y == nil:
			d.row(Widening, false, "boundFields["+x.Path+"]", x, nil, "no longer filled from UI state: the agent supplies it")
		case x.Locked != y.Locked:
			if x.Locked {
				d.row(Widening, false, "boundFields["+x.Path+"]", x, y, "unlocked: the agent may set it")
			} else {
				d.row(Narrowing, false, "boundFields["+x.Path+"]", x, y, "locked: the agent may no longer set it")
			}
		}
	})
}

// annotations compares the MCP annotations.
func (d *capDiff) annotations(a, b *Capability) {
	x, y := a.Annotations, b.Annotations
	if equalJSON(jsonOf(x), jsonOf(y)) {
		return
	}
	if d.source == SourceRegistry && (x == nil) != (y == nil) {
		if x == nil {
			d.row(Widening, false, "annotations", x, y, "now served over MCP")
		} else {
			d.row(Narrowing, false, "annotations", x, y, "no longer served over MCP")
		}
		return
	}
	if x == nil {
		x = &Annotations{} // none sent: MCP's defaults
	}
	if y == nil {
		y = &Annotations{}
	}
	// Hints that follow from facts both contracts record are neutral:
	// the facts' own rows carry the class.
	derived := a.Kind != "" && b.Kind != "" && a.Declared[factEffect] != nil && b.Declared[factEffect] != nil &&
		a.Declared[factIdempotent] != nil && b.Declared[factIdempotent] != nil
	hint := func(name string, before, after, permissive bool) {
		if before == after {
			return
		}
		field := "annotations." + name
		switch {
		case derived:
			d.row(Neutral, false, field, before, after, "follows from the kind, effect and idempotency")
		case after == permissive:
			d.row(Widening, false, field, before, after, "tells clients the tool is safer")
		default:
			d.row(Narrowing, false, field, before, after, "tells clients the tool is less safe")
		}
	}
	n := len(d.out)
	hint("readOnlyHint", x.ReadOnlyHint, y.ReadOnlyHint, true)
	hint("destructiveHint", x.destructive(), y.destructive(), false)
	hint("idempotentHint", x.IdempotentHint, y.IdempotentHint, true)
	hint("openWorldHint", x.openWorld(), y.openWorld(), false)
	if x.Title != y.Title {
		d.row(Neutral, false, "annotations.title", x.Title, y.Title, "a title is text")
	}
	if len(d.out) == n {
		d.row(Neutral, false, "annotations", a.Annotations, b.Annotations, "the same hints, written out or left to MCP's defaults")
	}
}

// policyKey identifies a policy of a chain: its layer, name and which
// occurrence of that pair it is.
type policyKey struct {
	layer surface.PolicyLayer
	name  string
	n     int
}

func (k policyKey) String() string {
	s := string(k.layer) + " " + k.name
	if k.n > 0 {
		s += " #" + strconv.Itoa(k.n+1)
	}
	return s
}

// keyed returns the keys of a chain in chain order.
func keyed(ps []Policy) []policyKey {
	count := map[[2]string]int{}
	out := make([]policyKey, len(ps))
	for i, p := range ps {
		k := [2]string{string(p.Layer), p.Name}
		out[i] = policyKey{p.Layer, p.Name, count[k]}
		count[k]++
	}
	return out
}

// policies compares two policy chains.
func (d *capDiff) policies(a, b []Policy) {
	ka, kb := keyed(a), keyed(b)
	idx := func(ks []policyKey, k policyKey) int { return slices.Index(ks, k) }
	var commonA []policyKey
	for i, k := range ka {
		j := idx(kb, k)
		field := "policies[" + k.String() + "]"
		if j < 0 {
			d.row(Widening, false, field, a[i], nil, "policy removed")
			continue
		}
		commonA = append(commonA, k)
		p, q := a[i], b[j]
		removed := slices.ContainsFunc(p.Hooks, func(h string) bool { return !slices.Contains(q.Hooks, h) })
		added := slices.ContainsFunc(q.Hooks, func(h string) bool { return !slices.Contains(p.Hooks, h) })
		switch {
		case removed && added:
			d.row(Widening, true, field+".hooks", p.Hooks, q.Hooks, "hooks replaced")
		case removed:
			d.row(Widening, false, field+".hooks", p.Hooks, q.Hooks, "hooks removed")
		case added:
			d.row(Narrowing, false, field+".hooks", p.Hooks, q.Hooks, "hooks added")
		case !slices.Equal(p.Hooks, q.Hooks):
			d.row(Neutral, false, field+".hooks", p.Hooks, q.Hooks, "the same hooks, listed in another order")
		}
		if p.RequiresConfirmation != q.RequiresConfirmation {
			if p.RequiresConfirmation {
				d.row(Widening, false, field+".requiresConfirmation", true, false, "no longer raises the confirmation level")
			} else {
				d.row(Narrowing, false, field+".requiresConfirmation", false, true, "raises the confirmation level")
			}
		}
		if p.Vote != q.Vote || p.Reason != q.Reason {
			d.row(Neutral, false, field+".vote", voteOf(p), voteOf(q), "votes are compared through the visibility")
		}
	}
	var commonB []policyKey
	for j, k := range kb {
		if idx(ka, k) < 0 {
			d.row(Narrowing, false, "policies["+k.String()+"]", nil, b[j], "policy added")
			continue
		}
		commonB = append(commonB, k)
	}
	if !slices.Equal(commonA, commonB) {
		names := func(ks []policyKey) []string {
			out := make([]string, len(ks))
			for i, k := range ks {
				out[i] = k.String()
			}
			return out
		}
		d.row(Widening, true, "policies", names(commonA), names(commonB), "the chain's order changed: hooks wrap each other in chain order")
	}
}

// voteOf is a policy's vote with its reason.
func voteOf(p Policy) string {
	if p.Reason != "" {
		return p.Vote + ": " + p.Reason
	}
	return p.Vote
}

// jsonOf encodes a value for a change; nil values and nil pointers give
// nil.
func jsonOf(v any) json.RawMessage {
	switch x := v.(type) {
	case nil:
		return nil
	case json.RawMessage:
		if len(x) == 0 {
			return nil
		}
		return x
	case *bool:
		if x == nil {
			return nil
		}
	case *surface.Parent:
		if x == nil {
			return nil
		}
	case *Annotations:
		if x == nil {
			return nil
		}
	case *BoundField:
		if x == nil {
			return nil
		}
	case *Component:
		if x == nil {
			return nil
		}
	case *GrantCeiling:
		if x == nil {
			return nil
		}
	}
	b, err := json.Marshal(v)
	if err != nil {
		return nil
	}
	if string(b) == `""` || string(b) == "null" {
		return nil
	}
	return b
}

// equalJSON reports whether two JSON texts are equal byte for byte (the
// contracts compared are normalized, so their texts are canonical).
func equalJSON(a, b json.RawMessage) bool { return string(a) == string(b) }
