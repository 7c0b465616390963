package surface

import (
	"context"
	"errors"
	"slices"
	"sync"
	"time"
)

// errTimedOut is the cause of a handler context that reached its
// deadline. An unmount, Close or the settlement cancel it plainly
// (context.Canceled); the settlement says why.
var errTimedOut = errors.New("surface: the invocation timed out")

// execution is one running handler. The first of the handler, the timer,
// the caller's context, an unmount or Close to settle it wins; the others
// find it settled.
type execution struct {
	cancel context.CancelFunc // ends the handler's context
	nav    bool               // a navigation: an unmount does not settle it

	mu      sync.Mutex
	settled bool
	done    chan struct{} // isolated handlers: closed by the winning settle
	out     any
	err     *Error
}

// settle records the outcome if nothing settled first, and reports
// whether it did.
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

// execute runs phase 9: the guards (semantics §7.3), then the handler
// with a context that ends at the deadline, on the caller's cancellation,
// on unmount or Close, until the first settlement. The handler runs on
// this goroutine or, with Options.IsolateHandlers, on its own.
//
// The handler's context is one standard layer over ctx: its deadline
// (cause errTimedOut) is what handlers and the clients they call see as
// ctx.Deadline(); an unmount or Close cancels it with its CancelFunc. A
// navigation's has a second layer for the unmount to cancel: an unmount
// does not settle a navigation, so the deadline it may still reach must
// keep its cause (semantics §7.3: hung navigation still times out).
func (r *Registry) execute(ctx context.Context, a *attempt) (any, *Error) {
	timeout := a.budget(r)
	start := r.now()
	a.execAt = start.Sub(a.start)
	deadline := start.Add(timeout)
	if r.opts.Now != nil { // a clock of the application's: deadlines run on the runtime's
		deadline = time.Now().Add(timeout)
	}
	timed, cancel := context.WithDeadlineCause(ctx, deadline, errTimedOut)
	defer cancel()
	hctx := timed
	x := &a.exec
	x.cancel, x.nav = cancel, a.cap.def.effect == EffectNavigation
	if x.nav {
		var unmount context.CancelFunc
		hctx, unmount = context.WithCancel(timed)
		defer unmount()
		x.cancel = unmount
	}
	if r.opts.IsolateHandlers {
		x.done = make(chan struct{})
	}
	if e := r.startExecution(ctx, a.reg, x); e != nil {
		return nil, e
	}
	defer r.endExecution(a.reg, x)
	if a.evidence != nil { // execution starts: the evidence is spent
		r.confirm.consume(ctx, a.evidence, a.id())
		a.consumed = true
	}
	if a.grant != nil { // … or the use of the grant
		r.grants.spend(ctx, a)
		a.consumed = true
	}
	a.executed = true
	r.observePhase(a, PhaseEvent{Phase: PhaseExecuting}) // observe: the handler or executor is called next
	if r.opts.IsolateHandlers {
		r.runIsolated(ctx, hctx, a, x, timeout)
	} else {
		r.runInline(ctx, timed, hctx, a, x, timeout)
	}
	out, e, _ := x.outcome()
	return out, e
}

// startExecution checks the guards and records x as in flight, under the
// registration's execution lock: an unmount or Close either finds x in
// flight or is seen here (Close closes closingCh before it aborts each
// registration's executions).
func (r *Registry) startExecution(ctx context.Context, reg *registration, x *execution) *Error {
	reg.xmu.Lock()
	defer reg.xmu.Unlock()
	switch {
	case r.closing():
		return cancelledByClose()
	case reg.gone:
		return NewError(CodeComponentUnmounted, "", map[string]any{"phase": "mid-flight"})
	case ctx.Err() != nil:
		return NewError(CodeCancelled, "", nil)
	}
	reg.inflight = append(reg.inflight, x)
	if r.opts.IsolateHandlers {
		r.execWG.Add(1) // the handler's goroutine, which Close waits for
	}
	return nil
}

// endExecution removes x from the in-flight executions, waking Close if it
// waits for the last one.
func (r *Registry) endExecution(reg *registration, x *execution) {
	reg.xmu.Lock()
	defer reg.xmu.Unlock()
	if i := slices.Index(reg.inflight, x); i >= 0 {
		reg.inflight = slices.Delete(reg.inflight, i, i+1)
	}
	if len(reg.inflight) == 0 && reg.drained != nil {
		close(reg.drained)
		reg.drained = nil
	}
}

// budget is the invocation's time budget: the caller's, else the
// capability's, else the limits' default for its kind.
func (a *attempt) budget(r *Registry) time.Duration {
	d := a.cap.def
	switch {
	case a.timeout > 0:
		return a.timeout
	case d.timeout > 0:
		return d.timeout
	case d.kind == KindObservation:
		return r.opts.Limits.ObservationTimeout
	case d.kind == KindProcedure:
		return r.opts.Limits.ProcedureTimeout
	}
	return r.opts.Limits.ActionTimeout
}

