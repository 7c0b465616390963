package surface_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"testing/synctest"

	"github.com/agentsurface/agentsurface/surface"
	"github.com/agentsurface/agentsurface/surface/surfacetest"
)

func newToolset(t *testing.T, reg *surface.Registry, opts surface.ToolsetOptions) *surface.Toolset {
	t.Helper()
	if opts.Topology == "" && opts.Confirmations == "" {
		opts.Topology = surface.TopologyRemote
	}
	ts, err := surface.NewToolset(reg, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ts.Close() })
	return ts
}

func toolNamed(t *testing.T, tools []surface.Tool, name string) surface.Tool {
	t.Helper()
	for _, tool := range tools {
		if tool.Name == name {
			return tool
		}
	}
	t.Fatalf("no tool %s in %v", name, names(tools))
	return surface.Tool{}
}

func names(tools []surface.Tool) []string {
	var out []string
	for _, t := range tools {
		out = append(out, t.Name)
	}
	return out
}

// AS-TOPO-001: a toolset needs a topology or a confirmation mode.
// AS-TOPO-002: embedded → wait, remote → two-phase, explicit wins.
func TestToolsetTopology_AS_TOPO_001_002(t *testing.T) {
	reg := surfacetest.NewRegistry(t, nil)
	if _, err := surface.NewToolset(reg, surface.ToolsetOptions{}); !errors.Is(err, surface.ErrToolsetOptions) {
		t.Fatalf("no topology: %v", err)
	}
	if _, err := surface.NewToolset(reg, surface.ToolsetOptions{Topology: surface.TopologyRemote, Budget: &surface.Budget{MaxComponents: 1}}); !errors.Is(err, surface.ErrToolsetOptions) {
		t.Fatalf("budget in direct mode: %v", err)
	}
	for _, c := range []struct {
		opts surface.ToolsetOptions
		want surface.ConfirmationMode
	}{
		{surface.ToolsetOptions{Topology: surface.TopologyEmbedded}, surface.ConfirmationModeWait},
		{surface.ToolsetOptions{Topology: surface.TopologyRemote}, surface.ConfirmationModeTwoPhase},
		{surface.ToolsetOptions{Topology: surface.TopologyRemote, Confirmations: surface.ConfirmationModeWait}, surface.ConfirmationModeWait},
		{surface.ToolsetOptions{Confirmations: surface.ConfirmationModeTwoPhase}, surface.ConfirmationModeTwoPhase},
	} {
		ts := newToolset(t, reg, c.opts)
		if ts.ConfirmationMode() != c.want {
			t.Errorf("%+v: %s", c.opts, ts.ConfirmationMode())
		}
	}
}

