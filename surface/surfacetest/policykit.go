package surfacetest

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/agentsurface/agentsurface/surface"
)

// PolicyScenario is a consumer, a host context and an environment under
// which [TestPolicy] runs a policy.
type PolicyScenario struct {
	// Name names the scenario's subtest.
	Name string
	// Consumer calls and discovers. The zero value means Consumer().
	Consumer surface.Consumer
	// Host is the host context policies see. Nil means empty.
	Host map[string]any
	// Environment is the registry's. Empty means surface.EnvTest.
	Environment surface.Environment
}

// PolicyKitOptions configure [TestPolicy]. A nil *PolicyKitOptions means
// the zero value.
type PolicyKitOptions struct {
	// Scenarios are run in turn. Nil means DefaultPolicyScenarios().
	// Between them, every hook the policy has must run at least once:
	// give a scenario in which Discover exposes the capability, so that
	// Authorize and Invoke are reached.
	Scenarios []PolicyScenario
	// Internal is the internal metadata of the component the policy
	// governs (what TenantBoundary's expected tenant reads, for example).
	Internal map[string]any
}

// DefaultPolicyScenarios are an anonymous embedded consumer with an empty
// host context, and the test consumer with the host context
// {"user": "kit-user", "tenant": "kit-tenant"}.
func DefaultPolicyScenarios() []PolicyScenario {
	return []PolicyScenario{
		{Name: "anonymous", Consumer: surface.Consumer{ID: "anonymous", Kind: surface.ConsumerEmbedded}},
		{Name: "signed-in", Host: map[string]any{"user": "kit-user", "tenant": "kit-tenant"}},
	}
}

// policyKitFast is how long at least one of a Discover's repeated calls
// on a context may take: a pure function of what it is given returns in
// microseconds, so the fastest of many calls stays far below this however
// busy the machine, while one that does I/O never gets under it.
const policyKitFast = 10 * time.Millisecond

// TestPolicy checks a custom [surface.Policy] against the rules of the
// spec (semantics §12; spec 06, Policies): newPolicy returns a fresh
// policy, as the application would attach it. For each scenario the kit
// registers a component — an action with the input {"n": integer, "note":
// string} and an observation — governed by the policy, and checks:
//
//   - Discover: pure and fast. Called again and again on equal contexts
//     (snapshots, concurrent ones, and invocations with different inputs,
//     which Discover cannot see), it gives the same decision; the fastest
//     call on each context takes under 10 ms; it leaves the context's
//     maps (host, meta, internal) as they were.
//   - Authorize: sees no input. Run with a fresh policy for each of
//     several inputs (valid, invalid, not JSON), it decides the same way
//     for all, and its denial is the call's answer whatever the input; it
//     calls next at most once and, when it does not, fails the call
//     rather than return a success of its own.
//   - Invoke: sees only the validated effective input. It never runs for
//     an input the schema refuses; what it sees is the effective input
//     (and {} for the observation); two requests whose raw input differs
//     but whose effective input is the same get the same decision and the
//     same answer (which holds a RequireConfirmation condition to it too);
//     it does not change the input, and the handler gets the same; next
//     at most once, and a failure when not called.
//
// Each scenario is a subtest when t is a *testing.T. Every registry call
// is bounded (30 s) as a failure limit only, so a hook that blocks fails
// the kit instead of hanging it. Run the kit with -race: hooks run
// concurrently.
func TestPolicy(t testing.TB, newPolicy func() surface.Policy, opts *PolicyKitOptions) {
	t.Helper()
	var o PolicyKitOptions
	if opts != nil {
		o = *opts
	}
	scenarios := o.Scenarios
	if scenarios == nil {
		scenarios = DefaultPolicyScenarios()
	}
	ran := map[string]bool{}
	for _, sc := range scenarios {
		if tt, ok := t.(*testing.T); ok {
			tt.Run(sc.Name, func(t *testing.T) { maps.Copy(ran, runPolicyScenario(t, newPolicy, sc, o.Internal, auditKitBound)) })
		} else {
			maps.Copy(ran, runPolicyScenario(t, newPolicy, sc, o.Internal, auditKitBound))
		}
	}
	requireHooksRan(t, newPolicy(), ran)
}

