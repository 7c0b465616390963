package surface_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/agentsurface/agentsurface/surface"
	"github.com/agentsurface/agentsurface/surface/surfacetest"
)

// gated is an action whose executions block until released one by one,
// recording the order in which they start.
type gated struct {
	mu      sync.Mutex
	order   []string
	release chan struct{}
	effect  surface.Effect
	commit  func() // called by a navigation before it returns
	result  func(ctx context.Context) error
}

func (g *gated) capability() surface.Capability {
	effect := g.effect
	if effect == "" {
		effect = surface.EffectLocalState
	}
	return surface.Action(surface.ActionDef[echo, surface.None]{
		Description: "Gated", Effect: effect,
		Execute: func(ctx context.Context, call *surface.Call, in echo) (surface.None, error) {
			g.mu.Lock()
			g.order = append(g.order, strings.Join(in.IDs, ","))
			g.mu.Unlock()
			if g.release != nil {
				select {
				case <-g.release:
				case <-ctx.Done():
					if g.result != nil {
						return surface.None{}, g.result(ctx)
					}
					return surface.None{}, ctx.Err()
				}
			}
			if g.commit != nil {
				g.commit()
			}
			if g.result != nil {
				return surface.None{}, g.result(ctx)
			}
			return surface.None{}, nil
		},
	})
}

func (g *gated) started() []string {
	g.mu.Lock()
	defer g.mu.Unlock()
	return append([]string(nil), g.order...)
}

func gatedComponent(instance string, g *gated) surface.Component {
	return surface.Component{Type: "list", InstanceID: instance, Description: "A list",
		Actions: map[string]surface.Capability{"act": g.capability()}}
}

func actInput(tag string) surface.Invocation {
	return surface.Invocation{CapabilityID: "view:list.act", Input: json.RawMessage(`{"ids":["` + tag + `"]}`)}
}

// AS-CONC-002: actions are serialised per instance in FIFO order; overflow
// fails queue-full without running.
func TestActionQueue_AS_CONC_002(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		reg := surface.New(nil) // depth 2
		defer reg.Close()
		g := &gated{release: make(chan struct{})}
		surfacetest.MustRegister(t, reg, gatedComponent("one", g))
		results := make(chan string, 8)
		for _, tag := range []string{"a", "b", "c"} {
			go func() {
				res := reg.Invoke(bg, actInput(tag), as("x"))
				results <- tag + ":" + string(res.Status)
			}()
			synctest.Wait() // arrival order a, b, c
		}
		full := reg.Invoke(bg, actInput("d"), as("x"))
		e := surfacetest.RequireCode(t, full, surface.CodeRateLimited)
		if e.Details["reason"] != "queue-full" || e.Details["retryAfterMs"] != 250 {
			t.Fatalf("%+v", e)
		}
		if got := g.started(); len(got) != 1 || got[0] != "a" {
			t.Fatalf("started %v; want only a in flight", got)
		}
		for range 3 {
			g.release <- struct{}{}
			synctest.Wait()
		}
		if got := strings.Join(g.started(), ""); got != "abc" {
			t.Fatalf("order %s, want FIFO abc", got)
		}
		for range 3 {
			if r := <-results; !strings.HasSuffix(r, ":ok") {
				t.Fatal(r)
			}
		}
		// Instances do not share a queue.
		g2 := &gated{release: make(chan struct{})}
		surfacetest.MustRegister(t, reg, gatedComponent("two", g2))
		go reg.Invoke(bg, actInput("x"), as("x"))
		synctest.Wait()
		inv := actInput("y")
		inv.InstanceID = "one"
		go reg.Invoke(bg, inv, as("x"))
		synctest.Wait()
		if got := g.started(); got[len(got)-1] != "y" {
			t.Fatalf("instance one blocked by instance two: %v", got)
		}
		close(g.release)
		close(g2.release)
	})
}

// AS-CONC-010: unmount races — before execute, handler wins, unmount wins.
func TestUnmountRaces_AS_CONC_010(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		reg := surface.New(nil)
		defer reg.Close()

		// Unmount while queued: the handler never runs.
		g := &gated{release: make(chan struct{})}
		h := surfacetest.MustRegister(t, reg, gatedComponent("one", g))
		first := make(chan surface.Result, 1)
		second := make(chan surface.Result, 1)
		go func() { first <- reg.Invoke(bg, actInput("a"), as("x")) }()
		synctest.Wait()
		go func() { second <- reg.Invoke(bg, actInput("b"), as("x")) }()
		synctest.Wait()
		h.Unregister()
		// Unmount wins against the running one: settled at once.
		e := surfacetest.RequireCode(t, <-first, surface.CodeComponentUnmounted)
		if e.Details["phase"] != "mid-flight" {
			t.Fatalf("%+v", e)
		}
		e = surfacetest.RequireCode(t, <-second, surface.CodeComponentUnmounted)
		if e.Details["phase"] != "mid-flight" || strings.Join(g.started(), "") != "a" {
			t.Fatalf("queued call: %+v, started %v", e, g.started())
		}

		// Handler wins: it settled before the unmount.
		g2 := &gated{}
		h2 := surfacetest.MustRegister(t, reg, gatedComponent("two", g2))
		surfacetest.RequireOK(t, reg.Invoke(bg, actInput("c"), as("x")))
		h2.Unregister()

		// A non-navigation action that unregisters its own owner gets
		// COMPONENT_UNMOUNTED, and its late return is only audited.
		sink := surface.NewMemorySink(0)
		reg2 := surface.New(&surface.Options{Audit: sink})
		defer reg2.Close()
		var self *surface.Handle
		g3 := &gated{commit: func() { self.Unregister() }}
		self = surfacetest.MustRegister(t, reg2, gatedComponent("self", g3))
		res := reg2.Invoke(bg, actInput("d"), as("x"))
		surfacetest.RequireCode(t, res, surface.CodeComponentUnmounted)
		synctest.Wait()
		if !hasAudit(sink, surface.AuditLateSettlement) {
			t.Fatal("the handler's late return must be audited")
		}
	})
}

