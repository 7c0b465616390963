package surfacetest_test

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/agentsurface/agentsurface/surface"
	"github.com/agentsurface/agentsurface/surface/surfacetest"
)

// newDevices returns a harness (on tb) with the devices page and its main
// table mounted.
func newDevices(tb testing.TB, opts *surfacetest.Options) (*surfacetest.Surface, *devices) {
	tb.Helper()
	d := &devices{}
	s := surfacetest.New(tb, opts)
	s.Registry().SetProcedureExecutor(d.executor())
	s.Register(d.page())
	s.Register(d.table("main"))
	return s, d
}

// requests records what each invocation asked for, as the registry's
// telemetry sees it before resolution.
type requests struct {
	mu    sync.Mutex
	infos []surface.InvocationInfo
}

func (r *requests) telemetry() *surface.Telemetry {
	return &surface.Telemetry{Invocation: func(ctx context.Context, info surface.InvocationInfo) (context.Context, surface.InvocationRecorder) {
		r.mu.Lock()
		r.infos = append(r.infos, info)
		r.mu.Unlock()
		return ctx, nil
	}}
}

func (r *requests) last(t *testing.T) surface.InvocationInfo {
	t.Helper()
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.infos) == 0 {
		t.Fatal("no invocation")
	}
	return r.infos[len(r.infos)-1]
}

func eventTypes(events []surface.Event) string {
	types := make([]string, len(events))
	for i, e := range events {
		types[i] = e.EventType()
	}
	return strings.Join(types, ",")
}

func closed(reg *surface.Registry) bool {
	select {
	case <-reg.Done():
		return true
	default:
		return false
	}
}

// AS-TEST-001: without a registry the harness creates one in the test
// environment, acts as {id: "test", kind: "test"}, records every event
// from creation, keeps 5000 audit records, and closes the registry at the
// end of the test.
func TestNewCreatesARegistry_AS_TEST_001(t *testing.T) {
	var reg *surface.Registry
	t.Run("test", func(t *testing.T) {
		s := surfacetest.New(t, nil)
		reg = s.Registry()
		if reg.Environment() != surface.EnvTest {
			t.Fatalf("environment %s", reg.Environment())
		}
		if c := s.Consumer(); c.ID != "test" || c.Kind != surface.ConsumerTest || c.Key() != "test:test" {
			t.Fatalf("consumer %+v", c)
		}
		h := s.Register(surface.Component{Type: "counter", Description: "Counter",
			Actions: map[string]surface.Capability{"bump": surfacetest.Noop("Bump", surface.EffectLocalState)}})
		if got := eventTypes(s.Events()); got != "component-registered,surface-changed" {
			t.Fatalf("events %s", got)
		}
		if e, ok := s.Events()[0].(surface.ComponentRegistered); !ok || e.RegistrationID != h.ID() {
			t.Fatalf("first event %+v", s.Events()[0])
		}
		// More records than the registry's default sink keeps (1000), more
		// than the harness's keeps (5000): two records per call.
		for range surfacetest.AuditCapacity/2 + 1 {
			surfacetest.RequireOK(t, s.Invoke("view:counter.bump", nil, surfacetest.InvokeOptions{}))
		}
		log := s.AuditLog()
		if len(log) != surfacetest.AuditCapacity || log[len(log)-1].Type != surface.AuditInvocationSettled {
			t.Fatalf("%d audit records, last %+v", len(log), log[len(log)-1])
		}
		// The oldest records went: the registration's, the first call's.
		if log[0].Type != surface.AuditInvocationStarted || log[0].ConsumerID != "test:test" {
			t.Fatalf("oldest kept record %+v", log[0])
		}
		if closed(reg) {
			t.Fatal("closed before the test ended")
		}
	})
	if !closed(reg) {
		t.Fatal("the harness's registry outlived its test")
	}

	// Close may come earlier; it is idempotent.
	s := surfacetest.New(t, &surfacetest.Options{RegistryOptions: &surface.Options{Environment: surface.EnvDevelopment}})
	if s.Registry().Environment() != surface.EnvDevelopment {
		t.Fatal("RegistryOptions.Environment ignored")
	}
	s.Close()
	s.Close()
	if _, err := s.Registry().Register(surface.Component{Type: "late", Description: "Late"}); !errors.Is(err, surface.ErrClosed) {
		t.Fatalf("Register after Close: %v", err)
	}
}

