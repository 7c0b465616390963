package surface

import (
	"cmp"
	"encoding/json"
	"errors"
	"math"
	"slices"
	"time"
	"unicode/utf16"
)

// DefinitionCode classifies a structural defect in a component definition.
type DefinitionCode string

// Definition error codes (semantics §4.4).
const (
	// DefinitionInvalidID: a bad component type, instance id or capability name, or
	// a view id longer than MaxIDLength.
	DefinitionInvalidID DefinitionCode = "INVALID_ID"
	// DefinitionInvalid: a missing or malformed field (description,
	// handler, effect, confirmation, audit level, meta, parent, …).
	DefinitionInvalid DefinitionCode = "INVALID_DEFINITION"
	// DefinitionUnsupportedSchema: a schema outside the supported subset, too deep
	// or too large.
	DefinitionUnsupportedSchema DefinitionCode = "UNSUPPORTED_SCHEMA"
	// DefinitionPlaneViolation: an action with a server effect, or a procedure
	// reference with a view effect.
	DefinitionPlaneViolation DefinitionCode = "PLANE_VIOLATION"
	// DefinitionDuplicateCapability: one name used by both an observation and an
	// action of a component.
	DefinitionDuplicateCapability DefinitionCode = "DUPLICATE_CAPABILITY"
	// DefinitionLimitExceeded: a description or meta record over its limit.
	DefinitionLimitExceeded DefinitionCode = "LIMIT_EXCEEDED"
)

// DefinitionError reports a structural defect in a definition passed to
// [Registry.Register]. Structural defects are deterministic bugs for the
// author to fix, so Register returns them in every environment; runtime
// conditions (a duplicate instance, a guard rejection) return a dead handle
// instead.
//
// errors.Is(err, &DefinitionError{Code: c}) matches any DefinitionError
// with code c.
type DefinitionError struct {
	// Code classifies the defect.
	Code DefinitionCode
	// Field locates it in the definition, e.g. "actions.selectRows.input".
	// Empty for the component itself.
	Field string
	// Message says what is wrong.
	Message string
	// Err is the underlying cause, if any (for example a schema error).
	Err error
}

// Error implements error.
func (e *DefinitionError) Error() string {
	s := "surface: " + string(e.Code)
	if e.Field != "" {
		s += " at " + e.Field
	}
	return s + ": " + e.Message
}

// Unwrap returns the cause.
func (e *DefinitionError) Unwrap() error { return e.Err }

// Is matches another *DefinitionError with the same Code whose Field and
// Message are empty or equal.
func (e *DefinitionError) Is(target error) bool {
	t, ok := target.(*DefinitionError)
	return ok && t.Code == e.Code && (t.Field == "" || t.Field == e.Field) && (t.Message == "" || t.Message == e.Message)
}

func defErr(code DefinitionCode, field, msg string) *DefinitionError {
	return &DefinitionError{Code: code, Field: field, Message: msg}
}

// ErrClosed is returned by [Registry.Register] after [Registry.Close]:
// using a closed registry is a programming error.
var ErrClosed = errors.New("surface: registry closed")

// Code is the closed set of agent-facing error codes. A Code is also an
// error, to match results with errors.Is:
//
//	errors.Is(res.Err(), surface.CodeStaleCapability)
//
// and a policy, precondition or handler may return a bare Code to fail
// with it and its default message.
type Code string

// Error returns the code itself, e.g. "STALE_CAPABILITY".
func (c Code) Error() string { return string(c) }

