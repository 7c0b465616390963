package mcpsurface

import (
	"encoding/json"
	"fmt"
	"runtime/debug"

	"github.com/agentsurface/agentsurface/surface"
)

// attempt is what a tool call has learned about its invocation, for the
// result of a panic.
type attempt struct {
	invocationID string
	capabilityID string
}

// panicked logs a panic recovered from a tool call and returns the
// result the agent gets instead: EXECUTION_FAILED handler-error with the
// code's fixed message. The panic value and stack go to the log only.
func (s *Server) panicked(rec any, name string, args json.RawMessage, at *attempt) surface.Result {
	capID := at.capabilityID
	if capID == "" {
		if t, ok := s.tool(name); ok {
			capID = t.CapabilityID
		}
	}
	if capID == "" && s.meta { // surface_read, surface_act: the capability asked for
		var in struct {
			CapabilityID string `json:"capabilityId"`
		}
		_ = json.Unmarshal(args, &in)
		capID = in.CapabilityID
	}
	capID = firstNonEmpty(capID, name)
	invID := firstNonEmpty(at.invocationID, s.newInvocationID())
	s.log.Error("mcpsurface: a tool call panicked; answered EXECUTION_FAILED",
		"tool", name, "capabilityId", capID, "invocationId", invID,
		"panic", fmt.Sprint(rec), "stack", string(debug.Stack()))
	return surface.Result{
		Status: surface.StatusError, InvocationID: invID, CapabilityID: capID,
		Error:          surface.NewError(surface.ExecutionFailed, "", map[string]any{"reason": "handler-error"}),
		SurfaceVersion: s.reg.Version(),
	}
}