// AS-TEST-001: a given registry is wrapped, not owned: events are recorded
// from New on, Close leaves it open, As is refused, AuditLog reads the
// sink it is told about.
func TestNewWrapsARegistry_AS_TEST_001(t *testing.T) {
	sink := surface.NewMemorySink(100)
	reg := surfacetest.NewRegistry(t, &surface.Options{Audit: sink})
	d := &devices{}
	surfacetest.MustRegister(t, reg, d.page())
	t.Run("test", func(t *testing.T) {
		s := surfacetest.New(t, &surfacetest.Options{Registry: reg, Audit: sink})
		if s.Registry() != reg {
			t.Fatal("not the given registry")
		}
		if len(s.Events()) != 0 {
			t.Fatalf("recorded events from before New: %s", eventTypes(s.Events()))
		}
		s.Register(surface.Component{Type: "counter", Description: "Counter",
			Actions: map[string]surface.Capability{"bump": surfacetest.Noop("Bump", surface.EffectLocalState)}})
		surfacetest.RequireOK(t, s.Invoke("view:counter.bump", nil, surfacetest.InvokeOptions{}))
		if got := eventTypes(s.Events()); got != "component-registered,surface-changed,invocation-started,invocation-settled" {
			t.Fatalf("events %s", got)
		}
		if log := s.AuditLog(); len(log) == 0 || log[len(log)-1].CapabilityID != "view:counter.bump" {
			t.Fatalf("audit log %+v", log)
		}
	})
	if closed(reg) {
		t.Fatal("the harness closed a registry it does not own")
	}
	surfacetest.MustRegister(t, reg, surface.Component{Type: "after", Description: "After"})

	fatal(t, func(tb *fakeTB) {
		surfacetest.New(tb, &surfacetest.Options{Registry: reg}).As(map[string]any{"user": "u1"})
	}, "As", "Options.Registry")
	fatal(t, func(tb *fakeTB) { surfacetest.New(tb, &surfacetest.Options{Registry: reg}).AuditLog() }, "AuditLog", "Options.Audit")
}

// AS-TEST-001: contradictory options fail the test.
func TestNewMisuse_AS_TEST_001(t *testing.T) {
	reg := surfacetest.NewRegistry(t, nil)
	fatal(t, func(tb *fakeTB) {
		surfacetest.New(tb, &surfacetest.Options{Registry: reg, Host: map[string]any{"user": "u1"}})
	}, "Options.Registry", "Host")
	fatal(t, func(tb *fakeTB) {
		surfacetest.New(tb, &surfacetest.Options{Registry: reg, RegistryOptions: &surface.Options{}})
	}, "Options.Registry", "RegistryOptions")
	fatal(t, func(tb *fakeTB) {
		surfacetest.New(tb, &surfacetest.Options{RegistryOptions: &surface.Options{Context: func() map[string]any { return nil }}})
	}, "RegistryOptions.Context", "Options.Host")
}

// AS-TEST-001: a sink in RegistryOptions.Audit receives the records the
// harness keeps, and the harness reads Options.Audit when given.
func TestAuditSinks_AS_TEST_001(t *testing.T) {
	theirs := surface.NewMemorySink(10)
	ours := surface.NewMemorySink(10)
	s, _ := newDevices(t, &surfacetest.Options{Audit: ours, RegistryOptions: &surface.Options{Audit: theirs}})
	surfacetest.RequireOK(t, s.Invoke(selectID, map[string]any{"ids": []string{"d1"}}, surfacetest.InvokeOptions{}))
	got, want := theirs.Events(), s.AuditLog()
	if len(want) == 0 || len(got) != len(want) || got[len(got)-1].InvocationID != want[len(want)-1].InvocationID {
		t.Fatalf("theirs %+v\nours %+v", got, want)
	}
	if len(ours.Events()) != len(want) {
		t.Fatal("AuditLog does not read Options.Audit")
	}
}

