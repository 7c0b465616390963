package surfacetest_test

import (
	"testing"

	"github.com/agentsurface/agentsurface/surface"
	"github.com/agentsurface/agentsurface/surface/surfacetest"
)

const (
	readState  = "view:devices.table.readState"
	selectID   = "view:devices.table.selectRows"
	openID     = "view:devices.table.open"
	disableID  = "domain:devices.disable"
	openReason = "Select exactly one device"
)

// AS-TEST-001: RequireExposed passes for a listed, available capability
// (any instance, or the one named) and fails, saying which, for an
// unavailable one, a hidden one and an unknown one.
func TestRequireExposed_AS_TEST_001(t *testing.T) {
	reg, d := devicesRegistry(t)
	surfacetest.MustRegister(t, reg, surface.Component{Type: "admin.panel", Description: "Admin panel",
		Policies:     []surface.Policy{surface.Authenticated("")},
		Observations: map[string]surface.Capability{"users": surfacetest.Value("Users", 2)}})
	surfacetest.MustRegister(t, reg, d.table("side"))

	for _, c := range []struct{ id, instance string }{
		{selectID, ""}, {selectID, "main"}, {readState, "side"}, {disableID, ""}, {disableID, "side"},
	} {
		passes(t, func(tb *fakeTB) { surfacetest.RequireExposed(tb, reg, c.id, c.instance) })
	}
	fatal(t, func(tb *fakeTB) { surfacetest.RequireExposed(tb, reg, openID, "") }, openID, "unavailable", openReason)
	fatal(t, func(tb *fakeTB) { surfacetest.RequireExposed(tb, reg, "view:admin.panel.users", "") }, "absent", "hidden")
	fatal(t, func(tb *fakeTB) { surfacetest.RequireExposed(tb, reg, "view:devices.table.nothing", "") }, "absent")
	fatal(t, func(tb *fakeTB) { surfacetest.RequireExposed(tb, reg, selectID, "other") }, "instance other", "absent")
	fatal(t, func(tb *fakeTB) { surfacetest.RequireExposed(tb, reg, disableID, "other") }, "absent")

	// Available on one instance is enough without an instance id.
	surfacetest.MustRegister(t, reg, surface.Component{Type: "devices.table", InstanceID: "off", Description: "Off", Disabled: true,
		Actions: map[string]surface.Capability{"selectRows": surfacetest.Noop("Select", surface.EffectLocalState)}})
	passes(t, func(tb *fakeTB) { surfacetest.RequireExposed(tb, reg, selectID, "") })
	fatal(t, func(tb *fakeTB) { surfacetest.RequireExposed(tb, reg, selectID, "off") }, "unavailable", "component-disabled")
}

// AS-TEST-001: RequireExposedUnavailable passes for a listed, unavailable
// capability (with its reason, if one is asked for) and fails for an
// available one, a wrong reason and an absent one.
func TestRequireExposedUnavailable_AS_TEST_001(t *testing.T) {
	reg, _ := devicesRegistry(t)
	passes(t, func(tb *fakeTB) { surfacetest.RequireExposedUnavailable(tb, reg, openID, "", "") })
	passes(t, func(tb *fakeTB) { surfacetest.RequireExposedUnavailable(tb, reg, openID, "main", openReason) })
	fatal(t, func(tb *fakeTB) { surfacetest.RequireExposedUnavailable(tb, reg, openID, "", "Busy") },
		`reason "`+openReason+`"`, `want "Busy"`)
	fatal(t, func(tb *fakeTB) { surfacetest.RequireExposedUnavailable(tb, reg, selectID, "", "") }, selectID, "is available")
	fatal(t, func(tb *fakeTB) { surfacetest.RequireExposedUnavailable(tb, reg, openID, "side", "") }, "absent")
}

