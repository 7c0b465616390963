package surface_test

import (
	"context"
	"encoding/json"
	"errors"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/agentsurface/agentsurface/surface"
	"github.com/agentsurface/agentsurface/surface/surfacetest"
)

func capIDs(s surface.Snapshot) []string {
	var ids []string
	for _, c := range s.Components {
		for _, o := range c.Observations {
			ids = append(ids, o.CapabilityID)
		}
		for _, a := range c.Actions {
			ids = append(ids, a.CapabilityID)
		}
	}
	return ids
}

// AS-LIFE-001 (registration half): live at once on register, gone on unregister.
func TestRegisterLiveAndUnregister_AS_LIFE_001(t *testing.T) {
	reg := surfacetest.NewRegistry(t, nil)
	rec := surfacetest.Record(t, reg)
	mustVersion(t, reg, "0")
	if n := len(reg.Snapshot(surface.SnapshotOptions{}).Components); n != 0 {
		t.Fatalf("empty registry has %d components", n)
	}

	h := surfacetest.MustRegister(t, reg, table("main", nil))
	if !strings.HasPrefix(h.ID(), "reg_") || len(h.ID()) != len("reg_0001")+6 {
		t.Errorf("registration id %q", h.ID())
	}
	snap := reg.Snapshot(surface.SnapshotOptions{})
	if got := strings.Join(capIDs(snap), ","); got != "view:devices.table.readState,view:devices.table.selectRows" {
		t.Fatalf("capabilities = %s", got)
	}
	if snap.SurfaceVersion != "1" || snap.Components[0].RegistrationID != h.ID() {
		t.Fatalf("snapshot version %s reg %s", snap.SurfaceVersion, snap.Components[0].RegistrationID)
	}
	want := []surface.Event{
		surface.ComponentRegistered{RegistrationID: h.ID(), ComponentType: "devices.table", InstanceID: "main"},
		surface.SurfaceChanged{SurfaceVersion: "1"},
	}
	if got := rec.Events(); !equalEvents(got, want) {
		t.Fatalf("events = %v, want %v", got, want)
	}

	rec.Reset()
	h.Unregister()
	if h.Status() != surface.HandleUnregistered {
		t.Fatalf("status = %v", h.Status())
	}
	if n := len(reg.Snapshot(surface.SnapshotOptions{}).Components); n != 0 {
		t.Fatalf("after unregister: %d components", n)
	}
	want = []surface.Event{
		surface.ComponentUnregistered{RegistrationID: h.ID(), ComponentType: "devices.table", InstanceID: "main"},
		surface.SurfaceChanged{SurfaceVersion: "2"},
	}
	if got := rec.Events(); !equalEvents(got, want) {
		t.Fatalf("events = %v, want %v", got, want)
	}
	if !reg.TombstoneLive(h.ID()) || !reg.TombstoneListing("view:devices.table.selectRows") {
		t.Fatal("no tombstone after unregister")
	}
	h.Unregister() // a second unregister does nothing
	mustVersion(t, reg, "2")
}

