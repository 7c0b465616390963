package surface

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strings"
	"time"
)

// Telemetry receives a registry's telemetry: the phases and settlement of
// every invocation, the life of confirmation requests, and the coming and
// going of registrations. It is the hook tracing and metrics libraries
// build on (package otelsurface turns it into OpenTelemetry spans and
// metrics), in the manner of net/http/httptrace: a struct of optional
// funcs, set as [Options.Telemetry]. Any field may be nil.
//
// The registry calls the funcs synchronously on the goroutine doing the
// work, never while it holds a lock, and recovers and logs a panic in
// any of them (the call goes on as if the hook were not set). They may be
// called concurrently for different invocations, confirmations and
// registrations; they should be quick and must not block. They must not
// change what they are given. A registry without Telemetry pays a nil
// check per phase.
type Telemetry struct {
	// Invocation is called once for every invocation that passes the
	// identity phase (replays and joins of a call with the same
	// invocation id are not new invocations, and a request refused for
	// an over-long id or input is none), before resolution. ctx is
	// the caller's context. The context it returns is the one the rest of
	// the invocation runs with: policies, the handler and the procedure
	// executor get contexts derived from it, so a span started here is
	// the parent of theirs. A nil context keeps ctx.
	//
	// The recorder it returns receives the invocation's phases and its
	// settlement; nil records nothing.
	Invocation func(ctx context.Context, info InvocationInfo) (context.Context, InvocationRecorder)
	// Confirmation is called when a confirmation request is created and
	// when it leaves pending (approved, denied or expired, also by
	// Close): exactly once each.
	Confirmation func(ConfirmationChange)
	// Registrations is called when registrations go live or away:
	// Register, Unregister (also by a RegisterContext context ending),
	// a Replace of a duplicate, and Close, which removes every live
	// registration at once.
	Registrations func(RegistrationChange)
	// Grant is called when a standing grant is created, used by a call
	// (as its execution starts), revoked or expires. ctx is the
	// context of what caused it: the host's, given to Grants.Create or
	// Revoke; the invocation's (the one the Invocation hook returned) for
	// a use; a background context for an expiry and for a grant made by
	// Confirmations.ResolveGrant (whose ConfirmationChange carries its
	// id).
	Grant func(ctx context.Context, c GrantChange)
}

// GrantChangeKind is what happened to a standing grant.
type GrantChangeKind string

// Grant changes.
const (
	GrantChangeCreated GrantChangeKind = "created"
	GrantChangeUsed    GrantChangeKind = "used"
	GrantChangeRevoked GrantChangeKind = "revoked"
	GrantChangeExpired GrantChangeKind = "expired"
)

// GrantChange is a standing grant created, used, revoked or expired.
type GrantChange struct {
	Kind         GrantChangeKind
	GrantID      string
	CapabilityID string
	// InvocationID is the call a use let through; empty otherwise.
	InvocationID string
	// ConfirmationID is the approval a grant was created with, if any.
	ConfirmationID string
	// Uses is how many calls the grant allowed so far; MaxUses its cap
	// (0: none).
	Uses, MaxUses int
	// At is when the change happened, on the registry's clock.
	At time.Time
}

// InvocationInfo describes an invocation as it starts. It is what the
// caller asked for: the capability is not resolved yet (see
// [PhaseResolved]).
type InvocationInfo struct {
	// CapabilityID is the id as requested; it may name nothing.
	CapabilityID string
	// Plane is the plane CapabilityID names by its prefix ("view:" or
	// "domain:"), or "" for neither. The id is not parsed further: a
	// well-prefixed id may still be malformed (it then settles
	// CAPABILITY_NOT_FOUND).
	Plane Plane
	// InvocationID is the invocation's idempotency key (the caller's, or
	// a fresh "inv_" id).
	InvocationID string
	// RegistrationID is the staleness token the caller sent, or "".
	RegistrationID string
	// ConsumerKind and ConsumerID identify the caller (normalized: the
	// zero consumer is embedded/anonymous).
	ConsumerKind ConsumerKind
	ConsumerID   string
	// ConfirmationID is the confirmation evidence the caller presented,
	// or "".
	ConfirmationID string
	// Start is when the invocation started, on the registry's clock.
	Start time.Time
}

