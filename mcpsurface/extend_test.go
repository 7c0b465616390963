package mcpsurface_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/agentsurface/agentsurface/mcpsurface"
	"github.com/agentsurface/agentsurface/surface"
	"github.com/agentsurface/agentsurface/surface/surfacetest"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Options.ToolNames names tools as the application chooses: calls by the
// new name reach the capability, the wire name is gone, a name that would
// be ambiguous is not applied, and a renamed tool that left the list is
// still answered (unmounted) for the session that was shown it.
func TestToolNames(t *testing.T) {
	for _, version := range versions {
		t.Run(version, func(t *testing.T) {
			reg, _, h := newApp(t)
			var logs syncBuffer
			srv := newServer(t, reg, &mcpsurface.Options{Logger: slog.New(slog.NewTextHandler(&logs, nil)), ToolNames: map[string]string{
				"view:devices.table.readState":  "read_table",
				"view:devices.table.selectRows": "view_devices__table__label", // another tool's name: not applied
			}})
			cs := connect(t, srv, version, nil)
			tools := listTools(t, cs)
			if tools["read_table"] == nil || tools["view_devices__table__readState"] != nil || tools["view_devices__table__selectRows"] == nil {
				t.Fatalf("tools %s", names(tools))
			}
			if !strings.Contains(logs.String(), "ambiguous") {
				t.Fatalf("the conflict was not logged: %s", logs.String())
			}
			env := callTool(t, cs, "read_table", nil, nil)
			requireOK(t, env)
			if env.CapabilityID != "view:devices.table.readState" {
				t.Fatalf("%+v", env)
			}
			if _, err := cs.CallTool(bg, &mcp.CallToolParams{Name: "view_devices__table__readState"}); err == nil {
				t.Fatal("the wire name of a renamed tool was called")
			}
			h.Unregister()
			requireCode(t, callTool(t, cs, "read_table", nil, nil), surface.CodeComponentUnmounted)
		})
	}
	reg, _, _ := newApp(t)
	for _, bad := range []map[string]string{
		{"view:devices.table.readState": "has space"},
		{"view:devices.table.readState": ""},
		{"view:devices.table.readState": "x", "view:devices.table.label": "x"},
	} {
		if _, err := mcpsurface.NewServer(reg, surface.Consumer{ID: "a"}, &mcpsurface.Options{ToolNames: bad}); err == nil {
			t.Fatalf("ToolNames %v accepted", bad)
		}
	}
}

// Options.Content puts content blocks of the output before the envelope's
// text, for ok results only; the envelope stays the structured content. A
// panicking Content adds nothing and is logged.
func TestContent(t *testing.T) {
	png := []byte("\x89PNG fake")
	reg, _, _ := newApp(t)
	var logs syncBuffer
	srv := newServer(t, reg, &mcpsurface.Options{Logger: slog.New(slog.NewTextHandler(&logs, nil)),
		Content: func(tool surface.Tool, output surface.JSONText) []mcp.Content {
			switch tool.CapabilityID {
			case "view:devices.table.readState":
				return []mcp.Content{&mcp.ImageContent{Data: png, MIMEType: "image/png"}, nil}
			case "view:devices.table.label":
				panic("content exploded")
			}
			return nil
		}})
	cs := connect(t, srv, v2026, nil)
	res, err := cs.CallTool(bg, &mcp.CallToolParams{Name: "view_devices__table__readState"})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Content) != 2 {
		t.Fatalf("content %+v", res.Content)
	}
	if img, ok := res.Content[0].(*mcp.ImageContent); !ok || string(img.Data) != string(png) || img.MIMEType != "image/png" {
		t.Fatalf("first block %+v", res.Content[0])
	}
	res.Content = res.Content[1:]
	requireOK(t, decode(t, res))
	requireCode(t, callTool(t, cs, "view_devices__table__selectRows", map[string]any{"ids": 1}, nil), surface.CodeInvalidInput)
	res, err = cs.CallTool(bg, &mcp.CallToolParams{Name: "view_devices__table__label", Arguments: map[string]any{"label": "x"}})
	if err != nil || len(res.Content) != 1 {
		t.Fatalf("%v %+v", err, res)
	}
	requireOK(t, decode(t, res))
	if !strings.Contains(logs.String(), "Options.Content panicked") {
		t.Fatalf("not logged: %s", logs.String())
	}
}

