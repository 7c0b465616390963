package surface

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"
)

// Fixed agent-facing messages of settlement failures.
const (
	msgOutputInvalid  = "The capability returned output that does not match its declared output schema."
	msgOutputTooLarge = "The capability's output is larger than the configured limit."
)

// maxJSONDepth bounds the nesting of handler output (semantics §18).
const maxJSONDepth = 64

// encodeOutput begins phase 10: the handler's return value as JSON,
// size-capped and valid against the output schema (semantics §4.3). The
// encoding runs user code (a MarshalJSON of the output type): a panic
// there is EXECUTION_FAILED handler-error.
func (r *Registry) encodeOutput(a *attempt, out any) (text JSONText, e *Error) {
	d := a.cap.def
	if d.output == nil {
		return "", nil
	}
	defer r.recoverAs(&e, handlerError, "encoding the output", a.inv.CapabilityID)
	invalid := func(err error) (JSONText, *Error) {
		r.opts.Logger.Error("surface: output is not valid for its schema", "capabilityId", a.inv.CapabilityID, "invocationId", a.id(), "error", err)
		if r.opts.Environment.isDev() {
			a.devDefect = true // not cached: the fixed handler can be retried with the same id
		}
		return "", NewReasonError(CodeExecutionFailed, ReasonOutputInvalid, msgOutputInvalid)
	}
	b, err := json.Marshal(out)
	if err == nil && jsonDepth(b) > maxJSONDepth {
		err = errTooDeep
	}
	if err != nil {
		return r.notJSON(a, err)
	}
	if len(b) > r.opts.Limits.MaxOutputBytes {
		r.opts.Logger.Error("surface: output too large", "capabilityId", a.inv.CapabilityID, "bytes", len(b), "limit", r.opts.Limits.MaxOutputBytes)
		return "", NewReasonError(CodeExecutionFailed, ReasonOutputTooLarge, msgOutputTooLarge)
	}
	if d.outputTyped {
		// The schema was inferred from the handler's Go type to describe
		// everything that type marshals to: checking again cannot fail.
		return JSONText(b), nil
	}
	var v any
	if err := json.Unmarshal(b, &v); err != nil {
		return invalid(err)
	}
	if issues := d.output.Validate(v); len(issues) > 0 {
		return invalid(fmt.Errorf("output does not match the schema at %q: %s", issues[0].Path, issues[0].Message))
	}
	return JSONText(b), nil
}

// errTooDeep is why an output nesting deeper than maxJSONDepth is not
// JSON the spec accepts.
var errTooDeep = fmt.Errorf("it nests deeper than %d levels of arrays and objects", maxJSONDepth)

// notJSON settles a handler's output that is not JSON (semantics §4.3,
// AS-SER-001): a non-finite number, a Go value JSON cannot represent, a
// failing MarshalJSON, or nesting deeper than 64 levels. It is a defect of
// the handler: always logged at Error with the capability and what is
// wrong; in development and test the result says so too (and is not
// cached, so the fixed handler can be retried with the same invocation
// id), while production gives the fixed output-invalid message.
func (r *Registry) notJSON(a *attempt, err error) (JSONText, *Error) {
	what := notJSONReason(err)
	r.opts.Logger.Error("surface: the handler's output is not JSON: "+what+"; fix the handler",
		"capabilityId", a.inv.CapabilityID, "invocationId", a.id(), "error", err)
	msg := msgOutputInvalid
	if r.opts.Environment.isDev() {
		a.devDefect = true
		msg = "Development: the output of " + a.capabilityID() + " is not JSON: " + what + ". Fix the handler."
	}
	return "", NewReasonError(CodeExecutionFailed, ReasonOutputInvalid, msg)
}

// notJSONReason says why an output could not be encoded as JSON, without
// repeating any of its values.
func notJSONReason(err error) string {
	var unsupportedValue *json.UnsupportedValueError
	var unsupportedType *json.UnsupportedTypeError
	var marshaler *json.MarshalerError
	switch {
	case errors.Is(err, errTooDeep):
		return errTooDeep.Error()
	case errors.As(err, &unsupportedValue):
		return "it contains a value JSON cannot represent (a NaN or infinite number, or a cycle)"
	case errors.As(err, &unsupportedType):
		return "it contains a Go " + unsupportedType.Type.String() + ", which JSON cannot represent"
	case errors.As(err, &marshaler):
		return "the MarshalJSON or MarshalText method of its " + marshaler.Type.String() + " failed"
	}
	return "encoding/json could not encode it"
}