// Error codes (semantics §4.1).
const (
	CodeCapabilityNotFound     Code = "CAPABILITY_NOT_FOUND"
	CodeCapabilityNotAvailable Code = "CAPABILITY_NOT_AVAILABLE"
	CodeAmbiguousInstance      Code = "AMBIGUOUS_INSTANCE"
	CodeComponentUnmounted     Code = "COMPONENT_UNMOUNTED"
	CodeStaleCapability        Code = "STALE_CAPABILITY"
	CodeInvocationConflict     Code = "INVOCATION_CONFLICT"
	CodeInvalidInput           Code = "INVALID_INPUT"
	CodeNotAuthenticated       Code = "NOT_AUTHENTICATED"
	CodeNotAuthorized          Code = "NOT_AUTHORIZED"
	CodePreconditionFailed     Code = "PRECONDITION_FAILED"
	CodeConfirmationRequired   Code = "CONFIRMATION_REQUIRED"
	CodeConfirmationInvalid    Code = "CONFIRMATION_INVALID"
	CodeRateLimited            Code = "RATE_LIMITED"
	CodeTimeout                Code = "TIMEOUT"
	CodeCancelled              Code = "CANCELLED"
	CodeExecutionFailed        Code = "EXECUTION_FAILED"
)

// Retry tells the agent whether and how to retry a failed call.
type Retry string

// Retry categories.
const (
	RetryNo               Retry = "no"
	RetryYes              Retry = "yes"
	RetryAfterRefresh     Retry = "after-refresh"
	RetryAfterDelay       Retry = "after-delay"
	RetryWithConfirmation Retry = "with-confirmation"
	RetryWithChanges      Retry = "with-changes"
)

// codeRule is one row of the error matrix: the default retry category, the
// default agent-facing message, and whether a result with this code is
// cached for idempotent replay.
type codeRule struct {
	retry   Retry
	cached  bool
	message string
}

// errorMatrix is the single source of the codes' retry rules and
// cacheability (semantics §4.1). The variants by reason are
// NewReasonError's (CONFIRMATION_INVALID expired, PRECONDITION_FAILED
// binding-failed), CANCELLED on Close is NewClosedError's; TIMEOUT by
// idempotency and EXECUTION_FAILED transient are applied where those
// errors are made.
var errorMatrix = map[Code]codeRule{
	CodeCapabilityNotFound:     {RetryAfterRefresh, true, "No such capability is available to you. Refresh the surface and use a listed capability."},
	CodeCapabilityNotAvailable: {RetryAfterRefresh, true, "The capability exists but is not available right now; see details.reason."},
	CodeAmbiguousInstance:      {RetryWithChanges, true, "Several instances offer this capability; retry with one of the instanceIds in details.instances."},
	CodeComponentUnmounted:     {RetryAfterRefresh, true, "The component that offered this capability is gone. Refresh the surface."},
	CodeStaleCapability:        {RetryAfterRefresh, true, "The surface changed since you discovered this capability. Refresh and retry."},
	CodeInvocationConflict:     {RetryWithChanges, false, "This invocationId was already used for a different request; use a fresh invocationId."},
	CodeInvalidInput:           {RetryWithChanges, true, "The input does not match the input schema; see details.issues."},
	CodeNotAuthenticated:       {RetryNo, true, "The user is not signed in."},
	CodeNotAuthorized:          {RetryNo, true, "The user is not allowed to do this."},
	CodePreconditionFailed:     {RetryWithChanges, true, "The current state does not allow this call."},
	CodeConfirmationRequired:   {RetryWithConfirmation, false, "The user must approve this call; retry with the confirmationId once approved."},
	CodeConfirmationInvalid:    {RetryNo, true, "The confirmation does not authorize this call; see details.reason."},
	CodeRateLimited:            {RetryAfterDelay, false, "Too many calls right now; retry after details.retryAfterMs milliseconds."},
	CodeTimeout:                {RetryNo, true, "The capability did not finish in time."},
	CodeCancelled:              {RetryYes, true, "The call was cancelled."},
	CodeExecutionFailed:        {RetryNo, true, "The capability failed while running; the cause was recorded for the operator."},
}

// Reason is the variant of an error code that details.reason names
// (semantics §4.1): why a STALE_CAPABILITY is stale, why evidence is
// CONFIRMATION_INVALID, how an execution failed. Compare an *Error's
// [Error.Reason] with these constants instead of reading its details. A
// CAPABILITY_NOT_AVAILABLE's reason is free text (a policy's Disable
// reason, an UnavailableReason, an override's); the registry's own are
// constants too.
type Reason string

