package contract_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/agentsurface/agentsurface/surface"
	"github.com/agentsurface/agentsurface/surface/contract"
	"github.com/agentsurface/agentsurface/surface/surfacetest"
)

// grantsOf returns the view of one capability with the standing-grant
// ceiling g.
func grantsOf(g *contract.GrantCeiling) *contract.Contract {
	c := base()
	c.Consumers[0].Capabilities[0].StandingGrants = g
	return c
}

// Issue "standing grants" item 5: a capability that became grantable, or
// whose ceiling widened (a longer TTL, more uses, no cap on uses), is a
// widening; the converse a narrowing; a ceiling whose TTL and uses move
// apart a mixed widening, whichever contract is the old one.
func TestStandingGrantsRule(t *testing.T) {
	ceil := func(ttl int64, uses int) *contract.GrantCeiling {
		return &contract.GrantCeiling{MaxTTLMs: ttl, MaxUses: uses}
	}
	for _, tc := range []struct {
		name     string
		old, new *contract.GrantCeiling
		class    contract.Class
		mixed    bool
	}{
		{"became grantable", nil, ceil(60000, 3), contract.Widening, false},
		{"no longer grantable", ceil(60000, 3), nil, contract.Narrowing, false},
		{"longer TTL", ceil(60000, 3), ceil(600000, 3), contract.Widening, false},
		{"shorter TTL", ceil(600000, 3), ceil(60000, 3), contract.Narrowing, false},
		{"more uses", ceil(60000, 3), ceil(60000, 4), contract.Widening, false},
		{"no cap on uses", ceil(60000, 3), ceil(60000, 0), contract.Widening, false},
		{"a cap on uses", ceil(60000, 0), ceil(60000, 100), contract.Narrowing, false},
		{"longer but fewer", ceil(60000, 3), ceil(600000, 1), contract.Widening, true},
		{"shorter but more", ceil(600000, 1), ceil(60000, 3), contract.Widening, true},
	} {
		changes := compare(t, grantsOf(tc.old), grantsOf(tc.new))
		if len(changes) != 1 || changes[0].Field != "standingGrants" || changes[0].Class != tc.class || changes[0].Mixed != tc.mixed {
			t.Errorf("%s: %+v", tc.name, changes)
		}
	}
	// A malformed ceiling is refused, not compared.
	if _, err := contract.Compare(base(), grantsOf(ceil(0, 1))); err == nil {
		t.Error("a ceiling without a TTL was compared")
	}
}

// FromRegistry records each visible capability's ceiling from the
// registry's explanation: present where the definition allows grants,
// absent where it does not or a policy always asks, and nothing of a
// hidden capability.
func TestFromRegistryStandingGrants(t *testing.T) {
	reg := surfacetest.NewRegistry(t, &surface.Options{Limits: surface.Limits{MaxGrantTTL: 20 * time.Minute}})
	x := surface.NewFuncExecutor()
	surface.AddFunc(x, "shop.refund", func(context.Context, *surface.ProcedureCall, map[string]any) (map[string]any, error) { return nil, nil })
	reg.SetProcedureExecutor(x)
	exec := func(context.Context, *surface.Call, map[string]any) (surface.None, error) { return surface.None{}, nil }
	hide := surface.Policy{Name: "hide-secret", Discover: func(pc *surface.PolicyContext) surface.Decision {
		if pc.CapabilityID == "view:shop.cart.secret" {
			return surface.Hide()
		}
		return surface.Expose()
	}}
	act := func(rule surface.GrantRule, pols ...surface.Policy) surface.Capability {
		return surface.Action(surface.ActionDef[map[string]any, surface.None]{Description: "A", Effect: surface.EffectLocalState,
			Confirmation: surface.ConfirmRequired, InputSchema: json.RawMessage(`{"type":"object"}`), Grants: rule, Policies: pols, Execute: exec})
	}
	surfacetest.MustRegister(t, reg, surface.Component{Type: "shop.cart", InstanceID: "main", Description: "Cart", Policies: []surface.Policy{hide},
		Actions: map[string]surface.Capability{
			"empty":  act(surface.GrantRule{Allow: true}),
			"strict": act(surface.GrantRule{Allow: true}, surface.RequireConfirmation(nil, nil)),
			"plain":  act(surface.GrantRule{}),
			"secret": act(surface.GrantRule{Allow: true}),
		},
		Procedures: []surface.Capability{surface.Procedure(surface.ProcedureDef[map[string]any, map[string]any]{
			ID: "domain:shop.refund", Description: "Refund", Effect: surface.EffectDestructive,
			Grants: surface.GrantRule{Allow: true, MaxTTL: 5 * time.Minute, MaxUses: 2},
		})},
	})
	c, err := contract.FromRegistry(reg, surface.Consumer{ID: "agent", Kind: surface.ConsumerMCPBridge})
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, cp := range c.Consumers[0].Capabilities {
		b, _ := json.Marshal(cp.StandingGrants)
		got[cp.CapabilityID] = string(b)
	}
	want := map[string]string{
		"view:shop.cart.empty":  `{"maxTtlMs":1200000}`,
		"view:shop.cart.strict": "null",
		"view:shop.cart.plain":  "null",
		"view:shop.cart.secret": "null", // hidden: shown nothing
		"domain:shop.refund":    `{"maxTtlMs":300000,"maxUses":2}`,
	}
	for id, w := range want {
		if got[id] != w {
			t.Errorf("%s: standingGrants %s, want %s", id, got[id], w)
		}
	}
	// Through the encoding and back.
	b, err := c.Encode()
	if err != nil {
		t.Fatal(err)
	}
	back, err := contract.Parse(b)
	if err != nil {
		t.Fatal(err)
	}
	if changes := compare(t, c, back); len(changes) != 0 {
		t.Fatalf("round trip: %+v", changes)
	}
}
