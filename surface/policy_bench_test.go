package surface_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/agentsurface/agentsurface/surface"
)

// BenchmarkInvokeWithPolicies: an action invoke behind Authenticated and a
// RateLimit whose limit is never reached.
func BenchmarkInvokeWithPolicies(b *testing.B) {
	host := map[string]any{"user": "u1"}
	reg := surface.New(&surface.Options{
		Context:  func() map[string]any { return host },
		Policies: []surface.Policy{surface.Authenticated(""), surface.RateLimit(1<<30, time.Second)},
	})
	defer reg.Close()
	if _, err := reg.Register(benchComponents(1)[0]); err != nil {
		b.Fatal(err)
	}
	inv := surface.Invocation{CapabilityID: "view:bench.widget.selectRows", Input: json.RawMessage(`{"ids":["a"]}`)}
	b.ReportAllocs()
	for b.Loop() {
		if res := reg.Invoke(context.Background(), inv, surface.InvokeOptions{}); res.Error != nil {
			b.Fatal(res.Error)
		}
	}
}

// BenchmarkSnapshotWithDiscoveryPolicy: 100 components under a
// registry-level discovery policy.
func BenchmarkSnapshotWithDiscoveryPolicy(b *testing.B) {
	reg := surface.New(&surface.Options{Policies: []surface.Policy{{
		Name: "staff",
		Discover: func(pc *surface.PolicyContext) surface.Decision {
			if pc.Consumer.Kind == surface.ConsumerWebMCP {
				return surface.Hide()
			}
			return surface.Expose()
		},
	}}})
	defer reg.Close()
	for _, c := range benchComponents(100) {
		if _, err := reg.Register(c); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportAllocs()
	for b.Loop() {
		if s := reg.Snapshot(surface.SnapshotOptions{}); len(s.Components) != 100 {
			b.Fatal(len(s.Components))
		}
	}
}

// BenchmarkConfirmationRoundTrip: required → approve → retry ok.
func BenchmarkConfirmationRoundTrip(b *testing.B) {
	reg := surface.New(nil)
	defer reg.Close()
	_, err := reg.Register(surface.Component{Type: "devices", Description: "Devices", Actions: map[string]surface.Capability{
		"wipe": surface.Action(surface.ActionDef[benchIn, surface.None]{Description: "Wipes", Effect: surface.EffectLocalState,
			Confirmation: surface.ConfirmRequired,
			Execute:      func(context.Context, *surface.Call, benchIn) (surface.None, error) { return surface.None{}, nil }}),
	}})
	if err != nil {
		b.Fatal(err)
	}
	ctl := reg.Confirmations()
	b.ReportAllocs()
	for b.Loop() {
		inv := surface.Invocation{CapabilityID: "view:devices.wipe", Input: json.RawMessage(`{"ids":["a"]}`)}
		res := reg.Invoke(context.Background(), inv, surface.InvokeOptions{})
		id, _ := res.Error.Details["confirmationId"].(string)
		ctl.Resolve(id, surface.Resolution{Approved: true})
		inv.InvocationID, inv.ConfirmationID = res.InvocationID, id
		if res := reg.Invoke(context.Background(), inv, surface.InvokeOptions{}); res.Error != nil {
			b.Fatal(res.Error)
		}
	}
}
