package surface_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/agentsurface/agentsurface/surface"
	"github.com/agentsurface/agentsurface/surface/surfacetest"
)

// probe is a component whose handlers count calls and can be held open.
type probe struct {
	calls   atomic.Int64
	release chan struct{} // handlers wait for it when hold is set
	hold    atomic.Bool
	seen    chan string // invocation ids, as handlers start
}

func newProbe() *probe {
	return &probe{release: make(chan struct{}), seen: make(chan string, 64)}
}

func (p *probe) wait(ctx context.Context, call *surface.Call) error {
	p.calls.Add(1)
	select {
	case p.seen <- call.InvocationID:
	default:
	}
	if !p.hold.Load() {
		return nil
	}
	select {
	case <-p.release:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

type echo struct {
	IDs []string `json:"ids"`
}

// component returns "devices.table"/instance with observation readState,
// local-state action selectRows (echoing its input) and navigation action
// open.
func (p *probe) component(instance string) surface.Component {
	return surface.Component{
		Type: "devices.table", InstanceID: instance, Description: "Devices table " + instance,
		Observations: map[string]surface.Capability{
			"readState": surface.Observation(surface.ObservationDef[echo]{
				Description: "Reads",
				Read: func(ctx context.Context, call *surface.Call) (echo, error) {
					return echo{IDs: []string{instance}}, p.wait(ctx, call)
				},
			}),
		},
		Actions: map[string]surface.Capability{
			"selectRows": surface.Action(surface.ActionDef[echo, echo]{
				Description: "Selects", Effect: surface.EffectLocalState,
				Execute: func(ctx context.Context, call *surface.Call, in echo) (echo, error) {
					return in, p.wait(ctx, call)
				},
			}),
			"open": surface.Action(surface.ActionDef[surface.None, surface.None]{
				Description: "Navigates", Effect: surface.EffectNavigation,
				Execute: func(ctx context.Context, call *surface.Call, _ surface.None) (surface.None, error) {
					return surface.None{}, p.wait(ctx, call)
				},
			}),
		},
	}
}

const selectID = "view:devices.table.selectRows"

func inv(id, capID, input string) surface.Invocation {
	i := surface.Invocation{InvocationID: id, CapabilityID: capID}
	if input != "" {
		i.Input = json.RawMessage(input)
	}
	return i
}

var bg = context.Background()

func as(id string) surface.InvokeOptions {
	return surface.InvokeOptions{Consumer: surface.Consumer{ID: id, Kind: surface.ConsumerMCPBridge}}
}

func TestInvokeOK(t *testing.T) {
	reg := surfacetest.NewRegistry(t, nil)
	p := newProbe()
	h := surfacetest.MustRegister(t, reg, p.component("main"))
	rec := surfacetest.Record(t, reg)
	res := reg.Invoke(bg, surface.Invocation{CapabilityID: selectID, RegistrationID: h.ID(), Input: json.RawMessage(`{"ids":["d1","d2"]}`)}, as("a"))
	surfacetest.RequireOK(t, res)
	if res.Output != `{"ids":["d1","d2"]}` || !strings.HasPrefix(res.InvocationID, "inv_") || res.SurfaceVersion != "1" || res.SurfaceChanged {
		t.Fatalf("result %+v", res)
	}
	var out echo
	if err := res.Decode(&out); err != nil || len(out.IDs) != 2 {
		t.Fatalf("Decode: %v %v", out, err)
	}
	b, _ := json.Marshal(res)
	want := fmt.Sprintf(`{"status":"ok","invocationId":%q,"capabilityId":"view:devices.table.selectRows","output":{"ids":["d1","d2"]},"surfaceVersion":"1"}`, res.InvocationID)
	if string(b) != want {
		t.Fatalf("JSON %s\nwant %s", b, want)
	}
	types := strings.Join(rec.Types(), ",")
	if types != "invocation-started,invocation-settled" {
		t.Fatalf("events %s", types)
	}
	ev := rec.Events()
	if s := ev[0].(surface.InvocationStarted); s.ConsumerID != "a" || s.InvocationID != res.InvocationID {
		t.Fatalf("started %+v", s)
	}
	if s := ev[1].(surface.InvocationSettled); s.Status != surface.StatusOK || s.Code != "" {
		t.Fatalf("settled %+v", s)
	}

	// An action without output settles ok without output.
	res = reg.Invoke(bg, inv("", "view:devices.table.open", ""), as("a"))
	surfacetest.RequireOK(t, res)
	if res.Output != "" {
		t.Fatalf("output %q", res.Output)
	}
	// Observations ignore input.
	res = reg.Invoke(bg, inv("", "view:devices.table.readState", `{"junk":true}`), as("a"))
	surfacetest.RequireOK(t, res)
	if res.Output != `{"ids":["main"]}` {
		t.Fatalf("observation output %s", res.Output)
	}
}

// AS-ERR-001 (part): an error that is not a *surface.Error never reaches
// the agent; its text goes to the log.
func TestHandlerErrorsAreSanitised(t *testing.T) {
	var logs bytes.Buffer
	reg := surfacetest.NewRegistry(t, &surface.Options{Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	leak := errors.New("pq: SELECT * FROM users WHERE token='s3cr3t' (/srv/app/internal/db/users.go:42)")
	surfacetest.MustRegister(t, reg, surface.Component{Type: "users", Description: "Users", Actions: map[string]surface.Capability{
		"fail": surface.Action(surface.ActionDef[surface.None, surface.None]{Description: "Fails", Effect: surface.EffectLocalState,
			Execute: func(context.Context, *surface.Call, surface.None) (surface.None, error) { return surface.None{}, leak }}),
		"boom": surface.Action(surface.ActionDef[surface.None, surface.None]{Description: "Panics", Effect: surface.EffectLocalState,
			Execute: func(context.Context, *surface.Call, surface.None) (surface.None, error) { panic(leak.Error()) }}),
		"wrapped": surface.Action(surface.ActionDef[surface.None, surface.None]{Description: "Typed", Effect: surface.EffectLocalState,
			Execute: func(context.Context, *surface.Call, surface.None) (surface.None, error) {
				return surface.None{}, fmt.Errorf("ctx: %w", surface.NewError(surface.CodeNotAuthorized, "Only admins may do this.", map[string]any{"origin": "client"}))
			}}),
		"pre": surface.Action(surface.ActionDef[surface.None, surface.None]{Description: "Precondition", Effect: surface.EffectLocalState,
			Precondition: func(context.Context, *surface.Call, surface.None) error { return leak },
			Execute:      func(context.Context, *surface.Call, surface.None) (surface.None, error) { return surface.None{}, nil }}),
	}})
	for _, name := range []string{"fail", "boom", "pre"} {
		res := surfacetest.Invoke(t, reg, "view:users."+name, nil)
		e := surfacetest.RequireCode(t, res, surface.CodeExecutionFailed)
		b, _ := json.Marshal(res)
		for _, secret := range []string{"SELECT", "s3cr3t", "/srv/app", "users.go", "pq:"} {
			if strings.Contains(string(b), secret) {
				t.Errorf("%s: payload leaks %q: %s", name, secret, b)
			}
		}
		if e.Details["reason"] != "handler-error" || e.Retry != surface.RetryNo {
			t.Errorf("%s: %+v", name, e)
		}
	}
	if !strings.Contains(logs.String(), "s3cr3t") {
		t.Error("the cause must reach the operator's log")
	}
	e := surfacetest.RequireCode(t, surfacetest.Invoke(t, reg, "view:users.wrapped", nil), surface.CodeNotAuthorized)
	if e.Message != "Only admins may do this." || e.Retry != surface.RetryNo || !errors.Is(e, surface.CodeNotAuthorized) {
		t.Errorf("typed error: %+v", e)
	}
}

func TestInvalidInput(t *testing.T) {
	reg := surfacetest.NewRegistry(t, nil)
	p := newProbe()
	surfacetest.MustRegister(t, reg, p.component("main"))
	for _, c := range []struct {
		input string
		path  string
	}{
		{`{"ids":[1]}`, "ids[0]"},
		{`{"ids":"d1"}`, "ids"},
		{`{}`, "ids"}, // AS-ERR-001: a missing property at its own path
		{`{"ids":[],"extra":1}`, "extra"},
		{`not json`, ""},
		{`[1,2`, ""},
		{`"s"`, ""},
	} {
		res := reg.Invoke(bg, inv("", selectID, c.input), as("a"))
		e := surfacetest.RequireCode(t, res, surface.CodeInvalidInput)
		issues, _ := e.Details["issues"].([]surface.Issue)
		if len(issues) == 0 || issues[0].Path != c.path || e.Retry != surface.RetryWithChanges {
			t.Errorf("%s: %+v", c.input, e)
		}
	}
	if p.calls.Load() != 0 {
		t.Fatal("the handler ran on invalid input")
	}
	// An action taking None accepts no input or an empty object.
	surfacetest.RequireOK(t, reg.Invoke(bg, inv("", "view:devices.table.open", ""), as("a")))
	surfacetest.RequireOK(t, reg.Invoke(bg, inv("", "view:devices.table.open", "{}"), as("a")))
	surfacetest.RequireCode(t, reg.Invoke(bg, inv("", "view:devices.table.open", `{"x":1}`), as("a")), surface.CodeInvalidInput)
}

// AS-IDENT-001: same consumer, id and request join in flight (one
// execution), then replay the cached result.
func TestIdempotentJoinAndReplay_AS_IDENT_001(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		reg := surface.New(nil)
		defer reg.Close()
		p := newProbe()
		p.hold.Store(true)
		surfacetest.MustRegister(t, reg, p.component("main"))
		rec := surfacetest.Record(t, reg)
		results := make([]surface.Result, 3)
		var wg sync.WaitGroup
		for i := range 3 {
			wg.Go(func() { results[i] = reg.Invoke(bg, inv("call-1", selectID, `{"ids":["d1"]}`), as("a")) })
		}
		synctest.Wait()
		if n := p.calls.Load(); n != 1 {
			t.Fatalf("handler ran %d times while joined", n)
		}
		close(p.release)
		wg.Wait()
		for _, r := range results {
			surfacetest.RequireOK(t, r)
			if r != results[0] {
				t.Fatalf("joined results differ: %+v vs %+v", r, results[0])
			}
		}
		time.Sleep(time.Minute)
		replay := reg.Invoke(bg, inv("call-1", selectID, `{ "ids" : [ "d1" ] }`), as("a")) // same canonical request
		if replay != results[0] || p.calls.Load() != 1 {
			t.Fatalf("replay %+v (calls %d)", replay, p.calls.Load())
		}
		if got := strings.Join(rec.Types(), ","); got != "invocation-started,invocation-settled" {
			t.Fatalf("joins and replays must emit nothing: %s", got)
		}
	})
}

// AS-IDENT-002 and AS-IDENT-003: a reused id with another input or
// capability conflicts and leaves the stored record intact.
func TestIdempotencyConflict_AS_IDENT_002_003(t *testing.T) {
	reg := surfacetest.NewRegistry(t, nil)
	p := newProbe()
	surfacetest.MustRegister(t, reg, p.component("main"))
	first := reg.Invoke(bg, inv("call-1", selectID, `{"ids":["d1"]}`), as("a"))
	surfacetest.RequireOK(t, first)
	rec := surfacetest.Record(t, reg)
	for _, other := range []surface.Invocation{
		inv("call-1", selectID, `{"ids":["d2"]}`),         // AS-IDENT-002
		inv("call-1", "view:devices.table.readState", ""), // AS-IDENT-003
		{InvocationID: "call-1", CapabilityID: selectID, Input: json.RawMessage(`{"ids":["d1"]}`), InstanceID: "main"},
	} {
		res := reg.Invoke(bg, other, as("a"))
		e := surfacetest.RequireCode(t, res, surface.CodeInvocationConflict)
		if e.Retry != surface.RetryWithChanges || e.Details["reason"] != "id-reused-with-different-request" || len(e.Details) != 1 {
			t.Fatalf("conflict %+v", e)
		}
		if b, _ := json.Marshal(res); strings.Contains(string(b), "d1") {
			t.Fatalf("conflict reveals the prior request: %s", b)
		}
	}
	if got := strings.Join(rec.Types(), ","); got != strings.Repeat("invocation-started,invocation-settled,", 2)+"invocation-started,invocation-settled" {
		t.Fatalf("conflict events: %s", got)
	}
	// The record is intact: the original request still replays.
	if again := reg.Invoke(bg, inv("call-1", selectID, `{"ids":["d1"]}`), as("a")); again != first || p.calls.Load() != 1 {
		t.Fatalf("record changed by a conflict: %+v", again)
	}
}

// AS-IDENT-004: consumers reuse one tool-call id independently.
func TestIdempotencyPerConsumer_AS_IDENT_004(t *testing.T) {
	reg := surfacetest.NewRegistry(t, nil)
	p := newProbe()
	surfacetest.MustRegister(t, reg, p.component("main"))
	a := reg.Invoke(bg, inv("toolu_1", selectID, `{"ids":["a"]}`), as("a"))
	b := reg.Invoke(bg, inv("toolu_1", selectID, `{"ids":["b"]}`), as("b"))
	anon := reg.Invoke(bg, inv("toolu_1", selectID, `{"ids":["c"]}`), surface.InvokeOptions{})
	for _, r := range []surface.Result{a, b, anon} {
		surfacetest.RequireOK(t, r)
	}
	if p.calls.Load() != 3 || a.Output == b.Output {
		t.Fatalf("consumers shared a key: %d calls", p.calls.Load())
	}
	// Same kind, other id; other kind, same id: distinct keys too.
	other := reg.Invoke(bg, inv("toolu_1", selectID, `{"ids":["d"]}`), surface.InvokeOptions{Consumer: surface.Consumer{ID: "a", Kind: surface.ConsumerWebMCP}})
	surfacetest.RequireOK(t, other)
}

// AS-IDENT-001: calls without an invocation id get generated ones, unique
// across goroutines; a retry with a generated id replays the cached result
// from whichever goroutine makes it.
func TestGeneratedIDsReplay_AS_IDENT_001(t *testing.T) {
	reg := surface.New(&surface.Options{Limits: surface.Limits{DedupeCacheSize: 2000, ActionQueueDepth: 16}})
	defer reg.Close()
	p := newProbe()
	surfacetest.MustRegister(t, reg, p.component("main"))
	const goroutines, each = 4, 100
	firsts := make([][]surface.Result, goroutines)
	var wg sync.WaitGroup
	for g := range goroutines {
		wg.Go(func() {
			for range each {
				firsts[g] = append(firsts[g], reg.Invoke(bg, inv("", selectID, `{"ids":["d1"]}`), as("a")))
			}
		})
	}
	wg.Wait()
	seen := map[string]bool{}
	for g := range goroutines {
		for _, first := range firsts[g] {
			surfacetest.RequireOK(t, first)
			if seen[first.InvocationID] {
				t.Fatalf("generated id %s given twice", first.InvocationID)
			}
			seen[first.InvocationID] = true
		}
	}
	for g := range goroutines {
		wg.Go(func() {
			for _, first := range firsts[(g+1)%goroutines] { // another goroutine's ids
				if again := reg.Invoke(bg, inv(first.InvocationID, selectID, `{"ids":["d1"]}`), as("a")); again != first {
					t.Errorf("retry of %s = %+v, want the replay %+v", first.InvocationID, again, first)
				}
			}
		})
	}
	wg.Wait()
	if n := p.calls.Load(); n != goroutines*each {
		t.Fatalf("handler ran %d times for %d first calls and as many retries", n, goroutines*each)
	}
}

// AS-IDENT-005: one caller's generated ids use the whole dedupe cache:
// each of DedupeCacheSize calls made one after another still replays
// (the cache must not keep a caller's keys in a fraction of itself).
func TestGeneratedIDsUseWholeCache_AS_IDENT_005(t *testing.T) {
	const size = 300
	reg := surface.New(&surface.Options{Limits: surface.Limits{DedupeCacheSize: size}})
	defer reg.Close()
	p := newProbe()
	surfacetest.MustRegister(t, reg, p.component("main"))
	ids := make([]string, size)
	for i := range ids {
		ids[i] = reg.Invoke(bg, inv("", selectID, `{"ids":["d1"]}`), as("a")).InvocationID
	}
	for _, id := range ids {
		surfacetest.RequireOK(t, reg.Invoke(bg, inv(id, selectID, `{"ids":["d1"]}`), as("a")))
	}
	if n := p.calls.Load(); n != size {
		t.Fatalf("handler ran %d times for %d calls and their retries", n, size)
	}
}

// AS-IDENT-005 and AS-BOUND-002: the dedupe window is bounded by TTL and
// size, deterministically under a fake clock; an expired key re-runs.
func TestDedupeBounds_AS_IDENT_005_AS_BOUND_002(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		reg := surface.New(&surface.Options{Limits: surface.Limits{DedupeCacheSize: 3, DedupeCacheTTL: time.Minute}})
		defer reg.Close()
		p := newProbe()
		surfacetest.MustRegister(t, reg, p.component("main"))
		call := func(id string) { surfacetest.RequireOK(t, reg.Invoke(bg, inv(id, selectID, `{"ids":["x"]}`), as("a"))) }
		call("k1")
		call("k1")
		if p.calls.Load() != 1 {
			t.Fatal("replay executed")
		}
		time.Sleep(time.Minute) // k1 expires exactly now
		call("k1")
		if p.calls.Load() != 2 {
			t.Fatal("an expired key must re-run")
		}
		// Size: k1 (t=1m), k2, k3, k4 → the oldest (k1) is evicted.
		call("k2")
		call("k3")
		call("k4")
		n := p.calls.Load()
		call("k2")
		call("k3")
		call("k4")
		if p.calls.Load() != n {
			t.Fatal("recent keys must replay")
		}
		call("k1")
		if p.calls.Load() != n+1 {
			t.Fatal("the oldest key must have been evicted")
		}
		// Expired entries are pruned before live ones are evicted.
		time.Sleep(30 * time.Second)
		call("k5") // k2, k3, k4 expire at +60s from their call; none yet
		time.Sleep(31 * time.Second)
		call("k6") // k2..k4 expired now: pruned, k1' and k5 survive
		n = p.calls.Load()
		call("k5")
		if p.calls.Load() != n {
			t.Fatal("a live key was evicted while expired ones were kept")
		}
	})
}

