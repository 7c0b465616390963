package surface

import (
	"hash/maphash"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
	"unsafe"

	"pgregory.net/rapid"
)

// AS-SNAP-003, AS-LIFE-004: property — whatever the interleaving of
// registrations, unregistrations and reads, the lazily merged order lists
// exactly the live registrations in snapshot order, and the type groups
// find exactly the live instances.
func TestEntryOrderProperty_AS_SNAP_003(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		var order entryOrder
		groups := map[string]*typeGroup{}
		var live []*registration
		seq := 0
		for range rapid.IntRange(1, 400).Draw(rt, "steps") {
			switch op := rapid.IntRange(0, 9).Draw(rt, "op"); {
			case op <= 4 || len(live) == 0: // register
				typ := rapid.SampledFrom([]string{"a", "a.b", "b"}).Draw(rt, "type")
				inst := "i" + strconv.Itoa(seq)
				seq++
				reg := &registration{typ: typ, instance: inst, priority: rapid.IntRange(-1, 1).Draw(rt, "priority"), status: Active}
				order.add(reg)
				if groups[typ] == nil {
					groups[typ] = &typeGroup{}
				}
				_, h := groups[typ].lookup(inst)
				groups[typ].add(reg, h)
				live = append(live, reg)
			case op <= 8: // unregister
				k := rapid.IntRange(0, len(live)-1).Draw(rt, "victim")
				reg := live[k]
				live = slices.Delete(live, k, k+1)
				reg.status = Unregistered
				order.remove()
				groups[reg.typ].remove(reg)
			default: // read
				want := slices.SortedFunc(slices.Values(live), entryCmp)
				if got := order.live(); !slices.Equal(got, want) {
					rt.Fatalf("order lists %d registrations, want %d in order", len(got), len(want))
				}
			}
			if stored := len(order.sorted) + len(order.added); stored > 2*len(live)+33 {
				rt.Fatalf("%d stored for %d live: unregistered ones are not compacted", stored, len(live))
			}
		}
		for _, reg := range live {
			if got := groups[reg.typ].instance(reg.instance); got != reg {
				rt.Fatalf("instance %s/%s not found", reg.typ, reg.instance)
			}
		}
		for typ, g := range groups {
			if g.instance("i"+strconv.Itoa(seq)) != nil {
				rt.Fatalf("type %s finds an instance never registered", typ)
			}
			for i, reg := range g.regs {
				if int(reg.typeIdx) != i || reg.status != Active {
					rt.Fatalf("type %s: slot %d holds a registration at %d, status %v", typ, i, reg.typeIdx, reg.status)
				}
			}
		}
		if got, want := order.live(), slices.SortedFunc(slices.Values(live), entryCmp); !slices.Equal(got, want) {
			rt.Fatalf("final order lists %d registrations, want %d in order", len(got), len(want))
		}
	})
}

// AS-STALE-001: a tombstone lists exactly the capability ids of its
// registration, though it keeps the view ids as one string.
func TestTombstoneLists_AS_STALE_001(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		typ := rapid.SampledFrom([]string{"a", "a.b", "grid"}).Draw(rt, "type")
		names := rapid.SliceOfNDistinct(rapid.StringMatching(`[a-c][a-cA-C0-9]{0,3}`), 0, 6, rapid.ID).Draw(rt, "names")
		slices.Sort(names)
		r := New(nil)
		defer r.Close()
		reg := &registration{typ: typ}
		for _, n := range names {
			reg.caps = append(reg.caps, regCap{name: n, x: &noCapExtras})
		}
		reg.nView = int32(len(reg.caps))
		idLen := 0
		for _, n := range names {
			idLen += len("view:" + typ + "." + n)
		}
		r.assignIDs(reg, idLen)
		ts := tombstone{regID: reg.id, ids: reg.ids}
		for i, n := range names {
			if want := "view:" + typ + "." + n; reg.caps[i].id != want {
				rt.Fatalf("capability id %q, want %q", reg.caps[i].id, want)
			}
			if !ts.lists(reg.caps[i].id) {
				rt.Fatalf("tombstone does not list %q (ids %q)", reg.caps[i].id, reg.ids)
			}
		}
		probe := "view:" + rapid.SampledFrom([]string{"a", "a.b", "grid", "b"}).Draw(rt, "probeType") + "." +
			rapid.StringMatching(`[a-c][a-cA-C0-9]{0,4}`).Draw(rt, "probeName")
		want := slices.ContainsFunc(reg.caps, func(rc regCap) bool { return rc.id == probe })
		if got := ts.lists(probe); got != want {
			rt.Fatalf("lists(%q) = %v, want %v (ids %q)", probe, got, want, reg.ids)
		}
		if ts.lists(reg.id) || ts.lists("domain:x.y") {
			rt.Fatal("a tombstone lists its registration id or a procedure it never had")
		}
	})
}

