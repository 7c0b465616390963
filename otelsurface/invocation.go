package otelsurface

import (
	"context"
	"sync"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/agentsurface/agentsurface/surface"
)

// Attribute keys (see the package documentation).
const (
	keyCapabilityID        attribute.Key = "agentsurface.capability.id"
	keyCapabilityKind      attribute.Key = "agentsurface.capability.kind"
	keyCapabilityEffect    attribute.Key = "agentsurface.capability.effect"
	keyCapabilityPlane     attribute.Key = "agentsurface.capability.plane"
	keyConsumerKind        attribute.Key = "agentsurface.consumer.kind"
	keyConsumerID          attribute.Key = "agentsurface.consumer.id"
	keyRegistrationID      attribute.Key = "agentsurface.registration.id"
	keyInstanceID          attribute.Key = "agentsurface.instance.id"
	keyInvocationID        attribute.Key = "agentsurface.invocation.id"
	keyResultStatus        attribute.Key = "agentsurface.result.status"
	keyErrorCode           attribute.Key = "agentsurface.error.code"
	keyErrorRetry          attribute.Key = "agentsurface.error.retry"
	keyErrorType           attribute.Key = "error.type"
	keyConfirmationID      attribute.Key = "agentsurface.confirmation.id"
	keyConfirmationWait    attribute.Key = "agentsurface.confirmation.wait"
	keyConfirmationOutcome attribute.Key = "agentsurface.confirmation.outcome"
	keyConfirmationOK      attribute.Key = "agentsurface.confirmation.accepted"
	keyQueueWait           attribute.Key = "agentsurface.queue.wait"
	keyComponentType       attribute.Key = "agentsurface.component.type"
)

// Span event names.
const (
	eventQueued                = "queued"
	eventAdmitted              = "admitted"
	eventConfirmationRequested = "confirmation.requested"
	eventConfirmationPresented = "confirmation.presented"
	eventExecutionStarted      = "execution.started"
)

// otherCapability stands for capability ids that name nothing in metric
// attributes: agents may send any string, and a series per string would
// be unbounded.
const otherCapability = "_OTHER"

// invocation is the recorder of one invocation: its span and what its
// metrics need. Its methods are called one at a time.
type invocation struct {
	i              *Instrumentation
	span           trace.Span
	capability     string // as requested
	registrationID string // as requested; the resolved one replaces it
	kind           string // once resolved
	consumerKind   string
	resolved       bool
}

// startInvocation is the Observer's Invocation hook: it starts the span,
// a child of ctx's, linked to the span that requested the confirmation
// the call presents, if any. Samplers see the span's name, which carries
// the capability id, and the link; the attributes are set once the span
// records, so that a tracer that records nothing costs next to nothing.
func (i *Instrumentation) startInvocation(ctx context.Context, info surface.InvocationInfo) (context.Context, surface.InvocationRecorder) {
	name := "invoke"
	if info.Plane != "" { // a well-formed id: a capability's name, not any string
		name = "invoke " + info.CapabilityID
	}
	var span trace.Span
	if info.ConfirmationID == "" {
		ctx, span = i.tracer.Start(ctx, name)
	} else {
		var opts []trace.SpanStartOption
		if sc, ok := i.links.get(info.ConfirmationID); ok {
			opts = append(opts, trace.WithLinks(trace.Link{SpanContext: sc, Attributes: []attribute.KeyValue{keyConfirmationID.String(info.ConfirmationID)}}))
		}
		ctx, span = i.tracer.Start(ctx, name, opts...)
	}
	if !span.IsRecording() {
		if !span.SpanContext().IsValid() && !i.metricsEnabled(ctx) {
			return ctx, nil // nothing to record: no phases, no settlement
		}
	} else {
		attrs := make([]attribute.KeyValue, 0, 8)
		attrs = append(attrs,
			keyCapabilityID.String(info.CapabilityID),
			keyInvocationID.String(info.InvocationID),
			keyConsumerKind.String(string(info.ConsumerKind)))
		if info.Plane != "" {
			attrs = append(attrs, keyCapabilityPlane.String(string(info.Plane)))
		}
		if i.consumerID {
			attrs = append(attrs, keyConsumerID.String(info.ConsumerID))
		}
		if info.ConfirmationID != "" {
			attrs = append(attrs, keyConfirmationID.String(info.ConfirmationID))
		}
		span.SetAttributes(attrs...)
	}
	return ctx, &invocation{i: i, span: span, capability: info.CapabilityID, registrationID: info.RegistrationID, consumerKind: string(info.ConsumerKind)}
}

// metricsEnabled reports whether any invocation metric records.
func (i *Instrumentation) metricsEnabled(ctx context.Context) bool {
	return i.invocations.Enabled(ctx) || i.duration.Enabled(ctx) || i.queueWait.Enabled(ctx)
}

