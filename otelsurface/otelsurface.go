package otelsurface

import (
	"context"
	"errors"
	"sync"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	"github.com/agentsurface/agentsurface/surface"
)

// ScopeName is the instrumentation scope of the tracer and the meter.
const ScopeName = "github.com/agentsurface/agentsurface/otelsurface"

// Version is the instrumentation scope's version.
const Version = "0.1.0"

// Options configure an [Instrumentation]. The zero value (or nil) is valid.
type Options struct {
	// TracerProvider makes the tracer. Nil means the global provider,
	// otel.GetTracerProvider(), read once by New (the global delegates to
	// a provider installed later with otel.SetTracerProvider).
	TracerProvider trace.TracerProvider
	// MeterProvider makes the meter. Nil means otel.GetMeterProvider().
	MeterProvider metric.MeterProvider
	// Propagator injects the trace context into outgoing HTTP requests
	// ([Instrumentation.Transport]) and reads it from MCP request
	// metadata ([Instrumentation.ExtractMeta]). Nil means W3C Trace
	// Context (traceparent and tracestate), the format MCP clients send;
	// pass otel.GetTextMapPropagator() to follow the global setting.
	Propagator propagation.TextMapPropagator
	// ConsumerID records the consumer's raw id (an MCP session, a user)
	// on spans as agentsurface.consumer.id. Off by default: the id may
	// identify a person. Metrics never carry it.
	ConsumerID bool
}

// Instrumentation turns the telemetry of registries into OpenTelemetry
// spans and metrics. One Instrumentation may serve any number of
// registries (set [Instrumentation.Telemetry] on each); it is safe for
// concurrent use.
type Instrumentation struct {
	tracer     trace.Tracer
	prop       propagation.TextMapPropagator
	consumerID bool

	invocations metric.Int64Counter
	duration    metric.Float64Histogram
	queueWait   metric.Float64Histogram
	pending     metric.Int64UpDownCounter
	decision    metric.Float64Histogram
	live        metric.Int64UpDownCounter

	links linkStore
	sets  setCache
	names nameCache
}

// Instrument names.
const (
	metricInvocations = "agentsurface.invocations"
	metricDuration    = "agentsurface.invocation.duration"
	metricQueueWait   = "agentsurface.invocation.queue_wait"
	metricPending     = "agentsurface.confirmations.pending"
	metricDecision    = "agentsurface.confirmation.decision.duration"
	metricLive        = "agentsurface.registrations.live"
)

// durationBuckets is the semantic conventions' bucket advice for
// request durations in seconds (http.server.request.duration).
var durationBuckets = []float64{0.005, 0.01, 0.025, 0.05, 0.075, 0.1, 0.25, 0.5, 0.75, 1, 2.5, 5, 7.5, 10}

// decisionBuckets cover a person's answer, from a click to the longest
// confirmation TTL people configure.
var decisionBuckets = []float64{0.5, 1, 2.5, 5, 10, 15, 30, 60, 120, 300, 600, 1800}

