package surface_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/agentsurface/agentsurface/surface"
	"github.com/agentsurface/agentsurface/surface/surfacetest"
)

// AS-VER-001: structural and pushed changes bump the version; handler
// swaps, When drift, snapshots and rejected registrations do not.
func TestVersionBumps_AS_VER_001(t *testing.T) {
	open := true
	c := table("main", nil)
	c.Actions["toggle"] = surface.Action(surface.ActionDef[surface.None, surface.None]{
		Description: "Toggles", Effect: surface.EffectLocalState,
		When:    func() bool { return open },
		Execute: func(context.Context, *surface.Call, surface.None) (surface.None, error) { return surface.None{}, nil },
	})
	reg := surfacetest.NewRegistry(t, nil)
	h := surfacetest.MustRegister(t, reg, c)
	mustVersion(t, reg, "1")
	type step struct {
		name string
		do   func()
		want string
	}
	steps := []step{
		{"snapshot", func() { reg.Snapshot(surface.SnapshotOptions{}) }, "1"},
		{"when drift", func() { open = false; reg.Snapshot(surface.SnapshotOptions{}) }, "1"},
		{"refresh with a flip", h.Refresh, "2"},
		{"refresh without a flip", h.Refresh, "2"},
		{"invalidate", h.Invalidate, "3"},
		{"update two things", func() {
			h.Update(surface.Update{Disabled: new(true), Availability: map[string]surface.Availability{"readState": {}}})
		}, "4"},
		{"no-op update", func() { h.Update(surface.Update{Disabled: new(true)}) }, "4"},
		{"rejected duplicate", func() { _, _ = reg.Register(table("main", nil)) }, "4"},
		{"definition error", func() { _, _ = reg.Register(surface.Component{}) }, "4"},
		{"register another", func() { surfacetest.MustRegister(t, reg, table("side", nil)) }, "5"},
		{"unregister", h.Unregister, "6"},
		{"unregister again", h.Unregister, "6"},
	}
	for _, s := range steps {
		s.do()
		if got := reg.Version(); got != s.want {
			t.Fatalf("after %s: version %s, want %s", s.name, got, s.want)
		}
	}
}

// Refresh pushes When flips as availability-changed events, once each.
func TestRefresh(t *testing.T) {
	var open atomic.Bool
	open.Store(true)
	reg := surfacetest.NewRegistry(t, nil)
	rec := surfacetest.Record(t, reg)
	h := surfacetest.MustRegister(t, reg, surface.Component{Type: "dialog", Description: "A dialog", Actions: map[string]surface.Capability{
		"close": surface.Action(surface.ActionDef[surface.None, surface.None]{
			Description: "Closes", Effect: surface.EffectLocalState, When: open.Load, UnavailableReason: "Already closed",
			Execute: func(context.Context, *surface.Call, surface.None) (surface.None, error) { return surface.None{}, nil },
		}),
		"panicky": surface.Action(surface.ActionDef[surface.None, surface.None]{
			Description: "Broken predicate", Effect: surface.EffectLocalState, When: func() bool { panic("bug") },
			Execute: func(context.Context, *surface.Call, surface.None) (surface.None, error) { return surface.None{}, nil },
		}),
	}})
	snap := reg.Snapshot(surface.SnapshotOptions{})
	if a := snap.Components[0].Actions[1]; a.Name != "panicky" || a.Available || a.UnavailableReason != "when-error" {
		t.Fatalf("panicking When: %+v", a)
	}
	rec.Reset()
	h.Refresh() // nothing changed since Register, the panicking predicate included
	open.Store(false)
	h.Refresh()
	h.Refresh()
	open.Store(true)
	h.Refresh()
	want := []surface.Event{
		surface.AvailabilityChanged{RegistrationID: h.ID(), CapabilityID: "view:dialog.close", Available: false},
		surface.SurfaceChanged{SurfaceVersion: "2"},
		surface.AvailabilityChanged{RegistrationID: h.ID(), CapabilityID: "view:dialog.close", Available: true},
		surface.SurfaceChanged{SurfaceVersion: "3"},
	}
	if got := rec.Events(); !equalEvents(got, want) {
		t.Fatalf("events =\n%v\nwant\n%v", got, want)
	}
}

