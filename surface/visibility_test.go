package surface_test

import (
	"context"
	"encoding/json"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/agentsurface/agentsurface/surface"
	"github.com/agentsurface/agentsurface/surface/surfacetest"
)

// The four leaks of hidden capabilities the consumer view closes, each as
// an attacker found it, and the side effects of a call naming a hidden
// capability. TestHiddenIsNonexistent_AS_POLICY_003 checks the general
// property.

// tenantOf is the tenant boundary of these tests: the host's current
// tenant against the component's Internal["tenant"].
func tenantOf(host *string) surface.Policy {
	return surface.TenantBoundary(func(map[string]any) string { return *host },
		func(pc *surface.PolicyContext) string { s, _ := pc.Internal["tenant"].(string); return s })
}

// account is an acct.detail instance of a tenant, with one read and a
// procedure reference bound to it.
func account(instance, tenant string) surface.Component {
	return surface.Component{Type: "acct.detail", InstanceID: instance, Description: "Account " + instance + " of " + tenant,
		Internal:     map[string]any{"tenant": tenant},
		Observations: map[string]surface.Capability{"read": surfacetest.Value("Reads the account", instance)},
		Procedures: []surface.Capability{surface.Procedure(surface.ProcedureDef[surface.None, surface.None]{
			ID: "domain:acct.close", Description: "Closes the account", Effect: surface.EffectServerQuery,
		})},
	}
}

// accountsRegistry returns a registry under the tenant boundary of host
// with an executor for domain:acct.close.
func accountsRegistry(t *testing.T, host *string, opts *surface.Options) *surface.Registry {
	t.Helper()
	var o surface.Options
	if opts != nil {
		o = *opts
	}
	o.Policies = append(o.Policies, tenantOf(host))
	reg := surfacetest.NewRegistry(t, &o)
	x := surface.NewFuncExecutor()
	surface.AddFunc(x, "acct.close", func(context.Context, *surface.ProcedureCall, surface.None) (surface.None, error) {
		return surface.None{}, nil
	})
	reg.SetProcedureExecutor(x)
	return reg
}

// mintedIDs matches the ids registries mint and the surface version,
// which differ between two registries answering the same.
var mintedIDs = regexp.MustCompile(`(reg|inv)_[0-9A-Za-z]+|"surfaceVersion":"[0-9]+"`)

// sameAnswer requires two results to be byte-identical up to minted ids
// and the surface version.
func sameAnswer(t *testing.T, what string, got, want surface.Result) {
	t.Helper()
	g, _ := json.Marshal(got)
	w, _ := json.Marshal(want)
	if a, b := mintedIDs.ReplaceAllString(string(g), "…"), mintedIDs.ReplaceAllString(string(w), "…"); a != b {
		t.Fatalf("%s:\n got  %s\n want %s", what, a, b)
	}
}

// Leak 1: AMBIGUOUS_INSTANCE listed the instances of another tenant; one
// visible instance now simply resolves, and ambiguity lists only the
// instances the consumer sees. AS-POLICY-003, AS-STALE-001.
func TestAmbiguityListsOnlyVisibleInstances_AS_POLICY_003(t *testing.T) {
	tenant := "acme"
	reg := accountsRegistry(t, &tenant, nil)
	alone := accountsRegistry(t, &tenant, nil) // never had globex's account
	for _, r := range []*surface.Registry{reg, alone} {
		surfacetest.MustRegister(t, r, account("a1", "acme"))
	}
	surfacetest.MustRegister(t, reg, account("g1", "globex"))
	read := surface.Invocation{CapabilityID: "view:acct.detail.read"}
	closeAcct := surface.Invocation{CapabilityID: "domain:acct.close"}
	for _, in := range []surface.Invocation{read, closeAcct} {
		res := reg.Invoke(bg, in, as("a"))
		surfacetest.RequireOK(t, res)
		sameAnswer(t, in.CapabilityID+" with one visible instance", res, alone.Invoke(bg, in, as("a")))
	}
	for _, r := range []*surface.Registry{reg, alone} {
		surfacetest.MustRegister(t, r, account("a2", "acme"))
	}
	for _, in := range []surface.Invocation{read, closeAcct} {
		res := reg.Invoke(bg, in, as("a"))
		e := surfacetest.RequireCode(t, res, surface.CodeAmbiguousInstance)
		if b, _ := json.Marshal(e); strings.Contains(string(b), "g1") || strings.Contains(string(b), "globex") {
			t.Fatalf("%s lists globex's account: %s", in.CapabilityID, b)
		}
		if refs := e.Details["instances"].([]surface.InstanceRef); len(refs) != 2 {
			t.Fatalf("%s: %+v", in.CapabilityID, refs)
		}
		sameAnswer(t, in.CapabilityID+" with two visible instances", res, alone.Invoke(bg, in, as("a")))
	}
	// The meta tools look the capability up in the consumer's snapshot,
	// then call: the same.
	var meta [2]surface.Result
	for i, r := range []*surface.Registry{reg, alone} {
		ts, err := surface.NewToolset(r, surface.ToolsetOptions{Consumer: as("a").Consumer, Mode: surface.ToolsetMeta, Topology: surface.TopologyRemote})
		if err != nil {
			t.Fatal(err)
		}
		defer ts.Close()
		meta[i] = ts.Call(bg, surface.MetaAct, json.RawMessage(`{"capabilityId":"domain:acct.close"}`), surface.CallOptions{ToolCallID: "m"})
	}
	surfacetest.RequireCode(t, meta[0], surface.CodeAmbiguousInstance)
	sameAnswer(t, "surface_act", meta[0], meta[1])
	tenant = "globex" // now only g1 is visible: it resolves
	res := reg.Invoke(bg, read, as("a"))
	surfacetest.RequireOK(t, res)
	if res.Output != `"g1"` {
		t.Fatalf("%+v", res)
	}
}

