package mcpsurface_test

import (
	"strings"
	"sync/atomic"
	"testing"

	"github.com/agentsurface/agentsurface/mcpsurface"
	"github.com/agentsurface/agentsurface/surface"
	"github.com/agentsurface/agentsurface/surface/surfacetest"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// AS-ADAPTER-005: Options.Scope is a floor on discovery. In direct mode a
// capability outside it is no tool and cannot be called; in meta mode
// surface_discover lists only the scope, while surface_read and
// surface_act reach any capability by id (the documented, spec-defined
// limit of Scope: it is not an access boundary).
func TestScopeLimitsDiscoveryOnly_AS_ADAPTER_005(t *testing.T) {
	reg, a, _ := newApp(t)
	surfacetest.MustRegister(t, reg, a.domainPanel())
	scope := []string{"devices.panel"}

	direct := connect(t, newServer(t, reg, &mcpsurface.Options{Scope: scope}), v2025, nil)
	if got := names(listTools(t, direct)); got != "domain_devices__disable,domain_devices__list,domain_devices__notify,view_devices__panel__count" {
		t.Fatalf("direct mode lists %s", got)
	}
	if _, err := direct.CallTool(bg, &mcp.CallToolParams{Name: "view_devices__table__selectRows", Arguments: map[string]any{"ids": []string{"d1"}}}); err == nil {
		t.Fatal("direct mode called a tool outside its scope")
	}

	meta := connect(t, newServer(t, reg, &mcpsurface.Options{Mode: surface.ToolsetMeta, Scope: scope}), v2025, nil)
	env := callTool(t, meta, "surface_discover", nil, nil)
	requireOK(t, env)
	if out := string(env.Output); !strings.Contains(out, "devices.panel") || strings.Contains(out, "devices.table") {
		t.Fatalf("discover outside the scope: %s", out)
	}
	env = callTool(t, meta, "surface_discover", map[string]any{"scope": []string{"devices.table"}}, nil)
	if out := string(env.Output); strings.Contains(out, "devices.table.") {
		t.Fatalf("a requested scope widened the floor: %s", out)
	}
	requireOK(t, callTool(t, meta, "surface_read", map[string]any{"capabilityId": "view:devices.table.readState"}, nil))
	requireOK(t, callTool(t, meta, "surface_act", map[string]any{"capabilityId": "view:devices.table.selectRows", "input": map[string]any{"ids": []string{"d2"}}}, nil))
	a.mu.Lock()
	defer a.mu.Unlock()
	if len(a.selected) != 1 || a.selected[0] != "d2" {
		t.Fatalf("surface_act outside the scope did not run: %v", a.selected)
	}
}

// Two-phase confirmation is the default: without Options.Elicit, a client
// that can answer elicitations is never asked, in process and over HTTP;
// the call returns CONFIRMATION_REQUIRED for the user to approve in the
// application.
func TestTwoPhaseIsTheDefault(t *testing.T) {
	var asked atomic.Int64
	answers := answering("accept", true, &asked, nil)
	wipe := func(cs *mcp.ClientSession, id string) {
		t.Helper()
		requireCode(t, callTool(t, cs, "view_devices__table__wipe", map[string]any{"ids": []string{id}}, nil), surface.CodeConfirmationRequired)
	}
	for _, opts := range []*mcpsurface.Options{nil, {}} {
		for _, version := range versions {
			reg, a, _ := newApp(t)
			wipe(connect(t, newServer(t, reg, opts), version, answers), "d1")
			if a.wipes.Load() != 0 {
				t.Fatal("executed without approval")
			}
		}
	}
	for _, mode := range httpModes {
		users := twoUsers(t)
		var opts *mcpsurface.HTTPOptions
		if mode.stateless {
			opts = &mcpsurface.HTTPOptions{Stateless: true}
		}
		f := newHTTP(t, opts, users)
		wipe(f.mustClient(t, "tok-alice", mode.version, answers), "d1")
		if users["tok-alice"].app.wipes.Load() != 0 {
			t.Fatalf("%s: executed without approval", mode.name)
		}
	}
	if n := asked.Load(); n != 0 {
		t.Fatalf("asked %d times by default", n)
	}
}