func hasAudit(s *surface.MemorySink, typ surface.AuditType) bool {
	for _, e := range s.Events() {
		if e.Type == typ {
			return true
		}
	}
	return false
}

// AS-LIFE-001 (in-flight half): unregistering aborts the handler's
// context: the handler sees it cancelled (context.Canceled, not a
// deadline) and the invocation settles COMPONENT_UNMOUNTED.
func TestUnregisterAbortsHandler_AS_LIFE_001(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		reg := surface.New(nil)
		defer reg.Close()
		var seen atomic.Value
		g := &gated{release: make(chan struct{}), result: func(ctx context.Context) error {
			seen.Store(ctx.Err())
			return ctx.Err()
		}}
		h := surfacetest.MustRegister(t, reg, gatedComponent("one", g))
		done := make(chan surface.Result)
		go func() { done <- reg.Invoke(bg, actInput("a"), as("x")) }()
		synctest.Wait()
		h.Unregister()
		surfacetest.RequireCode(t, <-done, surface.CodeComponentUnmounted)
		synctest.Wait()
		if err, _ := seen.Load().(error); err != context.Canceled {
			t.Fatalf("the handler's context ended with %v, want context.Canceled", err)
		}
	})
}

// AS-CONC-011: the timeout wins over a slow handler; the late result is
// only audited; the timeout's retry follows idempotency. Inline handlers
// (the default) wait on their context; isolated handlers ignore it and the
// invocation still settles at the deadline.
func TestTimeout_AS_CONC_011(t *testing.T) {
	for _, isolate := range []bool{false, true} {
		t.Run(fmt.Sprintf("isolate=%v", isolate), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) { testTimeout(t, isolate) })
		})
	}
}

func testTimeout(t *testing.T, isolate bool) {
	sink := surface.NewMemorySink(0)
	reg := surface.New(&surface.Options{Audit: sink, IsolateHandlers: isolate})
	defer reg.Close()
	hang := make(chan struct{})
	wait := func(ctx context.Context) {
		if isolate {
			<-hang // ignores ctx on purpose
			return
		}
		<-ctx.Done()
	}
	slow := func(idem bool, timeout time.Duration) surface.Capability {
		return surface.Action(surface.ActionDef[surface.None, surface.None]{
			Description: "Slow", Effect: surface.EffectLocalState, Idempotent: idem, Timeout: timeout,
			Execute: func(ctx context.Context, _ *surface.Call, _ surface.None) (surface.None, error) {
				wait(ctx)
				return surface.None{}, nil // too late: only audited
			}})
	}
	surfacetest.MustRegister(t, reg, surface.Component{Type: "slow", Description: "Slow", Actions: map[string]surface.Capability{
		"plain": slow(false, 0), "idem": slow(true, 2*time.Second),
	}, Observations: map[string]surface.Capability{
		"read": surface.Observation(surface.ObservationDef[int]{Description: "Slow read",
			Read: func(ctx context.Context, _ *surface.Call) (int, error) { wait(ctx); return 0, ctx.Err() }}),
	}})
	start := time.Now()
	e := surfacetest.RequireCode(t, reg.Invoke(bg, inv("", "view:slow.plain", ""), as("x")), surface.CodeTimeout)
	if time.Since(start) != 10*time.Second || e.Retry != surface.RetryNo || e.Details["timeoutMs"] != int64(10000) || e.Details["idempotent"] != false {
		t.Fatalf("default action timeout: %v %+v", time.Since(start), e)
	}
	start = time.Now()
	e = surfacetest.RequireCode(t, reg.Invoke(bg, inv("", "view:slow.idem", ""), as("x")), surface.CodeTimeout)
	if time.Since(start) != 2*time.Second || e.Retry != surface.RetryYes {
		t.Fatalf("capability timeout: %v %+v", time.Since(start), e)
	}
	start = time.Now()
	surfacetest.RequireCode(t, reg.Invoke(bg, inv("", "view:slow.idem", ""), surface.InvokeOptions{Timeout: time.Second}), surface.CodeTimeout)
	if time.Since(start) != time.Second {
		t.Fatalf("option timeout: %v", time.Since(start))
	}
	start = time.Now()
	e = surfacetest.RequireCode(t, reg.Invoke(bg, inv("", "view:slow.read", ""), as("x")), surface.CodeTimeout)
	if time.Since(start) != 5*time.Second || e.Retry != surface.RetryYes {
		t.Fatalf("observation timeout: %v %+v", time.Since(start), e)
	}
	close(hang)
	synctest.Wait()
	n := 0
	for _, ev := range sink.Events() {
		if ev.Type == surface.AuditLateSettlement {
			n++
		}
	}
	if n != 4 {
		t.Fatalf("%d late settlements audited, want 4", n)
	}
}

