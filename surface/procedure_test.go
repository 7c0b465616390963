package surface_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/agentsurface/agentsurface/surface"
	"github.com/agentsurface/agentsurface/surface/surfacetest"
)

type disableIn struct {
	IDs    []string `json:"ids" jsonschema:"Device ids to disable"`
	Reason string   `json:"reason" jsonschema:"Why"`
	Notify bool     `json:"notify,omitempty"`
}

type disableOut struct {
	Disabled int `json:"disabled"`
}

// domain is an in-process executor with one procedure that records calls.
type domain struct {
	*surface.FuncExecutor
	mu    sync.Mutex
	calls []surface.ProcedureCall
	fail  error
}

func newDomain() *domain {
	d := &domain{FuncExecutor: surface.NewFuncExecutor()}
	surface.AddFunc(d.FuncExecutor, "devices.disable", func(_ context.Context, call *surface.ProcedureCall, in disableIn) (disableOut, error) {
		d.mu.Lock()
		defer d.mu.Unlock()
		d.calls = append(d.calls, *call)
		if d.fail != nil {
			return disableOut{}, d.fail
		}
		return disableOut{Disabled: len(in.IDs)}, nil
	})
	surface.AddFunc(d.FuncExecutor, "devices.list", func(context.Context, *surface.ProcedureCall, surface.None) ([]string, error) {
		return []string{"d1", "d2"}, nil
	})
	return d
}

func (d *domain) recorded() []surface.ProcedureCall {
	d.mu.Lock()
	defer d.mu.Unlock()
	return append([]surface.ProcedureCall(nil), d.calls...)
}

// selection is live UI state.
type selection struct {
	mu   sync.Mutex
	ids  []string
	fail bool
}

func (s *selection) set(ids ...string) { s.mu.Lock(); s.ids = ids; s.mu.Unlock() }

func (s *selection) bind(context.Context) (map[string]any, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.fail {
		return nil, errors.New("selection store unavailable")
	}
	return map[string]any{"ids": append([]string(nil), s.ids...)}, nil
}

func disableRef(sel *selection, effect surface.Effect, overridable ...string) surface.Capability {
	return surface.Procedure(surface.ProcedureDef[disableIn, disableOut]{
		ID: "domain:devices.disable", Description: "Disable devices", Effect: effect,
		Bound: []string{"ids"}, Bind: sel.bind, Overridable: overridable,
		Describe: func() string {
			sel.mu.Lock()
			defer sel.mu.Unlock()
			return strings.Join(sel.ids, ",") + " selected"
		},
	})
}

func tableWithRef(ref surface.Capability) surface.Component {
	return surface.Component{Type: "devices.table", InstanceID: "main", Description: "Devices table",
		Observations: map[string]surface.Capability{"readState": surfacetest.Value("Reads", 1)},
		Procedures:   []surface.Capability{ref}}
}

func newDomainRegistry(t *testing.T, opts *surface.Options) (*surface.Registry, *domain) {
	reg := surfacetest.NewRegistry(t, opts)
	d := newDomain()
	reg.SetProcedureExecutor(d)
	return reg, d
}

func procs(reg *surface.Registry) []surface.ProcedureDescriptor {
	return reg.Snapshot(surface.SnapshotOptions{}).Procedures
}

