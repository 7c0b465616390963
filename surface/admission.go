package surface

import (
	"context"
	"slices"
	"sync"
)

// waiter is an invocation queued for admission. ch is closed when it is
// admitted (the slot is handed to it).
type waiter struct {
	ch  chan struct{}
	key string // consumer key, for the observation pool
}

// obsPool bounds concurrent observations per consumer and in total, with
// one arrival-ordered wait list (semantics §7.2).
type obsPool struct {
	mu      sync.Mutex // guards the rest; taken without Registry.mu
	total   int
	running map[string]int // per consumer
	queued  map[string]int // per consumer
	waiters []*waiter
}

// admit runs phase 8: the serialization group of an action or procedure
// (semantics §7.1) or the observation pool (§7.2). A call that finds its
// group or the pool busy waits in FIFO order; the caller's context or
// Close end the wait. On success the caller must call release once.
func (r *Registry) admit(ctx context.Context, a *attempt) *Error {
	kind := a.cap.def.kind
	a.queued = true
	var w *waiter
	var e *Error
	if kind == KindObservation {
		w, e = r.admitObservation(a.consumerKey)
	} else {
		w, e = r.admitGroup(a.group())
	}
	if w == nil {
		a.admitted = e == nil
		return e
	}
	r.observeQueued(a) // observe: the call waits for a slot
	start := r.now()
	defer func() { a.queueWait = r.now().Sub(start) }()
	select {
	case <-w.ch:
		a.admitted = true
		r.observeAdmitted(a, start) // observe: admitted after waiting since start
		return nil
	case <-ctx.Done():
		e = NewError(CodeCancelled, "", nil)
	case <-r.closingCh:
		e = cancelledByClose()
	}
	// Leave the queue; if admission raced with the cancellation, give the
	// slot back.
	if admitted := !r.dropWaiter(a.group(), kind, w); admitted {
		a.admitted = true
		r.release(a)
	}
	return e
}

// release frees the admission slot taken by admit, handing it to the
// first eligible waiter.
func (r *Registry) release(a *attempt) {
	if !a.admitted {
		return
	}
	a.admitted = false
	if a.cap.def.kind != KindObservation {
		a.group().release()
		return
	}
	pool, key := &r.obs, a.consumerKey
	pool.mu.Lock()
	defer pool.mu.Unlock()
	pool.total--
	if pool.running[key]--; pool.running[key] == 0 {
		delete(pool.running, key)
	}
	// Admit the first waiter, in arrival order, whose consumer and the total
	// are under their caps.
	for i, w := range pool.waiters {
		if pool.running[w.key] < r.limits.MaxConcurrentObservationsPerConsumer && pool.total < r.limits.MaxConcurrentObservationsTotal {
			pool.waiters = slices.Delete(pool.waiters, i, i+1)
			if pool.queued[w.key]--; pool.queued[w.key] == 0 {
				delete(pool.queued, w.key)
			}
			pool.total++
			pool.running[w.key]++
			close(w.ch)
			break
		}
	}
}

// group is the serialization group of the call: one per component
// instance for actions, one per reference for procedures (semantics §7.1).
func (a *attempt) group() *queueGroup {
	if b := a.cap.bound; b != nil {
		return &b.group
	}
	return &a.reg.actions
}

// queueGroup is one serialization group: one call in flight and a FIFO
// of waiters.
type queueGroup struct {
	mu      sync.Mutex // guards the rest; taken without Registry.mu
	running bool
	waiters []*waiter
}

// release hands the group's slot to its first waiter, or frees it.
func (g *queueGroup) release() {
	g.mu.Lock()
	defer g.mu.Unlock()
	if len(g.waiters) > 0 {
		w := g.waiters[0]
		g.waiters = slices.Delete(g.waiters, 0, 1)
		close(w.ch)
	} else {
		g.running = false
	}
}

func (r *Registry) admitGroup(g *queueGroup) (*waiter, *Error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if !g.running {
		g.running = true
		return nil, nil
	}
	if len(g.waiters) >= r.limits.ActionQueueDepth {
		return nil, queueFull()
	}
	w := &waiter{ch: make(chan struct{})}
	g.waiters = append(g.waiters, w)
	return w, nil
}

func (r *Registry) admitObservation(key string) (*waiter, *Error) {
	pool := &r.obs
	pool.mu.Lock()
	defer pool.mu.Unlock()
	if pool.running[key] < r.limits.MaxConcurrentObservationsPerConsumer && pool.total < r.limits.MaxConcurrentObservationsTotal {
		if pool.running == nil {
			pool.running = make(map[string]int)
		}
		pool.total++
		pool.running[key]++
		return nil, nil
	}
	if pool.queued[key] >= r.limits.MaxQueuedObservationsPerConsumer {
		return nil, queueFull()
	}
	if pool.queued == nil {
		pool.queued = make(map[string]int)
	}
	pool.queued[key]++
	w := &waiter{ch: make(chan struct{}), key: key}
	pool.waiters = append(pool.waiters, w)
	return w, nil
}

// dropWaiter removes a waiter that gave up. It reports false if the
// waiter was already admitted (and so holds a slot).
func (r *Registry) dropWaiter(g *queueGroup, kind Kind, w *waiter) bool {
	if kind == KindObservation {
		r.obs.mu.Lock()
		defer r.obs.mu.Unlock()
		i := slices.Index(r.obs.waiters, w)
		if i < 0 {
			return false
		}
		r.obs.waiters = slices.Delete(r.obs.waiters, i, i+1)
		if r.obs.queued[w.key]--; r.obs.queued[w.key] == 0 {
			delete(r.obs.queued, w.key)
		}
		return true
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	i := slices.Index(g.waiters, w)
	if i < 0 {
		return false
	}
	g.waiters = slices.Delete(g.waiters, i, i+1)
	return true
}