// InvocationRecorder receives the phases and the settlement of one
// invocation. Its methods are called one at a time, in phase order, on
// the invoking goroutine; Settle is called exactly once, last. A recorder
// returned for several invocations gets their calls concurrently.
type InvocationRecorder interface {
	// Phase reports a phase the invocation reached.
	Phase(PhaseEvent)
	// Settle reports how the invocation settled.
	Settle(Settlement)
}

// Phase names a point an invocation reached. Phases not listed here may
// be added; recorders should ignore the ones they do not know.
type Phase uint8

// Phases, in the order an invocation may reach them. Only PhaseResolved
// and PhaseExecuting are reached by every call that gets that far; the
// others depend on the call.
const (
	// PhaseResolved: the target registration is known. The event's Kind,
	// Effect, RegistrationID and InstanceID are set.
	PhaseResolved Phase = iota + 1
	// PhaseConfirmationPresented: the call presented confirmation
	// evidence and the registry checked it. ConfirmationID is set;
	// RequestedAt when the request is known; ApprovedAt only when the
	// evidence was accepted (approved, matching, unexpired). The call
	// then continues; otherwise it settles CONFIRMATION_INVALID, or
	// CONFIRMATION_REQUIRED when the request is still pending
	// (PhaseConfirmationRequested follows).
	PhaseConfirmationPresented
	// PhaseConfirmationRequested: the call needs the user's approval and
	// settles CONFIRMATION_REQUIRED. ConfirmationID, RequestedAt and
	// ExpiresAt are set (an identical pending request is shared, so the id
	// may have been requested by an earlier call).
	PhaseConfirmationRequested
	// PhaseQueued: the call waits for an admission slot.
	PhaseQueued
	// PhaseAdmitted: the call holds an admission slot after waiting;
	// QueueWait is how long. (A call admitted at once reports nothing.)
	PhaseAdmitted
	// PhaseExecuting: the handler, or the procedure executor, is called.
	PhaseExecuting
	// PhaseConfirmationGranted: the call needed the user's approval and
	// a standing grant let it skip the question (phase 6, so before
	// PhaseQueued and PhaseExecuting; the constant comes last to keep
	// the others' values). GrantID is set. No confirmation request is
	// made.
	PhaseConfirmationGranted
)

// String returns the phase's name, e.g. "resolved".
func (ph Phase) String() string {
	names := [...]string{PhaseResolved: "resolved", PhaseConfirmationPresented: "confirmation-presented",
		PhaseConfirmationRequested: "confirmation-requested", PhaseQueued: "queued", PhaseAdmitted: "admitted", PhaseExecuting: "executing",
		PhaseConfirmationGranted: "confirmation-granted"}
	if int(ph) < len(names) && names[ph] != "" {
		return names[ph]
	}
	return fmt.Sprintf("Phase(%d)", uint8(ph))
}

// PhaseEvent is a phase an invocation reached and what is known at that
// point; which fields are set depends on the phase (see each Phase).
type PhaseEvent struct {
	Phase Phase

	// PhaseResolved.
	Kind           Kind
	Effect         Effect
	RegistrationID string
	InstanceID     string

	// PhaseAdmitted.
	QueueWait time.Duration

	// PhaseConfirmationRequested and PhaseConfirmationPresented, on the
	// registry's clock.
	ConfirmationID string
	RequestedAt    time.Time
	ApprovedAt     time.Time
	ExpiresAt      time.Time

	// PhaseConfirmationGranted.
	GrantID string
}

// Settlement is how an invocation settled.
type Settlement struct {
	// Status is the result's status.
	Status ResultStatus
	// Error is the result's error when Status is "error", else nil. It is
	// the caller's: read it, never change it.
	Error *Error
	// Duration is from the start to the settlement, on the registry's
	// clock.
	Duration time.Duration
	// Admission is set when the call reached admission (phase 8);
	// QueueWait is then how long it waited there (zero when a slot was
	// free, the time until it gave up when it was refused or cancelled).
	Admission bool
	QueueWait time.Duration
	// Executed is set when the handler or executor was called; Execution
	// is then how long it ran until the settlement.
	Executed  bool
	Execution time.Duration
	// Registered reports whether the capability id the call named
	// (InvocationInfo.CapabilityID) is that of a capability registered in
	// the registry: of a live registration, or of one a live tombstone
	// remembers, whoever may see it. It is set for every call that
	// resolved. An id a caller made up is never registered, so series and
	// span names keyed by registered ids only stay bounded by what the
	// application registers.
	Registered bool
}

