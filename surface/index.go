package surface

import (
	"cmp"
	"slices"
	"strings"
	"time"
)

// The registry's indexes of live registrations (Registry.byID, byType,
// byProc and ordered), guarded by Registry.mu.
//
// The candidates of a capability id (semantics §9) are kept in their
// order, by instance then registration id, as registrations come and go:
// those of a view capability in its type's index, those of a procedure
// in byProc. A call finds its place in them by binary search, so naming
// an instance or a stale registration costs the same whatever their
// number. A registration pays a binary search and a copy of the entries
// after its place: once in its type's order, which serves as the
// candidates of every view capability all the type's registrations have,
// and once per other capability. The view entries are slots in the
// type's table of registrations rather than pointers, so the copy is a
// plain memmove: with pointers the garbage collector's write barrier
// made unregistering 100 components twice as slow.

// entryCmp orders registrations by priority desc, type asc, instance asc.
// Live registrations never compare equal.
func entryCmp(a, b *registration) int {
	return cmp.Or(cmp.Compare(b.priority, a.priority), strings.Compare(a.typ, b.typ), strings.Compare(a.instance, b.instance))
}

// typeIndex indexes the live registrations of one component type.
type typeIndex struct {
	// regs holds the registrations by slot (registration.slot); free
	// lists the slots no registration holds. Like a map, the table keeps
	// its size while the type lives.
	regs []*registration
	free []uint32
	// order holds the slots of all the type's registrations, by
	// instance: an instance is found by binary search.
	order []uint32
	// caps holds the candidates of each view capability name of the
	// type. A type has few names: they are looked up in turn.
	caps []viewCandidates
}

// viewCandidates are the candidates of one view capability of a type.
// While every registration of the type has the capability (the usual
// case: the rows of one table), they are the type's order and nothing is
// kept for them (shared). The first registration without it makes them a
// list of their own, a copy of the order, kept until the type empties.
type viewCandidates struct {
	name   string // "" for an entry free to take
	shared bool
	slots  []uint32 // unless shared: the candidates' slots, by instance
}

// lookup returns the registration of instance, or nil.
func (t *typeIndex) lookup(instance string) *registration {
	if i, ok := searchSlots(t.regs, t.order, instance); ok {
		return t.regs[t.order[i]]
	}
	return nil
}

// slotsOf returns the candidates of the view capability name, or nil.
func (t *typeIndex) slotsOf(name string) []uint32 {
	if e := t.find(name); e != nil {
		if e.shared {
			return t.order
		}
		return e.slots
	}
	return nil
}

// find returns the entry of the view capability name, or nil.
func (t *typeIndex) find(name string) *viewCandidates {
	for i := range t.caps {
		if t.caps[i].name == name {
			return &t.caps[i]
		}
	}
	return nil
}

// add gives reg a slot and its place in the order and in the candidates
// of its view capabilities.
func (t *typeIndex) add(reg *registration) {
	if n := len(t.free); n > 0 {
		reg.slot, t.free = t.free[n-1], t.free[:n-1]
		t.regs[reg.slot] = reg
	} else {
		reg.slot = uint32(len(t.regs))
		t.regs = append(t.regs, reg)
	}
	for i := range t.caps { // a capability reg lacks stops sharing the order
		if e := &t.caps[i]; e.shared && !reg.hasView(e.name) {
			e.slots, e.shared = append(e.slots[:0], t.order...), false
		}
	}
	at, _ := searchSlots(t.regs, t.order, reg.instance)
	t.order = insertSlot(t.order, at, reg.slot)
	for i := range reg.caps[:reg.nView] {
		e := t.find(reg.caps[i].name)
		if e == nil { // a new name: shared if reg is the type's only registration
			e = t.take(reg.caps[i].name, len(t.order) == 1)
		}
		if e.shared {
			continue
		}
		// Registrations of a type mostly have the same capabilities: the
		// place in the order, or in the list before, is tried first.
		if !fitsSlot(t.regs, e.slots, at, reg.instance) {
			at, _ = searchSlots(t.regs, e.slots, reg.instance)
		}
		e.slots = insertSlot(e.slots, at, reg.slot)
	}
}