// AS-ADAPTER-001: tools carry tokens, map to ids, refresh, unique names.
// AS-CACHE-001: no live state in tool descriptions.
// AS-CACHE-002: definitions byte-stable across availability/note changes.
// AS-CACHE-003: state.note carries the binding note.
func TestDirectToolset_AS_ADAPTER_001_AS_CACHE_001_003(t *testing.T) {
	reg, _ := newDomainRegistry(t, nil)
	sel := &selection{ids: []string{"d1"}}
	p := newProbe()
	a := p.component("main")
	a.Procedures = []surface.Capability{disableRef(sel, surface.EffectDestructive)}
	ha := surfacetest.MustRegister(t, reg, a)
	hs := surfacetest.MustRegister(t, reg, p.component("side"))
	ts := newToolset(t, reg, surface.ToolsetOptions{Consumer: surface.Consumer{ID: "m"}})
	tools := ts.Tools()
	got := strings.Join(names(tools), ",")
	want := "view_devices__table__readState_at_main,view_devices__table__open_at_main,view_devices__table__selectRows_at_main," +
		"view_devices__table__readState_at_side,view_devices__table__open_at_side,view_devices__table__selectRows_at_side,domain_devices__disable"
	if got != want {
		t.Fatalf("names\n%s\nwant\n%s", got, want)
	}
	sel2 := toolNamed(t, tools, "view_devices__table__selectRows_at_main")
	if sel2.Description != "[view · local-state] Selects" || sel2.RegistrationID != ha.ID() || sel2.SurfaceVersion != "2" || sel2.InstanceID != "main" {
		t.Fatalf("%+v", sel2)
	}
	dis := toolNamed(t, tools, "domain_devices__disable")
	if dis.Description != "[domain · destructive · requires confirmation] Disable devices" || dis.State.Note != "d1 selected" {
		t.Fatalf("%+v", dis)
	}
	if ro := toolNamed(t, tools, "view_devices__table__readState_at_main"); ro.InputSchema != `{"type":"object","properties":{},"additionalProperties":false}` || ro.Description != "[view · read] Reads" {
		t.Fatalf("%+v", ro)
	}
	if m := ts.WireNames(); m["domain_devices__disable"] != "domain:devices.disable" || len(m) != 7 {
		t.Fatalf("%v", m)
	}
	// Availability and notes change state only; definitions are byte-stable.
	defs := func(tools []surface.Tool) string {
		var b strings.Builder
		for _, t := range tools {
			b.WriteString(t.Name + "|" + t.Description + "|" + string(t.InputSchema) + "\n")
		}
		return b.String()
	}
	before := defs(tools)
	var notified atomic.Int64
	ts.Subscribe(func(*surface.Catalog) { notified.Add(1) })
	ha.Update(surface.Update{Availability: map[string]surface.Availability{"selectRows": {Reason: "Busy"}}})
	sel.set("d1", "d2")
	after := ts.Tools()
	if defs(after) != before {
		t.Fatalf("definitions changed:\n%s\n%s", before, defs(after))
	}
	if st := toolNamed(t, after, "view_devices__table__selectRows_at_main").State; st.Available || st.UnavailableReason != "Busy" {
		t.Fatalf("%+v", st)
	}
	if toolNamed(t, after, "domain_devices__disable").State.Note != "d1,d2 selected" {
		t.Fatal("note not live")
	}
	if notified.Load() != 1 {
		t.Fatalf("availability flip notified %d times", notified.Load())
	}
	// Unmounting the side instance drops the suffixes and notifies again.
	hs.Unregister()
	if got := strings.Join(names(ts.Tools()), ","); got != "view_devices__table__readState,view_devices__table__open,view_devices__table__selectRows,domain_devices__disable" || notified.Load() != 2 {
		t.Fatalf("%s (%d notifications)", got, notified.Load())
	}
}

// AS-ADAPTER-002: results are relayed losslessly; the tool-call id is the
// invocation id.
func TestToolsetCall_AS_ADAPTER_002(t *testing.T) {
	reg := surfacetest.NewRegistry(t, nil)
	p := newProbe()
	surfacetest.MustRegister(t, reg, p.component("main"))
	ts := newToolset(t, reg, surface.ToolsetOptions{})
	ts.Tools()
	res := ts.Call(bg, "view_devices__table__selectRows", json.RawMessage(`{"ids":["d1"]}`), surface.CallOptions{ToolCallID: "toolu_01"})
	direct := reg.Invoke(bg, surface.Invocation{InvocationID: "toolu_01", CapabilityID: selectID, Input: json.RawMessage(`{"ids":["d1"]}`),
		RegistrationID: surfacetest.UniqueRegistration(reg, selectID), SurfaceVersion: "1"}, surface.InvokeOptions{})
	if res != direct || res.InvocationID != "toolu_01" || p.calls.Load() != 1 {
		t.Fatalf("%+v\n%+v", res, direct)
	}
	e := surfacetest.RequireCode(t, ts.Call(bg, "view_devices__table__selectRows", json.RawMessage(`{"ids":"x"}`), surface.CallOptions{}), surface.CodeInvalidInput)
	if len(e.Details["issues"].([]surface.Issue)) != 1 {
		t.Fatalf("%+v", e)
	}
	res = ts.Call(bg, "no_such_tool", nil, surface.CallOptions{ToolCallID: "t9"})
	if res.Error.Code != surface.CodeCapabilityNotFound || res.CapabilityID != "no_such_tool" || res.InvocationID != "t9" {
		t.Fatalf("%+v", res)
	}
}