// Leak 2: a capability hidden by OnlyIn on a disabled component (or with
// When false, or an override) answered CAPABILITY_NOT_AVAILABLE with the
// reason. Hidden beats disabled and unavailable. AS-AVAIL-002,
// AS-POLICY-004.
func TestHiddenBeatsUnavailable_AS_AVAIL_002(t *testing.T) {
	reg := surfacetest.NewRegistry(t, &surface.Options{Environment: surface.EnvProduction})
	x := surface.NewFuncExecutor()
	surface.AddFunc(x, "debug.dump", func(context.Context, *surface.ProcedureCall, surface.None) (surface.None, error) {
		return surface.None{}, nil
	})
	reg.SetProcedureExecutor(x)
	off := func() bool { return false }
	devOnly := []surface.Policy{surface.OnlyIn(surface.EnvDevelopment)}
	h := surfacetest.MustRegister(t, reg, surface.Component{Type: "debug.panel", Description: "Debug panel", Disabled: true, Policies: devOnly,
		Observations: map[string]surface.Capability{"dump": surfacetest.Value("Dumps state", 1)},
		Actions: map[string]surface.Capability{
			"reset": surface.Action(surface.ActionDef[surface.None, surface.None]{Description: "Resets", Effect: surface.EffectLocalState, When: off,
				UnavailableReason: "Nothing to reset",
				Execute:           func(context.Context, *surface.Call, surface.None) (surface.None, error) { return surface.None{}, nil }}),
		},
		Procedures: []surface.Capability{surface.Procedure(surface.ProcedureDef[surface.None, surface.None]{
			ID: "domain:debug.dump", Description: "Dumps the server", Effect: surface.EffectServerQuery, When: off})},
	})
	unknown := func(capID string) surface.Result {
		return reg.Invoke(bg, surface.Invocation{CapabilityID: capID}, as("a"))
	}
	check := func(stage string) {
		t.Helper()
		for _, id := range []string{"view:debug.panel.dump", "view:debug.panel.reset", "domain:debug.dump"} {
			for _, regID := range []string{"", h.ID()} {
				res := reg.Invoke(bg, surface.Invocation{CapabilityID: id, RegistrationID: regID}, as("a"))
				surfacetest.RequireCode(t, res, surface.CodeCapabilityNotFound)
				absent := strings.Replace(id, "debug", "nothing", 1)
				got, want := res, unknown(absent)
				got.CapabilityID, want.CapabilityID = "", ""
				sameAnswer(t, stage+": "+id, got, want)
			}
		}
	}
	check("disabled component")
	h.Update(surface.Update{Disabled: new(false), Availability: map[string]surface.Availability{"dump": {Reason: "Busy"}}})
	check("override and When false")
	h.Update(surface.Update{Availability: map[string]surface.Availability{"dump": {Available: true}}})
	check("When false")
}