func equalEvents(a, b []surface.Event) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// AS-LIFE-002: only the disabled flag and availability are updatable;
// structural defects are errors in every environment.
func TestUpdateAndDefects_AS_LIFE_002(t *testing.T) {
	for _, env := range []surface.Environment{surface.EnvProduction, surface.EnvDevelopment, surface.EnvTest} {
		reg := surfacetest.NewRegistry(t, &surface.Options{Environment: env})
		c := table("main", nil)
		c.Description = "   "
		_, err := reg.Register(c)
		surfacetest.RequireDefinitionError(t, err, surface.DefinitionInvalid)
		if !errors.Is(err, &surface.DefinitionError{Code: surface.DefinitionInvalid}) {
			t.Errorf("%s: errors.Is by code failed", env)
		}
		mustVersion(t, reg, "0")
	}

	reg := surfacetest.NewRegistry(t, nil)
	rec := surfacetest.Record(t, reg)
	h := surfacetest.MustRegister(t, reg, table("main", nil))
	rec.Reset()

	h.Update(surface.Update{Disabled: new(true)})
	snap := reg.Snapshot(surface.SnapshotOptions{})
	for _, o := range snap.Components[0].Observations {
		if o.Available || o.UnavailableReason != "component-disabled" {
			t.Fatalf("disabled observation: %+v", o)
		}
	}
	mustVersion(t, reg, "2")
	if got := rec.Types(); strings.Join(got, ",") != "surface-changed" {
		t.Fatalf("disable emitted %v (no availability-changed for the flag)", got)
	}

	rec.Reset()
	h.Update(surface.Update{Disabled: new(false), Availability: map[string]surface.Availability{
		"selectRows": {Available: false, Reason: "Nothing to select"},
	}})
	mustVersion(t, reg, "3") // one bump per call
	snap = reg.Snapshot(surface.SnapshotOptions{})
	a := snap.Components[0].Actions[0]
	if a.Available || a.UnavailableReason != "Nothing to select" || !snap.Components[0].Observations[0].Available {
		t.Fatalf("override: %+v", snap.Components[0])
	}
	want := []surface.Event{
		surface.AvailabilityChanged{RegistrationID: h.ID(), CapabilityID: "view:devices.table.selectRows", Available: false},
		surface.SurfaceChanged{SurfaceVersion: "3"},
	}
	if got := rec.Events(); !equalEvents(got, want) {
		t.Fatalf("events = %v", got)
	}

	// The same update again changes nothing: no bump, no event.
	rec.Reset()
	h.Update(surface.Update{Disabled: new(false), Availability: map[string]surface.Availability{
		"selectRows": {Available: false, Reason: "Nothing to select"},
	}})
	mustVersion(t, reg, "3")
	if n := len(rec.Events()); n != 0 {
		t.Fatalf("no-op update emitted %d events", n)
	}

	// Overrides may be keyed by full id; available:true stops blocking.
	h.Update(surface.Update{Availability: map[string]surface.Availability{"view:devices.table.selectRows": {Available: true}}})
	h.Update(surface.Update{Availability: map[string]surface.Availability{"selectRows": {Available: true}}})
	if a := reg.Snapshot(surface.SnapshotOptions{}).Components[0].Actions[0]; !a.Available {
		t.Fatalf("override not lifted: %+v", a)
	}
	mustVersion(t, reg, "5")

	h.Unregister()
	h.Update(surface.Update{Disabled: new(true)})
	h.Invalidate()
	mustVersion(t, reg, "6")
}