// take returns a free entry (or a new one) for the view capability name.
func (t *typeIndex) take(name string, shared bool) *viewCandidates {
	i := slices.IndexFunc(t.caps, func(e viewCandidates) bool { return e.name == "" })
	if i < 0 {
		t.caps = append(t.caps, viewCandidates{})
		i = len(t.caps) - 1
	}
	t.caps[i].name, t.caps[i].shared = name, shared
	return &t.caps[i]
}

// remove takes reg out of the order and the candidates of its view
// capabilities, and frees its slot. It reports whether the type has no
// registration left; then every entry is free to take.
func (t *typeIndex) remove(reg *registration) (empty bool) {
	at, ok := searchSlots(t.regs, t.order, reg.instance)
	if !ok || t.order[at] != reg.slot {
		return len(t.order) == 0 // not indexed
	}
	t.order = slices.Delete(t.order, at, at+1)
	for i := range reg.caps[:reg.nView] {
		e := t.find(reg.caps[i].name)
		if e == nil || e.shared {
			continue
		}
		if at >= len(e.slots) || e.slots[at] != reg.slot {
			if at, ok = searchSlots(t.regs, e.slots, reg.instance); !ok {
				continue
			}
		}
		e.slots = slices.Delete(e.slots, at, at+1)
	}
	t.regs[reg.slot] = nil
	t.free = append(t.free, reg.slot)
	if len(t.order) > 0 {
		return false
	}
	for i := range t.caps {
		t.caps[i] = viewCandidates{slots: t.caps[i].slots[:0]}
	}
	return true
}

// insertSlot inserts slot into slots at index at. (slices.Insert, written
// out for one element: it was most of the cost of adding.)
func insertSlot(slots []uint32, at int, slot uint32) []uint32 {
	slots = append(slots, 0)
	copy(slots[at+1:], slots[at:])
	slots[at] = slot
	return slots
}

// hasView reports whether reg has a view capability named name.
func (reg *registration) hasView(name string) bool {
	for i := range reg.caps[:reg.nView] {
		if reg.caps[i].name == name {
			return true
		}
	}
	return false
}

// candidates are the candidates of one capability id, in order, as the
// index holds them: slots of the type's registrations for a view
// capability, references for a procedure. They are valid while the lock
// that read them is held.
type candidates struct {
	id    parsedID
	regs  []*registration // view capabilities: the type's registrations by slot
	slots []uint32        // view capabilities: the candidates' slots
	refs  []capRef        // procedures: the candidates
}

func (cs candidates) len() int {
	if cs.id.Plane == PlaneDomain {
		return len(cs.refs)
	}
	return len(cs.slots)
}

// at returns the i-th candidate.
func (cs candidates) at(i int) capRef {
	if cs.id.Plane == PlaneDomain {
		return cs.refs[i]
	}
	reg := cs.regs[cs.slots[i]]
	return capRef{reg, reg.capability(cs.id)}
}

// search returns the index of the first candidate at or after key k, and
// whether it is at k.
func (cs candidates) search(k refKey) (int, bool) {
	if cs.id.Plane == PlaneDomain {
		lo, hi := 0, len(cs.refs)
		for lo < hi {
			if m := int(uint(lo+hi) >> 1); cs.refs[m].key().less(k) {
				lo = m + 1
			} else {
				hi = m
			}
		}
		return lo, lo < len(cs.refs) && cs.refs[lo].key() == k
	}
	// The candidates of a view capability have an instance each.
	i, found := searchSlots(cs.regs, cs.slots, k.instance)
	if found {
		if id := cs.regs[cs.slots[i]].id; id != k.regID {
			if id < k.regID {
				i++
			}
			return i, false
		}
	}
	return i, found
}

// searchSlots returns the index of the first of slots (of regs, in
// instance order) whose instance is at or after instance, and whether it
// is instance.
func searchSlots(regs []*registration, slots []uint32, instance string) (int, bool) {
	lo, hi := 0, len(slots)
	for lo < hi {
		if m := int(uint(lo+hi) >> 1); regs[slots[m]].instance < instance {
			lo = m + 1
		} else {
			hi = m
		}
	}
	return lo, lo < len(slots) && regs[slots[lo]].instance == instance
}

// fitsSlot reports whether a registration of instance, which none of
// slots (of regs, in instance order) has, belongs at index at.
func fitsSlot(regs []*registration, slots []uint32, at int, instance string) bool {
	return at <= len(slots) && (at == 0 || regs[slots[at-1]].instance < instance) && (at == len(slots) || instance < regs[slots[at]].instance)
}