// AS-TOPO-003: wait mode waits for the user and retries once; Close ends
// waits with the original result; denials are not retried.
func TestToolsetWait_AS_TOPO_003(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		reg := surface.New(nil)
		defer reg.Close()
		var ran atomic.Int64
		surfacetest.MustRegister(t, reg, dangerous(&ran, nil))
		ts, _ := surface.NewToolset(reg, surface.ToolsetOptions{Topology: surface.TopologyEmbedded})
		defer ts.Close()
		ts.Tools()
		done := make(chan surface.Result)
		go func() {
			done <- ts.Call(bg, "view_devices__wipe", json.RawMessage(`{"ids":["d1"]}`), surface.CallOptions{ToolCallID: "c1"})
		}()
		synctest.Wait()
		pending := reg.Confirmations().Pending()
		if len(pending) != 1 {
			t.Fatal("no pending confirmation")
		}
		reg.Confirmations().Resolve(pending[0].ConfirmationID, surface.Resolution{Approved: true})
		surfacetest.RequireOK(t, <-done)
		if ran.Load() != 1 {
			t.Fatal("not executed once")
		}
		go func() {
			done <- ts.Call(bg, "view_devices__wipe", json.RawMessage(`{"ids":["d2"]}`), surface.CallOptions{ToolCallID: "c2"})
		}()
		synctest.Wait()
		reg.Confirmations().Resolve(reg.Confirmations().Pending()[0].ConfirmationID, surface.Resolution{})
		if e := surfacetest.RequireCode(t, <-done, surface.CodeConfirmationInvalid); e.Details["reason"] != "denied" {
			t.Fatalf("%+v", e)
		}
		go func() {
			done <- ts.Call(bg, "view_devices__wipe", json.RawMessage(`{"ids":["d3"]}`), surface.CallOptions{ToolCallID: "c3"})
		}()
		synctest.Wait()
		_ = ts.Close()
		surfacetest.RequireCode(t, <-done, surface.CodeConfirmationRequired)
		if ran.Load() != 1 {
			t.Fatal("ran after a denial or a close")
		}
	})
}

func metaCall(ts *surface.Toolset, name, args string) surface.Result {
	var raw json.RawMessage
	if args != "" {
		raw = json.RawMessage(args)
	}
	return ts.Call(bg, name, raw, surface.CallOptions{})
}

func discovered(t *testing.T, res surface.Result) (types []string, rejected []string, truncated bool) {
	t.Helper()
	surfacetest.RequireOK(t, res)
	var out struct {
		Components []struct {
			Type string `json:"type"`
		} `json:"components"`
		Truncated     *struct{} `json:"truncated"`
		ScopeRejected *struct {
			Prefixes []string `json:"prefixes"`
		} `json:"scopeRejected"`
	}
	if err := json.Unmarshal([]byte(res.Output), &out); err != nil {
		t.Fatal(err)
	}
	for _, c := range out.Components {
		types = append(types, c.Type)
	}
	if out.ScopeRejected != nil {
		rejected = out.ScopeRejected.Prefixes
	}
	return types, rejected, out.Truncated != nil
}

