package surface_test

import (
	"context"
	"encoding/json"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/agentsurface/agentsurface/surface"
	"github.com/agentsurface/agentsurface/surface/surfacetest"
)

// layered records the order in which policy hooks run.
type layered struct {
	mu  sync.Mutex
	log []string
}

func (l *layered) add(s string) {
	l.mu.Lock()
	l.log = append(l.log, s)
	l.mu.Unlock()
}

func (l *layered) policy(name string) surface.Policy {
	return surface.Policy{
		Name: name,
		Authorize: func(ctx context.Context, pc *surface.PolicyContext, next surface.Next) surface.Result {
			l.add("authorize:" + name)
			res := next(ctx)
			l.add("authorized:" + name)
			return res
		},
		Invoke: func(ctx context.Context, ic *surface.InvokeContext, next surface.Next) surface.Result {
			b, _ := json.Marshal(ic.Input)
			l.add("invoke:" + name + ":" + string(b))
			return next(ctx)
		},
	}
}

// AS-POLICY-001: policies use the registry clock.
func TestPolicyClock_AS_POLICY_001(t *testing.T) {
	fixed := time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)
	var seen []time.Time
	clock := surface.Policy{Name: "clock",
		Discover: func(pc *surface.PolicyContext) surface.Decision {
			seen = append(seen, pc.Now())
			return surface.Expose()
		},
		Authorize: func(ctx context.Context, pc *surface.PolicyContext, next surface.Next) surface.Result {
			seen = append(seen, pc.Now())
			return next(ctx)
		}}
	reg := surfacetest.NewRegistry(t, &surface.Options{Now: func() time.Time { return fixed }, Policies: []surface.Policy{clock}})
	p := newProbe()
	surfacetest.MustRegister(t, reg, p.component("main"))
	reg.Snapshot(surface.SnapshotOptions{})
	surfacetest.RequireOK(t, surfacetest.Invoke(t, reg, "view:devices.table.readState", nil))
	if len(seen) < 4 {
		t.Fatalf("hooks ran %d times", len(seen))
	}
	for _, at := range seen {
		if !at.Equal(fixed) {
			t.Fatalf("policy saw %v, not the registry clock", at)
		}
	}
	// The built-in rate limiter runs on the registry clock too: under a
	// fake clock, time only moves when the clock does.
	now := fixed
	limited := surfacetest.NewRegistry(t, &surface.Options{Now: func() time.Time { return now }, Policies: []surface.Policy{surface.RateLimit(1, 10*time.Second)}})
	surfacetest.MustRegister(t, limited, newProbe().component("main"))
	surfacetest.RequireOK(t, surfacetest.Invoke(t, limited, "view:devices.table.readState", nil))
	e := surfacetest.RequireCode(t, surfacetest.Invoke(t, limited, "view:devices.table.readState", nil), surface.CodeRateLimited)
	if e.Details["retryAfterMs"] != int64(10000) || e.Details["reason"] != "rate" {
		t.Fatalf("%+v", e)
	}
	now = now.Add(10*time.Second + time.Millisecond)
	surfacetest.RequireOK(t, surfacetest.Invoke(t, limited, "view:devices.table.readState", nil))
}

// AS-POLICY-002: discovery is most-restrictive-wins over three layers.
func TestDiscoveryLayers_AS_POLICY_002(t *testing.T) {
	decide := func(name string, d func(pc *surface.PolicyContext) surface.Decision) surface.Policy {
		return surface.Policy{Name: name, Discover: d}
	}
	registry := decide("registry", func(pc *surface.PolicyContext) surface.Decision {
		if pc.Consumer.ID == "banned" {
			return surface.Hide()
		}
		return surface.Expose()
	})
	component := decide("component", func(pc *surface.PolicyContext) surface.Decision {
		if pc.Kind == surface.KindAction {
			return surface.Disable("Sign the terms first")
		}
		return surface.Expose()
	})
	capability := decide("capability", func(pc *surface.PolicyContext) surface.Decision {
		if pc.Consumer.ID == "viewer" {
			return surface.Hide()
		}
		return surface.Disable("Second reason never shown")
	})
	reg := surfacetest.NewRegistry(t, &surface.Options{Policies: []surface.Policy{registry}})
	p := newProbe()
	c := p.component("main")
	c.Policies = []surface.Policy{component}
	c.Actions["guarded"] = surface.Action(surface.ActionDef[surface.None, surface.None]{Description: "Guarded", Effect: surface.EffectLocalState,
		Policies: []surface.Policy{capability},
		Execute:  func(context.Context, *surface.Call, surface.None) (surface.None, error) { return surface.None{}, nil }})
	surfacetest.MustRegister(t, reg, c)

	snap := func(id string) map[string]string {
		out := map[string]string{}
		s := reg.Snapshot(surface.SnapshotOptions{Consumer: surface.Consumer{ID: id}})
		for _, comp := range s.Components {
			for _, o := range comp.Observations {
				out[o.Name] = "available"
			}
			for _, a := range comp.Actions {
				out[a.Name] = a.UnavailableReason
				if a.Available {
					out[a.Name] = "available"
				}
			}
		}
		return out
	}
	if got := snap("banned"); len(got) != 0 {
		t.Fatalf("registry hide must empty the surface: %v", got)
	}
	got := snap("viewer")
	if _, ok := got["guarded"]; ok || got["readState"] != "available" || got["selectRows"] != "Sign the terms first" {
		t.Fatalf("viewer: %v", got)
	}
	got = snap("member")
	if got["guarded"] != "Sign the terms first" {
		t.Fatalf("first disable reason must win: %v", got)
	}
	// The component disappears when every capability is hidden.
	if s := reg.Snapshot(surface.SnapshotOptions{Consumer: surface.Consumer{ID: "banned"}}); len(s.Components) != 0 {
		t.Fatal("component of hidden capabilities listed")
	}
}

