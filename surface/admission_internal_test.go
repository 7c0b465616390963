package surface

import (
	"context"
	"slices"
	"strings"
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
		lim = r.Limits()
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
				if !r.dropWaiter(&attempt{cap: &regCap{def: obs}}, q.w) {
					rt.Fatalf("step %d: a waiter still queued was already admitted", step)
				}
				model.cancel(q.id)
			}
		}
	})
}

// groupModel is the serialization groups of semantics §7.1 written
// plainly: a group runs up to max calls and queues up to depth more in
// arrival order, its settings fixed by the call that finds it idle;
// release hands the slot to the oldest waiter or frees it; a key group
// exists while a call holds or waits in it.
type groupModel struct {
	groups map[string]*modelGroup
}

type modelGroup struct {
	running, max, depth int
	fifo                []int
}

func (m *groupModel) arrive(group string, id, max, depth int) admission {
	g := m.groups[group]
	if g == nil {
		g = &modelGroup{}
		m.groups[group] = g
	}
	if g.running == 0 && len(g.fifo) == 0 {
		g.max, g.depth = max, depth
	}
	switch {
	case g.running < g.max:
		g.running++
		return admitted
	case len(g.fifo) < g.depth:
		g.fifo = append(g.fifo, id)
		return waiting
	}
	m.gc(group)
	return rejected
}

// release returns the waiter the slot goes to, or -1.
func (m *groupModel) release(group string) int {
	g := m.groups[group]
	if len(g.fifo) > 0 {
		id := g.fifo[0]
		g.fifo = g.fifo[1:]
		return id
	}
	g.running--
	m.gc(group)
	return -1
}

func (m *groupModel) cancel(group string, id int) {
	g := m.groups[group]
	g.fifo = slices.DeleteFunc(g.fifo, func(x int) bool { return x == id })
	m.gc(group)
}

// gc forgets an idle key group, as the registry drops it.
func (m *groupModel) gc(group string) {
	if g := m.groups[group]; strings.HasPrefix(group, "key:") && g.running == 0 && len(g.fifo) == 0 {
		delete(m.groups, group)
	}
}

type keyed struct {
	K string `json:"k"`
}

