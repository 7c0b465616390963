package surface

// dedupeIndex finds dedupe entries by key hash: an open-addressing table
// with linear probing and backward-shift deletion, kept under the store's
// lock. Key hashes are seeded maphash values, uniform over 64 bits, so
// the low bits index the table directly; entries whose hashes collide
// take separate slots and lookups compare keys.
type dedupeIndex struct {
	slots []dedupeSlot // a power of two, at most three quarters full
	n     int
}

type dedupeSlot struct {
	h uint64
	e *dedupeEntry // nil: empty
}

// find returns the entry of key, whose hash is h, or nil.
func (x *dedupeIndex) find(key dedupeKey, h uint64) *dedupeEntry {
	if len(x.slots) == 0 {
		return nil
	}
	mask := uint64(len(x.slots) - 1)
	for i := h & mask; ; i = (i + 1) & mask {
		s := &x.slots[i]
		if s.e == nil {
			return nil
		}
		if s.h == h && s.e.key == key {
			return s.e
		}
	}
}

// add inserts e, whose key is absent, under hash h.
func (x *dedupeIndex) add(e *dedupeEntry, h uint64) {
	if 4*(x.n+1) > 3*len(x.slots) {
		x.grow()
	}
	mask := uint64(len(x.slots) - 1)
	i := h & mask
	for x.slots[i].e != nil {
		i = (i + 1) & mask
	}
	x.slots[i] = dedupeSlot{h, e}
	x.n++
}

// grow doubles the table (to 16 slots at first) and reinserts.
func (x *dedupeIndex) grow() {
	old := x.slots
	x.slots = make([]dedupeSlot, max(16, 2*len(old)))
	mask := uint64(len(x.slots) - 1)
	for _, s := range old {
		if s.e == nil {
			continue
		}
		i := s.h & mask
		for x.slots[i].e != nil {
			i = (i + 1) & mask
		}
		x.slots[i] = s
	}
}

// remove deletes e, whose hash is h, and shifts back the entries after
// it that probed past its slot, so that no lookup stops early.
func (x *dedupeIndex) remove(e *dedupeEntry, h uint64) {
	mask := uint64(len(x.slots) - 1)
	i := h & mask
	for x.slots[i].e != e {
		i = (i + 1) & mask
	}
	for j := i; ; {
		j = (j + 1) & mask
		s := x.slots[j]
		if s.e == nil {
			break
		}
		// The entry at j stays unless its home slot k is outside (i, j]
		// (cyclically): then it probed past i and moves there.
		k := s.h & mask
		if i <= j && i < k && k <= j || i > j && (i < k || k <= j) {
			continue
		}
		x.slots[i], i = s, j
	}
	x.slots[i] = dedupeSlot{}
	x.n--
}
