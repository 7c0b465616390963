package surface_test

import (
	"context"
	"encoding/json"
	"flag"
	"regexp"
	"strings"
	"testing"

	"github.com/agentsurface/agentsurface/surface"
	"github.com/agentsurface/agentsurface/surface/surfacetest"
)

var update = flag.Bool("update", false, "rewrite golden files")

// AS-SNAP-001: a snapshot is synchronous and never reads state.
func TestSnapshotNeverReads_AS_SNAP_001(t *testing.T) {
	reads := 0
	whens := 0
	reg := surfacetest.NewRegistry(t, nil)
	c := table("main", &reads)
	c.Actions["clear"] = surface.Action(surface.ActionDef[surface.None, surface.None]{
		Description: "Clears", Effect: surface.EffectLocalState,
		When:    func() bool { whens++; return false },
		Execute: func(context.Context, *surface.Call, surface.None) (surface.None, error) { return surface.None{}, nil },
	})
	surfacetest.MustRegister(t, reg, c)
	whens = 0 // Register read When once, for the Refresh baseline
	for range 3 {
		reg.Snapshot(surface.SnapshotOptions{})
	}
	if reads != 0 {
		t.Fatalf("Snapshot called Read %d times", reads)
	}
	if whens != 3 {
		t.Fatalf("When evaluated %d times, want once per snapshot", whens)
	}
}

// AS-SNAP-002: internal metadata never appears in agent-visible payloads.
func TestInternalNeverSerialized_AS_SNAP_002(t *testing.T) {
	reg := surfacetest.NewRegistry(t, nil)
	c := table("main", nil)
	c.Internal = map[string]any{"tenantSecret": "s3cr3t-internal-token"}
	c.Meta = map[string]any{"rows": 40}
	c.Origin = "plugin:x"
	c.Priority = 7
	surfacetest.MustRegister(t, reg, c)
	b, err := json.Marshal(reg.Snapshot(surface.SnapshotOptions{}))
	if err != nil {
		t.Fatal(err)
	}
	for _, forbidden := range []string{"s3cr3t-internal-token", "tenantSecret", "internal", "plugin:x", "priority", "origin", "disabled"} {
		if strings.Contains(string(b), forbidden) {
			t.Errorf("snapshot JSON contains %q: %s", forbidden, b)
		}
	}
	if !strings.Contains(string(b), `"meta":{"rows":40}`) {
		t.Errorf("meta missing: %s", b)
	}
	// The caller's map cannot change the registration afterwards.
	c.Internal["tenantSecret"] = "changed"
	c.Meta["rows"] = 41
	b2, _ := json.Marshal(reg.Snapshot(surface.SnapshotOptions{}))
	if !strings.Contains(string(b2), `"meta":{"rows":40}`) {
		t.Errorf("meta changed through the definition map: %s", b2)
	}
}

