package surface

import (
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
)

// Event is something that happened to the surface. The concrete types are
// [SurfaceChanged], [ComponentRegistered], [ComponentUnregistered],
// [ComponentRejected], [AvailabilityChanged], [CollisionSuspected],
// [InvocationStarted], [InvocationSettled], [ConfirmationRequested] and
// [ConfirmationResolved]; switch on the type. Each marshals to the spec's
// wire shape with a "type" field first.
type Event interface {
	// EventType is the wire name of the event, e.g. "surface-changed".
	EventType() string
	kind() eventKind
}

// eventKind is an event type as a bit of a subscription's mask.
type eventKind uint16

const (
	kindSurfaceChanged eventKind = 1 << iota
	kindComponentRegistered
	kindComponentUnregistered
	kindComponentRejected
	kindAvailabilityChanged
	kindCollisionSuspected
	kindInvocationStarted
	kindInvocationSettled
	kindConfirmationRequested
	kindConfirmationResolved

	allEventKinds eventKind = 1<<iota - 1
)

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
	RejectReasonDuplicate RejectReason = "duplicate"
	RejectReasonGuard     RejectReason = "guard"
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
func (SurfaceChanged) EventType() string { return "surface-changed" }

// MarshalJSON encodes the event with its "type" first.
func (e SurfaceChanged) MarshalJSON() ([]byte, error) {
	type plain SurfaceChanged
	return marshalEvent(e, plain(e))
}

func (SurfaceChanged) kind() eventKind { return kindSurfaceChanged }

// EventType implements Event.
func (ComponentRegistered) EventType() string { return "component-registered" }

// MarshalJSON encodes the event with its "type" first.
func (e ComponentRegistered) MarshalJSON() ([]byte, error) {
	type plain ComponentRegistered
	return marshalEvent(e, plain(e))
}

func (ComponentRegistered) kind() eventKind { return kindComponentRegistered }

// EventType implements Event.
func (ComponentUnregistered) EventType() string { return "component-unregistered" }

// MarshalJSON encodes the event with its "type" first.
func (e ComponentUnregistered) MarshalJSON() ([]byte, error) {
	type plain ComponentUnregistered
	return marshalEvent(e, plain(e))
}

func (ComponentUnregistered) kind() eventKind { return kindComponentUnregistered }

// EventType implements Event.
func (ComponentRejected) EventType() string { return "component-rejected" }

// MarshalJSON encodes the event with its "type" first.
func (e ComponentRejected) MarshalJSON() ([]byte, error) {
	type plain ComponentRejected
	return marshalEvent(e, plain(e))
}

func (ComponentRejected) kind() eventKind { return kindComponentRejected }

// EventType implements Event.
func (AvailabilityChanged) EventType() string { return "availability-changed" }

// MarshalJSON encodes the event with its "type" first.
func (e AvailabilityChanged) MarshalJSON() ([]byte, error) {
	type plain AvailabilityChanged
	return marshalEvent(e, plain(e))
}

func (AvailabilityChanged) kind() eventKind { return kindAvailabilityChanged }

// EventType implements Event.
func (CollisionSuspected) EventType() string { return "collision-suspected" }

// MarshalJSON encodes the event with its "type" first.
func (e CollisionSuspected) MarshalJSON() ([]byte, error) {
	type plain CollisionSuspected
	return marshalEvent(e, plain(e))
}

func (CollisionSuspected) kind() eventKind { return kindCollisionSuspected }

// EventType implements Event.
func (InvocationStarted) EventType() string { return "invocation-started" }

// MarshalJSON encodes the event with its "type" first.
func (e InvocationStarted) MarshalJSON() ([]byte, error) {
	type plain InvocationStarted
	return marshalEvent(e, plain(e))
}

func (InvocationStarted) kind() eventKind { return kindInvocationStarted }

// EventType implements Event.
func (InvocationSettled) EventType() string { return "invocation-settled" }

// MarshalJSON encodes the event with its "type" first.
func (e InvocationSettled) MarshalJSON() ([]byte, error) {
	type plain InvocationSettled
	return marshalEvent(e, plain(e))
}

func (InvocationSettled) kind() eventKind { return kindInvocationSettled }

// EventType implements Event.
func (ConfirmationRequested) EventType() string { return "confirmation-requested" }

// MarshalJSON encodes the event with its "type" first.
func (e ConfirmationRequested) MarshalJSON() ([]byte, error) {
	type plain ConfirmationRequested
	return marshalEvent(e, plain(e))
}

func (ConfirmationRequested) kind() eventKind { return kindConfirmationRequested }

// EventType implements Event.
func (ConfirmationResolved) EventType() string { return "confirmation-resolved" }

// MarshalJSON encodes the event with its "type" first.
func (e ConfirmationResolved) MarshalJSON() ([]byte, error) {
	type plain ConfirmationResolved
	return marshalEvent(e, plain(e))
}

func (ConfirmationResolved) kind() eventKind { return kindConfirmationResolved }

// marshalEvent encodes the fields of e (a copy of it without methods)
// after a leading "type" member.
func marshalEvent(e Event, fields any) ([]byte, error) {
	body, err := json.Marshal(fields)
	if err != nil {
		return nil, err
	}
	b := []byte(`{"type":"` + e.EventType() + `"`)
	if len(body) > 2 {
		b = append(b, ',')
	}
	return append(b, body[1:]...), nil
}

// listener is a subscriber and the event kinds it wants.
type listener struct {
	fn    func(Event)
	wants eventKind
}