func TestDefinitionErrors(t *testing.T) {
	okObs := surfacetest.Value("Reads", 1)
	okAct := surfacetest.Noop("Does", surface.EffectLocalState)
	long := strings.Repeat("x", 301)
	cases := []struct {
		name  string
		mod   func(c *surface.Component)
		code  surface.DefinitionCode
		field string
	}{
		{"bad type", func(c *surface.Component) { c.Type = "Devices" }, surface.DefinitionInvalidID, "type"},
		{"bad instance", func(c *surface.Component) { c.InstanceID = "a.b" }, surface.DefinitionInvalidID, "instanceId"},
		{"bad name", func(c *surface.Component) { c.Observations = map[string]surface.Capability{"Read": okObs} }, surface.DefinitionInvalidID, "observations.Read"},
		{"view id too long", func(c *surface.Component) {
			c.Type = strings.Repeat("a", 120)
			c.Observations = map[string]surface.Capability{"readState": okObs}
		}, surface.DefinitionInvalidID, "observations.readState"},
		{"no description", func(c *surface.Component) { c.Description = "" }, surface.DefinitionInvalid, "description"},
		{"long description", func(c *surface.Component) { c.Description = strings.Repeat("é", 501) }, surface.DefinitionLimitExceeded, "description"},
		{"emoji description counts UTF-16", func(c *surface.Component) { c.Description = strings.Repeat("😀", 251) }, surface.DefinitionLimitExceeded, "description"},
		{"long capability description", func(c *surface.Component) {
			c.Actions = map[string]surface.Capability{"go": surfacetest.Noop(long, surface.EffectLocalState)}
		}, surface.DefinitionLimitExceeded, "actions.go.description"},
		{"zero capability", func(c *surface.Component) { c.Actions = map[string]surface.Capability{"go": {}} }, surface.DefinitionInvalid, "actions.go"},
		{"kind mismatch", func(c *surface.Component) { c.Actions = map[string]surface.Capability{"go": okObs} }, surface.DefinitionInvalid, "actions.go"},
		{"missing read", func(c *surface.Component) {
			c.Observations = map[string]surface.Capability{"r": surface.Observation(surface.ObservationDef[int]{Description: "x"})}
		}, surface.DefinitionInvalid, "observations.r.read"},
		{"missing execute", func(c *surface.Component) {
			c.Actions = map[string]surface.Capability{"a": surface.Action(surface.ActionDef[surface.None, surface.None]{Description: "x", Effect: surface.EffectLocalState})}
		}, surface.DefinitionInvalid, "actions.a.execute"},
		{"observation of None", func(c *surface.Component) {
			c.Observations = map[string]surface.Capability{"r": surface.Observation(surface.ObservationDef[surface.None]{
				Description: "x", Read: func(context.Context, *surface.Call) (surface.None, error) { return surface.None{}, nil }})}
		}, surface.DefinitionInvalid, "observations.r.output"},
		{"server effect on action", func(c *surface.Component) {
			c.Actions = map[string]surface.Capability{"a": surfacetest.Noop("x", surface.EffectDestructive)}
		}, surface.DefinitionPlaneViolation, "actions.a.effect"},
		{"unknown effect", func(c *surface.Component) {
			c.Actions = map[string]surface.Capability{"a": surfacetest.Noop("x", "teleport")}
		}, surface.DefinitionInvalid, "actions.a.effect"},
		{"missing effect", func(c *surface.Component) {
			c.Actions = map[string]surface.Capability{"a": surfacetest.Noop("x", "")}
		}, surface.DefinitionInvalid, "actions.a.effect"},
		{"bad confirmation", func(c *surface.Component) {
			c.Actions = map[string]surface.Capability{"a": surface.Action(surface.ActionDef[surface.None, surface.None]{
				Description: "x", Effect: surface.EffectLocalState, Confirmation: "maybe",
				Execute: func(context.Context, *surface.Call, surface.None) (surface.None, error) { return surface.None{}, nil }})}
		}, surface.DefinitionInvalid, "actions.a.confirmation"},
		{"bad audit", func(c *surface.Component) {
			c.Actions = map[string]surface.Capability{"a": surface.Action(surface.ActionDef[surface.None, surface.None]{
				Description: "x", Effect: surface.EffectLocalState, Audit: "everything",
				Execute: func(context.Context, *surface.Call, surface.None) (surface.None, error) { return surface.None{}, nil }})}
		}, surface.DefinitionInvalid, "actions.a.audit"},
		{"duplicate name", func(c *surface.Component) {
			c.Observations = map[string]surface.Capability{"same": okObs}
			c.Actions = map[string]surface.Capability{"same": okAct}
		}, surface.DefinitionDuplicateCapability, "actions.same"},
		{"unsupported raw schema", func(c *surface.Component) {
			c.Actions = map[string]surface.Capability{"a": surface.Action(surface.ActionDef[map[string]any, surface.None]{
				Description: "x", Effect: surface.EffectLocalState, InputSchema: json.RawMessage(`{"type":"object","oneOf":[{"type":"object"}]}`),
				Execute: func(context.Context, *surface.Call, map[string]any) (surface.None, error) { return surface.None{}, nil }})}
		}, surface.DefinitionUnsupportedSchema, "actions.a.input"},
		{"uninferable type", func(c *surface.Component) {
			c.Observations = map[string]surface.Capability{"r": surfacetest.Value("x", make(chan int))}
		}, surface.DefinitionUnsupportedSchema, "observations.r.output"},
		{"meta not JSON", func(c *surface.Component) { c.Meta = map[string]any{"f": func() {}} }, surface.DefinitionInvalid, "meta"},
		{"meta too big", func(c *surface.Component) { c.Meta = map[string]any{"big": strings.Repeat("m", 2048)} }, surface.DefinitionLimitExceeded, "meta"},
		{"capability meta too big", func(c *surface.Component) {
			c.Observations = map[string]surface.Capability{"r": surface.Observation(surface.ObservationDef[int]{
				Description: "x", Meta: map[string]any{"big": strings.Repeat("m", 2048)},
				Read: func(context.Context, *surface.Call) (int, error) { return 0, nil }})}
		}, surface.DefinitionLimitExceeded, "observations.r.meta"},
		{"bad parent", func(c *surface.Component) { c.Parent = &surface.Parent{Type: "Page"} }, surface.DefinitionInvalid, "parent"},
		{"negative timeout", func(c *surface.Component) {
			c.Observations = map[string]surface.Capability{"r": surface.Observation(surface.ObservationDef[int]{
				Description: "x", Timeout: -time.Second, Read: func(context.Context, *surface.Call) (int, error) { return 0, nil }})}
		}, surface.DefinitionInvalid, "observations.r.timeout"},
	}
	reg := surfacetest.NewRegistry(t, nil)
	rec := surfacetest.Record(t, reg)
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := surface.Component{Type: "devices.table", Description: "Devices"}
			tc.mod(&c)
			h, err := reg.Register(c)
			if h != nil {
				t.Fatalf("got a handle with a definition error")
			}
			de := surfacetest.RequireDefinitionError(t, err, tc.code)
			if de.Field != tc.field {
				t.Errorf("field = %q, want %q (%v)", de.Field, tc.field, de)
			}
		})
	}
	mustVersion(t, reg, "0")
	if n := len(rec.Events()); n != 0 {
		t.Fatalf("definition errors emitted %d events", n)
	}
}

