package domain

import (
	"errors"
	"fmt"
	"strings"
)

// Sentinel errors of the domain service, for errors.Is.
var (
	// ErrForbidden: the acting user lacks the permission the operation
	// needs.
	ErrForbidden = errors.New("domain: permission denied")
	// ErrNotFound: a device id does not exist. The error is a
	// [*NotFoundError] naming the unknown ids.
	ErrNotFound = errors.New("domain: device not found")
	// ErrInvalid: an argument is invalid. The error is usually an
	// [*InvalidError] naming the argument.
	ErrInvalid = errors.New("domain: invalid argument")
)

// NotFoundError reports device ids that do not exist.
// errors.Is(err, ErrNotFound) holds for it.
type NotFoundError struct {
	// IDs are the unknown ids, in the order they were asked for.
	IDs []string
}

// Error implements error.
func (e *NotFoundError) Error() string {
	return fmt.Sprintf("domain: unknown device id(s) %s", strings.Join(e.IDs, ", "))
}

// Is reports whether target is ErrNotFound.
func (e *NotFoundError) Is(target error) bool { return target == ErrNotFound }

// InvalidError reports an invalid argument. errors.Is(err, ErrInvalid)
// holds for it.
type InvalidError struct {
	// Field is the JSON name of the argument: "ids", "reason", "status",
	// "site", "query", or "invocationId" and "consumer" for an
	// idempotency key.
	Field string
	// Problem says what is wrong. It is fixed text written by this
	// package, never derived from the value, so it is safe to show.
	Problem string
}

// Error implements error.
func (e *InvalidError) Error() string { return "domain: invalid " + e.Field + ": " + e.Problem }

// Is reports whether target is ErrInvalid.
func (e *InvalidError) Is(target error) bool { return target == ErrInvalid }

// forbidden returns the ErrForbidden of u lacking p.
func forbidden(u User, p Permission) error {
	return fmt.Errorf("%w: user %q lacks %s", ErrForbidden, u.ID, p)
}

// ErrKeyReused: an idempotency key of [Store.DisableOnce] or
// [Store.EnableOnce] was used by the same consumer, for the same user, for
// a different request. The error is a [*KeyReusedError].
var ErrKeyReused = errors.New("domain: idempotency key reused for a different request")

// KeyReusedError reports a call whose idempotency key its consumer already
// used for the same user, within [KeyRetention], for another action or
// other arguments. Nothing was executed or changed, and the error reveals
// nothing of the earlier request. Another consumer's use of the same id
// never causes it. errors.Is(err, ErrKeyReused) holds for it.
type KeyReusedError struct {
	// Key is the call's key.
	Key Key
}

// Error implements error.
func (e *KeyReusedError) Error() string {
	return "domain: the idempotency key was already used for a different request"
}

// Is reports whether target is ErrKeyReused.
func (e *KeyReusedError) Is(target error) bool { return target == ErrKeyReused }
