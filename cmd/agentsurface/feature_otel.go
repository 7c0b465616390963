//go:build otel

package main

import (
	"context"

	"go.opentelemetry.io/otel"

	"github.com/agentsurface/agentsurface/cmd/agentsurface/internal/teldemo"
	"github.com/agentsurface/agentsurface/examples/devices/console"
)

// The otel build tag plugs package teldemo in (see features.go).
func init() {
	withTelemetry = func(ctx context.Context, opts console.Options) (*console.App, *telemetry, error) {
		if log := opts.Host.Logger; log != nil {
			// The SDK's own errors (an unreachable collector) go to the
			// demo's log.
			otel.SetErrorHandler(otel.ErrorHandlerFunc(func(err error) { log.Warn("telemetry", "error", err) }))
		}
		app, tel, err := teldemo.NewConsole(ctx, opts)
		if err != nil {
			return nil, nil, err
		}
		return app, &telemetry{shutdownFunc: tel.Shutdown}, nil
	}
}
