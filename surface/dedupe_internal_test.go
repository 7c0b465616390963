package surface

import (
	"slices"
	"strconv"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"pgregory.net/rapid"
)

// dedupeModel is semantics §6 written as plainly as possible: entries in
// insertion order; on each begin, prune the expired terminal entries, then
// evict the oldest while over size, stopping at one in flight, then look
// the key up.
type dedupeModel struct {
	size    int
	entries []modelEntry
}

type modelEntry struct {
	key      string
	fp       uint64
	terminal bool
	expires  time.Time
}

func (m *dedupeModel) begin(key string, fp uint64, now time.Time) dedupeHit {
	m.entries = slices.DeleteFunc(m.entries, func(e modelEntry) bool { return e.terminal && !e.expires.After(now) })
	for len(m.entries) > m.size && m.entries[0].terminal {
		m.entries = m.entries[1:]
	}
	i := slices.IndexFunc(m.entries, func(e modelEntry) bool { return e.key == key })
	switch {
	case i < 0:
		m.entries = append(m.entries, modelEntry{key: key, fp: fp})
		return dedupeMiss
	case m.entries[i].fp != fp:
		return dedupeConflict
	case m.entries[i].terminal:
		return dedupeReplay
	}
	return dedupeJoin
}

func (m *dedupeModel) finish(key string, cache bool, now time.Time, ttl time.Duration) {
	i := slices.IndexFunc(m.entries, func(e modelEntry) bool { return e.key == key && !e.terminal })
	if !cache {
		m.entries = slices.Delete(m.entries, i, i+1)
		return
	}
	m.entries[i].terminal, m.entries[i].expires = true, now.Add(ttl)
}

// AS-BOUND-002, AS-IDENT-005: property — the dedupe cache answers every
// lookup exactly as the plain model of semantics §6 does (miss, join,
// replay or conflict), whatever the interleaving of new keys, retries
// with the same or another request, settlements cached or not, and time
// passing; a replay returns the result stored for its own key.
func TestDedupeMatchesModel_AS_BOUND_002(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		size := rapid.IntRange(1, 12).Draw(rt, "size")
		c := newDedupeCache(size)
		model := dedupeModel{size: size}
		now := time.Unix(0, 0)
		const ttl = time.Minute
		inflight := map[string]*dedupeEntry{}
		var keys []string // in flight, in the order they began
		for step := range rapid.IntRange(1, 400).Draw(rt, "steps") {
			switch op := rapid.IntRange(0, 9).Draw(rt, "op"); {
			case op <= 4: // begin
				key := "k" + strconv.Itoa(rapid.IntRange(0, 3*size).Draw(rt, "key"))
				fp := uint64(rapid.IntRange(1, 2).Draw(rt, "fp"))
				dk := dedupeKey{kind: "test", consumer: "c", invocationID: key}
				e, hit, _ := c.begin(dk, fp, now)
				if want := model.begin(key, fp, now); hit != want {
					rt.Fatalf("step %d: begin %s (fp %d) = %d, model says %d", step, key, fp, hit, want)
				}
				switch hit {
				case dedupeMiss:
					inflight[key] = e
					keys = append(keys, key)
				case dedupeReplay:
					if e.result.InvocationID != key {
						rt.Fatalf("replay of %s got the result of %s", key, e.result.InvocationID)
					}
				}
			case op <= 7 && len(keys) > 0: // finish one in flight
				k := rapid.IntRange(0, len(keys)-1).Draw(rt, "flight")
				key := keys[k]
				keys = slices.Delete(keys, k, k+1)
				cache := rapid.IntRange(0, 3).Draw(rt, "cache") > 0
				c.finish(inflight[key], Result{InvocationID: key}, cache, now, ttl)
				delete(inflight, key)
				model.finish(key, cache, now, ttl)
			default: // time passes
				now = now.Add(time.Duration(rapid.IntRange(0, 40).Draw(rt, "seconds")) * time.Second)
			}
		}
	})
}

