package mcpsurface_test

import (
	"context"
	"encoding/json"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/agentsurface/agentsurface/mcpsurface"
	"github.com/agentsurface/agentsurface/surface"
	"github.com/agentsurface/agentsurface/surface/surfacetest"
	"github.com/google/jsonschema-go/jsonschema"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"pgregory.net/rapid"
)

// node is a recursive output type; nodeSchema, its schema, refers to
// itself through $defs.
type node struct {
	Name     string  `json:"name"`
	Children []*node `json:"children,omitempty"`
}

var nodeSchema = json.RawMessage(`{"$schema":"https://json-schema.org/draft/2020-12/schema","$defs":{"node":{"type":"object",` +
	`"properties":{"name":{"type":"string"},"children":{"type":"array","items":{"$ref":"#/$defs/node"}}},` +
	`"required":["name"],"additionalProperties":false}},"$ref":"#/$defs/node"}`)

// treeComponent is "tree": an observation with a recursive output, an
// action with free-form input and output, and one that fails.
func treeComponent() surface.Component {
	return surface.Component{
		Type: "tree", Description: "A tree",
		Observations: map[string]surface.Capability{
			"read": surface.Observation(surface.ObservationDef[node]{
				Description: "The tree", OutputSchema: nodeSchema,
				Read: func(context.Context, *surface.Call) (node, error) {
					return node{Name: "root", Children: []*node{{Name: "leaf"}}}, nil
				},
			}),
		},
		Actions: map[string]surface.Capability{
			"echo": surface.Action(surface.ActionDef[any, any]{Description: "Returns its input", Effect: surface.EffectLocalState,
				InputSchema: json.RawMessage(`{"type":"object"}`),
				Execute:     func(_ context.Context, _ *surface.Call, in any) (any, error) { return in, nil }}),
			"fail": surface.Action(surface.ActionDef[surface.None, labelIn]{Description: "Fails", Effect: surface.EffectLocalState,
				Execute: func(context.Context, *surface.Call, surface.None) (labelIn, error) {
					return labelIn{}, surface.NewError(surface.CodePreconditionFailed, "Not now.", map[string]any{"why": "test"})
				}}),
		},
	}
}

// schemas resolves every tool's outputSchema with a JSON Schema
// validator (jsonschema-go, draft 2020-12).
func schemas(t testing.TB, tools map[string]*mcp.Tool) map[string]*jsonschema.Resolved {
	t.Helper()
	out := map[string]*jsonschema.Resolved{}
	for name, tool := range tools {
		if tool.OutputSchema == nil {
			t.Fatalf("%s declares no outputSchema", name)
		}
		b, _ := json.Marshal(tool.OutputSchema)
		var s jsonschema.Schema
		if err := json.Unmarshal(b, &s); err != nil {
			t.Fatalf("%s: outputSchema %s: %v", name, b, err)
		}
		if s.Type != "object" {
			t.Fatalf("%s: outputSchema type %q, MCP requires object", name, s.Type)
		}
		rs, err := s.Resolve(nil)
		if err != nil {
			t.Fatalf("%s: outputSchema does not resolve: %v\n%s", name, err, b)
		}
		out[name] = rs
	}
	return out
}

// conforms checks that a call's structuredContent validates against its
// tool's outputSchema.
func conforms(t testing.TB, rs map[string]*jsonschema.Resolved, name string, res *mcp.CallToolResult) {
	t.Helper()
	b, _ := json.Marshal(res.StructuredContent)
	var v any
	if err := json.Unmarshal(b, &v); err != nil {
		t.Fatal(err)
	}
	if err := rs[name].Validate(v); err != nil {
		t.Fatalf("%s: structuredContent does not validate against its outputSchema: %v\n%s", name, err, b)
	}
}