// Leak 3: a registration replaced by one the consumer cannot see gave its
// liveRegistrationId in STALE_CAPABILITY. liveRegistrationId now names
// only registrations the consumer sees. AS-STALE-001, AS-LIFE-005.
func TestStaleNamesOnlyVisibleReplacement_AS_STALE_001(t *testing.T) {
	tenant := "acme"
	opts := &surface.Options{OnDuplicate: surface.DuplicateReplace}
	reg := accountsRegistry(t, &tenant, opts)
	alone := accountsRegistry(t, &tenant, opts) // the replacement never existed
	old := surfacetest.MustRegister(t, reg, account("x", "acme"))
	oldAlone := surfacetest.MustRegister(t, alone, account("x", "acme"))
	replacement := surfacetest.MustRegister(t, reg, account("x", "globex")) // replaces it, for another tenant
	oldAlone.Unregister()
	for _, id := range []string{"view:acct.detail.read", "domain:acct.close"} {
		res := reg.Invoke(bg, surface.Invocation{CapabilityID: id, RegistrationID: old.ID()}, as("a"))
		e := surfacetest.RequireCode(t, res, surface.CodeComponentUnmounted)
		if _, named := e.Details["liveRegistrationId"]; named {
			t.Fatalf("%s names the hidden replacement: %+v", id, e)
		}
		sameAnswer(t, id+" with the replaced id", res, alone.Invoke(bg, surface.Invocation{CapabilityID: id, RegistrationID: oldAlone.ID()}, as("a")))
		// An id this registry never issued: not found, as if nothing
		// were live, rather than surface-reloaded with the hidden one.
		foreign := surface.Invocation{CapabilityID: id, RegistrationID: "reg_00zzAAAAAA"}
		res = reg.Invoke(bg, foreign, as("a"))
		surfacetest.RequireCode(t, res, surface.CodeCapabilityNotFound)
		sameAnswer(t, id+" with a foreign id", res, alone.Invoke(bg, foreign, as("a")))
	}
	// The replacement's own tenant sees it, and is pointed to it; acme's
	// registration it never saw, so its id is one it cannot know.
	tenant = "globex"
	e := surfacetest.RequireCode(t, reg.Invoke(bg, surface.Invocation{CapabilityID: "view:acct.detail.read", RegistrationID: old.ID()}, as("b")),
		surface.CodeStaleCapability)
	if e.Details["reason"] != "surface-reloaded" || e.Details["liveRegistrationId"] != replacement.ID() {
		t.Fatalf("%+v", e.Details)
	}
}

// Leak 4: the tombstone of a component the consumer could never see
// answered COMPONENT_UNMOUNTED. A tombstone answers only a consumer that
// could discover the registration it remembers. AS-STALE-001,
// AS-BOUND-001.
func TestTombstoneAnswersOnlyWhoCouldSee_AS_STALE_001(t *testing.T) {
	tenant := "acme"
	reg := accountsRegistry(t, &tenant, nil)
	h := surfacetest.MustRegister(t, reg, account("g1", "globex"))
	h.Unregister()
	for _, regID := range []string{h.ID(), ""} {
		for _, id := range []string{"view:acct.detail.read", "domain:acct.close"} {
			res := reg.Invoke(bg, surface.Invocation{CapabilityID: id, RegistrationID: regID}, as("a"))
			surfacetest.RequireCode(t, res, surface.CodeCapabilityNotFound)
		}
	}
	tenant = "globex" // a consumer of that tenant could see it: the precise answer
	for _, regID := range []string{h.ID(), ""} {
		e := surfacetest.RequireCode(t, reg.Invoke(bg, surface.Invocation{CapabilityID: "view:acct.detail.read", RegistrationID: regID}, as("b")),
			surface.CodeComponentUnmounted)
		if e.Details["phase"] != "resolve" {
			t.Fatalf("%+v", e)
		}
	}
}

