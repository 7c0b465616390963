package surface

import (
	"context"
	"encoding/json"
	"slices"
	"sync"
)

// ConcurrencyMode selects the serialization group the calls of an action
// or procedure reference queue in (semantics §7.1). Groups belong to one
// registration: they are never shared between components.
type ConcurrencyMode string

// Concurrency modes.
const (
	// ConcurrencyInstance: one queue per component instance, shared by
	// every capability of the instance in this mode. The default of
	// actions.
	ConcurrencyInstance ConcurrencyMode = "instance"
	// ConcurrencyCapability: one queue for the capability's own calls.
	// The default of procedure references.
	ConcurrencyCapability ConcurrencyMode = "capability"
	// ConcurrencyKey: one queue per key that Concurrency.Key computes from
	// the validated input, shared by the registration's capabilities in
	// this mode (calls about different records run side by side, calls
	// about one record in order).
	ConcurrencyKey ConcurrencyMode = "key"
	// ConcurrencyParallel: up to Concurrency.Max calls of the capability
	// at once; later ones queue.
	ConcurrencyParallel ConcurrencyMode = "parallel"
)

// Concurrency declares how the calls of an action or procedure reference
// are admitted (semantics §7.1). In a group, calls run up to its maximum
// at once (1 except in parallel mode) and the rest wait in arrival order,
// up to the queue depth; a call finding the queue full fails RATE_LIMITED
// (queue-full) without running. The zero value is the default: instance
// mode for actions, capability mode for procedure references, the
// registry's Limits.ActionQueueDepth.
//
// Settings are checked at Register: an unknown mode, Max < 1 in parallel
// mode or Max set in another, key mode without Key or Key in another, and
// a negative QueueDepth are *DefinitionError INVALID_DEFINITION. A group
// shared by several capabilities (instance and key modes) takes the
// settings of the call that finds it idle.
type Concurrency[In any] struct {
	// Mode selects the group. Empty means the kind's default.
	Mode ConcurrencyMode
	// Max is how many calls run at once in parallel mode.
	Max int
	// QueueDepth, when set, is how many calls may wait in the group,
	// overriding Limits.ActionQueueDepth; new(0) means none may wait.
	QueueDepth *int
	// Key computes the queue key of a call from its validated input (the
	// effective input, bound fields included, for procedures), in key
	// mode. It must be cheap and must not call back into the registry; a
	// panic fails the call EXECUTION_FAILED (handler-error).
	Key func(in In) string
}

// concurrency is the checked, untyped form of a Concurrency.
type concurrency struct {
	mode  ConcurrencyMode // never empty
	max   int             // 1 except in parallel mode
	depth int             // -1: Limits.ActionQueueDepth
	key   func(in any) (string, error)
}

// compileConcurrency checks c and resolves its defaults. decode turns the
// pipeline's input of the capability into In for the key function.
func compileConcurrency[In any](c Concurrency[In], dflt ConcurrencyMode, decode func(in any) (In, error)) (concurrency, *DefinitionError) {
	out := concurrency{mode: c.Mode, max: max(c.Max, 1), depth: -1} // Max is checked below: 0 outside parallel mode
	bad := func(msg string) (concurrency, *DefinitionError) {
		return concurrency{}, defErr(DefinitionInvalid, "concurrency", msg)
	}
	switch c.Mode {
	case "":
		out.mode = dflt
	case ConcurrencyInstance, ConcurrencyCapability, ConcurrencyKey, ConcurrencyParallel:
	default:
		return bad("mode must be instance, capability, key or parallel")
	}
	switch {
	case out.mode == ConcurrencyParallel && c.Max < 1:
		return bad("parallel mode needs Max of at least 1")
	case out.mode != ConcurrencyParallel && c.Max != 0:
		return bad("Max applies to parallel mode only")
	case out.mode == ConcurrencyKey && c.Key == nil:
		return bad("key mode needs a Key function")
	case out.mode != ConcurrencyKey && c.Key != nil:
		return bad("Key applies to key mode only")
	case c.QueueDepth != nil && *c.QueueDepth < 0:
		return bad("QueueDepth must not be negative")
	}
	if c.QueueDepth != nil {
		out.depth = *c.QueueDepth
	}
	if key := c.Key; key != nil {
		out.key = func(in any) (string, error) {
			v, err := decode(in)
			if err != nil {
				return "", err
			}
			return key(v), nil
		}
	}
	return out, nil
}

