package surface

// hashIndex finds values by a 64-bit key hash: an open-addressing table
// with linear probing and backward-shift deletion. The hashes are seeded
// maphash values, uniform over 64 bits, so the low bits index the table
// directly; values whose hashes collide take separate slots, and a lookup
// asks the caller which of them it wants. The dedupe store finds its
// entries by idempotency key with one, and a component type's group its
// registrations by instance id. Not safe for concurrent use.
type hashIndex[T any] struct {
	slots []hashSlot[T] // a power of two, at most three quarters full
	n     int
}

type hashSlot[T any] struct {
	h uint64
	p *T // nil: empty
}

// find returns the value under hash h for which is reports true, or nil.
func (x *hashIndex[T]) find(h uint64, is func(*T) bool) *T {
	if len(x.slots) == 0 {
		return nil
	}
	mask := uint64(len(x.slots) - 1)
	for i := h & mask; ; i = (i + 1) & mask {
		s := &x.slots[i]
		if s.p == nil {
			return nil
		}
		if s.h == h && is(s.p) {
			return s.p
		}
	}
}

// add inserts p, which is absent, under hash h.
func (x *hashIndex[T]) add(p *T, h uint64) {
	if 4*(x.n+1) > 3*len(x.slots) {
		x.grow()
	}
	mask := uint64(len(x.slots) - 1)
	i := h & mask
	for x.slots[i].p != nil {
		i = (i + 1) & mask
	}
	x.slots[i] = hashSlot[T]{h, p}
	x.n++
}

// grow doubles the table (to 16 slots at first) and reinserts.
func (x *hashIndex[T]) grow() {
	old := x.slots
	x.slots = make([]hashSlot[T], max(16, 2*len(old)))
	mask := uint64(len(x.slots) - 1)
	for _, s := range old {
		if s.p == nil {
			continue
		}
		i := s.h & mask
		for x.slots[i].p != nil {
			i = (i + 1) & mask
		}
		x.slots[i] = s
	}
}

// remove deletes p, which is present under hash h, and shifts back the
// values after it that probed past its slot, so that no lookup stops
// early.
func (x *hashIndex[T]) remove(p *T, h uint64) {
	mask := uint64(len(x.slots) - 1)
	i := h & mask
	for x.slots[i].p != p {
		i = (i + 1) & mask
	}
	for j := i; ; {
		j = (j + 1) & mask
		s := x.slots[j]
		if s.p == nil {
			break
		}
		// The value at j stays unless its home slot k is outside (i, j]
		// (cyclically): then it probed past i and moves there.
		k := s.h & mask
		if i <= j && i < k && k <= j || i > j && (i < k || k <= j) {
			continue
		}
		x.slots[i], i = s, j
	}
	x.slots[i] = hashSlot[T]{}
	x.n--
}