// New returns an Instrumentation with its tracer and instruments made. A
// nil opts means all defaults. The error reports instruments the meter
// provider could not make; the Instrumentation is usable regardless (the
// failed instruments record nothing).
func New(opts *Options) (*Instrumentation, error) {
	var o Options
	if opts != nil {
		o = *opts
	}
	if o.TracerProvider == nil {
		o.TracerProvider = otel.GetTracerProvider()
	}
	if o.MeterProvider == nil {
		o.MeterProvider = otel.GetMeterProvider()
	}
	if o.Propagator == nil {
		o.Propagator = propagation.TraceContext{}
	}
	i := &Instrumentation{
		tracer:     o.TracerProvider.Tracer(ScopeName, trace.WithInstrumentationVersion(Version)),
		prop:       o.Propagator,
		consumerID: o.ConsumerID,
	}
	m := o.MeterProvider.Meter(ScopeName, metric.WithInstrumentationVersion(Version))
	var errs []error
	keep := func(err error) {
		if err != nil {
			errs = append(errs, err)
		}
	}
	var err error
	i.invocations, err = m.Int64Counter(metricInvocations, metric.WithUnit("{invocation}"),
		metric.WithDescription("Settled invocations, by capability and outcome."))
	keep(err)
	i.duration, err = m.Float64Histogram(metricDuration, metric.WithUnit("s"),
		metric.WithDescription("Time from the start of an invocation to its settlement."),
		metric.WithExplicitBucketBoundaries(durationBuckets...))
	keep(err)
	i.queueWait, err = m.Float64Histogram(metricQueueWait, metric.WithUnit("s"),
		metric.WithDescription("Time an invocation waited for an admission slot (zero when one was free)."),
		metric.WithExplicitBucketBoundaries(durationBuckets...))
	keep(err)
	i.pending, err = m.Int64UpDownCounter(metricPending, metric.WithUnit("{confirmation}"),
		metric.WithDescription("Confirmation requests waiting for the user."))
	keep(err)
	i.decision, err = m.Float64Histogram(metricDecision, metric.WithUnit("s"),
		metric.WithDescription("Time from a confirmation request to its approval, denial or expiry."),
		metric.WithExplicitBucketBoundaries(decisionBuckets...))
	keep(err)
	i.live, err = m.Int64UpDownCounter(metricLive, metric.WithUnit("{registration}"),
		metric.WithDescription("Live component registrations, by component type."))
	keep(err)
	return i, errors.Join(errs...)
}

// Telemetry returns the hook to set as surface.Options.Telemetry of each
// registry to instrument.
func (i *Instrumentation) Telemetry() *surface.Telemetry {
	return &surface.Telemetry{
		Invocation:    i.startInvocation,
		Confirmation:  i.confirmationChanged,
		Registrations: i.registrationsChanged,
		Grant:         i.grantChanged,
	}
}

// confirmationChanged counts pending requests, records decision latency
// and, when a request is resolved, its wait as a span.
func (i *Instrumentation) confirmationChanged(c surface.ConfirmationChange) {
	ctx := context.Background()
	capSet := i.sets.get(setKey{capability: c.CapabilityID})
	if c.Outcome == "" {
		i.pending.Add(ctx, 1, capSet.add...)
		return
	}
	i.waitSpan(c)
	i.pending.Add(ctx, -1, capSet.add...)
	i.decision.Record(ctx, seconds(c.At.Sub(c.RequestedAt)), i.sets.get(setKey{capability: c.CapabilityID, outcome: string(c.Outcome)}).rec...)
	if c.Outcome != surface.OutcomeApproved {
		i.links.drop(c.ConfirmationID) // no retry can use it any more
	}
}

// waitSpan records a resolved confirmation's wait as its own span, from
// the request to the decision (times on the registry's clock), a child
// of the span of the call that asked when that span is remembered: the
// decision, the channel and the approver kind the host gave, the hash of
// the digest, and the grant the resolution made.
func (i *Instrumentation) waitSpan(c surface.ConfirmationChange) {
	ctx := context.Background()
	if sc, ok := i.links.get(c.ConfirmationID); ok {
		ctx = trace.ContextWithSpanContext(ctx, sc)
	}
	_, span := i.tracer.Start(ctx, confirmationSpanPrefix+c.CapabilityID, trace.WithTimestamp(c.RequestedAt))
	if span.IsRecording() {
		attrs := make([]attribute.KeyValue, 0, 7)
		attrs = append(attrs, keyCapabilityID.String(c.CapabilityID), keyConfirmationID.String(c.ConfirmationID),
			keyConfirmationDecision.String(string(c.Outcome)), keyConfirmationDigest.String(c.Digest))
		if c.Channel != "" {
			attrs = append(attrs, keyConfirmationChannel.String(string(c.Channel)))
		}
		if c.Approver != "" {
			attrs = append(attrs, keyConfirmationApprover.String(string(c.Approver)))
		}
		if c.GrantID != "" {
			attrs = append(attrs, keyGrantID.String(c.GrantID))
			span.AddEvent(eventGrantPrefix+string(surface.GrantChangeCreated), trace.WithTimestamp(c.At),
				trace.WithAttributes(keyGrantID.String(c.GrantID)))
		}
		span.SetAttributes(attrs...)
	}
	span.End(trace.WithTimestamp(c.At))
}