// Emptied type groups are kept for reuse but swept, so a registry that
// sees many short-lived component types does not keep a group for each.
func TestTypeGroupsBounded(t *testing.T) {
	r := New(nil)
	defer r.Close()
	keep, err := r.Register(Component{Type: "kept", Description: "stays"})
	if err != nil {
		t.Fatal(err)
	}
	// check verifies the count of empty groups and that the group
	// groupLocked caches is the one the index holds for its type.
	check := func(i int) {
		t.Helper()
		r.mu.Lock()
		defer r.mu.Unlock()
		empty := 0
		for _, g := range r.byType {
			if len(g.regs) == 0 {
				empty++
			}
		}
		if empty != r.emptyGroups {
			t.Fatalf("after %d: %d empty groups, counted %d", i, empty, r.emptyGroups)
		}
		if n := len(r.byType); n > 2*66 {
			t.Fatalf("after %d: %d groups for 1 live registration", i, n)
		}
		if g := r.lastGroup; g != nil && r.byType[g.typ] != g {
			t.Fatalf("after %d: the cached group of %q is not in the index", i, g.typ)
		}
	}
	for i := range 1000 {
		typ := "t" + strconv.Itoa(i)
		var hs [2]*Handle
		for k, inst := range []string{"a", "b"} { // the second finds the group made for the first
			if hs[k], err = r.Register(Component{Type: typ, InstanceID: inst, Description: "short-lived"}); err != nil {
				t.Fatal(err)
			}
			check(i)
		}
		hs[0].Unregister()
		hs[1].Unregister()
		check(i)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if g := r.byType["kept"]; g == nil || g.instance(DefaultInstanceID) != keep.reg || len(r.entries.live()) != 1 {
		t.Fatal("the sweep lost the live registration")
	}
}

// A registration fits the 416-byte allocation size class; the next is 448.
// A component registered and unregistered costs about 500 bytes of
// allocation, so its size sets how often the collector runs in registries
// that mount and unmount a lot.
func TestRegistrationSizeClass(t *testing.T) {
	if n := unsafe.Sizeof(registration{}); n > 416 {
		t.Fatalf("a registration is %d bytes, more than the 416-byte size class", n)
	}
}

// A Registry fits the 1024-byte allocation size class; the next is 1152.
// Objects over 512 bytes that hold pointers take an 8-byte header, so a
// Registry may be 1016 bytes. Its size is most of what an empty registry
// costs to make.
func TestRegistrySizeClass(t *testing.T) {
	if n := unsafe.Sizeof(Registry{}); n+8 > 1024 {
		t.Fatalf("a Registry is %d bytes, more than the 1024-byte size class holds with its header", n)
	}
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
// new keys, replays, joins, uncacheable results, expiry and eviction (with
// entries reused once nothing can reach them), a replay or a join always
// gets the result stored for its own key, and the cache stays bounded.
func TestDedupeReuseProperty_AS_IDENT_005(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		var c dedupeCache
		c.init(rapid.IntRange(1, 600).Draw(rt, "size"))
		seed := maphash.MakeSeed()
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
				var cached Result
				e, hit, done := c.begin(dk, seed, 7, now, &cached)
				// A begin evicts down to the size before it adds its key,
				// stopping at an entry in flight (semantics §6).
				if s := c.body(); s.idx.n > s.capacity+1 && s.head.terminal {
					rt.Fatalf("cache holds %d entries for capacity %d", s.idx.n, s.capacity)
				}
				switch hit {
				case dedupeMiss:
					inflight = append(inflight, flight{e, key})
				case dedupeReplay:
					if cached.InvocationID != key {
						rt.Fatalf("replay of %s got the result of %s", key, cached.InvocationID)
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
			if s := c.body(); s.nfree > s.capacity {
				rt.Fatalf("cache keeps %d free entries for capacity %d", s.nfree, s.capacity)
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

// isBlank agrees with strings.TrimSpace(s) == "" on any text, Unicode
// spaces and invalid UTF-8 included.
func TestIsBlankProperty(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		parts := rapid.SliceOf(rapid.SampledFrom([]string{" ", "\t", "\n", "\v", "\f", "\r", "\u0085", "\u00a0", "\u2003", "\u3000", "a", "é", "\xff", "\x00", "\x1c"})).Draw(rt, "parts")
		s := strings.Join(parts, "")
		if got, want := isBlank(s), strings.TrimSpace(s) == ""; got != want {
			rt.Fatalf("isBlank(%q) = %v, want %v", s, got, want)
		}
	})
}
