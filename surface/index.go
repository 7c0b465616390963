package surface

import (
	"hash/maphash"
	"slices"
	"strings"
)

// The registry's indexes of live registrations, guarded by Registry.mu.

// typeGroup holds the live registrations of one component type.
type typeGroup struct {
	typ        string
	regs       []*registration         // unordered; registration.typeIdx is the position
	indexed    bool                    // byInstance is in use: the group outgrew a scan
	seed       maphash.Seed            // of byInstance's hashes
	byInstance hashIndex[registration] // by instance id
}

// scanInstances is the group size up to which an instance is found by a
// scan rather than the index.
const scanInstances = 8

// instance returns the live registration with the instance id, or nil.
func (g *typeGroup) instance(id string) *registration {
	reg, _ := g.lookup(id)
	return reg
}

// lookup is instance, and also returns the hash of id for add once the
// group is indexed (else 0), so that Register hashes the id once.
func (g *typeGroup) lookup(id string) (*registration, uint64) {
	if !g.indexed {
		for _, reg := range g.regs {
			if reg.instance == id {
				return reg, 0
			}
		}
		return nil, 0
	}
	h := maphash.String(g.seed, id)
	return g.byInstance.find(h, func(reg *registration) bool { return reg.instance == id }), h
}

// add adds reg; h is what lookup(reg.instance) returned, under the
// registry lock held since.
func (g *typeGroup) add(reg *registration, h uint64) {
	reg.typeIdx = int32(len(g.regs))
	g.regs = append(g.regs, reg)
	switch {
	case g.indexed:
		g.byInstance.add(reg, h)
	case len(g.regs) > scanInstances:
		g.indexed, g.seed = true, maphash.MakeSeed()
		for _, x := range g.regs {
			g.byInstance.add(x, maphash.String(g.seed, x.instance))
		}
	}
}

// remove swap-removes reg: the order of regs is irrelevant.
func (g *typeGroup) remove(reg *registration) {
	n := len(g.regs) - 1
	last := g.regs[n]
	g.regs[reg.typeIdx], last.typeIdx = last, reg.typeIdx
	g.regs[n] = nil
	g.regs = g.regs[:n]
	if g.indexed {
		g.byInstance.remove(reg, maphash.String(g.seed, reg.instance))
	}
}

// entryOrder keeps the live registrations in snapshot order (entryCmp)
// lazily, so registering and unregistering cost O(1) amortised whatever
// the registry's size: a reader sorts what was added since the last read
// and merges it in, in O(n + k log k).
type entryOrder struct {
	sorted []*registration // in entryCmp order; may hold unregistered ones
	added  []*registration // since the last read, unordered; may hold unregistered ones
	dead   int             // unregistered registrations in sorted and added
}

// entryCmp orders registrations by priority desc, type asc, instance asc.
// Live registrations never compare equal.
func entryCmp(a, b *registration) int {
	if a.priority != b.priority {
		if a.priority > b.priority {
			return -1
		}
		return 1
	}
	if a.typ != b.typ { // equal types usually share their bytes: a quick check
		return strings.Compare(a.typ, b.typ)
	}
	return strings.Compare(a.instance, b.instance)
}

func (o *entryOrder) add(reg *registration) { o.added = append(o.added, reg) }

// remove notes that a registration, already marked unregistered, left.
// Once the unregistered outnumber the live (plus a margin) both lists are
// compacted, so they hold at most about twice the live registrations.
func (o *entryOrder) remove() {
	o.dead++
	if live := len(o.sorted) + len(o.added) - o.dead; o.dead > live+32 {
		o.compact()
	}
}

func (o *entryOrder) compact() {
	gone := func(reg *registration) bool { return reg.status != Active }
	o.sorted = slices.DeleteFunc(o.sorted, gone) // clears the tail for the GC
	o.added = slices.DeleteFunc(o.added, gone)
	o.dead = 0
}

// live returns the live registrations in snapshot order. The slice
// belongs to the order: use it under the lock and do not keep it.
func (o *entryOrder) live() []*registration {
	if o.dead > 0 {
		o.compact()
	}
	if len(o.added) == 0 {
		return o.sorted
	}
	slices.SortFunc(o.added, entryCmp)
	n, m := len(o.sorted), len(o.added)
	o.sorted = slices.Grow(o.sorted, m)[:n+m]
	// Merge from the back, so sorted's own elements move at most once.
	i, j := n-1, m-1
	for k := n + m - 1; j >= 0; k-- {
		if i >= 0 && entryCmp(o.sorted[i], o.added[j]) > 0 {
			o.sorted[k] = o.sorted[i]
			i--
		} else {
			o.sorted[k] = o.added[j]
			j--
		}
	}
	clear(o.added)
	o.added = o.added[:0]
	return o.sorted
}

// reset forgets every registration.
func (o *entryOrder) reset() { *o = entryOrder{} }
