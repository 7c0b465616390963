package contract_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/agentsurface/agentsurface/surface"
	"github.com/agentsurface/agentsurface/surface/contract"
)

func ptr[T any](v T) *T { return &v }

// facts are the declared facts of name, value pairs.
func facts(kv ...any) contract.Facts {
	var f contract.Facts
	for i := 0; i+1 < len(kv); i += 2 {
		f.Set(kv[i].(string), kv[i+1])
	}
	return f
}

// effectOf, levelOf and flagOf read a capability's declared facts ("",
// "" and nil when unknown).
func effectOf(c *contract.Capability) surface.Effect {
	e, _ := contract.Fact[surface.Effect](c.Declared, "effect")
	return e
}

func levelOf(c *contract.Capability) surface.Confirmation {
	l, _ := contract.Fact[surface.Confirmation](c.Declared, "confirmation")
	return l
}

func flagOf(c *contract.Capability, name string) *bool {
	if b, ok := contract.Fact[bool](c.Declared, name); ok {
		return &b
	}
	return nil
}

var cartRef = &surface.Parent{Type: "shop.cart", InstanceID: "main"}

// refund and addItemCap are two capabilities of a hand-made contract,
// every field set.
func refund() contract.Capability {
	c := contract.Capability{
		CapabilityID: "domain:shop.refund", Kind: surface.KindProcedure, Component: cartRef, Context: cartRef,
		WireName: "domain_shop__refund", Visibility: contract.Exposed, Description: "Refund an order",
		Declared:             facts("effect", surface.EffectServerMutation, "idempotent", false, "confirmation", surface.ConfirmOptional),
		RequiresConfirmation: ptr(false),
		InputSchema:          json.RawMessage(`{"type":"object","properties":{"reason":{"type":"string","maxLength":100}},"required":["reason"],"additionalProperties":false}`),
		OutputSchema:         json.RawMessage(`{"type":"object"}`),
		BoundFields:          []contract.BoundField{{Path: "orderId", Locked: true}},
		Meta:                 json.RawMessage(`{"area":"checkout"}`),
		Policies: []contract.Policy{
			{Name: "authenticated", Layer: surface.LayerRegistry, Hooks: []string{"discover", "authorize"}, Vote: "expose"},
			{Name: "audit", Layer: surface.LayerCapability, Hooks: []string{"invoke"}},
		},
	}
	c.Annotations = contract.AnnotationsFor(c.Kind, effectOf(&c), false, c.InputSchema)
	return c
}

func addItemCap() contract.Capability {
	c := contract.Capability{
		CapabilityID: "view:shop.cart.addItem", Kind: surface.KindAction, Component: cartRef,
		WireName: "view_shop__cart__addItem", Visibility: contract.Exposed, Description: "Add an item",
		Declared:             facts("effect", surface.EffectLocalState, "idempotent", false, "reversible", true, "confirmation", surface.ConfirmNever),
		RequiresConfirmation: ptr(false), InputSchema: json.RawMessage(`{"type":"object","properties":{"id":{"type":"string"}},"required":["id"]}`),
	}
	c.Annotations = contract.AnnotationsFor(c.Kind, effectOf(&c), false, c.InputSchema)
	return c
}

func base() *contract.Contract {
	return &contract.Contract{Format: contract.Format, Version: contract.Version, Source: contract.SourceRegistry,
		Consumers: []contract.ConsumerView{{
			Name: "mcp-bridge:agent", Kind: surface.ConsumerMCPBridge, ID: "agent",
			Components:   []contract.Component{{Type: "shop.cart", InstanceID: "main", Description: "The cart"}},
			Capabilities: []contract.Capability{refund(), addItemCap()},
		}}}
}

// change is the part of a Change a rule decides.
type change struct {
	field string
	class contract.Class
	mixed bool
}

func (c change) String() string {
	m := ""
	if c.mixed {
		m = " (mixed)"
	}
	return fmt.Sprintf("%s %s%s", c.field, c.class, m)
}

func compare(t *testing.T, old, new *contract.Contract) []contract.Change {
	t.Helper()
	changes, err := contract.Compare(old, new)
	if err != nil {
		t.Fatal(err)
	}
	return changes
}