// AS-BIND-001: the agent's schema is the full schema minus locked bound
// fields; overridable ones get a note; required adjusted.
func TestSchemaSurgery_AS_BIND_001(t *testing.T) {
	cases := []struct {
		name        string
		overridable []string
		bind        bool
		want        string
	}{
		// As authored: properties in struct field order (semantics §10.8).
		{"none bound", nil, false, `{"type":"object","properties":{"ids":{"type":"array","items":{"type":"string"},"description":"Device ids to disable"},"reason":{"type":"string","description":"Why"},"notify":{"type":"boolean"}},"required":["ids","reason"],"additionalProperties":false}`},
		{"locked", nil, true, `{"type":"object","properties":{"reason":{"type":"string","description":"Why"},"notify":{"type":"boolean"}},"required":["reason"],"additionalProperties":false}`},
		{"overridable", []string{"ids"}, true, `{"type":"object","properties":{"ids":{"type":"array","items":{"type":"string"},"description":"Device ids to disable Defaults to the value selected in the UI when omitted."},"reason":{"type":"string","description":"Why"},"notify":{"type":"boolean"}},"required":["reason"],"additionalProperties":false}`},
	}
	for _, c := range cases {
		reg, _ := newDomainRegistry(t, nil)
		sel := &selection{ids: []string{"d1"}}
		def := surface.ProcedureDef[disableIn, disableOut]{ID: "domain:devices.disable", Description: "Disable devices",
			Effect: surface.EffectServerMutation, Overridable: c.overridable}
		if c.bind {
			def.Bound, def.Bind = []string{"ids"}, sel.bind
		}
		surfacetest.MustRegister(t, reg, tableWithRef(surface.Procedure(def)))
		p := procs(reg)
		if len(p) != 1 || string(p[0].InputSchema) != c.want {
			t.Fatalf("%s:\n%s\nwant\n%s", c.name, p[0].InputSchema, c.want)
		}
		if c.bind && (len(p[0].BoundFields) != 1 || p[0].BoundFields[0].Locked == (len(c.overridable) > 0) || p[0].BoundFields[0].Source != "ui-state") {
			t.Fatalf("%s: %+v", c.name, p[0].BoundFields)
		}
	}
	// Everything bound: exactly the empty object schema.
	type onlyIDs struct {
		IDs []string `json:"ids"`
	}
	reg := surfacetest.NewRegistry(t, nil)
	x := surface.NewFuncExecutor()
	surface.AddFunc(x, "devices.clear", func(context.Context, *surface.ProcedureCall, onlyIDs) (surface.None, error) {
		return surface.None{}, nil
	})
	reg.SetProcedureExecutor(x)
	surfacetest.MustRegister(t, reg, tableWithRef(surface.Procedure(surface.ProcedureDef[onlyIDs, surface.None]{
		ID: "domain:devices.clear", Description: "Clear", Effect: surface.EffectServerMutation, Bound: []string{"ids"}, Bind: (&selection{ids: []string{"a"}}).bind})))
	if got := procs(reg)[0].InputSchema; got != `{"type":"object","properties":{},"additionalProperties":false}` {
		t.Fatalf("all bound: %s", got)
	}
}

// AS-BIND-002: bound fields are locked by default; overridable ones
// default to the bound value; the merge is validated again.
func TestBindingMerge_AS_BIND_002(t *testing.T) {
	reg, d := newDomainRegistry(t, nil)
	sel := &selection{ids: []string{"d1", "d2"}}
	surfacetest.MustRegister(t, reg, tableWithRef(disableRef(sel, surface.EffectServerQuery)))
	call := func(input string) surface.Result {
		return reg.Invoke(bg, inv("", "domain:devices.disable", input), as("a"))
	}
	res := call(`{"reason":"maintenance"}`)
	surfacetest.RequireOK(t, res)
	if res.Output != `{"disabled":2}` || string(d.recorded()[0].Input) != `{"ids":["d1","d2"],"reason":"maintenance"}` {
		t.Fatalf("%s %s", res.Output, d.recorded()[0].Input)
	}
	e := surfacetest.RequireCode(t, call(`{"reason":"x","ids":["d9"],"notify":true}`), surface.CodeInvalidInput)
	if lf, _ := e.Details["lockedFields"].([]string); len(lf) != 1 || lf[0] != "ids" || len(e.Details) != 1 {
		t.Fatalf("%+v", e)
	}
	surfacetest.RequireCode(t, call(`{"ids":["d9"]}`), surface.CodeInvalidInput) // reason missing too, but locked first
	surfacetest.RequireCode(t, call(`{}`), surface.CodeInvalidInput)             // reduced schema: reason required
	surfacetest.RequireCode(t, call(`[1]`), surface.CodeInvalidInput)
	// A bound value the full schema rejects: binding-failed.
	sel.mu.Lock()
	sel.ids = nil
	sel.mu.Unlock()
	e = surfacetest.RequireCode(t, call(`{"reason":"x"}`), surface.CodePreconditionFailed)
	if e.Details["reason"] != "binding-failed" || e.Retry != surface.RetryAfterRefresh {
		t.Fatalf("%+v", e)
	}

	// Overridable: the agent may set it; otherwise the bound value is used.
	reg2, d2 := newDomainRegistry(t, nil)
	sel2 := &selection{ids: []string{"d1"}}
	surfacetest.MustRegister(t, reg2, tableWithRef(disableRef(sel2, surface.EffectServerQuery, "ids")))
	surfacetest.RequireOK(t, reg2.Invoke(bg, inv("", "domain:devices.disable", `{"reason":"r"}`), as("a")))
	surfacetest.RequireOK(t, reg2.Invoke(bg, inv("", "domain:devices.disable", `{"reason":"r","ids":["d7"]}`), as("a")))
	got := d2.recorded()
	if string(got[0].Input) != `{"ids":["d1"],"reason":"r"}` || string(got[1].Input) != `{"ids":["d7"],"reason":"r"}` {
		t.Fatalf("%s / %s", got[0].Input, got[1].Input)
	}
}