// Description limits count UTF-16 code units, as the spec does: at the
// limit of 500, text of two-byte characters (1000 bytes) and of emoji (two
// units each) registers, and one character more is refused with its count
// in units.
func TestDescriptionLimitCountsUTF16(t *testing.T) {
	reg := surfacetest.NewRegistry(t, nil)
	for i, text := range []string{strings.Repeat("é", 500), strings.Repeat("😀", 250), strings.Repeat("x", 500)} {
		c := surface.Component{Type: "devices.table", InstanceID: "t" + strconv.Itoa(i), Description: text}
		if _, err := reg.Register(c); err != nil {
			t.Fatalf("description of %d bytes, 500 units: %v", len(text), err)
		}
	}
	for text, units := range map[string]string{strings.Repeat("é", 501): "501", strings.Repeat("😀", 251): "502", strings.Repeat("x", 501): "501"} {
		_, err := reg.Register(surface.Component{Type: "devices.table", InstanceID: "over", Description: text})
		de := surfacetest.RequireDefinitionError(t, err, surface.DefinitionLimitExceeded)
		if !strings.Contains(de.Error(), "description is "+units+" characters") {
			t.Errorf("%d bytes: %v, want a count of %s", len(text), de, units)
		}
	}
}

// AS-SCHEMA-001 (registration side): the registry's schema limits apply to
// inferred and raw schemas alike.
func TestSchemaLimitsAtRegister_AS_SCHEMA_001(t *testing.T) {
	type deep struct {
		A struct {
			B struct {
				C []string `json:"c"`
			} `json:"b"`
		} `json:"a"`
	}
	c := surface.Component{Type: "deep", Description: "Deep", Observations: map[string]surface.Capability{
		"read": surfacetest.Value("Deep value", deep{}),
	}}
	// depth: a=1, b=2, c=3, items=4
	tight := surfacetest.NewRegistry(t, &surface.Options{Limits: surface.Limits{MaxSchemaDepth: 3}})
	_, err := tight.Register(c)
	surfacetest.RequireDefinitionError(t, err, surface.DefinitionUnsupportedSchema)
	roomy := surfacetest.NewRegistry(t, &surface.Options{Limits: surface.Limits{MaxSchemaDepth: 4}})
	surfacetest.MustRegister(t, roomy, c)
	// A definition that passed under some limits is checked again under
	// others.
	_, err = tight.Register(c)
	surfacetest.RequireDefinitionError(t, err, surface.DefinitionUnsupportedSchema)

	// Limits above the defaults are honoured too: depth 10 needs a registry
	// that allows it.
	nested := `{"type":"string"}`
	for range 10 {
		nested = `{"type":"array","items":` + nested + `}`
	}
	deepRaw := surface.Component{Type: "nested", Description: "Nested", Actions: map[string]surface.Capability{
		"set": surface.Action(surface.ActionDef[any, surface.None]{
			Description: "Sets", Effect: surface.EffectLocalState, InputSchema: json.RawMessage(nested),
			Execute: func(context.Context, *surface.Call, any) (surface.None, error) { return surface.None{}, nil },
		}),
	}}
	_, err = surfacetest.NewRegistry(t, nil).Register(deepRaw)
	surfacetest.RequireDefinitionError(t, err, surface.DefinitionUnsupportedSchema)
	surfacetest.MustRegister(t, surfacetest.NewRegistry(t, &surface.Options{Limits: surface.Limits{MaxSchemaDepth: 10}}), deepRaw)

	small := surfacetest.NewRegistry(t, &surface.Options{Limits: surface.Limits{MaxSchemaBytes: 20}})
	_, err = small.Register(c)
	surfacetest.RequireDefinitionError(t, err, surface.DefinitionUnsupportedSchema)

	raw := surface.Component{Type: "raw", Description: "Raw", Actions: map[string]surface.Capability{
		"set": surface.Action(surface.ActionDef[map[string]any, surface.None]{
			Description: "Sets", Effect: surface.EffectLocalState,
			InputSchema: json.RawMessage(`{"type":"object","properties":{"x":{"$ref":"https://example.com/x"}}}`),
			Execute:     func(context.Context, *surface.Call, map[string]any) (surface.None, error) { return surface.None{}, nil },
		}),
	}}
	_, err = roomy.Register(raw)
	surfacetest.RequireDefinitionError(t, err, surface.DefinitionUnsupportedSchema)
}