// runInline calls the handler on this goroutine, with hctx. Its return
// settles the invocation unless something settled it first; a return
// after the deadline (timed records it) or after the caller gave up
// settles TIMEOUT or CANCELLED, as the timer or the caller would have,
// and is audited as late.
func (r *Registry) runInline(ctx, timed, hctx context.Context, a *attempt, x *execution, timeout time.Duration) {
	out, e := r.callHandler(hctx, a)
	late := false
	if _, _, settled := x.outcome(); !settled {
		switch {
		case context.Cause(timed) == errTimedOut:
			out, e, late = nil, a.timeoutError(timeout), true
		case ctx.Err() != nil:
			out, e, late = nil, NewError(CodeCancelled, "", nil), true
		}
	}
	if !x.settle(out, e) || late {
		r.lateSettlement(a)
	}
}

// runIsolated runs the handler on its own goroutine and waits for the
// first settlement: the handler's, the timer's, the caller's or an
// unmount's. A handler returning later is only audited.
func (r *Registry) runIsolated(ctx, hctx context.Context, a *attempt, x *execution, timeout time.Duration) {
	go func() {
		defer r.execWG.Done()
		if !x.settle(r.callHandler(hctx, a)) {
			r.lateSettlement(a)
		}
	}()
	timer := time.NewTimer(timeout)
	defer timer.Stop()
	select {
	case <-x.done:
	case <-timer.C:
		x.settle(nil, a.timeoutError(timeout)) // hctx ends at the same deadline
	case <-ctx.Done():
		x.settle(nil, NewError(CodeCancelled, "", nil))
	}
	<-x.done
}

// callHandler calls the handler, or the executor of a procedure, and maps
// what it returned. It never panics: a panic in the handler, or in the
// methods of the error it returned, is EXECUTION_FAILED handler-error
// (transport for a procedure).
func (r *Registry) callHandler(hctx context.Context, a *attempt) (out any, e *Error) {
	defer func() {
		if rec := recover(); rec != nil {
			if a.cap.def.kind == KindProcedure {
				out, e = nil, r.transportError(a, panicError{rec})
				return
			}
			r.logPanic("the handler", a.inv.CapabilityID, rec)
			out, e = nil, handlerError()
		}
	}()
	d := a.cap.def
	var err error
	switch d.kind {
	case KindObservation:
		out, err = d.read(hctx, &a.call)
	case KindAction:
		out, err = d.execute(hctx, &a.call, a.eff.in)
	default:
		out, err = r.callExecutor(hctx, a)
	}
	if err != nil {
		return nil, r.handlerFailure(hctx, a, err)
	}
	return out, nil
}

// handlerFailure maps an error a handler returned: its *Error, TIMEOUT or
// CANCELLED when it gave up because its context ended, a transport
// failure for procedures, else EXECUTION_FAILED handler-error.
func (r *Registry) handlerFailure(hctx context.Context, a *attempt, err error) *Error {
	if e := asError(err); e != nil {
		return e
	}
	switch {
	case hctx.Err() != nil && context.Cause(hctx) == errTimedOut:
		// The handler gave up at its deadline, as the timer settles.
		return a.timeoutError(a.budget(r))
	case a.cap.def.kind == KindProcedure:
		return r.transportError(a, err)
	case hctx.Err() != nil:
		// The handler gave up because its context ended (unmount of a
		// navigation, cancellation): the call was cancelled, not broken.
		return NewError(CodeCancelled, "", nil)
	}
	return r.userError(a, err, "handler")
}

// callExecutor runs a procedure through the installed executor. A panic
// in the executor is a transport failure, as any error it returns.
func (r *Registry) callExecutor(ctx context.Context, a *attempt) (out any, err error) {
	box := r.executor.Load()
	if box == nil {
		return nil, errors.New("surface: no procedure executor is installed")
	}
	defer recoverError(&err)
	raw, err := box.e.Execute(ctx, &ProcedureCall{
		ProcedureID: a.cap.id, Path: a.cap.name, Input: a.eff.text, InvocationID: a.id(),
		Consumer: a.call.Consumer, Host: a.call.Host, Confirmation: a.call.Confirmation, GrantID: a.call.GrantID,
	})
	if err != nil || raw == nil {
		return nil, err
	}
	return raw, nil
}

// timeoutError is the TIMEOUT of this invocation: retryable iff the
// capability is idempotent.
func (a *attempt) timeoutError(timeout time.Duration) *Error {
	idem := a.cap.def.idempotent
	e := NewError(CodeTimeout, "", map[string]any{"timeoutMs": timeout.Milliseconds(), "idempotent": idem})
	if idem {
		e.Retry = RetryYes
	}
	return e
}

// lateSettlement records a handler that returned after the invocation
// settled.
func (r *Registry) lateSettlement(a *attempt) {
	r.opts.Logger.Warn("surface: handler returned after the invocation settled", "capabilityId", a.inv.CapabilityID, "invocationId", a.id())
	r.audit(AuditEvent{Type: AuditLateSettlement, CapabilityID: a.inv.CapabilityID, RegistrationID: a.reg.id, InvocationID: a.id()})
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
		// A navigation routinely unmounts its own owner: only the
		// handler, the timer or the caller settle it.
		case !x.nav:
			x.settle(nil, NewError(CodeComponentUnmounted, "", map[string]any{"phase": "mid-flight"}))
		}
		x.cancel()
	}
	return drained
}
