package surface

import (
	"context"
	"encoding/json"
	"errors"
)

// ProcedureCall is one call of a domain procedure, as an executor sees it:
// the effective input (agent input merged with the live bound values and
// validated against the procedure's full input schema), who calls, and the
// confirmation evidence, if any.
//
// Evidence is information for the domain side, never authority: the
// domain service re-checks the caller's permission on every call.
type ProcedureCall struct {
	// ProcedureID is the capability id, "domain:<path>".
	ProcedureID string
	// Path is the procedure path, e.g. "devices.disable".
	Path string
	// Input is the effective input as canonical JSON.
	Input json.RawMessage
	// InvocationID is the idempotency key of the invocation; executors may
	// forward it so the domain side can deduplicate too.
	InvocationID string
	// Consumer is who called.
	Consumer Consumer
	// Host is the host context (user, session credentials, tenant),
	// read-only.
	Host map[string]any
	// Confirmation is the approved evidence the call carries, or nil.
	Confirmation *Evidence
	// GrantID is the standing grant that let the call skip the question
	// its confirmation would ask, or "". Like evidence, it informs the
	// domain; it authorises nothing there.
	GrantID string
}

// ProcedureExecutor performs domain procedures on behalf of the registry.
// Install one with [Registry.SetProcedureExecutor].
//
// Execute is called as a handler is (see [Registry.Invoke]), with a
// context that ends on timeout (Limits.ProcedureTimeout by default),
// cancellation or Close; it returns the procedure's JSON output. It may
// return a *Error to fail with that code (a server NOT_AUTHORIZED with
// details origin "server", a server approval demand as
// CONFIRMATION_REQUIRED with origin "server"); any other error becomes
// EXECUTION_FAILED (reason "transport", retry after a delay when the
// error is [Transient]). Error text never reaches the agent.
//
// Paths lists the procedure paths the executor exposes — its manifest.
// Procedure references to other paths are rejected at registration, so a
// reference can never expose more than the domain side offers. A nil
// result means the executor does not publish a manifest.
//
// Executors are called concurrently.
type ProcedureExecutor interface {
	Paths() []string
	Execute(ctx context.Context, call *ProcedureCall) (json.RawMessage, error)
}

// Transient marks err as a transient failure (a network error, a timeout,
// an overloaded server): the call fails EXECUTION_FAILED with retry
// after-delay instead of no.
func Transient(err error) error {
	if err == nil {
		return nil
	}
	return transientError{err}
}

type transientError struct{ error }

func (e transientError) Unwrap() error   { return e.error }
func (e transientError) Transient() bool { return true }

// IsTransient reports whether err, or an error it wraps, is marked
// transient (it has a Transient() bool method returning true).
func IsTransient(err error) bool {
	var t interface{ Transient() bool }
	return errors.As(err, &t) && t.Transient()
}