// AS-LIFE-003: first wins on duplicates; replace mode; name duplicates are
// structural (see TestDefinitionErrors).
func TestDuplicates_AS_LIFE_003(t *testing.T) {
	reg := surfacetest.NewRegistry(t, nil)
	rec := surfacetest.Record(t, reg)
	first := surfacetest.MustRegister(t, reg, table("main", nil))
	rec.Reset()
	dup, err := reg.Register(table("main", nil))
	if err != nil {
		t.Fatal(err)
	}
	if dup.Status() != surface.HandleRejected || dup.ID() == first.ID() || dup.ID() == "" {
		t.Fatalf("duplicate: status %v id %q", dup.Status(), dup.ID())
	}
	mustVersion(t, reg, "1")
	want := []surface.Event{surface.ComponentRejected{ComponentType: "devices.table", InstanceID: "main", Reason: surface.RejectReasonDuplicate}}
	if got := rec.Events(); !equalEvents(got, want) {
		t.Fatalf("events = %v", got)
	}
	if got := reg.Snapshot(surface.SnapshotOptions{}).Components; len(got) != 1 || got[0].RegistrationID != first.ID() {
		t.Fatalf("first registration not kept: %+v", got)
	}
	// Dead handles do nothing.
	dup.Update(surface.Update{Disabled: new(true)})
	dup.Invalidate()
	dup.Refresh()
	dup.Unregister()
	mustVersion(t, reg, "1")
	if first.Status() != surface.HandleActive {
		t.Fatal("dead handle affected the live one")
	}
	// Another instance id is not a duplicate.
	surfacetest.MustRegister(t, reg, table("side", nil))

	// Replace mode.
	rreg := surfacetest.NewRegistry(t, &surface.Options{OnDuplicate: surface.DuplicateReplace})
	rrec := surfacetest.Record(t, rreg)
	old := surfacetest.MustRegister(t, rreg, table("main", nil))
	rrec.Reset()
	nw := surfacetest.MustRegister(t, rreg, table("main", nil))
	if old.Status() != surface.HandleUnregistered || nw.ID() == old.ID() {
		t.Fatalf("replace: old %v new id %q old id %q", old.Status(), nw.ID(), old.ID())
	}
	mustVersion(t, rreg, "3") // replace = +2
	wantR := []surface.Event{
		surface.ComponentUnregistered{RegistrationID: old.ID(), ComponentType: "devices.table", InstanceID: "main"},
		surface.ComponentRegistered{RegistrationID: nw.ID(), ComponentType: "devices.table", InstanceID: "main"},
		surface.SurfaceChanged{SurfaceVersion: "3"},
	}
	if got := rrec.Events(); !equalEvents(got, wantR) {
		t.Fatalf("replace events = %v", got)
	}
}