// AS-TEST-001: Invoke sends the registration id of the only live listing
// when none is given (on the instance, if given), none when the listing is
// ambiguous or absent, and every option as given.
func TestInvoke_AS_TEST_001(t *testing.T) {
	var req requests
	s, d := newDevices(t, &surfacetest.Options{RegistryOptions: &surface.Options{Telemetry: req.telemetry()}})
	main := s.CaptureRef(selectID, "")

	surfacetest.RequireOK(t, s.Invoke(selectID, map[string]any{"ids": []string{"d1"}}, surfacetest.InvokeOptions{}))
	if info := req.last(t); info.RegistrationID != main.RegistrationID || info.ConsumerKind != surface.ConsumerTest || info.ConsumerID != "test" {
		t.Fatalf("request %+v", info)
	}
	if got := d.selection(); !slices.Equal(got, []string{"d1"}) {
		t.Fatalf("selection %v", got)
	}
	// input as raw JSON
	surfacetest.RequireOK(t, s.Invoke(selectID, json.RawMessage(`{"ids":["d2"]}`), surfacetest.InvokeOptions{}))
	if got := d.selection(); !slices.Equal(got, []string{"d2"}) {
		t.Fatalf("selection %v", got)
	}

	side := s.Register(d.table("side"))
	surfacetest.RequireFailWith(t, s.Invoke(selectID, map[string]any{"ids": []string{}}, surfacetest.InvokeOptions{}), surface.CodeAmbiguousInstance, nil)
	if info := req.last(t); info.RegistrationID != "" {
		t.Fatalf("sent %s for an ambiguous call", info.RegistrationID)
	}
	surfacetest.RequireOK(t, s.Invoke(selectID, map[string]any{"ids": []string{}}, surfacetest.InvokeOptions{InstanceID: "side"}))
	if info := req.last(t); info.RegistrationID != side.ID() {
		t.Fatalf("sent %s, want side's %s", info.RegistrationID, side.ID())
	}
	surfacetest.RequireFailWith(t, s.Invoke("view:devices.table.nothing", nil, surfacetest.InvokeOptions{}), surface.CodeCapabilityNotFound, nil)
	if info := req.last(t); info.RegistrationID != "" {
		t.Fatalf("sent %s for an unknown capability", info.RegistrationID)
	}

	// A captured registration id is sent as given: after a remount it is
	// stale.
	ref := s.CaptureRef(selectID, "side")
	side.Unregister()
	again := s.Register(d.table("side"))
	surfacetest.RequireFailWith(t, s.Invoke(selectID, map[string]any{"ids": []string{}}, surfacetest.InvokeOptions{InstanceID: "side", RegistrationID: ref.RegistrationID}),
		surface.CodeStaleCapability, map[string]any{"reason": "registration-replaced", "liveRegistrationId": again.ID()})

	// The version hint, the invocation id, the evidence and the consumer
	// are sent as given.
	stale := s.CaptureRef(disableID, "main")
	s.Register(surface.Component{Type: "other", Description: "Moves the version"})
	other := surface.Consumer{ID: "agent-7", Kind: surface.ConsumerMCPBridge}
	surfacetest.RequireFailWith(t, s.Invoke(disableID, map[string]any{"reason": "r"}, surfacetest.InvokeOptions{
		InstanceID: "main", SurfaceVersion: stale.SurfaceVersion, InvocationID: "call-1", ConfirmationID: "cnf_x", Consumer: other,
	}), surface.CodeStaleCapability, map[string]any{"reason": "surface-version-mismatch"})
	info := req.last(t)
	if info.InvocationID != "call-1" || info.ConfirmationID != "cnf_x" || info.ConsumerKind != surface.ConsumerMCPBridge || info.ConsumerID != "agent-7" ||
		info.RegistrationID != stale.RegistrationID {
		t.Fatalf("request %+v", info)
	}

	// Input that is not JSON fails the test.
	fatal(t, func(tb *fakeTB) {
		h, _ := newDevices(tb, nil)
		h.Invoke(selectID, make(chan int), surfacetest.InvokeOptions{})
	}, "Invoke("+selectID+")", "marshal input")
}

