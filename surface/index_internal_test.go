package surface

import (
	"cmp"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"pgregory.net/rapid"
)

// AS-SNAP-003, AS-LIFE-004, AS-STALE-001: property — whatever the
// interleaving of registrations, unregistrations and reads, the indexes
// list exactly the live registrations, entries in snapshot order, find
// exactly the live instances, and hold for each capability id exactly its
// live candidates, by instance then registration id; emptied types and
// ids leave nothing behind.
func TestIndexesProperty_AS_SNAP_003(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		r := New(nil)
		defer r.Close()
		var live []*registration
		seq := 0
		for range rapid.IntRange(1, 400).Draw(rt, "steps") {
			switch op := rapid.IntRange(0, 9).Draw(rt, "op"); {
			case op <= 4 || len(live) == 0: // register
				typ := rapid.SampledFrom([]string{"a", "a.b", "b"}).Draw(rt, "type")
				inst := "i" + strconv.Itoa(seq)
				seq++
				reg := &registration{id: "reg_" + strconv.Itoa(rapid.IntRange(0, 1<<20).Draw(rt, "id")) + "-" + strconv.Itoa(seq),
					typ: typ, instance: inst, priority: rapid.IntRange(-1, 1).Draw(rt, "priority"), status: HandleActive}
				// Two view capabilities, mostly both: a place found for one
				// is tried for the other.
				// Type b's registrations all have both, so that their
				// candidates stay the type's order.
				for _, name := range []string{"x", "y"} {
					if typ == "b" || rapid.IntRange(0, 3).Draw(rt, "view"+name) > 0 {
						reg.caps = append(reg.caps, regCap{id: viewID(typ, name), name: name})
						reg.nView++
					}
				}
				// References bound to a few contexts, so that candidates
				// share an instance and sort by registration id.
				for _, path := range []string{"p", "q"} {
					if rapid.Bool().Draw(rt, "ref"+path) {
						ctx := &Parent{Type: typ, InstanceID: rapid.SampledFrom([]string{"c0", "c1", inst}).Draw(rt, "context")}
						reg.caps = append(reg.caps, regCap{id: "domain:" + path, name: path, bound: &binding{context: ctx}})
					}
				}
				r.insertLocked(reg)
				live = append(live, reg)
			default: // unregister
				k := rapid.IntRange(0, len(live)-1).Draw(rt, "victim")
				reg := live[k]
				live = slices.Delete(live, k, k+1)
				reg.status = HandleUnregistered
				r.removeLocked(reg)
				// A later look resuming after a candidate that went away
				// starts at the first candidate after its place.
				for i := range reg.caps {
					gone := capRef{reg, &reg.caps[i]}
					pid, _ := parseCapabilityID(gone.cap.id)
					cs := r.candidatesOfLocked(pid)
					if j := cs.from("", gone); j > 0 && !cs.at(j-1).key().less(gone.key()) || j < cs.len() && !gone.key().less(cs.at(j).key()) {
						rt.Fatalf("the candidates of %s after the gone %s start at %d", gone.cap.id, reg.id, j)
					}
				}
			}
			if want := slices.SortedFunc(slices.Values(live), entryCmp); !slices.Equal(r.orderedLocked(), want) {
				rt.Fatalf("the order lists %d registrations, want %d in order", len(r.orderedLocked()), len(want))
			}
			want := map[string][]capRef{}
			for _, reg := range live {
				for i := range reg.caps {
					want[reg.caps[i].id] = append(want[reg.caps[i].id], capRef{reg, &reg.caps[i]})
				}
			}
			for _, refs := range want {
				slices.SortFunc(refs, func(x, y capRef) int {
					return cmp.Or(strings.Compare(x.instance(), y.instance()), strings.Compare(x.reg.id, y.reg.id))
				})
			}
			list := func(cs candidates) (out []capRef) {
				for i := range cs.len() {
					out = append(out, cs.at(i))
				}
				return out
			}
			got := map[string][]capRef{}
			for typ, ti := range r.byType {
				for _, e := range ti.caps {
					if slots := ti.slotsOf(e.name); e.name != "" && len(slots) > 0 {
						id := viewID(typ, e.name)
						pid, _ := parseCapabilityID(id)
						got[id] = list(candidates{id: pid, regs: ti.regs, slots: slots})
					}
				}
				held := 0
				for slot, reg := range ti.regs {
					if reg != nil {
						held++
						if reg.slot != uint32(slot) || ti.lookup(reg.instance) != reg {
							rt.Fatalf("slot %d of %s holds %s/%s, at slot %d", slot, typ, reg.typ, reg.instance, reg.slot)
						}
					} else if !slices.Contains(ti.free, uint32(slot)) {
						rt.Fatalf("slot %d of %s is empty and not free", slot, typ)
					}
				}
				if held != len(ti.order) || held+len(ti.free) != len(ti.regs) {
					rt.Fatalf("type %s: %d slots held, %d free, of %d, for %d in order", typ, held, len(ti.free), len(ti.regs), len(ti.order))
				}
				for i := 1; i < len(ti.order); i++ {
					if a, b := ti.regs[ti.order[i-1]], ti.regs[ti.order[i]]; a == nil || b == nil || a.instance >= b.instance {
						rt.Fatalf("type %s: the order is not by instance at %d", typ, i)
					}
				}
			}
			for path, refs := range r.byProc {
				got["domain:"+path] = refs
			}
			if len(got) != len(want) || len(r.byProc) > len(want) {
				rt.Fatalf("candidates of %d capability ids (%d procedures), want %d", len(got), len(r.byProc), len(want))
			}
			for _, id := range []string{"view:a.x", "view:a.y", "view:a.b.x", "view:a.b.y", "view:b.x", "view:b.y", "domain:p", "domain:q"} {
				if _, live := want[id]; r.registered(id) != live {
					rt.Fatalf("%s registered %v, live %v", id, !live, live)
				}
			}
			for id, refs := range want {
				pid, _ := parseCapabilityID(id)
				cs := r.candidatesOfLocked(pid)
				if !slices.Equal(got[id], refs) || !slices.Equal(list(cs), refs) {
					rt.Fatalf("candidates of %s: %d, want %d in order", id, len(got[id]), len(refs))
				}
				for _, c := range refs { // each one's place in the order, from its key
					if i := cs.from(c.instance(), capRef{}); cs.at(i).instance() != c.instance() || i > 0 && cs.at(i-1).instance() == c.instance() {
						rt.Fatalf("the candidates of %s of instance %s start at %d", id, c.instance(), i)
					}
					if i := cs.from("", c); i > 0 && cs.at(i-1) != c || i < cs.len() && !c.key().less(cs.at(i).key()) {
						rt.Fatalf("the candidates of %s after %s/%s start at %d", id, c.instance(), c.reg.id, i)
					}
				}
			}
		}
		types := map[string]bool{}
		for _, reg := range live {
			types[reg.typ] = true
			if got := r.instanceLocked(reg.typ, reg.instance); got != reg {
				rt.Fatalf("instance %s/%s not found", reg.typ, reg.instance)
			}
		}
		if len(r.byType) != len(types) {
			rt.Fatalf("%d types indexed for %d live", len(r.byType), len(types))
		}
		for typ := range r.byType {
			if r.instanceLocked(typ, "i"+strconv.Itoa(seq)) != nil {
				rt.Fatalf("type %s finds an instance never registered", typ)
			}
		}
	})
}

