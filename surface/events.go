package surface

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
)

// Event is something that happened to the surface. The concrete types are
// [SurfaceChanged], [ComponentRegistered], [ComponentUnregistered],
// [ComponentRejected], [AvailabilityChanged], [InvocationStarted],
// [InvocationSettled], [ConfirmationRequested] and [ConfirmationResolved];
// switch on the type. Each
// marshals to the spec's wire shape with a "type" field first.
type Event interface {
	// EventType is the wire name of the event, e.g. "surface-changed".
	EventType() string
	isEvent()
}

// SurfaceChanged reports a new surface version. Consecutive changes that
// are not yet delivered coalesce into one event carrying the version at
// delivery, after the other events of the batch.
type SurfaceChanged struct {
	SurfaceVersion string `json:"surfaceVersion"`
}

// ComponentRegistered reports a registration going live.
type ComponentRegistered struct {
	RegistrationID string `json:"registrationId"`
	ComponentType  string `json:"componentType"`
	InstanceID     string `json:"instanceId"`
}

// ComponentUnregistered reports a registration removed.
type ComponentUnregistered struct {
	RegistrationID string `json:"registrationId"`
	ComponentType  string `json:"componentType"`
	InstanceID     string `json:"instanceId"`
}

// RejectReason says why a registration was rejected.
type RejectReason string

// Rejection reasons.
const (
	RejectedDuplicate RejectReason = "duplicate"
	RejectedByGuard   RejectReason = "guard"
)

// ComponentRejected reports a registration that got a dead handle.
type ComponentRejected struct {
	ComponentType string       `json:"componentType"`
	InstanceID    string       `json:"instanceId"`
	Reason        RejectReason `json:"reason"`
}

// AvailabilityChanged reports a pushed availability change of one
// capability (Handle.Update overrides, Handle.Refresh).
type AvailabilityChanged struct {
	RegistrationID string `json:"registrationId"`
	CapabilityID   string `json:"capabilityId"`
	Available      bool   `json:"available"`
}

// InvocationStarted reports an invocation that passed the identity phase
// (joins and replays of an earlier call emit nothing).
type InvocationStarted struct {
	InvocationID string `json:"invocationId"`
	CapabilityID string `json:"capabilityId"`
	// ConsumerID is the consumer's id (not its key).
	ConsumerID string `json:"consumerId"`
}

// InvocationSettled reports the outcome of an invocation; it always follows
// its InvocationStarted.
type InvocationSettled struct {
	InvocationID string       `json:"invocationId"`
	CapabilityID string       `json:"capabilityId"`
	Status       ResultStatus `json:"status"`
	Code         Code         `json:"code,omitempty"`
	DurationMs   int64        `json:"durationMs"`
}

// ConfirmationRequested reports a new pending confirmation request.
type ConfirmationRequested struct {
	ConfirmationID string `json:"confirmationId"`
	CapabilityID   string `json:"capabilityId"`
	// ExpiresAt is an ISO-8601 timestamp.
	ExpiresAt string `json:"expiresAt"`
}

// ConfirmationResolved reports how a confirmation request ended; it
// follows its ConfirmationRequested exactly once.
type ConfirmationResolved struct {
	ConfirmationID string              `json:"confirmationId"`
	Outcome        ConfirmationOutcome `json:"outcome"`
}

// CollisionSuspected reports a view capability whose id suffix equals a
// domain procedure path: two confusable tools.
type CollisionSuspected struct {
	ViewCapabilityID  string `json:"viewCapabilityId"`
	DomainProcedureID string `json:"domainProcedureId"`
}

// EventType implements Event.
func (CollisionSuspected) EventType() string { return "collision-suspected" }

func (CollisionSuspected) isEvent() {}

// MarshalJSON implements json.Marshaler.
func (e CollisionSuspected) MarshalJSON() ([]byte, error) {
	type plain CollisionSuspected
	return marshalEvent(e.EventType(), plain(e))
}