// AS-BIND-003: references outside the executor's manifest (or without an
// executor) register nothing.
func TestManifest_AS_BIND_003(t *testing.T) {
	reg := surfacetest.NewRegistry(t, nil)
	ref := surface.Procedure(surface.ProcedureDef[disableIn, disableOut]{ID: "domain:devices.disable", Description: "Disable", Effect: surface.EffectServerMutation})
	_, err := reg.Register(tableWithRef(ref))
	surfacetest.RequireDefinitionError(t, err, surface.DefinitionPlaneViolation)
	reg.SetProcedureExecutor(newDomain())
	other := surface.Procedure(surface.ProcedureDef[disableIn, disableOut]{ID: "domain:users.delete", Description: "Delete users", Effect: surface.EffectDestructive})
	_, err = reg.Register(tableWithRef(other))
	surfacetest.RequireDefinitionError(t, err, surface.DefinitionPlaneViolation)
	if n := len(reg.Snapshot(surface.SnapshotOptions{}).Components); n != 0 || reg.Version() != "0" {
		t.Fatal("a rejected definition registered something")
	}
	surfacetest.RequireCode(t, reg.Invoke(bg, inv("", "domain:users.delete", `{}`), as("a")), surface.CodeCapabilityNotFound)
	// Plane rule both ways.
	view := surface.Procedure(surface.ProcedureDef[disableIn, disableOut]{ID: "domain:devices.disable", Description: "Disable", Effect: surface.EffectLocalState})
	_, err = reg.Register(tableWithRef(view))
	surfacetest.RequireDefinitionError(t, err, surface.DefinitionPlaneViolation)
}

// AS-BIND-004: the binding lives with its registration and reads live
// state at every call; the note is live, the description stable
// (AS-CACHE-004).
func TestBindingLifecycle_AS_BIND_004_AS_CACHE_004(t *testing.T) {
	reg, d := newDomainRegistry(t, nil)
	sel := &selection{ids: []string{"d1"}}
	h := surfacetest.MustRegister(t, reg, tableWithRef(disableRef(sel, surface.EffectServerQuery)))
	before := procs(reg)[0]
	sel.set("d2", "d3")
	after := procs(reg)[0]
	if before.Description != after.Description || before.InputSchema != after.InputSchema || before.ContextualNote == after.ContextualNote {
		t.Fatalf("before %+v\nafter %+v", before, after)
	}
	if after.ContextualNote != "d2,d3 selected" || reg.Version() != "1" {
		t.Fatalf("note %q version %s", after.ContextualNote, reg.Version())
	}
	surfacetest.RequireOK(t, reg.Invoke(bg, inv("", "domain:devices.disable", `{"reason":"r"}`), as("a")))
	if got := string(d.recorded()[0].Input); got != `{"ids":["d2","d3"],"reason":"r"}` {
		t.Fatal(got)
	}
	if p := after; p.Context == nil || p.Context.Type != "devices.table" || p.Context.InstanceID != "main" || p.RegistrationID != h.ID() {
		t.Fatalf("%+v", p)
	}
	h.Unregister()
	if len(procs(reg)) != 0 {
		t.Fatal("reference outlived its component")
	}
	surfacetest.RequireCode(t, reg.Invoke(bg, inv("", "domain:devices.disable", `{"reason":"r"}`), as("a")), surface.CodeComponentUnmounted)
}