// from returns the index of the candidate to look at first: the first
// after the candidate after when it is set (a later look, which finds its
// place even if it went away meanwhile), else the first of the instance
// when one is given, else 0.
func (cs candidates) from(instance string, after capRef) int {
	switch {
	case after.reg != nil:
		i, found := cs.search(after.key())
		if found {
			i++
		}
		return i
	case instance != "":
		// Registration ids are never empty: this is the first of the instance.
		i, _ := cs.search(refKey{instance: instance})
		return i
	}
	return 0
}

// instanceLocked returns the live registration of a type and instance, or
// nil.
func (r *Registry) instanceLocked(typ, instance string) *registration {
	if t := r.byType[typ]; t != nil {
		return t.lookup(instance)
	}
	return nil
}

// candidatesOfLocked returns the candidates of the parsed capability id.
func (r *Registry) candidatesOfLocked(id parsedID) candidates {
	if id.Plane == PlaneDomain {
		return candidates{id: id, refs: r.byProc[id.Path]}
	}
	if t := r.byType[id.Type]; t != nil {
		return candidates{id: id, regs: t.regs, slots: t.slotsOf(id.Name)}
	}
	return candidates{id: id}
}

// registered reports whether capID is the id of a capability of a live
// registration or of one a live tombstone remembers.
func (r *Registry) registered(capID string) bool {
	now := r.now()
	id, ok := parseCapabilityID(capID)
	r.mu.RLock()
	defer r.mu.RUnlock()
	return ok && r.candidatesOfLocked(id).len() > 0 || r.tombs.lists(capID, now)
}

// orderedLocked returns the live registrations in snapshot order. The
// slice is shared: callers must not change it. Its array is never changed
// once made (a change of the live set makes a new one), so a snapshot
// reads it on after releasing the lock.
func (r *Registry) orderedLocked() []*registration {
	if r.ordered == nil {
		for _, t := range r.byType {
			for _, slot := range t.order {
				r.ordered = append(r.ordered, t.regs[slot])
			}
		}
		slices.SortFunc(r.ordered, entryCmp)
	}
	return r.ordered
}

// insertLocked adds a registration that just went live to the indexes.
func (r *Registry) insertLocked(reg *registration) {
	r.ordered = nil
	if r.byType == nil {
		r.byID = make(map[string]*registration)
		r.byType = make(map[string]*typeIndex)
	}
	r.byID[reg.id] = reg
	t := r.byType[reg.typ]
	if t == nil {
		t = r.spareType // the index of the last type that emptied, keeping its sizes
		r.spareType = nil
		if t == nil {
			t = new(typeIndex)
		}
		r.byType[reg.typ] = t
	}
	t.add(reg)
	for i := reg.nView; i < len(reg.caps); i++ {
		if r.byProc == nil {
			r.byProc = make(map[string][]capRef)
		}
		c := capRef{reg, &reg.caps[i]}
		refs := r.byProc[c.cap.name]
		at, _ := candidates{id: parsedID{Plane: PlaneDomain}, refs: refs}.search(c.key())
		r.byProc[c.cap.name] = slices.Insert(refs, at, c)
	}
}

// removeLocked removes a registration that is going away from the
// indexes.
func (r *Registry) removeLocked(reg *registration) {
	r.ordered = nil
	delete(r.byID, reg.id)
	if t := r.byType[reg.typ]; t != nil && t.remove(reg) {
		delete(r.byType, reg.typ)
		r.spareType = t
	}
	for i := reg.nView; i < len(reg.caps); i++ {
		c := capRef{reg, &reg.caps[i]}
		refs := r.byProc[c.cap.name]
		if at, ok := (candidates{id: parsedID{Plane: PlaneDomain}, refs: refs}).search(c.key()); ok {
			refs = slices.Delete(refs, at, at+1)
		}
		if len(refs) > 0 {
			r.byProc[c.cap.name] = refs
		} else {
			delete(r.byProc, c.cap.name)
		}
	}
}

// capRef is a live capability among the candidates of its id.
type capRef struct {
	reg *registration
	cap *regCap
}

// refKey is where a candidate sorts among the candidates of its id: by
// instance, then registration id (semantics §9). Live candidates of one id
// never share a key: a registration has one capability of an id.
type refKey struct {
	instance, regID string
}