// AS-POLICY-003 and AS-AVAIL-002: invocation re-runs the per-consumer
// chain; hidden is indistinguishable from absent, disabled has its reason.
func TestInvocationRefilters_AS_POLICY_003_AS_AVAIL_002(t *testing.T) {
	admins := map[string]bool{"alice": true}
	onlyAdmins := surface.Policy{Name: "admins", Discover: func(pc *surface.PolicyContext) surface.Decision {
		if admins[pc.Consumer.ID] {
			return surface.Expose()
		}
		return surface.Hide()
	}}
	busy := false
	notWhileBusy := surface.Policy{Name: "busy", Discover: func(pc *surface.PolicyContext) surface.Decision {
		if busy {
			return surface.Disable("A sync is running")
		}
		return surface.Expose()
	}}
	reg := surfacetest.NewRegistry(t, nil)
	p := newProbe()
	c := p.component("main")
	c.Policies = []surface.Policy{onlyAdmins, notWhileBusy}
	surfacetest.MustRegister(t, reg, c)
	alice, bob := as("alice"), as("bob")
	surfacetest.RequireOK(t, reg.Invoke(bg, inv("x", selectID, `{"ids":[]}`), alice))
	hidden := reg.Invoke(bg, inv("y", selectID, `{"ids":[]}`), bob)
	absent := reg.Invoke(bg, inv("y", "view:devices.table.nothingHere", `{"ids":[]}`), as("carol"))
	hb, _ := json.Marshal(hidden.Error)
	ab, _ := json.Marshal(absent.Error)
	if hidden.Error == nil || string(hb) != string(ab) || hidden.SurfaceVersion != absent.SurfaceVersion {
		t.Fatalf("hidden %s vs absent %s", hb, ab)
	}
	busy = true // drift after discovery: invocation sees it
	e := surfacetest.RequireCode(t, reg.Invoke(bg, inv("z", selectID, `{"ids":[]}`), alice), surface.CodeCapabilityNotAvailable)
	if e.Details["reason"] != "A sync is running" {
		t.Fatalf("%+v", e)
	}
	if p.calls.Load() != 1 {
		t.Fatalf("handler ran %d times", p.calls.Load())
	}
}