// EventType implements Event.
func (ConfirmationRequested) EventType() string { return "confirmation-requested" }

// EventType implements Event.
func (ConfirmationResolved) EventType() string { return "confirmation-resolved" }

func (ConfirmationRequested) isEvent() {}
func (ConfirmationResolved) isEvent()  {}

// MarshalJSON implements json.Marshaler.
func (e ConfirmationRequested) MarshalJSON() ([]byte, error) {
	type plain ConfirmationRequested
	return marshalEvent(e.EventType(), plain(e))
}

// MarshalJSON implements json.Marshaler.
func (e ConfirmationResolved) MarshalJSON() ([]byte, error) {
	type plain ConfirmationResolved
	return marshalEvent(e.EventType(), plain(e))
}

// EventType implements Event.
func (InvocationStarted) EventType() string { return "invocation-started" }

// EventType implements Event.
func (InvocationSettled) EventType() string { return "invocation-settled" }

func (InvocationStarted) isEvent() {}
func (InvocationSettled) isEvent() {}

// MarshalJSON implements json.Marshaler.
func (e InvocationStarted) MarshalJSON() ([]byte, error) {
	type plain InvocationStarted
	return marshalEvent(e.EventType(), plain(e))
}

// MarshalJSON implements json.Marshaler.
func (e InvocationSettled) MarshalJSON() ([]byte, error) {
	type plain InvocationSettled
	return marshalEvent(e.EventType(), plain(e))
}

// emit queues and delivers an event that no mutation carries.
func emit[E Event](r *Registry, e E) {
	if ls := r.listeners.Load(); ls == nil || len(*ls) == 0 {
		return
	}
	r.mu.Lock()
	emitLocked(r, e)
	r.unlockAndDrain()
}

// EventType implements Event.
func (SurfaceChanged) EventType() string { return "surface-changed" }

// EventType implements Event.
func (ComponentRegistered) EventType() string { return "component-registered" }

// EventType implements Event.
func (ComponentUnregistered) EventType() string { return "component-unregistered" }

// EventType implements Event.
func (ComponentRejected) EventType() string { return "component-rejected" }

// EventType implements Event.
func (AvailabilityChanged) EventType() string { return "availability-changed" }

func (SurfaceChanged) isEvent()        {}
func (ComponentRegistered) isEvent()   {}
func (ComponentUnregistered) isEvent() {}
func (ComponentRejected) isEvent()     {}
func (AvailabilityChanged) isEvent()   {}

// MarshalJSON implements json.Marshaler.
func (e SurfaceChanged) MarshalJSON() ([]byte, error) {
	type plain SurfaceChanged
	return marshalEvent(e.EventType(), plain(e))
}

// MarshalJSON implements json.Marshaler.
func (e ComponentRegistered) MarshalJSON() ([]byte, error) {
	type plain ComponentRegistered
	return marshalEvent(e.EventType(), plain(e))
}

// MarshalJSON implements json.Marshaler.
func (e ComponentUnregistered) MarshalJSON() ([]byte, error) {
	type plain ComponentUnregistered
	return marshalEvent(e.EventType(), plain(e))
}

// MarshalJSON implements json.Marshaler.
func (e ComponentRejected) MarshalJSON() ([]byte, error) {
	type plain ComponentRejected
	return marshalEvent(e.EventType(), plain(e))
}

// MarshalJSON implements json.Marshaler.
func (e AvailabilityChanged) MarshalJSON() ([]byte, error) {
	type plain AvailabilityChanged
	return marshalEvent(e.EventType(), plain(e))
}

// marshalEvent encodes fields (a struct without methods) with a leading
// "type" member.
func marshalEvent(typ string, fields any) ([]byte, error) {
	body, err := json.Marshal(fields)
	if err != nil {
		return nil, err
	}
	var b bytes.Buffer
	b.WriteString(`{"type":`)
	t, _ := json.Marshal(typ)
	b.Write(t)
	if len(body) > 2 {
		b.WriteByte(',')
		b.Write(body[1:])
	} else {
		b.WriteByte('}')
	}
	return b.Bytes(), nil
}

