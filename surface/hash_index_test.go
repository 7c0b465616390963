package surface

import (
	"strconv"
	"testing"

	"pgregory.net/rapid"
)

// AS-IDENT-005: property — the index (here of dedupe entries) finds
// exactly the entries added and not removed, whatever the order of additions and removals. The
// hashes are drawn from a few values whose low bits often agree, so that
// entries share home slots, probe sequences wrap past the end of the
// table, and removals shift back entries that probed past them.
func TestHashIndexMatchesMap_AS_IDENT_005(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		var x hashIndex[dedupeEntry]
		model := map[dedupeKey]*dedupeEntry{}
		key := func(i int) dedupeKey {
			return dedupeKey{kind: "test", consumer: "c", invocationID: "k" + strconv.Itoa(i)}
		}
		hashOf := rapid.SampledFrom([]uint64{0, 1, 15, 16, 17, 31, 32, 1 << 40, 1<<40 | 15, ^uint64(0)})
		for range rapid.IntRange(1, 300).Draw(rt, "steps") {
			k := key(rapid.IntRange(0, 60).Draw(rt, "key"))
			if e, ok := model[k]; ok && rapid.Bool().Draw(rt, "remove") {
				x.remove(e, e.hash)
				delete(model, k)
			} else if !ok {
				e := &dedupeEntry{key: k, hash: hashOf.Draw(rt, "hash")}
				x.add(e, e.hash)
				model[k] = e
			}
			if x.n != len(model) {
				rt.Fatalf("index counts %d entries, holds %d", x.n, len(model))
			}
			if 4*x.n > 3*len(x.slots) {
				rt.Fatalf("%d entries in %d slots", x.n, len(x.slots))
			}
			for i := range 61 {
				k := key(i)
				want := model[k]
				var h uint64
				if want != nil {
					h = want.hash
				} else {
					h = hashOf.Draw(rt, "probe hash")
				}
				if got := x.find(h, func(e *dedupeEntry) bool { return e.key == k }); got != want {
					rt.Fatalf("find %s = %p, want %p", k.invocationID, got, want)
				}
			}
		}
	})
}
