package surface_test

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/agentsurface/agentsurface/surface"
)

func ExampleRegistry_Register() {
	type Row struct {
		ID     string `json:"id"`
		Status string `json:"status"`
	}
	type Selection struct {
		IDs []string `json:"ids" jsonschema:"Device ids to select"`
	}
	rows := []Row{{"d1", "online"}, {"d2", "offline"}}
	var selected []string

	reg := surface.New(nil)
	defer reg.Close()
	h, err := reg.Register(surface.Component{
		Type:        "devices.table",
		InstanceID:  "main",
		Description: "Devices table",
		Observations: map[string]surface.Capability{
			"readRows": surface.Observation(surface.ObservationDef[[]Row]{
				Description: "Visible rows",
				Read:        func(context.Context, *surface.Call) ([]Row, error) { return rows, nil },
			}),
		},
		Actions: map[string]surface.Capability{
			"selectRows": surface.Action(surface.ActionDef[Selection, surface.None]{
				Description: "Replace the selection",
				Effect:      surface.EffectLocalState,
				Execute: func(_ context.Context, _ *surface.Call, in Selection) (surface.None, error) {
					selected = in.IDs
					return surface.None{}, nil
				},
			}),
		},
	})
	if err != nil {
		fmt.Println("definition error:", err)
		return
	}
	defer h.Unregister()

	snap := reg.Snapshot(surface.SnapshotOptions{})
	fmt.Println("version", snap.SurfaceVersion)
	for _, c := range snap.Components {
		for _, o := range c.Observations {
			fmt.Println(o.CapabilityID, o.OutputSchema)
		}
		for _, a := range c.Actions {
			fmt.Println(a.CapabilityID, a.Effect, a.InputSchema)
		}
	}
	_ = selected
	// Output:
	// version 1
	// view:devices.table.readRows {"type":["array","null"],"items":{"type":"object","properties":{"id":{"type":"string"},"status":{"type":"string"}},"required":["id","status"],"additionalProperties":false}}
	// view:devices.table.selectRows local-state {"type":"object","properties":{"ids":{"type":"array","items":{"type":"string"},"description":"Device ids to select"}},"required":["ids"],"additionalProperties":false}
}

func ExampleRegistry_Invoke() {
	type Selection struct {
		IDs []string `json:"ids"`
	}
	reg := surface.New(nil)
	defer reg.Close()
	_, err := reg.Register(surface.Component{
		Type: "devices.table", Description: "Devices table",
		Actions: map[string]surface.Capability{
			"selectRows": surface.Action(surface.ActionDef[Selection, Selection]{
				Description: "Replace the selection",
				Effect:      surface.EffectLocalState,
				Execute: func(_ context.Context, _ *surface.Call, in Selection) (Selection, error) {
					return in, nil
				},
			}),
		},
	})
	if err != nil {
		panic(err)
	}
	ok := reg.Invoke(context.Background(), surface.Invocation{
		InvocationID: "call-1",
		CapabilityID: "view:devices.table.selectRows",
		Input:        json.RawMessage(`{"ids":["d1"]}`),
	}, surface.InvokeOptions{Consumer: surface.Consumer{ID: "agent-1", Kind: surface.ConsumerEmbedded}})
	fmt.Println(ok.Status, ok.Output)

	bad := reg.Invoke(context.Background(), surface.Invocation{
		CapabilityID: "view:devices.table.selectRows",
		Input:        json.RawMessage(`{"ids":"d1"}`),
	}, surface.InvokeOptions{})
	fmt.Println(bad.Error.Code, bad.Error.Retry, bad.Error.Details["issues"])
	// Output:
	// ok {"ids":["d1"]}
	// INVALID_INPUT with-changes [{ids expected array}]
}

func ExampleNewToolset() {
	reg := surface.New(nil)
	defer reg.Close()
	_, err := reg.Register(surface.Component{
		Type: "devices.table", InstanceID: "main", Description: "Devices table",
		Observations: map[string]surface.Capability{
			"readState": surface.Observation(surface.ObservationDef[[]string]{
				Description: "Visible device ids",
				Read:        func(context.Context, *surface.Call) ([]string, error) { return []string{"d1", "d2"}, nil },
			}),
		},
	})
	if err != nil {
		panic(err)
	}
	ts, err := surface.NewToolset(reg, surface.ToolsetOptions{Topology: surface.TopologyEmbedded})
	if err != nil {
		panic(err)
	}
	defer ts.Close()
	for _, t := range ts.Tools() {
		fmt.Println(t.Name, "—", t.Description)
	}
	res := ts.Call(context.Background(), "view_devices__table__readState", nil, surface.CallOptions{ToolCallID: "toolu_01"})
	fmt.Println(res.InvocationID, res.Output)
	// Output:
	// view_devices__table__readState — [view · read] Visible device ids
	// toolu_01 ["d1","d2"]
}