// Options.Extend adds the application's prompts and resources to each
// server, for its (registry, consumer): two users of one handler see
// their own. Completions and logging are advertised when set, resource
// subscriptions answered; both protocol generations see them; a Setup
// that keeps the server changes its prompts later, and clients hear of
// it.
func TestExtend(t *testing.T) {
	var mu sync.Mutex
	kept := map[string]*mcp.Server{}
	var subscribed atomic.Int64
	extend := func(reg *surface.Registry, consumer surface.Consumer) *mcpsurface.Extension {
		user := consumer.ID
		return &mcpsurface.Extension{
			Setup: func(s *mcp.Server) {
				mu.Lock()
				kept[user] = s
				mu.Unlock()
				s.AddPrompt(&mcp.Prompt{Name: "greet", Description: "Greets"}, func(context.Context, *mcp.GetPromptRequest) (*mcp.GetPromptResult, error) {
					return &mcp.GetPromptResult{Messages: []*mcp.PromptMessage{{Role: "user", Content: &mcp.TextContent{Text: "hello " + user}}}}, nil
				})
				s.AddResource(&mcp.Resource{Name: "profile", URI: "app://profile", MIMEType: "text/plain"}, func(_ context.Context, req *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
					return &mcp.ReadResourceResult{Contents: []*mcp.ResourceContents{{URI: req.Params.URI, MIMEType: "text/plain", Text: "profile of " + user}}}, nil
				})
			},
			Complete: func(context.Context, *mcp.CompleteRequest) (*mcp.CompleteResult, error) {
				return &mcp.CompleteResult{Completion: mcp.CompletionResultDetails{Values: []string{user}}}, nil
			},
			Subscribe:   func(context.Context, *mcp.SubscribeRequest) error { subscribed.Add(1); return nil },
			Unsubscribe: func(context.Context, *mcp.UnsubscribeRequest) error { return nil },
			Logging:     true,
		}
	}
	for _, version := range versions {
		t.Run(version, func(t *testing.T) {
			users := twoUsers(t)
			f := newHTTP(t, &mcpsurface.HTTPOptions{Options: mcpsurface.Options{Extend: extend}}, users)
			ch := make(chan struct{}, 8)
			opts := &mcp.ClientOptions{PromptListChangedHandler: func(context.Context, *mcp.PromptListChangedRequest) { ch <- struct{}{} }}
			for _, u := range []struct{ token, user string }{{"tok-alice", "alice"}, {"tok-bob", "bob"}} {
				cs := f.mustClient(t, u.token, version, opts)
				caps := cs.InitializeResult().Capabilities
				if caps.Prompts == nil || caps.Resources == nil || !caps.Resources.Subscribe || caps.Completions == nil || caps.Logging == nil || caps.Tools == nil {
					t.Fatalf("%s: capabilities %+v", u.user, caps)
				}
				p, err := cs.GetPrompt(bg, &mcp.GetPromptParams{Name: "greet"})
				if err != nil || p.Messages[0].Content.(*mcp.TextContent).Text != "hello "+u.user {
					t.Fatalf("%s: prompt %+v %v", u.user, p, err)
				}
				r, err := cs.ReadResource(bg, &mcp.ReadResourceParams{URI: "app://profile"})
				if err != nil || r.Contents[0].Text != "profile of "+u.user {
					t.Fatalf("%s: resource %+v %v", u.user, r, err)
				}
				if version == v2026 { // what the extension serves is the user's: private too
					ps, _ := cs.ListPrompts(bg, nil)
					rs, _ := cs.ListResources(bg, nil)
					if ps == nil || rs == nil || ps.CacheScope != "private" || rs.CacheScope != "private" || r.CacheScope != "private" {
						t.Fatalf("%s: cache scopes %+v %+v %q", u.user, ps, rs, r.CacheScope)
					}
				}
				c, err := cs.Complete(bg, &mcp.CompleteParams{Ref: &mcp.CompleteReference{Type: "ref/prompt", Name: "greet"}, Argument: mcp.CompleteParamsArgument{Name: "x"}})
				if err != nil || fmt.Sprint(c.Completion.Values) != "["+u.user+"]" {
					t.Fatalf("%s: completion %+v %v", u.user, c, err)
				}
				if version == v2025 {
					if err := cs.Subscribe(bg, &mcp.SubscribeParams{URI: "app://profile"}); err != nil {
						t.Fatalf("%s: subscribe: %v", u.user, err)
					}
				}
				if u.user == "alice" {
					mu.Lock()
					s := kept["alice"]
					mu.Unlock()
					s.AddPrompt(&mcp.Prompt{Name: "later"}, func(context.Context, *mcp.GetPromptRequest) (*mcp.GetPromptResult, error) {
						return &mcp.GetPromptResult{}, nil
					})
					<-ch
					ps, err := cs.ListPrompts(bg, nil)
					if err != nil || len(ps.Prompts) != 2 {
						t.Fatalf("prompts after the change: %+v %v", ps, err)
					}
				}
			}
			if version == v2025 && subscribed.Load() == 0 {
				t.Fatal("Subscribe not called")
			}
		})
	}
}