// AS-POLICY-004: built-ins hide at discovery and fail typed at
// invocation; the rate limit and the audit policy behave as specified.
func TestBuiltinPolicies_AS_POLICY_004(t *testing.T) {
	host := map[string]any{}
	perms := map[string]bool{}
	check := func(h map[string]any, p string) bool { h["mutated"] = true; return perms[p] }
	reg := surfacetest.NewRegistry(t, &surface.Options{Context: func() map[string]any { return host }})
	p := newProbe()
	mk := func(typ string, pol ...surface.Policy) surface.Component {
		c := p.component("main")
		c.Type = typ
		c.Policies = pol
		return c
	}
	surfacetest.MustRegister(t, reg, mk("auth", surface.Authenticated("")))
	surfacetest.MustRegister(t, reg, mk("perm", surface.HasPermission("devices:write", check)))
	internal := mk("tenant", surface.TenantBoundary(
		func(h map[string]any) string { s, _ := h["tenant"].(string); return s },
		func(pc *surface.PolicyContext) string { s, _ := pc.Internal["tenant"].(string); return s }))
	internal.Internal = map[string]any{"tenant": "acme"}
	surfacetest.MustRegister(t, reg, internal)
	surfacetest.MustRegister(t, reg, mk("devonly", surface.OnlyIn(surface.EnvDevelopment)))

	types := func() string {
		var out []string
		for _, c := range reg.Snapshot(surface.SnapshotOptions{}).Components {
			out = append(out, c.Type)
		}
		return strings.Join(out, ",")
	}
	if got := types(); got != "" {
		t.Fatalf("anonymous sees %s", got)
	}
	host["user"] = "u1"
	host["tenant"] = "acme"
	perms["devices:write"] = true
	if got := types(); got != "auth,perm,tenant" {
		t.Fatalf("signed-in sees %s", got)
	}
	if _, mutated := host["mutated"]; mutated {
		t.Fatal("HasPermission's check must get a copy of the host context")
	}
	host["tenant"] = "other"
	if got := types(); got != "auth,perm" {
		t.Fatalf("other tenant sees %s", got)
	}
	surfacetest.RequireCode(t, surfacetest.Invoke(t, reg, "view:tenant.readState", nil), surface.CodeCapabilityNotFound)
	surfacetest.RequireCode(t, surfacetest.Invoke(t, reg, "view:devonly.readState", nil), surface.CodeCapabilityNotFound)

	// A chain that exposes at discovery but denies at authorization gives
	// the typed errors (semantics §12, DESIGN decision 2).
	exposeAll := surface.Policy{Name: "server-mapping", Discover: func(*surface.PolicyContext) surface.Decision { return surface.Expose() }}
	auth := surface.Authenticated("")
	perm := surface.HasPermission("devices:admin", check)
	authOnly := surface.Policy{Name: auth.Name, Authorize: auth.Authorize}
	permOnly := surface.Policy{Name: perm.Name, Authorize: perm.Authorize}
	surfacetest.MustRegister(t, reg, mk("typed", exposeAll, authOnly, permOnly))
	e := surfacetest.RequireCode(t, surfacetest.Invoke(t, reg, "view:typed.readState", nil), surface.CodeNotAuthorized)
	if e.Details["origin"] != "client" || strings.Contains(e.Message, "devices:admin") {
		t.Fatalf("%+v", e)
	}
	delete(host, "user")
	e = surfacetest.RequireCode(t, surfacetest.Invoke(t, reg, "view:typed.readState", nil), surface.CodeNotAuthenticated)
	if e.Retry != surface.RetryNo {
		t.Fatalf("%+v", e)
	}
	if p.calls.Load() != 0 {
		t.Fatalf("handlers ran %d times", p.calls.Load())
	}
}

// Rate limiting is a token bucket per consumer and capability,
// deterministic under synctest.
func TestRateLimitBucket(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		reg := surface.New(&surface.Options{Policies: []surface.Policy{surface.RateLimit(2, 10*time.Second)}})
		defer reg.Close()
		surfacetest.MustRegister(t, reg, newProbe().component("main"))
		read := func(who string) surface.Result {
			return reg.Invoke(bg, inv("", "view:devices.table.readState", ""), as(who))
		}
		surfacetest.RequireOK(t, read("a"))
		surfacetest.RequireOK(t, read("a"))
		e := surfacetest.RequireCode(t, read("a"), surface.CodeRateLimited)
		if e.Details["retryAfterMs"] != int64(5000) || e.Retry != surface.RetryAfterDelay {
			t.Fatalf("%+v", e)
		}
		surfacetest.RequireOK(t, read("b"))                                                // per consumer
		surfacetest.RequireOK(t, reg.Invoke(bg, inv("", selectID, `{"ids":[]}`), as("a"))) // per capability
		time.Sleep(2 * time.Second)
		e = surfacetest.RequireCode(t, read("a"), surface.CodeRateLimited) // rejections do not count
		if e.Details["retryAfterMs"] != int64(3000) {
			t.Fatalf("%+v", e)
		}
		time.Sleep(3 * time.Second)
		surfacetest.RequireOK(t, read("a"))
		surfacetest.RequireCode(t, read("a"), surface.CodeRateLimited)
	})
}