func TestGuard(t *testing.T) {
	var seen []surface.Candidate
	reg := surfacetest.NewRegistry(t, &surface.Options{OnRegister: func(c surface.Candidate) surface.Verdict {
		seen = append(seen, c)
		if c.Component.Type == "boom" {
			panic("guard bug")
		}
		if c.Origin != "first-party" {
			return surface.Verdict{Reject: true}
		}
		return surface.Verdict{}
	}})
	rec := surfacetest.Record(t, reg)
	surfacetest.MustRegister(t, reg, simple("ok", ""))
	third := simple("plugin", "")
	third.Origin = "plugin:weather"
	h, err := reg.Register(third)
	if err != nil || h.Status() != surface.HandleRejected {
		t.Fatalf("guard: %v %v", h, err)
	}
	h2, err := reg.Register(simple("boom", ""))
	if err != nil || h2.Status() != surface.HandleRejected {
		t.Fatalf("panicking guard must reject: %v %v", h2.Status(), err)
	}
	if len(seen) != 3 || seen[1].Origin != "plugin:weather" || seen[0].Origin != "first-party" {
		t.Fatalf("candidates = %+v", seen)
	}
	mustVersion(t, reg, "1")
	types := strings.Join(rec.Types(), ",")
	if types != "component-registered,surface-changed,component-rejected,component-rejected" {
		t.Fatalf("events = %s", types)
	}
	if ev := rec.Events()[2].(surface.ComponentRejected); ev.Reason != surface.RejectReasonGuard {
		t.Fatalf("reason = %s", ev.Reason)
	}
}

// AS-LIFE-005: a remount gets a new id; the old id is remembered by a
// tombstone (resolution turns it into registration-replaced).
func TestRemount_AS_LIFE_005(t *testing.T) {
	reg := surfacetest.NewRegistry(t, nil)
	old := surfacetest.MustRegister(t, reg, table("main", nil))
	old.Unregister()
	nw := surfacetest.MustRegister(t, reg, table("main", nil))
	if nw.ID() == old.ID() {
		t.Fatal("remount reused the registration id")
	}
	if !reg.TombstoneLive(old.ID()) || reg.TombstoneLive(nw.ID()) {
		t.Fatal("tombstone state wrong after remount")
	}
	snap := reg.Snapshot(surface.SnapshotOptions{})
	if snap.Components[0].RegistrationID != nw.ID() {
		t.Fatal("snapshot does not show the new registration")
	}
}

// AS-BOUND-001: tombstones are bounded by size and TTL and decay.
func TestTombstoneBounds_AS_BOUND_001(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		reg := surface.New(&surface.Options{Limits: surface.Limits{TombstoneSize: 3, TombstoneTTL: time.Minute}})
		defer reg.Close()
		var ids []string
		for i := range 5 {
			h := surfacetest.MustRegister(t, reg, simple("c", string(rune('a'+i))))
			ids = append(ids, h.ID())
			h.Unregister()
		}
		if n := reg.TombstoneCount(); n != 3 {
			t.Fatalf("tombstones = %d, want 3 (size bound)", n)
		}
		if reg.TombstoneLive(ids[0]) || reg.TombstoneLive(ids[1]) || !reg.TombstoneLive(ids[4]) {
			t.Fatal("oldest tombstones must be evicted first")
		}
		time.Sleep(59 * time.Second)
		if !reg.TombstoneLive(ids[4]) {
			t.Fatal("tombstone expired early")
		}
		time.Sleep(time.Second)
		if reg.TombstoneLive(ids[4]) || reg.TombstoneListing("view:c.read") {
			t.Fatal("tombstone outlived its TTL")
		}
		// Inserting drops the expired ones.
		h := surfacetest.MustRegister(t, reg, simple("d", ""))
		h.Unregister()
		if n := reg.TombstoneCount(); n != 1 {
			t.Fatalf("tombstones after decay = %d, want 1", n)
		}
	})
}