// AS-TEST-001: InvokeOptions.Timeout bounds the call.
func TestInvokeTimeout_AS_TEST_001(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := surfacetest.New(t, nil)
		s.Register(surface.Component{Type: "slow", Description: "Slow", Actions: map[string]surface.Capability{
			"wait": surface.Action(surface.ActionDef[surface.None, surface.None]{Description: "Waits", Effect: surface.EffectLocalState,
				Execute: func(ctx context.Context, _ *surface.Call, _ surface.None) (surface.None, error) {
					<-ctx.Done()
					return surface.None{}, ctx.Err()
				}}),
		}})
		start := time.Now()
		surfacetest.RequireFailWith(t, s.Invoke("view:slow.wait", nil, surfacetest.InvokeOptions{Timeout: time.Second}), surface.CodeTimeout, nil)
		if waited := time.Since(start); waited != time.Second {
			t.Fatalf("waited %v", waited)
		}
	})
}

// AS-TEST-001: Observe returns the output of an observation, as raw JSON or
// decoded, on the only instance or the one named.
func TestObserve_AS_TEST_001(t *testing.T) {
	s, d := newDevices(t, nil)
	if got := s.Observe(readState, ""); got != `{"rows":["d1","d2","d3"],"selected":[]}` {
		t.Fatalf("observe %s", got)
	}
	surfacetest.RequireOK(t, s.Invoke(selectID, map[string]any{"ids": []string{"d2"}}, surfacetest.InvokeOptions{}))
	if st := surfacetest.ObserveAs[tableState](s, readState, ""); !slices.Equal(st.Selected, []string{"d2"}) || len(st.Rows) != 3 {
		t.Fatalf("observe %+v", st)
	}
	s.Register(d.table("side"))
	if st := surfacetest.ObserveAs[tableState](s, readState, "side"); len(st.Rows) != 3 {
		t.Fatalf("observe side %+v", st)
	}
}

// AS-TEST-001: Observe fails the test on an error result, on a capability
// that is not an observation, on output that does not decode, and when the
// surface version moved during the read.
func TestObserveFails_AS_TEST_001(t *testing.T) {
	fatal(t, func(tb *fakeTB) {
		s, d := newDevices(tb, nil)
		s.Register(d.table("side"))
		s.Observe(readState, "")
	}, "Observe("+readState+") failed", "AMBIGUOUS_INSTANCE")
	fatal(t, func(tb *fakeTB) {
		s, _ := newDevices(tb, nil)
		s.Observe("view:devices.table.nothing", "")
	}, "failed", "CAPABILITY_NOT_FOUND")
	fatal(t, func(tb *fakeTB) {
		s, _ := newDevices(tb, nil)
		s.Observe(selectID, "")
	}, "Observe("+selectID+")", "an action, not an observation")
	fatal(t, func(tb *fakeTB) {
		s, _ := newDevices(tb, nil)
		surfacetest.ObserveAs[[]int](s, readState, "main")
	}, "Observe("+readState+" (instance main))", "does not decode into []int")

	// A read that changes the surface: it mounts a component.
	fatal(t, func(tb *fakeTB) {
		s := surfacetest.New(tb, nil)
		s.Register(surface.Component{Type: "sneaky", Description: "Sneaky", Observations: map[string]surface.Capability{
			"read": surface.Observation(surface.ObservationDef[int]{Description: "Reads and mounts",
				Read: func(context.Context, *surface.Call) (int, error) {
					_, err := s.Registry().Register(surface.Component{Type: "mounted", Description: "Mounted by a read"})
					return 1, err
				}}),
		}})
		s.Observe("view:sneaky.read", "")
	}, "view:sneaky.read", "version moved", "must not change the surface")
}

// AS-TEST-001: CaptureRef returns the registration id and the surface
// version of the only live listing, and fails the test unless there is
// exactly one.
func TestCaptureRef_AS_TEST_001(t *testing.T) {
	s, d := newDevices(t, nil)
	ref := s.CaptureRef(readState, "")
	snap := s.Snapshot(surface.SnapshotOptions{})
	if ref.RegistrationID != regOf(t, s.Registry(), "main") || ref.SurfaceVersion != snap.SurfaceVersion || ref.SurfaceVersion != s.Registry().Version() {
		t.Fatalf("ref %+v, snapshot version %s", ref, snap.SurfaceVersion)
	}
	if proc := s.CaptureRef(disableID, ""); proc.RegistrationID != ref.RegistrationID {
		t.Fatalf("procedure ref %+v", proc)
	}
	side := s.Register(d.table("side"))
	if got := s.CaptureRef(readState, "side"); got.RegistrationID != side.ID() || got.SurfaceVersion == ref.SurfaceVersion {
		t.Fatalf("side ref %+v", got)
	}
	fatal(t, func(tb *fakeTB) {
		h, d := newDevices(tb, nil)
		h.Register(d.table("side"))
		h.CaptureRef(readState, "")
	}, "CaptureRef("+readState+")", "2 live listings")
	fatal(t, func(tb *fakeTB) {
		h, _ := newDevices(tb, nil)
		h.CaptureRef(readState, "side")
	}, "instance side", "0 live listings")
}

