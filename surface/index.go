package surface

import (
	"cmp"
	"maps"
	"slices"
	"strings"
	"time"
)

// The registry's indexes of live registrations (Registry.byID, byType,
// byProc and ordered), guarded by Registry.mu.

// entryCmp orders registrations by priority desc, type asc, instance asc.
// Live registrations never compare equal.
func entryCmp(a, b *registration) int {
	return cmp.Or(cmp.Compare(b.priority, a.priority), strings.Compare(a.typ, b.typ), strings.Compare(a.instance, b.instance))
}

// instanceLocked returns the live registration of a type and instance, or
// nil.
func (r *Registry) instanceLocked(typ, instance string) *registration {
	return r.byType[typ][instance]
}

// registered reports whether capID is the id of a capability of a live
// registration or of one a live tombstone remembers.
func (r *Registry) registered(capID string) bool {
	now := r.now()
	r.mu.RLock()
	defer r.mu.RUnlock()
	return r.capIDs[capID] > 0 || r.tombs.lists(capID, now)
}

// orderedLocked returns the live registrations in snapshot order. The
// slice is shared: callers must not change it. Its array is never changed
// once made (a change of the live set makes a new one), so a snapshot
// reads it on after releasing the lock.
func (r *Registry) orderedLocked() []*registration {
	if r.ordered == nil {
		for _, instances := range r.byType {
			r.ordered = slices.AppendSeq(r.ordered, maps.Values(instances))
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
		r.capIDs = make(map[string]int)
		r.byType = make(map[string]map[string]*registration)
	}
	r.byID[reg.id] = reg
	for i := range reg.caps {
		r.capIDs[reg.caps[i].id]++
	}
	instances := r.byType[reg.typ]
	if instances == nil {
		instances = r.spareInstances // the map of the last type that emptied, keeping its size
		r.spareInstances = nil
		if instances == nil {
			instances = make(map[string]*registration)
		}
		r.byType[reg.typ] = instances
	}
	instances[reg.instance] = reg
	for _, rc := range reg.caps[reg.nView:] {
		if r.byProc == nil {
			r.byProc = make(map[string][]*registration)
		}
		r.byProc[rc.name] = append(r.byProc[rc.name], reg)
	}
}

// removeLocked removes a registration that is going away from the
// indexes.
func (r *Registry) removeLocked(reg *registration) {
	r.ordered = nil
	delete(r.byID, reg.id)
	for i := range reg.caps {
		decrement(r.capIDs, reg.caps[i].id)
	}
	if instances := r.byType[reg.typ]; instances != nil {
		delete(instances, reg.instance)
		if len(instances) == 0 {
			delete(r.byType, reg.typ)
			r.spareInstances = instances
		}
	}
	for _, rc := range reg.caps[reg.nView:] {
		refs := slices.DeleteFunc(r.byProc[rc.name], func(x *registration) bool { return x == reg })
		if len(refs) == 0 {
			delete(r.byProc, rc.name)
		} else {
			r.byProc[rc.name] = refs
		}
	}
}

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
