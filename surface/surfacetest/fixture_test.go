package surfacetest_test

import (
	"context"
	"slices"
	"sync"

	"github.com/agentsurface/agentsurface/surface"
)

// devices is the live state of a small devices console: a table with a
// selection, a detail drawer that opens once something is selected, and a
// domain service that disables devices.
type devices struct {
	mu       sync.Mutex
	selected []string
	disabled []string
}

type tableState struct {
	Rows     []string `json:"rows" jsonschema:"Visible device ids"`
	Selected []string `json:"selected" jsonschema:"Selected device ids"`
}

type selectRows struct {
	IDs []string `json:"ids" jsonschema:"Device ids to select"`
}

type disableIn struct {
	IDs    []string `json:"ids" jsonschema:"Device ids to disable"`
	Reason string   `json:"reason" jsonschema:"Why"`
}

type disableOut struct {
	Disabled int `json:"disabled"`
}

func (d *devices) selection() []string {
	d.mu.Lock()
	defer d.mu.Unlock()
	return append([]string{}, d.selected...) // [] rather than null when empty
}

// executor is the domain side of devices.disable.
func (d *devices) executor() *surface.FuncExecutor {
	x := surface.NewFuncExecutor()
	surface.AddFunc(x, "devices.disable", func(_ context.Context, _ *surface.ProcedureCall, in disableIn) (disableOut, error) {
		d.mu.Lock()
		defer d.mu.Unlock()
		d.disabled = append(d.disabled, in.IDs...)
		return disableOut{Disabled: len(in.IDs)}, nil
	})
	return x
}

// page is the devices page: no capabilities of its own.
func (d *devices) page() surface.Component {
	return surface.Component{Type: "devices.page", Description: "The devices page"}
}

// table is the devices table of the given instance, with a reference to
// devices.disable bound to its selection.
func (d *devices) table(instance string) surface.Component {
	return surface.Component{
		Type: "devices.table", InstanceID: instance, Description: "Devices table",
		Parent: &surface.Parent{Type: "devices.page", InstanceID: "default"},
		Meta:   map[string]any{"pageSize": 25},
		Observations: map[string]surface.Capability{
			"readState": surface.Observation(surface.ObservationDef[tableState]{
				Description: "Visible rows and selection",
				Read: func(context.Context, *surface.Call) (tableState, error) {
					return tableState{Rows: []string{"d1", "d2", "d3"}, Selected: d.selection()}, nil
				},
			}),
		},
		Actions: map[string]surface.Capability{
			"selectRows": surface.Action(surface.ActionDef[selectRows, surface.None]{
				Description: "Replace the selection", Effect: surface.EffectLocalState, Idempotent: true,
				Execute: func(_ context.Context, _ *surface.Call, in selectRows) (surface.None, error) {
					d.mu.Lock()
					d.selected = slices.Clone(in.IDs)
					d.mu.Unlock()
					return surface.None{}, nil
				},
			}),
			"open": surface.Action(surface.ActionDef[surface.None, surface.None]{
				Description: "Open the detail drawer of the selected device", Effect: surface.EffectNavigation,
				When:              func() bool { return len(d.selection()) == 1 },
				UnavailableReason: "Select exactly one device",
				Execute: func(context.Context, *surface.Call, surface.None) (surface.None, error) {
					return surface.None{}, nil
				},
			}),
		},
		Procedures: []surface.Capability{surface.Procedure(surface.ProcedureDef[disableIn, disableOut]{
			ID: "domain:devices.disable", Description: "Disable devices", Effect: surface.EffectDestructive,
			Bound: []string{"ids"},
			Bind: func(context.Context) (map[string]any, error) {
				return map[string]any{"ids": d.selection()}, nil
			},
		})},
	}
}
