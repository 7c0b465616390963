package mcpsurface_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"reflect"
	"strings"
	"testing"

	"github.com/agentsurface/agentsurface/internal/version"
	"github.com/agentsurface/agentsurface/mcpsurface"
	"github.com/agentsurface/agentsurface/surface"
	"github.com/agentsurface/agentsurface/surface/surfacetest"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

type hints struct {
	readOnly, destructive, idempotent, openWorld bool
}

// AS-ADAPTER-001: the MCP tool list is the toolset's catalog — names,
// descriptions, schemas — with annotations derived from kind, effect and
// idempotency, and the capability and live state in _meta.
func TestToolsList_AS_ADAPTER_001(t *testing.T) {
	for _, version := range versions {
		t.Run(version, func(t *testing.T) {
			reg, a, _ := newApp(t)
			surfacetest.MustRegister(t, reg, a.domainPanel())
			srv := newServer(t, reg, nil)
			cs := connect(t, srv, version, nil)
			if got := cs.InitializeResult().Capabilities.Tools; got == nil || !got.ListChanged {
				t.Fatalf("tools capability %+v, want listChanged", got)
			}
			tools := listTools(t, cs)
			want := map[string]hints{
				"view_devices__table__readState":  {readOnly: true, idempotent: true},
				"view_devices__table__selectRows": {idempotent: true},
				"view_devices__table__label":      {},
				"view_devices__table__wipe":       {},
				"view_devices__table__open":       {},
				"view_devices__panel__count":      {readOnly: true, idempotent: true},
				"domain_devices__disable":         {destructive: true},
				"domain_devices__list":            {readOnly: true, idempotent: true},
				"domain_devices__notify":          {openWorld: true},
			}
			if len(tools) != len(want) {
				t.Fatalf("tools: %s", names(tools))
			}
			ts, err := surface.NewToolset(reg, surface.ToolsetOptions{Consumer: surface.Consumer{ID: "agent", Kind: surface.ConsumerMCPBridge}, Topology: surface.TopologyRemote})
			if err != nil {
				t.Fatal(err)
			}
			defer ts.Close()
			for _, st := range ts.Tools() {
				tool, ok := tools[st.Name]
				if !ok {
					t.Fatalf("missing %s in %s", st.Name, names(tools))
				}
				h := want[st.Name]
				ann := tool.Annotations
				if ann == nil || ann.ReadOnlyHint != h.readOnly || ann.IdempotentHint != h.idempotent ||
					ann.DestructiveHint == nil || *ann.DestructiveHint != h.destructive ||
					ann.OpenWorldHint == nil || *ann.OpenWorldHint != h.openWorld {
					b, _ := json.Marshal(ann)
					t.Errorf("%s: annotations %s, want %+v", st.Name, b, h)
				}
				if tool.Description != st.Description {
					t.Errorf("%s: description %q, want %q", st.Name, tool.Description, st.Description)
				}
				if !sameJSON(t, tool.InputSchema, st.InputSchema) {
					b, _ := json.Marshal(tool.InputSchema)
					t.Errorf("%s: schema %s, want %s", st.Name, b, st.InputSchema)
				}
				m := tool.Meta
				if m[mcpsurface.MetaCapabilityID] != st.CapabilityID || m[mcpsurface.MetaEffect] != string(st.Effect) ||
					m[mcpsurface.MetaKind] != string(st.Kind) || m[mcpsurface.MetaAvailable] != true {
					t.Errorf("%s: _meta %v", st.Name, m)
				}
				if _, ok := m[mcpsurface.MetaUnavailableReason]; ok {
					t.Errorf("%s: unavailableReason without a reason: %v", st.Name, m)
				}
			}
			if d := tools["view_devices__table__wipe"].Description; d != "[view · local-state · requires confirmation] Wipe devices" {
				t.Errorf("wipe description %q", d)
			}
		})
	}
}