// AS-CONC-011: an inline handler that ignores its context delays the
// caller until it returns, but cannot change the outcome: a return after
// the deadline settles TIMEOUT and is audited as late; the action keeps
// its queue slot until then, so the next action never overlaps it.
func TestInlineHandlerIgnoringContext_AS_CONC_011(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		sink := surface.NewMemorySink(0)
		reg := surface.New(&surface.Options{Audit: sink})
		defer reg.Close()
		var running, overlaps atomic.Int32
		surfacetest.MustRegister(t, reg, surface.Component{Type: "slow", Description: "Slow", Actions: map[string]surface.Capability{
			"sleep": surface.Action(surface.ActionDef[surface.None, surface.None]{
				Description: "Sleeps", Effect: surface.EffectLocalState, Timeout: 2 * time.Second,
				Execute: func(context.Context, *surface.Call, surface.None) (surface.None, error) {
					if running.Add(1) > 1 {
						overlaps.Add(1)
					}
					defer running.Add(-1)
					time.Sleep(3 * time.Second) // ignores its context
					return surface.None{}, nil
				}}),
		}})
		start := time.Now()
		results := make(chan surface.Result, 2)
		for range 2 {
			go func() { results <- reg.Invoke(bg, inv("", "view:slow.sleep", ""), as("x")) }()
		}
		for range 2 {
			e := surfacetest.RequireCode(t, <-results, surface.CodeTimeout)
			if e.Details["timeoutMs"] != int64(2000) {
				t.Fatalf("%+v", e)
			}
		}
		if time.Since(start) != 6*time.Second || overlaps.Load() != 0 {
			t.Fatalf("took %v with %d overlaps; want 6s (two queued 3 s handlers) and none", time.Since(start), overlaps.Load())
		}
		if !hasAudit(sink, surface.AuditLateSettlement) {
			t.Fatal("the discarded return must be audited as late-settlement")
		}
	})
}

// The lazy handler context behaves as context.WithDeadline: a derived
// context inherits deadline and cancellation, Err and Cause agree once
// the deadline passes, and a context kept after the call is done.
func TestInlineHandlerContext(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		reg := surface.New(nil)
		defer reg.Close()
		var kept context.Context
		var report []string
		surfacetest.MustRegister(t, reg, surface.Component{Type: "ctx", Description: "Context", Actions: map[string]surface.Capability{
			"probe": surface.Action(surface.ActionDef[surface.None, surface.None]{
				Description: "Probes", Effect: surface.EffectLocalState, Timeout: time.Second,
				Execute: func(ctx context.Context, _ *surface.Call, _ surface.None) (surface.None, error) {
					kept = ctx
					dl, ok := ctx.Deadline()
					report = append(report, fmt.Sprint(ok, time.Until(dl), ctx.Err()))
					child, cancel := context.WithTimeout(ctx, time.Hour)
					defer cancel()
					time.Sleep(time.Second + time.Millisecond)
					report = append(report, fmt.Sprint(ctx.Err(), context.Cause(ctx) != nil))
					<-child.Done() // woken by the parent's deadline, not its own hour
					report = append(report, fmt.Sprint(child.Err()))
					return surface.None{}, nil
				}}),
		}})
		surfacetest.RequireCode(t, reg.Invoke(bg, inv("", "view:ctx.probe", ""), as("x")), surface.CodeTimeout)
		want := []string{"true 1s <nil>", "context deadline exceeded true", "context deadline exceeded"}
		if fmt.Sprint(report) != fmt.Sprint(want) {
			t.Fatalf("handler saw %q, want %q", report, want)
		}
		if kept.Err() == nil {
			t.Fatal("a context kept past the call must be done")
		}
		select {
		case <-kept.Done():
		default:
			t.Fatal("Done of a kept context must be closed")
		}
	})
}