// AS-IDENT-006 (without confirmations): RATE_LIMITED and INVOCATION_CONFLICT
// are never cached, so a retry with the same id runs.
func TestNotCachedOutcomes_AS_IDENT_006(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		reg := surface.New(&surface.Options{Limits: surface.Limits{ActionQueueDepth: -1}})
		defer reg.Close()
		p := newProbe()
		p.hold.Store(true)
		surfacetest.MustRegister(t, reg, p.component("main"))
		done := make(chan surface.Result)
		go func() { done <- reg.Invoke(bg, inv("busy", selectID, `{"ids":["a"]}`), as("a")) }()
		synctest.Wait()
		limited := reg.Invoke(bg, inv("retry-me", selectID, `{"ids":["b"]}`), as("a"))
		e := surfacetest.RequireCode(t, limited, surface.CodeRateLimited)
		if e.Details["reason"] != "queue-full" || e.Details["retryAfterMs"] != 250 || e.Retry != surface.RetryAfterDelay {
			t.Fatalf("queue full: %+v", e)
		}
		close(p.release)
		surfacetest.RequireOK(t, <-done)
		surfacetest.RequireOK(t, reg.Invoke(bg, inv("retry-me", selectID, `{"ids":["b"]}`), as("a")))
		if p.calls.Load() != 2 {
			t.Fatalf("calls %d", p.calls.Load())
		}
	})
}