// Each rule of the table in the package documentation, one case per
// cell: a change made to the hand-made contract, and the changes it must
// give.
func TestRules(t *testing.T) {
	const r, a = 0, 1 // refund, addItem: index in the consumer's capabilities
	type mutation func(v *contract.ConsumerView)
	capab := func(i int, f func(c *contract.Capability)) mutation {
		return func(v *contract.ConsumerView) { f(&v.Capabilities[i]) }
	}
	W, N, Z := contract.Widening, contract.Narrowing, contract.Neutral
	for _, tc := range []struct {
		name string
		mut  mutation // made to the new contract
		want []change
	}{
		{"nothing", func(*contract.ConsumerView) {}, nil},
		{"capability added", func(v *contract.ConsumerView) {
			c := addItemCap()
			c.CapabilityID, c.WireName = "view:shop.cart.clear", "view_shop__cart__clear"
			v.Capabilities = append(v.Capabilities, c)
		}, []change{{"capability", W, false}}},
		{"capability added, hidden", func(v *contract.ConsumerView) {
			v.Capabilities = append(v.Capabilities, contract.Capability{CapabilityID: "view:shop.cart.clear", Component: cartRef, Visibility: contract.Hidden})
		}, []change{{"capability", Z, false}}},
		{"capability removed", func(v *contract.ConsumerView) { v.Capabilities = v.Capabilities[:1] }, []change{{"capability", N, false}}},
		{"exposed → disabled", capab(r, func(c *contract.Capability) { c.Visibility, c.DisabledReason = contract.Disabled, "Later." }),
			[]change{{"visibility", N, false}, {"disabledReason", Z, false}}},
		{"exposed → hidden: what is no longer shown is neutral", capab(r, func(c *contract.Capability) {
			c.Visibility, c.InputSchema, c.Policies = contract.Hidden, nil, nil
			c.Declared.Set("effect", nil)
		}), []change{{"visibility", N, false}, {"effect", Z, false}, {"inputSchema", Z, false},
			{"policies[registry authenticated]", Z, false}, {"policies[capability audit]", Z, false}}},
		{"kind", capab(a, func(c *contract.Capability) { c.Kind = surface.KindObservation }), []change{{"kind", W, true}}},
		{"effect raised", capab(r, func(c *contract.Capability) { c.Declared.Set("effect", surface.EffectDestructive) }), []change{{"effect", W, false}}},
		{"effect lowered", capab(r, func(c *contract.Capability) { c.Declared.Set("effect", surface.EffectServerQuery) }), []change{{"effect", N, false}}},
		{"effect between equals (view)", capab(a, func(c *contract.Capability) { c.Declared.Set("effect", surface.EffectNavigation) }), []change{{"effect", W, true}}},
		{"effect unknown", capab(a, func(c *contract.Capability) { c.Declared.Set("effect", "teleport") }), []change{{"effect", W, true}}},
		{"idempotent claimed", capab(r, func(c *contract.Capability) { c.Declared.Set("idempotent", true) }), []change{{"idempotent", W, false}}},
		{"became grantable", capab(r, func(c *contract.Capability) { c.StandingGrants = &contract.GrantCeiling{MaxTTLMs: 60000, MaxUses: 3} }),
			[]change{{"standingGrants", W, false}}},
		{"became grantable while hidden", capab(r, func(c *contract.Capability) {
			c.Visibility, c.StandingGrants = contract.Hidden, &contract.GrantCeiling{MaxTTLMs: 60000}
		}), []change{{"visibility", N, false}, {"standingGrants", Z, false}}},
		{"idempotent unknown", capab(r, func(c *contract.Capability) { c.Declared.Set("idempotent", nil) }), []change{{"idempotent", W, true}}},
		{"reversible no more", capab(a, func(c *contract.Capability) { c.Declared.Set("reversible", false) }), []change{{"reversible", N, false}}},
		{"confirmation lowered", capab(r, func(c *contract.Capability) { c.Declared.Set("confirmation", surface.ConfirmNever) }), []change{{"confirmation", W, false}}},
		{"confirmation raised", capab(r, func(c *contract.Capability) {
			c.Declared.Set("confirmation", surface.ConfirmRequired)
			c.RequiresConfirmation = ptr(true)
		}), []change{{"confirmation", N, false}, {"requiresConfirmation", Z, false}}},
		{"confirmation by policy added", capab(r, func(c *contract.Capability) { c.ConfirmationByPolicy = surface.ConfirmRequired }),
			[]change{{"confirmationByPolicy", N, false}}},
		{"input accepts more", capab(r, func(c *contract.Capability) {
			c.InputSchema = json.RawMessage(`{"type":"object","properties":{"reason":{"type":"string","maxLength":1000}},"required":["reason"],"additionalProperties":false}`)
		}), []change{{"inputSchema", W, false}}},
		{"input accepts less", capab(r, func(c *contract.Capability) {
			c.InputSchema = json.RawMessage(`{"type":"object","properties":{"reason":{"type":"string","maxLength":10}},"required":["reason"],"additionalProperties":false}`)
		}), []change{{"inputSchema", N, false}}},
		{"input schema reworded", capab(r, func(c *contract.Capability) {
			c.InputSchema = json.RawMessage(`{"type":"object","properties":{"reason":{"type":"string","maxLength":100,"description":"Why"}},"required":["reason"],"additionalProperties":false}`)
		}), []change{{"inputSchema", Z, false}}},
		{"input both ways", capab(r, func(c *contract.Capability) {
			c.InputSchema = json.RawMessage(`{"type":"object","properties":{"note":{"type":"string"}},"required":["note"],"additionalProperties":false}`)
		}), []change{{"inputSchema", W, true}}},
		{"output constrained", capab(r, func(c *contract.Capability) {
			c.OutputSchema = json.RawMessage(`{"type":"object","properties":{"ok":{"type":"boolean"}},"additionalProperties":false}`)
		}), []change{{"outputSchema", N, false}}},
		{"output schema dropped: any output", capab(r, func(c *contract.Capability) { c.OutputSchema = nil }), []change{{"outputSchema", W, false}}},
		{"bound field dropped", capab(r, func(c *contract.Capability) { c.BoundFields = nil }), []change{{"boundFields[orderId]", W, false}}},
		{"bound field unlocked", capab(r, func(c *contract.Capability) { c.BoundFields[0].Locked = false }), []change{{"boundFields[orderId]", W, false}}},
		{"bound field added", capab(r, func(c *contract.Capability) {
			c.BoundFields = append(c.BoundFields, contract.BoundField{Path: "amount", Locked: true})
		}), []change{{"boundFields[amount]", N, false}}},
		{"no longer served over MCP", capab(a, func(c *contract.Capability) { c.Annotations = nil }), []change{{"annotations", N, false}}},
		{"a hint that follows from the facts", capab(a, func(c *contract.Capability) { c.Annotations.DestructiveHint = ptr(true) }),
			[]change{{"annotations.destructiveHint", Z, false}}},
		{"policy removed", capab(r, func(c *contract.Capability) { c.Policies = c.Policies[:1] }), []change{{"policies[capability audit]", W, false}}},
		{"policy added", capab(r, func(c *contract.Capability) {
			c.Policies = append(c.Policies, contract.Policy{Name: "rate-limit", Layer: surface.LayerCapability, Hooks: []string{"authorize"}})
		}), []change{{"policies[capability rate-limit]", N, false}}},
		{"a second policy of one name", capab(r, func(c *contract.Capability) {
			c.Policies = append(c.Policies, contract.Policy{Name: "audit", Layer: surface.LayerCapability, Hooks: []string{"invoke"}})
		}), []change{{"policies[capability audit #2]", N, false}}},
		{"policy hooks removed", capab(r, func(c *contract.Capability) { c.Policies[0].Hooks = []string{"discover"} }),
			[]change{{"policies[registry authenticated].hooks", W, false}}},
		{"policy hooks replaced", capab(r, func(c *contract.Capability) { c.Policies[1].Hooks = []string{"authorize"} }),
			[]change{{"policies[capability audit].hooks", W, true}}},
		{"policy now asks for confirmation", capab(r, func(c *contract.Capability) { c.Policies[1].RequiresConfirmation = true }),
			[]change{{"policies[capability audit].requiresConfirmation", N, false}}},
		{"policy vote", capab(r, func(c *contract.Capability) { c.Policies[0].Vote = "disable"; c.Policies[0].Reason = "x" }),
			[]change{{"policies[registry authenticated].vote", Z, false}}},
		{"policy order", capab(r, func(c *contract.Capability) { slices.Reverse(c.Policies) }), []change{{"policies", W, true}}},
		{"texts", capab(r, func(c *contract.Capability) {
			c.Description, c.WireName, c.Meta = "Refund it", "refund", json.RawMessage(`{"area":"x"}`)
			c.Context = &surface.Parent{Type: "shop.page", InstanceID: "main"}
		}), []change{{"description", Z, false}, {"wireName", Z, false}, {"context", Z, false}, {"meta", Z, false}}},
		{"component", func(v *contract.ConsumerView) { v.Components[0].Description = "The basket" },
			[]change{{"component shop.cart/main.description", Z, false}}},
		{"component gone", func(v *contract.ConsumerView) { v.Components = nil }, []change{{"component shop.cart/main", Z, false}}},
		{"grants", func(v *contract.ConsumerView) { v.Grants = []string{"refunds"} }, []change{{"grants", Z, false}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			old, new := base(), base()
			tc.mut(&new.Consumers[0])
			requireChanges(t, compare(t, old, new), tc.want)
			// The converse: every widening but a mixed one becomes a
			// narrowing, and back.
			var converse []change
			for _, c := range tc.want {
				switch {
				case c.class == W && !c.mixed:
					c.class = N
				case c.class == N:
					c.class = W
				}
				converse = append(converse, c)
			}
			requireChanges(t, compare(t, new, old), converse)
		})
	}
}

