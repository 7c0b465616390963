// Package otelsurface makes every governed call of an agentsurface
// registry an OpenTelemetry trace and a set of metrics: which agent called
// what, on whose behalf, how long it waited for a slot and for a human,
// what was refused and why.
//
// It builds on [surface.Telemetry], the registry's OpenTelemetry-free hook,
// so package surface itself imports no OpenTelemetry. One
// [Instrumentation] serves any number of registries:
//
//	tel, err := otelsurface.New(nil) // the global tracer and meter providers
//	if err != nil {
//		return err // an instrument the meter provider refused; tel still works
//	}
//	reg := surface.New(&surface.Options{Telemetry: tel.Telemetry()})
//
// # Spans
//
// Each invocation (a replay of a settled invocation id is not a new one)
// is a span of kind internal named "invoke " + the capability id
// ("invoke view:devices.table.selectRows"), a child of the span in the
// caller's context. Span names carry only ids of registered capabilities
// ([surface.Settlement].Registered): a call naming anything else — an id
// a caller made up, whatever the refusal — is just "invoke". A span starts
// under the generic name until the Instrumentation has seen its id
// registered, and is renamed when it is. Policies, the handler and the
// procedure executor get contexts carrying it, so their spans are its
// children. The attributes are set when the call settles (samplers see
// the name and, for a retry with evidence, the link):
//
//	agentsurface.capability.id      the id as requested
//	agentsurface.capability.plane   view | domain
//	agentsurface.capability.kind    observation | action | procedure   (once resolved)
//	agentsurface.capability.effect  read, local-state, …, destructive  (once resolved)
//	agentsurface.registration.id    the registration called (unresolved: the one sent)
//	agentsurface.instance.id        the component instance called
//	agentsurface.invocation.id      the idempotency key
//	agentsurface.consumer.kind      embedded | mcp-bridge | webmcp | test | other
//	agentsurface.consumer.id        only with Options.ConsumerID
//	agentsurface.result.status      ok | error
//	agentsurface.error.code         e.g. NOT_AUTHORIZED, TIMEOUT       (errors)
//	agentsurface.error.retry        e.g. after-refresh                  (errors)
//	agentsurface.confirmation.id    the confirmation requested or presented
//	agentsurface.confirmation.wait  seconds from the request to the approval
//	agentsurface.grant.id           the standing grant that let the call skip its question
//
// Span events mark the phases that matter: "queued" and "admitted" (with
// agentsurface.queue.wait in seconds) when the call waited for its
// action queue or an observation slot, "confirmation.requested" (with the
// confirmation id and its expiry), "confirmation.presented" (with the id
// and agentsurface.confirmation.accepted) and "execution.started".
//
// The span's status is Error, with error.type set to the code, only for
// EXECUTION_FAILED and TIMEOUT: failures an operator must look at.
// Refusals an agent caused (policies, staleness, invalid input,
// CONFIRMATION_REQUIRED, RATE_LIMITED, …) keep the status unset, with
// their code as an attribute. The cause of a failure never reaches the
// span, as it never reaches the agent: it goes to the registry's log.
//
// # Confirmations
//
// A call that needs the user's approval ends with CONFIRMATION_REQUIRED;
// the retry that presents the approved evidence is another invocation,
// often much later. Its span links to the span that requested the
// confirmation, and carries agentsurface.confirmation.wait: how long the
// human took. (The link needs the requesting span still remembered: one
// per request awaiting its retry, at most 4096.)
//
// The wait itself is a span of its own, "confirmation <capability id>",
// from the request to the decision (on the registry's clock), a child of
// the span that asked when that span is remembered:
//
//	agentsurface.confirmation.decision  approved | denied | expired (granted: see below)
//	agentsurface.confirmation.channel   page | url | form | link | webhook, as the host's Resolution says
//	agentsurface.confirmation.approver  user | client | host, likewise
//	agentsurface.confirmation.digest    hex SHA-256 of the canonical digest (the digest holds the input: never on a span)
//	agentsurface.grant.id               the standing grant the approval made, if any (with a "grant.created" event)
//
// A call that a standing grant lets skip the question has, as a child of
// its own span, a "confirmation <capability id>" span of no duration with
// decision "granted" and the grant id, and a "grant.used" event
// (agentsurface.grant.uses, agentsurface.grant.max_uses). A grant
// created or revoked by the host is an event ("grant.created",
// "grant.revoked") of the span in the context the host passed to
// Grants.Create or Grants.Revoke; without one, and for an expiry, it is a
// span of its own ("grant created", "grant revoked", "grant expired").
//
// # Metrics
//
//	agentsurface.invocations                      counter    {invocation}    capability id and kind, consumer kind, result status, error code
//	agentsurface.invocation.duration              histogram  s               the same attributes
//	agentsurface.invocation.queue_wait            histogram  s               capability id and kind; calls that reached admission (zero when a slot was free)
//	agentsurface.confirmations.pending            updown     {confirmation}  capability id
//	agentsurface.confirmation.decision.duration   histogram  s               capability id, agentsurface.confirmation.outcome (approved | denied | expired)
//	agentsurface.registrations.live               updown     {registration}  agentsurface.component.type
//
// Durations are on the registry's clock ([surface.Options.Now]). The
// duration and queue-wait histograms advise the semantic conventions'
// request-duration buckets (5 ms to 10 s); decision latency advises
// buckets for a person's answer (0.5 s to 30 min). Up-down counters sum
// over every instrumented registry, so one process serving many sessions
// reports its totals.
//
// Metric attributes are bounded: capability ids of registered
// capabilities (any other id, whatever the call's outcome, is counted as
// "_OTHER", since a caller may send any string), component types, and
// closed sets. Instance,
// registration, invocation, confirmation and consumer ids never become
// metric attributes; spans carry them.
//
// # Propagation
//
// [Instrumentation.Transport] makes surface/httpexec requests carry the
// invocation's W3C trace context (traceparent, tracestate), so a domain
// backend instrumented with OpenTelemetry continues the trace:
//
//	exec, err := httpexec.New(&httpexec.Options{
//		BaseURL: "https://api.internal/rpc",
//		Paths:   []string{"devices.disable"},
//		Client: &http.Client{
//			Transport: tel.Transport(nil), // http.DefaultTransport, with the trace context
//			// httpexec's own client follows no redirects; keep that.
//			CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
//		},
//	})
//
// [Instrumentation.ExtractMeta] continues the trace of an MCP client
// that sends traceparent and tracestate in a tools/call request's _meta.
// Its signature is OpenTelemetry-free, func(context.Context,
// map[string]any) context.Context, so an MCP adapter can take it as an
// option; in a tool handler of your own, call it before Invoke:
//
//	ctx = tel.ExtractMeta(ctx, req.Params.Meta)
//	res := reg.Invoke(ctx, inv, opts)
//
// [Instrumentation.InjectMeta] writes the context into the _meta of an
// outgoing request, for MCP clients written in Go.
//
// # Exporting
//
// Install SDK providers once at start-up. With the OTLP exporters
// (go.opentelemetry.io/otel/exporters/otlp/...), the standard variables
// configure where the data goes, so the same binary points at any
// collector without flags:
//
//	OTEL_EXPORTER_OTLP_ENDPOINT=http://collector:4318   (4317 for gRPC)
//	OTEL_EXPORTER_OTLP_HEADERS=authorization=Bearer%20…
//	OTEL_SERVICE_NAME=devices-console
//	OTEL_TRACES_SAMPLER=parentbased_traceidratio OTEL_TRACES_SAMPLER_ARG=0.1
//
// and in code:
//
//	exp, err := otlptracehttp.New(ctx) // reads OTEL_EXPORTER_OTLP_*
//	if err != nil {
//		return err
//	}
//	tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(exp)) // reads OTEL_SERVICE_NAME, OTEL_TRACES_SAMPLER
//	defer tp.Shutdown(ctx)
//	promExp, err := prometheus.New() // go.opentelemetry.io/otel/exporters/prometheus
//	if err != nil {
//		return err
//	}
//	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(promExp))
//	defer mp.Shutdown(ctx)
//	http.Handle("/metrics", promhttp.Handler())
//	tel, err := otelsurface.New(&otelsurface.Options{TracerProvider: tp, MeterProvider: mp})
//
// (For metrics over OTLP as well, use the otlpmetrichttp or otlpmetricgrpc
// exporter with a periodic reader; it reads the same variables.)
//
// # Cost
//
// A registry without Telemetry pays a nil check per phase. With the
// instrumentation and no-op providers (or any tracer whose spans do not
// record, with metrics disabled) an invocation costs one span start and
// one context more: about 1.1 times a bare call of a no-op action (a few
// hundred nanoseconds, one allocation). With the SDK recording every span
// and metric, the SDK's work dominates: about 10 µs and 4 KB per call
// (BenchmarkOverhead and BenchmarkInvokeAction in this package).
package otelsurface