// AS-STALE-001: the staleness matrix, with tombstones and ambiguity.
func TestStalenessMatrix_AS_STALE_001(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		reg := surface.New(&surface.Options{Limits: surface.Limits{TombstoneTTL: time.Minute}})
		defer reg.Close()
		p := newProbe()
		call := func(regID, instance string) surface.Result {
			return reg.Invoke(bg, surface.Invocation{CapabilityID: selectID, RegistrationID: regID, InstanceID: instance, Input: json.RawMessage(`{"ids":[]}`)}, as("a"))
		}
		// Nothing registered, never issued id.
		surfacetest.RequireCode(t, call("", ""), surface.CodeCapabilityNotFound)
		surfacetest.RequireCode(t, call("reg_00zzAAAAAA", ""), surface.CodeCapabilityNotFound)

		old := surfacetest.MustRegister(t, reg, p.component("main"))
		surfacetest.RequireOK(t, call(old.ID(), ""))
		surfacetest.RequireOK(t, call("", ""))
		old.Unregister()
		// Tombstone, no candidates.
		e := surfacetest.RequireCode(t, call(old.ID(), ""), surface.CodeComponentUnmounted)
		if e.Details["phase"] != "resolve" {
			t.Fatalf("%+v", e)
		}
		e = surfacetest.RequireCode(t, call("", ""), surface.CodeComponentUnmounted)
		if e.Details["phase"] != "resolve" {
			t.Fatalf("%+v", e)
		}
		// Remount: the old id is replaced; a foreign id means reload.
		nw := surfacetest.MustRegister(t, reg, p.component("main"))
		e = surfacetest.RequireCode(t, call(old.ID(), ""), surface.CodeStaleCapability)
		if e.Details["reason"] != "registration-replaced" || e.Details["liveRegistrationId"] != nw.ID() {
			t.Fatalf("%+v", e)
		}
		e = surfacetest.RequireCode(t, call("reg_00zzAAAAAA", ""), surface.CodeStaleCapability)
		if e.Details["reason"] != "surface-reloaded" || e.Details["liveRegistrationId"] != nw.ID() {
			t.Fatalf("%+v", e)
		}
		// Ambiguity, resolved by instance or registration id.
		side := surfacetest.MustRegister(t, reg, p.component("aside"))
		e = surfacetest.RequireCode(t, call("", ""), surface.CodeAmbiguousInstance)
		refs, _ := e.Details["instances"].([]surface.InstanceRef)
		if len(refs) != 2 || refs[0].InstanceID != "aside" || refs[0].RegistrationID != side.ID() || refs[1].InstanceID != "main" || refs[0].Description != "Devices table aside" {
			t.Fatalf("instances %+v", refs)
		}
		surfacetest.RequireOK(t, call("", "aside"))
		surfacetest.RequireOK(t, call(nw.ID(), ""))
		// No candidate for the instance, and a live tombstone lists the
		// capability (the instance is ignored there): unmounted.
		surfacetest.RequireCode(t, call("", "nope"), surface.CodeComponentUnmounted)
		// Tombstones decay to not found.
		nw.Unregister()
		side.Unregister()
		surfacetest.RequireCode(t, call("", ""), surface.CodeComponentUnmounted)
		time.Sleep(time.Minute)
		surfacetest.RequireCode(t, call("", ""), surface.CodeCapabilityNotFound)
		surfacetest.RequireCode(t, call(nw.ID(), ""), surface.CodeCapabilityNotFound)
		// Unparseable and other-plane ids are simply not found.
		for _, id := range []string{"", "view:", "view:Devices.x", "domain:devices.disable", "mcp:x", strings.Repeat("a", 500)} {
			res := reg.Invoke(bg, surface.Invocation{CapabilityID: id}, as("a"))
			surfacetest.RequireCode(t, res, surface.CodeCapabilityNotFound)
			if res.CapabilityID != id {
				t.Fatalf("capabilityId not echoed: %q", res.CapabilityID)
			}
		}
	})
}