// AS-INVOKE-003: a failing binding errors before any confirmation record.
// AS-INVOKE-004: a sent locked field errors before any confirmation record.
func TestBindingBeforeConfirmation_AS_INVOKE_003_004(t *testing.T) {
	reg, d := newDomainRegistry(t, nil)
	sel := &selection{ids: []string{"d1"}}
	surfacetest.MustRegister(t, reg, tableWithRef(disableRef(sel, surface.EffectDestructive)))
	sel.mu.Lock()
	sel.fail = true
	sel.mu.Unlock()
	e := surfacetest.RequireCode(t, reg.Invoke(bg, inv("", "domain:devices.disable", `{"reason":"r"}`), as("a")), surface.CodePreconditionFailed)
	if e.Details["reason"] != "binding-failed" {
		t.Fatalf("%+v", e)
	}
	surfacetest.RequireCode(t, reg.Invoke(bg, inv("", "domain:devices.disable", `{"reason":"r","ids":["x"]}`), as("a")), surface.CodeInvalidInput)
	if n := len(reg.Confirmations().Pending()); n != 0 || len(d.recorded()) != 0 {
		t.Fatalf("%d confirmation records created", n)
	}
}

// AS-INVOKE-005: the confirmation summary and input show the live bound
// values, and the evidence binds them: a changed selection after approval
// is a mismatch.
func TestConfirmationShowsBoundValues_AS_INVOKE_005(t *testing.T) {
	reg, d := newDomainRegistry(t, nil)
	sel := &selection{ids: []string{"d1", "d2"}}
	surfacetest.MustRegister(t, reg, tableWithRef(disableRef(sel, surface.EffectDestructive)))
	res := reg.Invoke(bg, inv("", "domain:devices.disable", `{"reason":"broken"}`), as("a"))
	id := requireConfirmationEffect(t, res, surface.EffectDestructive)
	p := reg.Confirmations().Pending()[0]
	if p.Input != `{"ids":["d1","d2"],"reason":"broken"}` || !strings.Contains(p.Summary, `"ids":["d1","d2"]`) || p.Effect != surface.EffectDestructive {
		t.Fatalf("%+v", p)
	}
	reg.Confirmations().Resolve(id, surface.Resolution{Approved: true})
	sel.set("d1", "d2", "d3") // bait-and-switch through the UI
	retry := inv(res.InvocationID, "domain:devices.disable", `{"reason":"broken"}`)
	retry.ConfirmationID = id
	if r := invalidReason(t, reg.Invoke(bg, retry, as("a"))); r != "mismatch" || len(d.recorded()) != 0 {
		t.Fatalf("%s; executed %d", r, len(d.recorded()))
	}
	sel.set("d1", "d2")
	// The failed retry is a cached terminal result for its invocation id
	// (the request as issued is the same); a new id with the evidence runs.
	surfacetest.RequireCode(t, reg.Invoke(bg, retry, as("a")), surface.CodeConfirmationInvalid)
	retry.InvocationID = ""
	surfacetest.RequireOK(t, reg.Invoke(bg, retry, as("a")))
	got := d.recorded()
	if len(got) != 1 || got[0].Confirmation == nil || got[0].Confirmation.ID != id {
		t.Fatalf("%+v", got)
	}
}

func requireConfirmationEffect(t *testing.T, res surface.Result, effect surface.Effect) string {
	t.Helper()
	e := surfacetest.RequireCode(t, res, surface.CodeConfirmationRequired)
	if e.Details["effect"] != string(effect) {
		t.Fatalf("%+v", e)
	}
	id, _ := e.Details["confirmationId"].(string)
	return id
}

