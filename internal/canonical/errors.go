package canonical

import (
	"errors"
	"strconv"
)

// Error reports why a value or a JSON text could not be canonicalised.
//
// Its message names the problem and, for JSON text, the byte offset where it
// was detected; it never echoes any part of the input value, so it is safe to
// log or return to an agent. The underlying cause, if any (for example the
// error returned by encoding/json for an unsupported Go value), is available
// through [errors.Unwrap] and [errors.As].
type Error struct {
	// Reason is a short, fixed description of the problem, such as
	// "non-finite number" or "invalid JSON: unexpected end of input".
	Reason string
	// Offset is the byte offset at which the problem was detected in the
	// JSON text being canonicalised (for Append, the text of the
	// json.RawMessage or of encoding/json's output being canonicalised), or
	// -1 when the error did not come from scanning JSON text.
	Offset int
	// Err is the underlying cause, or nil.
	Err error
}

// Error returns "canonical: " followed by the reason and, when known, the
// byte offset.
func (e *Error) Error() string {
	if e.Offset < 0 {
		return "canonical: " + e.Reason
	}
	return "canonical: " + e.Reason + " at offset " + strconv.Itoa(e.Offset)
}

// Unwrap returns the underlying cause, or nil.
func (e *Error) Unwrap() error { return e.Err }

// ErrTooDeep is the cause (see [Error.Err]) of a failure because arrays
// and objects nest deeper than [MaxDepth].
var ErrTooDeep = errors.New("canonical: nesting too deep")

// Reasons shared by the encoder and the scanner.
const (
	reasonNonFinite = "non-finite number"
	reasonTooDeep   = "nesting too deep"
)