// AS-META-001, AS-META-002, AS-META-005, AS-META-006, AS-ADAPTER-005:
// the configured scope is a floor the model can only narrow; a disjoint
// scope gives nothing, not the floor; refused prefixes are reported; the
// meta tool block is constant.
func TestMetaDiscover_AS_META_001_002_005_006_AS_ADAPTER_005(t *testing.T) {
	reg := surfacetest.NewRegistry(t, nil)
	for _, typ := range []string{"devices.table", "devices.drawer", "settings.users", "billing"} {
		surfacetest.MustRegister(t, reg, simple(typ, ""))
	}
	ts := newToolset(t, reg, surface.ToolsetOptions{Mode: surface.ToolsetMeta, Scope: []string{"devices", "settings"}})
	blockBefore, _ := json.Marshal(ts.Tools())
	types, _, _ := discovered(t, metaCall(ts, surface.MetaDiscover, ""))
	if strings.Join(types, ",") != "devices.drawer,devices.table,settings.users" {
		t.Fatalf("floor: %v", types)
	}
	types, rejected, _ := discovered(t, metaCall(ts, surface.MetaDiscover, `{"scope":["devices.table","billing","billing"]}`))
	if strings.Join(types, ",") != "devices.table" || strings.Join(rejected, ",") != "billing" {
		t.Fatalf("narrowed: %v rejected %v", types, rejected)
	}
	types, rejected, truncated := discovered(t, metaCall(ts, surface.MetaDiscover, `{"scope":["billing"]}`))
	if len(types) != 0 || strings.Join(rejected, ",") != "billing" || truncated {
		t.Fatalf("disjoint: %v %v", types, rejected)
	}
	types, _, _ = discovered(t, metaCall(ts, surface.MetaDiscover, `{"scope":["settings.users.x", "devices"]}`))
	if strings.Join(types, ",") != "devices.drawer,devices.table" {
		t.Fatalf("%v", types)
	}
	surfacetest.MustRegister(t, reg, simple("devices.extra", ""))
	blockAfter, _ := json.Marshal(ts.Tools())
	if string(blockBefore) != string(blockAfter) || len(ts.Tools()) != 3 {
		t.Fatal("the meta tool block must be constant")
	}
}

// AS-META-003: budget truncation is marked in a valid payload.
func TestMetaBudget_AS_META_003(t *testing.T) {
	reg := surfacetest.NewRegistry(t, nil)
	for _, typ := range []string{"a", "b", "c"} {
		surfacetest.MustRegister(t, reg, simple(typ, ""))
	}
	ts := newToolset(t, reg, surface.ToolsetOptions{Mode: surface.ToolsetMeta, Budget: &surface.Budget{MaxComponents: 2}})
	types, _, truncated := discovered(t, metaCall(ts, surface.MetaDiscover, `{}`))
	if len(types) != 2 || !truncated {
		t.Fatalf("%v %v", types, truncated)
	}
}

// AS-META-004 and AS-ADAPTER-004: surface_act resolves, confirms and
// checks staleness like direct mode.
func TestMetaAct_AS_META_004_AS_ADAPTER_004(t *testing.T) {
	reg := surfacetest.NewRegistry(t, nil)
	var ran atomic.Int64
	h := surfacetest.MustRegister(t, reg, dangerous(&ran, nil))
	ts := newToolset(t, reg, surface.ToolsetOptions{Mode: surface.ToolsetMeta})
	res := metaCall(ts, surface.MetaAct, `{"capabilityId":"view:devices.wipe","input":{"ids":["d1"]},"invocationId":"x1"}`)
	id := requireConfirmation(t, res)
	reg.Confirmations().Resolve(id, surface.Resolution{Approved: true})
	surfacetest.RequireOK(t, metaCall(ts, surface.MetaAct, `{"capabilityId":"view:devices.wipe","input":{"ids":["d1"]},"invocationId":"x1","confirmationId":"`+id+`"}`))
	if ran.Load() != 1 {
		t.Fatal("not executed")
	}
	// Staleness beats approval: after a remount, the old evidence does not
	// carry over (the digest binds the registration).
	h.Unregister()
	surfacetest.MustRegister(t, reg, dangerous(&ran, nil))
	if r := invalidReason(t, metaCall(ts, surface.MetaAct, `{"capabilityId":"view:devices.wipe","input":{"ids":["d1"]},"confirmationId":"`+id+`"}`)); r != "consumed" && r != "mismatch" {
		t.Fatal(r)
	}
	// Reading sends no input: the registry validates, as for any call.
	surfacetest.RequireCode(t, metaCall(ts, surface.MetaRead, `{"capabilityId":"view:devices.wipe"}`), surface.CodeInvalidInput)
	if ran.Load() != 1 {
		t.Fatal("ran again")
	}
}