func sameJSON(t testing.TB, got any, want surface.JSONText) bool {
	t.Helper()
	b, _ := json.Marshal(got)
	var x, y any
	if json.Unmarshal(b, &x) != nil || json.Unmarshal([]byte(want), &y) != nil {
		return false
	}
	return reflect.DeepEqual(x, y)
}

// The tool list follows the registry live: mounting, unmounting and
// availability changes reach clients as tools/list_changed, at both
// protocol generations (2026-07-28 through subscriptions/listen).
func TestToolListChanged_AS_ADAPTER_001(t *testing.T) {
	for _, version := range versions {
		t.Run(version, func(t *testing.T) {
			reg, a, h := newApp(t)
			srv := newServer(t, reg, nil)
			ch := newChanges()
			cs := connect(t, srv, version, &mcp.ClientOptions{ToolListChangedHandler: ch.handler})
			if _, ok := listTools(t, cs)["domain_devices__disable"]; ok {
				t.Fatal("panel tools before mount")
			}
			panel := surfacetest.MustRegister(t, reg, a.domainPanel())
			ch.waitFor(t, cs, func(m map[string]*mcp.Tool) bool { return m["domain_devices__disable"] != nil && len(m) == 9 })

			// Availability is live state in _meta: a pushed change updates
			// the definition.
			h.Update(surface.Update{Availability: map[string]surface.Availability{"wipe": {Reason: "Nothing selected"}}})
			m := ch.waitFor(t, cs, func(m map[string]*mcp.Tool) bool {
				return m["view_devices__table__wipe"].Meta[mcpsurface.MetaAvailable] == false
			})
			if r := m["view_devices__table__wipe"].Meta[mcpsurface.MetaUnavailableReason]; r != "Nothing selected" {
				t.Fatalf("reason %v", r)
			}
			env := callTool(t, cs, "view_devices__table__wipe", map[string]any{"ids": []string{"d1"}}, nil)
			if e := requireCode(t, env, surface.CodeCapabilityNotAvailable); e.Details["reason"] != "Nothing selected" {
				t.Fatalf("%+v", e)
			}

			panel.Unregister()
			h.Unregister()
			ch.waitFor(t, cs, func(m map[string]*mcp.Tool) bool { return len(m) == 0 })
			surfacetest.MustRegister(t, reg, a.table("main"))
			ch.waitFor(t, cs, func(m map[string]*mcp.Tool) bool { return len(m) == 5 })
		})
	}
}

// AS-ADAPTER-002: results are the registry's envelopes, byte for byte, in
// the text content and as structured content.
func TestCallObservationAndAction_AS_ADAPTER_002(t *testing.T) {
	for _, version := range versions {
		t.Run(version, func(t *testing.T) {
			reg, a, h := newApp(t)
			srv := newServer(t, reg, nil)
			cs := connect(t, srv, version, nil)

			env := callTool(t, cs, "view_devices__table__readState", nil, nil)
			requireOK(t, env)
			if env.CapabilityID != "view:devices.table.readState" || !strings.HasPrefix(env.InvocationID, "mcp_") || env.SurfaceVersion != reg.Version() {
				t.Fatalf("%+v", env)
			}
			if string(env.Output) != `{"rows":["d1","d2"],"selected":null}` {
				t.Fatalf("output %s", env.Output)
			}

			// The client's invocation id is the idempotency key; replaying
			// the same request on the registry returns the cached result,
			// which must be exactly what the client got.
			res, err := cs.CallTool(bg, &mcp.CallToolParams{Name: "view_devices__table__selectRows",
				Arguments: map[string]any{"ids": []string{"d2"}}, Meta: mcp.Meta{mcpsurface.MetaInvocationID: "client-1"}})
			if err != nil {
				t.Fatal(err)
			}
			env = decode(t, res)
			requireOK(t, env)
			if env.InvocationID != "client-1" || string(env.Output) != `{"rows":["d1","d2"],"selected":["d2"]}` {
				t.Fatalf("%+v", env)
			}
			replay := reg.Invoke(bg, surface.Invocation{InvocationID: "client-1", CapabilityID: "view:devices.table.selectRows",
				RegistrationID: h.ID(), SurfaceVersion: reg.Version(), Input: json.RawMessage(`{"ids":["d2"]}`)},
				surface.InvokeOptions{Consumer: surface.Consumer{ID: "agent", Kind: surface.ConsumerMCPBridge}})
			want, _ := json.Marshal(replay)
			if got := res.Content[0].(*mcp.TextContent).Text; got != string(want) {
				t.Fatalf("not lossless:\n got %s\nwant %s", got, want)
			}
			a.mu.Lock()
			selected := a.selected
			a.mu.Unlock()
			if len(selected) != 1 || selected[0] != "d2" {
				t.Fatalf("selected %v", selected)
			}
			// Same id, other request: the registry's conflict, relayed.
			env = callTool(t, cs, "view_devices__table__selectRows", map[string]any{"ids": []string{"d1"}}, mcp.Meta{mcpsurface.MetaInvocationID: "client-1"})
			requireCode(t, env, surface.CodeInvocationConflict)
		})
	}
}

