package contract_test

import (
	"bytes"
	"encoding/json"
	"maps"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/agentsurface/agentsurface/surface"
	"github.com/agentsurface/agentsurface/surface/contract"
	"pgregory.net/rapid"
)

// Pools the random contracts draw from: small, so that two contracts
// share keys and values often.
var (
	capIDs  = []string{"view:a.b.read", "view:a.b.act", "domain:a.do", "domain:a.undo"}
	comps   = []surface.Parent{{Type: "a.b", InstanceID: "main"}, {Type: "a.b", InstanceID: "x"}}
	effects = []surface.Effect{"", surface.EffectRead, surface.EffectLocalState, surface.EffectNavigation, surface.EffectServerQuery,
		surface.EffectServerMutation, surface.EffectExternalSideEffect, surface.EffectDestructive, "teleport"}
	levels  = []surface.Confirmation{"", surface.ConfirmNever, surface.ConfirmOptional, surface.ConfirmRequired}
	schemas = []json.RawMessage{nil, json.RawMessage(`{"type":"object"}`), json.RawMessage(`{"type":"object","additionalProperties":false}`),
		json.RawMessage(`{"type":"object","properties":{"a":{"type":"string","maxLength":3}},"required":["a"]}`),
		json.RawMessage(`{"type":"object","properties":{"a":{"type":"string"}}}`), json.RawMessage(`{"type":"string","not":{}}`)}
	hooks    = [][]string{nil, {"discover"}, {"authorize"}, {"discover", "authorize"}, {"invoke"}, {"authorize", "discover"}}
	policies = []contract.Policy{
		{Name: "authenticated", Layer: surface.LayerRegistry}, {Name: "audit", Layer: surface.LayerCapability},
		{Name: "audit", Layer: surface.LayerComponent}, {Name: "require-confirmation", Layer: surface.LayerComponent, RequiresConfirmation: true},
	}
)

func optBool(rt *rapid.T, label string) *bool {
	switch rapid.IntRange(0, 2).Draw(rt, label) {
	case 0:
		return nil
	case 1:
		return ptr(false)
	}
	return ptr(true)
}

// anyFact draws a value of the declared fact called name, by the type of
// its field in surface.Declaration, or none (the fact unknown).
func anyFact(rt *rapid.T, name string) any {
	var typ reflect.Type
	for f := range reflect.TypeFor[surface.Declaration]().Fields() {
		if n, _, _ := strings.Cut(f.Tag.Get("json"), ","); n == name {
			typ = f.Type
		}
	}
	if typ == nil || rapid.IntRange(0, 3).Draw(rt, "known "+name) == 0 {
		return nil
	}
	v := reflect.New(typ).Elem()
	switch typ.Kind() {
	case reflect.Bool:
		v.SetBool(rapid.Bool().Draw(rt, name))
	case reflect.String:
		v.SetString(rapid.SampledFrom([]string{"a", "b", string(surface.EffectRead), string(surface.ConfirmRequired)}).Draw(rt, name))
	case reflect.Int, reflect.Int64:
		v.SetInt(int64(rapid.IntRange(0, 2).Draw(rt, name)))
	default:
		rt.Fatalf("fact %s is a %s: teach anyFact a value of it", name, typ)
	}
	return v.Interface()
}

