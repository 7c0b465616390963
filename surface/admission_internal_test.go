package surface

import (
	"slices"
	"testing"

	"pgregory.net/rapid"
)

// obsModel is the observation pool of semantics §7.2 written plainly:
// admit iff the consumer holds fewer than perConsumer and the total is
// under total; else queue if the consumer has fewer than queued waiters;
// else RATE_LIMITED. Each release admits the first waiter, in arrival
// order, whose consumer and the total are under their caps.
type obsModel struct {
	perConsumer, total, queued int
	running                    map[string]int
	inUse                      int
	waiters                    []modelWaiter
}

type modelWaiter struct {
	id       int
	consumer string
}

type admission int

const (
	admitted admission = iota
	waiting
	rejected
)

func (m *obsModel) admit(id int, c string) admission {
	if m.running[c] < m.perConsumer && m.inUse < m.total {
		m.running[c]++
		m.inUse++
		return admitted
	}
	if n := len(slices.DeleteFunc(slices.Clone(m.waiters), func(w modelWaiter) bool { return w.consumer != c })); n >= m.queued {
		return rejected
	}
	m.waiters = append(m.waiters, modelWaiter{id, c})
	return waiting
}

// release frees c's slot and returns the waiter it admits, or -1.
func (m *obsModel) release(c string) int {
	m.running[c]--
	m.inUse--
	for i, w := range m.waiters {
		if m.running[w.consumer] < m.perConsumer && m.inUse < m.total {
			m.waiters = slices.Delete(m.waiters, i, i+1)
			m.running[w.consumer]++
			m.inUse++
			return w.id
		}
	}
	return -1
}

func (m *obsModel) cancel(id int) {
	m.waiters = slices.DeleteFunc(m.waiters, func(w modelWaiter) bool { return w.id == id })
}

// AS-OBS-001, AS-OBS-002: property — observation admission answers every
// arrival (admitted, queued, RATE_LIMITED) and hands every released slot
// to the same waiter as the plain model of semantics §7.2, whatever the
// interleaving of arrivals, settlements and waiters giving up across
// consumers with independent per-consumer and total caps.
func TestObservationAdmissionMatchesModel_AS_OBS_001(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		lim := Limits{
			MaxConcurrentObservationsPerConsumer: rapid.IntRange(1, 3).Draw(rt, "perConsumer"),
			MaxConcurrentObservationsTotal:       rapid.IntRange(1, 5).Draw(rt, "total"),
			MaxQueuedObservationsPerConsumer:     rapid.IntRange(-1, 3).Draw(rt, "queued"),
		}
		r := New(&Options{Limits: lim})
		defer r.Close()
		lim = r.limits
		model := obsModel{perConsumer: lim.MaxConcurrentObservationsPerConsumer, total: lim.MaxConcurrentObservationsTotal,
			queued: lim.MaxQueuedObservationsPerConsumer, running: map[string]int{}}
		obs := &capDef{kind: KindObservation}
		type call struct {
			id       int
			consumer string
			w        *waiter // while queued
		}
		var running, queued []call
		next := 0
		for step := range rapid.IntRange(1, 200).Draw(rt, "steps") {
			switch op := rapid.IntRange(0, 5).Draw(rt, "op"); {
			case op <= 2: // an observation arrives
				c := rapid.SampledFrom([]string{"test:a", "test:b", "test:c"}).Draw(rt, "consumer")
				id := next
				next++
				w, e := r.admitObservation(c)
				got := admitted
				switch {
				case e != nil:
					got = rejected
					if e.Code != CodeRateLimited {
						rt.Fatalf("step %d: rejected with %s", step, e.Code)
					}
				case w != nil:
					got = waiting
				}
				if want := model.admit(id, c); got != want {
					rt.Fatalf("step %d: arrival of %s = %d, model says %d", step, c, got, want)
				}
				switch got {
				case admitted:
					running = append(running, call{id: id, consumer: c})
				case waiting:
					queued = append(queued, call{id: id, consumer: c, w: w})
				}
			case op <= 4 && len(running) > 0: // one settles and releases its slot
				k := rapid.IntRange(0, len(running)-1).Draw(rt, "running")
				done := running[k]
				running = slices.Delete(running, k, k+1)
				r.release(&attempt{cap: &regCap{def: obs}, admitted: true, consumerKey: done.consumer})
				want := model.release(done.consumer)
				got := -1
				for i, q := range queued {
					select {
					case <-q.w.ch:
						if got >= 0 {
							rt.Fatalf("step %d: one release admitted two waiters", step)
						}
						got = q.id
						running = append(running, call{id: q.id, consumer: q.consumer})
						queued = slices.Delete(queued, i, i+1)
					default:
					}
					if got >= 0 {
						break
					}
				}
				if got != want {
					rt.Fatalf("step %d: release by %s admitted %d, model says %d", step, done.consumer, got, want)
				}
			case len(queued) > 0: // a waiter gives up
				k := rapid.IntRange(0, len(queued)-1).Draw(rt, "queued")
				q := queued[k]
				queued = slices.Delete(queued, k, k+1)
				if !r.dropWaiter(nil, KindObservation, q.w) {
					rt.Fatalf("step %d: a waiter still queued was already admitted", step)
				}
				model.cancel(q.id)
			}
		}
	})
}