type listener struct{ fn func(Event) }

// Subscribe registers fn for every later event and returns a function that
// unsubscribes it (safe to call more than once).
//
// Delivery guarantees:
//   - Events are delivered one at a time, in the total order of the
//     mutations that caused them, after the mutation completed (the
//     registry lock is not held).
//   - Each event goes to the listeners subscribed when its delivery starts.
//   - A listener that panics is recovered and logged; other listeners and
//     the registry are unaffected.
//   - A mutation made from inside a listener is applied at once, but its
//     events are queued behind the current one, never delivered nested.
//   - Pending surface-changed events coalesce: at most one is queued, at the
//     tail, and it carries the version current at its delivery, so the
//     versions a listener sees only increase.
//
// Listeners run on the goroutine that made the mutation (or on one that was
// already delivering); a slow listener delays that goroutine. No
// surface-changed is delivered after Close, and Close drops all listeners.
func (r *Registry) Subscribe(fn func(Event)) (unsubscribe func()) {
	l := &listener{fn: fn}
	r.mu.Lock()
	if !r.closed {
		var next []*listener
		if cur := r.listeners.Load(); cur != nil {
			next = slices.Clone(*cur)
		}
		next = append(next, l)
		r.listeners.Store(&next)
	}
	r.mu.Unlock()
	return func() {
		r.mu.Lock()
		defer r.mu.Unlock()
		cur := r.listeners.Load()
		if cur == nil {
			return
		}
		if i := slices.Index(*cur, l); i >= 0 {
			next := slices.Delete(slices.Clone(*cur), i, i+1)
			r.listeners.Store(&next)
		}
	}
}

// emitLocked queues e for delivery, if anyone listens (a later subscriber
// does not see the past). It is generic so that e is boxed only when it is
// queued. A SurfaceChanged is a placeholder whose version is filled in at
// delivery; only one is ever queued, at the tail.
func emitLocked[E Event](r *Registry, ev E) {
	if ls := r.listeners.Load(); ls == nil || len(*ls) == 0 {
		return
	}
	var e Event = ev
	if _, sc := e.(SurfaceChanged); sc {
		if r.scPending {
			i := slices.IndexFunc(r.queue, func(q Event) bool { _, ok := q.(SurfaceChanged); return ok })
			r.queue = slices.Delete(r.queue, i, i+1)
		}
		r.scPending = true
	}
	r.queue = append(r.queue, e)
}

// unlockAndDrain releases r.mu, which the caller holds, and delivers the
// queued events unless another goroutine is already delivering them.
func (r *Registry) unlockAndDrain() {
	if r.draining || len(r.queue) == 0 {
		r.mu.Unlock()
		return
	}
	r.draining = true
	for len(r.queue) > 0 {
		e := r.queue[0]
		r.queue[0] = nil
		r.queue = r.queue[1:]
		if _, sc := e.(SurfaceChanged); sc {
			r.scPending = false
			e = SurfaceChanged{SurfaceVersion: strconv.FormatUint(r.version.Load(), 10)}
		}
		r.mu.Unlock()
		r.deliver(e)
		r.mu.Lock()
	}
	r.queue = nil
	r.draining = false
	r.mu.Unlock()
}

func (r *Registry) deliver(e Event) {
	ls := r.listeners.Load()
	if ls == nil {
		return
	}
	for _, l := range *ls {
		r.call(l, e)
	}
}

func (r *Registry) call(l *listener, e Event) {
	defer func() {
		if p := recover(); p != nil {
			r.log.Error("surface: event listener panicked", "event", e.EventType(), "panic", fmt.Sprint(p))
		}
	}()
	l.fn(e)
}