// fields draw the fields of a capability, one function each, so that a
// mutation can redraw any one of them.
var fields = []func(rt *rapid.T, c *contract.Capability){
	func(rt *rapid.T, c *contract.Capability) {
		c.Kind = rapid.SampledFrom([]surface.Kind{"", surface.KindObservation, surface.KindAction, surface.KindProcedure}).Draw(rt, "kind")
	},
	func(rt *rapid.T, c *contract.Capability) {
		c.Visibility = rapid.SampledFrom([]contract.Visibility{contract.Hidden, contract.Disabled, contract.Exposed}).Draw(rt, "visibility")
	},
	func(rt *rapid.T, c *contract.Capability) {
		c.DisabledReason = rapid.SampledFrom([]string{"", "later"}).Draw(rt, "reason")
	},
	func(rt *rapid.T, c *contract.Capability) {
		c.Description = rapid.SampledFrom([]string{"", "one", "two"}).Draw(rt, "description")
	},
	func(rt *rapid.T, c *contract.Capability) {
		c.WireName = rapid.SampledFrom([]string{"", "w1", "w2"}).Draw(rt, "wire")
	},
	func(rt *rapid.T, c *contract.Capability) {
		c.Declared.Set("effect", rapid.SampledFrom(effects).Draw(rt, "effect"))
	},
	func(rt *rapid.T, c *contract.Capability) { c.Declared.Set("idempotent", optBool(rt, "idempotent")) },
	func(rt *rapid.T, c *contract.Capability) { c.Declared.Set("reversible", optBool(rt, "reversible")) },
	func(rt *rapid.T, c *contract.Capability) {
		c.Declared.Set("confirmation", rapid.SampledFrom(levels).Draw(rt, "confirmation"))
	},
	func(rt *rapid.T, c *contract.Capability) { // any fact, one a later surface.Declaration adds included
		name := rapid.SampledFrom(slices.Sorted(maps.Values(declaredFacts))).Draw(rt, "fact")
		c.Declared.Set(name, anyFact(rt, name))
	},
	func(rt *rapid.T, c *contract.Capability) {
		c.ConfirmationByPolicy = rapid.SampledFrom([]surface.Confirmation{"", surface.ConfirmRequired}).Draw(rt, "byPolicy")
	},
	func(rt *rapid.T, c *contract.Capability) { c.RequiresConfirmation = optBool(rt, "requires") },
	func(rt *rapid.T, c *contract.Capability) {
		c.InputSchema = rapid.SampledFrom(schemas).Draw(rt, "input")
	},
	func(rt *rapid.T, c *contract.Capability) {
		c.OutputSchema = rapid.SampledFrom(schemas).Draw(rt, "output")
	},
	func(rt *rapid.T, c *contract.Capability) {
		c.BoundFields = nil
		for _, p := range []string{"ids", "x"} {
			if rapid.Bool().Draw(rt, "bound "+p) {
				c.BoundFields = append(c.BoundFields, contract.BoundField{Path: p, Locked: rapid.Bool().Draw(rt, "locked")})
			}
		}
	},
	func(rt *rapid.T, c *contract.Capability) {
		c.Annotations = nil
		if rapid.Bool().Draw(rt, "annotated") {
			c.Annotations = &contract.Annotations{ReadOnlyHint: rapid.Bool().Draw(rt, "ro"), DestructiveHint: optBool(rt, "destr"),
				IdempotentHint: rapid.Bool().Draw(rt, "idem"), OpenWorldHint: optBool(rt, "open"), Title: rapid.SampledFrom([]string{"", "T"}).Draw(rt, "title")}
		}
	},
	func(rt *rapid.T, c *contract.Capability) {
		c.Meta = rapid.SampledFrom([]json.RawMessage{nil, json.RawMessage(`{"a":1}`), json.RawMessage(`{"a":2}`)}).Draw(rt, "meta")
	},
	func(rt *rapid.T, c *contract.Capability) {
		c.Context = rapid.SampledFrom([]*surface.Parent{nil, &comps[0], &comps[1]}).Draw(rt, "context")
	},
	func(rt *rapid.T, c *contract.Capability) {
		c.Policies = nil
		for range rapid.IntRange(0, 3).Draw(rt, "policies") {
			p := rapid.SampledFrom(policies).Draw(rt, "policy")
			p.Hooks = rapid.SampledFrom(hooks).Draw(rt, "hooks")
			p.Vote = rapid.SampledFrom([]string{"", "expose", "disable", "hide"}).Draw(rt, "vote")
			c.Policies = append(c.Policies, p)
		}
	},
	func(rt *rapid.T, c *contract.Capability) {
		c.StandingGrants = rapid.SampledFrom([]*contract.GrantCeiling{nil, {MaxTTLMs: 60000}, {MaxTTLMs: 60000, MaxUses: 3},
			{MaxTTLMs: 600000, MaxUses: 3}, {MaxTTLMs: 30000, MaxUses: 5}}).Draw(rt, "standingGrants")
	},
}

func genView(rt *rapid.T, name string, src contract.Source) contract.ConsumerView {
	v := contract.ConsumerView{Name: name}
	for _, id := range rapid.SliceOfDistinct(rapid.SampledFrom(capIDs), rapid.ID).Draw(rt, "ids") {
		c := contract.Capability{CapabilityID: id}
		if src == contract.SourceRegistry {
			comp := rapid.SampledFrom(comps).Draw(rt, "component")
			c.Component = &comp
		} else {
			c.WireName = "w-" + id
		}
		for _, f := range fields {
			f(rt, &c)
		}
		if src == contract.SourceMCP {
			c.WireName, c.Visibility = "w-"+id, contract.Listed
		}
		v.Capabilities = append(v.Capabilities, c)
	}
	if src == contract.SourceRegistry && rapid.Bool().Draw(rt, "components") {
		v.Components = []contract.Component{{Type: "a.b", InstanceID: "main", Description: rapid.SampledFrom([]string{"", "d"}).Draw(rt, "cdesc")}}
	}
	return v
}

func genContract(rt *rapid.T, src contract.Source) *contract.Contract {
	c := &contract.Contract{Format: contract.Format, Version: contract.Version, Source: src}
	for _, name := range rapid.SliceOfNDistinct(rapid.SampledFrom([]string{"embedded:console", "mcp-bridge:agent"}), 1, 2, rapid.ID).Draw(rt, "consumers") {
		c.Consumers = append(c.Consumers, genView(rt, name, src))
	}
	return c
}