// AS-STALE-002: a surfaceVersion hint is ignored for view capabilities.
func TestVersionHintIgnoredForViews_AS_STALE_002(t *testing.T) {
	reg := surfacetest.NewRegistry(t, nil)
	p := newProbe()
	surfacetest.MustRegister(t, reg, p.component("main"))
	res := reg.Invoke(bg, surface.Invocation{CapabilityID: selectID, SurfaceVersion: "999", Input: json.RawMessage(`{"ids":[]}`)}, as("a"))
	surfacetest.RequireOK(t, res)
	if res.SurfaceVersion != "1" {
		t.Fatalf("version %s", res.SurfaceVersion)
	}
}

// AS-AVAIL-001: availability is re-checked at invocation, with its reason.
func TestAvailabilityAtInvoke_AS_AVAIL_001(t *testing.T) {
	reg := surfacetest.NewRegistry(t, nil)
	var open atomic.Bool
	ran := 0
	h := surfacetest.MustRegister(t, reg, surface.Component{Type: "drawer", Description: "Drawer", Actions: map[string]surface.Capability{
		"close": surface.Action(surface.ActionDef[surface.None, surface.None]{Description: "Closes", Effect: surface.EffectLocalState,
			When: open.Load, UnavailableReason: "The drawer is already closed",
			Execute: func(context.Context, *surface.Call, surface.None) (surface.None, error) {
				ran++
				return surface.None{}, nil
			}}),
	}})
	e := surfacetest.RequireCode(t, surfacetest.Invoke(t, reg, "view:drawer.close", nil), surface.CodeCapabilityNotAvailable)
	if e.Details["reason"] != "The drawer is already closed" || e.Retry != surface.RetryAfterRefresh {
		t.Fatalf("%+v", e)
	}
	open.Store(true) // lazy drift, no push: invocation sees it anyway
	surfacetest.RequireOK(t, surfacetest.Invoke(t, reg, "view:drawer.close", nil))
	h.Update(surface.Update{Disabled: new(true)})
	e = surfacetest.RequireCode(t, surfacetest.Invoke(t, reg, "view:drawer.close", nil), surface.CodeCapabilityNotAvailable)
	if e.Details["reason"] != "component-disabled" || ran != 1 {
		t.Fatalf("%+v ran %d", e, ran)
	}
	h.Update(surface.Update{Disabled: new(false), Availability: map[string]surface.Availability{"close": {Reason: "Busy"}}})
	e = surfacetest.RequireCode(t, surfacetest.Invoke(t, reg, "view:drawer.close", nil), surface.CodeCapabilityNotAvailable)
	if e.Details["reason"] != "Busy" {
		t.Fatalf("%+v", e)
	}
}