// AS-META-007: each verb validates its own envelope.
// AS-META-008: input must be an object; a JSON string is repaired only
// for object targets.
func TestMetaEnvelope_AS_META_007_008(t *testing.T) {
	reg := surfacetest.NewRegistry(t, nil)
	p := newProbe()
	surfacetest.MustRegister(t, reg, p.component("main"))
	ts := newToolset(t, reg, surface.ToolsetOptions{Mode: surface.ToolsetMeta})
	for _, c := range []struct {
		name, args, path, capID string
	}{
		{surface.MetaRead, `{}`, "capabilityId", "meta:surface.read"},
		{surface.MetaRead, `{"capabilityId":""}`, "capabilityId", "meta:surface.read"},
		{surface.MetaRead, `{"capabilityId":"view:x.y","extra":1}`, "extra", "view:x.y"},
		{surface.MetaDiscover, `{"scope":"devices"}`, "scope", "meta:surface.discover"},
		{surface.MetaDiscover, `{"scope":[1]}`, "scope[0]", "meta:surface.discover"},
		{surface.MetaDiscover, `[1]`, "", "meta:surface.discover"},
		{surface.MetaAct, `{"capabilityId":"view:devices.table.selectRows","ids":["d1"]}`, "ids", "view:devices.table.selectRows"},
		{surface.MetaAct, `{"capabilityId":"view:devices.table.selectRows","input":[1]}`, "input", "view:devices.table.selectRows"},
	} {
		res := metaCall(ts, c.name, c.args)
		e := surfacetest.RequireCode(t, res, surface.CodeInvalidInput)
		issues := e.Details["issues"].([]surface.Issue)
		if issues[0].Path != c.path || res.CapabilityID != c.capID {
			t.Errorf("%s %s: %+v %s", c.name, c.args, issues, res.CapabilityID)
		}
	}
	if p.calls.Load() != 0 {
		t.Fatal("an invalid envelope reached a handler")
	}
	// String input repaired for an object target.
	surfacetest.RequireOK(t, metaCall(ts, surface.MetaAct, `{"capabilityId":"view:devices.table.selectRows","input":"{\"ids\":[\"d1\"]}"}`))
	surfacetest.RequireOK(t, metaCall(ts, surface.MetaRead, `{"capabilityId":"view:devices.table.readState"}`))
	surfacetest.RequireCode(t, metaCall(ts, surface.MetaRead, `null`), surface.CodeInvalidInput)
	surfacetest.RequireOK(t, metaCall(ts, surface.MetaDiscover, `null`))
}

// A Tools call between a surface change and the toolset's own refresh
// must not swallow the notification; a policy decision that changes
// without a version bump still shows in Tools.
func TestToolsetNotificationsAndPolicyDrift(t *testing.T) {
	var user atomic.Value
	user.Store("")
	reg := surfacetest.NewRegistry(t, &surface.Options{
		Context:  func() map[string]any { return map[string]any{"user": user.Load()} },
		Policies: []surface.Policy{surface.Authenticated("")},
	})
	var ts *surface.Toolset
	reg.Subscribe(func(e surface.Event) { // runs before the toolset's own listener
		if _, ok := e.(surface.SurfaceChanged); ok && ts != nil {
			ts.Tools()
		}
	})
	ts = newToolset(t, reg, surface.ToolsetOptions{})
	var notified atomic.Int64
	ts.Subscribe(func(*surface.Catalog) { notified.Add(1) })
	user.Store("u1")
	surfacetest.MustRegister(t, reg, newProbe().component("main"))
	if notified.Load() != 1 {
		t.Fatalf("%d notifications", notified.Load())
	}
	if n := len(ts.Tools()); n != 3 {
		t.Fatalf("%d tools", n)
	}
	user.Store("") // signed out: no version bump, but the tools are gone
	if n := len(ts.Tools()); n != 0 {
		t.Fatalf("%d tools after sign-out", n)
	}
}

// A wait-mode retry is not made stale by an unrelated change while the
// user decides.
func TestToolsetWaitSurvivesUnrelatedChange(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		reg := surface.New(nil)
		defer reg.Close()
		d := newDomain()
		reg.SetProcedureExecutor(d)
		sel := &selection{ids: []string{"d1"}}
		surfacetest.MustRegister(t, reg, tableWithRef(disableRef(sel, surface.EffectDestructive)))
		ts, _ := surface.NewToolset(reg, surface.ToolsetOptions{Topology: surface.TopologyEmbedded})
		defer ts.Close()
		ts.Tools()
		done := make(chan surface.Result)
		go func() {
			done <- ts.Call(bg, "domain_devices__disable", json.RawMessage(`{"reason":"r"}`), surface.CallOptions{ToolCallID: "c1"})
		}()
		synctest.Wait()
		surfacetest.MustRegister(t, reg, simple("approval.dialog", "")) // the approval UI mounts
		reg.Confirmations().Resolve(reg.Confirmations().Pending()[0].ConfirmationID, surface.Resolution{Approved: true})
		surfacetest.RequireOK(t, <-done)
		if len(d.recorded()) != 1 {
			t.Fatal("not executed")
		}
	})
}