// Phase records a phase as span attributes or events.
func (v *invocation) Phase(e surface.PhaseEvent) {
	if e.Phase == surface.PhaseResolved {
		v.resolved, v.kind = true, string(e.Kind)
	}
	if !v.span.IsRecording() {
		if e.Phase == surface.PhaseConfirmationRequested && v.span.SpanContext().IsValid() {
			v.i.links.put(e.ConfirmationID, v.span.SpanContext(), e.ExpiresAt, e.RequestedAt)
		}
		return
	}
	switch e.Phase {
	case surface.PhaseResolved:
		attrs := []attribute.KeyValue{
			keyCapabilityKind.String(string(e.Kind)),
			keyCapabilityEffect.String(string(e.Effect)),
			keyRegistrationID.String(e.RegistrationID),
		}
		if e.InstanceID != "" {
			attrs = append(attrs, keyInstanceID.String(e.InstanceID))
		}
		v.span.SetAttributes(attrs...)
	case surface.PhaseConfirmationPresented:
		accepted := !e.ApprovedAt.IsZero()
		v.span.AddEvent(eventConfirmationPresented, trace.WithAttributes(
			keyConfirmationID.String(e.ConfirmationID), keyConfirmationOK.Bool(accepted)))
		if accepted {
			// The human's wait: from the request to the approval.
			v.span.SetAttributes(keyConfirmationWait.Float64(seconds(e.ApprovedAt.Sub(e.RequestedAt))))
			v.i.links.drop(e.ConfirmationID) // spent by this call
		}
	case surface.PhaseConfirmationRequested:
		v.span.AddEvent(eventConfirmationRequested, trace.WithAttributes(
			keyConfirmationID.String(e.ConfirmationID),
			attribute.String("agentsurface.confirmation.expires_at", e.ExpiresAt.UTC().Format(time.RFC3339Nano))))
		v.span.SetAttributes(keyConfirmationID.String(e.ConfirmationID))
		v.i.links.put(e.ConfirmationID, v.span.SpanContext(), e.ExpiresAt, e.RequestedAt)
	case surface.PhaseQueued:
		v.span.AddEvent(eventQueued)
	case surface.PhaseAdmitted:
		v.span.AddEvent(eventAdmitted, trace.WithAttributes(keyQueueWait.Float64(seconds(e.QueueWait))))
	case surface.PhaseExecuting:
		v.span.AddEvent(eventExecutionStarted)
	}
}

// operatorError reports whether a code is a failure an operator must look
// at (the span's status is Error); refusals an agent caused are not.
func operatorError(c surface.Code) bool {
	return c == surface.ExecutionFailed || c == surface.Timeout
}

// Settle ends the span and records the metrics.
func (v *invocation) Settle(s surface.Settlement) {
	var code surface.Code
	if s.Error != nil {
		code = s.Error.Code
	}
	ctx := context.Background()
	if v.span.IsRecording() {
		attrs := []attribute.KeyValue{keyResultStatus.String(string(s.Status))}
		if s.Error != nil {
			attrs = append(attrs, keyErrorCode.String(string(code)), keyErrorRetry.String(string(s.Error.Retry)))
		}
		if operatorError(code) {
			attrs = append(attrs, keyErrorType.String(string(code)))
			v.span.SetStatus(codes.Error, string(code))
		}
		if !v.resolved {
			if code == surface.CapabilityNotFound {
				v.span.SetName("invoke") // the id names nothing: keep span names bounded
			}
			if v.registrationID != "" { // the stale or unknown one the caller sent
				attrs = append(attrs, keyRegistrationID.String(v.registrationID))
			}
		}
		v.span.SetAttributes(attrs...)
		ctx = trace.ContextWithSpan(ctx, v.span) // for exemplars
	}
	v.span.End()

	capability := v.capability
	if !v.resolved && code == surface.CapabilityNotFound {
		capability = otherCapability
	}
	i := v.i
	if i.invocations.Enabled(ctx) || i.duration.Enabled(ctx) {
		m := i.sets.get(setKey{capability: capability, kind: v.kind, consumerKind: v.consumerKind, status: string(s.Status), code: string(code)})
		i.invocations.Add(ctx, 1, m.add...)
		i.duration.Record(ctx, seconds(s.Duration), m.rec...)
	}
	if s.Admission && i.queueWait.Enabled(ctx) {
		i.queueWait.Record(ctx, seconds(s.QueueWait), i.sets.get(setKey{capability: capability, kind: v.kind}).rec...)
	}
}

// maxLinks bounds the span contexts kept for confirmation links: one per
// request still awaiting its retry.
const maxLinks = 4096

// linkStore remembers, per confirmation id, the span of the invocation
// that requested it, so the retry presenting the evidence links to it.
// An entry goes when the evidence is accepted, the request is denied or
// expires, or its approval lapses (pruned when newer requests arrive),
// and the oldest goes first when the store is full.
type linkStore struct {
	mu    sync.Mutex
	byID  map[string]linkEntry
	order []string // ids in insertion order; may hold dropped ones
}

type linkEntry struct {
	sc      trace.SpanContext
	expires time.Time
}

func (s *linkStore) put(id string, sc trace.SpanContext, expires, now time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.byID[id]; ok {
		return // an identical pending request: keep the first requester
	}
	if s.byID == nil {
		s.byID = make(map[string]linkEntry)
	}
	// Drop what lapsed or is gone from the front, then make room.
	for len(s.order) > 0 {
		e, ok := s.byID[s.order[0]]
		if ok && e.expires.After(now) && len(s.byID) < maxLinks {
			break
		}
		delete(s.byID, s.order[0])
		s.order = s.order[1:]
	}
	s.byID[id] = linkEntry{sc: sc, expires: expires}
	s.order = append(s.order, id)
	if len(s.order) > 2*maxLinks { // dropped ids pile up: compact
		live := make([]string, 0, len(s.byID))
		for _, x := range s.order {
			if _, ok := s.byID[x]; ok {
				live = append(live, x)
			}
		}
		s.order = live
	}
}

func (s *linkStore) get(id string) (trace.SpanContext, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	e, ok := s.byID[id]
	return e.sc, ok
}

func (s *linkStore) drop(id string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.byID, id)
}

// len returns the number of entries, for tests.
func (s *linkStore) len() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.byID)
}