// What a handler keeps past its invocation (its Call, its context, a
// context derived from it) stays that invocation's, however many
// invocations follow on the same registry, concurrently or not: the
// runtime reuses its own per-invocation state, never what it handed out.
func TestKeptHandlerStateStaysOwn(t *testing.T) {
	reg := surface.New(nil)
	defer reg.Close()
	type kept struct {
		ctx, child context.Context
		stop       context.CancelFunc
		call       *surface.Call
		id         string // the invocation id the handler saw
	}
	var mu sync.Mutex
	var all []kept
	act := surface.Action(surface.ActionDef[surface.None, surface.None]{
		Description: "Keeps", Effect: surface.EffectLocalState,
		Execute: func(ctx context.Context, call *surface.Call, _ surface.None) (surface.None, error) {
			k := kept{ctx: ctx, call: call, id: call.InvocationID}
			if len(call.InvocationID)%2 == 0 { // half arm the context
				k.child, k.stop = context.WithCancel(ctx)
			}
			mu.Lock()
			all = append(all, k)
			mu.Unlock()
			return surface.None{}, nil
		}})
	obs := surface.Observation(surface.ObservationDef[string]{
		Description: "Keeps", Read: func(ctx context.Context, call *surface.Call) (string, error) {
			mu.Lock()
			all = append(all, kept{ctx: ctx, call: call, id: call.InvocationID})
			mu.Unlock()
			return call.InvocationID, nil
		}})
	for i := range 4 {
		surfacetest.MustRegister(t, reg, surface.Component{Type: "keep", InstanceID: "k" + strconv.Itoa(i), Description: "Keeps",
			Actions: map[string]surface.Capability{"act": act}, Observations: map[string]surface.Capability{"read": obs}})
	}
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Go(func() {
			for i := range 200 {
				id := fmt.Sprintf("g%d-%d", g, i)
				capID := "view:keep.act"
				if i%3 == 0 {
					capID = "view:keep.read"
				}
				res := reg.Invoke(bg, surface.Invocation{InvocationID: id, CapabilityID: capID, InstanceID: "k" + strconv.Itoa(g)}, as("x"))
				if res.Error != nil || res.InvocationID != id {
					t.Errorf("%s: %+v", id, res)
				}
			}
		})
	}
	wg.Wait()
	mu.Lock()
	defer mu.Unlock()
	if len(all) != 800 {
		t.Fatalf("%d handler runs, want 800", len(all))
	}
	seen := map[string]bool{}
	for _, k := range all {
		if k.call.InvocationID != k.id || seen[k.id] || k.call.CapabilityID == "" {
			t.Fatalf("a kept Call changed: saw %q, now %+v", k.id, *k.call)
		}
		seen[k.id] = true
		if k.ctx.Err() == nil || context.Cause(k.ctx) == nil {
			t.Fatalf("%s: a kept context must be done, with a cause", k.id)
		}
		if k.child != nil && k.child.Err() == nil {
			t.Fatalf("%s: a context derived from a kept one must be done", k.id)
		}
		if k.stop != nil {
			k.stop()
		}
	}
}

// AS-CONC-012: cancelled before or while queued → CANCELLED, never run.
func TestCancelBeforeAndWhileQueued_AS_CONC_012(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		reg := surface.New(nil)
		defer reg.Close()
		g := &gated{release: make(chan struct{})}
		surfacetest.MustRegister(t, reg, gatedComponent("one", g))
		done, cancelled := context.WithCancel(bg)
		cancelled()
		e := surfacetest.RequireCode(t, reg.Invoke(done, actInput("never"), as("x")), surface.CodeCancelled)
		if e.Retry != surface.RetryYes {
			t.Fatalf("%+v", e)
		}
		go reg.Invoke(bg, actInput("a"), as("x"))
		synctest.Wait()
		ctx, cancel := context.WithCancel(bg)
		queued := make(chan surface.Result)
		go func() { queued <- reg.Invoke(ctx, actInput("b"), as("x")) }()
		synctest.Wait()
		cancel()
		surfacetest.RequireCode(t, <-queued, surface.CodeCancelled)
		// The slot is not leaked: a later call runs after a.
		after := make(chan surface.Result)
		go func() { after <- reg.Invoke(bg, actInput("c"), as("x")) }()
		synctest.Wait()
		close(g.release)
		surfacetest.RequireOK(t, <-after)
		if got := strings.Join(g.started(), ","); got != "a,c" {
			t.Fatalf("ran %s", got)
		}
		// Cancelling a running call settles CANCELLED (retry yes).
		g2 := &gated{release: make(chan struct{})}
		surfacetest.MustRegister(t, reg, gatedComponent("two", g2))
		ctx2, cancel2 := context.WithCancel(bg)
		running := make(chan surface.Result)
		i2 := actInput("r")
		i2.InstanceID = "two"
		go func() { running <- reg.Invoke(ctx2, i2, as("x")) }()
		synctest.Wait()
		cancel2()
		if e := surfacetest.RequireCode(t, <-running, surface.CodeCancelled); e.Retry != surface.RetryYes {
			t.Fatalf("%+v", e)
		}
	})
}

// AS-NAV-001: a navigation that commits and unmounts its owner is ok.
func TestNavigationCommitThenUnmount_AS_NAV_001(t *testing.T) {
	reg := surfacetest.NewRegistry(t, nil)
	var self *surface.Handle
	g := &gated{effect: surface.EffectNavigation, commit: func() { self.Unregister() }}
	self = surfacetest.MustRegister(t, reg, gatedComponent("page", g))
	res := reg.Invoke(bg, actInput("go"), as("x"))
	surfacetest.RequireOK(t, res)
	if !res.SurfaceChanged || res.SurfaceVersion != "2" {
		t.Fatalf("%+v", res)
	}
}

// AS-NAV-002: refusal before commit: cancelled if aborted, else failed.
func TestNavigationRefusal_AS_NAV_002(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		reg := surface.New(nil)
		defer reg.Close()
		refused := errors.New("router refused the transition")
		// Aborted by an unmount, then the handler rejects: CANCELLED.
		g := &gated{effect: surface.EffectNavigation, release: make(chan struct{}), result: func(ctx context.Context) error {
			return fmt.Errorf("%w: %w", refused, ctx.Err())
		}}
		h := surfacetest.MustRegister(t, reg, gatedComponent("page", g))
		done := make(chan surface.Result)
		go func() { done <- reg.Invoke(bg, actInput("go"), as("x")) }()
		synctest.Wait()
		h.Unregister() // does not settle a navigation
		select {
		case r := <-done:
			surfacetest.RequireCode(t, r, surface.CodeCancelled)
		case <-time.After(time.Second):
			t.Fatal("an aborted navigation that rejects must settle")
		}
		// Not aborted: the rejection is a failure.
		g2 := &gated{effect: surface.EffectNavigation, result: func(context.Context) error { return refused }}
		surfacetest.MustRegister(t, reg, gatedComponent("other", g2))
		e := surfacetest.RequireCode(t, reg.Invoke(bg, actInput("go"), as("x")), surface.CodeExecutionFailed)
		if e.Details["reason"] != "handler-error" {
			t.Fatalf("%+v", e)
		}
	})
}