func ExampleProcedure() {
	type DisableIn struct {
		IDs    []string `json:"ids"`
		Reason string   `json:"reason"`
	}
	type DisableOut struct {
		Disabled int `json:"disabled"`
	}
	// The domain side: an in-process executor. It must check authority
	// itself; here it trusts everyone for brevity.
	domain := surface.NewFuncExecutor()
	surface.AddFunc(domain, "devices.disable", func(_ context.Context, _ *surface.ProcedureCall, in DisableIn) (DisableOut, error) {
		return DisableOut{Disabled: len(in.IDs)}, nil
	})
	reg := surface.New(nil)
	defer reg.Close()
	reg.SetProcedureExecutor(domain)
	selection := []string{"d1", "d2"} // live UI state
	_, err := reg.Register(surface.Component{
		Type: "devices.table", Description: "Devices table",
		Procedures: []surface.Capability{
			surface.Procedure(surface.ProcedureDef[DisableIn, DisableOut]{
				ID: "domain:devices.disable", Description: "Disable devices", Effect: surface.EffectDestructive,
				Bound: []string{"ids"},
				Bind:  func(context.Context) (map[string]any, error) { return map[string]any{"ids": selection}, nil },
			}),
		},
	})
	if err != nil {
		panic(err)
	}
	ctx := context.Background()
	call := surface.Invocation{InvocationID: "c1", CapabilityID: "domain:devices.disable", Input: json.RawMessage(`{"reason":"maintenance"}`)}
	first := reg.Invoke(ctx, call, surface.InvokeOptions{})
	fmt.Println(first.Error.Code, reg.Confirmations().Pending()[0].Input)

	id := first.Error.Details["confirmationId"].(string)
	reg.Confirmations().Resolve(id, surface.Resolution{Approved: true}) // the user approved in the app
	call.ConfirmationID = id
	fmt.Println(reg.Invoke(ctx, call, surface.InvokeOptions{}).Output)
	// Output:
	// CONFIRMATION_REQUIRED {"ids":["d1","d2"],"reason":"maintenance"}
	// {"disabled":2}
}

// A developer asks why an agent does not see a capability. Explain lists
// it with the policy that hid it; the agent's own snapshot has no trace of
// it.
func ExampleRegistry_Explain() {
	readOnly := surface.Policy{Name: "read-only-agents", Discover: func(pc *surface.PolicyContext) surface.Decision {
		if pc.Consumer.Kind == surface.ConsumerMCPBridge && pc.Kind != surface.KindObservation {
			return surface.Hide()
		}
		return surface.Expose()
	}}
	reg := surface.New(&surface.Options{Policies: []surface.Policy{readOnly}})
	defer reg.Close()
	_, err := reg.Register(surface.Component{
		Type: "devices.table", Description: "Devices table",
		Observations: map[string]surface.Capability{"readRows": surface.Observation(surface.ObservationDef[[]string]{
			Description: "Visible rows",
			Read:        func(context.Context, *surface.Call) ([]string, error) { return []string{"d1"}, nil },
		})},
		Actions: map[string]surface.Capability{"clearSelection": surface.Action(surface.ActionDef[surface.None, surface.None]{
			Description: "Clear the selection", Effect: surface.EffectLocalState,
			Execute: func(context.Context, *surface.Call, surface.None) (surface.None, error) { return surface.None{}, nil },
		})},
	})
	if err != nil {
		fmt.Println(err)
		return
	}

	agent := surface.SnapshotOptions{Consumer: surface.Consumer{ID: "claude", Kind: surface.ConsumerMCPBridge}}
	fmt.Println("actions the agent sees:", len(reg.Snapshot(agent).Components[0].Actions))
	for _, c := range reg.Explain(agent).Capabilities {
		fmt.Print(c.CapabilityID, ": ", c.Outcome)
		for _, p := range c.Policies {
			fmt.Printf(" (%s policy %s votes %s)", p.Layer, p.Name, p.Vote)
		}
		fmt.Println()
	}
	// Output:
	// actions the agent sees: 0
	// view:devices.table.readRows: exposed (registry policy read-only-agents votes expose)
	// view:devices.table.clearSelection: hidden (registry policy read-only-agents votes hide)
}