// AS-EVT-001: ordered, post-mutation, isolated, non-reentrant events.
func TestEventOrdering_AS_EVT_001(t *testing.T) {
	reg := surfacetest.NewRegistry(t, nil)
	var log []string
	depth := 0
	reg.Subscribe(func(e surface.Event) { panic("a broken listener") })
	reg.Subscribe(func(e surface.Event) {
		depth++
		defer func() { depth-- }()
		if depth > 1 {
			t.Errorf("nested delivery of %s", e.EventType())
		}
		b, _ := json.Marshal(e)
		log = append(log, string(b))
		if r, ok := e.(surface.ComponentRegistered); ok {
			// Post-mutation: the registration is visible when its event arrives.
			snap := reg.Snapshot(surface.SnapshotOptions{})
			found := false
			for _, c := range snap.Components {
				found = found || c.RegistrationID == r.RegistrationID
			}
			if !found {
				t.Errorf("event for %s delivered before the mutation was visible", r.RegistrationID)
			}
			if r.InstanceID == "trigger" {
				// Re-entrant mutations: applied now, delivered later, one
				// surface-changed for the batch, after its other events.
				for i := range 3 {
					surfacetest.MustRegister(t, reg, simple("batch", fmt.Sprint(i)))
				}
				log = append(log, "returned:"+reg.Version())
			}
		}
	})
	surfacetest.MustRegister(t, reg, simple("first", "trigger"))
	got := strings.Join(log, "\n")
	want := strings.Join([]string{
		`{"type":"component-registered","registrationId":"*","componentType":"first","instanceId":"trigger"}`,
		`returned:4`,
		`{"type":"component-registered","registrationId":"*","componentType":"batch","instanceId":"0"}`,
		`{"type":"component-registered","registrationId":"*","componentType":"batch","instanceId":"1"}`,
		`{"type":"component-registered","registrationId":"*","componentType":"batch","instanceId":"2"}`,
		`{"type":"surface-changed","surfaceVersion":"4"}`,
	}, "\n")
	if maskIDs(got) != want {
		t.Fatalf("delivery:\n%s\nwant:\n%s", maskIDs(got), want)
	}
}

// maskIDs replaces registration ids in JSON text by "*".
func maskIDs(s string) string {
	var b strings.Builder
	for {
		i := strings.Index(s, `"reg_`)
		if i < 0 {
			b.WriteString(s)
			return b.String()
		}
		j := strings.IndexByte(s[i+1:], '"')
		b.WriteString(s[:i])
		b.WriteString(`"*"`)
		s = s[i+1+j+1:]
	}
}

func TestUnsubscribe(t *testing.T) {
	reg := surfacetest.NewRegistry(t, nil)
	n := 0
	unsub := reg.Subscribe(func(surface.Event) { n++ })
	surfacetest.MustRegister(t, reg, simple("a", ""))
	unsub()
	unsub()
	surfacetest.MustRegister(t, reg, simple("b", ""))
	if n != 2 {
		t.Fatalf("listener got %d events, want 2", n)
	}
}