// AS-NAV-003: the owner gone before dispatch → COMPONENT_UNMOUNTED.
func TestNavigationOwnerGone_AS_NAV_003(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		reg := surface.New(nil)
		defer reg.Close()
		g := &gated{effect: surface.EffectNavigation, release: make(chan struct{})}
		h := surfacetest.MustRegister(t, reg, gatedComponent("page", g))
		go reg.Invoke(bg, actInput("first"), as("x"))
		synctest.Wait()
		queued := make(chan surface.Result)
		go func() { queued <- reg.Invoke(bg, actInput("second"), as("x")) }()
		synctest.Wait()
		h.Unregister()
		close(g.release) // the first navigation completes; the second reaches dispatch with no owner
		e := surfacetest.RequireCode(t, <-queued, surface.CodeComponentUnmounted)
		if e.Details["phase"] != "mid-flight" || len(g.started()) != 1 {
			t.Fatalf("%+v %v", e, g.started())
		}
		surfacetest.RequireCode(t, reg.Invoke(bg, actInput("third"), as("x")), surface.CodeComponentUnmounted)
	})
}

// AS-NAV-004: a hung navigation times out, and a timeout never replaces a
// settled navigation.
func TestNavigationTimeout_AS_NAV_004(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		reg := surface.New(nil)
		defer reg.Close()
		surfacetest.MustRegister(t, reg, surface.Component{Type: "page", Description: "Page", Actions: map[string]surface.Capability{
			"hang": surface.Action(surface.ActionDef[surface.None, surface.None]{Description: "Hangs", Effect: surface.EffectNavigation, Timeout: time.Second,
				Execute: func(ctx context.Context, _ *surface.Call, _ surface.None) (surface.None, error) {
					<-ctx.Done() // the router never answers; the deadline ends the wait
					return surface.None{}, nil
				}}),
			"quick": surface.Action(surface.ActionDef[surface.None, surface.None]{Description: "Commits", Effect: surface.EffectNavigation, Timeout: time.Second,
				Execute: func(context.Context, *surface.Call, surface.None) (surface.None, error) {
					time.Sleep(time.Second - time.Millisecond)
					return surface.None{}, nil
				}}),
		}})
		surfacetest.RequireCode(t, reg.Invoke(bg, inv("", "view:page.hang", ""), as("x")), surface.CodeTimeout)
		res := reg.Invoke(bg, inv("", "view:page.quick", ""), as("x"))
		surfacetest.RequireOK(t, res)
		time.Sleep(time.Second) // past the deadline: nothing changes
		if again := reg.Invoke(bg, inv(res.InvocationID, "view:page.quick", ""), as("x")); again != res {
			t.Fatalf("settled navigation changed: %+v", again)
		}
	})
}

// observer is a component with one observation that blocks until released.
func observer(release chan struct{}, started *atomic.Int64) surface.Component {
	return surface.Component{Type: "feed", Description: "Feed", Observations: map[string]surface.Capability{
		"read": surface.Observation(surface.ObservationDef[int]{Description: "Reads",
			Read: func(ctx context.Context, _ *surface.Call) (int, error) {
				started.Add(1)
				select {
				case <-release:
				case <-ctx.Done():
				}
				return 1, nil
			}}),
	}}
}

// AS-OBS-001: per-consumer and global caps, bounded FIFO queue.
func TestObservationAdmission_AS_OBS_001(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		reg := surface.New(&surface.Options{Limits: surface.Limits{
			MaxConcurrentObservationsPerConsumer: 2, MaxConcurrentObservationsTotal: 3, MaxQueuedObservationsPerConsumer: 1,
		}})
		defer reg.Close()
		release := make(chan struct{})
		var started atomic.Int64
		surfacetest.MustRegister(t, reg, observer(release, &started))
		read := inv("", "view:feed.read", "")
		results := make(chan surface.Result, 16)
		for range 3 { // a: 2 running + 1 queued
			go func() { results <- reg.Invoke(bg, read, as("a")) }()
			synctest.Wait()
		}
		if started.Load() != 2 {
			t.Fatalf("consumer cap: %d running", started.Load())
		}
		e := surfacetest.RequireCode(t, reg.Invoke(bg, read, as("a")), surface.CodeRateLimited)
		if e.Details["reason"] != "queue-full" || e.Details["retryAfterMs"] != 250 {
			t.Fatalf("%+v", e)
		}
		go func() { results <- reg.Invoke(bg, read, as("b")) }() // total cap 3
		synctest.Wait()
		go func() { results <- reg.Invoke(bg, read, as("c")) }() // queued: total full
		synctest.Wait()
		if started.Load() != 3 {
			t.Fatalf("global cap: %d running", started.Load())
		}
		// Actions do not use the observation pool.
		g := &gated{}
		surfacetest.MustRegister(t, reg, gatedComponent("one", g))
		surfacetest.RequireOK(t, reg.Invoke(bg, actInput("x"), as("a")))
		close(release)
		for range 5 {
			surfacetest.RequireOK(t, <-results)
		}
	})
}

