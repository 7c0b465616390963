package contract_test

import (
	"bytes"
	"errors"
	"fmt"
	"runtime"
	"sync/atomic"
	"testing"

	"github.com/agentsurface/agentsurface/surface"
	"github.com/agentsurface/agentsurface/surface/contract"
	"github.com/agentsurface/agentsurface/surface/surfacetest"
)

// view returns the named consumer's view of c.
func view(t testing.TB, c *contract.Contract, name string) *contract.ConsumerView {
	t.Helper()
	for i := range c.Consumers {
		if c.Consumers[i].Name == name {
			return &c.Consumers[i]
		}
	}
	t.Fatalf("no consumer %q", name)
	return nil
}

// capability returns the capability of v with the given id.
func capability(t testing.TB, v *contract.ConsumerView, id string) *contract.Capability {
	t.Helper()
	for i := range v.Capabilities {
		if v.Capabilities[i].CapabilityID == id {
			return &v.Capabilities[i]
		}
	}
	t.Fatalf("%s: no capability %q", v.Name, id)
	return nil
}

func encode(t testing.TB, c *contract.Contract) []byte {
	t.Helper()
	b, err := c.Encode()
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// The shop's contract is committed: its format is reviewed here, and any
// change to it shows in this golden file. AS-EXPLAIN-001 (hidden
// capabilities are in the developer's contract), AS-AVAIL-002.
func TestShopContract(t *testing.T) {
	surfacetest.RequireContract(t, "shop.contract.json", shop(t, shopOptions{}),
		&surfacetest.ContractOptions{Consumers: []surface.Consumer{agent, console}})
}

// What each consumer is shown, field by field, from the registry's API.
func TestFromRegistry(t *testing.T) {
	c, err := contract.FromRegistry(shop(t, shopOptions{}), agent, console)
	if err != nil {
		t.Fatal(err)
	}
	if c.Format != contract.Format || c.Version != contract.Version || c.Source != contract.SourceRegistry {
		t.Fatalf("header %q %d %q", c.Format, c.Version, c.Source)
	}
	if len(c.Consumers) != 2 || c.Consumers[0].Name != "embedded:console" || c.Consumers[1].Name != "mcp-bridge:agent" {
		t.Fatalf("consumers %+v", c.Consumers)
	}
	a := view(t, c, "mcp-bridge:agent")

	// Hidden from MCP clients by a policy: only what the explanation
	// gives, with the hiding vote.
	audit := capability(t, a, "view:shop.admin.readAudit")
	if audit.Visibility != contract.Hidden || audit.Declared != nil || audit.WireName != "" || audit.Annotations != nil ||
		audit.OutputSchema != nil || audit.Description != "Read the audit log" || len(audit.Policies) != 2 || audit.Policies[1].Vote != "hide" {
		t.Fatalf("hidden capability: %+v", audit)
	}
	if got := capability(t, view(t, c, "embedded:console"), "view:shop.admin.readAudit"); got.Visibility != contract.Exposed || got.WireName == "" {
		t.Fatalf("the console sees it: %+v", got)
	}

	// Disabled by a policy, with its reason.
	if p := capability(t, a, "view:shop.admin.purge"); p.Visibility != contract.Disabled || p.DisabledReason != "The cache is being rebuilt." {
		t.Fatalf("disabled capability: %+v", p)
	}

	// A destructive procedure bound to live state.
	r := capability(t, a, "domain:shop.refund")
	if r.Kind != surface.KindProcedure || effectOf(r) != surface.EffectDestructive || *flagOf(r, "idempotent") || levelOf(r) != surface.ConfirmRequired ||
		r.ConfirmationByPolicy != surface.ConfirmRequired || !*r.RequiresConfirmation || r.WireName != "domain_shop__refund" ||
		len(r.BoundFields) != 1 || r.BoundFields[0] != (contract.BoundField{Path: "orderId", Locked: true}) ||
		r.Context == nil || *r.Context != (surface.Parent{Type: "shop.cart", InstanceID: "main"}) ||
		!bytes.Contains(r.InputSchema, []byte(`"reason"`)) || bytes.Contains(r.InputSchema, []byte(`orderId`)) ||
		r.Annotations == nil || !*r.Annotations.DestructiveHint || flagOf(r, "reversible") != nil {
		t.Fatalf("refund: %+v", r)
	}

	// An observation never asks for confirmation, whatever its chain.
	if o := capability(t, a, "view:shop.cart.readCart"); o.ConfirmationByPolicy != "" || o.InputSchema != nil || !o.Annotations.ReadOnlyHint {
		t.Fatalf("observation: %+v", o)
	}

	// An action whose input is not an object is not served over MCP.
	if s := capability(t, a, "view:shop.cart.setTags"); s.Visibility != contract.Exposed || s.Annotations != nil || s.WireName != "view_shop__cart__setTags" {
		t.Fatalf("setTags: %+v", s)
	}
	if ch := capability(t, a, "view:shop.cart.checkout"); *flagOf(ch, "reversible") || !*flagOf(ch, "idempotent") || effectOf(ch) != surface.EffectNavigation {
		t.Fatalf("checkout: %+v", ch)
	}

	// No live state and no minted ids in the file.
	b := encode(t, c)
	for _, forbidden := range []string{"reg_", "srf_", "surfaceVersion", "capturedAt", "available"} {
		if bytes.Contains(b, []byte(forbidden)) {
			t.Errorf("the contract contains %q", forbidden)
		}
	}
}

// The contract depends on what the application declares, not on the
// order it registered it in, Go's map order, GOMAXPROCS or the run: ten
// builds of each give the same bytes. AS-SNAP-003.
func TestDeterministic(t *testing.T) {
	want := encode(t, must(contract.FromRegistry(shop(t, shopOptions{}), console, agent)))
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(0))
	for i := range 10 {
		runtime.GOMAXPROCS(1 + i%2)
		reg := shop(t, shopOptions{reversed: i%2 == 1})
		// A registration that comes and goes moves the version and the
		// registration counters, which the contract does not contain.
		h := surfacetest.MustRegister(t, reg, surface.Component{Type: "tmp", Description: "Temporary"})
		h.Unregister()
		got := encode(t, must(contract.FromRegistry(reg, agent, console)))
		if !bytes.Equal(got, want) {
			t.Fatalf("build %d differs:\n%s\nwant:\n%s", i, got, want)
		}
	}
}

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}

