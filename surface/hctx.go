package surface

import (
	"context"
	"sync"
	"time"
)

// handlerCtx is the context of a handler that runs on the invoking
// goroutine (the default; see [Options.IsolateHandlers]). Until the
// handler asks for Done, directly or by deriving a context, it is only its
// parent, a deadline and a cause: no channel, no timer. Arming it creates
// the context a handler would get from context.WithDeadlineCause (its Err
// is context.DeadlineExceeded at the deadline, and its cause
// errTimedOut), and settles the invocation TIMEOUT when the deadline
// comes. A handler that never looks at its context costs nothing.
type handlerCtx struct {
	parent   context.Context
	deadline time.Time // on the runtime clock
	p        *pipeline // settled TIMEOUT at the deadline
	timeout  time.Duration

	mu    sync.Mutex
	armed *armedCtx // set once armed
	cause error     // why it ended; nil while it runs
}

// armedCtx is what arming adds; most handlers never need it. Its fields
// are guarded by handlerCtx.mu, except inner, fixed once set.
type armedCtx struct {
	inner        context.Context
	cancel       context.CancelCauseFunc
	stopDeadline context.CancelFunc
	stopWatch    func() bool
	watch        sync.WaitGroup // the deadline watch, from arming until it ran or was stopped
}

// inner returns the armed context, or nil.
func (c *handlerCtx) inner() context.Context {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.armed == nil {
		return nil
	}
	return c.armed.inner
}

var _ context.Context = (*handlerCtx)(nil)

// Deadline returns the invocation's deadline, or the parent's if earlier.
func (c *handlerCtx) Deadline() (time.Time, bool) {
	if d, ok := c.parent.Deadline(); ok && d.Before(c.deadline) {
		return d, true
	}
	return c.deadline, true
}

// Done arms the context and returns its channel.
func (c *handlerCtx) Done() <-chan struct{} { return c.arm().Done() }

// Err reports whether the context ended. An ended context is armed first,
// so that Done, Err and context.Cause agree.
func (c *handlerCtx) Err() error {
	c.mu.Lock()
	inner, ended := c.innerLocked(), c.cause != nil
	c.mu.Unlock()
	if inner == nil {
		if !ended && c.parent.Err() == nil && time.Until(c.deadline) > 0 {
			return nil
		}
		inner = c.arm()
	}
	return inner.Err()
}

// Value looks key up in the parent. Once the context has ended it is
// armed first, so that context.Cause finds the cause.
func (c *handlerCtx) Value(key any) any {
	c.mu.Lock()
	inner, ended := c.innerLocked(), c.cause != nil
	c.mu.Unlock()
	if inner == nil && (ended || time.Until(c.deadline) <= 0) {
		inner = c.arm()
	}
	if inner != nil {
		return inner.Value(key)
	}
	return c.parent.Value(key)
}

// String names the context for fmt and panics.
func (c *handlerCtx) String() string { return "surface.handlerContext" }

// arm turns the context into a real one: a cancellable child of the
// parent (for unmount and Close) with the deadline, watched so that the
// deadline settles the invocation. The children are derived outside the
// lock: deriving calls into the caller's context.
func (c *handlerCtx) arm() context.Context {
	if inner := c.inner(); inner != nil {
		return inner
	}
	base, cancel := context.WithCancelCause(c.parent)
	inner, stop := context.WithDeadlineCause(base, c.deadline, errTimedOut)
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.armed != nil { // another goroutine armed it meanwhile
		stop()
		cancel(errSettled)
		return c.armed.inner
	}
	a := &armedCtx{inner: inner, cancel: cancel, stopDeadline: stop}
	c.armed = a
	if c.cause != nil {
		cancel(c.cause)
		return inner
	}
	// The watch runs on a goroutine of its own when the context ends
	// while the handler runs; Close waits for it as for the handler.
	wg := &c.p.r.execWG
	wg.Add(1)
	a.watch.Add(1)
	a.stopWatch = context.AfterFunc(inner, func() {
		defer wg.Done()
		defer a.watch.Done()
		c.expire(inner)
	})
	return inner
}

func (c *handlerCtx) innerLocked() context.Context {
	if c.armed == nil {
		return nil
	}
	return c.armed.inner
}

// expire runs when an armed context ends before the handler returned.
func (c *handlerCtx) expire(inner context.Context) {
	if context.Cause(inner) == errTimedOut {
		c.p.exec.settle(nil, c.p.timeoutError(c.timeout))
	}
}

// end cancels the context with cause (the first cause wins).
func (c *handlerCtx) end(cause error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.cause == nil {
		c.cause = cause
	}
	a := c.armed
	if a == nil {
		return
	}
	if a.stopWatch != nil && a.stopWatch() {
		c.p.r.execWG.Done() // the watch will never run
		a.watch.Done()
	}
	a.stopWatch = nil
	a.cancel(cause)
	a.stopDeadline()
}

// release waits for a deadline watch that started before end stopped it,
// then drops the context's link to the pipeline, which may be reused: a
// context the handler kept still answers Done, Err, Value and Deadline.
// Call it after end.
func (c *handlerCtx) release() {
	c.mu.Lock()
	a := c.armed
	c.mu.Unlock()
	if a != nil {
		a.watch.Wait()
	}
	c.mu.Lock()
	c.p = nil
	c.mu.Unlock()
}