// Capability failures are isError results carrying the full payload
// (code, message, retry, details), never protocol errors.
func TestTypedErrors_AS_ADAPTER_002(t *testing.T) {
	for _, version := range versions {
		t.Run(version, func(t *testing.T) {
			reg, _, _ := newApp(t)
			srv := newServer(t, reg, nil)
			cs := connect(t, srv, version, nil)
			env := callTool(t, cs, "view_devices__table__selectRows", map[string]any{"ids": "d1"}, nil)
			e := requireCode(t, env, surface.CodeInvalidInput)
			issues, _ := e.Details["issues"].([]any)
			if e.Retry != string(surface.RetryWithChanges) || e.Message == "" || len(issues) != 1 {
				t.Fatalf("%+v", e)
			}
			issue := issues[0].(map[string]any)
			if issue["path"] != "ids" { // AS-ADAPTER-002: spec issue paths relayed as they are
				t.Fatalf("%v", issue)
			}
			// Arguments the schema does not allow never reach the handler.
			env = callTool(t, cs, "view_devices__table__label", map[string]any{"label": "x", "extra": 1}, nil)
			requireCode(t, env, surface.CodeInvalidInput)

			// An unknown tool is the SDK's protocol error.
			_, err := cs.CallTool(bg, &mcp.CallToolParams{Name: "no_such_tool"})
			if err == nil {
				t.Fatal("unknown tool: no error")
			}
		})
	}
}