// The effect table: defaults, the destructive floor, RequiresApproval.
func TestProcedureConfirmationLevels(t *testing.T) {
	reg, _ := newDomainRegistry(t, nil)
	mk := func(effect surface.Effect, conf surface.Confirmation, approval bool) surface.Confirmation {
		reg2, _ := newDomainRegistry(t, nil)
		surfacetest.MustRegister(t, reg2, tableWithRef(surface.Procedure(surface.ProcedureDef[disableIn, disableOut]{
			ID: "domain:devices.disable", Description: "Disable", Effect: effect, Confirmation: conf, RequiresApproval: approval})))
		return procs(reg2)[0].Confirmation
	}
	_ = reg
	for _, c := range []struct {
		effect   surface.Effect
		conf     surface.Confirmation
		approval bool
		want     surface.Confirmation
	}{
		{surface.EffectServerQuery, "", false, surface.ConfirmNever},
		{surface.EffectServerMutation, "", false, surface.ConfirmOptional},
		{surface.EffectExternalSideEffect, "", false, surface.ConfirmRequired},
		{surface.EffectDestructive, "", false, surface.ConfirmRequired},
		{surface.EffectDestructive, surface.ConfirmNever, false, surface.ConfirmOptional},
		{surface.EffectExternalSideEffect, surface.ConfirmNever, false, surface.ConfirmNever},
		{surface.EffectServerQuery, "", true, surface.ConfirmRequired},
	} {
		if got := mk(c.effect, c.conf, c.approval); got != c.want {
			t.Errorf("%s/%q/%v: %s, want %s", c.effect, c.conf, c.approval, got, c.want)
		}
	}
}

// Staleness and ambiguity against procedure targets; the version hint is
// enforced only for destructive and external effects (AS-STALE-002).
func TestProcedureStaleness_AS_STALE_002(t *testing.T) {
	reg, _ := newDomainRegistry(t, &surface.Options{OnDuplicate: surface.DuplicateReplace})
	sel := &selection{ids: []string{"d1"}}
	a := tableWithRef(disableRef(sel, surface.EffectExternalSideEffect))
	b := tableWithRef(disableRef(sel, surface.EffectExternalSideEffect))
	b.InstanceID = "side"
	ha := surfacetest.MustRegister(t, reg, a)
	hb := surfacetest.MustRegister(t, reg, b)
	e := surfacetest.RequireCode(t, reg.Invoke(bg, inv("", "domain:devices.disable", `{"reason":"r"}`), as("a")), surface.CodeAmbiguousInstance)
	refs, _ := e.Details["instances"].([]surface.InstanceRef)
	if len(refs) != 2 || refs[0].InstanceID != "main" || refs[0].Context == nil || refs[1].RegistrationID != hb.ID() {
		t.Fatalf("%+v", refs)
	}
	stale := surface.Invocation{CapabilityID: "domain:devices.disable", RegistrationID: ha.ID(), SurfaceVersion: "1", Input: json.RawMessage(`{"reason":"r"}`)}
	e = surfacetest.RequireCode(t, reg.Invoke(bg, stale, as("a")), surface.CodeStaleCapability)
	if e.Details["reason"] != "surface-version-mismatch" {
		t.Fatalf("%+v", e)
	}
	stale.SurfaceVersion = reg.Version()
	requireConfirmationEffect(t, reg.Invoke(bg, stale, as("a")), surface.EffectExternalSideEffect)
	// Server-query ignores the hint.
	reg2, _ := newDomainRegistry(t, nil)
	surfacetest.MustRegister(t, reg2, tableWithRef(disableRef(sel, surface.EffectServerQuery)))
	q := surface.Invocation{CapabilityID: "domain:devices.disable", SurfaceVersion: "42", Input: json.RawMessage(`{"reason":"r"}`)}
	surfacetest.RequireOK(t, reg2.Invoke(bg, q, as("a")))
	// Remount: registration-replaced.
	surfacetest.MustRegister(t, reg, tableWithRef(disableRef(sel, surface.EffectExternalSideEffect)))
	stale.SurfaceVersion = ""
	e = surfacetest.RequireCode(t, reg.Invoke(bg, stale, as("a")), surface.CodeStaleCapability)
	if e.Details["reason"] != "registration-replaced" {
		t.Fatalf("%+v", e)
	}
}