// requireHooksRan fails the test if a hook p has is not in ran.
func requireHooksRan(tb testing.TB, p surface.Policy, ran map[string]bool) {
	tb.Helper()
	for _, h := range []struct {
		hook string
		set  bool
	}{{"Discover", p.Discover != nil}, {"Authorize", p.Authorize != nil}, {"Invoke", p.Invoke != nil}} {
		if hook := h.hook; h.set && !ran[hook] {
			tb.Errorf("policy %q: its %s hook never ran in any scenario; add a scenario in which it is reached", p.Name, hook)
		}
	}
}

// kitInputs are the raw inputs the kit sends the action: valid ones, two
// with the same effective input, and refused ones.
var kitInputs = []struct {
	name      string
	raw       string
	effective string // canonical JSON of the effective input; "" when refused
}{
	{"valid", `{"n":1,"note":"a"}`, `{"n":1,"note":"a"}`},
	{"valid, reordered", ` { "note" : "a", "n" : 1 } `, `{"n":1,"note":"a"}`},
	{"valid, other", `{"n":2}`, `{"n":2}`},
	{"wrong type", `{"n":"one"}`, ""},
	{"unknown field", `{"n":1,"extra":true}`, ""},
	{"not JSON", `{"n":`, ""},
}

type kitInput struct {
	N    int    `json:"n"`
	Note string `json:"note,omitempty"`
}

// hookCall is what the kit saw of one call of a hook.
type hookCall struct {
	key         string // the policy context, printed
	decision    surface.Decision
	took        time.Duration
	nextCalls   int
	result      surface.Result
	input       string // Invoke: the input it saw, as JSON
	inputAfter  string // Invoke: the input once it returned
	ctxModified bool   // the hook changed the maps of its context
}

// policyProbe wraps a policy's hooks and records their calls, and the
// inputs the kit's handlers got.
type policyProbe struct {
	mu        sync.Mutex
	discover  []hookCall
	authorize []hookCall
	invoke    []hookCall
	handled   []string // the action handler's inputs, as JSON
}

// wrap returns p with each hook recording into the probe. The copy keeps
// what p holds beside its hooks (a confirmation escalation).
func (pr *policyProbe) wrap(p surface.Policy) surface.Policy {
	w := p
	if d := p.Discover; d != nil {
		w.Discover = func(pc *surface.PolicyContext) surface.Decision {
			key := contextKey(pc)
			start := time.Now()
			dec := d(pc)
			c := hookCall{key: key, decision: dec, took: time.Since(start), ctxModified: contextKey(pc) != key}
			pr.mu.Lock()
			pr.discover = append(pr.discover, c)
			pr.mu.Unlock()
			return dec
		}
	}
	if a := p.Authorize; a != nil {
		w.Authorize = func(ctx context.Context, pc *surface.PolicyContext, next surface.Next) surface.Result {
			key := contextKey(pc)
			var mu sync.Mutex
			calls := 0
			res := a(ctx, pc, func(ctx context.Context) surface.Result {
				mu.Lock()
				calls++
				mu.Unlock()
				return next(ctx)
			})
			mu.Lock()
			c := hookCall{key: key, nextCalls: calls, result: res, ctxModified: contextKey(pc) != key}
			mu.Unlock()
			pr.mu.Lock()
			pr.authorize = append(pr.authorize, c)
			pr.mu.Unlock()
			return res
		}
	}
	if i := p.Invoke; i != nil {
		w.Invoke = func(ctx context.Context, ic *surface.InvokeContext, next surface.Next) surface.Result {
			key, input := contextKey(&ic.PolicyContext), jsonText(ic.Input)
			var mu sync.Mutex
			calls := 0
			res := i(ctx, ic, func(ctx context.Context) surface.Result {
				mu.Lock()
				calls++
				mu.Unlock()
				return next(ctx)
			})
			mu.Lock()
			c := hookCall{key: key, nextCalls: calls, result: res, input: input, inputAfter: jsonText(ic.Input),
				ctxModified: contextKey(&ic.PolicyContext) != key}
			mu.Unlock()
			pr.mu.Lock()
			pr.invoke = append(pr.invoke, c)
			pr.mu.Unlock()
			return res
		}
	}
	return w
}

