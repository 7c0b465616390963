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
	keyCapabilityID          attribute.Key = "agentsurface.capability.id"
	keyCapabilityKind        attribute.Key = "agentsurface.capability.kind"
	keyCapabilityEffect      attribute.Key = "agentsurface.capability.effect"
	keyCapabilityPlane       attribute.Key = "agentsurface.capability.plane"
	keyConsumerKind          attribute.Key = "agentsurface.consumer.kind"
	keyConsumerID            attribute.Key = "agentsurface.consumer.id"
	keyRegistrationID        attribute.Key = "agentsurface.registration.id"
	keyInstanceID            attribute.Key = "agentsurface.instance.id"
	keyInvocationID          attribute.Key = "agentsurface.invocation.id"
	keyResultStatus          attribute.Key = "agentsurface.result.status"
	keyErrorCode             attribute.Key = "agentsurface.error.code"
	keyErrorRetry            attribute.Key = "agentsurface.error.retry"
	keyErrorType             attribute.Key = "error.type"
	keyConfirmationID        attribute.Key = "agentsurface.confirmation.id"
	keyConfirmationWait      attribute.Key = "agentsurface.confirmation.wait"
	keyConfirmationOutcome   attribute.Key = "agentsurface.confirmation.outcome"
	keyConfirmationOK        attribute.Key = "agentsurface.confirmation.accepted"
	keyConfirmationExpiresAt attribute.Key = "agentsurface.confirmation.expires_at"
	keyQueueWait             attribute.Key = "agentsurface.queue.wait"
	keyComponentType         attribute.Key = "agentsurface.component.type"
	keyConfirmationDecision  attribute.Key = "agentsurface.confirmation.decision"
	keyConfirmationChannel   attribute.Key = "agentsurface.confirmation.channel"
	keyConfirmationApprover  attribute.Key = "agentsurface.confirmation.approver"
	keyConfirmationDigest    attribute.Key = "agentsurface.confirmation.digest"
	keyGrantID               attribute.Key = "agentsurface.grant.id"
	keyGrantUses             attribute.Key = "agentsurface.grant.uses"
	keyGrantMaxUses          attribute.Key = "agentsurface.grant.max_uses"
)

// decisionGranted is the decision of a confirmation span whose question a
// standing grant skipped.
const decisionGranted = "granted"

// Span event names.
const (
	eventQueued                = "queued"
	eventAdmitted              = "admitted"
	eventConfirmationRequested = "confirmation.requested"
	eventConfirmationPresented = "confirmation.presented"
	eventExecutionStarted      = "execution.started"
	eventGrantPrefix           = "grant." // + created, used, revoked, expired
)

// confirmationSpanPrefix begins the name of a confirmation span; the
// capability id follows (always of a registered capability: only
// resolved calls ask).
const confirmationSpanPrefix = "confirmation "

// otherCapability stands, in metric attributes, for every capability id
// that is not of a registered capability: callers choose the ids they
// send (agents in meta mode, Go callers), and a series per id would be
// unbounded.
const otherCapability = "_OTHER"

// genericSpanName is the name of an invocation's span whose capability id
// is not known to be registered.
const genericSpanName = "invoke"

// invocation is the recorder of one invocation: its span and what its
// attributes and metrics need. The span's attributes are set once, at
// settlement, which costs the SDK one allocation instead of one per call.
// Its methods are called one at a time.
type invocation struct {
	i        *Instrumentation
	span     trace.Span
	info     surface.InvocationInfo
	resolved surface.PhaseEvent // its Phase is set once resolved
	asked    string             // the confirmation this call requested
	wait     time.Duration      // the human's, when evidence was accepted
	accepted bool
	named    bool   // the span's name carries the capability id
	grant    string // the standing grant that let the call skip its question
}

// startInvocation is the Telemetry's Invocation hook: it starts the span,
// a child of ctx's, linked to the span that requested the confirmation
// the call presents, if any. Samplers see the span's name, which carries
// the capability id once this Instrumentation has seen it registered
// (a call resolved it, or the registry said so at settlement), and the
// link; a span started as "invoke" is renamed when the id turns out to be
// registered, so span names carry only ids of registered capabilities.
// The attributes are set at settlement, and only when the span records,
// so that a tracer that records nothing costs next to nothing.
func (i *Instrumentation) startInvocation(ctx context.Context, info surface.InvocationInfo) (context.Context, surface.InvocationRecorder) {
	name, named := i.names.known(info.CapabilityID)
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
	if !span.IsRecording() && !span.SpanContext().IsValid() && !i.metricsEnabled(ctx) {
		return ctx, nil // nothing to record: no phases, no settlement
	}
	return ctx, &invocation{i: i, span: span, info: info, named: named}
}