// Reasons, by the code they qualify.
const (
	// STALE_CAPABILITY.
	ReasonRegistrationReplaced   Reason = "registration-replaced"
	ReasonSurfaceReloaded        Reason = "surface-reloaded"
	ReasonSurfaceVersionMismatch Reason = "surface-version-mismatch"
	// INVOCATION_CONFLICT.
	ReasonIDReused Reason = "id-reused-with-different-request"
	// PRECONDITION_FAILED, when a procedure's binding failed.
	ReasonBindingFailed Reason = "binding-failed"
	// CONFIRMATION_INVALID.
	ReasonExpired  Reason = "expired"
	ReasonDenied   Reason = "denied"
	ReasonConsumed Reason = "consumed"
	ReasonMismatch Reason = "mismatch"
	// RATE_LIMITED.
	ReasonRate      Reason = "rate"
	ReasonQueueFull Reason = "queue-full"
	// EXECUTION_FAILED.
	ReasonHandlerError   Reason = "handler-error"
	ReasonOutputInvalid  Reason = "output-invalid"
	ReasonOutputTooLarge Reason = "output-too-large"
	ReasonTransport      Reason = "transport"
	// CAPABILITY_NOT_AVAILABLE, for the availability the registry
	// computes (semantics §8.4).
	ReasonComponentDisabled Reason = "component-disabled"
	ReasonUnavailable       Reason = "unavailable" // an override without a reason of its own
	ReasonWhenError         Reason = "when-error"
)

// NewReasonError returns an error of code whose details.reason is reason,
// with the retry category of that variant (CONFIRMATION_INVALID expired
// may be retried with a new confirmation, PRECONDITION_FAILED
// binding-failed after a refresh; the others take the code's). An empty
// message takes the code's default. Adapters use it to answer with a
// variant the registry defines, rather than build its details.
func NewReasonError(code Code, reason Reason, message string) *Error {
	e := NewError(code, message, map[string]any{"reason": string(reason)})
	switch {
	case code == CodeConfirmationInvalid && reason == ReasonExpired:
		e.Retry = RetryWithConfirmation
	case code == CodePreconditionFailed && reason == ReasonBindingFailed:
		e.Retry = RetryAfterRefresh
	}
	return e
}

// NewClosedError returns the CANCELLED of a call cut short because the
// registry, or an adapter serving it, closed: retry no, since nothing
// will answer a retry (DESIGN decision 8). An empty message is "The
// surface was closed."
func NewClosedError(message string) *Error {
	e := NewError(CodeCancelled, cmp.Or(message, "The surface was closed."), nil)
	e.Retry = RetryNo
	return e
}

// maxMessage is the length cap of agent-facing messages, in UTF-16 units.
const maxMessage = 300

// Error is the agent-facing error payload: a code from the closed set, an
// agent-safe message, a retry category and code-specific details. It is
// what a failed [Result] carries and what policies, preconditions and
// handlers return to fail a call with a specific code.
//
// Messages and details are shown to the agent: never put causes, queries,
// paths or internal identifiers in them. A handler error that is not an
// *Error becomes EXECUTION_FAILED with a fixed message, and its text goes
// only to the operator's log.
//
// errors.Is(err, surface.CodeStaleCapability) matches any *Error with
// that code.
type Error struct {
	Code    Code           `json:"code"`
	Message string         `json:"message"`
	Retry   Retry          `json:"retry"`
	Details map[string]any `json:"details,omitempty"`
}

// Error implements error.
func (e *Error) Error() string { return string(e.Code) + ": " + e.Message }

// Is reports whether target is e's [Code], or an *Error with the same
// code.
func (e *Error) Is(target error) bool {
	switch t := target.(type) {
	case Code:
		return t == e.Code
	case *Error:
		return t != nil && t.Code == e.Code
	}
	return false
}

// NewError returns an agent-facing error with the code's default retry
// category. An empty message takes the code's default message; a longer
// one than 300 characters is truncated with "…". Details must be JSON
// values and agent-safe.
func NewError(code Code, message string, details map[string]any) *Error {
	rule := errorMatrix[code]
	if message == "" {
		message = rule.message
	}
	return &Error{Code: code, Message: clip(message, maxMessage), Retry: rule.retry, Details: details}
}

