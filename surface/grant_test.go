package surface_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/agentsurface/agentsurface/surface"
	"github.com/agentsurface/agentsurface/surface/surfacetest"
)

// Standing grants (issue "standing grants"; DESIGN decision 25): a grant
// lets a later call skip the question, and nothing else. The tests name
// the confirmation requirements they keep true for every call that asks.

// grantSchema takes ids, a mode, a count that may be a number or a
// string (so type confusion reaches the grant instead of the
// validator), a site and a force flag.
const grantSchema = `{"type":"object","properties":{
	"ids":{"type":"array","items":{"type":"string"}},
	"mode":{"type":"string"},
	"count":{"anyOf":[{"type":"number"},{"type":"string"},{"type":"null"},{"type":"array","items":{"type":"number"}}]},
	"site":{"type":"string"},
	"force":{"type":"boolean"},
	"filter":{"type":"object","properties":{"site":{"type":"string"}}}
},"additionalProperties":false}`

const (
	gWipeID    = "view:devices.wipe"
	gTidyID    = "view:devices.tidy"
	gDisableID = "domain:devices.disable"
	gMailID    = "domain:mail.send"
)

// grantFixture is a registry with capabilities across the effect ladder:
// wipe (local-state, confirmation required, grants allowed), tidy (the
// same without grants), disable (destructive, grants allowed up to 10
// minutes and 3 uses) and send (external-side-effect, no grants).
type grantFixture struct {
	reg    *surface.Registry
	sink   *surface.MemorySink
	ran    atomic.Int64
	grants atomic.Value // the GrantID the last handler saw
}

func newGrantFixture(t *testing.T, opts *surface.Options, policies ...surface.Policy) *grantFixture {
	t.Helper()
	f := &grantFixture{sink: surface.NewMemorySink(0)}
	var o surface.Options
	if opts != nil {
		o = *opts
	}
	o.Audit = f.sink
	f.reg = surfacetest.NewRegistry(t, &o)
	x := surface.NewFuncExecutor()
	run := func(_ context.Context, call *surface.ProcedureCall, _ map[string]any) (surface.None, error) {
		f.ran.Add(1)
		f.grants.Store(call.GrantID)
		return surface.None{}, nil
	}
	surface.AddFunc(x, "devices.disable", run)
	surface.AddFunc(x, "mail.send", run)
	f.reg.SetProcedureExecutor(x)
	f.register(t, "main", policies...)
	return f
}

// register mounts the devices component of instance.
func (f *grantFixture) register(t *testing.T, instance string, policies ...surface.Policy) *surface.Handle {
	t.Helper()
	exec := func(_ context.Context, call *surface.Call, _ map[string]any) (surface.None, error) {
		f.ran.Add(1)
		f.grants.Store(call.GrantID)
		return surface.None{}, nil
	}
	return surfacetest.MustRegister(t, f.reg, surface.Component{
		Type: "devices", InstanceID: instance, Description: "Devices", Policies: policies,
		Actions: map[string]surface.Capability{
			"wipe": surface.Action(surface.ActionDef[map[string]any, surface.None]{
				Description: "Wipe devices", Effect: surface.EffectLocalState, Confirmation: surface.ConfirmRequired,
				InputSchema: json.RawMessage(grantSchema), Grants: surface.GrantRule{Allow: true}, Execute: exec,
			}),
			"tidy": surface.Action(surface.ActionDef[map[string]any, surface.None]{
				Description: "Tidy devices", Effect: surface.EffectLocalState, Confirmation: surface.ConfirmRequired,
				InputSchema: json.RawMessage(grantSchema), Execute: exec,
			}),
		},
		Procedures: []surface.Capability{
			surface.Procedure(surface.ProcedureDef[map[string]any, surface.None]{
				ID: gDisableID, Description: "Disable devices", Effect: surface.EffectDestructive,
				InputSchema: json.RawMessage(grantSchema), Grants: surface.GrantRule{Allow: true, MaxTTL: 10 * time.Minute, MaxUses: 3},
			}),
			surface.Procedure(surface.ProcedureDef[map[string]any, surface.None]{
				ID: gMailID, Description: "Send mail", Effect: surface.EffectExternalSideEffect,
				InputSchema: json.RawMessage(grantSchema),
			}),
		},
	})
}

func (f *grantFixture) call(consumer, capID, input string) surface.Result {
	return f.reg.Invoke(bg, surface.Invocation{CapabilityID: capID, Input: json.RawMessage(input)}, as(consumer))
}

func (f *grantFixture) create(t *testing.T, spec surface.GrantSpec) surface.Grant {
	t.Helper()
	g, err := f.reg.Grants().Create(bg, spec, "alice")
	if err != nil {
		t.Fatalf("Create(%+v): %v", spec, err)
	}
	return g
}

// types returns the audit record types of the sink, comma-joined.
func (f *grantFixture) types(prefix string) []surface.AuditEvent {
	var out []surface.AuditEvent
	for _, e := range f.sink.Events() {
		if strings.HasPrefix(string(e.Type), prefix) {
			out = append(out, e)
		}
	}
	return out
}

// granted fails unless res ran without asking, allowed by grant id.
func granted(t *testing.T, res surface.Result, id string) {
	t.Helper()
	if res.Status != surface.StatusOK || res.GrantID != id {
		t.Fatalf("want ok through grant %s, got %+v (error %v)", id, res, res.Error)
	}
}

// asked fails unless res asks for confirmation (the grant did not apply).
func asked(t *testing.T, res surface.Result) {
	t.Helper()
	surfacetest.RequireCode(t, res, surface.CodeConfirmationRequired)
	if res.GrantID != "" {
		t.Fatalf("a call that asks names grant %s", res.GrantID)
	}
}