func requireChanges(t *testing.T, got []contract.Change, want []change) {
	t.Helper()
	var g []change
	for _, c := range got {
		g = append(g, change{c.Field, c.Class, c.Mixed})
	}
	slices.SortFunc(g, func(a, b change) int { return strings.Compare(a.field, b.field) })
	want = slices.Clone(want)
	slices.SortFunc(want, func(a, b change) int { return strings.Compare(a.field, b.field) })
	if fmt.Sprint(g) != fmt.Sprint(want) {
		t.Fatalf("changes %v, want %v\n%s", g, want, table(got))
	}
}

func table(changes []contract.Change) string {
	var b strings.Builder
	_ = contract.WriteTable(&b, changes)
	return b.String()
}

func TestVisibilityAndConsumers(t *testing.T) {
	W, N, Z := contract.Widening, contract.Narrowing, contract.Neutral
	hidden := base()
	h := &hidden.Consumers[0].Capabilities[0]
	*h = contract.Capability{CapabilityID: h.CapabilityID, Kind: h.Kind, Component: h.Component, Visibility: contract.Hidden,
		Description: h.Description, Policies: h.Policies}
	// hidden → exposed widens once; what it shows now is listed, neutral.
	shown := []change{{"visibility", W, false}}
	for _, f := range []string{"annotations", "boundFields[orderId]", "confirmation", "context", "effect", "idempotent", "inputSchema", "meta", "outputSchema", "requiresConfirmation", "wireName"} {
		shown = append(shown, change{f, Z, false})
	}
	requireChanges(t, compare(t, hidden, base()), shown)
	shown[0].class = N
	requireChanges(t, compare(t, base(), hidden), shown)
	disabled := base()
	disabled.Consumers[0].Capabilities[0].Visibility = contract.Disabled
	requireChanges(t, compare(t, disabled, base()), []change{{"visibility", W, false}})
	shown[0].class = W
	requireChanges(t, compare(t, hidden, disabled), shown)

	// A consumer added that sees something widens; one that sees only
	// hidden capabilities changes nothing.
	two := base()
	other := base().Consumers[0]
	other.Name, other.Kind, other.ID = "webmcp:browser", surface.ConsumerWebMCP, "browser"
	two.Consumers = append(two.Consumers, other)
	requireChanges(t, compare(t, base(), two), []change{{"consumer", W, false}})
	requireChanges(t, compare(t, two, base()), []change{{"consumer", N, false}})
	blind := base()
	other = hidden.Consumers[0]
	other.Name = "webmcp:browser"
	other.Capabilities = other.Capabilities[:1]
	blind.Consumers = append(blind.Consumers, other)
	requireChanges(t, compare(t, base(), blind), []change{{"consumer", Z, false}})
}