// Each tool declares an outputSchema for the envelope it returns, with
// the capability's own output schema under "output", and every
// structuredContent validates against it: ok and error results,
// observations, actions with and without output, procedures, a recursive
// output ($defs), and the meta tools. AS-ADAPTER-002.
func TestOutputSchemaDescribesEveryResult_AS_ADAPTER_002(t *testing.T) {
	for _, version := range versions {
		t.Run(version, func(t *testing.T) {
			reg, a, _ := newApp(t)
			surfacetest.MustRegister(t, reg, a.domainPanel())
			surfacetest.MustRegister(t, reg, treeComponent())
			cs := connect(t, newServer(t, reg, nil), version, nil)
			tools := listTools(t, cs)
			rs := schemas(t, tools)

			// The capability's schema is under "output", and its
			// definitions at the root.
			var tree struct {
				Properties map[string]json.RawMessage `json:"properties"`
				Defs       map[string]json.RawMessage `json:"$defs"`
			}
			b, _ := json.Marshal(tools["view_tree__read"].OutputSchema)
			_ = json.Unmarshal(b, &tree)
			if len(tree.Defs) == 0 || tree.Properties["output"] == nil {
				t.Fatalf("tree outputSchema %s", b)
			}

			calls := []struct {
				tool string
				args any
				want surface.Code // "" for ok
			}{
				{"view_devices__table__readState", nil, ""},
				{"view_devices__table__selectRows", map[string]any{"ids": []string{"d1"}}, ""},
				{"view_devices__table__selectRows", map[string]any{"ids": "d1"}, surface.CodeInvalidInput},
				{"view_devices__table__open", nil, ""},
				{"view_devices__table__wipe", map[string]any{"ids": []string{"d1"}}, surface.CodeConfirmationRequired},
				{"view_devices__panel__count", nil, ""},
				{"domain_devices__list", nil, ""},
				{"domain_devices__disable", map[string]any{"ids": []string{"d1"}}, surface.CodeConfirmationRequired},
				{"domain_devices__notify", map[string]any{"label": "x"}, surface.CodeConfirmationRequired},
				{"view_tree__read", nil, ""},
				{"view_tree__echo", map[string]any{"any": []any{1, "two", nil}}, ""},
				{"view_tree__fail", nil, surface.CodePreconditionFailed},
			}
			for _, c := range calls {
				res, err := cs.CallTool(bg, &mcp.CallToolParams{Name: c.tool, Arguments: c.args})
				if err != nil {
					t.Fatalf("%s: %v", c.tool, err)
				}
				env := decode(t, res)
				if c.want == "" {
					requireOK(t, env)
				} else {
					requireCode(t, env, c.want)
				}
				conforms(t, rs, c.tool, res)
			}

			// The output schema is the capability's: an output it does not
			// allow is refused by the envelope's schema.
			bad := map[string]any{"status": "ok", "invocationId": "i", "capabilityId": "view:tree.read", "surfaceVersion": "1",
				"output": map[string]any{"name": 7}}
			if err := rs["view_tree__read"].Validate(bad); err == nil {
				t.Fatal("the envelope schema accepts an output the capability's schema refuses")
			}
			for _, missing := range []map[string]any{
				{"status": "error", "invocationId": "i", "capabilityId": "c", "surfaceVersion": "1"},
				{"status": "ok", "invocationId": "i", "capabilityId": "c", "surfaceVersion": "1",
					"error": map[string]any{"code": "TIMEOUT", "message": "m", "retry": "yes"}},
				{"status": "maybe", "invocationId": "i", "capabilityId": "c", "surfaceVersion": "1"},
				{"status": "ok", "capabilityId": "c", "surfaceVersion": "1"},
			} {
				if err := rs["view_devices__table__open"].Validate(missing); err == nil {
					t.Fatalf("the envelope schema accepts %v", missing)
				}
			}

			meta := connect(t, newServer(t, reg, &mcpsurface.Options{Mode: surface.ToolsetMeta}), version, nil)
			mrs := schemas(t, listTools(t, meta))
			for _, c := range []struct {
				tool string
				args any
			}{
				{"surface_discover", nil},
				{"surface_read", map[string]any{"capabilityId": "view:tree.read"}},
				{"surface_act", map[string]any{"capabilityId": "view:tree.echo", "input": map[string]any{"x": 1}}},
				{"surface_act", map[string]any{"capabilityId": "view:devices.table.wipe", "input": map[string]any{"ids": []string{"d1"}}}},
				{"surface_read", map[string]any{"capabilityId": "view:nope.nothing"}},
			} {
				res, err := meta.CallTool(bg, &mcp.CallToolParams{Name: c.tool, Arguments: c.args})
				if err != nil {
					t.Fatal(err)
				}
				conforms(t, mrs, c.tool, res)
			}
		})
	}
}

// Whatever a free-form capability returns, the result validates against
// its tool's outputSchema.
func TestOutputSchemaHoldsForAnyOutput(t *testing.T) {
	reg := surfacetest.NewRegistry(t, nil)
	surfacetest.MustRegister(t, reg, treeComponent())
	cs := connect(t, newServer(t, reg, nil), v2025, nil)
	tools := listTools(t, cs)
	rs := schemas(t, tools)
	if rs["view_tree__echo"] == nil {
		t.Fatalf("tools %s", names(tools))
	}
	rapid.Check(t, func(rt *rapid.T) {
		in := jsonValue().Draw(rt, "input")
		res, err := cs.CallTool(bg, &mcp.CallToolParams{Name: "view_tree__echo", Arguments: in})
		if err != nil {
			rt.Fatal(err)
		}
		b, _ := json.Marshal(res.StructuredContent)
		var v any
		_ = json.Unmarshal(b, &v)
		if err := rs["view_tree__echo"].Validate(v); err != nil {
			rt.Fatalf("input %v: %v\n%s", in, err, b)
		}
	})
}

