package surface_test

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/agentsurface/agentsurface/surface"
	"github.com/agentsurface/agentsurface/surface/surfacetest"
)

// A tool carries its capability's declared facts as the snapshot's
// descriptor lists them (one record from definition to wire): kind,
// effect, idempotency, reversibility, confirmation level and output
// schema, and what a descriptor leaves implicit (an observation is read,
// idempotent and never asks; a procedure reference is idempotent iff it
// is a server query).
func TestToolCarriesDescriptorFacts(t *testing.T) {
	reg := surfacetest.NewRegistry(t, nil)
	reg.SetProcedureExecutor(surface.NewFuncExecutor())
	type out struct {
		N int `json:"n"`
	}
	surfacetest.MustRegister(t, reg, surface.Component{Type: "t", Description: "T",
		Observations: map[string]surface.Capability{"read": surface.Observation(surface.ObservationDef[out]{
			Description: "Reads", Read: func(context.Context, *surface.Call) (out, error) { return out{}, nil }})},
		Actions: map[string]surface.Capability{
			"go": surface.Action(surface.ActionDef[surface.None, out]{Description: "Goes", Effect: surface.EffectNavigation,
				Idempotent: true, Irreversible: true, Confirmation: surface.ConfirmOptional,
				Execute: func(context.Context, *surface.Call, surface.None) (out, error) { return out{}, nil }}),
			"set": surface.Action(surface.ActionDef[surface.None, surface.None]{Description: "Sets", Effect: surface.EffectLocalState,
				Execute: func(context.Context, *surface.Call, surface.None) (surface.None, error) { return surface.None{}, nil }}),
		},
		Procedures: []surface.Capability{
			surface.Procedure(surface.ProcedureDef[surface.None, out]{ID: "domain:t.query", Description: "Queries", Effect: surface.EffectServerQuery}),
			surface.Procedure(surface.ProcedureDef[surface.None, surface.None]{ID: "domain:t.wipe", Description: "Wipes", Effect: surface.EffectDestructive}),
		},
	})
	snap := reg.Snapshot(surface.SnapshotOptions{})
	tools := newToolset(t, reg, surface.ToolsetOptions{}).Tools()
	byID := map[string]surface.Tool{}
	for _, tl := range tools {
		byID[tl.CapabilityID] = tl
	}
	type facts struct {
		Kind         surface.Kind
		Declaration  surface.Declaration // whole: a field added to it is compared too
		OutputSchema surface.JSONText
	}
	of := func(tl surface.Tool) facts { return facts{tl.Kind, tl.Declaration, tl.OutputSchema} }
	want := map[string]facts{}
	for _, c := range snap.Components {
		for _, o := range c.Observations {
			want[o.CapabilityID] = facts{surface.KindObservation,
				surface.Declaration{Effect: surface.EffectRead, Idempotent: true, Confirmation: surface.ConfirmNever}, o.OutputSchema}
		}
		for _, a := range c.Actions {
			want[a.CapabilityID] = facts{surface.KindAction, a.Declaration, a.OutputSchema}
		}
	}
	for _, p := range snap.Procedures {
		want[p.ProcedureID] = facts{surface.KindProcedure,
			surface.Declaration{Effect: p.Effect, Idempotent: p.Effect == surface.EffectServerQuery, Confirmation: p.Confirmation}, p.OutputSchema}
	}
	if len(want) != 5 || len(tools) != 5 {
		t.Fatalf("%d descriptors, %d tools", len(want), len(tools))
	}
	for id, w := range want {
		if got := of(byID[id]); got != w {
			t.Errorf("%s: tool %+v, descriptor %+v", id, got, w)
		}
	}
	if byID["view:t.go"].OutputSchema == "" || byID["view:t.set"].OutputSchema != "" || byID["domain:t.wipe"].Confirmation != surface.ConfirmRequired {
		t.Fatal("the fixture does not exercise the facts")
	}
}

// The hints every adapter shows (MCP's tool annotations) are computed
// from a tool's facts in one place.
func TestToolHints(t *testing.T) {
	for _, c := range []struct {
		tool surface.Tool
		want surface.ToolHints
	}{
		{surface.Tool{Kind: surface.KindObservation, Declaration: surface.Declaration{Effect: surface.EffectRead, Idempotent: true}}, surface.ToolHints{ReadOnly: true, Idempotent: true}},
		{surface.Tool{Kind: surface.KindAction, Declaration: surface.Declaration{Effect: surface.EffectLocalState}}, surface.ToolHints{}},
		{surface.Tool{Kind: surface.KindAction, Declaration: surface.Declaration{Effect: surface.EffectNavigation, Idempotent: true}}, surface.ToolHints{Idempotent: true}},
		{surface.Tool{Kind: surface.KindProcedure, Declaration: surface.Declaration{Effect: surface.EffectServerQuery, Idempotent: true}}, surface.ToolHints{ReadOnly: true, Idempotent: true}},
		{surface.Tool{Kind: surface.KindProcedure, Declaration: surface.Declaration{Effect: surface.EffectServerMutation}}, surface.ToolHints{}},
		{surface.Tool{Kind: surface.KindProcedure, Declaration: surface.Declaration{Effect: surface.EffectExternalSideEffect}}, surface.ToolHints{OpenWorld: true}},
		{surface.Tool{Kind: surface.KindProcedure, Declaration: surface.Declaration{Effect: surface.EffectDestructive}}, surface.ToolHints{Destructive: true}},
		// surface_act reaches any capability.
		{surface.Tool{Kind: surface.KindAction}, surface.ToolHints{Destructive: true, OpenWorld: true}},
	} {
		if got := c.tool.Hints(); got != c.want {
			t.Errorf("%s %s: %+v, want %+v", c.tool.Kind, c.tool.Effect, got, c.want)
		}
	}
	for schema, want := range map[string]bool{
		`{"type":"object","properties":{}}`: true, `{"type":"string"}`: false, `{"type":["object","null"]}`: false, `{}`: false, ``: false,
	} {
		if got := (surface.Tool{InputSchema: surface.JSONText(schema)}).ObjectInput(); got != want {
			t.Errorf("ObjectInput(%s) = %v", schema, got)
		}
	}
	meta := map[string]surface.ToolHints{}
	ts := newToolset(t, surfacetest.NewRegistry(t, nil), surface.ToolsetOptions{Mode: surface.ToolsetMeta})
	for _, tl := range ts.Tools() {
		meta[tl.Name] = tl.Hints()
	}
	if b, _ := json.Marshal(meta); string(b) != `{"surface_act":{"ReadOnly":false,"Destructive":true,"Idempotent":false,"OpenWorld":true},"surface_discover":{"ReadOnly":true,"Destructive":false,"Idempotent":true,"OpenWorld":false},"surface_read":{"ReadOnly":true,"Destructive":false,"Idempotent":true,"OpenWorld":false}}` {
		t.Fatal(string(b))
	}
}