// AS-OBS-002: no cross-consumer starvation; AS-OBS-003: slots are freed
// on every settlement, waiters are admitted in arrival order, and Close
// cancels waiters.
func TestObservationFairness_AS_OBS_002_003(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		reg := surface.New(&surface.Options{Limits: surface.Limits{
			MaxConcurrentObservationsPerConsumer: 2, MaxConcurrentObservationsTotal: 2, MaxQueuedObservationsPerConsumer: 4,
		}})
		release := make(chan struct{})
		var started atomic.Int64
		surfacetest.MustRegister(t, reg, observer(release, &started))
		read := inv("", "view:feed.read", "")
		var mu sync.Mutex
		var order []string
		results := make(chan surface.Result, 16)
		call := func(who string) {
			res := reg.Invoke(bg, read, as(who))
			mu.Lock()
			order = append(order, who)
			mu.Unlock()
			results <- res
		}
		go call("hog")
		go call("hog")
		synctest.Wait()
		for _, who := range []string{"hog", "hog", "small", "hog"} {
			go call(who)
			synctest.Wait()
		}
		release <- struct{}{} // one settles: the first waiter (hog) gets the slot
		synctest.Wait()
		release <- struct{}{} // the next in arrival order is hog, then small
		synctest.Wait()
		release <- struct{}{}
		synctest.Wait()
		mu.Lock()
		if strings.Join(order, ",") != "hog,hog,hog" {
			t.Fatalf("settled %v", order)
		}
		mu.Unlock()
		if started.Load() != 5 {
			t.Fatalf("small starved: %d started", started.Load())
		}
		close(release)
		for range 6 { // 2 + 4 calls
			surfacetest.RequireOK(t, <-results)
		}
		_ = reg.Close()

		// Every settlement frees its slot: timeouts, cancellations, errors.
		one := surface.New(&surface.Options{Limits: surface.Limits{
			MaxConcurrentObservationsPerConsumer: 1, MaxConcurrentObservationsTotal: 1, MaxQueuedObservationsPerConsumer: 1,
		}})
		defer one.Close()
		failing := atomic.Bool{}
		surfacetest.MustRegister(t, one, surface.Component{Type: "feed", Description: "Feed", Observations: map[string]surface.Capability{
			"read": surface.Observation(surface.ObservationDef[int]{Description: "Reads",
				Read: func(ctx context.Context, _ *surface.Call) (int, error) {
					if failing.Load() {
						return 0, errors.New("broken")
					}
					<-ctx.Done()
					return 0, ctx.Err()
				}}),
		}})
		quick := surface.InvokeOptions{Timeout: time.Second}
		surfacetest.RequireCode(t, one.Invoke(bg, read, quick), surface.CodeTimeout)
		surfacetest.RequireCode(t, one.Invoke(bg, read, quick), surface.CodeTimeout) // admitted, not queued forever
		ctx, cancel := context.WithCancel(bg)
		go func() { time.Sleep(time.Second); cancel() }()
		surfacetest.RequireCode(t, one.Invoke(ctx, read, surface.InvokeOptions{Timeout: 2 * time.Second}), surface.CodeCancelled)
		failing.Store(true)
		surfacetest.RequireCode(t, one.Invoke(bg, read, quick), surface.CodeExecutionFailed)
		surfacetest.RequireCode(t, one.Invoke(bg, read, quick), surface.CodeExecutionFailed)

		// Close cancels the running read and the waiter (retry no).
		failing.Store(false)
		for range 2 {
			go func() { results <- one.Invoke(bg, read, as("c")) }()
			synctest.Wait()
		}
		_ = one.Close()
		for range 2 {
			if e := surfacetest.RequireCode(t, <-results, surface.CodeCancelled); e.Retry != surface.RetryNo {
				t.Fatalf("%+v", e)
			}
		}
	})
}