// contextKey prints what a policy context holds (map keys sorted), to
// tell equal contexts and to see a hook change one.
func contextKey(pc *surface.PolicyContext) string {
	return fmt.Sprintf("%s %s %s %s %s %v %s host=%v meta=%v/%v internal=%v", pc.CapabilityID, pc.Plane, pc.Kind, pc.Effect,
		pc.RegistrationID, pc.Consumer, pc.Environment, pc.Host, pc.ComponentMeta, pc.CapabilityMeta, pc.Internal)
}

// jsonText returns v's JSON (object keys sorted), or its printed form.
func jsonText(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprintf("%#v", v)
	}
	return string(b)
}

// kitRegistry registers the kit's component, governed by p, in a
// registry for the scenario.
func kitRegistry(tb testing.TB, p surface.Policy, sc PolicyScenario, internal map[string]any, pr *policyProbe) *surface.Registry {
	tb.Helper()
	host := sc.Host
	reg := NewRegistry(tb, &surface.Options{
		Environment: cmp.Or(sc.Environment, surface.EnvTest),
		Context:     func() map[string]any { return maps.Clone(host) },
		Logger:      slog.New(slog.DiscardHandler),
	})
	h, err := reg.Register(surface.Component{Type: "kit.policy", Description: "The policy kit's component",
		Internal: maps.Clone(internal), Policies: []surface.Policy{pr.wrap(p)},
		Observations: map[string]surface.Capability{
			"read": surface.Observation(surface.ObservationDef[int]{Description: "Reads a number",
				Read: func(context.Context, *surface.Call) (int, error) { return 1, nil }}),
		},
		Actions: map[string]surface.Capability{
			"act": surface.Action(surface.ActionDef[kitInput, surface.None]{Description: "Acts on a number",
				Effect: surface.EffectLocalState,
				Execute: func(_ context.Context, _ *surface.Call, in kitInput) (surface.None, error) {
					pr.mu.Lock()
					pr.handled = append(pr.handled, jsonText(in))
					pr.mu.Unlock()
					return surface.None{}, nil
				}}),
		}})
	if err != nil || h.Status() != surface.HandleActive {
		tb.Fatalf("registering the kit's component with policy %q: %v", p.Name, err)
	}
	return reg
}

// within runs fn and fails the test if it does not return within bound,
// the failure limit of a call that should return at once.
func within(tb testing.TB, bound time.Duration, what string, fn func()) {
	tb.Helper()
	done := make(chan struct{})
	go func() {
		defer close(done)
		fn()
	}()
	limit := time.NewTimer(bound)
	defer limit.Stop()
	select {
	case <-done:
	case <-limit.C: // the failure limit, never the expected path
		tb.Fatalf("%s did not return within %v: a hook blocks", what, bound)
	}
}

// invokeAct calls the kit's action with a raw input.
func invokeAct(reg *surface.Registry, consumer surface.Consumer, raw string) surface.Result {
	return reg.Invoke(context.Background(), surface.Invocation{CapabilityID: "view:kit.policy.act", Input: json.RawMessage(raw)},
		surface.InvokeOptions{Consumer: consumer})
}