func wipeGrant(consumer string, cs ...surface.Constraint) surface.GrantSpec {
	return surface.GrantSpec{ConsumerKey: consumer, CapabilityID: gWipeID, TTL: 10 * time.Minute, Constraints: cs}
}

// A grant lets a call within its constraints skip the question: no
// confirmation request, the handler and the executor see the grant, the
// result and the settled audit record name it, and grant-created and
// grant-used are audited with the actor and the invocation.
func TestGrantSkipsTheQuestion(t *testing.T) {
	f := newGrantFixture(t, nil)
	rec := surfacetest.Record(t, f.reg)
	g := f.create(t, wipeGrant("mcp-bridge:a", surface.ValueIn("ids", "d1", "d2")))
	if !strings.HasPrefix(g.GrantID, "gnt_") || len(g.GrantID) != 16 || g.State != surface.GrantActive || g.CreatedBy != "alice" {
		t.Fatalf("grant %+v", g)
	}
	res := f.call("a", gWipeID, `{"ids":["d2","d1"]}`)
	granted(t, res, g.GrantID)
	if f.ran.Load() != 1 || f.grants.Load() != g.GrantID {
		t.Fatalf("ran %d, handler saw grant %v", f.ran.Load(), f.grants.Load())
	}
	if n := len(f.reg.Confirmations().Pending()); n != 0 {
		t.Fatalf("%d confirmation requests made", n)
	}
	for _, typ := range rec.Types() {
		if strings.HasPrefix(typ, "confirmation") {
			t.Fatalf("event %s for a granted call", typ)
		}
	}
	b, _ := json.Marshal(res)
	if !strings.Contains(string(b), `"grantId":"`+g.GrantID+`"`) {
		t.Fatalf("result JSON %s", b)
	}
	created, used := f.types("grant-created"), f.types("grant-used")
	if len(created) != 1 || created[0].GrantID != g.GrantID || created[0].Actor != "alice" || created[0].ConsumerID != "mcp-bridge:a" || created[0].CapabilityID != gWipeID {
		t.Fatalf("grant-created %+v", created)
	}
	if len(used) != 1 || used[0].GrantID != g.GrantID || used[0].InvocationID != res.InvocationID || used[0].ConsumerID != "mcp-bridge:a" {
		t.Fatalf("grant-used %+v", used)
	}
	var settled *surface.AuditEvent
	for _, e := range f.types("invocation-settled") {
		if e.InvocationID == res.InvocationID {
			settled = &e
		}
	}
	if settled == nil || settled.GrantID != g.GrantID {
		t.Fatalf("settled record %+v", settled)
	}
	if got, _ := f.reg.Grants().Get(g.GrantID); got.Uses != 1 {
		t.Fatalf("uses %d", got.Uses)
	}
	// The procedure executor is told too.
	d := f.create(t, surface.GrantSpec{ConsumerKey: "mcp-bridge:a", CapabilityID: gDisableID, TTL: time.Minute, MaxUses: 1})
	granted(t, f.call("a", gDisableID, `{"ids":["d9"]}`), d.GrantID)
	if f.grants.Load() != d.GrantID {
		t.Fatalf("executor saw grant %v", f.grants.Load())
	}
}

// A call outside a grant's constraints, or that presents evidence, asks
// as before (spec 06 rules 1-4 hold for it): the grant is not spent.
// AS-CONFIRM-001: the approval it gets binds its own input.
func TestGrantOutsideConstraintsAsks_AS_CONFIRM_001(t *testing.T) {
	f := newGrantFixture(t, nil)
	g := f.create(t, wipeGrant("mcp-bridge:a", surface.ValueIn("ids", "d1", "d2"), surface.ValueIn("mode", "replace")))
	for _, in := range []string{
		`{"ids":["d1","d3"],"mode":"replace"}`, // one id more
		`{"ids":["d1"]}`,                       // mode absent
		`{"ids":["d1"],"mode":"extend"}`,
		`{"ids":[],"mode":"replace"}`, // an empty list may mean "all"
		`{"mode":"replace"}`,
	} {
		asked(t, f.call("a", gWipeID, in))
	}
	cid := requireConfirmationOf(t, f.call("a", gWipeID, `{"ids":["d1","d3"],"mode":"replace"}`))
	f.reg.Confirmations().Resolve(cid, surface.Resolution{Approved: true})
	// Evidence for another input is a mismatch even though a grant covers it.
	res := f.reg.Invoke(bg, surface.Invocation{CapabilityID: gWipeID, Input: json.RawMessage(`{"ids":["d1"],"mode":"replace"}`), ConfirmationID: cid}, as("a"))
	if invalidReason(t, res) != "mismatch" {
		t.Fatal(res.Error)
	}
	if got, _ := f.reg.Grants().Get(g.GrantID); got.Uses != 0 || f.ran.Load() != 0 {
		t.Fatalf("uses %d, ran %d", got.Uses, f.ran.Load())
	}
}

func requireConfirmationOf(t *testing.T, res surface.Result) string {
	t.Helper()
	e := surfacetest.RequireCode(t, res, surface.CodeConfirmationRequired)
	return e.Details["confirmationId"].(string)
}