// Live state is not part of the contract: availability from When, a
// pushed override and a contextual note change nothing.
func TestLiveStateLeftOut(t *testing.T) {
	available := true
	note := "none"
	edit := func(cart, _ *surface.Component) {
		cart.Actions["addItem"] = surface.Action(surface.ActionDef[addItem, surface.None]{
			Description: "Add an item", Effect: surface.EffectLocalState, Execute: noop[addItem](),
			When: func() bool { return available }, UnavailableReason: "The cart is full.",
		})
		cart.Procedures = append(cart.Procedures[:0:0], cart.Procedures...)
		cart.Procedures[1] = surface.Procedure(surface.ProcedureDef[listIn, surface.None]{
			ID: "domain:shop.list", Description: "List orders", Effect: surface.EffectServerQuery,
			Describe: func() string { return note }, OutputSchema: []byte(`{"type":"object"}`),
		})
	}
	reg := shop(t, shopOptions{edit: edit})
	before := encode(t, must(contract.FromRegistry(reg, agent)))
	available, note = false, "3 orders"
	after := encode(t, must(contract.FromRegistry(reg, agent)))
	if !bytes.Equal(before, after) {
		t.Fatalf("live state changed the contract:\n%s\n%s", before, after)
	}
}

func TestFromRegistryErrors(t *testing.T) {
	reg := shop(t, shopOptions{})
	if _, err := contract.FromRegistry(reg); err == nil {
		t.Error("no consumer: no error")
	}
	if _, err := contract.FromRegistry(reg, surface.Consumer{ID: "x", Kind: "robot"}); err == nil {
		t.Error("unknown kind: no error")
	}
	if _, err := contract.FromRegistry(reg, agent, agent); !errors.Is(err, contract.ErrFormat) {
		t.Errorf("one consumer twice: %v", err)
	}
	_ = reg.Close()
	if _, err := contract.FromRegistry(reg, agent); !errors.Is(err, surface.ErrClosed) {
		t.Errorf("closed registry: %v", err)
	}
}

// A registry that changes on every read gives no contract rather than a
// mixture of two surfaces: here a When predicate (user code, which the
// registry calls outside its lock) mounts a component each time the
// registry asks it (not when the mount's own event delivery asks it
// again, which would never end).
func TestChangingSurface(t *testing.T) {
	reg := surfacetest.NewRegistry(t, nil)
	var n atomic.Int64
	var nested atomic.Bool
	surfacetest.MustRegister(t, reg, surface.Component{Type: "a", Description: "A", Actions: map[string]surface.Capability{
		"go": surface.Action(surface.ActionDef[surface.None, surface.None]{
			Description: "Go", Effect: surface.EffectNavigation, Execute: noop[surface.None](),
			When: func() bool {
				if nested.CompareAndSwap(false, true) {
					_, _ = reg.Register(surface.Component{Type: "b", InstanceID: fmt.Sprint("i", n.Add(1)), Description: "B"})
					nested.Store(false)
				}
				return true
			},
		}),
	}})
	if _, err := contract.FromRegistry(reg, agent); !errors.Is(err, contract.ErrChanging) {
		t.Fatalf("err = %v, want ErrChanging", err)
	}
	if n.Load() < 5 {
		t.Fatalf("the surface changed %d times: FromRegistry gave up too early", n.Load())
	}
}

func TestCombine(t *testing.T) {
	a := must(contract.FromRegistry(shop(t, shopOptions{}), agent))
	b := must(contract.FromRegistry(shop(t, shopOptions{}), console))
	both := must(contract.Combine(b, a))
	if !bytes.Equal(encode(t, both), encode(t, must(contract.FromRegistry(shop(t, shopOptions{}), agent, console)))) {
		t.Fatal("combining two contracts differs from taking both consumers at once")
	}
	if _, err := contract.Combine(a, a); !errors.Is(err, contract.ErrFormat) {
		t.Errorf("one consumer twice: %v", err)
	}
	m := must(contract.FromTools("mcp", nil))
	if _, err := contract.Combine(a, m); err == nil {
		t.Error("two sources: no error")
	}
	if _, err := contract.Combine(); err == nil {
		t.Error("nothing: no error")
	}
}