func TestRegisterContext(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		reg := surface.New(nil)
		defer reg.Close()
		ctx, cancel := context.WithCancel(context.Background())
		h, err := reg.RegisterContext(ctx, table("main", nil))
		if err != nil {
			t.Fatal(err)
		}
		unregistered := false
		unsub := reg.Subscribe(func(e surface.Event) {
			if _, ok := e.(surface.ComponentUnregistered); ok {
				unregistered = true
			}
		})
		defer unsub()
		cancel()
		synctest.Wait()
		if !unregistered || h.Status() != surface.HandleUnregistered {
			t.Fatalf("context end: unregistered event %v, status %v", unregistered, h.Status())
		}

		// An explicit Unregister stops the context watch; Close does too.
		ctx2, cancel2 := context.WithCancel(context.Background())
		defer cancel2()
		h2, _ := reg.RegisterContext(ctx2, table("two", nil))
		h2.Unregister()
		_, _ = reg.RegisterContext(ctx2, table("three", nil))
		// A context already done unregisters at once.
		ctx3, cancel3 := context.WithCancel(context.Background())
		cancel3()
		h3, _ := reg.RegisterContext(ctx3, table("four", nil))
		_ = reg.Close() // waits for the triggered unregistration
		if h3.Status() != surface.HandleUnregistered {
			t.Fatalf("status = %v", h3.Status())
		}
	})
}

func TestClose(t *testing.T) {
	reg := surface.New(nil)
	rec := surfacetest.Record(t, reg)
	h := surfacetest.MustRegister(t, reg, table("main", nil))
	rec.Reset()
	if err := reg.Close(); err != nil {
		t.Fatal(err)
	}
	if err := reg.Close(); err != nil {
		t.Fatal("second Close:", err)
	}
	if h.Status() != surface.HandleUnregistered {
		t.Fatalf("status after Close = %v", h.Status())
	}
	if _, err := reg.Register(table("x", nil)); !errors.Is(err, surface.ErrClosed) {
		t.Fatalf("Register after Close: %v", err)
	}
	h.Unregister()
	h.Invalidate()
	if n := len(rec.Events()); n != 0 {
		t.Fatalf("events after Close: %v", rec.Events())
	}
	if n := len(reg.Snapshot(surface.SnapshotOptions{}).Components); n != 0 {
		t.Fatalf("snapshot after Close has %d components", n)
	}
	if reg.TombstoneLive(h.ID()) {
		t.Fatal("Close must not leave tombstones")
	}
}

// AS-ID-001: a capability definition remembers a name it was registered
// under; registering it again under another name still checks that one.
func TestCapabilityNameCheckedPerRegistration_AS_ID_001(t *testing.T) {
	reg := surfacetest.NewRegistry(t, nil)
	obs := surfacetest.Value("Reads a number", 1)
	register := func(instance, name string) error {
		_, err := reg.Register(surface.Component{
			Type: "named", InstanceID: instance, Description: "Named",
			Observations: map[string]surface.Capability{name: obs},
		})
		return err
	}
	for i, c := range []struct {
		name string
		ok   bool
	}{{"readState", true}, {"readState", true}, {"Bad-Name", false}, {"read-state", false}, {"other", true}, {"", false}, {"readState", true}} {
		err := register("i"+strconv.Itoa(i), c.name)
		if c.ok && err != nil {
			t.Fatalf("%q: %v", c.name, err)
		}
		if !c.ok {
			surfacetest.RequireDefinitionError(t, err, surface.DefinitionInvalidID)
		}
	}
}