// A panicking Extend or Setup is logged and adds nothing; the tools are
// served all the same.
func TestExtendPanics(t *testing.T) {
	for _, ext := range []func(*surface.Registry, surface.Consumer) *mcpsurface.Extension{
		func(*surface.Registry, surface.Consumer) *mcpsurface.Extension { panic("extend exploded") },
		func(*surface.Registry, surface.Consumer) *mcpsurface.Extension {
			return &mcpsurface.Extension{Setup: func(*mcp.Server) { panic("setup exploded") }}
		},
	} {
		reg, _, _ := newApp(t)
		var logs syncBuffer
		srv := newServer(t, reg, &mcpsurface.Options{Extend: ext, Logger: slog.New(slog.NewTextHandler(&logs, nil))})
		cs := connect(t, srv, v2025, nil)
		if len(listTools(t, cs)) != 5 || !strings.Contains(logs.String(), "exploded") {
			t.Fatalf("tools %d, log %s", len(listTools(t, cs)), logs.String())
		}
	}
}

// mcpAware is a component whose handlers use what only MCP has: progress
// and log messages through the request's session, input over several
// rounds, and the refusal of a client without sampling.
func mcpAware() surface.Component {
	return surface.Component{
		Type: "aware", Description: "MCP-aware capabilities",
		Observations: map[string]surface.Capability{
			"progress": surface.Observation(surface.ObservationDef[string]{
				Description: "Reports progress",
				Read: func(ctx context.Context, _ *surface.Call) (string, error) {
					req := mcpsurface.RequestFromContext(ctx)
					if req == nil {
						return "no MCP request", nil
					}
					for i := range 3 {
						_ = req.Session.NotifyProgress(ctx, &mcp.ProgressNotificationParams{ProgressToken: req.Params.GetProgressToken(), Progress: float64(i), Total: 2})
					}
					return fmt.Sprint(req.Params.GetProgressToken()), nil
				},
			}),
			"ask": surface.Observation(surface.ObservationDef[string]{
				Description: "Asks for a name, then a color",
				Read: func(ctx context.Context, _ *surface.Call) (string, error) {
					responses, state := mcpsurface.Input(ctx)
					answer := func(key, field string) string {
						r, _ := responses[key].(*mcp.ElicitResult)
						if r == nil || r.Action != "accept" {
							return ""
						}
						s, _ := r.Content[field].(string)
						return s
					}
					form := func(field string) *mcp.ElicitParams {
						return &mcp.ElicitParams{Message: "Your " + field + "?", RequestedSchema: json.RawMessage(`{"type":"object","properties":{"` + field + `":{"type":"string"}},"required":["` + field + `"]}`)}
					}
					switch {
					case state == "":
						return "", mcpsurface.InputRequired(ctx, mcp.InputRequestMap{"name": form("name")}, "round=1")
					case state == "round=1":
						return "", mcpsurface.InputRequired(ctx, mcp.InputRequestMap{"color": form("color")}, "round=2;name="+answer("name", "name"))
					default:
						return strings.TrimPrefix(state, "round=2;name=") + " likes " + answer("color", "color"), nil
					}
				},
			}),
			"sample": surface.Observation(surface.ObservationDef[string]{
				Description: "Needs sampling",
				Read: func(ctx context.Context, _ *surface.Call) (string, error) {
					if req := mcpsurface.RequestFromContext(ctx); req != nil && (req.ClientCapabilities() == nil || req.ClientCapabilities().Sampling == nil) {
						return "", mcpsurface.MissingClientCapability(ctx, &mcp.ClientCapabilities{Sampling: &mcp.SamplingCapabilities{}})
					}
					return "sampled", nil
				},
			}),
		},
	}
}

