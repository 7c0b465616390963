package surface_test

import (
	"strconv"
	"sync"
	"sync/atomic"
	"testing"

	"pgregory.net/rapid"

	"github.com/agentsurface/agentsurface/surface"
	"github.com/agentsurface/agentsurface/surface/surfacetest"
)

// AS-LIFE-004: property — live registration ids and component keys are
// unique, and versions only grow, by exactly one per bump.
func TestLifecycleProperty_AS_LIFE_004(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		replace := rapid.Bool().Draw(rt, "replace")
		policy := surface.DuplicateReject
		if replace {
			policy = surface.DuplicateReplace
		}
		reg := surface.New(&surface.Options{OnDuplicate: policy})
		defer reg.Close()
		var handles []*surface.Handle
		seenIDs := map[string]bool{}
		version := 0
		for range rapid.IntRange(1, 60).Draw(rt, "steps") {
			switch op := rapid.IntRange(0, 4).Draw(rt, "op"); {
			case op <= 1:
				typ := rapid.SampledFrom([]string{"a", "a.b", "c"}).Draw(rt, "type")
				inst := rapid.SampledFrom([]string{"", "x", "y"}).Draw(rt, "instance")
				h, err := reg.Register(simple(typ, inst))
				if err != nil {
					rt.Fatal(err)
				}
				if seenIDs[h.ID()] {
					rt.Fatalf("registration id %s minted twice", h.ID())
				}
				seenIDs[h.ID()] = true
				handles = append(handles, h)
			case op == 2 && len(handles) > 0:
				handles[rapid.IntRange(0, len(handles)-1).Draw(rt, "h")].Unregister()
			case op == 3 && len(handles) > 0:
				handles[rapid.IntRange(0, len(handles)-1).Draw(rt, "h")].Update(surface.Update{Disabled: new(rapid.Bool().Draw(rt, "disabled"))})
			case op == 4 && len(handles) > 0:
				handles[rapid.IntRange(0, len(handles)-1).Draw(rt, "h")].Invalidate()
			}
			v, _ := strconv.Atoi(reg.Version())
			if v < version {
				rt.Fatalf("version went back from %d to %d", version, v)
			}
			version = v

			snap := reg.Snapshot(surface.SnapshotOptions{})
			ids, keys := map[string]bool{}, map[string]bool{}
			active := 0
			for _, h := range handles {
				if h.Status() == surface.HandleActive {
					active++
				}
			}
			for _, c := range snap.Components {
				if ids[c.RegistrationID] || keys[c.Type+"\x00"+c.InstanceID] {
					rt.Fatalf("duplicate live identity %s %s/%s", c.RegistrationID, c.Type, c.InstanceID)
				}
				ids[c.RegistrationID], keys[c.Type+"\x00"+c.InstanceID] = true, true
			}
			if active != len(snap.Components) {
				rt.Fatalf("%d active handles, %d components", active, len(snap.Components))
			}
		}
	})
}

// Eight goroutines register, update, unregister and snapshot one registry
// while a subscriber checks that the versions it sees only increase.
func TestConcurrentLifecycle(t *testing.T) {
	reg := surfacetest.NewRegistry(t, nil)
	var last atomic.Int64
	var events, bad atomic.Int64
	reg.Subscribe(func(e surface.Event) {
		events.Add(1)
		if sc, ok := e.(surface.SurfaceChanged); ok {
			v, _ := strconv.ParseInt(sc.SurfaceVersion, 10, 64)
			if prev := last.Swap(v); v <= prev {
				bad.Add(1)
			}
		}
	})
	rounds := 2000 // per goroutine: bounded by work, not time
	if testing.Short() {
		rounds = 200
	}
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			typ := []string{"a", "b", "c"}[g%3]
			for i := range rounds {
				h, err := reg.Register(simple(typ, strconv.Itoa(i%4)))
				if err != nil {
					t.Error(err)
					return
				}
				h.Update(surface.Update{Disabled: new(i%2 == 0), Availability: map[string]surface.Availability{"read": {Available: i%3 != 0}}})
				snap := reg.Snapshot(surface.SnapshotOptions{Scope: []string{typ}})
				for _, c := range snap.Components {
					if c.Type != typ {
						t.Errorf("scope leaked %s", c.Type)
					}
				}
				h.Refresh()
				h.Invalidate()
				h.Unregister()
			}
		})
	}
	wg.Wait()
	if bad.Load() != 0 {
		t.Fatalf("%d surface-changed events did not increase the version", bad.Load())
	}
	if events.Load() == 0 {
		t.Fatal("no events delivered")
	}
	if n := len(reg.Snapshot(surface.SnapshotOptions{}).Components); n != 0 {
		t.Fatalf("%d components left after every handle unregistered", n)
	}
	final, _ := strconv.ParseInt(reg.Version(), 10, 64)
	if last.Load() != final {
		t.Fatalf("last delivered version %d, registry at %d", last.Load(), final)
	}
}
