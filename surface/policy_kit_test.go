package surface_test

import (
	"slices"
	"testing"
	"time"

	"github.com/agentsurface/agentsurface/surface"
	"github.com/agentsurface/agentsurface/surface/surfacetest"
)

// Every built-in policy keeps the rules the policy kit checks (semantics
// §12; spec 06): discovery pure and fast, authorization blind to the
// input (AS-INVOKE-001), invoke hooks seeing only the validated effective
// input (AS-INVOKE-002), each built-in hiding and failing as specified
// under the scenarios that reach it (AS-POLICY-004).
func TestBuiltinPoliciesConformance_AS_INVOKE_001_002(t *testing.T) {
	// Scenarios in which each policy both hides (or refuses) and lets
	// through, so that every hook runs.
	opts := &surfacetest.PolicyKitOptions{
		Scenarios: []surfacetest.PolicyScenario{
			{Name: "anonymous", Consumer: surface.Consumer{Kind: surface.ConsumerEmbedded}},
			{Name: "member", Host: map[string]any{"user": "ada", "tenant": "t1", "permissions": []string{"devices.write"}}},
			{Name: "outsider", Host: map[string]any{"user": "bob", "tenant": "t2"}},
			{Name: "production", Host: map[string]any{"user": "ada", "tenant": "t1"}, Environment: surface.EnvProduction},
		},
		Internal: map[string]any{"tenant": "t1"},
	}
	permitted := func(host map[string]any, p string) bool {
		ps, _ := host["permissions"].([]string)
		return slices.Contains(ps, p)
	}
	policies := map[string]func() surface.Policy{
		"Authenticated": func() surface.Policy { return surface.Authenticated("") },
		"HasPermission": func() surface.Policy { return surface.HasPermission("devices.write", permitted) },
		"TenantBoundary": func() surface.Policy {
			return surface.TenantBoundary(func(host map[string]any) string { s, _ := host["tenant"].(string); return s },
				func(pc *surface.PolicyContext) string { s, _ := pc.Internal["tenant"].(string); return s })
		},
		"OnlyIn":              func() surface.Policy { return surface.OnlyIn(surface.EnvTest, surface.EnvDevelopment) },
		"RateLimit":           func() surface.Policy { return surface.RateLimit(1, time.Minute) },
		"RequireConfirmation": func() surface.Policy { return surface.RequireConfirmation(nil, nil) },
		"RequireConfirmation if": func() surface.Policy {
			return surface.RequireConfirmation(func(ic *surface.InvokeContext) bool {
				in, _ := ic.Input.(map[string]any)
				return in["n"] == 2.0
			}, func(any) string { return "Act on 2" })
		},
		"Audit metadata": func() surface.Policy { return surface.Audit(nil, surface.AuditLevelMetadata) },
		"Audit full":     func() surface.Policy { return surface.Audit(surface.NewMemorySink(0), surface.AuditLevelFull) },
	}
	for name, newPolicy := range policies {
		t.Run(name, func(t *testing.T) { surfacetest.TestPolicy(t, newPolicy, opts) })
	}
}