// less reports whether k sorts before o.
func (k refKey) less(o refKey) bool {
	return k.instance < o.instance || k.instance == o.instance && k.regID < o.regID
}

// instance is what an instance id selects and sorts candidates by: the
// component's instance for view capabilities, the reference's context
// instance for procedures.
func (c capRef) instance() string {
	if b := c.cap.bound; b != nil {
		return b.instance()
	}
	return c.reg.instance
}

// key returns the candidate's place in the order.
func (c capRef) key() refKey { return refKey{c.instance(), c.reg.id} }

// key returns the place of the registration's view capabilities among
// their candidates.
func (reg *registration) key() refKey { return refKey{reg.instance, reg.id} }

// tombstone remembers an unregistered registration for a while (semantics
// §8.3), so that late calls learn it unmounted: its ids and, for the
// consumer view, what its policies judged (each capability's kind,
// effect, meta and chain, the component's meta and internal metadata).
// A consumer gets COMPONENT_UNMOUNTED from a tombstone only if it could
// discover what the tombstone remembers (consumerView.sees and hides).
// Nothing a tombstone keeps can run the capability: no handler, When,
// precondition, Bind or executor.
type tombstone struct {
	regID    string
	meta     map[string]any // the component's meta, decoded
	internal map[string]any
	caps     []tombCap
	expires  time.Time
}

// tombCap is a capability of an unregistered registration.
type tombCap struct {
	id        string
	kind      Kind
	effect    Effect
	meta      map[string]any
	chain     []Policy
	discovers bool
}

// tombstoneOf returns the tombstone of reg.
func tombstoneOf(reg *registration) tombstone {
	ts := tombstone{regID: reg.id, meta: reg.metaMap, internal: reg.internal, caps: make([]tombCap, len(reg.caps))}
	for i := range reg.caps {
		rc := &reg.caps[i]
		ts.caps[i] = tombCap{id: rc.id, kind: rc.def.kind, effect: rc.def.effect, meta: rc.metaMap, chain: rc.chain, discovers: rc.discovers}
	}
	return ts
}

// capability returns the tombstone's capability with the id, or nil.
func (ts *tombstone) capability(capID string) *tombCap {
	for i := range ts.caps {
		if ts.caps[i].id == capID {
			return &ts.caps[i]
		}
	}
	return nil
}

// tombstones remembers recent unregistrations, bounded by size and TTL
// (semantics §8.3): a ring, oldest first from head, that grows to size.
// The TTL is constant, so they expire in the order they were added.
type tombstones struct {
	ring []tombstone
	head int // the oldest
	n    int // how many are kept
}

// at returns the i-th oldest tombstone.
func (t *tombstones) at(i int) *tombstone { return &t.ring[(t.head+i)%len(t.ring)] }

// len returns how many tombstones are kept.
func (t *tombstones) len() int { return t.n }

func (t *tombstones) add(ts tombstone, now time.Time, size int, ttl time.Duration) {
	ts.expires = now.Add(ttl)
	for t.n > 0 && (!t.at(0).expires.After(now) || t.n >= size) {
		*t.at(0) = tombstone{}
		t.head = (t.head + 1) % len(t.ring)
		t.n--
	}
	if t.n == len(t.ring) { // full, and below size: a larger ring
		grown := make([]tombstone, min(max(2*t.n, 4), size))
		for i := range t.n {
			grown[i] = *t.at(i)
		}
		t.ring, t.head = grown, 0
	}
	*t.at(t.n) = ts
	t.n++
}

// byRegistration returns a copy of the live tombstone of regID, if any.
func (t *tombstones) byRegistration(regID string, now time.Time) (tombstone, bool) {
	for i := range t.n {
		if ts := t.at(i); ts.regID == regID && ts.expires.After(now) {
			return *ts, true
		}
	}
	return tombstone{}, false
}

// lists reports whether a live tombstone lists the capability id.
func (t *tombstones) lists(capID string, now time.Time) bool {
	for i := range t.n {
		if ts := t.at(i); ts.expires.After(now) && ts.capability(capID) != nil {
			return true
		}
	}
	return false
}

// listing appends to out copies of the live tombstones that list the
// capability id.
func (t *tombstones) listing(out []tombstone, capID string, now time.Time) []tombstone {
	for i := range t.n {
		if ts := t.at(i); ts.expires.After(now) && ts.capability(capID) != nil {
			out = append(out, *ts)
		}
	}
	return out
}