// AS-SNAP-003: deterministic order; truncation marker.
func TestSnapshotOrderAndBudget_AS_SNAP_003(t *testing.T) {
	mk := func(typ, inst string, prio int) surface.Component {
		c := simple(typ, inst)
		c.Priority = prio
		return c
	}
	comps := []surface.Component{
		mk("b.list", "x", 0), mk("a.list", "y", 0), mk("a.list", "x", 0),
		mk("z.header", "default", 10), mk("c.footer", "default", -1),
	}
	var orders []string
	for _, perm := range [][]int{{0, 1, 2, 3, 4}, {4, 3, 2, 1, 0}, {2, 4, 0, 3, 1}} {
		reg := surfacetest.NewRegistry(t, nil)
		for _, i := range perm {
			surfacetest.MustRegister(t, reg, comps[i])
		}
		var keys []string
		for _, c := range reg.Snapshot(surface.SnapshotOptions{}).Components {
			keys = append(keys, c.Type+"/"+c.InstanceID)
		}
		orders = append(orders, strings.Join(keys, " "))
	}
	want := "z.header/default a.list/x a.list/y b.list/x c.footer/default"
	for _, o := range orders {
		if o != want {
			t.Fatalf("order %q, want %q", o, want)
		}
	}

	reg := surfacetest.NewRegistry(t, nil)
	for _, c := range comps {
		surfacetest.MustRegister(t, reg, c)
	}
	snap := reg.Snapshot(surface.SnapshotOptions{Budget: &surface.Budget{MaxComponents: 3}})
	if len(snap.Components) != 3 || snap.Truncated == nil || snap.Truncated.DroppedComponents != 2 {
		t.Fatalf("maxComponents: %d comps, truncated %+v", len(snap.Components), snap.Truncated)
	}
	if snap.Components[2].Type != "a.list" || snap.Components[2].InstanceID != "y" {
		t.Fatalf("dropped the wrong components: %+v", snap.Components[2])
	}
	// Byte budget: fits exactly two components.
	full := reg.Snapshot(surface.SnapshotOptions{})
	two, _ := json.Marshal(full.Components[:2])
	snap = reg.Snapshot(surface.SnapshotOptions{Budget: &surface.Budget{MaxBytes: len(two)}})
	if len(snap.Components) != 2 || snap.Truncated.DroppedComponents != 3 {
		t.Fatalf("maxBytes: %d comps, truncated %+v", len(snap.Components), snap.Truncated)
	}
	if b, _ := json.Marshal(snap.Components); len(b) != len(two) {
		t.Fatalf("budgeted components are %d bytes, want %d", len(b), len(two))
	}
	snap = reg.Snapshot(surface.SnapshotOptions{Budget: &surface.Budget{MaxBytes: len(two) - 1}})
	if len(snap.Components) != 1 {
		t.Fatalf("one byte less must drop one more: %d", len(snap.Components))
	}
	// A budget that everything fits has no marker.
	snap = reg.Snapshot(surface.SnapshotOptions{Budget: &surface.Budget{MaxComponents: 5, MaxBytes: 1 << 20}})
	if snap.Truncated != nil || len(snap.Components) != 5 {
		t.Fatalf("no truncation expected: %+v", snap.Truncated)
	}
	b, _ := json.Marshal(reg.Snapshot(surface.SnapshotOptions{Budget: &surface.Budget{MaxComponents: 1}}))
	if !strings.HasSuffix(string(b), `"truncated":{"droppedComponents":4}}`) {
		t.Fatalf("truncation marker not in JSON: %s", b)
	}
}

func TestSnapshotScopeAndUnavailable(t *testing.T) {
	reg := surfacetest.NewRegistry(t, nil)
	for _, typ := range []string{"devices", "devices.table", "devicesx", "settings.devices"} {
		surfacetest.MustRegister(t, reg, simple(typ, ""))
	}
	var got []string
	for _, c := range reg.Snapshot(surface.SnapshotOptions{Scope: []string{"devices"}}).Components {
		got = append(got, c.Type)
	}
	if strings.Join(got, ",") != "devices,devices.table" {
		t.Fatalf("scope devices: %v", got)
	}
	h := surfacetest.MustRegister(t, reg, table("main", nil))
	h.Update(surface.Update{Availability: map[string]surface.Availability{"selectRows": {Available: false}}})
	snap := reg.Snapshot(surface.SnapshotOptions{Scope: []string{"devices.table"}, OmitUnavailable: true})
	if len(snap.Components) != 2 {
		t.Fatalf("components: %d", len(snap.Components))
	}
	for _, c := range snap.Components {
		if c.InstanceID == "main" && (len(c.Actions) != 0 || len(c.Observations) != 1) {
			t.Fatalf("OmitUnavailable kept %+v", c)
		}
	}
	a := reg.Snapshot(surface.SnapshotOptions{Scope: []string{"devices.table"}}).Components[1].Actions[0]
	if a.Available || a.UnavailableReason != "unavailable" {
		t.Fatalf("default override reason: %+v", a)
	}
}

