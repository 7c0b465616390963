package surface_test

import (
	"bytes"
	"context"
	"sync"
	"testing"

	"github.com/agentsurface/agentsurface/surface"
	"github.com/agentsurface/agentsurface/surface/surfacetest"
)

type tableState struct {
	Rows     []string `json:"rows" jsonschema:"Visible device ids"`
	Selected []string `json:"selected" jsonschema:"Selected device ids"`
}

type selectRows struct {
	IDs []string `json:"ids" jsonschema:"Device ids to select"`
}

// table returns a devices table component with one observation and one
// action; readCalled, when non-nil, is incremented by Read.
func table(instance string, readCalled *int) surface.Component {
	return surface.Component{
		Type:        "devices.table",
		InstanceID:  instance,
		Description: "Devices table",
		Observations: map[string]surface.Capability{
			"readState": surface.Observation(surface.ObservationDef[tableState]{
				Description: "Visible rows and selection",
				Read: func(context.Context, *surface.Call) (tableState, error) {
					if readCalled != nil {
						*readCalled++
					}
					return tableState{}, nil
				},
			}),
		},
		Actions: map[string]surface.Capability{
			"selectRows": surface.Action(surface.ActionDef[selectRows, surface.None]{
				Description: "Replace the selection",
				Effect:      surface.EffectLocalState,
				Execute: func(context.Context, *surface.Call, selectRows) (surface.None, error) {
					return surface.None{}, nil
				},
			}),
		},
	}
}

// simple returns a component of the given type with one observation.
func simple(typ, instance string) surface.Component {
	return surface.Component{
		Type: typ, InstanceID: instance, Description: "Component " + typ,
		Observations: map[string]surface.Capability{"read": surfacetest.Value("Reads a number", 1)},
	}
}

func mustVersion(t *testing.T, reg *surface.Registry, want string) {
	t.Helper()
	if got := reg.Version(); got != want {
		t.Fatalf("version = %s, want %s", got, want)
	}
}

func nanValue() float64 {
	zero := 0.0
	return zero / zero
}

// syncBuffer is a bytes.Buffer safe for concurrent writes.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}