// Precondition returns a PRECONDITION_FAILED error for a precondition to
// return: message and details are shown to the agent.
func Precondition(message string, details map[string]any) *Error {
	return NewError(CodePreconditionFailed, message, details)
}

// clip truncates s to max UTF-16 code units, ending in "…".
func clip(s string, max int) string {
	if jsLen(s) <= max {
		return s
	}
	n := 0
	for i, r := range s {
		if n += utf16.RuneLen(r); n > max-1 {
			return s[:i] + "…"
		}
	}
	return s
}

// clone returns a copy of e whose details can be changed without changing
// e's.
func (e *Error) clone() *Error {
	if e == nil {
		return nil
	}
	c := *e
	if e.Details != nil {
		c.Details = cloneJSON(e.Details).(map[string]any)
	}
	return &c
}

// cloneJSON deep-copies the maps and slices of a JSON-like value.
func cloneJSON(v any) any {
	switch v := v.(type) {
	case map[string]any:
		m := make(map[string]any, len(v))
		for k, x := range v {
			m[k] = cloneJSON(x)
		}
		return m
	case []any:
		s := make([]any, len(v))
		for i, x := range v {
			s[i] = cloneJSON(x)
		}
		return s
	case []string:
		return append([]string(nil), v...)
	case []Issue:
		return append([]Issue(nil), v...)
	case []InstanceRef:
		out := append([]InstanceRef(nil), v...)
		for i := range out {
			if out[i].Context != nil {
				c := *out[i].Context
				out[i].Context = &c
			}
		}
		return out
	}
	return v
}

// Issue is one validation problem of an input: the path of the offending
// value, in the spec's format — property names joined with ".", "[i]" for
// array indexes, "" for the root ("ids", "ids[0]", "filter.site"); a
// missing property is reported at its own path — and a message that never
// echoes input values.
type Issue struct {
	Path    string `json:"path"`
	Message string `json:"message"`
}

// InstanceRef names one candidate of an AMBIGUOUS_INSTANCE error.
type InstanceRef struct {
	InstanceID     string `json:"instanceId"`
	RegistrationID string `json:"registrationId"`
	// Description is the component's, for view capabilities.
	Description string `json:"description,omitempty"`
	// Context is the component a procedure reference is bound to.
	Context *Parent `json:"context,omitempty"`
}

// Errors the pipeline makes.

func handlerError() *Error {
	return NewReasonError(CodeExecutionFailed, ReasonHandlerError, "")
}

func invalidInput(issues ...Issue) *Error {
	return NewError(CodeInvalidInput, "", map[string]any{"issues": issues})
}

func queueFull() *Error {
	return NewError(CodeRateLimited, "Too many calls are waiting for this capability; retry after details.retryAfterMs milliseconds.",
		map[string]any{"reason": string(ReasonQueueFull), "retryAfterMs": 250})
}

func cancelledByClose() *Error { return NewClosedError("") }

// userError maps an error returned by user code (a handler, a
// precondition) to the agent-facing error: an *Error anywhere in the
// chain is used as is; anything else becomes EXECUTION_FAILED
// handler-error, and its text goes only to the log.
func (r *Registry) userError(a *attempt, err error, what string) *Error {
	if e := asError(err); e != nil {
		return e
	}
	r.opts.Logger.Error("surface: "+what+" failed", "capabilityId", a.inv.CapabilityID, "invocationId", a.id(), "error", err)
	return handlerError()
}

// asError returns the agent-facing error err carries — an *Error or a
// bare Code anywhere in its chain — made well formed, or nil.
func asError(err error) *Error {
	var ae *Error
	if errors.As(err, &ae) && ae != nil {
		return wellFormed(ae)
	}
	var c Code
	if errors.As(err, &c) {
		return wellFormed(&Error{Code: c})
	}
	return nil
}