// AS-TEST-001: the host context is the harness's: Options.Host at first,
// then what As says, for snapshots, policies and handlers alike.
func TestAs_AS_TEST_001(t *testing.T) {
	var seen []any
	var mu sync.Mutex
	admin := surface.Component{Type: "admin", Description: "Admin tools",
		Policies: []surface.Policy{surface.HasPermission("admin", func(host map[string]any, _ string) bool { return host["role"] == "admin" })},
		Actions: map[string]surface.Capability{"purge": surface.Action(surface.ActionDef[surface.None, surface.None]{
			Description: "Purge caches", Effect: surface.EffectLocalState,
			Execute: func(_ context.Context, call *surface.Call, _ surface.None) (surface.None, error) {
				mu.Lock()
				seen = append(seen, call.Host["user"])
				mu.Unlock()
				call.Host["user"] = "changed by a handler"
				return surface.None{}, nil
			}})}}
	s := surfacetest.New(t, &surfacetest.Options{Host: map[string]any{"user": "ann", "role": "viewer"}})
	s.Register(admin)
	fatal(t, func(tb *fakeTB) { surfacetest.RequireExposed(tb, s, "view:admin.purge", "") }, "absent")
	surfacetest.RequireFailWith(t, s.Invoke("view:admin.purge", nil, surfacetest.InvokeOptions{}), surface.CodeCapabilityNotFound, nil)

	host := map[string]any{"user": "bob", "role": "admin"}
	if s.As(host) != s {
		t.Fatal("As does not return the harness")
	}
	host["role"] = "changed after As"
	surfacetest.RequireExposed(t, s, "view:admin.purge", "")
	// Each call gets its own copy: a handler changing it changes nothing.
	surfacetest.RequireOK(t, s.Invoke("view:admin.purge", nil, surfacetest.InvokeOptions{}))
	surfacetest.RequireOK(t, s.As(map[string]any{"user": "bob", "role": "admin"}).Invoke("view:admin.purge", nil, surfacetest.InvokeOptions{}))
	if !slices.Equal(seen, []any{"bob", "bob"}) {
		t.Fatalf("handlers saw users %v", seen)
	}
	s.As(nil)
	fatal(t, func(tb *fakeTB) { surfacetest.RequireExposed(tb, s, "view:admin.purge", "") }, "absent")
}

