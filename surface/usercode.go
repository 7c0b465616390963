package surface

import "fmt"

// Helpers for calling user code: handlers, hooks, providers and anything
// else an application gives the registry may panic, and the registry
// turns every such panic into a logged fallback or an agent-safe error.

// guarded calls f, which is user code, and returns its result; if f
// panics, the panic is logged (what panicked, for which capability) and
// fallback is returned.
func guarded[T any](r *Registry, what, capabilityID string, fallback T, f func() T) (v T) {
	defer func() {
		if rec := recover(); rec != nil {
			r.logPanic(what, capabilityID, rec)
			v = fallback
		}
	}()
	return f()
}

// recoverAs, deferred by a function that calls user code, turns a panic
// into the error fallback makes, stored in *e, and logs it (what panicked,
// for which capability).
func (r *Registry) recoverAs(e **Error, fallback func() *Error, what, capabilityID string) {
	if rec := recover(); rec != nil {
		r.logPanic(what, capabilityID, rec)
		*e = fallback()
	}
}

// recoverError, deferred by a function that calls user code, turns a panic
// into a panicError stored in *err.
func recoverError(err *error) {
	if rec := recover(); rec != nil {
		*err = panicError{rec}
	}
}

// logPanic logs a panic recovered from user code.
func (r *Registry) logPanic(what, capabilityID string, rec any) {
	r.opts.Logger.Error("surface: "+what+" panicked", "capabilityId", capabilityID, "panic", fmt.Sprint(rec))
}

// panicError is the error a recovered panic becomes.
type panicError struct{ value any }

func (e panicError) Error() string { return fmt.Sprintf("panic: %v", e.value) }
