package surface_test

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"

	"github.com/agentsurface/agentsurface/surface"
	"github.com/agentsurface/agentsurface/surface/surfacetest"
)

// AS-SCHEMA-002: the Go form of wrapping a schema library's type with an
// explicit JSON Schema. A definition typed by a Go struct may carry an
// explicit schema saying more than the struct can (an enum, a minimum
// length): the agent sees that schema, calls are validated against it
// before anything runs, and the handler receives the decoded Go value.
func TestExplicitSchemaWrapsGoType_AS_SCHEMA_002(t *testing.T) {
	type selectIn struct {
		IDs  []string `json:"ids"`
		Mode string   `json:"mode"`
	}
	const schema = `{"additionalProperties":false,"properties":{"ids":{"items":{"type":"string"},"minItems":1,"type":"array"},"mode":{"enum":["replace","add","remove"],"type":"string"}},"required":["ids","mode"],"type":"object"}`
	var got []selectIn
	reg := surfacetest.NewRegistry(t, nil)
	surfacetest.MustRegister(t, reg, surface.Component{Type: "devices.table", Description: "Devices table",
		Actions: map[string]surface.Capability{"selectRows": surface.Action(surface.ActionDef[selectIn, surface.None]{
			Description: "Selects rows", Effect: surface.EffectLocalState, InputSchema: json.RawMessage(schema),
			Execute: func(_ context.Context, _ *surface.Call, in selectIn) (surface.None, error) {
				got = append(got, in)
				return surface.None{}, nil
			},
		})}})

	if s := reg.Snapshot(surface.SnapshotOptions{}).Components[0].Actions[0].InputSchema; string(s) != schema {
		t.Fatalf("the agent sees\n%s\nwant the explicit schema\n%s", s, schema)
	}
	call := func(input string) surface.Result {
		return reg.Invoke(bg, surface.Invocation{CapabilityID: "view:devices.table.selectRows", Input: json.RawMessage(input)}, surface.InvokeOptions{})
	}
	surfacetest.RequireOK(t, call(`{"ids":["d1"],"mode":"add"}`))
	// Valid for the Go type, refused by the explicit schema.
	for input, path := range map[string]string{`{"ids":["d1"],"mode":"toggle"}`: "mode", `{"ids":[],"mode":"add"}`: "ids"} {
		e := surfacetest.RequireCode(t, call(input), surface.CodeInvalidInput)
		if issues := fmt.Sprint(e.Details["issues"]); !containsPath(e.Details["issues"], path) {
			t.Fatalf("%s: issues %s, want one at %q", input, issues, path)
		}
	}
	if len(got) != 1 || got[0].Mode != "add" || len(got[0].IDs) != 1 || got[0].IDs[0] != "d1" {
		t.Fatalf("the handler received %+v, want only the valid call, decoded", got)
	}
}

// containsPath reports whether issues (the INVALID_INPUT detail) has one at
// path.
func containsPath(issues any, path string) bool {
	b, _ := json.Marshal(issues)
	var list []struct {
		Path string `json:"path"`
	}
	_ = json.Unmarshal(b, &list)
	for _, is := range list {
		if is.Path == path {
			return true
		}
	}
	return false
}