// maxCachedNames bounds the span names kept: enough for the capabilities
// of an application.
const maxCachedNames = 1024

// nameCache keeps "invoke " + id for the ids of registered capabilities
// this Instrumentation has seen, sparing a string per invocation and
// telling which ids span names may carry before the call settles. Only
// registered ids are learnt, so ids callers make up never enter it.
// Lookups are reads of a sync.Map, whose keys are stable here; inserts
// take mu.
type nameCache struct {
	m  sync.Map // capability id → span name
	mu sync.Mutex
	n  int // entries in m; mu
}

// known returns the span name of id and true when id is known to be
// registered, else the generic name and false.
func (c *nameCache) known(id string) (string, bool) {
	if v, ok := c.m.Load(id); ok {
		return v.(string), true
	}
	return genericSpanName, false
}

// learn returns the span name of id, the id of a registered capability,
// and remembers it while the cache has room.
func (c *nameCache) learn(id string) string {
	if v, ok := c.m.Load(id); ok {
		return v.(string)
	}
	name := "invoke " + id
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.n < maxCachedNames {
		if _, loaded := c.m.LoadOrStore(id, name); !loaded {
			c.n++
		}
	}
	return name
}

// metricsEnabled reports whether any invocation metric records.
func (i *Instrumentation) metricsEnabled(ctx context.Context) bool {
	return i.invocations.Enabled(ctx) || i.duration.Enabled(ctx) || i.queueWait.Enabled(ctx)
}

// Phase records a phase: span events, and what the attributes will say.
func (v *invocation) Phase(e surface.PhaseEvent) {
	recording := v.span.IsRecording()
	switch e.Phase {
	case surface.PhaseResolved:
		v.resolved = e
		v.rename(true) // a resolved id is registered
	case surface.PhaseConfirmationPresented:
		accepted := !e.ApprovedAt.IsZero()
		if accepted {
			v.wait, v.accepted = e.ApprovedAt.Sub(e.RequestedAt), true // the human's: from the request to the approval
			v.i.links.drop(e.ConfirmationID)                           // spent by this call
		}
		if recording {
			v.span.AddEvent(eventConfirmationPresented, trace.WithAttributes(
				keyConfirmationID.String(e.ConfirmationID), keyConfirmationOK.Bool(accepted)))
		}
	case surface.PhaseConfirmationRequested:
		v.asked = e.ConfirmationID
		if sc := v.span.SpanContext(); sc.IsValid() {
			v.i.links.put(e.ConfirmationID, sc, e.ExpiresAt, e.RequestedAt)
		}
		if recording {
			v.span.AddEvent(eventConfirmationRequested, trace.WithAttributes(
				keyConfirmationID.String(e.ConfirmationID),
				keyConfirmationExpiresAt.String(e.ExpiresAt.UTC().Format(time.RFC3339Nano))))
		}
	case surface.PhaseQueued:
		if recording {
			v.span.AddEvent(eventQueued)
		}
	case surface.PhaseAdmitted:
		if recording {
			v.span.AddEvent(eventAdmitted, trace.WithAttributes(keyQueueWait.Float64(seconds(e.QueueWait))))
		}
	case surface.PhaseExecuting:
		if recording {
			v.span.AddEvent(eventExecutionStarted)
		}
	case surface.PhaseConfirmationGranted:
		v.grant = e.GrantID
		if recording {
			v.i.grantedSpan(v, e.GrantID)
		}
	}
}

// grantedSpan records the question a standing grant skipped as the
// call's confirmation span: a child of the invocation's, of no duration,
// with the decision "granted" and the grant's id.
func (i *Instrumentation) grantedSpan(v *invocation, grantID string) {
	ctx := trace.ContextWithSpan(context.Background(), v.span)
	_, span := i.tracer.Start(ctx, confirmationSpanPrefix+v.info.CapabilityID)
	if span.IsRecording() {
		span.SetAttributes(keyCapabilityID.String(v.info.CapabilityID), keyConfirmationDecision.String(decisionGranted), keyGrantID.String(grantID))
	}
	span.End()
}