// AS-CONC-001, AS-CONC-002: property — the groups of every concurrency
// mode (instance, shared by two actions with different depths; capability;
// parallel; key, shared by two actions) admit, queue and refuse each
// arrival, and hand each released slot to the same waiter, as the plain
// model of semantics §7.1, whatever the interleaving of arrivals,
// settlements and waiters giving up; key groups exist exactly while a
// call holds or waits in them.
func TestGroupAdmissionMatchesModel_AS_CONC_001_002(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		r := New(&Options{Limits: Limits{ActionQueueDepth: rapid.IntRange(-1, 3).Draw(rt, "registryDepth")}})
		defer r.Close()
		exec := func(context.Context, *Call, keyed) (None, error) { return None{}, nil }
		act := func(c Concurrency[keyed]) Capability {
			return Action(ActionDef[keyed, None]{Description: "Acts", Effect: EffectLocalState, Execute: exec, Concurrency: c})
		}
		depthOf := func(name string) *int {
			if d := rapid.IntRange(-1, 3).Draw(rt, name); d >= 0 {
				return &d
			}
			return nil
		}
		byKey := func(in keyed) string { return in.K }
		comp := Component{Type: "t", Description: "T", Actions: map[string]Capability{
			"inst1": act(Concurrency[keyed]{}),
			"inst2": act(Concurrency[keyed]{Mode: ConcurrencyInstance, QueueDepth: depthOf("inst2Depth")}),
			"own":   act(Concurrency[keyed]{Mode: ConcurrencyCapability, QueueDepth: depthOf("ownDepth")}),
			"par":   act(Concurrency[keyed]{Mode: ConcurrencyParallel, Max: rapid.IntRange(1, 3).Draw(rt, "parMax"), QueueDepth: depthOf("parDepth")}),
			"key1":  act(Concurrency[keyed]{Mode: ConcurrencyKey, Key: byKey}),
			"key2":  act(Concurrency[keyed]{Mode: ConcurrencyKey, Key: byKey, QueueDepth: depthOf("key2Depth")}),
		}}
		h, err := r.Register(comp)
		if err != nil {
			rt.Fatal(err)
		}
		reg := h.reg
		type call struct {
			id    int
			group string
			a     *attempt
			w     *waiter
		}
		groupOf := func(rc *regCap, k string) string {
			switch rc.def.conc.mode {
			case ConcurrencyInstance:
				return "instance"
			case ConcurrencyKey:
				return "key:" + k
			}
			return "cap:" + rc.name
		}
		model := groupModel{groups: map[string]*modelGroup{}}
		var running, queued []call
		for step := range rapid.IntRange(1, 200).Draw(rt, "steps") {
			switch op := rapid.IntRange(0, 5).Draw(rt, "op"); {
			case op <= 2: // a call arrives
				rc := &reg.caps[rapid.IntRange(0, len(reg.caps)-1).Draw(rt, "capability")]
				k := rapid.SampledFrom([]string{"a", "b", "c"}).Draw(rt, "key")
				c := call{id: step, group: groupOf(rc, k), a: &attempt{reg: reg, cap: rc, eff: effective{in: &keyed{K: k}}}}
				depth := rc.def.conc.depth
				if depth < 0 {
					depth = r.Limits().ActionQueueDepth
				}
				w, e := r.admitCall(c.a)
				got := admitted
				switch {
				case e != nil:
					got = rejected
					if e.Code != CodeRateLimited || e.Details["reason"] != "queue-full" {
						rt.Fatalf("step %d: refused with %+v", step, e)
					}
				case w != nil:
					got = waiting
				}
				if want := model.arrive(c.group, c.id, rc.def.conc.max, depth); got != want {
					rt.Fatalf("step %d: %s arriving in %s = %d, model says %d", step, rc.name, c.group, got, want)
				}
				c.w = w
				switch got {
				case admitted:
					c.a.admitted = true
					running = append(running, c)
				case waiting:
					queued = append(queued, c)
				}
			case op <= 4 && len(running) > 0: // a running call settles
				k := rapid.IntRange(0, len(running)-1).Draw(rt, "running")
				done := running[k]
				running = slices.Delete(running, k, k+1)
				r.release(done.a)
				want := model.release(done.group)
				got := -1
				for i := 0; i < len(queued); i++ {
					select {
					case <-queued[i].w.ch:
						if got >= 0 {
							rt.Fatalf("step %d: one release admitted two waiters", step)
						}
						got = queued[i].id
						queued[i].a.admitted = true
						running = append(running, queued[i])
						queued = slices.Delete(queued, i, i+1)
						i--
					default:
					}
				}
				if got != want {
					rt.Fatalf("step %d: release in %s admitted %d, model says %d", step, done.group, got, want)
				}
			case len(queued) > 0: // a waiter gives up
				k := rapid.IntRange(0, len(queued)-1).Draw(rt, "queued")
				q := queued[k]
				queued = slices.Delete(queued, k, k+1)
				if !r.dropWaiter(q.a, q.w) {
					rt.Fatalf("step %d: waiter %d was admitted while queued", step, q.id)
				}
				model.cancel(q.group, q.id)
			}
			var live, want []string
			reg.keyed.mu.Lock()
			for k := range reg.keyed.m {
				live = append(live, "key:"+k)
			}
			reg.keyed.mu.Unlock()
			for g := range model.groups {
				if strings.HasPrefix(g, "key:") {
					want = append(want, g)
				}
			}
			slices.Sort(live)
			slices.Sort(want)
			if !slices.Equal(live, want) {
				rt.Fatalf("step %d: key groups %v, model %v", step, live, want)
			}
		}
	})
}