// AS-SER-001: output that is not JSON or not of the declared shape fails
// loudly; oversized output is never truncated silently.
func TestOutputSettlement_AS_SER_001(t *testing.T) {
	for _, env := range []surface.Environment{surface.EnvProduction, surface.EnvDevelopment} {
		reg := surfacetest.NewRegistry(t, &surface.Options{Environment: env, Limits: surface.Limits{MaxOutputBytes: 64}})
		calls := 0
		surfacetest.MustRegister(t, reg, surface.Component{Type: "out", Description: "Outputs", Observations: map[string]surface.Capability{
			"nan": surface.Observation(surface.ObservationDef[float64]{Description: "NaN",
				Read: func(context.Context, *surface.Call) (float64, error) { calls++; return nanValue(), nil }}),
			"big": surface.Observation(surface.ObservationDef[string]{Description: "Big",
				Read: func(context.Context, *surface.Call) (string, error) { return strings.Repeat("x", 100), nil }}),
			"shape": surface.Observation(surface.ObservationDef[any]{Description: "Any", OutputSchema: json.RawMessage(`{"type":"object","required":["n"]}`),
				Read: func(context.Context, *surface.Call) (any, error) { return map[string]any{"m": 1}, nil }}),
			"fits": surface.Observation(surface.ObservationDef[string]{Description: "Fits",
				Read: func(context.Context, *surface.Call) (string, error) { return strings.Repeat("x", 62), nil }}),
		}})
		for name, reason := range map[string]string{"nan": "output-invalid", "big": "output-too-large", "shape": "output-invalid"} {
			e := surfacetest.RequireCode(t, reg.Invoke(bg, inv("id-"+name, "view:out."+name, ""), as("a")), surface.CodeExecutionFailed)
			if e.Details["reason"] != reason {
				t.Errorf("%s %s: %+v", env, name, e)
			}
		}
		surfacetest.RequireOK(t, reg.Invoke(bg, inv("", "view:out.fits", ""), as("a")))
		// In development a defective output is not cached: retrying the same
		// id runs the handler again; in production it is a cached failure.
		reg.Invoke(bg, inv("id-nan", "view:out.nan", ""), as("a"))
		want := 1
		if env == surface.EnvDevelopment {
			want = 2
		}
		if calls != want {
			t.Errorf("%s: nan read %d times, want %d", env, calls, want)
		}
	}
}

// AS-OBSV-001: audit separates queue wait from execution time.
func TestAuditTimings_AS_OBSV_001(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		sink := surface.NewMemorySink(0)
		reg := surface.New(&surface.Options{Audit: sink})
		defer reg.Close()
		work := surface.Action(surface.ActionDef[echo, surface.None]{Description: "Works", Effect: surface.EffectLocalState,
			Execute: func(context.Context, *surface.Call, echo) (surface.None, error) {
				time.Sleep(3 * time.Second)
				return surface.None{}, nil
			}})
		surfacetest.MustRegister(t, reg, surface.Component{Type: "list", Description: "List", Actions: map[string]surface.Capability{"act": work}})
		go reg.Invoke(bg, surface.Invocation{InvocationID: "first", CapabilityID: "view:list.act", Input: json.RawMessage(`{"ids":[]}`)}, as("a"))
		synctest.Wait()
		time.Sleep(time.Second)
		surfacetest.RequireOK(t, reg.Invoke(bg, surface.Invocation{InvocationID: "second", CapabilityID: "view:list.act", Input: json.RawMessage(`{"ids":[]}`)}, as("a")))
		var settled *surface.AuditEvent
		for _, e := range sink.Events() {
			if e.Type == surface.AuditInvocationSettled && e.InvocationID == "second" {
				settled = &e
			}
		}
		if settled == nil || settled.QueueWaitMs == nil || settled.ExecutionMs == nil || settled.DurationMs == nil {
			t.Fatalf("settled record %+v", settled)
		}
		if *settled.QueueWaitMs != 2000 || *settled.ExecutionMs != 3000 || *settled.DurationMs != 5000 || settled.ConsumerID != "mcp-bridge:a" {
			t.Fatalf("timings queue %d exec %d total %d", *settled.QueueWaitMs, *settled.ExecutionMs, *settled.DurationMs)
		}
		b, _ := json.Marshal(settled)
		if !strings.Contains(string(b), `"queueWaitMs":2000,"executionMs":3000`) {
			t.Fatalf("JSON %s", b)
		}
	})
}

func TestCloseCancelsInFlight(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		reg := surface.New(nil)
		g := &gated{release: make(chan struct{})}
		surfacetest.MustRegister(t, reg, gatedComponent("one", g))
		results := make(chan surface.Result, 3)
		for _, tag := range []string{"a", "b"} {
			go func() { results <- reg.Invoke(bg, actInput(tag), as("x")) }()
			synctest.Wait()
		}
		_ = reg.Close()
		for range 2 {
			e := surfacetest.RequireCode(t, <-results, surface.CodeCancelled)
			if e.Retry != surface.RetryNo {
				t.Fatalf("%+v", e)
			}
		}
		if got := g.started(); len(got) != 1 {
			t.Fatalf("queued call ran: %v", got)
		}
		e := surfacetest.RequireCode(t, reg.Invoke(bg, actInput("late"), as("x")), surface.CodeCancelled)
		if e.Retry != surface.RetryNo {
			t.Fatalf("%+v", e)
		}
	})
}