// jsonDepth returns the maximum nesting depth of valid JSON text.
func jsonDepth(b []byte) int {
	depth, deepest, inString := 0, 0, false
	for i := 0; i < len(b); i++ {
		switch c := b[i]; {
		case inString:
			switch c {
			case '\\':
				i++
			case '"':
				inString = false
			}
		case c == '"':
			inString = true
		case c == '[' || c == '{':
			if depth++; depth > deepest {
				deepest = depth
			}
		case c == ']' || c == '}':
			depth--
		}
	}
	return deepest
}

// settle ends phase 10: it stores the result under the invocation's key
// (cached when its code is, semantics §6), emits invocation-settled and
// writes the audit record. It returns the caller's copy of the result.
func (r *Registry) settle(ctx context.Context, a *attempt, entry *dedupeEntry, res Result) Result {
	end := r.now()
	cache := (res.Error == nil || errorMatrix[res.Error.Code].cached) && !a.devDefect
	if a.cap != nil && res.CapabilityID == a.cap.id {
		res.CapabilityID = a.cap.id // the cached result keeps the registration's copy, not the request's
	}
	r.dedupe.finish(entry, res, cache, end, r.opts.Limits.DedupeCacheTTL)
	r.settled(ctx, a, res, end, a.level() != AuditLevelNone || a.unresolved || r.auditsRefusal(a, res))
	return res.clone()
}

// settled emits invocation-settled and, if audit is set, writes the
// settled audit record: timing of the phases that ran, and at level full
// the effective input and the output.
// ctx is the call's: the audit record carries its values.
func (r *Registry) settled(ctx context.Context, a *attempt, res Result, end time.Time, audit bool) {
	d := end.Sub(a.start)
	if a.executed {
		a.execution = d - a.execAt
	}
	var code Code
	if res.Error != nil {
		code = res.Error.Code
	}
	emit(r, InvocationSettled{InvocationID: a.id(), CapabilityID: a.inv.CapabilityID, Status: res.Status, Code: code, DurationMs: d.Milliseconds()})
	r.observeSettled(a, &res, d) // observe: the settlement, with the durations the audit records
	if !audit {
		return
	}
	ms := &[3]int64{d.Milliseconds(), a.queueWait.Milliseconds(), a.execution.Milliseconds()}
	ev := AuditEvent{
		Type: AuditInvocationSettled, At: end, CapabilityID: a.capabilityID(), InvocationID: a.id(),
		ConsumerID: a.consumerKey, Status: res.Status, Code: code, DurationMs: &ms[0],
	}
	if a.reg != nil {
		ev.RegistrationID = a.reg.id
	}
	if a.grant != nil && a.consumed {
		ev.GrantID = a.grant.view.GrantID
	}
	if a.queued {
		ev.QueueWaitMs = &ms[1]
	}
	if a.executed {
		ev.ExecutionMs = &ms[2]
	}
	if a.level() == AuditLevelFull {
		ev.Payload = r.payload(a.inv.CapabilityID, JSONText(a.eff.text), res.Output)
	}
	r.auditCtx(ctx, ev)
}

// payload builds a full-level audit payload: redacted (a panicking Redact
// drops it), then capped.
func (r *Registry) payload(capabilityID string, input, output JSONText) *AuditPayload {
	pl := AuditPayload{Input: input, Output: output}
	if r.opts.Redact != nil {
		pl = guarded(r, "the audit Redact hook", capabilityID, AuditPayload{Truncated: true}, func() AuditPayload { return r.opts.Redact(capabilityID, pl) })
	}
	for _, part := range []*JSONText{&pl.Input, &pl.Output} {
		if len(*part) > r.opts.Limits.MaxOutputBytes {
			*part, pl.Truncated = "", true
		}
	}
	if pl == (AuditPayload{}) {
		return nil
	}
	return &pl
}