// AS-BOUND-001: property — tombstones answer as a plain list of the
// unregistrations within the TTL, of which only the last size are kept.
func TestTombstonesProperty_AS_BOUND_001(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		size := rapid.IntRange(1, 6).Draw(rt, "size")
		const ttl = 10 * time.Second
		var ts tombstones
		type added struct {
			id string
			at time.Time
		}
		var all []added
		now := time.Unix(0, 0)
		for i := range rapid.IntRange(1, 60).Draw(rt, "steps") {
			now = now.Add(time.Duration(rapid.IntRange(0, 6).Draw(rt, "seconds")) * time.Second)
			id := "reg_" + strconv.Itoa(i)
			ts.add(tombstone{regID: id, caps: []tombCap{{id: "view:t.c" + strconv.Itoa(i%3)}}}, now, size, ttl)
			all = append(all, added{id, now})
			if ts.len() > size {
				rt.Fatalf("%d tombstones kept for size %d", ts.len(), size)
			}
			probe := now.Add(time.Duration(rapid.IntRange(0, 12).Draw(rt, "probe")) * time.Second)
			for k, a := range all {
				want := k >= len(all)-size && probe.Sub(a.at) < ttl
				if _, got := ts.byRegistration(a.id, probe); got != want {
					rt.Fatalf("tombstone %s at +%v: live %v, want %v", a.id, probe.Sub(a.at), got, want)
				}
			}
		}
	})
}

// AS-ID-001: registration ids follow "reg_" + base36 counter (at least 4
// digits) + 6 base62 characters, and the counter reads back.
func TestRegistrationIDGrammar_AS_ID_001(t *testing.T) {
	grammar := regexp.MustCompile(`^reg_[0-9a-z]{4,}[0-9A-Za-z]{6}$`)
	rapid.Check(t, func(rt *rapid.T) {
		counter := rapid.Uint64().Draw(rt, "counter")
		key := rapid.Uint64().Draw(rt, "key")
		id := string(appendRegistrationID(nil, counter, key))
		if !grammar.MatchString(id) {
			rt.Fatalf("id %q does not match the grammar", id)
		}
		back, err := strconv.ParseUint(id[len("reg_"):len(id)-6], 36, 64)
		if err != nil || back != counter {
			rt.Fatalf("id %q reads back counter %d (%v), want %d", id, back, err, counter)
		}
	})
	// Two registries draw different random parts for the same counter.
	a, b := New(nil), New(nil)
	defer a.Close()
	defer b.Close()
	if x, y := appendRegistrationID(nil, 1, a.idKey), appendRegistrationID(nil, 1, b.idKey); string(x) == string(y) {
		t.Fatalf("two registries minted the same id %s", x)
	}
}