// Type confusion escapes nothing: a number as a string, an id list with
// one extra id, Unicode look-alikes, another case, a decomposed accent,
// null, an absent field: each asks.
func TestGrantTypeConfusion(t *testing.T) {
	f := newGrantFixture(t, nil)
	f.create(t, wipeGrant("mcp-bridge:a", surface.InRange("count", 1, 5)))
	f.create(t, wipeGrant("mcp-bridge:b", surface.ValueIn("ids", "admin", "café"), surface.ValueIn("count", 3)))
	f.create(t, wipeGrant("mcp-bridge:c", surface.HasPrefix("site", "eu-"), surface.OnlyKeys("", "site")))
	f.create(t, wipeGrant("mcp-bridge:d", surface.HasPrefix("filter.site", "eu-")))
	ok := []struct{ consumer, input string }{
		{"a", `{"count":3}`}, {"a", `{"count":1}`}, {"a", `{"count":5.0}`},
		{"b", `{"ids":["admin"],"count":3}`}, {"b", `{"ids":["café","admin"],"count":3.0}`},
		{"c", `{"site":"eu-west"}`}, {"d", `{"filter":{"site":"eu-1"}}`},
	}
	for _, c := range ok {
		if res := f.call(c.consumer, gWipeID, c.input); res.Status != surface.StatusOK || res.GrantID == "" {
			t.Errorf("%s %s: %+v", c.consumer, c.input, res.Error)
		}
	}
	escapes := []struct{ consumer, input, why string }{
		{"a", `{"count":"3"}`, "a number as a string"},
		{"a", `{"count":5.0001}`, "just out of range"},
		{"a", `{"count":null}`, "null"},
		{"a", `{}`, "absent"},
		{"a", `{"count":[3,9]}`, "a list with one value out of range"},
		{"b", `{"ids":["admin"],"count":"3"}`, "a number as a string in a set"},
		{"b", `{"ids":["admin","root"],"count":3}`, "one extra id"},
		{"b", `{"ids":["аdmin"],"count":3}`, "Cyrillic а"},
		{"b", `{"ids":["ａｄｍｉｎ"],"count":3}`, "fullwidth letters"},
		{"b", `{"ids":["Admin"],"count":3}`, "another case"},
		{"b", `{"ids":["cafe\u0301"],"count":3}`, "a decomposed accent"},
		{"b", `{"ids":["admin\u200b"],"count":3}`, "a zero-width space"},
		{"c", `{"site":"EU-west"}`, "another case of the prefix"},
		{"c", `{"site":"eu‐west"}`, "a Unicode hyphen"},
		{"c", `{"site":"eu-west","force":true}`, "a member the grant does not allow"},
		{"d", `{"filter":{"site":"us-1"}}`, "a nested value out of the prefix"},
		{"d", `{"filter":{}}`, "a nested value absent"},
	}
	for _, c := range escapes {
		res := f.call(c.consumer, gWipeID, c.input)
		if res.Error == nil || res.Error.Code != surface.CodeConfirmationRequired || res.GrantID != "" {
			t.Errorf("%s (%s): %+v %v", c.why, c.input, res, res.Error)
		}
	}
}

// A grant is its consumer's (or all consumers'), its capability's, its
// instance's (when it names one) and its registry's: every other call
// asks. AS-CONFIRM-004: a grant, like evidence, crosses none of them.
func TestGrantScope_AS_CONFIRM_004(t *testing.T) {
	f := newGrantFixture(t, nil)
	f.register(t, "spare")
	g := f.create(t, wipeGrant("mcp-bridge:a"))
	g.InstanceID = "" // (not in the spec)
	mainOnly := f.create(t, surface.GrantSpec{ConsumerKey: "mcp-bridge:b", CapabilityID: gWipeID, InstanceID: "main", TTL: time.Minute})
	all := f.create(t, surface.GrantSpec{ConsumerKey: surface.AllConsumers, CapabilityID: gDisableID, TTL: time.Minute, MaxUses: 3})

	in := func(consumer, capID, instance string) surface.Result {
		return f.reg.Invoke(bg, surface.Invocation{CapabilityID: capID, InstanceID: instance, Input: json.RawMessage(`{}`)}, as(consumer))
	}
	inst := func(consumer, instance string) surface.Result { return in(consumer, gWipeID, instance) }
	granted(t, inst("a", "spare"), g.GrantID)
	asked(t, inst("z", "main"))  // another consumer
	asked(t, inst("a2", "main")) // a consumer whose id extends a's
	asked(t, f.reg.Invoke(bg, surface.Invocation{CapabilityID: gWipeID, InstanceID: "main", Input: json.RawMessage(`{}`)},
		surface.InvokeOptions{Consumer: surface.Consumer{ID: "a", Kind: surface.ConsumerWebMCP}})) // same id, another kind
	granted(t, inst("b", "main"), mainOnly.GrantID)
	asked(t, inst("b", "spare")) // another instance
	asked(t, in("a", gTidyID, "main"))
	granted(t, in("x", gDisableID, "main"), all.GrantID)
	granted(t, in("y", gDisableID, "spare"), all.GrantID)

	other := newGrantFixture(t, nil) // another session of the same user
	asked(t, other.call("a", gWipeID, `{}`))
	asked(t, other.call("x", gDisableID, `{}`))
}

// Uses and TTL bound a grant: the last use ends it (used-up), the TTL
// ends it (expired, audited, subscribers told), and a call after either
// asks. Under synctest the TTL is virtual time.
func TestGrantUsesAndTTL(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newGrantFixture(t, nil)
		var lists [][]surface.Grant
		unsub := f.reg.Grants().Subscribe(func(gs []surface.Grant) { lists = append(lists, gs) })
		defer unsub()
		g := f.create(t, surface.GrantSpec{ConsumerKey: "mcp-bridge:a", CapabilityID: gDisableID, TTL: 5 * time.Minute, MaxUses: 2})
		granted(t, f.call("a", gDisableID, `{}`), g.GrantID)
		granted(t, f.call("a", gDisableID, `{}`), g.GrantID)
		asked(t, f.call("a", gDisableID, `{}`))
		if got, _ := f.reg.Grants().Get(g.GrantID); got.State != surface.GrantUsedUp || got.Uses != 2 || got.EndedAt.IsZero() {
			t.Fatalf("after its uses: %+v", got)
		}
		if len(f.reg.Grants().List()) != 0 {
			t.Fatal("a used-up grant is listed")
		}

		h := f.create(t, surface.GrantSpec{ConsumerKey: "mcp-bridge:a", CapabilityID: gWipeID, TTL: time.Minute})
		time.Sleep(59 * time.Second)
		granted(t, f.call("a", gWipeID, `{}`), h.GrantID)
		time.Sleep(time.Second)
		synctest.Wait()
		asked(t, f.call("a", gWipeID, `{}`))
		got, _ := f.reg.Grants().Get(h.GrantID)
		if got.State != surface.GrantExpired {
			t.Fatalf("after its TTL: %+v", got)
		}
		if ex := f.types("grant-expired"); len(ex) != 1 || ex[0].GrantID != h.GrantID {
			t.Fatalf("grant-expired %+v", ex)
		}
		if last := lists[len(lists)-1]; len(last) != 0 {
			t.Fatalf("subscribers last saw %+v", last)
		}
	})
}