func TestEventJSON(t *testing.T) {
	cases := []struct {
		e    surface.Event
		want string
	}{
		{surface.SurfaceChanged{SurfaceVersion: "3"}, `{"type":"surface-changed","surfaceVersion":"3"}`},
		{surface.ComponentRejected{ComponentType: "a", InstanceID: "b", Reason: surface.RejectReasonGuard}, `{"type":"component-rejected","componentType":"a","instanceId":"b","reason":"guard"}`},
		{surface.AvailabilityChanged{RegistrationID: "reg_0001abcdef", CapabilityID: "view:a.b", Available: false}, `{"type":"availability-changed","registrationId":"reg_0001abcdef","capabilityId":"view:a.b","available":false}`},
		{surface.ComponentUnregistered{RegistrationID: "r", ComponentType: "a", InstanceID: "default"}, `{"type":"component-unregistered","registrationId":"r","componentType":"a","instanceId":"default"}`},
	}
	for _, c := range cases {
		b, err := json.Marshal(c.e)
		if err != nil || string(b) != c.want {
			t.Errorf("%T: %s %v, want %s", c.e, b, err, c.want)
		}
	}
}

// AS-EVT-001: a batch of mutations — a page mounting several components,
// from several goroutines — yields one surface-changed, after the batch's
// other events, carrying the final version; outside a batch, each
// mutation's events are delivered when it returns. Batches nest.
func TestBatchCoalescesSurfaceChanged_AS_EVT_001(t *testing.T) {
	reg := surfacetest.NewRegistry(t, nil)
	rec := surfacetest.Record(t, reg)
	var hs []*surface.Handle
	reg.Batch(func() {
		for i := range 3 {
			hs = append(hs, surfacetest.MustRegister(t, reg, simple("page", fmt.Sprint(i))))
		}
		done := make(chan struct{})
		go func() { // another goroutine's mutation joins the batch
			defer close(done)
			reg.Batch(func() { surfacetest.MustRegister(t, reg, simple("side", "")) })
		}()
		<-done
		if n := len(rec.Events()); n != 0 {
			t.Errorf("%d events delivered inside the batch", n)
		}
	})
	want := "component-registered component-registered component-registered component-registered surface-changed"
	if got := strings.Join(rec.Types(), " "); got != want {
		t.Fatalf("events %s, want %s", got, want)
	}
	if sc := rec.Events()[4].(surface.SurfaceChanged); sc.SurfaceVersion != "4" || reg.Version() != "4" {
		t.Fatalf("surface-changed carries %s; registry at %s", sc.SurfaceVersion, reg.Version())
	}
	rec.Reset()
	hs[0].Unregister()
	hs[1].Unregister()
	want = "component-unregistered surface-changed component-unregistered surface-changed"
	if got := strings.Join(rec.Types(), " "); got != want {
		t.Fatalf("outside a batch: %s, want %s", got, want)
	}
	rec.Reset()
	func() {
		defer func() { _ = recover() }()
		reg.Batch(func() { hs[2].Unregister(); panic("the batch's caller fails") })
	}()
	if got := strings.Join(rec.Types(), " "); got != "component-unregistered surface-changed" {
		t.Fatalf("a batch that panicked left its events behind: %s", got)
	}
}

// A listener subscribed to some event types gets only those, in order
// with the others; a registry with only such listeners makes no other
// events (an all-events listener added later sees invocation events
// again).
func TestSubscribeTo(t *testing.T) {
	reg := surfacetest.NewRegistry(t, nil)
	var changes []string
	reg.SubscribeTo(func(e surface.Event) { changes = append(changes, e.EventType()) }, surface.SurfaceChanged{}, surface.ComponentRegistered{})
	none := 0
	reg.SubscribeTo(func(surface.Event) { none++ })
	surfacetest.MustRegister(t, reg, simple("a", ""))
	surfacetest.RequireOK(t, reg.Invoke(bg, surface.Invocation{CapabilityID: "view:a.read"}, as("x")))
	if got := strings.Join(changes, " "); got != "component-registered surface-changed" || none != 0 {
		t.Fatalf("filtered listener got %s; empty filter got %d", got, none)
	}
	rec := surfacetest.Record(t, reg)
	surfacetest.RequireOK(t, reg.Invoke(bg, surface.Invocation{CapabilityID: "view:a.read"}, as("x")))
	if got := strings.Join(rec.Types(), " "); got != "invocation-started invocation-settled" {
		t.Fatalf("all-events listener got %s", got)
	}
}