// AS-AVAIL-001, AS-VER-001: a capability whose When is false at Register
// becomes available on the first Refresh after its state turns true: the
// availability baseline is what When said at Register, so consumers
// following events (MCP tools/list_changed) see it flip.
func TestRefreshBaselineFromRegister_AS_AVAIL_001(t *testing.T) {
	var loaded atomic.Bool
	reg := surfacetest.NewRegistry(t, nil)
	rec := surfacetest.Record(t, reg)
	h := surfacetest.MustRegister(t, reg, surface.Component{Type: "devices.table", Description: "Devices", Actions: map[string]surface.Capability{
		"selectRows": surface.Action(surface.ActionDef[surface.None, surface.None]{
			Description: "Selects", Effect: surface.EffectLocalState, When: loaded.Load, UnavailableReason: "Still loading",
			Execute: func(context.Context, *surface.Call, surface.None) (surface.None, error) { return surface.None{}, nil },
		}),
	}})
	if a := reg.Snapshot(surface.SnapshotOptions{}).Components[0].Actions[0]; a.Available || a.UnavailableReason != "Still loading" {
		t.Fatalf("%+v", a)
	}
	rec.Reset()
	h.Refresh() // still loading: nothing to push
	loaded.Store(true)
	h.Refresh()
	want := []surface.Event{
		surface.AvailabilityChanged{RegistrationID: h.ID(), CapabilityID: "view:devices.table.selectRows", Available: true},
		surface.SurfaceChanged{SurfaceVersion: "2"},
	}
	if got := rec.Events(); !equalEvents(got, want) {
		t.Fatalf("events =\n%v\nwant\n%v", got, want)
	}
}

// A closed registry's snapshot is empty and says it is closed; the empty
// snapshot of a live registry with nothing mounted does not.
func TestSnapshotOfClosedRegistry(t *testing.T) {
	reg := surface.New(nil)
	empty := reg.Snapshot(surface.SnapshotOptions{})
	if empty.Closed || len(empty.Components) != 0 {
		t.Fatalf("live empty registry: Closed=%v, %d components", empty.Closed, len(empty.Components))
	}
	if _, err := reg.Register(table("main", nil)); err != nil {
		t.Fatal(err)
	}
	if live := reg.Snapshot(surface.SnapshotOptions{}); live.Closed || len(live.Components) != 1 {
		t.Fatalf("live registry: Closed=%v, %d components", live.Closed, len(live.Components))
	}
	reg.Close()
	closed := reg.Snapshot(surface.SnapshotOptions{})
	if !closed.Closed || len(closed.Components) != 0 || len(closed.Procedures) != 0 {
		t.Fatalf("closed registry: Closed=%v, %d components, %d procedures", closed.Closed, len(closed.Components), len(closed.Procedures))
	}
	wire, err := json.Marshal(closed)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(wire), "losed") {
		t.Errorf("Closed leaked onto the wire: %s", wire)
	}
}

// A component its context unmounted can mount again at once, even before
// the unregistration (on the context's own goroutine) has run, even where
// duplicates are rejected: it is on its way out, not live (AS-LIFE-005:
// the remount has a new id, the old one answers as replaced).
func TestRegisterContextRemountsAtOnce_AS_LIFE_005(t *testing.T) {
	reg := surface.New(&surface.Options{OnDuplicate: surface.DuplicateReject})
	defer reg.Close()
	for i := range 200 { // the unregistration may run before the remount, or after: both hold
		ctx, cancel := context.WithCancel(context.Background())
		h, err := reg.RegisterContext(ctx, table("main", nil))
		if err != nil || h.Status() != surface.HandleActive {
			t.Fatalf("mount %d: %v %v", i, err, h.Status())
		}
		cancel()
		h2, err := reg.RegisterContext(context.Background(), table("main", nil))
		if err != nil || h2.Status() != surface.HandleActive {
			t.Fatalf("remount %d right after its context ended: %v %v", i, err, h2.Status())
		}
		if h2.ID() == h.ID() {
			t.Fatal("the remount kept the old registration id")
		}
		// The old one's unregistration, when it runs, leaves the new one.
		h.Unregister()
		if h2.Status() != surface.HandleActive {
			t.Fatalf("the old handle's unregistration took the remount: %v", h2.Status())
		}
		h2.Unregister()
	}
	// A live one (its context not ended) is still a duplicate.
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	surfacetest.MustRegister(t, reg, table("live", nil))
	if h, _ := reg.RegisterContext(ctx, table("live", nil)); h.Status() != surface.HandleRejected {
		t.Fatalf("a live duplicate: %v", h.Status())
	}
}
