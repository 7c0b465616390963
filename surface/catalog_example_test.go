package surface_test

import (
	"context"
	"fmt"

	"github.com/agentsurface/agentsurface/surface"
)

// A host pins the catalog it showed the model and calls through it: when
// the component is replaced meanwhile, the model's call is refused as
// stale instead of reaching the new registration, and the model lists
// the tools again.
func ExampleCatalog() {
	reg := surface.New(&surface.Options{OnDuplicate: surface.DuplicateReplace})
	defer reg.Close()
	panel := func(device string) surface.Component {
		return surface.Component{
			Type: "devices.detail", Description: "Device detail",
			Observations: map[string]surface.Capability{
				"readState": surface.Observation(surface.ObservationDef[string]{
					Description: "The device shown",
					Read:        func(context.Context, *surface.Call) (string, error) { return device, nil },
				}),
			},
		}
	}
	if _, err := reg.Register(panel("d1")); err != nil {
		panic(err)
	}
	ts, err := surface.NewToolset(reg, surface.ToolsetOptions{Topology: surface.TopologyRemote})
	if err != nil {
		panic(err)
	}
	defer ts.Close()
	ctx := context.Background()

	shown := ts.Catalog()                                // what the model is given
	if _, err := reg.Register(panel("d2")); err != nil { // the user opens another device
		panic(err)
	}
	stale := shown.Call(ctx, "view_devices__detail__readState", nil, surface.CallOptions{ToolCallID: "toolu_01"})
	fmt.Println(stale.Error.Code, stale.Error.Details["reason"], stale.Error.Retry)

	fresh := ts.Catalog() // the model lists the tools again
	res := fresh.Call(ctx, "view_devices__detail__readState", nil, surface.CallOptions{ToolCallID: "toolu_02"})
	fmt.Println(res.Status, res.Output)
	// Output:
	// STALE_CAPABILITY registration-replaced after-refresh
	// ok "d2"
}