// In an MCP contract the announcement and the hints are the only
// evidence of the confirmation and of the facts: they are classed.
func TestRulesMCP(t *testing.T) {
	W, N, Z := contract.Widening, contract.Narrowing, contract.Neutral
	tool := func(f func(*contract.Tool)) *contract.Contract {
		tl := contract.Tool{Name: "delete_all", Description: "Delete everything", InputSchema: json.RawMessage(`{"type":"object"}`),
			Annotations: &contract.Annotations{DestructiveHint: ptr(true)}}
		f(&tl)
		return must(contract.FromTools("agent", []contract.Tool{tl}))
	}
	requireChanges(t, compare(t, tool(func(*contract.Tool) {}), tool(func(t *contract.Tool) { t.Annotations.DestructiveHint = ptr(false) })),
		[]change{{"annotations.destructiveHint", W, false}})
	requireChanges(t, compare(t, tool(func(*contract.Tool) {}), tool(func(t *contract.Tool) { t.Annotations.ReadOnlyHint = true })),
		[]change{{"annotations.readOnlyHint", W, false}})
	requireChanges(t, compare(t, tool(func(*contract.Tool) {}), tool(func(t *contract.Tool) { t.Annotations.OpenWorldHint = ptr(true) })),
		[]change{{"annotations", Z, false}}) // absent means true
	requireChanges(t, compare(t, tool(func(*contract.Tool) {}), tool(func(t *contract.Tool) { t.Annotations = nil })),
		[]change{{"annotations", Z, false}}) // no annotations: MCP's defaults, destructive included
	requireChanges(t, compare(t, tool(func(t *contract.Tool) { t.Annotations.DestructiveHint = ptr(false) }), tool(func(t *contract.Tool) { t.Annotations = nil })),
		[]change{{"annotations.destructiveHint", N, false}})

	asTool := func(required bool) *contract.Contract {
		return tool(func(t *contract.Tool) {
			t.Meta = map[string]any{contract.MetaCapabilityID: "domain:files.deleteAll", contract.MetaKind: "procedure", contract.MetaEffect: "destructive"}
			t.Description = "[domain · destructive] Delete everything"
			if required {
				t.Description = "[domain · destructive · requires confirmation] Delete everything"
			}
		})
	}
	requireChanges(t, compare(t, asTool(true), asTool(false)), []change{{"requiresConfirmation", W, false}})
	requireChanges(t, compare(t, asTool(false), asTool(true)), []change{{"requiresConfirmation", N, false}})
	// Facts known (kind, effect, idempotency from the hint): the hints follow.
	withFacts := asTool(false)
	changed := asTool(false)
	changed.Consumers[0].Capabilities[0].Annotations.ReadOnlyHint = true
	requireChanges(t, compare(t, withFacts, changed), []change{{"annotations.readOnlyHint", Z, false}})

	if _, err := contract.Compare(base(), asTool(true)); !errors.Is(err, contract.ErrSources) {
		t.Fatalf("err = %v, want ErrSources", err)
	}
	bad := base()
	bad.Version = 9
	if _, err := contract.Compare(bad, base()); !errors.Is(err, contract.ErrFormat) {
		t.Fatalf("err = %v, want ErrFormat", err)
	}
}