// Executor outcomes: typed server errors pass through, other failures are
// sanitised transport errors, transient ones retry after a delay.
func TestExecutorErrors(t *testing.T) {
	reg, d := newDomainRegistry(t, nil)
	sel := &selection{ids: []string{"d1"}}
	surfacetest.MustRegister(t, reg, tableWithRef(disableRef(sel, surface.EffectServerQuery)))
	call := func() surface.Result {
		return reg.Invoke(bg, inv("", "domain:devices.disable", `{"reason":"r"}`), as("a"))
	}
	d.fail = surface.NewError(surface.CodeNotAuthorized, "", map[string]any{"origin": "server"})
	if e := surfacetest.RequireCode(t, call(), surface.CodeNotAuthorized); e.Details["origin"] != "server" {
		t.Fatalf("%+v", e)
	}
	d.fail = surface.NewError(surface.CodeConfirmationRequired, "The server needs an approval.", map[string]any{"origin": "server", "confirmationId": "apr_1"})
	if e := surfacetest.RequireCode(t, call(), surface.CodeConfirmationRequired); e.Details["origin"] != "server" || e.Details["confirmationId"] != "apr_1" {
		t.Fatalf("%+v", e)
	}
	d.fail = errors.New("pq: connection to 10.0.0.5:5432 refused")
	res := call()
	e := surfacetest.RequireCode(t, res, surface.CodeExecutionFailed)
	if b, _ := json.Marshal(res); e.Details["reason"] != "transport" || e.Retry != surface.RetryNo || strings.Contains(string(b), "10.0.0.5") {
		t.Fatalf("%s", b)
	}
	d.fail = surface.Transient(errors.New("503"))
	e = surfacetest.RequireCode(t, call(), surface.CodeExecutionFailed)
	if e.Retry != surface.RetryAfterDelay || e.Details["transient"] != true || e.Details["retryAfterMs"] != 1000 {
		t.Fatalf("%+v", e)
	}
	d.fail = nil
	reg.SetProcedureExecutor(nil)
	e = surfacetest.RequireCode(t, call(), surface.CodeExecutionFailed)
	if e.Details["reason"] != "transport" {
		t.Fatalf("%+v", e)
	}
}

// Suffix collisions between view capabilities and procedure paths.
func TestSuffixCollisions(t *testing.T) {
	view := surface.Component{Type: "devices", Description: "Devices",
		Actions: map[string]surface.Capability{"disable": surfacetest.Noop("Disable in the UI", surface.EffectLocalState)}}
	for _, c := range []struct {
		policy surface.SuffixPolicy
		events int
		fails  bool
	}{{surface.SuffixWarn, 1, false}, {surface.SuffixOff, 0, false}, {surface.SuffixError, 0, true}} {
		reg, _ := newDomainRegistry(t, &surface.Options{SuffixCollisions: c.policy})
		var n atomic.Int64
		reg.Subscribe(func(e surface.Event) {
			if cs, ok := e.(surface.CollisionSuspected); ok && cs.ViewCapabilityID == "view:devices.disable" && cs.DomainProcedureID == "domain:devices.disable" {
				n.Add(1)
			}
		})
		_, err := reg.Register(view)
		if (err != nil) != c.fails || n.Load() != int64(c.events) {
			t.Errorf("policy %v: err %v, %d events", c.policy, err, n.Load())
		}
	}
}

// A procedure-only registration lists its references without a component
// entry and without a context link (semantics §8.1, §10.5); policies
// govern references too.
func TestProcedureOnlyAndPolicies(t *testing.T) {
	hideFromB := surface.Policy{Name: "b-out", Discover: func(pc *surface.PolicyContext) surface.Decision {
		if pc.Consumer.ID == "b" && pc.Plane == surface.PlaneDomain {
			return surface.Hide()
		}
		return surface.Expose()
	}}
	reg, _ := newDomainRegistry(t, &surface.Options{Policies: []surface.Policy{hideFromB}})
	surfacetest.MustRegister(t, reg, surface.Component{Type: "devices.toolbar", Description: "Toolbar", Procedures: []surface.Capability{
		surface.Procedure(surface.ProcedureDef[surface.None, []string]{ID: "domain:devices.list", Description: "List devices", Effect: surface.EffectServerQuery}),
	}})
	snap := reg.Snapshot(surface.SnapshotOptions{})
	if len(snap.Components) != 0 || len(snap.Procedures) != 1 || snap.Procedures[0].ProcedureID != "domain:devices.list" {
		t.Fatalf("%+v", snap)
	}
	res := reg.Invoke(bg, inv("", "domain:devices.list", ""), as("a"))
	surfacetest.RequireOK(t, res)
	if res.Output != `["d1","d2"]` {
		t.Fatal(res.Output)
	}
	if len(reg.Snapshot(surface.SnapshotOptions{Consumer: surface.Consumer{ID: "b"}}).Procedures) != 0 {
		t.Fatal("hidden reference listed")
	}
	surfacetest.RequireCode(t, reg.Invoke(bg, inv("", "domain:devices.list", ""), as("b")), surface.CodeCapabilityNotFound)
	// Scope: by context type.
	if n := len(reg.Snapshot(surface.SnapshotOptions{Scope: []string{"devices"}}).Procedures); n != 1 {
		t.Fatal(n)
	}
	if n := len(reg.Snapshot(surface.SnapshotOptions{Scope: []string{"users"}}).Procedures); n != 0 {
		t.Fatal(n)
	}
	b, _ := json.Marshal(reg.Snapshot(surface.SnapshotOptions{}).Procedures[0])
	want := `{"procedureId":"domain:devices.list","description":"List devices","inputSchema":{"type":"object","properties":{},"additionalProperties":false},"outputSchema":{"type":["array","null"],"items":{"type":"string"}},"effect":"server-query","confirmation":"never","available":true,"boundFields":[],"registrationId":"`
	// A procedure-only registration has no context link (semantics §8.1).
	if !strings.HasPrefix(string(b), want) || strings.Contains(string(b), `"context"`) {
		t.Fatalf("%s", b)
	}
}

