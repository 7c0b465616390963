// Package teldemo is the telemetry of `agentsurface demo`: the devices
// console's registries instrumented with OpenTelemetry (package
// otelsurface), metrics served at /metrics in the Prometheus format, and
// traces exported over OTLP/HTTP when the standard OTEL_EXPORTER_OTLP_*
// variables name a collector.
//
// It is a package of its own, beside the command, so that the command
// links the OpenTelemetry SDK, the Prometheus client and protobuf only
// when built with the otel build tag (its file feature_otel.go plugs
// [NewConsole] in), while `go test ./...` compiles and tests this package
// in every build.
package teldemo

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"os"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace"
	otelprom "go.opentelemetry.io/otel/exporters/prometheus"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
	tracenoop "go.opentelemetry.io/otel/trace/noop"

	"github.com/agentsurface/agentsurface/examples/devices/console"
	"github.com/agentsurface/agentsurface/otelsurface"
)

// serviceName names the demo in its telemetry, unless OTEL_SERVICE_NAME
// or OTEL_RESOURCE_ATTRIBUTES say otherwise.
const serviceName = "agentsurface-demo"

// Telemetry is the demo's OpenTelemetry: metrics served at /metrics in
// the Prometheus format, and traces exported over OTLP/HTTP only when the
// standard variables name a collector.
type Telemetry struct {
	// inst instruments the console's registries and continues the trace
	// context MCP clients send.
	inst *otelsurface.Instrumentation
	// metrics serves the Prometheus scrape.
	metrics http.Handler
	// reg is the registry metrics serves.
	reg *prometheus.Registry
	// exporting is the OTLP traces endpoint variable that was set, or ""
	// when no span leaves the process.
	exporting string
	tp        *sdktrace.TracerProvider // nil when not exporting
	mp        *sdkmetric.MeterProvider
}

// tracesEndpointVars are the standard variables that turn on the OTLP
// traces exporter: either names the collector.
var tracesEndpointVars = []string{"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "OTEL_EXPORTER_OTLP_ENDPOINT"}

// newTelemetry sets up the demo's providers. The OTLP exporter reads its
// configuration (endpoint, headers, timeout, TLS) from the standard
// OTEL_EXPORTER_OTLP_* variables; without an endpoint variable it is not
// created, and the demo opens no connection for telemetry.
func newTelemetry(ctx context.Context, log *slog.Logger) (*Telemetry, error) {
	res, err := resource.New(ctx,
		resource.WithAttributes(attribute.String("service.name", serviceName)),
		resource.WithFromEnv(), resource.WithTelemetrySDK())
	if err != nil && res == nil {
		return nil, fmt.Errorf("telemetry resource: %w", err)
	}
	reg := prometheus.NewRegistry()
	// The Go runtime's and the process's own series (go_goroutines,
	// go_memstats_heap_*, process_open_fds, …), so that a leak shows.
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	exporter, err := otelprom.New(otelprom.WithRegisterer(reg))
	if err != nil {
		return nil, fmt.Errorf("prometheus exporter: %w", err)
	}
	t := &Telemetry{
		reg:     reg,
		metrics: promhttp.HandlerFor(reg, promhttp.HandlerOpts{ErrorLog: slog.NewLogLogger(log.Handler(), slog.LevelError)}),
		mp:      sdkmetric.NewMeterProvider(sdkmetric.WithReader(exporter), sdkmetric.WithResource(res)),
	}
	var tp trace.TracerProvider = tracenoop.NewTracerProvider()
	for _, v := range tracesEndpointVars {
		if os.Getenv(v) != "" {
			t.exporting = v
			break
		}
	}
	if t.exporting != "" {
		proto := cmp.Or(os.Getenv("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL"), os.Getenv("OTEL_EXPORTER_OTLP_PROTOCOL"))
		if proto != "" && proto != "http/protobuf" {
			log.Warn("the demo exports traces over OTLP/HTTP with protobuf only; the protocol variable is ignored", "protocol", proto)
		}
		client, err := newOTLPClient(otlpEnv{getenv: os.Getenv, readFile: os.ReadFile})
		if err != nil {
			_ = t.mp.Shutdown(ctx)
			return nil, fmt.Errorf("OTLP traces exporter: %w", err)
		}
		exp, err := otlptrace.New(ctx, client)
		if err != nil {
			_ = t.mp.Shutdown(ctx)
			return nil, fmt.Errorf("OTLP traces exporter: %w", err)
		}
		t.tp = sdktrace.NewTracerProvider(sdktrace.WithBatcher(exp), sdktrace.WithResource(res))
		tp = t.tp
		log.Info("exporting traces over OTLP/HTTP", "configuredBy", t.exporting)
	}
	t.inst, err = otelsurface.New(&otelsurface.Options{TracerProvider: tp, MeterProvider: t.mp})
	if err != nil {
		_ = t.Shutdown(ctx)
		return nil, fmt.Errorf("instrumentation: %w", err)
	}
	return t, nil
}

// Shutdown flushes the spans not yet exported and stops the providers.
func (t *Telemetry) Shutdown(ctx context.Context) error {
	var errs []error
	if t.tp != nil {
		errs = append(errs, t.tp.Shutdown(ctx))
	}
	errs = append(errs, t.mp.Shutdown(ctx))
	return errors.Join(errs...)
}

// NewConsole makes the devices console for opts with the demo's
// telemetry: its registries instrumented, the trace context of MCP
// clients continued, /metrics served beside its routes. Close the App,
// then shut the telemetry down.
func NewConsole(ctx context.Context, opts console.Options) (*console.App, *Telemetry, error) {
	log := opts.Host.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	tel, err := newTelemetry(ctx, log)
	if err != nil {
		return nil, nil, err
	}
	opts.Telemetry, opts.Host.MCP.HTTP.TraceContext = tel.inst.Telemetry(), tel.inst.ExtractMeta
	app, err := console.New(opts)
	if err != nil {
		_ = tel.Shutdown(ctx)
		return nil, nil, err
	}
	tel.reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "agentsurface_console_sessions", Help: "Browser sessions the devices console holds.",
	}, func() float64 { st := app.Host().Stats(); return float64(st.Sessions + st.UnusedSessions) }))
	// /metrics beside the console's routes, behind its Host check and
	// headers.
	app.Handle("GET /metrics", tel.metrics)
	return app, tel, nil
}