// AS-INVOKE-001: authorization runs before input handling and sees no
// input; AS-INVOKE-002: invoke hooks see only the validated effective
// input. Onion order: registry outermost.
func TestPolicyPhases_AS_INVOKE_001_002(t *testing.T) {
	l := &layered{}
	reg := surfacetest.NewRegistry(t, &surface.Options{Policies: []surface.Policy{l.policy("registry")}})
	p := newProbe()
	c := p.component("main")
	c.Policies = []surface.Policy{l.policy("component")}
	surfacetest.MustRegister(t, reg, c)

	// Invalid input: authorization ran, the invoke hooks did not.
	surfacetest.RequireCode(t, reg.Invoke(bg, inv("", selectID, `{"ids":"nope","token":"x"}`), as("a")), surface.CodeInvalidInput)
	if got := strings.Join(l.log, " "); got != "authorize:registry authorize:component authorized:component authorized:registry" {
		t.Fatalf("invalid input: %s", got)
	}
	l.log = nil
	surfacetest.RequireOK(t, reg.Invoke(bg, inv("", selectID, `{ "ids" : ["d1"] }`), as("a")))
	want := `authorize:registry authorize:component invoke:registry:{"ids":["d1"]} invoke:component:{"ids":["d1"]} authorized:component authorized:registry`
	if got := strings.Join(l.log, " "); got != want {
		t.Fatalf("got  %s\nwant %s", got, want)
	}
	// PolicyContext has no input field at all (compile-time guarantee); the
	// invoke context's Input is the validated value, never raw text.
}

// Policies can replace results, deny with a typed error, and misbehaving
// policies fail closed.
func TestPolicyMisbehaviour(t *testing.T) {
	deny := surface.Policy{Name: "deny", Authorize: func(context.Context, *surface.PolicyContext, surface.Next) surface.Result {
		return surface.Fail(surface.NewError(surface.CodeNotAuthorized, "Ask an administrator.", map[string]any{"origin": "client"}))
	}}
	skip := surface.Policy{Name: "skip", Authorize: func(context.Context, *surface.PolicyContext, surface.Next) surface.Result {
		return surface.Result{} // neither next nor Fail
	}}
	twice := surface.Policy{Name: "twice", Invoke: func(ctx context.Context, _ *surface.InvokeContext, next surface.Next) surface.Result {
		next(ctx)
		return next(ctx)
	}}
	boom := surface.Policy{Name: "boom", Invoke: func(context.Context, *surface.InvokeContext, surface.Next) surface.Result { panic("bug") }}
	badDiscover := surface.Policy{Name: "bad", Discover: func(*surface.PolicyContext) surface.Decision { panic("bug") }}
	for _, c := range []struct {
		pol  surface.Policy
		code surface.Code
	}{{deny, surface.CodeNotAuthorized}, {skip, surface.CodeExecutionFailed}, {twice, surface.CodeExecutionFailed}, {boom, surface.CodeExecutionFailed}, {badDiscover, surface.CodeCapabilityNotFound}} {
		reg := surfacetest.NewRegistry(t, &surface.Options{Policies: []surface.Policy{c.pol}})
		p := newProbe()
		surfacetest.MustRegister(t, reg, p.component("main"))
		surfacetest.RequireCode(t, reg.Invoke(bg, inv("", selectID, `{"ids":[]}`), as("a")), c.code)
		if c.pol.Name != "twice" && p.calls.Load() != 0 {
			t.Errorf("%s: handler ran", c.pol.Name)
		}
		if c.pol.Name == "twice" && p.calls.Load() != 1 {
			t.Errorf("twice: handler ran %d times", p.calls.Load())
		}
	}
}

// AS-SNAP-002 (policies): policies see Internal; agents never do.
func TestPoliciesSeeInternal_AS_SNAP_002(t *testing.T) {
	var seen []any
	spy := surface.Policy{Name: "spy",
		Discover: func(pc *surface.PolicyContext) surface.Decision {
			seen = append(seen, pc.Internal["secret"])
			return surface.Expose()
		},
		Authorize: func(ctx context.Context, pc *surface.PolicyContext, next surface.Next) surface.Result {
			seen = append(seen, pc.Internal["secret"], pc.ComponentMeta["plan"])
			return next(ctx)
		}}
	reg := surfacetest.NewRegistry(t, &surface.Options{Policies: []surface.Policy{spy}})
	c := newProbe().component("main")
	c.Internal = map[string]any{"secret": "tenant-42-key"}
	c.Meta = map[string]any{"plan": "pro"}
	surfacetest.MustRegister(t, reg, c)
	b, _ := json.Marshal(reg.Snapshot(surface.SnapshotOptions{}))
	res := surfacetest.Invoke(t, reg, "view:devices.table.readState", nil)
	rb, _ := json.Marshal(res)
	if strings.Contains(string(b)+string(rb), "tenant-42-key") {
		t.Fatal("internal metadata reached an agent payload")
	}
	if len(seen) < 3 || seen[0] != "tenant-42-key" || seen[len(seen)-1] != "pro" {
		t.Fatalf("policies saw %v", seen)
	}
}