// AS-CONC-002: property — an instance's action queue admits one call at a
// time, queues up to the depth in arrival order, fails RATE_LIMITED
// beyond it, and hands each released slot to the oldest waiter still
// queued, whatever the interleaving of arrivals, settlements and waiters
// giving up (semantics §7.1).
func TestActionQueueMatchesModel_AS_CONC_002(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		r := New(&Options{Limits: Limits{ActionQueueDepth: rapid.IntRange(-1, 4).Draw(rt, "depth")}})
		defer r.Close()
		depth := r.limits.ActionQueueDepth
		var g queueGroup
		busy := false  // the model: one call running
		var fifo []int // the model: waiting call ids, oldest first
		waiters := map[int]*waiter{}
		next := 0
		for step := range rapid.IntRange(1, 200).Draw(rt, "steps") {
			switch op := rapid.IntRange(0, 5).Draw(rt, "op"); {
			case op <= 2: // a call arrives
				id := next
				next++
				w, e := r.admitGroup(&g)
				switch {
				case !busy:
					if w != nil || e != nil {
						rt.Fatalf("step %d: an idle instance did not admit the call", step)
					}
					busy = true
				case len(fifo) < depth:
					if w == nil || e != nil {
						rt.Fatalf("step %d: call %d not queued behind %d of %d", step, id, len(fifo), depth)
					}
					fifo = append(fifo, id)
					waiters[id] = w
				default:
					if e == nil || e.Code != CodeRateLimited || e.Details["reason"] != "queue-full" {
						rt.Fatalf("step %d: a full queue answered %v, %v", step, w, e)
					}
				}
			case op <= 4 && busy: // the running call settles
				g.release()
				if len(fifo) == 0 {
					busy = false
				} else {
					oldest := fifo[0]
					fifo = fifo[1:]
					select {
					case <-waiters[oldest].ch:
					default:
						rt.Fatalf("step %d: the slot did not go to the oldest waiter %d", step, oldest)
					}
					delete(waiters, oldest)
				}
				for id, w := range waiters {
					select {
					case <-w.ch:
						rt.Fatalf("step %d: waiter %d admitted out of turn", step, id)
					default:
					}
				}
			case len(fifo) > 0: // a waiter gives up
				k := rapid.IntRange(0, len(fifo)-1).Draw(rt, "waiter")
				id := fifo[k]
				fifo = slices.Delete(fifo, k, k+1)
				if !r.dropWaiter(&g, KindAction, waiters[id]) {
					rt.Fatalf("step %d: waiter %d was admitted while queued", step, id)
				}
				delete(waiters, id)
			}
		}
	})
}
