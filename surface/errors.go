package surface

import "errors"

// DefinitionCode classifies a structural defect in a component definition.
type DefinitionCode string

// Definition error codes (semantics §4.4).
const (
	// InvalidID: a bad component type, instance id or capability name, or
	// a view id longer than MaxIDLength.
	InvalidID DefinitionCode = "INVALID_ID"
	// InvalidDefinition: a missing or malformed field (description,
	// handler, effect, confirmation, audit level, meta, parent, …).
	InvalidDefinition DefinitionCode = "INVALID_DEFINITION"
	// UnsupportedSchema: a schema outside the supported subset, too deep
	// or too large.
	UnsupportedSchema DefinitionCode = "UNSUPPORTED_SCHEMA"
	// PlaneViolation: an action with a server effect, or a procedure
	// reference with a view effect.
	PlaneViolation DefinitionCode = "PLANE_VIOLATION"
	// DuplicateCapability: one name used by both an observation and an
	// action of a component.
	DuplicateCapability DefinitionCode = "DUPLICATE_CAPABILITY"
	// LimitExceeded: a description or meta record over its limit.
	LimitExceeded DefinitionCode = "LIMIT_EXCEEDED"
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
	if !ok || t.Code != e.Code {
		return false
	}
	return (t.Field == "" || t.Field == e.Field) && (t.Message == "" || t.Message == e.Message)
}

func defErr(code DefinitionCode, field, msg string) *DefinitionError {
	return &DefinitionError{Code: code, Field: field, Message: msg}
}

// ErrClosed is returned by [Registry.Register] after [Registry.Close]:
// using a closed registry is a programming error.
var ErrClosed = errors.New("surface: registry closed")
