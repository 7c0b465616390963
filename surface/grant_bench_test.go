package surface_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/agentsurface/agentsurface/surface"
)

// benchGrantRegistry has one confirmation-required action that allows
// grants, and, when grant is set, a grant of the bench consumer whose
// constraints the bench input satisfies.
func benchGrantRegistry(b *testing.B, grant bool, constraint surface.Constraint) *surface.Registry {
	b.Helper()
	reg := surface.New(nil)
	b.Cleanup(func() { _ = reg.Close() })
	_, err := reg.Register(surface.Component{Type: "devices", Description: "Devices", Actions: map[string]surface.Capability{
		"wipe": surface.Action(surface.ActionDef[benchIn, surface.None]{Description: "Wipes", Effect: surface.EffectLocalState,
			Confirmation: surface.ConfirmRequired, Grants: surface.GrantRule{Allow: true},
			Execute: func(context.Context, *surface.Call, benchIn) (surface.None, error) { return surface.None{}, nil }}),
	}})
	if err != nil {
		b.Fatal(err)
	}
	if grant {
		_, err := reg.Grants().Create(context.Background(), surface.GrantSpec{ConsumerKey: benchConsumer.Consumer.Key(),
			CapabilityID: "view:devices.wipe", TTL: time.Hour, Constraints: []surface.Constraint{constraint}}, "bench")
		if err != nil {
			b.Fatal(err)
		}
	}
	return reg
}

// benchWipe calls the action over and over with a fresh id and checks
// each result's code ("" for ok).
func benchWipe(b *testing.B, reg *surface.Registry, want surface.Code) {
	inv := surface.Invocation{CapabilityID: "view:devices.wipe", Input: json.RawMessage(`{"ids":["a"]}`)}
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		res := reg.Invoke(ctx, inv, benchConsumer)
		var got surface.Code
		if res.Error != nil {
			got = res.Error.Code
		}
		if got != want {
			b.Fatalf("got %v, want %q", res.Error, want)
		}
	}
}

// BenchmarkInvokeConfirmationRequired: a call that needs confirmation and
// has no grant: CONFIRMATION_REQUIRED, the identical pending request
// shared.
func BenchmarkInvokeConfirmationRequired(b *testing.B) {
	benchWipe(b, benchGrantRegistry(b, false, surface.Constraint{}), surface.CodeConfirmationRequired)
}

// BenchmarkInvokeConfirmationRequiredGrantMiss: the same with a grant of
// the consumer whose constraint the input escapes: it asks.
func BenchmarkInvokeConfirmationRequiredGrantMiss(b *testing.B) {
	benchWipe(b, benchGrantRegistry(b, true, surface.ValueIn("ids", "b")), surface.CodeConfirmationRequired)
}

// BenchmarkInvokeConfirmationRequiredGranted: the same with a matching
// grant: it runs, spending a use (audited grant-used).
func BenchmarkInvokeConfirmationRequiredGranted(b *testing.B) {
	benchWipe(b, benchGrantRegistry(b, true, surface.ValueIn("ids", "a")), "")
}