func TestPrecondition(t *testing.T) {
	reg := surfacetest.NewRegistry(t, nil)
	known := map[string]bool{"d1": true}
	ran := 0
	surfacetest.MustRegister(t, reg, surface.Component{Type: "devices", Description: "Devices", Actions: map[string]surface.Capability{
		"pick": surface.Action(surface.ActionDef[echo, surface.None]{Description: "Picks", Effect: surface.EffectLocalState,
			Precondition: func(_ context.Context, call *surface.Call, in echo) error {
				for _, id := range in.IDs {
					if !known[id] {
						return surface.Precondition("Unknown device id; read the table first.", map[string]any{"unknown": []string{id}})
					}
				}
				return nil
			},
			Execute: func(context.Context, *surface.Call, echo) (surface.None, error) { ran++; return surface.None{}, nil }}),
	}})
	e := surfacetest.RequireCode(t, surfacetest.Invoke(t, reg, "view:devices.pick", echo{IDs: []string{"d9"}}), surface.CodePreconditionFailed)
	if e.Retry != surface.RetryWithChanges || e.Message != "Unknown device id; read the table first." || ran != 0 {
		t.Fatalf("%+v", e)
	}
	surfacetest.RequireOK(t, surfacetest.Invoke(t, reg, "view:devices.pick", echo{IDs: []string{"d1"}}))
}

