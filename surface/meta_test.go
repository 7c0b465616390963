package surface_test

import (
	"log/slog"
	"strings"
	"testing"

	"github.com/agentsurface/agentsurface/surface"
	"github.com/agentsurface/agentsurface/surface/surfacetest"
)

// Meta-mode messages tell an envelope mistake from a capability's schema
// failure and point at "input" (semantics §16.3). AS-META-007, AS-META-008.
func TestMetaMessages_AS_META_007_008(t *testing.T) {
	var logs syncBuffer
	reg := surfacetest.NewRegistry(t, &surface.Options{Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	p := newProbe()
	surfacetest.MustRegister(t, reg, p.component("main"))
	ts := newToolset(t, reg, surface.ToolsetOptions{Mode: surface.ToolsetMeta})
	issue := func(res surface.Result) (*surface.Error, surface.Issue) {
		t.Helper()
		e := surfacetest.RequireCode(t, res, surface.CodeInvalidInput)
		issues := e.Details["issues"].([]surface.Issue)
		return e, issues[0]
	}

	// An argument beside "input": an envelope mistake, naming input.
	e, is := issue(metaCall(ts, surface.MetaAct, `{"capabilityId":"view:devices.table.selectRows","ids":["d1"]}`))
	if is.Path != "ids" || !strings.Contains(is.Message, "surface_act arguments") || !strings.Contains(is.Message, `inside "input"`) ||
		!strings.Contains(e.Message, "surface_act arguments are malformed") || !strings.Contains(e.Message, `"input"`) {
		t.Fatalf("beside input: %q / %+v", e.Message, is)
	}
	// A missing capabilityId: at its own path, naming input.
	e, is = issue(metaCall(ts, surface.MetaAct, `{"input":{"ids":["d1"]}}`))
	if is.Path != "capabilityId" || !strings.Contains(is.Message, "missing required") || !strings.Contains(is.Message, `"input"`) ||
		!strings.Contains(e.Message, "malformed") {
		t.Fatalf("missing capabilityId: %q / %+v", e.Message, is)
	}
	// The capability's own schema: said so, paths inside input.
	e, is = issue(metaCall(ts, surface.MetaAct, `{"capabilityId":"view:devices.table.selectRows","input":{"ids":"d1"}}`))
	if is.Path != "ids" || !strings.Contains(e.Message, "capability's inputSchema") || strings.Contains(e.Message, "malformed") {
		t.Fatalf("capability schema: %q / %+v", e.Message, is)
	}
	if p.calls.Load() != 0 {
		t.Fatal("invalid input reached the handler")
	}
	// A JSON-encoded string input is repaired, and the warning says what
	// it was.
	surfacetest.RequireOK(t, metaCall(ts, surface.MetaAct, `{"capabilityId":"view:devices.table.selectRows","input":"{\"ids\":[\"d1\"]}"}`))
	if out := logs.String(); !strings.Contains(out, "input was a JSON-encoded string") || !strings.Contains(out, "capabilityId=view:devices.table.selectRows") {
		t.Fatalf("warning: %s", out)
	}
}