// AS-IDENT-001, AS-IDENT-005: property — whatever the interleaving of
// new keys, replays, joins, uncacheable results, expiry and eviction, a
// replay or a join always gets the result stored for its own key, and the
// cache stays bounded.
func TestDedupeReuseProperty_AS_IDENT_005(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		size := rapid.IntRange(1, 600).Draw(rt, "size")
		c := newDedupeCache(size)
		now := time.Unix(0, 0)
		ttl := time.Minute
		type flight struct {
			e   *dedupeEntry
			key string
		}
		var inflight []flight
		type join struct {
			e    *dedupeEntry
			done <-chan struct{}
			key  string
		}
		var joins []join
		stored := map[string]bool{} // keys whose result was cacheable
		for range rapid.IntRange(1, 300).Draw(rt, "steps") {
			key := "k" + strconv.Itoa(rapid.IntRange(0, 40).Draw(rt, "key"))
			dk := dedupeKey{kind: "test", consumer: "c", invocationID: key}
			switch op := rapid.IntRange(0, 5).Draw(rt, "op"); {
			case op <= 2: // begin
				e, hit, done := c.begin(dk, 7, now)
				// A begin evicts down to the size before it adds its key,
				// stopping at an entry in flight (semantics §6).
				if n := c.len(); n > size+1 && c.order.head.terminal {
					rt.Fatalf("cache holds %d entries for size %d", n, size)
				}
				switch hit {
				case dedupeMiss:
					inflight = append(inflight, flight{e, key})
				case dedupeReplay:
					if e.result.InvocationID != key {
						rt.Fatalf("replay of %s got the result of %s", key, e.result.InvocationID)
					}
				case dedupeJoin:
					joins = append(joins, join{e, done, key})
				default:
					rt.Fatalf("unexpected hit %d", hit)
				}
			case op <= 4 && len(inflight) > 0: // finish
				k := rapid.IntRange(0, len(inflight)-1).Draw(rt, "flight")
				f := inflight[k]
				inflight = slices.Delete(inflight, k, k+1)
				cache := rapid.Bool().Draw(rt, "cache")
				c.finish(f.e, Result{InvocationID: f.key}, cache, now, ttl)
				stored[f.key] = stored[f.key] || cache
			default: // time passes
				now = now.Add(time.Duration(rapid.IntRange(0, 90).Draw(rt, "seconds")) * time.Second)
			}
			for _, j := range joins {
				select {
				case <-j.done:
					if j.e.result.InvocationID != j.key {
						rt.Fatalf("join of %s read the result of %s", j.key, j.e.result.InvocationID)
					}
				default:
				}
			}
		}
	})
}

// AS-ID-001: registration ids are a pure function of counter and key;
// these pin the encoding, for counters of four base36 digits and more.
func TestRegistrationIDVectors_AS_ID_001(t *testing.T) {
	for _, c := range []struct {
		counter, key uint64
		want         string
	}{
		{0, 0x0, "reg_0000000000"},
		{0, 0x9e3779b97f4a7c15, "reg_0000MLxq6x"},
		{1, 0x0, "reg_0001BMDMFp"},
		{1, 0x9e3779b97f4a7c15, "reg_00018zMpYP"},
		{1295, 0x0, "reg_00zzqHjaee"},
		{1295, 0x9e3779b97f4a7c15, "reg_00zzVXXMDD"},
		{1679615, 0x0, "reg_zzzzwrSR3A"},
		{1679615, 0x9e3779b97f4a7c15, "reg_zzzzggKDj3"},
		{1679616, 0x0, "reg_10000DuHK0b"},
		{1679616, 0x9e3779b97f4a7c15, "reg_10000l9EuEI"},
		{4294967296, 0x0, "reg_1z141z4QC9zWx"},
		{4294967296, 0x9e3779b97f4a7c15, "reg_1z141z4i82DFI"},
		{18446744073709551615, 0x0, "reg_3w5e11264sgsfTYCjSN"},
		{18446744073709551615, 0x9e3779b97f4a7c15, "reg_3w5e11264sgsfxnLUvQ"},
	} {
		if got := string(appendRegistrationID(nil, c.counter, c.key)); got != c.want {
			t.Errorf("appendRegistrationID(%d, %#x) = %s, want %s", c.counter, c.key, got, c.want)
		}
	}
}