// AS-IDENT-001: joiners racing the settlement of the call they join:
// whichever order they take, every joiner is woken (the bubble reports a
// joiner left waiting as a deadlock) and reads the settled result, and an
// uncached settlement leaves the key free for a new attempt.
func TestDedupeJoinRacesSettlement_AS_IDENT_001(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := newDedupeCache(4)
		now := time.Unix(0, 0)
		for round := range 400 {
			id := "k" + strconv.Itoa(round)
			dk := dedupeKey{kind: "test", consumer: "c", invocationID: id}
			e, hit, _ := c.begin(dk, 1, now)
			if hit != dedupeMiss {
				t.Fatalf("round %d: first begin = %d, want a miss", round, hit)
			}
			cache := round%3 != 0
			want := Result{InvocationID: id, Status: "ok"}
			var wg sync.WaitGroup
			got := make([]string, 8)
			for j := range got {
				wg.Go(func() {
					je, hit, done := c.begin(dk, 1, now)
					switch hit {
					case dedupeJoin:
						<-done
						got[j] = je.result.InvocationID
					case dedupeReplay:
						got[j] = je.result.InvocationID
					case dedupeMiss: // the uncached settlement came first
						c.finish(je, Result{InvocationID: id}, false, now, time.Minute)
						got[j] = id
					default:
						got[j] = "conflict"
					}
				})
			}
			wg.Go(func() { c.finish(e, want, cache, now, time.Minute) })
			wg.Wait()
			for j, g := range got {
				if g != id {
					t.Fatalf("round %d (cached %v): joiner %d read %q, want %q", round, cache, j, g, id)
				}
			}
		}
	})
}

// AS-IDENT-001, AS-BOUND-002: property — with several consumers using the
// same invocation ids (two of them with the same "kind:id" text), the
// cache still answers as the model does for the key (consumer, id): one
// FIFO bound across consumers, each consumer's keys its own, a replay
// getting the result stored for its own consumer and id; and a consumer
// is forgotten with its last key.
func TestDedupeConsumersMatchModel_AS_IDENT_001(t *testing.T) {
	consumers := []consumerID{{"test", "c"}, {"agent", "c"}, {"a", "b:c"}, {"a:b", "c"}}
	rapid.Check(t, func(rt *rapid.T) {
		size := rapid.IntRange(1, 8).Draw(rt, "size")
		c := newDedupeCache(size)
		model := dedupeModel{size: size}
		now := time.Unix(0, 0)
		const ttl = time.Minute
		inflight := map[string]*dedupeEntry{}
		var keys []string // in flight, in the order they began
		for step := range rapid.IntRange(1, 300).Draw(rt, "steps") {
			switch op := rapid.IntRange(0, 9).Draw(rt, "op"); {
			case op <= 4: // begin
				who := rapid.IntRange(0, len(consumers)-1).Draw(rt, "consumer")
				id := "k" + strconv.Itoa(rapid.IntRange(0, 2*size).Draw(rt, "key"))
				key := strconv.Itoa(who) + " " + id
				fp := uint64(rapid.IntRange(1, 2).Draw(rt, "fp"))
				cid := consumers[who]
				e, hit, _ := c.begin(dedupeKey{kind: cid.kind, consumer: cid.id, invocationID: id}, fp, now)
				if want := model.begin(key, fp, now); hit != want {
					rt.Fatalf("step %d: begin %s (fp %d) = %d, model says %d", step, key, fp, hit, want)
				}
				switch hit {
				case dedupeMiss:
					if want := (Consumer{Kind: cid.kind, ID: cid.id}).Key(); e.owner.key != want {
						rt.Fatalf("step %d: consumer key %q, want %q", step, e.owner.key, want)
					}
					inflight[key] = e
					keys = append(keys, key)
				case dedupeReplay:
					if e.result.InvocationID != key {
						rt.Fatalf("replay of %s got the result of %s", key, e.result.InvocationID)
					}
				}
			case op <= 7 && len(keys) > 0: // finish one in flight
				k := rapid.IntRange(0, len(keys)-1).Draw(rt, "flight")
				key := keys[k]
				keys = slices.Delete(keys, k, k+1)
				cache := rapid.IntRange(0, 3).Draw(rt, "cache") > 0
				c.finish(inflight[key], Result{InvocationID: key}, cache, now, ttl)
				delete(inflight, key)
				model.finish(key, cache, now, ttl)
			default: // time passes
				now = now.Add(time.Duration(rapid.IntRange(0, 40).Draw(rt, "seconds")) * time.Second)
			}
			owners := map[string]bool{}
			for _, e := range model.entries {
				owners[e.key[:1]] = true
			}
			if c.len() != len(model.entries) || len(c.consumers) != len(owners) {
				rt.Fatalf("step %d: %d entries of %d consumers, model has %d of %d", step, c.len(), len(c.consumers), len(model.entries), len(owners))
			}
		}
	})
}