// The clock of the registry decides too: a grant past its TTL on an
// application's clock lets nothing through even before its timer fires.
func TestGrantExpiryOnTheRegistryClock(t *testing.T) {
	var now atomic.Int64
	now.Store(time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC).UnixNano())
	f := newGrantFixture(t, &surface.Options{Now: func() time.Time { return time.Unix(0, now.Load()) }})
	g := f.create(t, wipeGrant("mcp-bridge:a"))
	granted(t, f.call("a", gWipeID, `{}`), g.GrantID)
	now.Add(int64(10 * time.Minute))
	asked(t, f.call("a", gWipeID, `{}`))
}

// Revoke ends a grant at once and is audited with its actor; revoking
// again, or an unknown id, does nothing.
func TestGrantRevoke(t *testing.T) {
	f := newGrantFixture(t, nil)
	g := f.create(t, wipeGrant(surface.AllConsumers))
	granted(t, f.call("a", gWipeID, `{}`), g.GrantID)
	if !f.reg.Grants().Revoke(bg, g.GrantID, "bob") {
		t.Fatal("Revoke refused an active grant")
	}
	asked(t, f.call("a", gWipeID, `{}`))
	if f.reg.Grants().Revoke(bg, g.GrantID, "bob") || f.reg.Grants().Revoke(bg, "gnt_000000000000", "bob") {
		t.Fatal("Revoke of an ended or unknown grant reported true")
	}
	rv := f.types("grant-revoked")
	if len(rv) != 1 || rv[0].GrantID != g.GrantID || rv[0].Actor != "bob" {
		t.Fatalf("grant-revoked %+v", rv)
	}
	if got, _ := f.reg.Grants().Get(g.GrantID); got.State != surface.GrantRevoked || got.EndedAt.IsZero() {
		t.Fatalf("%+v", got)
	}
}

// Deny > ask > grant: a policy that denies wins; a RequireConfirmation
// without a condition, or with AlwaysAsk while it is active, asks; a
// conditional one's question is skipped by a grant.
func TestGrantPrecedence(t *testing.T) {
	deny := surface.Policy{Name: "deny-force", Invoke: func(ctx context.Context, ic *surface.InvokeContext, next surface.Next) surface.Result {
		if m, _ := ic.Input.(map[string]any); m["force"] == true {
			return surface.Fail(surface.NewError(surface.CodeNotAuthorized, "", map[string]any{"origin": "client"}))
		}
		return next(ctx)
	}}
	hasSite := func(ic *surface.InvokeContext) bool { m, _ := ic.Input.(map[string]any); return m["site"] != nil }
	hasMode := func(ic *surface.InvokeContext) bool { m, _ := ic.Input.(map[string]any); return m["mode"] != nil }
	f := newGrantFixture(t, nil, deny,
		surface.RequireConfirmation(hasSite, nil, surface.AlwaysAsk), surface.RequireConfirmation(hasMode, nil))
	g := f.create(t, wipeGrant("mcp-bridge:a"))
	surfacetest.RequireCode(t, f.call("a", gWipeID, `{"force":true}`), surface.CodeNotAuthorized)
	asked(t, f.call("a", gWipeID, `{"site":"x"}`))
	granted(t, f.call("a", gWipeID, `{"mode":"x"}`), g.GrantID)
	granted(t, f.call("a", gWipeID, `{}`), g.GrantID)

	// An unconditional RequireConfirmation always asks: no grant can be
	// made for what it governs, and one made before such an instance
	// mounted is not used for it (the gate judges the capability as it
	// resolves now).
	strict := newGrantFixture(t, nil)
	before := strict.create(t, wipeGrant("mcp-bridge:a"))
	strict.register(t, "strict", surface.RequireConfirmation(nil, nil))
	for _, spec := range []surface.GrantSpec{
		{ConsumerKey: "mcp-bridge:a", CapabilityID: gWipeID, InstanceID: "strict", TTL: time.Minute},
		{ConsumerKey: "mcp-bridge:a", CapabilityID: gWipeID, TTL: time.Minute}, // strict is one of its candidates
	} {
		if _, err := strict.reg.Grants().Create(bg, spec, "alice"); !errors.Is(err, &surface.GrantError{Code: surface.GrantNotAllowed}) {
			t.Fatalf("Create under an unconditional policy: %v", err)
		}
	}
	asked(t, strict.reg.Invoke(bg, surface.Invocation{CapabilityID: gWipeID, InstanceID: "strict", Input: json.RawMessage(`{}`)}, as("a")))
	granted(t, strict.reg.Invoke(bg, surface.Invocation{CapabilityID: gWipeID, InstanceID: "main", Input: json.RawMessage(`{}`)}, as("a")), before.GrantID)
}