// ConfirmationChange is a confirmation request created or resolved.
type ConfirmationChange struct {
	ConfirmationID string
	CapabilityID   string
	// Outcome is empty for a new request, else how it left pending.
	Outcome ConfirmationOutcome
	// RequestedAt is when the request was created; At when this change
	// happened (equal for a new request). Both on the registry's clock.
	RequestedAt time.Time
	At          time.Time
	// Digest identifies what the request binds (spec 06 rule 2) without
	// carrying it: the hex SHA-256 of the canonical digest, which holds
	// the effective input and so has no place in telemetry.
	Digest string
	// Channel and Approver are how the request was resolved, as the
	// host's Resolution says; empty for a new request, an expiry, and a
	// resolution that did not say.
	Channel  Channel
	Approver ApproverKind
	// GrantID is the standing grant the resolution created
	// (Confirmations.ResolveGrant), if any.
	GrantID string
}

// RegistrationChange is a change in the number of live registrations of
// one component type.
type RegistrationChange struct {
	ComponentType string
	// Delta is positive when registrations went live, negative when they
	// went away.
	Delta int
}

// telemetryOf returns the registry's copy of t, or nil when t sets no hook.
func telemetryOf(t *Telemetry) *Telemetry {
	if t == nil || (t.Invocation == nil && t.Confirmation == nil && t.Registrations == nil && t.Grant == nil) {
		return nil
	}
	c := *t
	return &c
}

// The hook's call sites in the pipeline and the registry are one line
// each, marked "observe:", calling a method here that returns at once
// when no hook is set and recovers a panicking hook.

// observeStart starts observing the invocation and returns the context
// the rest of it runs with: ctx, or the one the hook returned.
func (r *Registry) observeStart(ctx context.Context, a *attempt) context.Context {
	if r.opts.Telemetry == nil || r.opts.Telemetry.Invocation == nil {
		return ctx
	}
	info := InvocationInfo{
		CapabilityID: a.inv.CapabilityID, Plane: planeOf(a.inv.CapabilityID), InvocationID: a.id(),
		RegistrationID: a.inv.RegistrationID, ConsumerKind: a.call.Consumer.Kind, ConsumerID: a.call.Consumer.ID,
		ConfirmationID: a.inv.ConfirmationID, Start: a.start,
	}
	var c context.Context
	func() {
		defer r.telemetryPanic("Invocation") // a panicking hook leaves c and a.rec nil
		c, a.rec = r.opts.Telemetry.Invocation(ctx, info)
	}()
	if c == nil {
		return ctx
	}
	return c
}

// planeOf returns the plane an id's prefix names, without parsing the
// rest.
func planeOf(id string) Plane {
	switch {
	case strings.HasPrefix(id, "view:"):
		return PlaneView
	case strings.HasPrefix(id, "domain:"):
		return PlaneDomain
	}
	return ""
}

// observePhase reports a phase the invocation reached to its recorder.
func (r *Registry) observePhase(a *attempt, e PhaseEvent) {
	if a.rec == nil {
		return
	}
	defer r.telemetryPanic("Phase")
	a.rec.Phase(e)
}

// observeResolved reports PhaseResolved for the attempt's target.
func (r *Registry) observeResolved(a *attempt) {
	if a.rec != nil {
		r.observePhase(a, PhaseEvent{Phase: PhaseResolved, Kind: a.cap.def.kind, Effect: a.cap.def.effect,
			RegistrationID: a.reg.id, InstanceID: capRef{a.reg, a.cap}.instance()})
	}
}

// observePresented reports the check of presented evidence: rec is the
// reserved record when it was accepted, pending the request's view when
// it is still pending (PhaseConfirmationRequested follows then), both nil
// when the evidence is invalid.
func (r *Registry) observePresented(a *attempt, id string, rec *confirmRecord, pending *PendingConfirmation) {
	if a.rec == nil {
		return
	}
	e := PhaseEvent{Phase: PhaseConfirmationPresented, ConfirmationID: id}
	switch {
	case rec != nil: // reserved by this call: its view and approval time are fixed
		e.RequestedAt, e.ApprovedAt, e.ExpiresAt = rec.view.RequestedAt, rec.approvedAt, rec.view.ExpiresAt
	case pending != nil:
		e.RequestedAt, e.ExpiresAt = pending.RequestedAt, pending.ExpiresAt
	}
	r.observePhase(a, e)
	if pending != nil {
		r.observePhase(a, requestedPhase(*pending))
	}
}