// A handler reaches the client's session (progress), asks for input over
// several rounds with a signed state (natively on 2026-07-28; through
// elicitation/create on an older session), and refuses a client without
// a capability with the protocol's -32021. Under another adapter the
// same handlers get no MCP request and fail PRECONDITION_FAILED.
func TestMCPAwareHandlers(t *testing.T) {
	for _, mode := range httpModes {
		if mode.name == "stateless-legacy" {
			continue // no channel to ask an older client on
		}
		t.Run(mode.name, func(t *testing.T) {
			reg := surfacetest.NewRegistry(t, nil)
			surfacetest.MustRegister(t, reg, mcpAware())
			users := map[string]*session{"tok": {reg: reg, consumer: surface.Consumer{ID: "u"}}}
			f := newHTTP(t, &mcpsurface.HTTPOptions{Stateless: mode.stateless}, users)
			progress := make(chan struct{}, 8)
			var asked []string
			var amu sync.Mutex
			cs := f.mustClient(t, "tok", mode.version, &mcp.ClientOptions{
				ProgressNotificationHandler: func(context.Context, *mcp.ProgressNotificationClientRequest) { progress <- struct{}{} },
				ElicitationHandler: func(_ context.Context, req *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
					amu.Lock()
					asked = append(asked, req.Params.Message)
					amu.Unlock()
					answer := map[string]any{"name": "Ann", "color": "green"}
					var schema struct {
						Properties map[string]any `json:"properties"`
					}
					b, _ := json.Marshal(req.Params.RequestedSchema)
					_ = json.Unmarshal(b, &schema)
					content := map[string]any{}
					for k := range schema.Properties {
						content[k] = answer[k]
					}
					return &mcp.ElicitResult{Action: "accept", Content: content}, nil
				},
			})
			env := callToolParams(t, cs, &mcp.CallToolParams{Name: "view_aware__progress", Meta: mcp.Meta{"progressToken": "p-1"}})
			requireOK(t, env)
			if string(env.Output) != `"p-1"` {
				t.Fatalf("output %s", env.Output)
			}
			for i := range 3 { // the client handles notifications on its own goroutine
				select {
				case <-progress:
				case <-time.After(5 * time.Second):
					t.Fatalf("%d progress notifications, want 3", i)
				}
			}
			env = callTool(t, cs, "view_aware__ask", nil, nil)
			requireOK(t, env)
			if string(env.Output) != `"Ann likes green"` || len(asked) != 2 {
				t.Fatalf("output %s, asked %v", env.Output, asked)
			}
			_, err := cs.CallTool(bg, &mcp.CallToolParams{Name: "view_aware__sample"})
			var wire *jsonrpc.Error
			if !errors.As(err, &wire) || wire.Code != mcp.CodeMissingRequiredClientCapabilities || !strings.Contains(string(wire.Data), `"sampling"`) {
				t.Fatalf("a client without sampling: %v", err)
			}
		})
	}
	// Under the toolset, no MCP request: the handlers fail as they say.
	reg := surfacetest.NewRegistry(t, nil)
	surfacetest.MustRegister(t, reg, mcpAware())
	ts, err := surface.NewToolset(reg, surface.ToolsetOptions{Topology: surface.TopologyRemote})
	if err != nil {
		t.Fatal(err)
	}
	defer ts.Close()
	ts.Tools()
	res := ts.Call(bg, "view_aware__ask", nil, surface.CallOptions{})
	if res.Error == nil || res.Error.Code != surface.CodePreconditionFailed || res.Error.Details["reason"] != "input-required" {
		t.Fatalf("%+v", res)
	}
}

// The state of an input round is signed and bound to the call: a retry
// with a tampered state, or the state of another tool or other
// arguments, is refused with a JSON-RPC invalid-params error before the
// handler runs; without a state the handler starts over.
func TestInputStateVerified(t *testing.T) {
	reg := surfacetest.NewRegistry(t, nil)
	surfacetest.MustRegister(t, reg, mcpAware())
	srv := newServer(t, reg, nil)
	cs := connect(t, srv, v2026, &mcp.ClientOptions{MultiRoundTrip: &mcp.MultiRoundTripOptions{Disabled: true},
		ElicitationHandler: func(context.Context, *mcp.ElicitRequest) (*mcp.ElicitResult, error) { return nil, nil }})
	first, err := cs.CallTool(bg, &mcp.CallToolParams{Name: "view_aware__ask"})
	if err != nil || !first.NeedsInput() || first.RequestState == "" || first.InputRequests["name"] == nil {
		t.Fatalf("%v %+v", err, first)
	}
	answer := mcp.InputResponseMap{"name": &mcp.ElicitResult{Action: "accept", Content: map[string]any{"name": "Bo"}}}
	for _, c := range []struct {
		name, tool, state string
		args              any
	}{
		{"tampered", "view_aware__ask", first.RequestState + "-TAMPERED", nil},
		{"other tool", "view_aware__progress", first.RequestState, nil},
		{"other arguments", "view_aware__ask", first.RequestState, map[string]any{"x": 1}},
	} {
		_, err := cs.CallTool(bg, &mcp.CallToolParams{Name: c.tool, Arguments: c.args, InputResponses: answer, RequestState: c.state})
		var wire *jsonrpc.Error
		if !errors.As(err, &wire) || wire.Code != jsonrpc.CodeInvalidParams {
			t.Fatalf("%s: %v", c.name, err)
		}
	}
	second, err := cs.CallTool(bg, &mcp.CallToolParams{Name: "view_aware__ask", InputResponses: answer, RequestState: first.RequestState})
	if err != nil || !second.NeedsInput() || second.InputRequests["color"] == nil {
		t.Fatalf("second round: %v %+v", err, second)
	}
	again, err := cs.CallTool(bg, &mcp.CallToolParams{Name: "view_aware__ask", InputResponses: answer})
	if err != nil || !again.NeedsInput() || again.InputRequests["name"] == nil {
		t.Fatalf("without state: %v %+v", err, again)
	}
}