// The effect ladder and the ceiling bound creation: each refusal is a
// typed *GrantError, audited as grant-refused with its code and actor.
func TestGrantCreationRefused(t *testing.T) {
	f := newGrantFixture(t, &surface.Options{Limits: surface.Limits{MaxGrants: 2}})
	for _, c := range []struct {
		spec surface.GrantSpec
		code surface.GrantErrorCode
	}{
		{surface.GrantSpec{ConsumerKey: "mcp-bridge:a", CapabilityID: gMailID, TTL: time.Minute, MaxUses: 1}, surface.GrantNotAllowed}, // open-world, no opt-in
		{surface.GrantSpec{ConsumerKey: "mcp-bridge:a", CapabilityID: gTidyID, TTL: time.Minute}, surface.GrantNotAllowed},             // no opt-in
		{surface.GrantSpec{ConsumerKey: "mcp-bridge:a", CapabilityID: gDisableID, TTL: 11 * time.Minute, MaxUses: 1}, surface.GrantCeilingExceeded},
		{surface.GrantSpec{ConsumerKey: "mcp-bridge:a", CapabilityID: gDisableID, TTL: time.Minute, MaxUses: 4}, surface.GrantCeilingExceeded},
		{surface.GrantSpec{ConsumerKey: "mcp-bridge:a", CapabilityID: gDisableID, TTL: time.Minute}, surface.GrantCeilingExceeded}, // no cap on uses
		{surface.GrantSpec{ConsumerKey: "mcp-bridge:a", CapabilityID: gWipeID, TTL: 2 * time.Hour}, surface.GrantCeilingExceeded},  // Limits.MaxGrantTTL
		{surface.GrantSpec{ConsumerKey: "mcp-bridge:a", CapabilityID: gWipeID}, surface.GrantCeilingExceeded},                      // no TTL
		{wipeGrant("mcp-bridge:a", surface.ValueIn("idz", "d1")), surface.GrantBadConstraint},
		{wipeGrant("mcp-bridge:a", surface.ValueIn("ids[0]", "d1")), surface.GrantBadConstraint},
		{wipeGrant("mcp-bridge:a", surface.ValueIn("filter.zone", "d1")), surface.GrantBadConstraint},
		{wipeGrant("mcp-bridge:a", surface.InRange("site", 0, 1)), surface.GrantBadConstraint},
		{wipeGrant("mcp-bridge:a", surface.InRange("count", 2, 1)), surface.GrantBadConstraint},
		{wipeGrant("mcp-bridge:a", surface.HasPrefix("force", "x")), surface.GrantBadConstraint},
		{wipeGrant("mcp-bridge:a", surface.ValueIn("ids")), surface.GrantBadConstraint},
		{wipeGrant("mcp-bridge:a", surface.ValueIn("ids", func() {})), surface.GrantBadConstraint},
		{surface.GrantSpec{ConsumerKey: "mcp-bridge:a", CapabilityID: gWipeID, TTL: time.Minute, FromInput: true}, surface.GrantBadConstraint},
		{wipeGrant("a"), surface.GrantBadScope},
		{wipeGrant("mcp-bridge:"), surface.GrantBadScope},
		{wipeGrant(""), surface.GrantBadScope},
		{wipeGrant("robot:a"), surface.GrantBadScope},
		{surface.GrantSpec{ConsumerKey: "mcp-bridge:a", CapabilityID: "view:devices.nope", TTL: time.Minute}, surface.GrantUnknownCapability},
		{surface.GrantSpec{ConsumerKey: "mcp-bridge:a", CapabilityID: gWipeID, InstanceID: "spare", TTL: time.Minute}, surface.GrantUnknownCapability},
		{surface.GrantSpec{ConsumerKey: "mcp-bridge:a", CapabilityID: "not an id", TTL: time.Minute}, surface.GrantUnknownCapability},
	} {
		_, err := f.reg.Grants().Create(bg, c.spec, "mallory")
		var ge *surface.GrantError
		if !errors.As(err, &ge) || ge.Code != c.code || !errors.Is(err, &surface.GrantError{Code: c.code}) {
			t.Errorf("%+v: got %v, want %s", c.spec, err, c.code)
		}
	}
	refused := f.types("grant-refused")
	if len(refused) != 23 || refused[0].Actor != "mallory" || refused[0].Reason != string(surface.GrantNotAllowed) || refused[0].CapabilityID != gMailID {
		t.Fatalf("%d grant-refused records, first %+v", len(refused), refused[0])
	}
	f.create(t, wipeGrant("mcp-bridge:a"))
	f.create(t, wipeGrant("mcp-bridge:b"))
	if _, err := f.reg.Grants().Create(bg, wipeGrant("mcp-bridge:c"), "alice"); !errors.Is(err, &surface.GrantError{Code: surface.GrantStoreFull}) {
		t.Fatalf("a third grant over MaxGrants 2: %v", err)
	}
	f.reg.Close()
	if _, err := f.reg.Grants().Create(bg, wipeGrant("mcp-bridge:c"), "alice"); err == nil {
		t.Fatal("Create after Close succeeded")
	}
	if n := len(f.types("grant-expired")); n != 2 {
		t.Fatalf("Close expired %d grants, want 2", n)
	}
}