// Tools skips the snapshot only while nothing can have
// changed: a static catalog (no When, no discovery policy, no Describe)
// at an unchanged version. Live parts are re-read on every call.
func TestToolsStatesStayLive(t *testing.T) {
	reg := surfacetest.NewRegistry(t, nil)
	var open atomic.Bool
	h := surfacetest.MustRegister(t, reg, surface.Component{Type: "door", Description: "Door", Actions: map[string]surface.Capability{
		"push": surfacetest.Noop("Pushes", surface.EffectLocalState),
	}})
	ts := newToolset(t, reg, surface.ToolsetOptions{Consumer: surface.Consumer{ID: "m"}})
	state := func(name string) surface.ToolState { return toolNamed(t, ts.Tools(), name).State }
	if st := state("view_door__push"); !st.Available {
		t.Fatalf("static catalog: %+v", st)
	}
	h.Update(surface.Update{Availability: map[string]surface.Availability{"push": {Reason: "Locked"}}})
	if st := state("view_door__push"); st.Available || st.UnavailableReason != "Locked" {
		t.Fatalf("after an override: %+v", st)
	}
	// A When predicate makes the catalog live: its answer shows without
	// any version bump.
	gate := surfacetest.MustRegister(t, reg, surface.Component{Type: "gate", Description: "Gate", Actions: map[string]surface.Capability{
		"pass": surface.Action(surface.ActionDef[surface.None, surface.None]{
			Description: "Passes", Effect: surface.EffectLocalState, When: open.Load, UnavailableReason: "Closed",
			Execute: func(context.Context, *surface.Call, surface.None) (surface.None, error) { return surface.None{}, nil }}),
	}})
	version := reg.Version()
	if st := state("view_gate__pass"); st.Available || st.UnavailableReason != "Closed" {
		t.Fatalf("closed gate: %+v", st)
	}
	open.Store(true)
	if st := state("view_gate__pass"); !st.Available || reg.Version() != version {
		t.Fatalf("opened gate: %+v (version %s, was %s)", st, reg.Version(), version)
	}
	// Closing the registry empties the catalog, though the version stays.
	gate.Unregister()
	if tools := ts.Tools(); len(tools) != 1 { // static again: the door alone
		t.Fatalf("after the gate left: %d tools", len(tools))
	}
	_ = reg.Close()
	if tools := ts.Tools(); len(tools) != 0 {
		t.Fatalf("after Close: %d tools", len(tools))
	}
}

// On a closed registry a catalog is empty, and a call of any tool says
// the surface is closed (CANCELLED, retry no) rather than that the tool
// does not exist.
func TestToolsetOnClosedRegistry(t *testing.T) {
	reg := surface.New(nil)
	surfacetest.MustRegister(t, reg, newProbe().component("main"))
	ts := newToolset(t, reg, surface.ToolsetOptions{})
	shown := ts.Catalog()
	_ = reg.Close()
	if n := len(ts.Catalog().Tools()); n != 0 {
		t.Fatalf("%d tools after Close", n)
	}
	for _, res := range []surface.Result{
		ts.Call(bg, "view_devices__table__selectRows", json.RawMessage(`{"ids":[]}`), surface.CallOptions{}),
		shown.Call(bg, "view_devices__table__selectRows", json.RawMessage(`{"ids":[]}`), surface.CallOptions{}),
	} {
		if e := surfacetest.RequireCode(t, res, surface.CodeCancelled); e.Retry != surface.RetryNo {
			t.Fatalf("%+v", e)
		}
	}
}
