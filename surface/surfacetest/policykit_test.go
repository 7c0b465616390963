package surfacetest_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/agentsurface/agentsurface/surface"
	"github.com/agentsurface/agentsurface/surface/surfacetest"
)

// A well-behaved custom policy: hides from anonymous consumers, denies
// calls outside office hours it reads from the host, and lets invoke
// through with the input untouched.
func goodPolicy() surface.Policy {
	return surface.Policy{
		Name: "office",
		Discover: func(pc *surface.PolicyContext) surface.Decision {
			if pc.Host["user"] == nil {
				return surface.Hide()
			}
			return surface.Expose()
		},
		Authorize: func(ctx context.Context, pc *surface.PolicyContext, next surface.Next) surface.Result {
			if pc.Host["closed"] == true {
				return surface.Fail(surface.NewError(surface.CodePreconditionFailed, "The office is closed.", nil))
			}
			return next(ctx)
		},
		Invoke: func(ctx context.Context, ic *surface.InvokeContext, next surface.Next) surface.Result {
			if in, _ := ic.Input.(map[string]any); in["n"] == 2.0 {
				return surface.Fail(surface.NewError(surface.CodeNotAuthorized, "", nil))
			}
			return next(ctx)
		},
	}
}

var officeScenarios = &surfacetest.PolicyKitOptions{Scenarios: []surfacetest.PolicyScenario{
	{Name: "anonymous"},
	{Name: "open", Host: map[string]any{"user": "ada"}},
	{Name: "closed", Host: map[string]any{"user": "ada", "closed": true}},
}}

func TestPolicyKitPassesAGoodPolicy(t *testing.T) {
	surfacetest.TestPolicy(t, goodPolicy, officeScenarios)
}

// The kit fails a policy for each rule it breaks, saying which.
func TestPolicyKitCatchesBrokenPolicies(t *testing.T) {
	const bound = 30 * time.Second
	var mu sync.Mutex
	calls := 0
	count := func() int {
		mu.Lock()
		defer mu.Unlock()
		calls++
		return calls
	}
	release := make(chan struct{})
	t.Cleanup(func() { close(release) })

	for _, c := range []struct {
		name  string
		broke func(p *surface.Policy)
		bound time.Duration
		want  string
	}{
		{"Discover flips", func(p *surface.Policy) {
			p.Discover = func(*surface.PolicyContext) surface.Decision {
				if count()%2 == 0 {
					return surface.Disable("busy")
				}
				return surface.Expose()
			}
		}, bound, "for the same context"},
		{"Discover does I/O", func(p *surface.Policy) {
			d := p.Discover
			p.Discover = func(pc *surface.PolicyContext) surface.Decision {
				time.Sleep(15 * time.Millisecond) // as a network call would
				return d(pc)
			}
		}, bound, "must be cheap and synchronous"},
		{"Discover writes the host", func(p *surface.Policy) {
			d := p.Discover
			p.Discover = func(pc *surface.PolicyContext) surface.Decision {
				if pc.Host != nil {
					pc.Host["seen"] = true
				}
				return d(pc)
			}
		}, bound, "Discover changed its policy context"},
		{"Authorize varies by call", func(p *surface.Policy) {
			p.Authorize = func(ctx context.Context, _ *surface.PolicyContext, next surface.Next) surface.Result {
				if count()%2 == 0 {
					return surface.Fail(surface.NewError(surface.CodeNotAuthorized, "", nil))
				}
				return next(ctx)
			}
		}, bound, "must not depend on it"},
		{"Authorize succeeds alone", func(p *surface.Policy) {
			p.Authorize = func(context.Context, *surface.PolicyContext, surface.Next) surface.Result {
				return surface.Result{Status: surface.StatusOK}
			}
		}, bound, "without calling next and without failing"},
		{"Authorize calls next twice", func(p *surface.Policy) {
			p.Authorize = func(ctx context.Context, _ *surface.PolicyContext, next surface.Next) surface.Result {
				next(ctx)
				return next(ctx)
			}
		}, bound, "called next 2 times"},
		{"Invoke changes the input", func(p *surface.Policy) {
			p.Invoke = func(ctx context.Context, ic *surface.InvokeContext, next surface.Next) surface.Result {
				if in, ok := ic.Input.(map[string]any); ok {
					in["note"] = "changed"
				}
				return next(ctx)
			}
		}, bound, "hooks must not change input"},
		{"Invoke blocks", func(p *surface.Policy) {
			p.Invoke = func(ctx context.Context, _ *surface.InvokeContext, next surface.Next) surface.Result {
				<-release
				return next(ctx)
			}
		}, 100 * time.Millisecond, "a hook blocks"},
		{"Authorize never reached", func(p *surface.Policy) {
			p.Discover = func(*surface.PolicyContext) surface.Decision { return surface.Hide() }
		}, bound, "its Authorize hook never ran"},
	} {
		t.Run(c.name, func(t *testing.T) {
			newPolicy := func() surface.Policy {
				p := goodPolicy()
				c.broke(&p)
				return p
			}
			failsWith(t, func(tb *fakeTB) { surfacetest.RunPolicyKit(tb, newPolicy, officeScenarios, c.bound) }, c.want)
		})
	}
}