// A capability opts into grants in its definition; a destructive or
// external-side-effect one must name its ceiling, and a ceiling without
// Allow is a mistake: Register refuses both with INVALID_DEFINITION.
func TestGrantRuleDefinition(t *testing.T) {
	reg := surfacetest.NewRegistry(t, nil)
	reg.SetProcedureExecutor(surface.NewFuncExecutor())
	for _, c := range []struct {
		effect surface.Effect
		rule   surface.GrantRule
		ok     bool
	}{
		{surface.EffectDestructive, surface.GrantRule{Allow: true}, false},
		{surface.EffectDestructive, surface.GrantRule{Allow: true, MaxTTL: time.Minute}, false},
		{surface.EffectExternalSideEffect, surface.GrantRule{Allow: true, MaxUses: 1}, false},
		{surface.EffectDestructive, surface.GrantRule{Allow: true, MaxTTL: time.Minute, MaxUses: 1}, true},
		{surface.EffectServerMutation, surface.GrantRule{Allow: true}, true},
		{surface.EffectServerMutation, surface.GrantRule{MaxUses: 1}, false},
		{surface.EffectServerMutation, surface.GrantRule{Allow: true, MaxTTL: -1}, false},
	} {
		_, err := reg.Register(surface.Component{Type: "t", InstanceID: "i" + string(rune('a'+len(reg.Snapshot(surface.SnapshotOptions{}).Procedures))),
			Description: "T", Procedures: []surface.Capability{surface.Procedure(surface.ProcedureDef[map[string]any, surface.None]{
				ID: "domain:p." + string(c.effect), Description: "P", Effect: c.effect, Grants: c.rule,
			})}})
		var de *surface.DefinitionError
		if c.ok != (err == nil) || !c.ok && (!errors.As(err, &de) || de.Code != surface.DefinitionInvalid || !strings.HasSuffix(de.Field, ".grants")) {
			t.Errorf("%s %+v: %v", c.effect, c.rule, err)
		}
	}
}

// Explain reports each capability's grant ceiling, nil where no grant
// may skip its question.
func TestExplainGrants(t *testing.T) {
	f := newGrantFixture(t, &surface.Options{Limits: surface.Limits{MaxGrantTTL: 5 * time.Minute}})
	got := map[string]*surface.GrantCeiling{}
	for _, c := range f.reg.Explain(surface.SnapshotOptions{}).Capabilities {
		got[c.CapabilityID] = c.Grants
	}
	if c := got[gWipeID]; c == nil || c.MaxTTL != 5*time.Minute || c.MaxUses != 0 {
		t.Errorf("wipe %+v", c)
	}
	if c := got[gDisableID]; c == nil || c.MaxTTL != 5*time.Minute || c.MaxUses != 3 { // the limit caps the definition's 10m
		t.Errorf("disable %+v", c)
	}
	if got[gTidyID] != nil || got[gMailID] != nil {
		t.Errorf("tidy %+v, send %+v", got[gTidyID], got[gMailID])
	}
	b, _ := json.Marshal(got[gDisableID])
	if string(b) != `{"maxTtlMs":300000,"maxUses":3}` {
		t.Errorf("JSON %s", b)
	}
	if c, err := f.reg.Grants().Ceiling(gDisableID, ""); err != nil || c.MaxUses != 3 {
		t.Errorf("Ceiling %+v %v", c, err)
	}
}

// ResolveGrant approves and makes a grant in one step, from the approved
// call's capability, consumer and instance, its constraints derived from
// the approved input: later calls of that input or less pass, any other
// asks. A refused grant leaves the request pending; a denial makes none.
func TestResolveGrant(t *testing.T) {
	f := newGrantFixture(t, nil)
	rec := surfacetest.Record(t, f.reg)
	first := f.call("a", gWipeID, `{"ids":["d1","d2"],"mode":"replace"}`)
	cid := requireConfirmationOf(t, first)

	_, err := f.reg.Confirmations().ResolveGrant(cid, surface.Resolution{Approved: true, Grant: &surface.GrantSpec{TTL: 2 * time.Hour}})
	if !errors.Is(err, &surface.GrantError{Code: surface.GrantCeilingExceeded}) || len(f.reg.Confirmations().Pending()) != 1 {
		t.Fatalf("over the ceiling: %v, pending %d", err, len(f.reg.Confirmations().Pending()))
	}
	_, err = f.reg.Confirmations().ResolveGrant(cid, surface.Resolution{Approved: true, Grant: &surface.GrantSpec{TTL: time.Minute, CapabilityID: gTidyID}})
	if !errors.Is(err, &surface.GrantError{Code: surface.GrantBadScope}) {
		t.Fatalf("another capability: %v", err)
	}
	_, err = f.reg.Confirmations().ResolveGrant(cid, surface.Resolution{Approved: false, Grant: &surface.GrantSpec{TTL: time.Minute}})
	if !errors.Is(err, &surface.GrantError{Code: surface.GrantBadScope}) || len(f.reg.Confirmations().Pending()) != 1 {
		t.Fatalf("a denial with a grant: %v", err)
	}
	if f.reg.Confirmations().Resolve(cid, surface.Resolution{Approved: true, Grant: &surface.GrantSpec{TTL: -1}}) {
		t.Fatal("Resolve with a refused grant approved")
	}
	for _, e := range rec.Types() {
		if e == "confirmation-resolved" {
			t.Fatal("a refused grant resolved the request")
		}
	}

	g, err := f.reg.Confirmations().ResolveGrant(cid, surface.Resolution{Approved: true, Actor: "alice", Channel: surface.ChannelPage,
		Approver: surface.ApproverUser, Grant: &surface.GrantSpec{TTL: 10 * time.Minute, FromInput: true}})
	if err != nil {
		t.Fatal(err)
	}
	if g.ConfirmationID != cid || g.ConsumerKey != "mcp-bridge:a" || g.CapabilityID != gWipeID || g.InstanceID != "main" || g.CreatedBy != "alice" {
		t.Fatalf("%+v", g)
	}
	// The approved call's retry presents its evidence, as before.
	retry := f.reg.Invoke(bg, surface.Invocation{InvocationID: first.InvocationID, CapabilityID: gWipeID,
		Input: json.RawMessage(`{"ids":["d1","d2"],"mode":"replace"}`), ConfirmationID: cid}, as("a"))
	if retry.Status != surface.StatusOK || retry.GrantID != "" {
		t.Fatalf("retry %+v", retry)
	}
	granted(t, f.call("a", gWipeID, `{"ids":["d2"],"mode":"replace"}`), g.GrantID)
	granted(t, f.call("a", gWipeID, `{"mode":"replace","ids":["d1","d2"]}`), g.GrantID)
	asked(t, f.call("a", gWipeID, `{"ids":["d3"],"mode":"replace"}`))
	asked(t, f.call("a", gWipeID, `{"ids":["d1"],"mode":"extend"}`))
	asked(t, f.call("a", gWipeID, `{"ids":["d1"]}`))
	asked(t, f.call("a", gWipeID, `{"ids":["d1"],"mode":"replace","force":true}`))
	asked(t, f.call("b", gWipeID, `{"ids":["d1"],"mode":"replace"}`))
	if ResolveAgain, err := f.reg.Confirmations().ResolveGrant(cid, surface.Resolution{Approved: true}); !errors.Is(err, surface.ErrNotPending) || ResolveAgain.GrantID != "" {
		t.Fatalf("resolving twice: %v", err)
	}
	created := f.types("grant-created")
	if len(created) != 1 || created[0].ConfirmationID != cid {
		t.Fatalf("grant-created %+v", created)
	}
}