// grantChanged records a standing grant created, used, revoked or
// expired as an event of the span in ctx: the host's request that made
// or revoked it, the invocation that used it. Without a recording span
// it gets a span of its own ("grant created", …), but for a use (whose
// invocation's span does not record) and a creation by a confirmation's
// resolution (whose wait span records it).
func (i *Instrumentation) grantChanged(ctx context.Context, c surface.GrantChange) {
	attrs := []attribute.KeyValue{keyGrantID.String(c.GrantID), keyCapabilityID.String(c.CapabilityID), keyGrantUses.Int(c.Uses)}
	if c.MaxUses > 0 {
		attrs = append(attrs, keyGrantMaxUses.Int(c.MaxUses))
	}
	event := eventGrantPrefix + string(c.Kind)
	if span := trace.SpanFromContext(ctx); span.IsRecording() {
		span.AddEvent(event, trace.WithAttributes(attrs...))
		return
	}
	if c.Kind == surface.GrantChangeUsed || c.Kind == surface.GrantChangeCreated && c.ConfirmationID != "" {
		return
	}
	_, span := i.tracer.Start(ctx, "grant "+string(c.Kind))
	if span.IsRecording() {
		span.SetAttributes(attrs...)
		span.AddEvent(event, trace.WithAttributes(attrs...))
	}
	span.End()
}

// registrationsChanged counts live registrations per component type.
func (i *Instrumentation) registrationsChanged(c surface.RegistrationChange) {
	i.live.Add(context.Background(), int64(c.Delta), i.sets.get(setKey{componentType: c.ComponentType}).add...)
}

func seconds(d time.Duration) float64 { return d.Seconds() }

// setKey is the attributes of one metric series.
type setKey struct {
	capability    string
	kind          string
	consumerKind  string
	status        string
	code          string
	outcome       string
	componentType string
}

// measure is the options of one series, made once and shared: reusing
// them spares an attribute set per measurement.
type measure struct {
	add []metric.AddOption
	rec []metric.RecordOption
}

// maxCachedSets bounds the cache. Metric attributes are bounded (ids of
// registered capabilities, component types and closed sets), so this is
// only a guard.
const maxCachedSets = 4096

// setCache holds the measure of each series seen.
type setCache struct {
	mu sync.RWMutex
	m  map[setKey]*measure
}

func (c *setCache) get(k setKey) *measure {
	c.mu.RLock()
	m := c.m[k]
	c.mu.RUnlock()
	if m != nil {
		return m
	}
	m = newMeasure(k)
	c.mu.Lock()
	defer c.mu.Unlock()
	if old := c.m[k]; old != nil {
		return old
	}
	if c.m == nil {
		c.m = make(map[setKey]*measure)
	}
	if len(c.m) < maxCachedSets {
		c.m[k] = m
	}
	return m
}

func newMeasure(k setKey) *measure {
	kv := make([]attribute.KeyValue, 0, 5)
	add := func(key attribute.Key, v string) {
		if v != "" {
			kv = append(kv, key.String(v))
		}
	}
	add(keyCapabilityID, k.capability)
	add(keyCapabilityKind, k.kind)
	add(keyConsumerKind, k.consumerKind)
	add(keyResultStatus, k.status)
	add(keyErrorCode, k.code)
	add(keyConfirmationOutcome, k.outcome)
	add(keyComponentType, k.componentType)
	opt := metric.WithAttributeSet(attribute.NewSet(kv...))
	return &measure{add: []metric.AddOption{opt}, rec: []metric.RecordOption{opt}}
}