// rename names the span after its capability when the id is registered,
// and generically when it is not, so that span names carry only ids of
// registered capabilities.
func (v *invocation) rename(registered bool) {
	switch {
	case registered && !v.named:
		v.span.SetName(v.i.names.learn(v.info.CapabilityID))
		v.named = true
	case !registered && v.named:
		v.span.SetName(genericSpanName)
		v.named = false
	}
}

// operatorError reports whether a code is a failure an operator must look
// at (the span's status is Error); refusals an agent caused are not.
func operatorError(c surface.Code) bool {
	return c == surface.CodeExecutionFailed || c == surface.CodeTimeout
}

// Settle sets the span's attributes and status, ends it, and records the
// metrics.
func (v *invocation) Settle(s surface.Settlement) {
	var code surface.Code
	if s.Error != nil {
		code = s.Error.Code
	}
	resolved := v.resolved.Phase == surface.PhaseResolved
	registered := resolved || s.Registered
	ctx := context.Background()
	v.rename(registered)
	if v.span.IsRecording() {
		v.span.SetAttributes(v.attributes(s, code, resolved)...)
		if operatorError(code) {
			v.span.SetStatus(codes.Error, string(code))
		}
		ctx = trace.ContextWithSpan(ctx, v.span) // for exemplars
	}
	v.span.End()

	capability := v.info.CapabilityID // the span's attribute keeps it whatever it is
	if !registered {
		capability = otherCapability // made up: keep series bounded
	}
	i, kind := v.i, string(v.resolved.Kind)
	if i.invocations.Enabled(ctx) || i.duration.Enabled(ctx) {
		m := i.sets.get(setKey{capability: capability, kind: kind, consumerKind: string(v.info.ConsumerKind), status: string(s.Status), code: string(code)})
		i.invocations.Add(ctx, 1, m.add...)
		i.duration.Record(ctx, seconds(s.Duration), m.rec...)
	}
	if s.Admission && i.queueWait.Enabled(ctx) {
		i.queueWait.Record(ctx, seconds(s.QueueWait), i.sets.get(setKey{capability: capability, kind: kind}).rec...)
	}
}

// attributes are the span's attributes at settlement.
func (v *invocation) attributes(s surface.Settlement, code surface.Code, resolved bool) []attribute.KeyValue {
	info, r := &v.info, &v.resolved
	attrs := make([]attribute.KeyValue, 0, 16)
	attrs = append(attrs,
		keyCapabilityID.String(info.CapabilityID),
		keyInvocationID.String(info.InvocationID),
		keyConsumerKind.String(string(info.ConsumerKind)),
		keyResultStatus.String(string(s.Status)))
	if info.Plane != "" {
		attrs = append(attrs, keyCapabilityPlane.String(string(info.Plane)))
	}
	if v.i.consumerID {
		attrs = append(attrs, keyConsumerID.String(info.ConsumerID))
	}
	if resolved {
		attrs = append(attrs,
			keyCapabilityKind.String(string(r.Kind)),
			keyCapabilityEffect.String(string(r.Effect)),
			keyRegistrationID.String(r.RegistrationID))
		if r.InstanceID != "" {
			attrs = append(attrs, keyInstanceID.String(r.InstanceID))
		}
	} else if info.RegistrationID != "" { // the stale or unknown one the caller sent
		attrs = append(attrs, keyRegistrationID.String(info.RegistrationID))
	}
	switch {
	case info.ConfirmationID != "":
		attrs = append(attrs, keyConfirmationID.String(info.ConfirmationID))
	case v.asked != "":
		attrs = append(attrs, keyConfirmationID.String(v.asked))
	}
	if v.accepted {
		attrs = append(attrs, keyConfirmationWait.Float64(seconds(v.wait)))
	}
	if v.grant != "" {
		attrs = append(attrs, keyGrantID.String(v.grant))
	}
	if s.Error != nil {
		attrs = append(attrs, keyErrorCode.String(string(code)), keyErrorRetry.String(string(s.Error.Retry)))
	}
	if operatorError(code) {
		attrs = append(attrs, keyErrorType.String(string(code)))
	}
	return attrs
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
