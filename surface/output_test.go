package surface_test

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"testing"

	"github.com/agentsurface/agentsurface/surface"
	"github.com/agentsurface/agentsurface/surface/surfacetest"
)

// failingJSON is a value whose MarshalJSON fails.
type failingJSON struct{}

func (failingJSON) MarshalJSON() ([]byte, error) { return nil, errors.New("secret cause") }

// AS-SER-001 (semantics §4.3): a handler's output that is not JSON is a
// defect no developer can miss. Every environment logs it at Error with
// the capability and what is wrong; in development and test the result
// says so (EXECUTION_FAILED output-invalid, with the capability and the
// kind of defect, never a value or the cause's text), while production
// keeps the fixed message.
func TestNonJSONOutputIsLoud_AS_SER_001(t *testing.T) {
	nest := func(n int) any {
		var v any = "leaf"
		for range n {
			v = []any{v}
		}
		return v
	}
	outputs := map[string]struct {
		value any
		says  string
	}{
		"nan":     {nanValue(), "NaN or infinite number"},
		"chan":    {make(chan int), "Go chan int"},
		"marshal": {failingJSON{}, "MarshalJSON or MarshalText method of its surface_test.failingJSON failed"},
		"deep":    {nest(65), "nests deeper than 64 levels"},
	}
	for _, env := range []surface.Environment{surface.EnvProduction, surface.EnvDevelopment, surface.EnvTest} {
		var logs syncBuffer
		reg := surfacetest.NewRegistry(t, &surface.Options{Environment: env, Logger: slog.New(slog.NewTextHandler(&logs, nil))})
		actions := map[string]surface.Capability{}
		for name, o := range outputs {
			actions[name] = surface.Action(surface.ActionDef[surface.None, any]{Description: "Returns " + name, Effect: surface.EffectLocalState,
				Execute: func(context.Context, *surface.Call, surface.None) (any, error) { return o.value, nil }})
		}
		surfacetest.MustRegister(t, reg, surface.Component{Type: "out", Description: "Outputs", Actions: actions})
		for name, o := range outputs {
			capID := "view:out." + name
			e := surfacetest.RequireCode(t, reg.Invoke(bg, inv("", capID, `{}`), as("dev")), surface.CodeExecutionFailed)
			if e.Details["reason"] != "output-invalid" {
				t.Errorf("%s %s: %+v", env, name, e)
			}
			if env != surface.EnvProduction {
				if !strings.Contains(e.Message, capID+" is not JSON") || !strings.Contains(e.Message, o.says) || strings.Contains(e.Message, "secret") {
					t.Errorf("%s %s: the result does not say what is wrong: %q", env, name, e.Message)
				}
			} else if e.Message != "The capability returned output that does not match its declared output schema." {
				t.Errorf("%s %s: message %q", env, name, e.Message)
			}
			line := ""
			for l := range strings.Lines(logs.String()) {
				if strings.Contains(l, "capabilityId="+capID) && strings.Contains(l, "level=ERROR") {
					line = l
				}
			}
			if !strings.Contains(line, "output is not JSON") || !strings.Contains(line, o.says) {
				t.Errorf("%s %s: log line %q", env, name, line)
			}
		}
	}
}