// decodeEffective decodes a procedure's effective input (canonical JSON)
// into In.
func decodeEffective[In any](in any) (In, error) {
	var v In
	raw, _ := in.([]byte)
	err := json.Unmarshal(raw, &v)
	return v, err
}

// staticGroup returns the group of a capability whose group does not
// depend on the call: the instance's, or one of its own. Key mode has
// none (nil): its groups are made per key.
func (reg *registration) staticGroup(d *capDef) *queueGroup {
	switch d.conc.mode {
	case ConcurrencyInstance:
		return &reg.actions
	case ConcurrencyKey:
		return nil
	}
	return new(queueGroup)
}

// waiter is an invocation queued for admission. ch is closed when it is
// admitted (the slot is handed to it).
type waiter struct {
	ch  chan struct{}
	key string // consumer key, for the observation pool
}

// obsPool bounds concurrent observations per consumer and in total, with
// one arrival-ordered wait list (semantics §7.2).
type obsPool struct {
	mu      sync.Mutex // guards the rest
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
	a.queued = true
	var w *waiter
	var e *Error
	if a.cap.def.kind == KindObservation {
		w, e = r.admitObservation(a.consumerKey)
	} else {
		w, e = r.admitCall(a)
	}
	if w == nil {
		a.admitted = e == nil
		return e
	}
	r.observePhase(a, PhaseEvent{Phase: PhaseQueued}) // observe: the call waits for a slot
	start := r.now()
	defer func() { a.queueWait = r.now().Sub(start) }()
	select {
	case <-w.ch:
		a.admitted = true
		r.observePhase(a, PhaseEvent{Phase: PhaseAdmitted, QueueWait: r.now().Sub(start)}) // observe: admitted after waiting
		return nil
	case <-ctx.Done():
		e = NewError(CodeCancelled, "", nil)
	case <-r.closingCh:
		e = cancelledByClose()
	}
	// Leave the queue; if admission raced with the cancellation, give the
	// slot back.
	if admitted := !r.dropWaiter(a, w); admitted {
		a.admitted = true
		r.release(a)
	}
	return e
}

// admitCall joins the call's group and takes a slot or a place in its
// queue. A key group is joined for as long as the call holds a slot or
// waits.
func (r *Registry) admitCall(a *attempt) (*waiter, *Error) {
	d := a.cap.def
	g := a.cap.group
	if g == nil { // key mode
		key, e := r.groupKey(a)
		if e != nil {
			return nil, e
		}
		g = a.reg.keyed.join(key)
	}
	depth := d.conc.depth
	if depth < 0 {
		depth = r.opts.Limits.ActionQueueDepth
	}
	w, e := g.admit(d.conc.max, depth)
	if e != nil {
		a.reg.keyed.leave(g)
		return nil, e
	}
	a.group = g
	return w, nil
}

// groupKey computes a key-mode call's queue key; the key function is user
// code, so a panic (or an input that does not decode) fails the call.
func (r *Registry) groupKey(a *attempt) (key string, e *Error) {
	defer r.recoverAs(&e, handlerError, "the concurrency key", a.inv.CapabilityID)
	key, err := a.cap.def.conc.key(a.eff.in)
	if err != nil {
		r.opts.Logger.Error("surface: the concurrency key could not read the input", "capabilityId", a.inv.CapabilityID, "error", err)
		return "", handlerError()
	}
	return key, nil
}

// release frees the admission slot taken by admit, handing it to the
// first eligible waiter.
func (r *Registry) release(a *attempt) {
	if !a.admitted {
		return
	}
	a.admitted = false
	if a.cap.def.kind != KindObservation {
		a.group.handOff()
		a.reg.keyed.leave(a.group)
		return
	}
	pool, key := &r.obs, a.consumerKey
	pool.mu.Lock()
	defer pool.mu.Unlock()
	pool.total--
	decrement(pool.running, key)
	// Admit the first waiter, in arrival order, whose consumer and the total
	// are under their caps.
	for i, w := range pool.waiters {
		if pool.running[w.key] < r.opts.Limits.MaxConcurrentObservationsPerConsumer && pool.total < r.opts.Limits.MaxConcurrentObservationsTotal {
			pool.waiters = slices.Delete(pool.waiters, i, i+1)
			decrement(pool.queued, w.key)
			pool.total++
			pool.running[w.key]++
			close(w.ch)
			break
		}
	}
}

