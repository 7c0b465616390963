package mcpsurface_test

import (
	"context"
	"encoding/json"
	"reflect"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/agentsurface/agentsurface/mcpsurface"
	"github.com/agentsurface/agentsurface/surface"
	"github.com/agentsurface/agentsurface/surface/surfacetest"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// The two protocol generations every in-memory test runs at.
const (
	v2025 = "2025-11-25"
	v2026 = "2026-07-28"
)

var versions = []string{v2025, v2026}

var bg = context.Background()

// app is the state behind the test components.
type app struct {
	mu       sync.Mutex
	selected []string
	wipes    atomic.Int64
	disables atomic.Int64
	labels   atomic.Int64
}

type tableState struct {
	Rows     []string `json:"rows"`
	Selected []string `json:"selected"`
}

type selectIn struct {
	IDs []string `json:"ids" jsonschema:"Device ids to select"`
}

type labelIn struct {
	Label string `json:"label" jsonschema:"The new label"`
}

type disableIn struct {
	IDs []string `json:"ids"`
}

type disableOut struct {
	Disabled int `json:"disabled"`
}

// table is "devices.table"/instance: observation readState; actions
// selectRows (local-state, idempotent), label (local-state), wipe
// (local-state, requires confirmation) and open (navigation).
func (a *app) table(instance string) surface.Component {
	return surface.Component{
		Type: "devices.table", InstanceID: instance, Description: "Devices table " + instance,
		Observations: map[string]surface.Capability{
			"readState": surface.Observation(surface.ObservationDef[tableState]{
				Description: "Visible rows and selection",
				Read: func(context.Context, *surface.Call) (tableState, error) {
					a.mu.Lock()
					defer a.mu.Unlock()
					return tableState{Rows: []string{"d1", "d2"}, Selected: slices.Clone(a.selected)}, nil
				},
			}),
		},
		Actions: map[string]surface.Capability{
			"selectRows": surface.Action(surface.ActionDef[selectIn, tableState]{
				Description: "Replace the selection", Effect: surface.EffectLocalState, Idempotent: true,
				Execute: func(_ context.Context, _ *surface.Call, in selectIn) (tableState, error) {
					a.mu.Lock()
					defer a.mu.Unlock()
					a.selected = slices.Clone(in.IDs)
					return tableState{Rows: []string{"d1", "d2"}, Selected: slices.Clone(a.selected)}, nil
				},
			}),
			"label": surface.Action(surface.ActionDef[labelIn, labelIn]{
				Description: "Set the table label", Effect: surface.EffectLocalState,
				Execute: func(_ context.Context, _ *surface.Call, in labelIn) (labelIn, error) {
					a.labels.Add(1)
					return in, nil
				},
			}),
			"wipe": surface.Action(surface.ActionDef[selectIn, surface.None]{
				Description: "Wipe devices", Effect: surface.EffectLocalState, Confirmation: surface.ConfirmRequired,
				Execute: func(context.Context, *surface.Call, selectIn) (surface.None, error) {
					a.wipes.Add(1)
					return surface.None{}, nil
				},
			}),
			"open": surface.Action(surface.ActionDef[surface.None, surface.None]{
				Description: "Open the table", Effect: surface.EffectNavigation,
				Execute: func(context.Context, *surface.Call, surface.None) (surface.None, error) {
					return surface.None{}, nil
				},
			}),
		},
	}
}

// domainPanel is a procedure-only component: disable (destructive,
// requires confirmation), list (server-query) and notify (external).
func (a *app) domainPanel() surface.Component {
	return surface.Component{
		Type: "devices.panel", InstanceID: "main", Description: "Device operations",
		Observations: map[string]surface.Capability{"count": surfacetest.Value("Device count", 2)},
		Procedures: []surface.Capability{
			surface.Procedure(surface.ProcedureDef[disableIn, disableOut]{
				ID: "domain:devices.disable", Description: "Disable devices", Effect: surface.EffectDestructive,
				Confirmation: surface.ConfirmRequired,
			}),
			surface.Procedure(surface.ProcedureDef[surface.None, []string]{
				ID: "domain:devices.list", Description: "List devices", Effect: surface.EffectServerQuery,
			}),
			surface.Procedure(surface.ProcedureDef[labelIn, surface.None]{
				ID: "domain:devices.notify", Description: "Email the owners", Effect: surface.EffectExternalSideEffect,
			}),
		},
	}
}

// executor runs the domain procedures.
func (a *app) executor() surface.ProcedureExecutor {
	x := surface.NewFuncExecutor()
	surface.AddFunc(x, "devices.disable", func(_ context.Context, _ *surface.ProcedureCall, in disableIn) (disableOut, error) {
		a.disables.Add(1)
		return disableOut{Disabled: len(in.IDs)}, nil
	})
	surface.AddFunc(x, "devices.list", func(context.Context, *surface.ProcedureCall, surface.None) ([]string, error) {
		return []string{"d1", "d2"}, nil
	})
	surface.AddFunc(x, "devices.notify", func(context.Context, *surface.ProcedureCall, labelIn) (surface.None, error) {
		return surface.None{}, nil
	})
	return x
}

// newApp returns a registry with the table mounted.
func newApp(t testing.TB) (*surface.Registry, *app, *surface.Handle) {
	t.Helper()
	return newAppWith(t, nil)
}

// newAppWith is newApp with registry options.
func newAppWith(t testing.TB, opts *surface.Options) (*surface.Registry, *app, *surface.Handle) {
	t.Helper()
	reg := surfacetest.NewRegistry(t, opts)
	a := &app{}
	reg.SetProcedureExecutor(a.executor())
	h := surfacetest.MustRegister(t, reg, a.table("main"))
	return reg, a, h
}

func newServer(t testing.TB, reg *surface.Registry, opts *mcpsurface.Options) *mcpsurface.Server {
	t.Helper()
	srv, err := mcpsurface.NewServer(reg, surface.Consumer{ID: "agent", Kind: surface.ConsumerMCPBridge}, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = srv.Close() })
	return srv
}