// AS-TEST-001: Snapshot and the matchers see the harness's consumer; a
// registry given to a matcher shows the anonymous embedded consumer's.
func TestSnapshotConsumer_AS_TEST_001(t *testing.T) {
	testsOnly := surface.Policy{Name: "tests-only", Discover: func(pc *surface.PolicyContext) surface.Decision {
		if pc.Consumer.Kind == surface.ConsumerTest {
			return surface.Expose()
		}
		return surface.Hide()
	}}
	s := surfacetest.New(t, nil)
	s.Register(surface.Component{Type: "debug", Description: "Debug panel", Policies: []surface.Policy{testsOnly},
		Observations: map[string]surface.Capability{"dump": surfacetest.Value("Dump", "state")}})
	if n := len(s.Snapshot(surface.SnapshotOptions{}).Components); n != 1 {
		t.Fatalf("harness consumer sees %d components", n)
	}
	if n := len(s.Snapshot(surface.SnapshotOptions{Consumer: surface.Consumer{Kind: surface.ConsumerEmbedded}}).Components); n != 0 {
		t.Fatalf("embedded consumer sees %d components", n)
	}
	surfacetest.RequireExposed(t, s, "view:debug.dump", "")
	fatal(t, func(tb *fakeTB) { surfacetest.RequireExposed(tb, s.Registry(), "view:debug.dump", "") }, "absent")

	other := surfacetest.New(t, &surfacetest.Options{Consumer: surface.Consumer{ID: "x", Kind: surface.ConsumerMCPBridge}})
	other.Register(surface.Component{Type: "debug", Description: "Debug panel", Policies: []surface.Policy{testsOnly},
		Observations: map[string]surface.Capability{"dump": surfacetest.Value("Dump", "state")}})
	if other.Consumer().Kind != surface.ConsumerMCPBridge {
		t.Fatal("Options.Consumer ignored")
	}
	fatal(t, func(tb *fakeTB) { surfacetest.RequireExposed(tb, other, "view:debug.dump", "") }, "absent")
	surfacetest.RequireFailWith(t, other.Invoke("view:debug.dump", nil, surfacetest.InvokeOptions{}), surface.CodeCapabilityNotFound, nil)
	// Explain says why, for the harness's consumer by default.
	for h, want := range map[*surfacetest.Surface]surface.Visibility{s: surface.VisibilityExposed, other: surface.VisibilityHidden} {
		c := h.Explain(surface.SnapshotOptions{}).Capabilities
		if len(c) != 1 || c[0].Outcome != want || c[0].Policies[0].Name != "tests-only" {
			t.Fatalf("explained for %s: %+v, want %s", h.Consumer().Kind, c, want)
		}
	}
	if got := surfacetest.ObserveAs[string](surfacetest.New(t, &surfacetest.Options{Registry: other.Registry()}), "view:debug.dump", ""); got != "state" {
		t.Fatalf("observe as the test consumer: %q", got)
	}
}

// AS-TEST-001: a harness's semantic snapshot is the registry's.
func TestHarnessSnapshotGolden_AS_TEST_001(t *testing.T) {
	s, _ := newDevices(t, &surfacetest.Options{RegistryOptions: &surface.Options{Route: func() *surface.Route {
		return &surface.Route{Path: "/devices", Params: map[string]string{"tab": "all"}}
	}}})
	surfacetest.RequireSnapshotGolden(t, s, "semantic.json")
}

// AS-TEST-001: Approve, Deny and Expire act on the only pending request
// when none is named, or on the one named, and fail the test otherwise.
func TestConfirmations_AS_TEST_001(t *testing.T) {
	s, d := newDevices(t, nil)
	surfacetest.RequireOK(t, s.Invoke(selectID, map[string]any{"ids": []string{"d1", "d2"}}, surfacetest.InvokeOptions{}))
	disable := func(reason, confirmationID string) surface.Result {
		return s.Invoke(disableID, map[string]any{"reason": reason}, surfacetest.InvokeOptions{ConfirmationID: confirmationID})
	}
	requested := func(res surface.Result) string {
		t.Helper()
		e := surfacetest.RequireFailWith(t, res, surface.CodeConfirmationRequired, map[string]any{"origin": "client"})
		id, _ := e.Details["confirmationId"].(string)
		return id
	}
	if len(s.Pending()) != 0 {
		t.Fatal("pending before any call")
	}

	// Approve the only pending request.
	id := requested(disable("cleanup", ""))
	if p := s.Pending(); len(p) != 1 || p[0].ConfirmationID != id || p[0].Input != `{"ids":["d1","d2"],"reason":"cleanup"}` {
		t.Fatalf("pending %+v", p)
	}
	if p := s.Approve(""); p.ConfirmationID != id || p.CapabilityID != disableID {
		t.Fatalf("approved %+v", p)
	}
	surfacetest.RequireOK(t, disable("cleanup", id))
	d.mu.Lock()
	disabled := slices.Clone(d.disabled)
	d.mu.Unlock()
	if !slices.Equal(disabled, []string{"d1", "d2"}) {
		t.Fatalf("disabled %v", disabled)
	}

	// Deny: the reason stays in the audit trail.
	id = requested(disable("again", ""))
	s.Deny("", "not on a Friday")
	surfacetest.RequireFailWith(t, disable("again", id), surface.CodeConfirmationInvalid, map[string]any{"reason": "denied"})
	if !slices.ContainsFunc(s.AuditLog(), func(e surface.AuditEvent) bool {
		return e.Type == surface.AuditConfirmationDenied && e.ConfirmationID == id && e.Reason == "not on a Friday"
	}) {
		t.Fatal("no denial with its reason in the audit log")
	}

	// Expire force-expires, as the timer would.
	id = requested(disable("later", ""))
	s.Expire("")
	surfacetest.RequireFailWith(t, disable("later", id), surface.CodeConfirmationInvalid, map[string]any{"reason": "expired"})
	if !slices.ContainsFunc(s.Events(), func(e surface.Event) bool {
		r, ok := e.(surface.ConfirmationResolved)
		return ok && r.ConfirmationID == id && r.Outcome == surface.OutcomeExpired
	}) {
		t.Fatal("no expired event")
	}

	// Several pending: name one.
	first, second := requested(disable("one", "")), requested(disable("two", ""))
	if p := s.Approve(second); p.ConfirmationID != second {
		t.Fatalf("approved %+v", p)
	}
	if p := s.Pending(); len(p) != 1 || p[0].ConfirmationID != first {
		t.Fatalf("pending %+v", p)
	}
	s.Deny(first, "")
	if len(s.Pending()) != 0 {
		t.Fatal("still pending")
	}
}

