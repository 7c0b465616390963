package mcpsurface_test

import (
	"context"
	"slices"
	"testing"

	"github.com/agentsurface/agentsurface/mcpsurface"
	"github.com/agentsurface/agentsurface/surface"
	"github.com/agentsurface/agentsurface/surface/surfacetest"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// After an approval, a retry whose bound input no longer matches (the
// selection changed) gets CONFIRMATION_INVALID mismatch and does not
// execute; once the selection is restored, the same retry is judged on
// its current effective input, not answered from the mismatch: the
// approval still stands and it executes, once. AS-CONFIRM-001,
// AS-CONFIRM-003, AS-IDENT-006.
func TestApprovedRetryJudgedOnCurrentInput_AS_CONFIRM_001(t *testing.T) {
	for _, version := range versions {
		t.Run(version, func(t *testing.T) {
			reg, a, _ := newApp(t)
			surfacetest.MustRegister(t, reg, surface.Component{Type: "devices.bulk", Description: "Bulk operations",
				Observations: map[string]surface.Capability{"count": surfacetest.Value("Selected count", 1)},
				Procedures: []surface.Capability{surface.Procedure(surface.ProcedureDef[disableIn, disableOut]{
					ID: "domain:devices.disable", Description: "Disable the selected devices", Effect: surface.EffectDestructive,
					Confirmation: surface.ConfirmRequired, Bound: []string{"ids"},
					Bind: func(context.Context) (map[string]any, error) {
						a.mu.Lock()
						defer a.mu.Unlock()
						return map[string]any{"ids": slices.Clone(a.selected)}, nil
					},
				})}})
			selectRows := func(ids ...string) {
				a.mu.Lock()
				a.selected = ids
				a.mu.Unlock()
			}
			srv := newServer(t, reg, nil)
			cs := connect(t, srv, version, nil)
			const tool = "domain_devices__disable"
			selectRows("d1")
			first := callTool(t, cs, tool, map[string]any{}, nil)
			cid, _ := requireCode(t, first, surface.CodeConfirmationRequired).Details["confirmationId"].(string)
			if !reg.Confirmations().Resolve(cid, surface.Resolution{Approved: true}) {
				t.Fatal("resolve")
			}
			evidence := mcp.Meta{mcpsurface.MetaConfirmationID: cid}

			selectRows("d2") // the user changed the selection after approving d1
			e := requireCode(t, callTool(t, cs, tool, map[string]any{}, evidence), surface.CodeConfirmationInvalid)
			if e.Details["reason"] != string(surface.ReasonMismatch) || a.disables.Load() != 0 {
				t.Fatalf("%+v, %d executed", e, a.disables.Load())
			}
			selectRows("d1") // back to what was approved: the approval stands
			ok := callTool(t, cs, tool, map[string]any{}, evidence)
			requireOK(t, ok)
			if a.disables.Load() != 1 {
				t.Fatalf("executed %d times", a.disables.Load())
			}
			dup := callTool(t, cs, tool, map[string]any{}, evidence) // a duplicate retry replays
			requireOK(t, dup)
			if n := a.disables.Load(); n != 1 || dup.InvocationID != ok.InvocationID {
				t.Fatalf("executed %d times; invocation ids %s, %s", n, ok.InvocationID, dup.InvocationID)
			}
		})
	}
}
