package surface

import "context"

// precondition runs phase 7: the action's precondition, against live
// state. An *Error it returns is the result; any other error, or a panic,
// is EXECUTION_FAILED handler-error.
func (r *Registry) precondition(ctx context.Context, a *attempt) (e *Error) {
	d := a.cap.def
	if d.kind != KindAction || d.precondition == nil {
		return nil
	}
	defer r.recoverAs(&e, handlerError, "the precondition", a.inv.CapabilityID)
	if err := d.precondition(ctx, &a.call, a.eff.in); err != nil {
		return r.userError(a, err, "precondition")
	}
	return nil
}
