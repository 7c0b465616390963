package contract_test

import (
	"context"
	"encoding/json"
	"flag"
	"slices"
	"testing"

	"github.com/agentsurface/agentsurface/surface"
	"github.com/agentsurface/agentsurface/surface/surfacetest"
)

var update = flag.Bool("update", false, "rewrite golden files")

// The consumers the shop fixture's contract is taken for.
var (
	agent   = surface.Consumer{ID: "agent", Kind: surface.ConsumerMCPBridge}
	console = surface.Consumer{ID: "console", Kind: surface.ConsumerEmbedded}
)

type cart struct {
	Items []string `json:"items" jsonschema:"Item ids in the cart"`
	Total float64  `json:"total"`
}

type addItem struct {
	ID       string `json:"id" jsonschema:"The item id"`
	Quantity int    `json:"quantity,omitempty"`
}

type refundIn struct {
	OrderID string `json:"orderId"`
	Reason  string `json:"reason"`
}

type refundOut struct {
	Refunded bool `json:"refunded"`
}

type listIn struct {
	Query string `json:"query,omitempty"`
}

// shopOptions vary the shop fixture.
type shopOptions struct {
	// reversed registers the components in the opposite order.
	reversed bool
	// edit, when set, changes the components before they are registered.
	edit func(cartComp, adminComp *surface.Component)
}

func noop[In any]() func(context.Context, *surface.Call, In) (surface.None, error) {
	return func(context.Context, *surface.Call, In) (surface.None, error) { return surface.None{}, nil }
}

// shop returns a registry with a cart and an admin panel: observations,
// actions of both view effects (one whose input is not an object, which
// MCP cannot serve), a procedure of each server effect (one bound to
// live state), and policies that hide, disable and ask for confirmation.
func shop(t testing.TB, o shopOptions) *surface.Registry {
	t.Helper()
	reg := surfacetest.NewRegistry(t, &surface.Options{
		Context:  func() map[string]any { return map[string]any{"user": "u1"} },
		Policies: []surface.Policy{surface.Authenticated("")},
	})
	x := surface.NewFuncExecutor()
	for _, p := range []string{"shop.refund", "shop.list", "shop.email", "shop.update"} {
		surface.AddFunc(x, p, func(context.Context, *surface.ProcedureCall, map[string]any) (map[string]any, error) { return nil, nil })
	}
	reg.SetProcedureExecutor(x)
	cartComp := surface.Component{
		Type: "shop.cart", InstanceID: "main", Description: "The shopping cart",
		Meta: map[string]any{"area": "checkout"},
		Observations: map[string]surface.Capability{
			"readCart": surface.Observation(surface.ObservationDef[cart]{
				Description: "Read the items and the total",
				Read:        func(context.Context, *surface.Call) (cart, error) { return cart{}, nil },
			}),
		},
		Actions: map[string]surface.Capability{
			"addItem": surface.Action(surface.ActionDef[addItem, surface.None]{
				Description: "Add an item", Effect: surface.EffectLocalState, Execute: noop[addItem](),
			}),
			"checkout": surface.Action(surface.ActionDef[surface.None, surface.None]{
				Description: "Go to the checkout page", Effect: surface.EffectNavigation, Idempotent: true, Irreversible: true,
				Execute: noop[surface.None](),
			}),
			"setTags": surface.Action(surface.ActionDef[[]string, surface.None]{
				Description: "Replace the cart's tags", Effect: surface.EffectLocalState, Execute: noop[[]string](),
			}),
		},
		Procedures: []surface.Capability{
			surface.Procedure(surface.ProcedureDef[refundIn, refundOut]{
				ID: "domain:shop.refund", Description: "Refund an order", Effect: surface.EffectDestructive,
				Bound: []string{"orderId"},
				Bind:  func(context.Context) (map[string]any, error) { return map[string]any{"orderId": "o1"}, nil },
			}),
			surface.Procedure(surface.ProcedureDef[listIn, json.RawMessage]{
				ID: "domain:shop.list", Description: "List orders", Effect: surface.EffectServerQuery,
				OutputSchema: json.RawMessage(`{"type":"object"}`),
			}),
			surface.Procedure(surface.ProcedureDef[listIn, surface.None]{
				ID: "domain:shop.email", Description: "Email the customer", Effect: surface.EffectExternalSideEffect,
			}),
			surface.Procedure(surface.ProcedureDef[listIn, surface.None]{
				ID: "domain:shop.update", Description: "Update an order", Effect: surface.EffectServerMutation,
			}),
		},
		Policies: []surface.Policy{
			surface.RequireConfirmation(func(ic *surface.InvokeContext) bool { return ic.CapabilityID == "domain:shop.refund" }, nil),
		},
	}
	adminComp := surface.Component{
		Type: "shop.admin", InstanceID: "main", Description: "The admin panel",
		Observations: map[string]surface.Capability{
			"readAudit": surface.Observation(surface.ObservationDef[[]string]{
				Description: "Read the audit log",
				Read:        func(context.Context, *surface.Call) ([]string, error) { return nil, nil },
				Policies: []surface.Policy{{Name: "staff-only", Discover: func(pc *surface.PolicyContext) surface.Decision {
					if pc.Consumer.Kind == surface.ConsumerMCPBridge {
						return surface.Hide()
					}
					return surface.Expose()
				}}},
			}),
		},
		Actions: map[string]surface.Capability{
			"purge": surface.Action(surface.ActionDef[surface.None, surface.None]{
				Description: "Purge the cache", Effect: surface.EffectLocalState, Execute: noop[surface.None](),
				Policies: []surface.Policy{{Name: "maintenance", Discover: func(*surface.PolicyContext) surface.Decision {
					return surface.Disable("The cache is being rebuilt.")
				}}},
			}),
		},
	}
	if o.edit != nil {
		o.edit(&cartComp, &adminComp)
	}
	comps := []surface.Component{cartComp, adminComp}
	if o.reversed {
		slices.Reverse(comps)
	}
	for _, c := range comps {
		surfacetest.MustRegister(t, reg, c)
	}
	return reg
}