// AS-LIFE-001 (in-flight half): Close waits for running inline handlers to
// return — on live registrations and on ones already unregistered while
// their handler ran — though it settles their invocations at once.
func TestCloseWaitsForInlineHandlers_AS_LIFE_001(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		reg := surface.New(nil)
		var returned atomic.Int32
		release := map[string]chan struct{}{"live": make(chan struct{}), "gone": make(chan struct{})}
		comp := func(inst string) surface.Component {
			stubborn := surface.Action(surface.ActionDef[surface.None, surface.None]{
				Description: "Ignores its context", Effect: surface.EffectLocalState,
				Execute: func(context.Context, *surface.Call, surface.None) (surface.None, error) {
					<-release[inst]
					returned.Add(1)
					return surface.None{}, nil
				}})
			return surface.Component{Type: "slow", InstanceID: inst, Description: "Slow", Actions: map[string]surface.Capability{"act": stubborn}}
		}
		surfacetest.MustRegister(t, reg, comp("live"))
		gone := surfacetest.MustRegister(t, reg, comp("gone"))
		codes := map[string]surface.Code{}
		var mu sync.Mutex
		for inst := range release {
			go func() {
				res := reg.Invoke(bg, surface.Invocation{CapabilityID: "view:slow.act", InstanceID: inst}, as("x"))
				mu.Lock()
				codes[inst] = codeOf(res)
				mu.Unlock()
			}()
		}
		synctest.Wait()
		gone.Unregister()
		var closed atomic.Bool
		go func() {
			_ = reg.Close()
			closed.Store(true)
		}()
		// Each handler in turn: Close waits for the last.
		for _, inst := range []string{"live", "gone"} {
			synctest.Wait()
			if closed.Load() {
				t.Fatalf("Close returned while the handler on %q was still running", inst)
			}
			close(release[inst])
		}
		synctest.Wait()
		if !closed.Load() || returned.Load() != 2 {
			t.Fatalf("after the handlers returned: closed %v, %d returned", closed.Load(), returned.Load())
		}
		// Inline: each Invoke returned once its handler did, with the
		// outcome settled when the component went away.
		if codes["gone"] != surface.CodeComponentUnmounted || codes["live"] != surface.CodeCancelled {
			t.Fatalf("outcomes %v", codes)
		}
	})
}

func codeOf(res surface.Result) surface.Code {
	if res.Error == nil {
		return ""
	}
	return res.Error.Code
}

// Inputs a handler keeps (decoded values, raw JSON) stay what that
// invocation was given, though the runtime reuses its input buffers.
func TestKeptInputsStayOwn(t *testing.T) {
	reg := surfacetest.NewRegistry(t, nil)
	type in struct {
		Name string          `json:"name"`
		Raw  json.RawMessage `json:"raw"`
	}
	var mu sync.Mutex
	var kept []in
	surfacetest.MustRegister(t, reg, surface.Component{Type: "keep", Description: "Keeps", Actions: map[string]surface.Capability{
		"act": surface.Action(surface.ActionDef[in, surface.None]{
			Description: "Keeps its input", Effect: surface.EffectLocalState,
			InputSchema: json.RawMessage(`{"type":"object","properties":{"name":{"type":"string"},"raw":{}},"required":["name","raw"],"additionalProperties":false}`),
			Execute: func(_ context.Context, _ *surface.Call, v in) (surface.None, error) {
				mu.Lock()
				kept = append(kept, v)
				mu.Unlock()
				return surface.None{}, nil
			}}),
	}})
	for i := range 300 {
		input := fmt.Sprintf(`{"raw":{"n":%d,"s":"v%d"},"name":"name-%d"}`, i, i, i)
		surfacetest.RequireOK(t, reg.Invoke(bg, surface.Invocation{CapabilityID: "view:keep.act", Input: json.RawMessage(input)}, as("x")))
	}
	for i, v := range kept {
		if want := fmt.Sprintf(`{"n":%d,"s":"v%d"}`, i, i); v.Name != fmt.Sprintf("name-%d", i) || string(v.Raw) != want {
			t.Fatalf("kept input %d changed: %q %s", i, v.Name, v.Raw)
		}
	}
}

// AS-NAV-004, AS-CONC-011: a navigation that unmounts its own owner and
// then overruns its deadline settles TIMEOUT, inline as isolated
// (semantics §7.3: hung navigation still times out). The unmount cancels
// the handler's context, which must not hide that the deadline passed;
// the late return is audited.
func TestNavigationUnmountThenTimeout_AS_NAV_004(t *testing.T) {
	for _, c := range []struct {
		isolate, fails bool
	}{{false, false}, {false, true}, {true, false}, {true, true}} {
		isolate := c.isolate
		t.Run(fmt.Sprintf("isolate=%v,returnsCtxErr=%v", c.isolate, c.fails), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				sink := surface.NewMemorySink(0)
				reg := surface.New(&surface.Options{IsolateHandlers: isolate, Audit: sink})
				defer reg.Close()
				var self *surface.Handle
				returned := make(chan struct{})
				self = surfacetest.MustRegister(t, reg, surface.Component{Type: "page", Description: "Page", Actions: map[string]surface.Capability{
					"leave": surface.Action(surface.ActionDef[surface.None, surface.None]{Description: "Leaves", Effect: surface.EffectNavigation, Timeout: time.Second,
						Execute: func(ctx context.Context, _ *surface.Call, _ surface.None) (surface.None, error) {
							defer close(returned)
							self.Unregister()                // the transition unmounts the page…
							time.Sleep(2 * time.Second)      // …and the router never answers in time
							return surface.None{}, ctx.Err() // the unmount cancelled ctx: the handler sees it
						}}),
				}})
				res := reg.Invoke(bg, inv("nav", "view:page.leave", ""), as("x"))
				e := surfacetest.RequireCode(t, res, surface.CodeTimeout)
				if e.Details["timeoutMs"] != int64(1000) {
					t.Fatalf("%+v", e)
				}
				<-returned
				synctest.Wait()
				late := 0
				for _, ev := range sink.Events() {
					if ev.Type == surface.AuditLateSettlement && ev.InvocationID == "nav" {
						late++
					}
				}
				if late != 1 {
					t.Fatalf("%d late-settlement records, want 1", late)
				}
			})
		})
	}
}