// A snapshot is a copy: changing it changes nothing in the registry.
func TestSnapshotIsACopy(t *testing.T) {
	reg := surfacetest.NewRegistry(t, nil)
	a := table("a", nil)
	a.Parent = &surface.Parent{Type: "devices.page", InstanceID: "p"}
	surfacetest.MustRegister(t, reg, a)
	surfacetest.MustRegister(t, reg, table("b", nil))
	before, _ := json.Marshal(reg.Snapshot(surface.SnapshotOptions{}))
	s := reg.Snapshot(surface.SnapshotOptions{})
	obs := s.Components[0].Observations
	obs[0].Available = false
	obs[0].Description = "hacked"
	obs[0].OutputSchema = `{}`
	s.Components[0].Parent.Type = "hacked"
	// The slices of one descriptor cannot grow into the next one's.
	acts := append(s.Components[0].Actions, surface.ActionDescriptor{Name: "injected"})
	acts[0].Effect = surface.EffectDestructive
	if got := s.Components[1].Actions[0].Name; got != "selectRows" {
		t.Fatalf("appending to one descriptor's actions overwrote the next: %s", got)
	}
	s.Components[1] = s.Components[0]
	s.Components = append(s.Components, s.Components[0])
	after, _ := json.Marshal(reg.Snapshot(surface.SnapshotOptions{}))
	if mask(string(before)) != mask(string(after)) {
		t.Fatalf("registry changed through a snapshot:\n%s\n%s", before, after)
	}
}

var volatile = regexp.MustCompile(`"(surfaceId|capturedAt)":"[^"]*"`)

func mask(s string) string { return volatile.ReplaceAllString(s, `"$1":"*"`) }

// AS-SNAP-003: the snapshot JSON uses the spec's field names and order
// exactly (golden testdata/snapshot.json): a component with parent, meta
// and an unavailable action, a component with no capabilities, a
// procedure reference with a locked bound field and a live note.
func TestSnapshotGolden(t *testing.T) {
	reg, _ := newDomainRegistry(t, &surface.Options{
		Now: goldenClock,
		Route: func() *surface.Route {
			return &surface.Route{Path: "/devices", Params: map[string]string{"tab": "all"}}
		},
	})
	c := table("main", nil)
	c.Parent = &surface.Parent{Type: "devices.page"}
	c.Meta = map[string]any{"pageSize": 25, "columns": []string{"name", "status"}}
	c.Actions["open"] = surface.Action(surface.ActionDef[struct {
		ID string `json:"id" jsonschema:"Device id"`
	}, struct {
		Opened bool `json:"opened"`
	}]{
		Description: "Opens the detail drawer", Effect: surface.EffectNavigation, Idempotent: true, Irreversible: true,
		Confirmation: surface.ConfirmOptional, Meta: map[string]any{"hint": "drawer"},
		When: func() bool { return false }, UnavailableReason: "Select a device first",
		Execute: func(context.Context, *surface.Call, struct {
			ID string `json:"id" jsonschema:"Device id"`
		}) (struct {
			Opened bool `json:"opened"`
		}, error) {
			return struct {
				Opened bool `json:"opened"`
			}{true}, nil
		},
	})
	c.Procedures = []surface.Capability{disableRef(&selection{ids: []string{"d1", "d2"}}, surface.EffectDestructive)}
	h := surfacetest.MustRegister(t, reg, c)
	surfacetest.MustRegister(t, reg, surface.Component{Type: "devices.page", Description: "The devices page"})
	snap := reg.Snapshot(surface.SnapshotOptions{})
	if snap.SurfaceID != reg.SurfaceID() || snap.Components[1].RegistrationID != h.ID() {
		t.Fatal("ids")
	}
	requireGolden(t, "snapshot.json", snap)
}