// AS-SER-001: output nesting is capped at 64 levels.
func TestOutputDepthCap(t *testing.T) {
	nest := func(n int) any {
		var v any = "leaf"
		for range n {
			v = []any{v}
		}
		return v
	}
	reg := surfacetest.NewRegistry(t, nil)
	surfacetest.MustRegister(t, reg, surface.Component{Type: "deep", Description: "Deep", Actions: map[string]surface.Capability{
		"nest": surface.Action(surface.ActionDef[int, any]{Description: "Nests", Effect: surface.EffectLocalState,
			Execute: func(_ context.Context, _ *surface.Call, n int) (any, error) { return nest(n), nil }}),
	}})
	surfacetest.RequireOK(t, reg.Invoke(bg, inv("", "view:deep.nest", `64`), as("a")))
	e := surfacetest.RequireCode(t, reg.Invoke(bg, inv("", "view:deep.nest", `65`), as("a")), surface.CodeExecutionFailed)
	if e.Details["reason"] != "output-invalid" {
		t.Fatalf("%+v", e)
	}
}

// An action taking any accepts absent or null input; sentinel and partial
// errors from handlers reach the agent well formed.
func TestAnyInputAndPartialErrors(t *testing.T) {
	reg := surfacetest.NewRegistry(t, nil)
	var got []any
	surfacetest.MustRegister(t, reg, surface.Component{Type: "loose", Description: "Loose", Actions: map[string]surface.Capability{
		"take": surface.Action(surface.ActionDef[any, surface.None]{Description: "Takes anything", Effect: surface.EffectLocalState,
			Precondition: func(_ context.Context, _ *surface.Call, in any) error { return nil },
			Execute: func(_ context.Context, _ *surface.Call, in any) (surface.None, error) {
				got = append(got, in)
				return surface.None{}, nil
			}}),
		"sentinel": surface.Action(surface.ActionDef[surface.None, surface.None]{Description: "Fails", Effect: surface.EffectLocalState,
			Execute: func(context.Context, *surface.Call, surface.None) (surface.None, error) {
				return surface.None{}, surface.CodeTimeout
			}}),
		"oddRetry": surface.Action(surface.ActionDef[surface.None, surface.None]{Description: "Fails", Effect: surface.EffectLocalState,
			Execute: func(context.Context, *surface.Call, surface.None) (surface.None, error) {
				return surface.None{}, &surface.Error{Code: surface.CodeNotAuthorized, Retry: "maybe-later"}
			}}),
	}})
	surfacetest.RequireOK(t, reg.Invoke(bg, inv("", "view:loose.take", ""), as("a")))
	surfacetest.RequireOK(t, reg.Invoke(bg, inv("", "view:loose.take", "null"), as("a")))
	surfacetest.RequireOK(t, reg.Invoke(bg, inv("", "view:loose.take", `[1,"x"]`), as("a")))
	if len(got) != 3 || got[0] != nil || got[1] != nil {
		t.Fatalf("%v", got)
	}
	e := surfacetest.RequireCode(t, reg.Invoke(bg, inv("", "view:loose.sentinel", ""), as("a")), surface.CodeTimeout)
	if e.Message == "" || e.Retry != surface.RetryNo {
		t.Fatalf("%+v", e)
	}
	e = surfacetest.RequireCode(t, reg.Invoke(bg, inv("", "view:loose.oddRetry", ""), as("a")), surface.CodeNotAuthorized)
	if e.Message == "" || e.Retry != surface.RetryNo {
		t.Fatalf("%+v", e)
	}
}

// Consumers never share idempotency keys, whatever their ids contain.
func TestDedupeKeysDoNotCollide(t *testing.T) {
	reg := surfacetest.NewRegistry(t, nil)
	p := newProbe()
	surfacetest.MustRegister(t, reg, p.component("main"))
	a := reg.Invoke(bg, inv("call-1", selectID, `{"ids":["secret"]}`), as("alice smith"))
	b := reg.Invoke(bg, inv("smith call-1", selectID, `{"ids":["secret"]}`), as("alice"))
	surfacetest.RequireOK(t, a)
	surfacetest.RequireOK(t, b)
	if p.calls.Load() != 2 || b.InvocationID != "smith call-1" {
		t.Fatalf("keys collided: %d calls, %+v", p.calls.Load(), b)
	}
}