func TestClassesAndReport(t *testing.T) {
	for in, want := range map[string]contract.Classes{
		"widening":           {contract.Widening},
		"widening,narrowing": {contract.Widening, contract.Narrowing},
		" neutral , neutral": {contract.Neutral},
		"any":                {contract.Widening, contract.Narrowing, contract.Neutral},
		"none":               {},
	} {
		got, err := contract.ParseClasses(in)
		if err != nil || !slices.Equal(got, want) {
			t.Errorf("ParseClasses(%q) = %v, %v", in, got, err)
		}
	}
	for _, in := range []string{"", "wide", "widening,"} {
		if _, err := contract.ParseClasses(in); err == nil {
			t.Errorf("ParseClasses(%q): no error", in)
		}
	}
	new := base()
	new.Consumers[0].Capabilities[0].Declared.Set("confirmation", surface.ConfirmNever)
	new.Consumers[0].Capabilities[0].Description = "Refund it"
	changes := compare(t, base(), new)
	if got := (contract.Classes{contract.Widening}).Failing(changes); len(got) != 1 || got[0].Field != "confirmation" {
		t.Fatalf("failing %+v", got)
	}
	if got := (contract.Classes{}).Failing(changes); got != nil {
		t.Fatalf("none fails: %+v", got)
	}
	out := table(changes)
	for _, want := range []string{"CLASS", "widening", "domain:shop.refund @ shop.cart/main", "confirmation", `"optional" → "never"`, "2 changes: 1 widening, 0 narrowing, 1 neutral"} {
		if !strings.Contains(out, want) {
			t.Errorf("the table lacks %q:\n%s", want, out)
		}
	}
	if s := contract.Summary(nil); s != "no changes" {
		t.Errorf("Summary(nil) = %q", s)
	}
}
