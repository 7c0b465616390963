package surface_test

import (
	"context"
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
				Effect:      surface.LocalState,
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
		for _, o := range c.Observations() {
			fmt.Println(o.CapabilityID, o.OutputSchema)
		}
		for _, a := range c.Actions() {
			fmt.Println(a.CapabilityID, a.Effect, a.InputSchema)
		}
	}
	_ = selected
	// Output:
	// version 1
	// view:devices.table.readRows {"items":{"additionalProperties":false,"properties":{"id":{"type":"string"},"status":{"type":"string"}},"required":["id","status"],"type":"object"},"type":["array","null"]}
	// view:devices.table.selectRows local-state {"additionalProperties":false,"properties":{"ids":{"description":"Device ids to select","items":{"type":"string"},"type":"array"}},"required":["ids"],"type":"object"}
}
