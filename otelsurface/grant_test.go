package otelsurface_test

import (
	"context"
	"encoding/json"
	"slices"
	"testing"
	"testing/synctest"
	"time"

	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/agentsurface/agentsurface/surface"
	"github.com/agentsurface/agentsurface/surface/surfacetest"
)

const grantedID = "view:grants.widget.wipe"

// grantable registers an action that needs confirmation and allows
// standing grants.
func grantable(t testing.TB, reg *surface.Registry) {
	type in struct {
		IDs []string `json:"ids"`
	}
	surfacetest.MustRegister(t, reg, surface.Component{Type: "grants.widget", Description: "W", Actions: map[string]surface.Capability{
		"wipe": surface.Action(surface.ActionDef[in, surface.None]{Description: "Wipe", Effect: surface.EffectLocalState,
			Confirmation: surface.ConfirmRequired, Grants: surface.GrantRule{Allow: true},
			Execute: func(context.Context, *surface.Call, in) (surface.None, error) { return surface.None{}, nil }}),
	}})
}

func spanNamed(t *testing.T, spans tracetest.SpanStubs, name string) tracetest.SpanStub {
	t.Helper()
	for _, s := range spans {
		if s.Name == name {
			return s
		}
	}
	t.Fatalf("no span %q in %v", name, names(spans))
	return tracetest.SpanStub{}
}

// Issue "standing grants" item 4: a grant created from a host request is
// an event of that request's span; a call a grant lets through has a
// confirmation span with the decision "granted" and the grant id, a
// grant.used event, and the grant id on its span; a revocation outside
// any span is a span of its own.
func TestGrantSpans(t *testing.T) {
	h := newHarness(t, nil)
	reg := h.registry(t, nil)
	grantable(t, reg)

	ctx, host := h.tracer().Start(context.Background(), "POST /grants")
	g, err := reg.Grants().Create(ctx, surface.GrantSpec{ConsumerKey: agent.Consumer.Key(), CapabilityID: grantedID, TTL: time.Minute,
		Constraints: []surface.Constraint{surface.ValueIn("ids", "d1")}}, "alice")
	if err != nil {
		t.Fatal(err)
	}
	host.End()
	res := reg.Invoke(context.Background(), surface.Invocation{CapabilityID: grantedID, Input: json.RawMessage(`{"ids":["d1"]}`)}, agent)
	surfacetest.RequireOK(t, res)
	if !reg.Grants().Revoke(context.Background(), g.GrantID, "bob") {
		t.Fatal("revoke failed")
	}

	spans := h.spans.GetSpans()
	hs := spanNamed(t, spans, "POST /grants")
	if got := eventNames(hs); !slices.Equal(got, []string{"grant.created"}) {
		t.Fatalf("host span events %v", got)
	}
	requireAttrs(t, "grant.created", hs.Events[0].Attributes, map[string]any{"agentsurface.grant.id": g.GrantID, "agentsurface.capability.id": grantedID})

	inv := spanNamed(t, spans, "invoke "+grantedID)
	requireAttrs(t, "invocation", inv.Attributes, map[string]any{"agentsurface.grant.id": g.GrantID, "agentsurface.result.status": "ok"})
	if got := eventNames(inv); !slices.Equal(got, []string{"grant.used", "execution.started"}) {
		t.Fatalf("invocation events %v", got)
	}
	requireAttrs(t, "grant.used", inv.Events[0].Attributes, map[string]any{"agentsurface.grant.uses": int64(1)})
	conf := spanNamed(t, spans, "confirmation "+grantedID)
	if conf.Parent.SpanID() != inv.SpanContext.SpanID() {
		t.Fatal("the granted confirmation span is not the invocation's child")
	}
	requireAttrs(t, "granted confirmation", conf.Attributes, map[string]any{"agentsurface.confirmation.decision": "granted", "agentsurface.grant.id": g.GrantID})

	rv := spanNamed(t, spans, "grant revoked")
	if got := eventNames(rv); !slices.Equal(got, []string{"grant.revoked"}) {
		t.Fatalf("revocation span events %v", got)
	}
	requireAttrs(t, "grant.revoked", rv.Events[0].Attributes, map[string]any{"agentsurface.grant.id": g.GrantID})
}

// An approval that makes a grant: the wait span carries the grant id and
// a grant.created event, and no other span reports the creation; the
// grant's expiry is a span of its own.
func TestResolveGrantSpan(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t, nil)
		reg := h.registry(t, nil)
		grantable(t, reg)
		res := reg.Invoke(context.Background(), surface.Invocation{CapabilityID: grantedID, Input: json.RawMessage(`{"ids":["d1"]}`)}, agent)
		cid := res.Error.ConfirmationID()
		g, err := reg.Confirmations().ResolveGrant(cid, surface.Resolution{Approved: true, Channel: surface.ChannelPage, Approver: surface.ApproverUser,
			Grant: &surface.GrantSpec{TTL: time.Minute, FromInput: true}})
		if err != nil {
			t.Fatal(err)
		}
		time.Sleep(time.Minute)
		synctest.Wait()

		spans := h.spans.GetSpans()
		wait := spanNamed(t, spans, "confirmation "+grantedID)
		requireAttrs(t, "wait span", wait.Attributes, map[string]any{"agentsurface.grant.id": g.GrantID, "agentsurface.confirmation.decision": "approved",
			"agentsurface.confirmation.channel": "page", "agentsurface.confirmation.approver": "user"})
		if got := eventNames(wait); !slices.Equal(got, []string{"grant.created"}) {
			t.Fatalf("wait span events %v", got)
		}
		for _, s := range spans {
			if s.Name == "grant created" {
				t.Fatal("the creation is reported twice")
			}
		}
		ex := spanNamed(t, spans, "grant expired")
		requireAttrs(t, "grant.expired", ex.Attributes, map[string]any{"agentsurface.grant.id": g.GrantID})
	})
}