// Two-phase confirmation in direct mode: CONFIRMATION_REQUIRED, the user
// approves in the app, the agent retries with the confirmation id in
// _meta; it executes once, and a duplicate retry replays.
// AS-IDENT-006 through MCP.
func TestTwoPhaseConfirmation_AS_IDENT_006(t *testing.T) {
	for _, version := range versions {
		t.Run(version, func(t *testing.T) {
			reg, a, _ := newApp(t)
			srv := newServer(t, reg, nil)
			cs := connect(t, srv, version, nil)
			args := map[string]any{"ids": []string{"d1"}}

			first := callTool(t, cs, "view_devices__table__wipe", args, nil)
			e := requireCode(t, first, surface.CodeConfirmationRequired)
			cid, _ := e.Details["confirmationId"].(string)
			if cid == "" || e.Retry != string(surface.RetryWithConfirmation) || e.Details["summary"] == "" {
				t.Fatalf("%+v", e)
			}
			pending := reg.Confirmations().Pending()
			if len(pending) != 1 || pending[0].ConfirmationID != cid || pending[0].ConsumerKey != "mcp-bridge:agent" {
				t.Fatalf("pending %+v", pending)
			}
			if a.wipes.Load() != 0 {
				t.Fatal("ran before approval")
			}
			// Not approved yet: the same record again.
			again := callTool(t, cs, "view_devices__table__wipe", args, mcp.Meta{mcpsurface.MetaConfirmationID: cid})
			if requireCode(t, again, surface.CodeConfirmationRequired).Details["confirmationId"] != cid {
				t.Fatal("a pending retry must keep the id")
			}

			if !reg.Confirmations().Resolve(cid, surface.Resolution{Approved: true}) {
				t.Fatal("resolve")
			}
			ok := callTool(t, cs, "view_devices__table__wipe", args, mcp.Meta{mcpsurface.MetaConfirmationID: cid})
			requireOK(t, ok)
			if ok.InvocationID != first.InvocationID {
				t.Fatalf("the retry must reuse the first call's invocation id: %s vs %s", ok.InvocationID, first.InvocationID)
			}
			dup := callTool(t, cs, "view_devices__table__wipe", args, mcp.Meta{mcpsurface.MetaConfirmationID: cid})
			requireOK(t, dup)
			if n := a.wipes.Load(); n != 1 || dup.InvocationID != ok.InvocationID {
				t.Fatalf("executed %d times", n)
			}
			// A later plain call with the same arguments is a new request.
			if next := requireCode(t, callTool(t, cs, "view_devices__table__wipe", args, nil), surface.CodeConfirmationRequired); next.Details["confirmationId"] == cid {
				t.Fatal("an executed confirmation was presented again")
			}
			// Other arguments with that evidence: mismatch, nothing runs.
			other := callTool(t, cs, "view_devices__table__wipe", map[string]any{"ids": []string{"d9"}}, mcp.Meta{mcpsurface.MetaConfirmationID: cid})
			requireCode(t, other, surface.CodeConfirmationInvalid)
			if a.wipes.Load() != 1 {
				t.Fatal("ran with mismatched evidence")
			}
		})
	}
}

// A model in a host that cannot set _meta just calls the same tool again
// with the same arguments: the server presents the confirmation it
// issued. Approval executes once; a later identical call asks anew; a
// denial is reported, then the next call asks anew.
func TestTwoPhasePlainRetry(t *testing.T) {
	reg, a, _ := newApp(t)
	srv := newServer(t, reg, nil)
	cs := connect(t, srv, v2025, nil)
	args := map[string]any{"ids": []string{"d1", "d2"}}
	cidOf := func(env envelope) string {
		t.Helper()
		cid, _ := requireCode(t, env, surface.CodeConfirmationRequired).Details["confirmationId"].(string)
		return cid
	}

	cid := cidOf(callTool(t, cs, "view_devices__table__wipe", args, nil))
	if again := cidOf(callTool(t, cs, "view_devices__table__wipe", map[string]any{"ids": []string{"d1", "d2"}}, nil)); again != cid {
		t.Fatal("a pending re-call must show the same confirmation")
	}
	reg.Confirmations().Resolve(cid, surface.Resolution{Approved: true})
	requireOK(t, callTool(t, cs, "view_devices__table__wipe", args, nil))
	if a.wipes.Load() != 1 {
		t.Fatal("not executed")
	}
	next := cidOf(callTool(t, cs, "view_devices__table__wipe", args, nil))
	if next == cid || a.wipes.Load() != 1 {
		t.Fatal("a later identical call must ask again")
	}
	reg.Confirmations().Resolve(next, surface.Resolution{})
	if e := requireCode(t, callTool(t, cs, "view_devices__table__wipe", args, nil), surface.CodeConfirmationInvalid); e.Details["reason"] != "denied" {
		t.Fatalf("%+v", e)
	}
	if third := cidOf(callTool(t, cs, "view_devices__table__wipe", args, nil)); third == next || third == cid {
		t.Fatal("after a denial, a new call asks anew")
	}
	if a.wipes.Load() != 1 {
		t.Fatal("ran after a denial")
	}
}