// The side effects of a call naming a hidden capability are those of a
// call naming nothing: the same events and audit record (no registration
// id), the same idempotency entry (replayed, or in conflict with another
// request), no rate-limit token taken, no confirmation requested.
// AS-POLICY-003, AS-IDENT-001, AS-IDENT-002, AS-CONFIRM-005.
func TestHiddenLeavesNoTrace_AS_POLICY_003(t *testing.T) {
	tenant := "globex"
	sink := surface.NewMemorySink(0)
	reg := accountsRegistry(t, &tenant, &surface.Options{Audit: sink})
	rec := surfacetest.Record(t, reg)
	surfacetest.MustRegister(t, reg, surface.Component{Type: "acct.admin", Description: "Admin", Internal: map[string]any{"tenant": "acme"},
		Actions: map[string]surface.Capability{"wipe": surface.Action(surface.ActionDef[surface.None, surface.None]{
			Description: "Wipes", Effect: surface.EffectLocalState, Confirmation: surface.ConfirmRequired,
			Policies: []surface.Policy{surface.RateLimit(1, time.Hour)},
			Execute:  func(context.Context, *surface.Call, surface.None) (surface.None, error) { return surface.None{}, nil }})}})
	wipe := surface.Invocation{InvocationID: "x", CapabilityID: "view:acct.admin.wipe"}
	none := surface.Invocation{InvocationID: "x", CapabilityID: "view:acct.admin.nothing"}
	rec.Reset()
	// trace calls in as consumer c: twice (the second replays), then with
	// other input (a conflict); it returns the results, the events and
	// the audit records, with the capability id and the consumer masked.
	trace := func(in surface.Invocation, c string) (out []string) {
		mask := func(v any) string {
			b, _ := json.Marshal(v)
			return strings.NewReplacer(in.CapabilityID, "…", `"`+c+`"`, `"…"`, ":"+c+`"`, `:…"`).Replace(string(b))
		}
		other := in
		other.Input = json.RawMessage(`{}`)
		for _, call := range []surface.Invocation{in, in, other} {
			out = append(out, mask(reg.Invoke(bg, call, as(c))))
		}
		for _, e := range rec.Events() {
			out = append(out, mask(e))
		}
		rec.Reset()
		for _, e := range sink.Events() {
			if e.ConsumerID == as(c).Consumer.Key() {
				e.At, e.DurationMs = time.Time{}, nil
				out = append(out, mask(e))
			}
		}
		return out
	}
	hidden, absent := trace(wipe, "a"), trace(none, "b")
	if strings.Join(hidden, "\n") != strings.Join(absent, "\n") {
		t.Fatalf("a hidden capability leaves other traces than an absent one:\n%s\n---\n%s", strings.Join(hidden, "\n"), strings.Join(absent, "\n"))
	}
	if n := len(reg.Confirmations().Pending()); n != 0 {
		t.Fatalf("%d confirmations requested for a hidden capability", n)
	}
	// Visible now: its first call is the first to take the rate limit's
	// token.
	tenant = "acme"
	surfacetest.RequireCode(t, reg.Invoke(bg, surface.Invocation{CapabilityID: "view:acct.admin.wipe"}, as("a")), surface.CodeConfirmationRequired)
	surfacetest.RequireCode(t, reg.Invoke(bg, surface.Invocation{CapabilityID: "view:acct.admin.wipe"}, as("a")), surface.CodeRateLimited)
}

// The consumer view reads the host context once per call: one Snapshot,
// one Explain, one Invoke, however many candidates its policies judge and
// whatever phase first needs it; the handler sees that same context.
// AS-POLICY-003.
func TestHostContextReadOncePerCall_AS_POLICY_003(t *testing.T) {
	reads := 0
	tenant := "acme"
	reg := accountsRegistry(t, &tenant, &surface.Options{Context: func() map[string]any {
		reads++
		return map[string]any{"read": reads}
	}})
	var seen any
	for _, id := range []string{"a1", "a2", "a3"} {
		c := account(id, "acme")
		c.Actions = map[string]surface.Capability{"touch": surface.Action(surface.ActionDef[surface.None, surface.None]{
			Description: "Touches", Effect: surface.EffectLocalState,
			Execute: func(_ context.Context, call *surface.Call, _ surface.None) (surface.None, error) {
				seen = call.Host["read"]
				return surface.None{}, nil
			}})}
		surfacetest.MustRegister(t, reg, c)
	}
	for what, call := range map[string]func(){
		"snapshot": func() { reg.Snapshot(surface.SnapshotOptions{}) },
		"explain":  func() { reg.Explain(surface.SnapshotOptions{}) },
		"ambiguous call": func() {
			surfacetest.RequireCode(t, reg.Invoke(bg, surface.Invocation{CapabilityID: "view:acct.detail.touch"}, as("a")), surface.CodeAmbiguousInstance)
		},
		"call": func() {
			surfacetest.RequireOK(t, reg.Invoke(bg, surface.Invocation{CapabilityID: "view:acct.detail.touch", InstanceID: "a2"}, as("a")))
			if seen != reads {
				t.Errorf("the handler saw host context read %v, the call's was read %d", seen, reads)
			}
		},
	} {
		before := reads
		call()
		if n := reads - before; n != 1 {
			t.Errorf("%s read the host context %d times, want once", what, n)
		}
	}
}