// Subscribe registers fn for every later event and returns a function that
// unsubscribes it (safe to call more than once). [Registry.SubscribeTo]
// subscribes to some event types only.
//
// Delivery guarantees:
//   - Events are delivered one at a time, in the total order in which
//     they were emitted, after the mutation that caused them completed
//     (no registry lock is held).
//   - Each event goes to the listeners subscribed when its delivery starts.
//   - A listener that panics is recovered and logged; other listeners and
//     the registry are unaffected.
//   - A mutation made from inside a listener is applied at once, but its
//     events are queued behind the current one, never delivered nested.
//   - Pending surface-changed events coalesce: at most one is queued, at the
//     tail, and it carries the version current at its delivery, so the
//     versions a listener sees only increase. [Registry.Batch] groups a
//     burst of mutations into one.
//
// Listeners run on the goroutine that emitted the event (or on one that
// was already delivering); a slow listener delays that goroutine. No
// surface-changed is delivered after Close, and Close drops all listeners.
func (r *Registry) Subscribe(fn func(Event)) (unsubscribe func()) {
	return r.subscribe(fn, allEventKinds)
}

// SubscribeTo is [Registry.Subscribe] for the given event types only, named
// by their zero values:
//
//	reg.SubscribeTo(refresh, surface.SurfaceChanged{})
//
// An adapter that only follows surface changes does not make invocations
// emit events. Without types it subscribes to nothing.
func (r *Registry) SubscribeTo(fn func(Event), types ...Event) (unsubscribe func()) {
	var wants eventKind
	for _, t := range types {
		wants |= t.kind()
	}
	return r.subscribe(fn, wants)
}

func (r *Registry) subscribe(fn func(Event), wants eventKind) (unsubscribe func()) {
	return subscribe(&r.evMu, &r.listeners, listener{fn: fn, wants: wants}, func() bool { return !r.closing() })
}

// wantsLocked reports whether some listener wants events of kind k.
func (r *Registry) wantsLocked(k eventKind) bool {
	return slices.ContainsFunc(r.listeners, func(l *listener) bool { return l.wants&k != 0 })
}

// Batch runs fn and delivers the events of the mutations it makes (from
// any goroutine) when it returns, so that a burst of mutations — a page
// mounting ten components — yields one surface-changed carrying the final
// version. Delivery of other events waits for the batch too; batches may
// nest. fn must not wait for a listener.
func (r *Registry) Batch(fn func()) {
	r.evMu.Lock()
	r.batches++
	r.evMu.Unlock()
	defer func() {
		r.evMu.Lock()
		r.batches--
		r.evMu.Unlock()
		r.drain()
	}()
	fn()
}

// emit queues and delivers an event that no mutation carries (invocation,
// confirmation and lint events), without the registry lock; nothing when
// no listener wants it. It is generic so that e is boxed only when queued.
func emit[E Event](r *Registry, e E) {
	r.evMu.Lock()
	wanted := r.wantsLocked(e.kind())
	if wanted {
		r.enqueueLocked(e)
	}
	r.evMu.Unlock()
	if wanted {
		r.drain()
	}
}

// emitLocked records an event of the mutation in progress, under r.mu; it
// is queued when the mutation ends, by unlockAndDrain, so it is never
// delivered before the mutation completed. A SurfaceChanged is a
// placeholder whose version is filled in at delivery.
func emitLocked[E Event](r *Registry, e E) {
	r.evMu.Lock()
	wanted := r.wantsLocked(e.kind())
	r.evMu.Unlock()
	if wanted {
		r.pending = append(r.pending, e)
	}
}

// enqueueLocked appends e to the delivery queue, under evMu, keeping at
// most one SurfaceChanged, at the tail.
func (r *Registry) enqueueLocked(e Event) {
	if isSurfaceChanged(e) {
		r.queue = slices.DeleteFunc(r.queue, isSurfaceChanged)
	}
	r.queue = append(r.queue, e)
}

func isSurfaceChanged(e Event) bool {
	_, ok := e.(SurfaceChanged)
	return ok
}

// unlockAndDrain ends a mutation: it queues the mutation's events,
// releases r.mu, which the caller holds, and delivers the queue unless
// another goroutine already is or a batch is open. A surface-changed
// carries the version of the last mutation whose events were queued, so
// the versions delivered only increase.
func (r *Registry) unlockAndDrain() {
	if len(r.pending) > 0 {
		r.evMu.Lock()
		for _, e := range r.pending {
			r.enqueueLocked(e)
		}
		r.queuedVersion = r.version.Load() // no mutation can bump it meanwhile: we hold mu
		r.evMu.Unlock()
		clear(r.pending)
		r.pending = r.pending[:0]
	}
	r.mu.Unlock()
	r.drain()
}

// drain delivers the queued events one at a time, unless another
// goroutine is delivering them or a batch is open.
func (r *Registry) drain() {
	r.evMu.Lock()
	if r.draining {
		r.evMu.Unlock()
		return
	}
	r.draining = true
	for len(r.queue) > 0 && r.batches == 0 {
		e := r.queue[0]
		r.queue[0] = nil
		r.queue = r.queue[1:]
		if isSurfaceChanged(e) {
			e = SurfaceChanged{SurfaceVersion: strconv.FormatUint(r.queuedVersion, 10)}
		}
		ls := r.listeners
		r.evMu.Unlock()
		r.deliver(e, ls)
		r.evMu.Lock()
	}
	if len(r.queue) == 0 {
		r.queue = nil
	}
	r.draining = false
	r.evMu.Unlock()
}

func (r *Registry) deliver(e Event, ls []*listener) {
	k := e.kind()
	for _, l := range ls {
		if l.wants&k != 0 {
			r.call(l, e)
		}
	}
}

func (r *Registry) call(l *listener, e Event) {
	defer func() {
		if p := recover(); p != nil {
			r.opts.Logger.Error("surface: event listener panicked", "event", e.EventType(), "panic", fmt.Sprint(p))
		}
	}()
	l.fn(e)
}