// A use is reserved at the question and spent when execution starts: a
// call that fails before it executes gives it back, and the result of
// such a call names no grant.
func TestGrantUseReservedThenSpent(t *testing.T) {
	f := newGrantFixture(t, nil)
	failing := surfacetest.MustRegister(t, f.reg, surface.Component{Type: "pre", Description: "Pre", Actions: map[string]surface.Capability{
		"go": surface.Action(surface.ActionDef[map[string]any, surface.None]{
			Description: "Go", Effect: surface.EffectLocalState, Confirmation: surface.ConfirmRequired, InputSchema: json.RawMessage(grantSchema),
			Grants:       surface.GrantRule{Allow: true, MaxUses: 1},
			Precondition: func(context.Context, *surface.Call, map[string]any) error { return surface.CodePreconditionFailed },
			Execute:      func(context.Context, *surface.Call, map[string]any) (surface.None, error) { return surface.None{}, nil },
		})}})
	_ = failing
	g := f.create(t, surface.GrantSpec{ConsumerKey: "mcp-bridge:a", CapabilityID: "view:pre.go", TTL: time.Minute, MaxUses: 1})
	for range 3 {
		res := f.call("a", "view:pre.go", `{}`)
		surfacetest.RequireCode(t, res, surface.CodePreconditionFailed)
		if res.GrantID != "" {
			t.Fatalf("a call that did not execute names grant %s", res.GrantID)
		}
	}
	if got, _ := f.reg.Grants().Get(g.GrantID); got.Uses != 0 || got.State != surface.GrantActive {
		t.Fatalf("%+v", got)
	}
	if n := len(f.types("grant-used")); n != 0 {
		t.Fatalf("%d grant-used records", n)
	}
}

// No agent path reaches a grant. Nothing of an invocation names one; a
// grant id sent as evidence is unknown evidence (CONFIRMATION_INVALID
// mismatch, audited); an input member naming it is input like any other;
// no tool of the direct or meta catalog creates, lists or uses grants.
func TestAgentCannotReachGrants(t *testing.T) {
	f := newGrantFixture(t, nil)
	g := f.create(t, wipeGrant("mcp-bridge:b"))
	for _, typ := range []any{surface.Invocation{}, surface.InvokeOptions{}, surface.CallOptions{}} {
		b, _ := json.Marshal(typ)
		if strings.Contains(strings.ToLower(string(b)), "grant") {
			t.Fatalf("%T has a grant field: %s", typ, b)
		}
	}
	res := f.reg.Invoke(bg, surface.Invocation{CapabilityID: gWipeID, Input: json.RawMessage(`{}`), ConfirmationID: g.GrantID}, as("a"))
	if invalidReason(t, res) != "mismatch" || f.ran.Load() != 0 {
		t.Fatalf("%+v", res)
	}
	settled := f.types("invocation-settled")
	if last := settled[len(settled)-1]; last.Code != surface.CodeConfirmationInvalid || last.ConsumerID != "mcp-bridge:a" || last.GrantID != "" {
		t.Fatalf("%+v", last)
	}
	surfacetest.RequireCode(t, f.call("a", gWipeID, `{"grantId":"`+g.GrantID+`"}`), surface.CodeInvalidInput)
	asked(t, f.call("a", gWipeID, `{}`))

	for _, mode := range []surface.ToolsetMode{surface.ToolsetDirect, surface.ToolsetMeta} {
		ts, err := surface.NewToolset(f.reg, surface.ToolsetOptions{Consumer: surface.Consumer{ID: "a", Kind: surface.ConsumerMCPBridge}, Topology: surface.TopologyRemote, Mode: mode})
		if err != nil {
			t.Fatal(err)
		}
		for _, tool := range ts.Catalog().Tools() {
			if strings.Contains(strings.ToLower(tool.Name+tool.Description), "grant") {
				t.Errorf("tool %s mentions grants", tool.Name)
			}
		}
		ts.Close()
	}
	if got, _ := f.reg.Grants().Get(g.GrantID); got.Uses != 0 {
		t.Fatal("another consumer used the grant")
	}
}