// AS-ADAPTER-004: in meta mode surface_act carries the confirmation id (or
// _meta does), and the tool list is the constant meta block.
func TestMetaMode_AS_ADAPTER_004(t *testing.T) {
	for _, version := range versions {
		t.Run(version, func(t *testing.T) {
			reg, a, _ := newApp(t)
			srv := newServer(t, reg, &mcpsurface.Options{Mode: surface.ToolsetMeta})
			cs := connect(t, srv, version, nil)
			tools := listTools(t, cs)
			if names(tools) != "surface_act,surface_discover,surface_read" {
				t.Fatalf("%s", names(tools))
			}
			if ann := tools["surface_act"].Annotations; ann.ReadOnlyHint || !*ann.DestructiveHint || !*ann.OpenWorldHint {
				t.Fatalf("surface_act annotations %+v", ann)
			}
			if ann := tools["surface_read"].Annotations; !ann.ReadOnlyHint {
				t.Fatalf("surface_read annotations %+v", ann)
			}
			env := callTool(t, cs, "surface_discover", nil, nil)
			requireOK(t, env)
			if !strings.Contains(string(env.Output), `"view:devices.table.wipe"`) {
				t.Fatalf("%s", env.Output)
			}
			act := map[string]any{"capabilityId": "view:devices.table.wipe", "input": map[string]any{"ids": []string{"d1"}}, "invocationId": "m1"}
			cid, _ := requireCode(t, callTool(t, cs, "surface_act", act, nil), surface.CodeConfirmationRequired).Details["confirmationId"].(string)
			reg.Confirmations().Resolve(cid, surface.Resolution{Approved: true})
			act["confirmationId"] = cid
			requireOK(t, callTool(t, cs, "surface_act", act, nil))

			act2 := map[string]any{"capabilityId": "view:devices.table.wipe", "input": map[string]any{"ids": []string{"d2"}}}
			cid2, _ := requireCode(t, callTool(t, cs, "surface_act", act2, nil), surface.CodeConfirmationRequired).Details["confirmationId"].(string)
			reg.Confirmations().Resolve(cid2, surface.Resolution{Approved: true})
			requireOK(t, callTool(t, cs, "surface_act", act2, mcp.Meta{mcpsurface.MetaConfirmationID: cid2}))
			if n := a.wipes.Load(); n != 2 {
				t.Fatalf("executed %d times", n)
			}
		})
	}
}

// AS-STALE-001 through MCP: a confirmation retry targets the registration
// the confirmation was issued for; after a remount it is stale.
// AS-STALE-002: in meta mode a stale surfaceVersion stops a destructive
// procedure.
func TestStaleAfterRemount_AS_STALE_001_002(t *testing.T) {
	for _, version := range versions {
		t.Run(version, func(t *testing.T) {
			reg, a, h := newApp(t)
			srv := newServer(t, reg, nil)
			cs := connect(t, srv, version, nil)
			args := map[string]any{"ids": []string{"d1"}}
			cid, _ := requireCode(t, callTool(t, cs, "view_devices__table__wipe", args, nil), surface.CodeConfirmationRequired).Details["confirmationId"].(string)
			h.Unregister()
			surfacetest.MustRegister(t, reg, a.table("main"))
			reg.Confirmations().Resolve(cid, surface.Resolution{Approved: true})
			e := requireCode(t, callTool(t, cs, "view_devices__table__wipe", args, mcp.Meta{mcpsurface.MetaConfirmationID: cid}), surface.CodeStaleCapability)
			if e.Details["reason"] != "registration-replaced" || e.Retry != string(surface.RetryAfterRefresh) {
				t.Fatalf("%+v", e)
			}
			if a.wipes.Load() != 0 {
				t.Fatal("ran against a replaced registration")
			}

			meta := newServer(t, reg, &mcpsurface.Options{Mode: surface.ToolsetMeta})
			mcs := connect(t, meta, version, nil)
			surfacetest.MustRegister(t, reg, a.domainPanel())
			old := reg.Version()
			surfacetest.MustRegister(t, reg, a.table("side"))
			env := callTool(t, mcs, "surface_act", map[string]any{"capabilityId": "domain:devices.disable", "input": map[string]any{"ids": []string{"d1"}}, "surfaceVersion": old}, nil)
			if e := requireCode(t, env, surface.CodeStaleCapability); e.Details["reason"] != "surface-version-mismatch" {
				t.Fatalf("%+v", e)
			}
		})
	}
}