// connect connects an SDK client to srv over in-memory transports at the
// given protocol version.
func connect(t testing.TB, srv *mcpsurface.Server, version string, opts *mcp.ClientOptions) *mcp.ClientSession {
	t.Helper()
	st, ct := mcp.NewInMemoryTransports()
	ss, err := srv.MCP().Connect(bg, st, nil)
	if err != nil {
		t.Fatal(err)
	}
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "test-client", Version: "1.0.0"}, opts).
		Connect(bg, ct, &mcp.ClientSessionOptions{ProtocolVersion: version})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cs.Close()
		_ = ss.Wait()
	})
	return cs
}

// envelope is the registry's result envelope as a client reads it.
type envelope struct {
	Status         string          `json:"status"`
	InvocationID   string          `json:"invocationId"`
	CapabilityID   string          `json:"capabilityId"`
	Output         json.RawMessage `json:"output"`
	Error          *wireError      `json:"error"`
	SurfaceVersion string          `json:"surfaceVersion"`
	SurfaceChanged bool            `json:"surfaceChanged"`
}

type wireError struct {
	Code    string         `json:"code"`
	Message string         `json:"message"`
	Retry   string         `json:"retry"`
	Details map[string]any `json:"details"`
}

// decode checks that the text content and the structured content carry
// the same envelope, and that isError matches its status.
func decode(t testing.TB, res *mcp.CallToolResult) envelope {
	t.Helper()
	if len(res.Content) != 1 {
		t.Fatalf("content: %d items, want 1", len(res.Content))
	}
	text, ok := res.Content[0].(*mcp.TextContent)
	if !ok {
		t.Fatalf("content is %T", res.Content[0])
	}
	var fromText, fromStructured map[string]any
	if err := json.Unmarshal([]byte(text.Text), &fromText); err != nil {
		t.Fatalf("text content is not JSON: %v", err)
	}
	b, _ := json.Marshal(res.StructuredContent)
	if err := json.Unmarshal(b, &fromStructured); err != nil {
		t.Fatalf("structured content: %v", err)
	}
	if !reflect.DeepEqual(fromText, fromStructured) {
		t.Fatalf("text and structured content differ:\n%s\n%s", text.Text, b)
	}
	var env envelope
	if err := json.Unmarshal([]byte(text.Text), &env); err != nil {
		t.Fatal(err)
	}
	if res.IsError != (env.Status == "error") {
		t.Fatalf("isError=%v for status %q", res.IsError, env.Status)
	}
	return env
}

func callTool(t testing.TB, cs *mcp.ClientSession, name string, args any, meta mcp.Meta) envelope {
	t.Helper()
	res, err := cs.CallTool(bg, &mcp.CallToolParams{Name: name, Arguments: args, Meta: meta})
	if err != nil {
		t.Fatalf("CallTool(%s): %v", name, err)
	}
	return decode(t, res)
}

func requireOK(t testing.TB, env envelope) {
	t.Helper()
	if env.Status != "ok" || env.Error != nil {
		t.Fatalf("want ok, got %+v (error %+v)", env, env.Error)
	}
}

func requireCode(t testing.TB, env envelope, code surface.Code) *wireError {
	t.Helper()
	if env.Status != "error" || env.Error == nil || env.Error.Code != string(code) {
		t.Fatalf("want %s, got %+v (error %+v)", code, env, env.Error)
	}
	return env.Error
}

func listTools(t testing.TB, cs *mcp.ClientSession) map[string]*mcp.Tool {
	t.Helper()
	res, err := cs.ListTools(bg, nil)
	if err != nil {
		t.Fatal(err)
	}
	m := map[string]*mcp.Tool{}
	for _, tool := range res.Tools {
		m[tool.Name] = tool
	}
	return m
}

func names(m map[string]*mcp.Tool) string {
	var out []string
	for n := range m {
		out = append(out, n)
	}
	slices.Sort(out)
	return strings.Join(out, ",")
}

// changes counts tool-list-changed notifications.
type changes struct{ ch chan struct{} }

func newChanges() *changes { return &changes{ch: make(chan struct{}, 64)} }

func (c *changes) handler(context.Context, *mcp.ToolListChangedRequest) {
	select {
	case c.ch <- struct{}{}:
	default:
	}
}

// waitFor waits for notifications until cond holds on the tool list.
func (c *changes) waitFor(t testing.TB, cs *mcp.ClientSession, cond func(map[string]*mcp.Tool) bool) map[string]*mcp.Tool {
	t.Helper()
	deadline := time.After(5 * time.Second)
	for {
		select {
		case <-c.ch:
			if m := listTools(t, cs); cond(m) {
				return m
			}
		case <-deadline:
			t.Fatalf("tool list never reached the expected state: %s", names(listTools(t, cs)))
		}
	}
}