// queueGroup is one serialization group: up to max calls running and a
// FIFO of waiters.
type queueGroup struct {
	mu         sync.Mutex // guards running, max, depth and waiters
	running    int
	max, depth int // fixed by the arrival that finds the group idle
	waiters    []*waiter

	// Key groups only: made by the first call with the key, dropped when
	// the last leaves. keyed and key never change; refs is guarded by the
	// registration's keyedGroups.mu.
	keyed bool
	key   string
	refs  int
}

// admit takes a slot, or a place in the queue (a waiter to wait on), or
// fails queue-full. The first arrival at an idle group fixes its settings.
func (g *queueGroup) admit(max, depth int) (*waiter, *Error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.running == 0 && len(g.waiters) == 0 {
		g.max, g.depth = max, depth
	}
	if g.running < g.max {
		g.running++
		return nil, nil
	}
	if len(g.waiters) >= g.depth {
		return nil, queueFull()
	}
	w := &waiter{ch: make(chan struct{})}
	g.waiters = append(g.waiters, w)
	return w, nil
}

// handOff hands a slot to the first waiter (the running count stays), or
// frees it.
func (g *queueGroup) handOff() {
	g.mu.Lock()
	defer g.mu.Unlock()
	if len(g.waiters) > 0 {
		close(g.waiters[0].ch)
		g.waiters = slices.Delete(g.waiters, 0, 1)
	} else {
		g.running--
	}
}

// drop removes a waiter that gave up. It reports false if the waiter was
// already admitted (and so holds a slot).
func (g *queueGroup) drop(w *waiter) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	i := slices.Index(g.waiters, w)
	if i < 0 {
		return false
	}
	g.waiters = slices.Delete(g.waiters, i, i+1)
	return true
}

// keyedGroups are a registration's key-mode groups, by key.
type keyedGroups struct {
	mu sync.Mutex
	m  map[string]*queueGroup
}

// join returns the group of key, made if needed, counting the caller in.
func (k *keyedGroups) join(key string) *queueGroup {
	k.mu.Lock()
	defer k.mu.Unlock()
	g := k.m[key]
	if g == nil {
		if k.m == nil {
			k.m = make(map[string]*queueGroup)
		}
		g = &queueGroup{keyed: true, key: key}
		k.m[key] = g
	}
	g.refs++
	return g
}

// leave counts a caller of g out; a key group nobody is in is dropped.
// Other groups are left alone.
func (k *keyedGroups) leave(g *queueGroup) {
	if !g.keyed {
		return
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	if g.refs--; g.refs == 0 {
		delete(k.m, g.key)
	}
}

func (r *Registry) admitObservation(key string) (*waiter, *Error) {
	pool := &r.obs
	pool.mu.Lock()
	defer pool.mu.Unlock()
	if pool.running[key] < r.opts.Limits.MaxConcurrentObservationsPerConsumer && pool.total < r.opts.Limits.MaxConcurrentObservationsTotal {
		if pool.running == nil {
			pool.running = make(map[string]int)
		}
		pool.total++
		pool.running[key]++
		return nil, nil
	}
	if pool.queued[key] >= r.opts.Limits.MaxQueuedObservationsPerConsumer {
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

// dropWaiter removes a waiter of a that gave up. It reports false if the
// waiter was already admitted (and so holds a slot).
func (r *Registry) dropWaiter(a *attempt, w *waiter) bool {
	if a.cap.def.kind != KindObservation {
		if !a.group.drop(w) {
			return false
		}
		a.reg.keyed.leave(a.group)
		return true
	}
	r.obs.mu.Lock()
	defer r.obs.mu.Unlock()
	i := slices.Index(r.obs.waiters, w)
	if i < 0 {
		return false
	}
	r.obs.waiters = slices.Delete(r.obs.waiters, i, i+1)
	decrement(r.obs.queued, w.key)
	return true
}

// decrement counts k down in m, dropping it at zero.
func decrement(m map[string]int, k string) {
	if m[k]--; m[k] <= 0 {
		delete(m, k)
	}
}
