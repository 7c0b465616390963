package surface_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/agentsurface/agentsurface/surface"
)

// zetaFirst is a struct whose fields are not in alphabetical order.
type zetaFirst struct {
	Zeta  string `json:"zeta" jsonschema:"Comes first"`
	Alpha int    `json:"alpha"`
}

// The schemas an agent reads keep the author's order (semantics §10.8): a
// raw schema as written, an inferred one in struct field order, and a
// procedure's reduced schema in its input's order, in snapshots, direct
// tools and surface_discover alike. The golden compares bytes.
// AS-SNAP-003, AS-CACHE-002, AS-BIND-001.
func TestSchemasAsAuthoredGolden_AS_SNAP_003(t *testing.T) {
	reg := surface.New(&surface.Options{Now: goldenClock})
	defer reg.Close()
	x := surface.NewFuncExecutor()
	surface.AddFunc(x, "zoo.file", func(context.Context, *surface.ProcedureCall, zetaFirst) (surface.None, error) {
		return surface.None{}, nil
	})
	reg.SetProcedureExecutor(x)
	const raw = `{"type": "object", "properties": {"zeta": {"type": "string", "description": "Comes first"}, "alpha": {"type": "integer", "minimum": 1.0}}, "required": ["zeta"], "additionalProperties": false}`
	if _, err := reg.Register(surface.Component{Type: "zoo.form", Description: "A form",
		Observations: map[string]surface.Capability{"read": surface.Observation(surface.ObservationDef[zetaFirst]{Description: "Reads the form",
			Read: func(context.Context, *surface.Call) (zetaFirst, error) { return zetaFirst{}, nil }})},
		Actions: map[string]surface.Capability{"fill": surface.Action(surface.ActionDef[zetaFirst, surface.None]{Description: "Fills the form",
			Effect: surface.EffectLocalState, InputSchema: json.RawMessage(raw),
			Execute: func(context.Context, *surface.Call, zetaFirst) (surface.None, error) { return surface.None{}, nil }})},
		Procedures: []surface.Capability{surface.Procedure(surface.ProcedureDef[zetaFirst, surface.None]{ID: "domain:zoo.file",
			Description: "Files the form", Effect: surface.EffectServerMutation, Bound: []string{"alpha"}, Overridable: []string{"alpha"},
			Bind: func(context.Context) (map[string]any, error) { return map[string]any{"alpha": 1}, nil }})},
	}); err != nil {
		t.Fatal(err)
	}
	ts, err := surface.NewToolset(reg, surface.ToolsetOptions{Topology: surface.TopologyRemote})
	if err != nil {
		t.Fatal(err)
	}
	defer ts.Close()
	meta, err := surface.NewToolset(reg, surface.ToolsetOptions{Topology: surface.TopologyRemote, Mode: surface.ToolsetMeta})
	if err != nil {
		t.Fatal(err)
	}
	defer meta.Close()
	discover := meta.Call(bg, surface.MetaDiscover, nil, surface.CallOptions{})
	if discover.Error != nil {
		t.Fatal(discover.Error)
	}
	snap := reg.Snapshot(surface.SnapshotOptions{})
	for what, text := range map[string]string{
		"action input": string(snap.Components[0].Actions[0].InputSchema), "observation output": string(snap.Components[0].Observations[0].OutputSchema),
		"procedure input": string(snap.Procedures[0].InputSchema), "surface_discover": string(discover.Output),
	} {
		if z, a := strings.Index(text, `"zeta"`), strings.Index(text, `"alpha"`); z < 0 || a < z {
			t.Errorf("%s lists alpha before zeta: %s", what, text)
		}
	}
	if got := string(snap.Components[0].Actions[0].InputSchema); got != `{"type":"object","properties":{"zeta":{"type":"string","description":"Comes first"},"alpha":{"type":"integer","minimum":1.0}},"required":["zeta"],"additionalProperties":false}` {
		t.Errorf("the raw schema is not kept as written: %s", got)
	}
	type tool struct {
		Name        string           `json:"name"`
		InputSchema surface.JSONText `json:"inputSchema"`
	}
	var tools []tool
	for _, t := range ts.Tools() {
		tools = append(tools, tool{t.Name, t.InputSchema})
	}
	requireGolden(t, "schemas-as-authored.json", struct {
		Snapshot surface.Snapshot `json:"snapshot"`
		Tools    []tool           `json:"tools"`
		Discover surface.JSONText `json:"surfaceDiscover"`
	}{snap, tools, discover.Output})
}