// wellFormed returns a copy of an error from user code fit for the agent:
// a known code, a message (the code's default when empty, capped), a retry
// category from the closed set. It returns nil for an unknown code.
func wellFormed(e *Error) *Error {
	rule, known := errorMatrix[e.Code]
	if !known {
		return nil
	}
	c := *e
	if c.Message == "" {
		c.Message = rule.message
	}
	c.Message = clip(c.Message, maxMessage)
	switch c.Retry {
	case RetryNo, RetryYes, RetryAfterRefresh, RetryAfterDelay, RetryWithConfirmation, RetryWithChanges:
	default:
		c.Retry = rule.retry
	}
	return &c
}

// transportError maps an executor failure that is not a *Error:
// EXECUTION_FAILED transport, retried after a delay when transient. The
// cause goes to the log only.
func (r *Registry) transportError(a *attempt, err error) *Error {
	r.opts.Logger.Error("surface: procedure call failed", "procedureId", a.inv.CapabilityID, "invocationId", a.id(), "error", err)
	if IsTransient(err) {
		e := NewError(CodeExecutionFailed, "The domain service could not be reached; retry after details.retryAfterMs milliseconds.",
			map[string]any{"reason": string(ReasonTransport), "transient": true, "retryAfterMs": 1000})
		e.Retry = RetryAfterDelay
		return e
	}
	return NewReasonError(CodeExecutionFailed, ReasonTransport, "The domain service failed; the cause was recorded for the operator.")
}

// Origin says which side a NOT_AUTHORIZED or a CONFIRMATION_REQUIRED
// comes from (details.origin): the client, this registry's policies and
// confirmation gate, or the server, the domain service a procedure
// reference calls.
type Origin string

// Origins.
const (
	OriginClient Origin = "client"
	OriginServer Origin = "server"
)

// The accessors below read the details a client reads. A detail's Go type
// depends on where the error came from: in process the registry stores
// []Issue, []InstanceRef and Go numbers; an error decoded from JSON holds
// []any of map[string]any, float64 and strings. Each accessor returns the
// same value for both forms (for any detail: a detail of the wrong shape
// reads as absent in either form), so a client never asserts a detail's
// type itself. A returned slice is the caller's own.

// detail returns details[key] as a T: as is when it is one, else through
// its JSON encoding, which is how a decoded error holds it. It reports
// false when the detail is absent, null or of another shape.
func detail[T any](e *Error, key string) (T, bool) {
	var t T
	if e == nil {
		return t, false
	}
	v := e.Details[key]
	if v == nil {
		return t, false
	}
	if t, ok := v.(T); ok {
		return t, true
	}
	b, err := json.Marshal(v)
	if err != nil || json.Unmarshal(b, &t) != nil {
		var zero T
		return zero, false
	}
	return t, true
}

// text returns a string detail, "" when there is none.
func (e *Error) text(key string) string {
	if e != nil {
		switch v := e.Details[key].(type) { // the registry's own forms
		case Reason:
			return string(v)
		case Effect:
			return string(v)
		case Origin:
			return string(v)
		}
	}
	s, _ := detail[string](e, key)
	return s
}

// Reason returns details.reason, the variant of the error's code, or ""
// when it has none.
func (e *Error) Reason() Reason { return Reason(e.text("reason")) }

// ConfirmationID returns details.confirmationId: for
// CONFIRMATION_REQUIRED, the confirmation to present once the user
// approved (for one from the server, its id if it gave one); "" when
// there is none.
func (e *Error) ConfirmationID() string { return e.text("confirmationId") }

// Summary returns details.summary: for CONFIRMATION_REQUIRED, what the
// user is asked to approve; "" when there is none.
func (e *Error) Summary() string { return e.text("summary") }

// ApproveURL returns details.approveUrl: for CONFIRMATION_REQUIRED, the
// address of the application's approve page for this confirmation, where
// the person sees the exact input and approves or denies it; "" when
// there is none. The registry never sets it (it knows no URLs): an
// adapter adds it ([Error.WithApproveURL]) when the host gives one, as
// package mcpsurface does with its Options.ApproveURL. The agent hands
// the link to the user, then retries as for any confirmation.
func (e *Error) ApproveURL() string { return e.text("approveUrl") }

