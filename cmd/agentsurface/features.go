package main

// The demo's optional features. The default build is lean, so that a
// first `go run ./cmd/agentsurface demo` compiles quickly: the devices
// console on SQLite, MCP, the page's agent console, approvals. Two build
// tags add what a replicated deployment needs:
//
//	postgres  demo --postgres: the devices, the session directory and the
//	          audit on PostgreSQL, several replicas behind a load balancer
//	          (package internal/pgdemo: pgx, replica, webreplica)
//	otel      /metrics in the Prometheus format and trace export over
//	          OTLP/HTTP (package internal/teldemo: the OpenTelemetry SDK,
//	          the Prometheus client, protobuf)
//
// Each tag's file (feature_postgres.go, feature_otel.go) plugs its
// package in by setting one of the two variables below from an init
// function, before main runs; nothing else assigns them, and nothing
// changes them after. They are the command's only mutable package-level
// state: nil means this binary was built without the feature.

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"strings"

	"github.com/agentsurface/agentsurface/examples/devices/console"
)

// Plug-in points, set only by the init functions of the tagged files.
var (
	// openPostgres opens a --postgres deployment (tag postgres): addr is
	// where the other replicas reach this one, secret the one they share.
	openPostgres func(ctx context.Context, f replicaFlags, addr string, secret []byte, log *slog.Logger) (*deployment, error)
	// withTelemetry makes the console with the demo's telemetry (tag
	// otel): its registries instrumented, /metrics served, traces
	// exported when OTEL_EXPORTER_OTLP_*ENDPOINT is set.
	withTelemetry func(ctx context.Context, opts console.Options) (*console.App, *telemetry, error)
)

// buildTags is how to build the demo with every feature, as a user types
// it.
const buildTags = "go run -tags postgres,otel ./cmd/agentsurface demo …, or go build -tags 'postgres otel' ./cmd/agentsurface"

// errWithoutPostgres is what a build without the postgres tag answers to
// --postgres.
var errWithoutPostgres = fmt.Errorf("--postgres: this binary was built without PostgreSQL support (the postgres build tag); build one that has it: %s", buildTags)

// telemetry is the demo's telemetry in a build with the otel tag; nil in
// a build without, where it does nothing.
type telemetry struct {
	shutdownFunc func(context.Context) error
}

// shutdown flushes the spans not yet exported and stops the providers.
func (t *telemetry) shutdown(ctx context.Context) error {
	if t == nil {
		return nil
	}
	return t.shutdownFunc(ctx)
}

// newConsole makes the devices console for opts, with the demo's
// telemetry in a build with the otel tag. Close the App, then shut the
// telemetry down. A build without it warns when an OTLP endpoint variable
// asks for traces, which it cannot export.
func newConsole(ctx context.Context, opts console.Options) (*console.App, *telemetry, http.Handler, error) {
	if withTelemetry != nil {
		app, tel, err := withTelemetry(ctx, opts)
		if err != nil {
			return nil, nil, nil, err
		}
		return app, tel, app, nil
	}
	if v := otlpEndpointVar(os.Getenv); v != "" && opts.Host.Logger != nil {
		opts.Host.Logger.Warn("$"+v+" is set, but this binary was built without OpenTelemetry (the otel build tag): it exports no trace and serves no /metrics; build one that has them: "+buildTags, "variable", v)
	}
	app, err := console.New(opts)
	if err != nil {
		return nil, nil, nil, err
	}
	return app, nil, app, nil
}

// otlpEndpointVar returns the first of the standard variables that turn
// on OTLP trace export that is set, or "". (Package teldemo reads the
// same two.)
func otlpEndpointVar(getenv func(string) string) string {
	for _, v := range []string{"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "OTEL_EXPORTER_OTLP_ENDPOINT"} {
		if strings.TrimSpace(getenv(v)) != "" {
			return v
		}
	}
	return ""
}

// metricsLine is what the demo prints after "Metrics:".
func metricsLine(base string) string {
	if withTelemetry == nil {
		return "none in this build (the otel build tag adds /metrics and OTLP traces: see --help)"
	}
	return base + "/metrics"
}

// demoFeatures describes the optional features for demo --help, saying
// which this binary has.
func demoFeatures() string {
	has := func(b bool) string {
		if b {
			return "in this binary"
		}
		return "not in this binary"
	}
	return fmt.Sprintf(`Build tags: the default build is lean, so that a first go run compiles
quickly. Two tags add what a replicated deployment needs:
  postgres (%s)
      --postgres and the flags that need it: the devices, the session
      directory and the audit on PostgreSQL, for several replicas behind a
      load balancer (docs/deploy.md).
  otel (%s)
      Prometheus metrics at /metrics, and traces exported over OTLP/HTTP
      when OTEL_EXPORTER_OTLP_ENDPOINT or OTEL_EXPORTER_OTLP_TRACES_ENDPOINT
      is set (and only then).
A binary with both:
  go run -tags postgres,otel ./cmd/agentsurface demo …
  go build -tags 'postgres otel' ./cmd/agentsurface
  go install -tags 'postgres otel' github.com/agentsurface/agentsurface/cmd/agentsurface@latest
`, has(openPostgres != nil), has(withTelemetry != nil))
}
