package surface

import (
	"context"
	"errors"
	"slices"
	"sync"
	"time"
)

// execution is one running handler. The first of the handler, the timer,
// the caller's context, an unmount or Close to settle it wins; the others
// find it settled.
type execution struct {
	mu      sync.Mutex
	settled bool
	done    chan struct{} // isolated handlers: closed by the winning settle
	out     any           // written by the winner, under mu
	err     *Error
	nav     bool
	hctx    *handlerCtx             // inline handlers
	cancel  context.CancelCauseFunc // isolated handlers
}

// settle records the outcome if nothing settled first.
func (x *execution) settle(out any, e *Error) bool {
	x.mu.Lock()
	defer x.mu.Unlock()
	if x.settled {
		return false
	}
	x.settled, x.out, x.err = true, out, e
	if x.done != nil {
		close(x.done)
	}
	return true
}

// outcome returns what settled the execution.
func (x *execution) outcome() (any, *Error, bool) {
	x.mu.Lock()
	defer x.mu.Unlock()
	return x.out, x.err, x.settled
}

// end cancels the handler's context with cause.
func (x *execution) end(cause error) {
	if x.hctx != nil {
		x.hctx.end(cause)
		return
	}
	x.cancel(cause)
}

// Causes of handler-context cancellation.
var (
	errUnmounted = errors.New("surface: the component was unregistered")
	errClosed    = errors.New("surface: the registry was closed")
	errTimedOut  = errors.New("surface: the invocation timed out")
	errSettled   = errors.New("surface: the invocation settled")
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

func queueFull() *Error {
	return NewError(RateLimited, msgQueueFull, map[string]any{"reason": "queue-full", "retryAfterMs": 250})
}

func cancelledByClose() *Error {
	return NewError(Cancelled, "The surface was closed.", nil).withRetry(RetryNo)
}

// admit runs phase 8: the per-instance action queue or the observation
// pool. On success the caller must call p.release once.
func (p *pipeline) admit(d *capDef) *Error {
	r := p.r
	p.queued = true
	var w *waiter
	var e *Error
	if d.kind == kindObservation {
		w, e = r.admitObservation(p.consumerKey)
	} else {
		w, e = r.admitGroup(p.group())
	}
	if w == nil {
		p.admitted = e == nil
		return e
	}
	p.observeQueued() // observe: the call waits for a slot
	closing := r.closing()
	p.waited = true
	start := r.now() // only a waiter has queue time to measure
	select {
	case <-w.ch:
		p.queueWait = r.now().Sub(start)
		p.admitted = true
		p.observeAdmitted() // observe: admitted after p.queueWait
		return nil
	case <-p.ctx.Done():
		e = NewError(Cancelled, "", nil)
	case <-closing:
		e = cancelledByClose()
	}
	// Leave the queue; if admission raced with the cancellation, give the
	// slot back.
	if admitted := !r.dropWaiter(p.group(), d.kind, w); admitted {
		p.admitted = true
		p.release(d)
	}
	p.queueWait = r.now().Sub(start)
	return e
}

// release frees the admission slot taken by admit, handing it to the
// first eligible waiter.
func (p *pipeline) release(d *capDef) {
	if !p.admitted {
		return
	}
	p.admitted = false
	r := p.r
	if d.kind != kindObservation {
		p.group().release()
		return
	}
	pool, key := &r.obs, p.consumerKey
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
func (p *pipeline) group() *queueGroup {
	if c := p.cap(); c.x.bound != nil {
		return &c.x.bound.group
	}
	return &p.reg.actions
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
func (r *Registry) dropWaiter(g *queueGroup, kind capKind, w *waiter) bool {
	if kind == kindObservation {
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

// timeout is the invocation's time budget: the caller's, else the
// capability's, else the limits' default for its kind.
func (p *pipeline) timeout(d *capDef) time.Duration {
	switch {
	case p.opts.Timeout > 0:
		return p.opts.Timeout
	case d.timeout > 0:
		return d.timeout
	case d.kind == kindObservation:
		return p.r.limits.ObservationTimeout
	case d.kind == kindProcedure:
		return p.r.limits.ProcedureTimeout
	}
	return p.r.limits.ActionTimeout
}

// execute runs phase 9: the guards, then the handler until the first
// settlement, on this goroutine or, with Options.IsolateHandlers, on its
// own.
func (p *pipeline) execute(d *capDef, call *Call, in any) (any, *Error) {
	r := p.r
	x := &p.exec
	x.nav = d.effect == Navigation
	var base context.Context
	if r.isolate { // made before the lock: deriving calls into ctx
		base, x.cancel = context.WithCancelCause(p.ctx)
		x.done = make(chan struct{})
	}
	// Under the registration's execution lock: an unmount or Close either
	// finds this execution in flight or is seen here (Close sets the flag
	// before it aborts each registration's executions).
	reg := p.reg
	reg.xmu.Lock()
	var guard *Error
	switch {
	case r.closedFlag.Load():
		guard = cancelledByClose()
	case reg.gone:
		guard = NewError(ComponentUnmounted, "", map[string]any{"phase": "mid-flight"})
	case p.ctx.Err() != nil:
		guard = NewError(Cancelled, "", nil)
	}
	if guard != nil {
		reg.xmu.Unlock()
		if x.cancel != nil {
			x.cancel(errSettled)
		}
		return nil, guard
	}
	timeout := p.timeout(d)
	p.budget = timeout
	if !r.isolate {
		// The context must be complete before an unmount can reach it.
		c := &p.hs.hctx
		x.hctx = c
		c.parent, c.p, c.timeout = p.ctx, p, timeout
	}
	reg.inflight = append(reg.inflight, x)
	if r.isolate {
		r.execWG.Add(1) // the handler's goroutine
	}
	reg.xmu.Unlock()
	if p.reserved != nil { // execution starts: the evidence is spent
		r.confirm.consume(p.reserved)
		p.consumed = true
	}
	p.observeExecuting() // observe: the handler or executor is called next

	// With the real clock, an invocation that neither queued nor ran user
	// code so far (policies, a precondition, the host context, a binding)
	// starts executing when it started, microseconds earlier: one clock
	// read fewer.
	start := p.start
	if !r.realClock || p.waited || p.pol != nil || r.hostCtx != nil || d.precondition != nil || d.kind == kindProcedure {
		start = r.now()
	}
	if r.isolate {
		p.executeIsolated(base, d, call, in, timeout)
		p.execution = r.now().Sub(start)
	} else {
		p.execution = p.executeInline(d, call, in, start)
	}
	p.executed = true

	reg.xmu.Lock()
	if i := slices.Index(reg.inflight, x); i >= 0 {
		reg.inflight = slices.Delete(reg.inflight, i, i+1)
	}
	if len(reg.inflight) == 0 && reg.drained != nil {
		close(reg.drained) // Close may be waiting
		reg.drained = nil
	}
	reg.xmu.Unlock()
	out, e, _ := x.outcome()
	return out, e
}

// executeInline calls the handler on this goroutine. Its return settles
// the invocation unless something settled it first; a return after the
// deadline or after the caller gave up settles TIMEOUT or CANCELLED, as
// the timer or the caller would have. It returns the execution time.
func (p *pipeline) executeInline(d *capDef, call *Call, in any, start time.Time) time.Duration {
	r, x, c := p.r, &p.exec, &p.hs.hctx
	clock := start
	if !r.realClock {
		clock = time.Now()
	}
	c.deadline = clock.Add(c.timeout)
	out, err := p.callUser(c, d, call, in)
	e := p.handlerOutcome(c, d, err)
	var returned time.Time
	if r.realClock {
		returned = r.clock.now()
		p.returned = returned
	} else {
		returned = time.Now() // deadlines are real time
	}
	c.end(errSettled)
	c.release()
	late := false
	if _, _, settled := x.outcome(); !settled {
		// The timer or the caller would have settled first.
		switch {
		case !returned.Before(c.deadline):
			out, e, late = nil, p.timeoutError(c.timeout), true
		case p.ctx.Err() != nil:
			out, e, late = nil, NewError(Cancelled, "", nil), true
		}
	}
	if !x.settle(out, e) || late {
		p.lateSettlement()
	}
	if r.realClock {
		return returned.Sub(start)
	}
	return r.now().Sub(start)
}

// executeIsolated runs the handler on its own goroutine and waits for the
// first settlement: the handler's, the timer's, the caller's or an
// unmount's.
func (p *pipeline) executeIsolated(base context.Context, d *capDef, call *Call, in any, timeout time.Duration) {
	x := &p.exec
	hctx, stop := context.WithTimeoutCause(base, timeout, errTimedOut)
	go p.runIsolated(hctx, d, call, in)
	timer := time.NewTimer(timeout)
	select {
	case <-x.done:
	case <-timer.C:
		x.settle(nil, p.timeoutError(timeout)) // hctx ends at the same deadline
	case <-p.ctx.Done():
		x.settle(nil, NewError(Cancelled, "", nil))
	}
	timer.Stop()
	<-x.done
	x.cancel(errSettled)
	stop()
}

// timeoutError is the TIMEOUT of this invocation: retryable iff the
// capability is idempotent.
func (p *pipeline) timeoutError(timeout time.Duration) *Error {
	idem := p.cap().def.idempotent
	te := NewError(Timeout, "", map[string]any{"timeoutMs": timeout.Milliseconds(), "idempotent": idem})
	if idem {
		te.Retry = RetryYes
	}
	return te
}

// runIsolated calls the handler and settles the execution if nothing
// settled it first; a later return is audited as late-settlement.
func (p *pipeline) runIsolated(hctx context.Context, d *capDef, call *Call, in any) {
	defer p.r.execWG.Done()
	out, err := p.callUser(hctx, d, call, in)
	if !p.exec.settle(out, p.handlerOutcome(hctx, d, err)) {
		p.lateSettlement()
	}
}

// callUser calls the handler, or the executor for a procedure.
func (p *pipeline) callUser(ctx context.Context, d *capDef, call *Call, in any) (any, error) {
	if d.kind == kindProcedure {
		return p.callExecutor(ctx, call, in)
	}
	return callHandler(ctx, d, call, in)
}

// handlerOutcome maps what the handler returned to the settlement error.
func (p *pipeline) handlerOutcome(hctx context.Context, d *capDef, err error) *Error {
	if err == nil {
		return nil
	}
	var ae *Error
	switch {
	case errors.As(err, &ae):
	case hctx.Err() != nil && context.Cause(hctx) == errTimedOut:
		// The handler gave up at its deadline, as the timer settles.
		return p.timeoutError(p.budget)
	case d.kind == kindProcedure:
		return p.transportError(err)
	case hctx.Err() != nil:
		// The handler gave up because its context ended (unmount of a
		// navigation, cancellation): the call was cancelled, not broken.
		return NewError(Cancelled, "", nil)
	}
	return p.userError(err, "handler")
}

// lateSettlement records a handler that returned after the invocation
// settled.
func (p *pipeline) lateSettlement() {
	r := p.r
	r.log.Warn("surface: handler returned after the invocation settled", "capabilityId", p.inv.CapabilityID, "invocationId", p.id)
	r.audit(AuditEvent{Type: AuditLateSettlement, CapabilityID: p.inv.CapabilityID, RegistrationID: p.reg.id, InvocationID: p.id})
}

func callHandler(ctx context.Context, d *capDef, call *Call, in any) (out any, err error) {
	defer func() {
		if rec := recover(); rec != nil {
			err = panicError{rec}
		}
	}()
	if d.kind == kindObservation {
		return d.read(ctx, call)
	}
	return d.execute(ctx, call, in)
}

// abortInflightLocked settles or aborts the running handlers of a
// registration that is going away, and stops later ones from starting.
// While handlers still run it returns a channel closed when the last one
// returns, for Close to wait on.
func (r *Registry) abortInflightLocked(reg *registration, closing bool) (drained chan struct{}) {
	reg.xmu.Lock()
	defer reg.xmu.Unlock()
	reg.gone = true
	if len(reg.inflight) > 0 {
		reg.drained = make(chan struct{})
		drained = reg.drained
	}
	for _, x := range reg.inflight {
		switch {
		case closing:
			x.settle(nil, cancelledByClose())
			x.end(errClosed)
		case x.nav:
			// Navigation routinely unmounts its own owner: only the
			// handler, the timer or the caller settle it.
			x.end(errUnmounted)
		default:
			x.settle(nil, NewError(ComponentUnmounted, "", map[string]any{"phase": "mid-flight"}))
			x.end(errUnmounted)
		}
	}
	return drained
}

// callExecutor runs a procedure through the installed executor.
func (p *pipeline) callExecutor(ctx context.Context, call *Call, in any) (out any, err error) {
	box := p.r.executor.Load()
	if box == nil {
		return nil, errors.New("surface: no procedure executor is installed")
	}
	defer func() {
		if rec := recover(); rec != nil {
			err = panicError{rec}
		}
	}()
	c := p.cap()
	raw, err := box.e.Execute(ctx, &ProcedureCall{
		ProcedureID: c.id, Path: c.name, Input: in.([]byte), InvocationID: p.id,
		Consumer: p.consumer, Host: call.Host, Confirmation: call.Confirmation,
	})
	if err != nil {
		return nil, err
	}
	if raw == nil {
		return nil, nil
	}
	return raw, nil
}

// transportError maps an executor failure that is not a *Error:
// EXECUTION_FAILED transport, retried after a delay when transient. The
// cause goes to the log only.
func (p *pipeline) transportError(err error) *Error {
	p.r.log.Error("surface: procedure call failed", "procedureId", p.inv.CapabilityID, "invocationId", p.id, "error", err)
	if IsTransient(err) {
		e := NewError(ExecutionFailed, "The domain service could not be reached; retry after details.retryAfterMs milliseconds.",
			map[string]any{"reason": "transport", "transient": true, "retryAfterMs": 1000})
		e.Retry = RetryAfterDelay
		return e
	}
	return NewError(ExecutionFailed, "The domain service failed; the cause was recorded for the operator.", map[string]any{"reason": "transport"})
}
