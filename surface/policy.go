package surface

import (
	"context"
	"time"
)

// Kind is the kind of a capability.
type Kind string

// Capability kinds.
const (
	KindObservation Kind = "observation"
	KindAction      Kind = "action"
	KindProcedure   Kind = "procedure"
)

// Decision is a policy's discovery verdict for one capability and one
// consumer: expose it, show it disabled with a reason, or hide it.
//
// Authority hides; state discloses. Hide what the consumer has no right to
// (existence is information you do not owe them); disable, with a reason
// that teaches the agent what to do first, what the current state makes
// momentarily invalid.
type Decision struct {
	verdict verdict
	reason  string
}

type verdict uint8

const (
	expose verdict = iota
	disable
	hide
)

// Expose lets the capability through (the default).
func Expose() Decision { return Decision{} }

// Disable shows the capability as unavailable with reason.
func Disable(reason string) Decision { return Decision{verdict: disable, reason: reason} }

// Hide removes the capability: for this consumer it does not exist.
func Hide() Decision { return Decision{verdict: hide} }

// PolicyContext describes the capability and the consumer a policy judges.
// It carries no agent input: discovery and authorization happen before
// the input exists. A policy must not keep one after its hook returns,
// nor change its maps.
type PolicyContext struct {
	CapabilityID   string
	Plane          Plane
	Kind           Kind
	Effect         Effect
	RegistrationID string
	Consumer       Consumer
	// Host is the host context from Options.Context. Read-only.
	Host map[string]any
	// ComponentMeta and CapabilityMeta are the agent-visible meta records.
	// Read-only.
	ComponentMeta  map[string]any
	CapabilityMeta map[string]any
	// Internal is the component's internal metadata: visible to policies,
	// never serialised for agents. Read-only.
	Internal    map[string]any
	Environment Environment
	r           *Registry
}

// Now is the registry's clock. Policies must use it rather than
// time.Now, so tests with a fake clock stay deterministic.
func (pc *PolicyContext) Now() time.Time {
	if pc.r == nil { // a context a test made
		return time.Now()
	}
	return pc.r.now()
}

// InvokeContext is what an invoke hook sees: the policy context plus the
// invocation id and the validated effective input — never the raw agent
// input.
type InvokeContext struct {
	PolicyContext
	InvocationID string
	// Input is the effective input as a JSON value (map[string]any,
	// []any, string, float64, bool or nil); {} for observations.
	Input any
}

// Next continues the chain: the rest of the policies, then the rest of the
// pipeline. Call it at most once, before the hook returns.
type Next func(ctx context.Context) Result

// Policy governs capabilities for consumers. Attach policies to the
// registry (Options.Policies, outermost), a component (Component.Policies)
// or a capability (its definition's Policies); chains concatenate in that
// order. Every hook is optional.
//
//   - Discover decides at snapshot time and again at invocation, before
//     anything else. Hide makes the capability nonexistent for the
//     consumer in every answer and side effect it can observe: an
//     invocation resolves among the capabilities the consumer sees, so a
//     hidden one answers CAPABILITY_NOT_FOUND byte for byte as an unknown
//     id, is never listed as an ambiguous instance or a live
//     registration, and its tombstone never answers COMPONENT_UNMOUNTED
//     (see the package documentation, Visibility). Disable shows it with
//     a reason and fails its calls CAPABILITY_NOT_AVAILABLE. Discover must
//     be synchronous, cheap and side-effect free, and decide from the
//     consumer, the host context and the capability (it may run for every
//     candidate of a call, and again for an unmounted registration's
//     tombstone). Across a chain, any hide wins, else the first disable's
//     reason, else expose; a panicking Discover hides.
//   - Authorize runs at phase 4, before any input is handled; it cannot see
//     input. Hooks wrap each other like onion layers, the registry's
//     outermost: call next to proceed, or return Fail(err) to deny.
//   - Invoke runs at phase 6 with the validated effective input, in the
//     same onion order; the confirmation decision is its innermost layer.
//
// Hooks may inspect and replace the Result next returns; they must not
// change input. A *Error a hook returns through Fail is the result; a
// panic, or not calling next without failing, is EXECUTION_FAILED.
// Hooks run concurrently for concurrent invocations.
type Policy struct {
	// Name identifies the policy in diagnostics, e.g. "authenticated".
	Name      string
	Discover  func(pc *PolicyContext) Decision
	Authorize func(ctx context.Context, pc *PolicyContext, next Next) Result
	Invoke    func(ctx context.Context, ic *InvokeContext, next Next) Result

	// escalate is set by RequireConfirmation.
	escalate *escalation
}

// escalation is a confirmation requirement contributed by a policy.
type escalation struct {
	when    func(ic *InvokeContext) bool
	summary func(input any) string
	always  bool // AlwaysAsk: no grant skips its question
}

// Fail returns the result a hook returns to deny with e.
func Fail(e *Error) Result {
	return Result{Status: StatusError, Error: e}
}