// jsonValue generates JSON values of bounded depth.
func jsonValue() *rapid.Generator[any] {
	var gen func(depth int) *rapid.Generator[any]
	gen = func(depth int) *rapid.Generator[any] {
		leaves := []*rapid.Generator[any]{
			rapid.Just[any](nil),
			rapid.Map(rapid.Bool(), func(b bool) any { return b }),
			rapid.Map(rapid.Int64Range(-1e9, 1e9), func(n int64) any { return n }),
			rapid.Map(rapid.String(), func(s string) any { return s }),
		}
		if depth == 0 {
			return rapid.OneOf(leaves...)
		}
		return rapid.OneOf(append(leaves,
			rapid.Map(rapid.SliceOfN(gen(depth-1), 0, 3), func(s []any) any { return s }),
			rapid.Map(rapid.MapOfN(rapid.StringMatching(`[a-z]{1,5}`), gen(depth-1), 0, 3), func(m map[string]any) any { return m }),
		)...)
	}
	return rapid.Custom(func(t *rapid.T) any {
		v := gen(2).Draw(t, "v")
		if _, ok := v.(map[string]any); !ok {
			v = map[string]any{"v": v} // arguments are an object
		}
		return v
	})
}

// The output schema does not change while the registration stays: a
// refresh of availability re-adds the tool with the same schema.
func TestOutputSchemaStableAcrossUpdates(t *testing.T) {
	reg, _, h := newApp(t)
	srv := newServer(t, reg, nil)
	ch := newChanges()
	cs := connect(t, srv, v2025, &mcp.ClientOptions{ToolListChangedHandler: ch.handler})
	before, _ := json.Marshal(listTools(t, cs)["view_devices__table__wipe"].OutputSchema)
	h.Update(surface.Update{Availability: map[string]surface.Availability{"wipe": {Reason: "Nothing selected"}}})
	m := ch.waitFor(t, cs, func(m map[string]*mcp.Tool) bool {
		return m["view_devices__table__wipe"].Meta[mcpsurface.MetaAvailable] == false
	})
	after, _ := json.Marshal(m["view_devices__table__wipe"].OutputSchema)
	if string(before) != string(after) || len(before) < 10 {
		t.Fatalf("output schema changed:\n%s\n%s", before, after)
	}
}

// A sync reads the catalog once: the output schemas come with the
// catalog's tools, so a change that adds a tool costs the server one
// snapshot, not a second one for the schemas. (A snapshot asks the
// route provider once.) The registry has a discovery policy, so that
// every catalog read takes a snapshot (without live state, the toolset
// reuses its last one and a sync takes none).
func TestSyncTakesOneSnapshot(t *testing.T) {
	// perChange counts the snapshots a registry change costs a registry
	// that follow sets up.
	perChange := func(follow func(*surface.Registry)) int64 {
		t.Helper()
		var routes atomic.Int64
		reg, a, _ := newAppWith(t, &surface.Options{
			Route:    func() *surface.Route { routes.Add(1); return nil },
			Policies: []surface.Policy{{Name: "live", Discover: func(*surface.PolicyContext) surface.Decision { return surface.Expose() }}},
		})
		follow(reg)
		before := routes.Load()
		surfacetest.MustRegister(t, reg, a.table("extra"))
		return routes.Load() - before
	}
	// A toolset alone rebuilds its catalog on a change; a Server's sync
	// adds one catalog read to its own toolset's.
	bare := perChange(func(reg *surface.Registry) {
		ts, err := surface.NewToolset(reg, surface.ToolsetOptions{Consumer: surface.Consumer{ID: "agent", Kind: surface.ConsumerMCPBridge}, Topology: surface.TopologyRemote})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = ts.Close() })
		ts.Tools()
	})
	var srv *mcpsurface.Server
	if n := perChange(func(reg *surface.Registry) { srv = newServer(t, reg, nil) }) - bare; n != 1 {
		t.Fatalf("a sync took %d snapshots, want 1", n)
	}
	// And the tools it added carry their output schemas.
	tools := listTools(t, connect(t, srv, v2025, nil))
	if out, _ := json.Marshal(tools["view_devices__table__readState_at_extra"].OutputSchema); !strings.Contains(string(out), `"output"`) {
		t.Fatalf("no output schema: %s", out)
	}
}