// WithApproveURL returns a copy of the CONFIRMATION_REQUIRED e that
// carries the approve link url: details.approveUrl (see
// [Error.ApproveURL]), and a message that asks the agent to hand it to
// the user ("Ask the user to approve this call at <url> and retry …";
// when that would pass the 300-character cap, it points at
// details.approveUrl instead, so the link is never cut). It returns e
// itself when url is empty or e is nil or of another code. The caller
// checks that url is one to show to a person (an absolute http(s) URL);
// the copy's other details are e's.
func (e *Error) WithApproveURL(url string) *Error {
	if e == nil || url == "" || e.Code != CodeConfirmationRequired {
		return e
	}
	c := e.clone()
	if c.Details == nil {
		c.Details = map[string]any{}
	}
	c.Details["approveUrl"] = url
	c.Message = "Ask the user to approve this call at " + url + " and retry with the confirmationId once approved."
	if jsLen(c.Message) > maxMessage {
		c.Message = "Ask the user to approve this call at the link in details.approveUrl and retry with the confirmationId once approved."
	}
	return c
}

// Effect returns details.effect: for CONFIRMATION_REQUIRED, the effect of
// the call awaiting approval; "" when there is none.
func (e *Error) Effect() Effect { return Effect(e.text("effect")) }

// Origin returns details.origin: [OriginClient] or [OriginServer] for
// NOT_AUTHORIZED and CONFIRMATION_REQUIRED; "" when there is none.
func (e *Error) Origin() Origin { return Origin(e.text("origin")) }

// LiveRegistrationID returns details.liveRegistrationId: for
// STALE_CAPABILITY, the registration that now offers the capability, when
// the consumer sees one; "" otherwise.
func (e *Error) LiveRegistrationID() string { return e.text("liveRegistrationId") }

// ExpiresAt returns details.expiresAt, in UTC: for CONFIRMATION_REQUIRED,
// when the pending confirmation expires. It is the zero time when there
// is none or it is not an RFC 3339 time.
func (e *Error) ExpiresAt() time.Time {
	t, _ := detail[time.Time](e, "expiresAt")
	return t.UTC()
}

// RetryAfter returns details.retryAfterMs as a duration: for RATE_LIMITED
// and a transient EXECUTION_FAILED, how long to wait before retrying. It
// is 0 when there is none (or it is negative).
func (e *Error) RetryAfter() time.Duration {
	var ms float64
	var ok bool
	if e != nil {
		switch v := e.Details["retryAfterMs"].(type) { // the registry's own forms
		case int:
			ms, ok = float64(v), true
		case int64:
			ms, ok = float64(v), true
		}
	}
	if !ok {
		ms, ok = detail[float64](e, "retryAfterMs")
	}
	switch {
	case !ok || !(ms > 0): // also NaN
		return 0
	case ms >= math.MaxInt64/float64(time.Millisecond):
		return math.MaxInt64
	}
	return time.Duration(ms * float64(time.Millisecond))
}

// Issues returns details.issues: for INVALID_INPUT, what is wrong with
// the input, in the validator's order; nil when there are none.
func (e *Error) Issues() []Issue {
	issues, _ := detail[[]Issue](e, "issues")
	if len(issues) == 0 {
		return nil
	}
	return slices.Clone(issues)
}

// LockedFields returns details.lockedFields: for the INVALID_INPUT of an
// input that set fields bound to the UI, those fields; nil when there are
// none.
func (e *Error) LockedFields() []string {
	fields, _ := detail[[]string](e, "lockedFields")
	if len(fields) == 0 {
		return nil
	}
	return slices.Clone(fields)
}

// Instances returns details.instances: for AMBIGUOUS_INSTANCE, the
// candidates the consumer sees, by instance id; retry with one of their
// instance ids. Nil when there are none.
func (e *Error) Instances() []InstanceRef {
	refs, _ := detail[[]InstanceRef](e, "instances")
	if len(refs) == 0 {
		return nil
	}
	return cloneJSON(refs).([]InstanceRef)
}