// AS-BIND-001: bound fields are declared in the definition, checked at
// Register against the input schema and Bind: a declaration that cannot
// be honoured is a definition error, never a silently unlocked field.
func TestBoundDeclaration_AS_BIND_001(t *testing.T) {
	bind := (&selection{ids: []string{"d1"}}).bind
	for _, c := range []struct {
		name  string
		def   surface.ProcedureDef[disableIn, disableOut]
		field string
	}{
		{"bound without Bind", surface.ProcedureDef[disableIn, disableOut]{Bound: []string{"ids"}}, "procedures.0.bind"},
		{"Bind without bound", surface.ProcedureDef[disableIn, disableOut]{Bind: bind}, "procedures.0.bound"},
		{"not a property", surface.ProcedureDef[disableIn, disableOut]{Bound: []string{"deviceIds"}, Bind: bind}, "procedures.0.bound"},
		{"listed twice", surface.ProcedureDef[disableIn, disableOut]{Bound: []string{"ids", "ids"}, Bind: bind}, "procedures.0.bound"},
		{"overridable not bound", surface.ProcedureDef[disableIn, disableOut]{Bound: []string{"ids"}, Overridable: []string{"reason"}, Bind: bind}, "procedures.0.overridable"},
		{"not an object schema", surface.ProcedureDef[disableIn, disableOut]{Bound: []string{"ids"}, Bind: bind, InputSchema: json.RawMessage(`{"type":"array"}`)}, "procedures.0.input"},
	} {
		reg, _ := newDomainRegistry(t, nil)
		def := c.def
		def.ID, def.Description, def.Effect = "domain:devices.disable", "Disable", surface.EffectServerMutation
		_, err := reg.Register(tableWithRef(surface.Procedure(def)))
		if de := surfacetest.RequireDefinitionError(t, err, surface.DefinitionInvalid); de.Field != c.field {
			t.Errorf("%s: field %q, want %q (%v)", c.name, de.Field, c.field, de)
		}
	}
	// Bound fields are listed in declaration order.
	type two struct {
		B string `json:"b"`
		A string `json:"a"`
		C string `json:"c"`
	}
	x := surface.NewFuncExecutor()
	surface.AddFunc(x, "t.two", func(context.Context, *surface.ProcedureCall, two) (surface.None, error) { return surface.None{}, nil })
	reg := surfacetest.NewRegistry(t, nil)
	reg.SetProcedureExecutor(x)
	surfacetest.MustRegister(t, reg, tableWithRef(surface.Procedure(surface.ProcedureDef[two, surface.None]{
		ID: "domain:t.two", Description: "Two", Effect: surface.EffectServerQuery,
		Bound: []string{"b", "a"}, Overridable: []string{"a"},
		Bind: func(context.Context) (map[string]any, error) { return map[string]any{"a": "1", "b": "2"}, nil },
	})))
	p := procs(reg)[0]
	if b, _ := json.Marshal(p.BoundFields); string(b) != `[{"path":"b","locked":true,"source":"ui-state"},{"path":"a","locked":false,"source":"ui-state"}]` {
		t.Fatal(string(b))
	}
}
