package surfacetest

import (
	"maps"
	"testing"
	"time"

	"github.com/agentsurface/agentsurface/surface"
)

// RunAuditCheck runs one check of TestAuditSink with a failure limit of
// bound, so that a test can show the kit fails a broken sink.
func RunAuditCheck(tb testing.TB, name string, s AuditSinkUnderTest, bound time.Duration) {
	for _, c := range auditChecks {
		if c.name == name {
			c.run(tb, s, bound)
			return
		}
	}
	tb.Fatalf("no audit check %q", name)
}

// RunPolicyKit runs TestPolicy's checks with a fake test: every scenario
// in turn (no subtests), then the check that every hook ran.
func RunPolicyKit(tb testing.TB, newPolicy func() surface.Policy, opts *PolicyKitOptions, bound time.Duration) {
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
		maps.Copy(ran, runPolicyScenario(tb, newPolicy, sc, o.Internal, bound))
	}
	requireHooksRan(tb, newPolicy(), ran)
}
