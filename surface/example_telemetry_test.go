package surface_test

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"

	"github.com/agentsurface/agentsurface/surface"
)

// settledCounter counts settlements by code ("ok" for success).
type settledCounter struct {
	mu     sync.Mutex
	counts map[string]int
}

func (c *settledCounter) Phase(surface.PhaseEvent) {}

func (c *settledCounter) Settle(s surface.Settlement) {
	code := "ok"
	if s.Error != nil {
		code = string(s.Error.Code)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.counts[code]++
}

// A Telemetry that counts outcomes; package otelsurface implements one
// with OpenTelemetry spans and metrics.
func ExampleTelemetry() {
	counter := &settledCounter{counts: map[string]int{}}
	reg := surface.New(&surface.Options{Telemetry: &surface.Telemetry{
		Invocation: func(ctx context.Context, info surface.InvocationInfo) (context.Context, surface.InvocationRecorder) {
			return ctx, counter // the same recorder for every call: it keeps no per-call state
		},
	}})
	defer reg.Close()
	type selection struct {
		IDs []string `json:"ids"`
	}
	h, err := reg.Register(surface.Component{
		Type: "devices.table", Description: "Devices table",
		Actions: map[string]surface.Capability{
			"selectRows": surface.Action(surface.ActionDef[selection, surface.None]{
				Description: "Replace the selection", Effect: surface.EffectLocalState,
				Execute: func(context.Context, *surface.Call, selection) (surface.None, error) { return surface.None{}, nil },
			}),
		},
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	ctx := context.Background()
	for _, input := range []string{`{"ids":["d1"]}`, `{"ids":["d2"]}`, `{"ids":"d3"}`} {
		reg.Invoke(ctx, surface.Invocation{CapabilityID: "view:devices.table.selectRows", RegistrationID: h.ID(), Input: json.RawMessage(input)}, surface.InvokeOptions{})
	}
	reg.Invoke(ctx, surface.Invocation{CapabilityID: "view:devices.table.deleteAll"}, surface.InvokeOptions{})
	fmt.Println(counter.counts)
	// Output:
	// map[CAPABILITY_NOT_FOUND:1 INVALID_INPUT:1 ok:2]
}