// requestedPhase is the PhaseConfirmationRequested of a pending request.
func requestedPhase(v PendingConfirmation) PhaseEvent {
	return PhaseEvent{Phase: PhaseConfirmationRequested, ConfirmationID: v.ConfirmationID, RequestedAt: v.RequestedAt, ExpiresAt: v.ExpiresAt}
}

// observeSettled reports the settlement, d after the start.
func (r *Registry) observeSettled(a *attempt, res *Result, d time.Duration) {
	rec := a.rec
	if rec == nil {
		return
	}
	a.rec = nil // exactly once
	registered := a.cap != nil || r.registered(a.inv.CapabilityID)
	defer r.telemetryPanic("Settle")
	rec.Settle(Settlement{Status: res.Status, Error: res.Error, Duration: d, Admission: a.queued, QueueWait: a.queueWait,
		Executed: a.executed, Execution: a.execution, Registered: registered})
}

// telemetryPanic recovers and logs a panic raised by a telemetry hook.
// Call it deferred.
func (r *Registry) telemetryPanic(hook string) {
	if rec := recover(); rec != nil {
		r.opts.Logger.Error("surface: telemetry hook panicked", "hook", hook, "panic", fmt.Sprint(rec))
	}
}

// observeConfirmation reports a confirmation request created (outcome
// "") or resolved: how (res) and with which grant, if any.
func (r *Registry) observeConfirmation(v *PendingConfirmation, digest string, outcome ConfirmationOutcome, at time.Time, res *Resolution, grantID string) {
	if r.opts.Telemetry == nil || r.opts.Telemetry.Confirmation == nil {
		return
	}
	defer r.telemetryPanic("Confirmation")
	sum := sha256.Sum256([]byte(digest))
	c := ConfirmationChange{ConfirmationID: v.ConfirmationID, CapabilityID: v.CapabilityID,
		Outcome: outcome, RequestedAt: v.RequestedAt, At: at, Digest: hex.EncodeToString(sum[:]), GrantID: grantID}
	if res != nil {
		c.Channel, c.Approver = res.Channel, res.Approver
	}
	r.opts.Telemetry.Confirmation(c)
}

// observeGrant reports a grant created, used (by invocation id),
// revoked or expired.
func (r *Registry) observeGrant(ctx context.Context, g *Grant, kind GrantChangeKind, invocationID string) {
	if r.opts.Telemetry == nil || r.opts.Telemetry.Grant == nil {
		return
	}
	defer r.telemetryPanic("Grant")
	at := g.CreatedAt
	if kind != GrantChangeCreated {
		at = r.now()
	}
	r.opts.Telemetry.Grant(ctx, GrantChange{Kind: kind, GrantID: g.GrantID, CapabilityID: g.CapabilityID, InvocationID: invocationID,
		ConfirmationID: g.ConfirmationID, Uses: g.Uses, MaxUses: g.MaxUses, At: at})
}

// observeRegistered reports reg going live and old, if not nil, replaced.
func (r *Registry) observeRegistered(reg, old *registration) {
	if old != nil {
		r.observeUnregistered(old)
	}
	r.registrationsChanged(reg.typ, 1)
}

// observeUnregistered reports reg gone.
func (r *Registry) observeUnregistered(reg *registration) {
	r.registrationsChanged(reg.typ, -1)
}

// liveByType counts live registrations per component type, for Close to
// report with observeClosed once it released the lock; nil without a
// Registrations hook. Call it with r.mu held.
func (r *Registry) liveByType(live []*registration) map[string]int {
	if r.opts.Telemetry == nil || r.opts.Telemetry.Registrations == nil || len(live) == 0 {
		return nil
	}
	n := make(map[string]int)
	for _, reg := range live {
		n[reg.typ]++
	}
	return n
}

// observeClosed reports the registrations Close removed, counted by
// liveByType.
func (r *Registry) observeClosed(gone map[string]int) {
	for typ, n := range gone {
		r.registrationsChanged(typ, -n)
	}
}

func (r *Registry) registrationsChanged(typ string, delta int) {
	if r.opts.Telemetry == nil || r.opts.Telemetry.Registrations == nil {
		return
	}
	defer r.telemetryPanic("Registrations")
	r.opts.Telemetry.Registrations(RegistrationChange{ComponentType: typ, Delta: delta})
}
