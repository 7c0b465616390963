package httpexec

import (
	"errors"
	"fmt"
	"net/http"
)

// Errors of [Executor.Execute] that are not [surface.Error] values. The
// registry turns them into EXECUTION_FAILED (reason "transport", no retry);
// their text reaches only the operator.
var (
	// ErrUnknownPath: the call's path is not in the manifest
	// (Options.Paths). No request was sent.
	ErrUnknownPath = errors.New("httpexec: path not in the manifest")
	// ErrPathNotServed: the backend answered 404 for a path of the
	// manifest; the manifest and the backend disagree. Returned as a
	// *StatusError that matches it with errors.Is.
	ErrPathNotServed = errors.New("httpexec: the backend does not serve the path")
	// ErrResponseTooLarge: a successful response had a body longer than
	// Options.MaxResponseBytes.
	ErrResponseTooLarge = errors.New("httpexec: response body too large")
	// ErrNotJSON: a successful response had a body that is not JSON.
	ErrNotJSON = errors.New("httpexec: response body is not JSON")
)

// StatusError reports a response status that has no [surface.Error]
// mapping: 404, 408, 429, 5xx, and unexpected ones such as 3xx, 202 or
// 405. For 408, 429 and 5xx it comes wrapped with [surface.Transient].
// It never carries the response body; the body goes to the log.
type StatusError struct {
	// Path is the procedure path of the call.
	Path string
	// StatusCode is the HTTP status of the response.
	StatusCode int
}

// Error implements error.
func (e *StatusError) Error() string {
	return fmt.Sprintf("httpexec: procedure %q: the backend answered %d %s", e.Path, e.StatusCode, http.StatusText(e.StatusCode))
}

// Unwrap returns [ErrPathNotServed] for a 404, nil otherwise.
func (e *StatusError) Unwrap() error {
	if e.StatusCode == http.StatusNotFound {
		return ErrPathNotServed
	}
	return nil
}