// AS-TEST-001: the confirmation helpers fail the test with no pending
// request, with several and none named, and with a name that is not
// pending.
func TestConfirmationsMisuse_AS_TEST_001(t *testing.T) {
	setup := func(tb testing.TB, reasons ...string) (*surfacetest.Surface, []string) {
		s, _ := newDevices(tb, nil)
		var ids []string
		for _, r := range reasons {
			res := s.Invoke(disableID, map[string]any{"reason": r}, surfacetest.InvokeOptions{})
			id, _ := res.Error.Details["confirmationId"].(string)
			ids = append(ids, id)
		}
		return s, ids
	}
	fatal(t, func(tb *fakeTB) { s, _ := setup(tb); s.Approve("") }, "Approve", "no pending confirmation")
	fatal(t, func(tb *fakeTB) { s, _ := setup(tb); s.Deny("", "") }, "Deny", "no pending confirmation")
	fatal(t, func(tb *fakeTB) { s, _ := setup(tb); s.Expire("") }, "Expire", "no pending confirmation")
	fatal(t, func(tb *fakeTB) { s, _ := setup(tb, "a", "b"); s.Approve("") }, "Approve", "2 pending confirmations", "name one")
	var ids []string
	msg := fatal(t, func(tb *fakeTB) { var s *surfacetest.Surface; s, ids = setup(tb, "a", "b"); s.Expire("") }, "Expire", "2 pending")
	if !strings.Contains(msg, ids[0]) || !strings.Contains(msg, ids[1]) {
		t.Fatalf("%q does not list %v", msg, ids)
	}
	fatal(t, func(tb *fakeTB) { s, _ := setup(tb, "a"); s.Deny("cnf_unknown", "") }, "Deny(cnf_unknown)", "not a pending confirmation")
	fatal(t, func(tb *fakeTB) {
		s, ids := setup(tb, "a")
		s.Approve(ids[0])
		s.Approve(ids[0])
	}, "Approve(cnf_", "not a pending confirmation")
}

// AS-TEST-001: Events and AuditLog return copies, in order.
func TestEventsAndAuditLog_AS_TEST_001(t *testing.T) {
	s, _ := newDevices(t, nil)
	surfacetest.RequireOK(t, s.Invoke(selectID, map[string]any{"ids": []string{"d1"}}, surfacetest.InvokeOptions{}))
	want := "component-registered,surface-changed,component-registered,surface-changed,invocation-started,invocation-settled"
	events := s.Events()
	if got := eventTypes(events); got != want {
		t.Fatalf("events %s\nwant   %s", got, want)
	}
	events[0] = nil
	if s.Events()[0] == nil {
		t.Fatal("Events returned the harness's slice")
	}
	log := s.AuditLog()
	last := log[len(log)-1]
	if last.Type != surface.AuditInvocationSettled || last.CapabilityID != selectID || last.ConsumerID != "test:test" || last.Status != surface.StatusOK {
		t.Fatalf("last audit record %+v", last)
	}
}