// AS-TEST-001: RequireOK passes an ok result only.
func TestRequireOK_AS_TEST_001(t *testing.T) {
	reg, _ := devicesRegistry(t)
	passes(t, func(tb *fakeTB) {
		surfacetest.RequireOK(tb, surfacetest.Invoke(tb, reg, selectID, map[string]any{"ids": []string{"d1", "d2"}}))
	})
	fatal(t, func(tb *fakeTB) { surfacetest.RequireOK(tb, surfacetest.Invoke(tb, reg, openID, nil)) },
		"not ok", "CAPABILITY_NOT_AVAILABLE")
}

// AS-TEST-001: RequireFailWith checks the code and a subset of the
// details, compared as JSON values.
func TestRequireFailWith_AS_TEST_001(t *testing.T) {
	reg, d := devicesRegistry(t)
	side := surfacetest.MustRegister(t, reg, d.table("side"))
	ambiguous := surfacetest.Invoke(t, reg, selectID, map[string]any{"ids": []string{}})
	// The registry holds []surface.InstanceRef; a test writes maps.
	instances := []map[string]any{
		{"instanceId": "main", "registrationId": regOf(t, reg, "main"), "description": "Devices table"},
		{"instanceId": "side", "registrationId": side.ID(), "description": "Devices table"},
	}
	passes(t, func(tb *fakeTB) {
		e := surfacetest.RequireFailWith(tb, ambiguous, surface.CodeAmbiguousInstance, map[string]any{"instances": instances})
		if e != ambiguous.Error {
			tb.Errorf("returned %v, want the result's error", e)
		}
	})
	passes(t, func(tb *fakeTB) { surfacetest.RequireFailWith(tb, ambiguous, surface.CodeAmbiguousInstance, nil) })

	invalid := surfacetest.Invoke(t, reg, "view:devices.table.nothing", nil)
	fatal(t, func(tb *fakeTB) { surfacetest.RequireFailWith(tb, invalid, surface.CodeAmbiguousInstance, nil) },
		"want error AMBIGUOUS_INSTANCE", "CAPABILITY_NOT_FOUND")
	ok := surface.Result{Status: surface.StatusOK}
	fatal(t, func(tb *fakeTB) { surfacetest.RequireFailWith(tb, ok, surface.CodeAmbiguousInstance, nil) },
		"want error AMBIGUOUS_INSTANCE", `"status":"ok"`)
	fatal(t, func(tb *fakeTB) {
		surfacetest.RequireFailWith(tb, ambiguous, surface.CodeAmbiguousInstance, map[string]any{"instances": instances[:1]})
	}, "details.instances", "want")
	fatal(t, func(tb *fakeTB) {
		surfacetest.RequireFailWith(tb, ambiguous, surface.CodeAmbiguousInstance, map[string]any{"reason": "x"})
	}, "no details.reason")
	fatal(t, func(tb *fakeTB) {
		surfacetest.RequireFailWith(tb, ambiguous, surface.CodeAmbiguousInstance, map[string]any{"instances": make(chan int)})
	}, "details.instances")

	// Numbers compare as JSON numbers.
	limited := surface.Fail(surface.NewError(surface.CodeRateLimited, "", map[string]any{"retryAfterMs": int64(1500)}))
	passes(t, func(tb *fakeTB) {
		surfacetest.RequireFailWith(tb, limited, surface.CodeRateLimited, map[string]any{"retryAfterMs": 1500.0})
	})
	fatal(t, func(tb *fakeTB) {
		surfacetest.RequireFailWith(tb, limited, surface.CodeRateLimited, map[string]any{"retryAfterMs": 1501})
	}, "details.retryAfterMs = 1500, want 1501")
}

// regOf returns the registration id of the devices table instance.
func regOf(t *testing.T, reg *surface.Registry, instance string) string {
	t.Helper()
	for _, c := range reg.Snapshot(surface.SnapshotOptions{}).Components {
		if c.Type == "devices.table" && c.InstanceID == instance {
			return c.RegistrationID
		}
	}
	t.Fatalf("no devices table %s", instance)
	return ""
}
