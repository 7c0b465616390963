package surface

import (
	"errors"
	"fmt"
	"strconv"

	"github.com/agentsurface/agentsurface/internal/canonical"
)

// checkRequest begins phase 1: it bounds what an agent chose before the
// registry keeps any of it (in the idempotency cache, the audit trail, the
// events, the confirmation store), as [Registry.Invoke] states (semantics
// §1, §18: an over-long capability or instance id names nothing).
func (r *Registry) checkRequest(inv *Invocation) *Error {
	for _, f := range [...]struct {
		name, id string
	}{
		{"capabilityId", inv.CapabilityID}, {"instanceId", inv.InstanceID},
		{"invocationId", inv.InvocationID}, {"registrationId", inv.RegistrationID},
		{"confirmationId", inv.ConfirmationID}, {"surfaceVersion", inv.SurfaceVersion},
	} {
		if len(f.id) <= MaxIDLength {
			continue
		}
		r.opts.Logger.Warn("surface: invocation refused: an id is too long", "field", f.name, "bytes", len(f.id), "limit", MaxIDLength)
		if f.name == "capabilityId" || f.name == "instanceId" {
			return NewError(CodeCapabilityNotFound, "", nil)
		}
		return requestInvalid(f.name, fmt.Sprintf("%s is longer than %d bytes.", f.name, MaxIDLength))
	}
	if n := len(inv.Input); n > r.opts.Limits.MaxInputBytes {
		r.opts.Logger.Warn("surface: invocation refused: the input is too large", "bytes", n, "limit", r.opts.Limits.MaxInputBytes)
		return requestInvalid("input", "input is larger than the limit of "+strconv.Itoa(r.opts.Limits.MaxInputBytes)+" bytes")
	}
	return nil
}

// requestInvalid is the INVALID_INPUT of a request field: the issue's
// path is the field ("" for the input, whose issues are paths inside it).
func requestInvalid(field, message string) *Error {
	path := field
	if field == "input" {
		path = ""
	}
	return NewError(CodeInvalidInput, "The request is invalid at details.field; see details.issues.",
		map[string]any{"field": field, "issues": []Issue{{Path: path, Message: message}}})
}

// canonicalInput parses the attempt's input into its canonical JSON, or
// records why it is not usable JSON; phase 5 reports it.
func (a *attempt) canonicalInput() {
	if len(a.inv.Input) == 0 {
		return
	}
	var err error
	a.input, err = canonical.Canonicalize(a.inv.Input)
	switch {
	case errors.Is(err, canonical.ErrTooDeep):
		a.inputBad = msgTooDeep
	case err != nil:
		a.inputBad = msgInvalidJSON
	}
}

// Fixed agent-facing texts of input issues.
const (
	msgInvalidJSON = "input is not valid JSON"
	msgTooDeep     = "input is nested too deeply (more than 1000 levels of arrays and objects)"
	msgShape       = "input does not match the expected shape"
)