// mutated returns a copy of c with some fields redrawn, some
// capabilities dropped and perhaps a consumer added.
func mutated(rt *rapid.T, c *contract.Contract) *contract.Contract {
	m := copyOf(c)
	for i := range m.Consumers {
		v := &m.Consumers[i]
		for j := range v.Capabilities {
			for range rapid.IntRange(0, 3).Draw(rt, "redraws") {
				rapid.SampledFrom(fields).Draw(rt, "field")(rt, &v.Capabilities[j])
			}
			if m.Source == contract.SourceMCP {
				v.Capabilities[j].Visibility = contract.Listed
			}
		}
		if len(v.Capabilities) > 0 && rapid.IntRange(0, 4).Draw(rt, "drop?") == 0 {
			v.Capabilities = v.Capabilities[1:]
		}
	}
	if rapid.IntRange(0, 4).Draw(rt, "add consumer?") == 0 && len(m.Consumers) < 2 {
		name := "mcp-bridge:agent"
		if m.Consumers[0].Name == name {
			name = "embedded:console"
		}
		m.Consumers = append(m.Consumers, genView(rt, name, m.Source))
	}
	return m
}

// identity is what a change is about, for pairing the changes of the two
// directions.
func identity(c contract.Change) string { return c.Consumer + "|" + c.Capability + "|" + c.Field }

// converse is the class the change must have in the other direction.
func converse(c contract.Change) contract.Class {
	switch {
	case c.Class == contract.Widening && !c.Mixed:
		return contract.Narrowing
	case c.Class == contract.Narrowing:
		return contract.Widening
	}
	return c.Class // neutral, or a mixed widening
}

// Swapping the two contracts turns every widening into a narrowing and
// back, except a mixed widening, which is one either way; neutral stays
// neutral; before and after swap. Every difference of the files is at
// least one change, and a contract has no change against itself or its
// own file.
func TestCompareProperties(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		src := rapid.SampledFrom([]contract.Source{contract.SourceRegistry, contract.SourceMCP}).Draw(rt, "source")
		a := genContract(rt, src)
		var b *contract.Contract
		if rapid.Bool().Draw(rt, "related") {
			b = mutated(rt, a)
		} else {
			b = genContract(rt, src)
		}
		ab, err := contract.Compare(a, b)
		if err != nil {
			rt.Fatal(err)
		}
		ba, err := contract.Compare(b, a)
		if err != nil {
			rt.Fatal(err)
		}
		if len(ab) != len(ba) {
			rt.Fatalf("%d changes one way, %d the other:\n%s\n%s", len(ab), len(ba), table(ab), table(ba))
		}
		back := map[string]contract.Change{}
		for _, c := range ba {
			if _, dup := back[identity(c)]; dup {
				rt.Fatalf("two changes of %s", identity(c))
			}
			back[identity(c)] = c
		}
		for _, c := range ab {
			r, ok := back[identity(c)]
			if !ok {
				rt.Fatalf("%s has no converse:\n%s", identity(c), table(ba))
			}
			if r.Class != converse(c) || r.Mixed != c.Mixed {
				rt.Fatalf("%s: %s (mixed %v) one way, %s (mixed %v) the other", identity(c), c.Class, c.Mixed, r.Class, r.Mixed)
			}
			if !bytes.Equal(c.Before, r.After) || !bytes.Equal(c.After, r.Before) {
				rt.Fatalf("%s: values not swapped: %s→%s, %s→%s", identity(c), c.Before, c.After, r.Before, r.After)
			}
			if c.Class == "" || c.Field == "" || c.Consumer == "" {
				rt.Fatalf("incomplete change %+v", c)
			}
		}
		ea, err := a.Encode()
		if err != nil {
			rt.Fatal(err)
		}
		eb, _ := b.Encode()
		if !bytes.Equal(ea, eb) && len(ab) == 0 {
			rt.Fatalf("the files differ but no change is reported:\n%s\n%s", ea, eb)
		}
		parsed, err := contract.Parse(ea)
		if err != nil {
			rt.Fatal(err)
		}
		for _, other := range []*contract.Contract{a, parsed} {
			if self, _ := contract.Compare(a, other); len(self) != 0 {
				rt.Fatalf("changes against itself:\n%s", table(self))
			}
		}
	})
}

// Every field is compared: redrawing any one field of a capability gives
// a change exactly when it changes the file.
func TestEveryFieldIsCompared(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		src := rapid.SampledFrom([]contract.Source{contract.SourceRegistry, contract.SourceMCP}).Draw(rt, "source")
		a := genContract(rt, src)
		v := &a.Consumers[0]
		if len(v.Capabilities) == 0 {
			return
		}
		b := copyOf(a)
		c := &b.Consumers[0].Capabilities[rapid.IntRange(0, len(v.Capabilities)-1).Draw(rt, "capability")]
		rapid.SampledFrom(fields).Draw(rt, "field")(rt, c)
		if src == contract.SourceMCP {
			c.Visibility = contract.Listed
		}
		ea, _ := a.Encode()
		eb, _ := b.Encode()
		ch, err := contract.Compare(a, b)
		if err != nil {
			rt.Fatal(err)
		}
		if bytes.Equal(ea, eb) != (len(ch) == 0) {
			rt.Fatalf("files equal %v, %d changes:\n%s", bytes.Equal(ea, eb), len(ch), table(ch))
		}
	})
}

func copyOf(c *contract.Contract) *contract.Contract {
	b, _ := json.Marshal(c)
	var m contract.Contract
	if err := json.Unmarshal(b, &m); err != nil {
		panic(err)
	}
	return &m
}