// Close is idempotent, ends the sessions and stops following the
// registry; a bad mode is an options error.
func TestServerClose(t *testing.T) {
	reg, a, _ := newApp(t)
	if _, err := mcpsurface.NewServer(reg, surface.Consumer{}, &mcpsurface.Options{Mode: "both"}); !errors.Is(err, surface.ErrToolsetOptions) {
		t.Fatalf("bad mode: %v", err)
	}
	if _, err := mcpsurface.NewServer(nil, surface.Consumer{}, nil); err == nil {
		t.Fatal("nil registry accepted")
	}
	srv, err := mcpsurface.NewServer(reg, surface.Consumer{ID: "x"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	st, ct := mcp.NewInMemoryTransports()
	ss, err := srv.MCP().Connect(bg, st, nil)
	if err != nil {
		t.Fatal(err)
	}
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "c", Version: "1"}, nil).Connect(bg, ct, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := srv.Close(); err != nil {
		t.Fatal(err)
	}
	if err := srv.Close(); err != nil {
		t.Fatal(err)
	}
	_ = ss.Wait()
	if _, err := cs.ListTools(bg, nil); err == nil {
		t.Fatal("session still open after Close")
	}
	_ = cs.Close()
	surfacetest.MustRegister(t, reg, a.domainPanel()) // no listener left to panic or leak
	if n := len(toolsOf(srv.MCP())); n != 5 {
		t.Fatalf("the tool list changed after Close: %d tools", n)
	}
}

// toolsOf lists a server's tools through a fresh session.
func toolsOf(s *mcp.Server) []*mcp.Tool {
	st, ct := mcp.NewInMemoryTransports()
	ss, err := s.Connect(bg, st, nil)
	if err != nil {
		return nil
	}
	defer ss.Wait()
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "c", Version: "1"}, nil).Connect(bg, ct, nil)
	if err != nil {
		return nil
	}
	defer cs.Close()
	res, err := cs.ListTools(bg, nil)
	if err != nil {
		return nil
	}
	return res.Tools
}

// A capability whose input is not a JSON object cannot be an MCP tool: it
// is left out and logged, and the others are served.
func TestNonObjectInputLeftOut(t *testing.T) {
	reg, _, _ := newApp(t)
	surfacetest.MustRegister(t, reg, surface.Component{Type: "tags", Description: "Tags", Actions: map[string]surface.Capability{
		"set": surface.Action(surface.ActionDef[[]string, surface.None]{Description: "Set tags", Effect: surface.EffectLocalState,
			Execute: func(context.Context, *surface.Call, []string) (surface.None, error) { return surface.None{}, nil }}),
	}})
	var logs bytes.Buffer
	srv := newServer(t, reg, &mcpsurface.Options{Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	cs := connect(t, srv, v2025, nil)
	tools := listTools(t, cs)
	if _, ok := tools["view_tags__set"]; ok || len(tools) != 5 {
		t.Fatalf("%s", names(tools))
	}
	if !strings.Contains(logs.String(), "view_tags__set") {
		t.Fatalf("not logged: %s", logs.String())
	}
}

// A server names itself with the module's version unless the application
// gives one: what `agentsurface version` prints, not a made-up constant.
func TestServerInfoVersion(t *testing.T) {
	reg, _, _ := newApp(t)
	cs := connect(t, newServer(t, reg, nil), versions[0], nil)
	if got, want := cs.InitializeResult().ServerInfo.Version, version.Module(); got != want || want == "" {
		t.Errorf("serverInfo.version %q, want %q", got, want)
	}
	named := newServer(t, reg, &mcpsurface.Options{Implementation: &mcp.Implementation{Name: "app", Version: "2.3.4"}})
	if got := connect(t, named, versions[0], nil).InitializeResult().ServerInfo; got.Name != "app" || got.Version != "2.3.4" {
		t.Errorf("an application's own name and version: %+v", got)
	}
}
