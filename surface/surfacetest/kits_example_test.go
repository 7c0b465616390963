package surfacetest_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/agentsurface/agentsurface/surface"
	"github.com/agentsurface/agentsurface/surface/surfacetest"
)

// A sink's tests run the audit kit on a fresh sink for each check. This
// one is an AsyncSink in front of a memory sink: the kit reads what
// arrived from the memory sink, flushes by closing, and counts drops and
// failures as lost. A sink whose destination can hang also sets Stall.
// In a test, pass the test's t; an Example has none, so this one passes
// exampleT, which panics where a test would fail.
func ExampleTestAuditSink() {
	t := &exampleT{}
	defer t.end()

	surfacetest.TestAuditSink(t, func(t testing.TB) surfacetest.AuditSinkUnderTest {
		dest := surface.NewMemorySink(surfacetest.AuditKitRecords)
		sink := surface.NewAsyncSink(dest, 64)
		t.Cleanup(func() { _ = sink.Close() })
		return surfacetest.AuditSinkUnderTest{
			Sink:    sink,
			Records: dest.Events,
			Flush:   func() { _ = sink.Close() },
			Lost:    func() uint64 { return sink.Dropped() + sink.Failed() },
		}
	})
	fmt.Println("AsyncSink keeps the AuditSink contract")
	// Output: AsyncSink keeps the AuditSink contract
}

// An application's own policy is checked the way the built-ins are, under
// scenarios in which it hides and in which it lets calls through, so that
// every hook runs.
func ExampleTestPolicy() {
	t := &exampleT{}
	defer t.end()

	businessHours := func() surface.Policy {
		return surface.Policy{
			Name: "business-hours",
			Discover: func(pc *surface.PolicyContext) surface.Decision {
				if pc.Host["user"] == nil {
					return surface.Hide()
				}
				return surface.Expose()
			},
			Authorize: func(ctx context.Context, pc *surface.PolicyContext, next surface.Next) surface.Result {
				if pc.Host["afterHours"] == true {
					return surface.Fail(surface.NewError(surface.CodePreconditionFailed, "Try again during business hours.", nil))
				}
				return next(ctx)
			},
		}
	}
	surfacetest.TestPolicy(t, businessHours, &surfacetest.PolicyKitOptions{Scenarios: []surfacetest.PolicyScenario{
		{Name: "anonymous"},
		{Name: "daytime", Host: map[string]any{"user": "ada"}},
		{Name: "night", Host: map[string]any{"user": "ada", "afterHours": true}},
	}})
	fmt.Println("business-hours keeps the policy rules")
	// Output: business-hours keeps the policy rules
}
