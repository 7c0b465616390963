package mcpsurface_test

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"

	"github.com/agentsurface/agentsurface/mcpsurface"
	"github.com/agentsurface/agentsurface/surface"
	"github.com/agentsurface/agentsurface/surface/surfacetest"
	"github.com/google/jsonschema-go/jsonschema"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Tools carry a readable title (MCP's title and annotations.title),
// derived from the capability (surface.Tool.Title), so that clients show
// "Devices table: select rows" rather than the wire name.
func TestToolTitles(t *testing.T) {
	reg, a, _ := newApp(t)
	surfacetest.MustRegister(t, reg, a.table("side")) // two instances: names and titles say which
	surfacetest.MustRegister(t, reg, a.domainPanel())
	for _, version := range versions {
		t.Run(version, func(t *testing.T) {
			tools := listTools(t, connect(t, newServer(t, reg, nil), version, nil))
			for name, want := range map[string]string{
				"view_devices__table__selectRows_at_main": "Devices table (main): select rows",
				"view_devices__table__readState_at_side":  "Devices table (side): read state",
				"view_devices__panel__count":              "Devices panel: count",
				"domain_devices__disable":                 "Devices: disable",
				"domain_devices__list":                    "Devices: list",
			} {
				tool := tools[name]
				if tool == nil {
					t.Fatalf("no tool %s in %s", name, names(tools))
				}
				if tool.Title != want || tool.Annotations == nil || tool.Annotations.Title != want {
					t.Errorf("%s: title %q, annotations.title %q, want %q", name, tool.Title, tool.Annotations.Title, want)
				}
			}
			for name, tool := range tools {
				if tool.Title == "" || tool.Title == name {
					t.Errorf("%s has no title of its own", name)
				}
			}
			for name, want := range map[string]string{
				"surface_discover": "Discover capabilities", "surface_read": "Read an observation", "surface_act": "Call an action or procedure",
			} {
				tool := listTools(t, connect(t, newMetaServer(t, reg), version, nil))[name]
				if tool == nil || tool.Title != want || tool.Annotations.Title != want {
					t.Errorf("%s: %+v, want the title %q", name, tool, want)
				}
			}
		})
	}
}

// noteSchema is an input schema with a type array and a property that
// constrains nothing.
var noteSchema = json.RawMessage(`{"type":"object","properties":{"note":{"type":["string","null"],"maxLength":5},"extra":{"description":"anything"}},"additionalProperties":false}`)

// What MCP advertises, input and output schemas alike, has neither type
// arrays (["array","null"] for a Go slice a program may leave nil) nor
// schemas that constrain nothing, the two portability warnings of the MCP
// Inspector's --strict lint; the advertised schemas accept exactly what
// the registry does, and every structuredContent, null branches
// included, validates against the advertised outputSchema.
func TestAdvertisedSchemasPortable(t *testing.T) {
	reg, a, _ := newApp(t)
	surfacetest.MustRegister(t, reg, a.domainPanel())
	surfacetest.MustRegister(t, reg, treeComponent())
	surfacetest.MustRegister(t, reg, surface.Component{Type: "notes", Description: "Notes",
		Actions: map[string]surface.Capability{"set": surface.Action(surface.ActionDef[map[string]any, any]{
			Description: "Sets a note", Effect: surface.EffectLocalState, InputSchema: noteSchema,
			Execute: func(_ context.Context, _ *surface.Call, in map[string]any) (any, error) { return in["note"], nil },
		})}})
	for _, mode := range []surface.ToolsetMode{surface.ToolsetDirect, surface.ToolsetMeta} {
		for _, version := range versions {
			t.Run(fmt.Sprint(mode, "/", version), func(t *testing.T) {
				srv := newServer(t, reg, nil)
				if mode == surface.ToolsetMeta {
					srv = newMetaServer(t, reg)
				}
				cs := connect(t, srv, version, nil)
				tools := listTools(t, cs)
				for name, tool := range tools {
					for field, s := range map[string]any{"inputSchema": tool.InputSchema, "outputSchema": tool.OutputSchema} {
						b, _ := json.Marshal(s)
						var doc any
						_ = json.Unmarshal(b, &doc)
						if where := unportable(doc, ""); where != "" {
							t.Errorf("%s %s: %q is not portable: %s", name, field, where, b)
						}
					}
				}
				if mode == surface.ToolsetMeta {
					return
				}
				rs := schemas(t, tools)
				// selected is nil, so null: the null branch of a nullable slice.
				res, err := cs.CallTool(bg, &mcp.CallToolParams{Name: "view_devices__table__readState", Arguments: map[string]any{}})
				if err != nil {
					t.Fatal(err)
				}
				if env := decode(t, res); string(env.Output) != `{"rows":["d1","d2"],"selected":null}` {
					t.Fatalf("readState: %s", env.Output)
				}
				conforms(t, rs, "view_devices__table__readState", res)

				in := inputSchema(t, tools["view_notes__set"])
				for _, c := range []struct {
					args map[string]any
					ok   bool
				}{
					{map[string]any{"note": "hi"}, true},
					{map[string]any{"note": nil}, true},
					{map[string]any{"note": "hi", "extra": []any{1, nil}}, true},
					{map[string]any{"note": 5}, false},
					{map[string]any{"note": "longer"}, false},
					{map[string]any{"other": 1}, false},
				} {
					advertised := in.Validate(c.args) == nil
					res, err := cs.CallTool(bg, &mcp.CallToolParams{Name: "view_notes__set", Arguments: c.args})
					if err != nil {
						t.Fatal(err)
					}
					env := decode(t, res)
					if advertised != c.ok || (env.Status == "ok") != c.ok {
						t.Errorf("%v: the advertised schema accepts it: %v, the registry: %s; want %v", c.args, advertised, env.Status, c.ok)
					}
					conforms(t, rs, "view_notes__set", res)
				}
			})
		}
	}
}

// newMetaServer serves reg in meta mode.
func newMetaServer(t *testing.T, reg *surface.Registry) *mcpsurface.Server {
	return newServer(t, reg, &mcpsurface.Options{Mode: surface.ToolsetMeta})
}

// inputSchema resolves a tool's advertised inputSchema with jsonschema-go.
func inputSchema(t *testing.T, tool *mcp.Tool) *jsonschema.Resolved {
	t.Helper()
	b, _ := json.Marshal(tool.InputSchema)
	var s jsonschema.Schema
	if err := json.Unmarshal(b, &s); err != nil {
		t.Fatalf("%s: inputSchema %s: %v", tool.Name, b, err)
	}
	rs, err := s.Resolve(nil)
	if err != nil {
		t.Fatalf("%s: inputSchema does not resolve: %v", tool.Name, err)
	}
	return rs
}

// unportable returns the path of the first schema of doc with a type
// array, or that constrains nothing, as the MCP Inspector's --strict lint
// reports them ("" if none). It walks every schema position of JSON
// Schema 2020-12 a registry's schemas and the envelope use.
func unportable(doc any, path string) string {
	m, ok := doc.(map[string]any)
	if !ok {
		return ""
	}
	if _, isArray := m["type"].([]any); isArray {
		return path + "/type"
	}
	constrains := false
	for k := range m {
		switch k {
		case "type", "enum", "const", "minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "multipleOf",
			"minLength", "maxLength", "pattern", "format", "minItems", "maxItems", "uniqueItems", "required",
			"anyOf", "allOf", "oneOf", "not", "items", "properties", "additionalProperties", "$ref":
			constrains = true
		}
	}
	if !constrains && path != "" && !isNot(path) {
		return path
	}
	for _, k := range []string{"properties", "$defs"} {
		if sub, ok := m[k].(map[string]any); ok {
			for name, s := range sub {
				if w := unportable(s, path+"/"+k+"/"+name); w != "" {
					return w
				}
			}
		}
	}
	for _, k := range []string{"items", "not", "if", "then", "else", "additionalProperties"} {
		if w := unportable(m[k], path+"/"+k); w != "" {
			return w
		}
	}
	for _, k := range []string{"anyOf", "allOf", "oneOf"} {
		if br, ok := m[k].([]any); ok {
			for i, b := range br {
				if w := unportable(b, fmt.Sprintf("%s/%s/%d", path, k, i)); w != "" {
					return w
				}
			}
		}
	}
	return ""
}

// isNot reports whether path is a schema under "not", where the lint
// allows a schema that constrains nothing.
func isNot(path string) bool {
	return len(path) >= 4 && path[len(path)-4:] == "/not"
}