// runPolicyScenario runs the kit's checks for one scenario and returns
// the hooks that ran.
func runPolicyScenario(tb testing.TB, newPolicy func() surface.Policy, sc PolicyScenario, internal map[string]any,
	bound time.Duration) map[string]bool {
	tb.Helper()
	consumer := sc.Consumer
	if isZeroConsumer(consumer) {
		consumer = Consumer()
	}
	ran := map[string]bool{}
	name := newPolicy().Name

	// Discover: one policy, asked many times, concurrently too.
	disc := &policyProbe{}
	reg := kitRegistry(tb, newPolicy(), sc, internal, disc)
	within(tb, bound, "discovering and invoking", func() {
		for range 3 {
			reg.Snapshot(surface.SnapshotOptions{Consumer: consumer})
		}
		var wg sync.WaitGroup
		for range 4 {
			wg.Go(func() {
				reg.Snapshot(surface.SnapshotOptions{Consumer: consumer})
				for _, in := range kitInputs {
					invokeAct(reg, consumer, in.raw)
				}
			})
		}
		wg.Wait()
		reg.Invoke(context.Background(), surface.Invocation{CapabilityID: "view:kit.policy.read"}, surface.InvokeOptions{Consumer: consumer})
	})
	decisions := map[string][]hookCall{}
	disc.mu.Lock()
	discovered := disc.discover
	disc.mu.Unlock()
	for _, c := range discovered {
		decisions[c.key] = append(decisions[c.key], c)
		if c.ctxModified {
			tb.Errorf("policy %q: Discover changed its policy context (host, meta or internal are read-only)", name)
		}
	}
	for _, key := range slices.Sorted(maps.Keys(decisions)) {
		calls := decisions[key]
		ran["Discover"] = true
		fastest := calls[0].took
		for _, c := range calls[1:] {
			fastest = min(fastest, c.took)
		}
		for _, c := range calls[1:] {
			if c.decision != calls[0].decision {
				tb.Errorf("policy %q: Discover decided %+v, then %+v, for the same context (%s): it must decide from "+
					"the consumer, the host context and the capability alone, the same way every time", name, calls[0].decision, c.decision, key)
				break
			}
		}
		if fastest > policyKitFast {
			tb.Errorf("policy %q: Discover took at least %v on each of its %d calls for %s: it must be cheap and synchronous (no I/O)",
				name, fastest, len(calls), key)
		}
	}

	// Authorize and Invoke: a fresh policy per input, so that a policy
	// keeping state (a rate limit) starts the same way for each.
	type run struct {
		in        int
		res       surface.Result
		authorize []hookCall
		invoke    []hookCall
		handled   []string
	}
	runs := make([]run, len(kitInputs))
	for i, in := range kitInputs {
		pr := &policyProbe{}
		reg := kitRegistry(tb, newPolicy(), sc, internal, pr)
		var res surface.Result
		within(tb, bound, "invoking with input "+in.name, func() { res = invokeAct(reg, consumer, in.raw) })
		pr.mu.Lock()
		runs[i] = run{in: i, res: res, authorize: pr.authorize, invoke: pr.invoke, handled: pr.handled}
		pr.mu.Unlock()
	}
	// The observation, whose effective input is {}.
	obs := &policyProbe{}
	reg = kitRegistry(tb, newPolicy(), sc, internal, obs)
	within(tb, bound, "invoking the observation", func() {
		reg.Invoke(context.Background(), surface.Invocation{CapabilityID: "view:kit.policy.read"}, surface.InvokeOptions{Consumer: consumer})
	})

	// outcome is what a hook decided: whether it ran, whether it let the
	// call through, and the failure it returned if not.
	outcome := func(calls []hookCall) string {
		if len(calls) == 0 {
			return "did not run"
		}
		c := calls[0]
		if c.nextCalls > 0 {
			return "called next"
		}
		return "failed with " + jsonText(c.result.Error)
	}
	checkHook := func(hook string, calls []hookCall) {
		for _, c := range calls {
			ran[hook] = true
			if c.nextCalls > 1 {
				tb.Errorf("policy %q: %s called next %d times; at most once", name, hook, c.nextCalls)
			}
			if c.nextCalls == 0 && (c.result.Status != surface.StatusError || c.result.Error == nil) {
				tb.Errorf("policy %q: %s returned without calling next and without failing (%s); return surface.Fail(err) to deny",
					name, hook, jsonText(c.result))
			}
			if c.ctxModified {
				tb.Errorf("policy %q: %s changed its policy context (host, meta or internal are read-only)", name, hook)
			}
		}
	}

	for _, r := range runs {
		in := kitInputs[r.in]
		checkHook("Authorize", r.authorize)
		checkHook("Invoke", r.invoke)
		if a, b := outcome(runs[0].authorize), outcome(r.authorize); a != b {
			tb.Errorf("policy %q: Authorize decided differently for input %s (%s) and for input %s (%s): it runs before the input "+
				"is read and must not depend on it", name, kitInputs[0].name, a, in.name, b)
		}
		if len(r.authorize) > 0 && r.authorize[0].nextCalls == 0 && r.authorize[0].result.Error != nil && r.res.Error != nil &&
			r.res.Error.Code != r.authorize[0].result.Error.Code {
			tb.Errorf("policy %q: Authorize denied with %s, but the call with input %s answered %s: authorization comes before the input",
				name, r.authorize[0].result.Error.Code, in.name, r.res.Error.Code)
		}
		if in.effective == "" {
			if len(r.invoke) > 0 {
				tb.Errorf("policy %q: Invoke ran for input %s, which the schema refuses: it must see only the validated input", name, in.name)
			}
			continue
		}
		for _, c := range r.invoke {
			if c.input != in.effective {
				tb.Errorf("policy %q: Invoke saw the input %s for %s; want the effective input %s", name, c.input, in.raw, in.effective)
			}
			if c.inputAfter != c.input {
				tb.Errorf("policy %q: Invoke changed the input from %s to %s: hooks must not change input", name, c.input, c.inputAfter)
			}
		}
		for _, h := range r.handled {
			if h != in.effective {
				tb.Errorf("policy %q: the handler got %s for the effective input %s: a policy must not change input", name, h, in.effective)
			}
		}
	}
	// Two raw inputs, one effective input: one decision, one result.
	code := func(r surface.Result) string {
		if r.Error != nil {
			return string(r.Error.Code)
		}
		return string(r.Status)
	}
	if a, b := code(runs[0].res), code(runs[1].res); a != b {
		tb.Errorf("policy %q: the calls with %s and %s, whose effective input is the same, answered %s and %s: policies must "+
			"see only the effective input", name, kitInputs[0].raw, kitInputs[1].raw, a, b)
	}
	if a, b := outcome(runs[0].invoke), outcome(runs[1].invoke); a != b {
		tb.Errorf("policy %q: Invoke decided differently for %s (%s) and %s (%s), whose effective input is the same: it must see "+
			"only the effective input", name, kitInputs[0].raw, a, kitInputs[1].raw, b)
	}
	authorized, invoked := 0, 0
	for _, r := range runs {
		authorized += min(len(r.authorize), 1)
		invoked += min(len(r.invoke), 1)
	}
	tb.Logf("policy %q: Discover ran %d times on %d contexts; of %d calls, Authorize ran for %d, Invoke for %d",
		name, len(discovered), len(decisions), len(runs), authorized, invoked)
	obs.mu.Lock()
	defer obs.mu.Unlock()
	checkHook("Authorize", obs.authorize)
	checkHook("Invoke", obs.invoke)
	for _, c := range obs.invoke {
		if c.input != "{}" {
			tb.Errorf("policy %q: Invoke saw the input %s for an observation; want {}", name, c.input)
		}
	}
	return ran
}