// The wire: a result of a call that needed no grant is what it always
// was (no grantId member; the error envelopes and snapshots of the other
// golden files are unchanged); a granted result names the grant after
// every other member; a grant's JSON is camelCase with ISO-8601 times.
func TestGrantGolden(t *testing.T) {
	f := newGrantFixture(t, &surface.Options{Now: goldenClock})
	plain := f.reg.Invoke(bg, surface.Invocation{InvocationID: "call-1", CapabilityID: gWipeID, Input: json.RawMessage(`{"ids":["d1"]}`)}, as("a"))
	f.reg.Confirmations().Resolve(plain.Error.ConfirmationID(), surface.Resolution{Approved: true})
	approved := f.reg.Invoke(bg, surface.Invocation{InvocationID: "call-1", CapabilityID: gWipeID, Input: json.RawMessage(`{"ids":["d1"]}`),
		ConfirmationID: plain.Error.ConfirmationID()}, as("a"))
	g := f.create(t, wipeGrant("mcp-bridge:a", surface.ValueIn("ids", "d1", "d2"), surface.InRange("count", 1, 5),
		surface.HasPrefix("site", "eu-"), surface.OnlyKeys("", "ids", "count", "site")))
	res := f.reg.Invoke(bg, surface.Invocation{InvocationID: "call-2", CapabilityID: gWipeID, Input: json.RawMessage(`{"ids":["d1"],"count":2,"site":"eu-1"}`)}, as("a"))
	granted(t, res, g.GrantID)
	g, _ = f.reg.Grants().Get(g.GrantID)
	requireGolden(t, "grant.json", map[string]any{"askedResult": plain, "approvedResult": approved, "grantedResult": res, "grant": g})
}

// Concurrent calls never spend more uses than a grant has: with one use
// left, exactly one of many simultaneous calls runs unasked.
func TestGrantUsesUnderConcurrency(t *testing.T) {
	f := newGrantFixture(t, nil)
	g := f.create(t, surface.GrantSpec{ConsumerKey: surface.AllConsumers, CapabilityID: gDisableID, TTL: time.Minute, MaxUses: 1})
	const n = 16
	results := make(chan surface.Result, n)
	start := make(chan struct{})
	for i := range n {
		go func() {
			<-start
			results <- f.reg.Invoke(bg, surface.Invocation{CapabilityID: gDisableID, Input: json.RawMessage(`{}`)}, as(string(rune('a'+i))))
		}()
	}
	close(start)
	grantedN := 0
	for range n {
		res := <-results
		switch {
		case res.GrantID == g.GrantID && res.Status == surface.StatusOK:
			grantedN++
		case res.Error != nil && res.Error.Code == surface.CodeConfirmationRequired:
		default:
			t.Fatalf("%+v", res)
		}
	}
	if got, _ := f.reg.Grants().Get(g.GrantID); grantedN != 1 || got.Uses != 1 || got.State != surface.GrantUsedUp {
		t.Fatalf("%d calls ran unasked; grant %+v", grantedN, got)
	}
}

// The Telemetry hook hears every grant change, with the invocation a use
// let through and the host's context, and the phase that says a grant
// skipped the question; a resolution's change carries the channel, the
// approver, the digest's SHA-256 and the grant it made.
func TestGrantTelemetry(t *testing.T) {
	type key struct{}
	var changes []surface.GrantChange
	var ctxValues []any
	var phases []surface.PhaseEvent
	var confirmations []surface.ConfirmationChange
	rec := recorderFunc(func(e surface.PhaseEvent) { phases = append(phases, e) })
	tel := &surface.Telemetry{
		Grant: func(ctx context.Context, c surface.GrantChange) {
			changes = append(changes, c)
			ctxValues = append(ctxValues, ctx.Value(key{}))
		},
		Invocation: func(ctx context.Context, _ surface.InvocationInfo) (context.Context, surface.InvocationRecorder) {
			return context.WithValue(ctx, key{}, "invocation"), rec
		},
		Confirmation: func(c surface.ConfirmationChange) { confirmations = append(confirmations, c) },
	}
	f := newGrantFixture(t, &surface.Options{Telemetry: tel})
	host := context.WithValue(bg, key{}, "host")
	g, err := f.reg.Grants().Create(host, wipeGrant("mcp-bridge:a"), "alice")
	if err != nil {
		t.Fatal(err)
	}
	res := f.call("a", gWipeID, `{}`)
	granted(t, res, g.GrantID)
	f.reg.Grants().Revoke(host, g.GrantID, "bob")

	cid := requireConfirmationOf(t, f.call("a", gWipeID, `{"ids":["d1"]}`))
	made, err := f.reg.Confirmations().ResolveGrant(cid, surface.Resolution{Approved: true, Channel: surface.ChannelWebhook, Approver: surface.ApproverUser,
		Grant: &surface.GrantSpec{TTL: time.Minute}})
	if err != nil {
		t.Fatal(err)
	}

	kinds := []string{}
	for _, c := range changes {
		kinds = append(kinds, string(c.Kind))
	}
	if strings.Join(kinds, ",") != "created,used,revoked,created" || changes[1].InvocationID != res.InvocationID || changes[1].Uses != 1 ||
		ctxValues[0] != "host" || ctxValues[1] != "invocation" || ctxValues[2] != "host" || changes[3].ConfirmationID != cid {
		t.Fatalf("changes %+v, contexts %v", changes, ctxValues)
	}
	var sawGranted bool
	for _, p := range phases {
		if p.Phase == surface.PhaseConfirmationGranted {
			sawGranted = p.GrantID == g.GrantID
		}
	}
	if !sawGranted || surface.PhaseConfirmationGranted.String() != "confirmation-granted" {
		t.Fatalf("phases %+v", phases)
	}
	last := confirmations[len(confirmations)-1]
	if last.Outcome != surface.OutcomeApproved || last.Channel != surface.ChannelWebhook || last.Approver != surface.ApproverUser ||
		last.GrantID != made.GrantID || len(last.Digest) != 64 || last.Digest != confirmations[len(confirmations)-2].Digest {
		t.Fatalf("confirmation changes %+v", confirmations)
	}
}

// recorderFunc is an InvocationRecorder that hands phases to a func.
type recorderFunc func(surface.PhaseEvent)

func (f recorderFunc) Phase(e surface.PhaseEvent) { f(e) }
func (recorderFunc) Settle(surface.Settlement)    {}
