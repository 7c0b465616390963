package otelsurface_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	metricnoop "go.opentelemetry.io/otel/metric/noop"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	tracenoop "go.opentelemetry.io/otel/trace/noop"

	"github.com/agentsurface/agentsurface/otelsurface"
	"github.com/agentsurface/agentsurface/surface"
)

// BenchmarkInvokeAction is surface's BenchmarkInvokeAction (a no-op
// action, a fresh invocation id per call, the registration id sent)
// without Telemetry, and instrumented with no-op providers, the global
// providers with no SDK installed, and the SDK recording every span to an
// in-memory exporter (which keeps every span: most of its cost is
// copying them) or to one that drops them, with a manual metric reader.
// Target: noop within 1.2× of none.
func BenchmarkInvokeAction(b *testing.B) {
	run := func(b *testing.B, obs *surface.Telemetry, each func()) {
		call := benchRegistry(b, obs)
		b.ReportAllocs()
		for b.Loop() {
			call()
			if each != nil {
				each()
			}
		}
	}
	b.Run("obs=none", func(b *testing.B) { run(b, nil, nil) })
	b.Run("obs=noop", func(b *testing.B) {
		tel, err := otelsurface.New(&otelsurface.Options{TracerProvider: tracenoop.NewTracerProvider(), MeterProvider: metricnoop.NewMeterProvider()})
		if err != nil {
			b.Fatal(err)
		}
		run(b, tel.Telemetry(), nil)
	})
	b.Run("obs=global-unset", func(b *testing.B) {
		tel, err := otelsurface.New(nil)
		if err != nil {
			b.Fatal(err)
		}
		run(b, tel.Telemetry(), nil)
	})
	b.Run("obs=sdk-discard", func(b *testing.B) {
		tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(discard{}))
		mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(sdkmetric.NewManualReader()))
		b.Cleanup(func() { _ = tp.Shutdown(context.Background()); _ = mp.Shutdown(context.Background()) })
		tel, err := otelsurface.New(&otelsurface.Options{TracerProvider: tp, MeterProvider: mp})
		if err != nil {
			b.Fatal(err)
		}
		run(b, tel.Telemetry(), nil)
	})
	b.Run("obs=sdk", func(b *testing.B) {
		spans := tracetest.NewInMemoryExporter()
		tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(spans))
		mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(sdkmetric.NewManualReader()))
		b.Cleanup(func() { _ = tp.Shutdown(context.Background()); _ = mp.Shutdown(context.Background()) })
		tel, err := otelsurface.New(&otelsurface.Options{TracerProvider: tp, MeterProvider: mp})
		if err != nil {
			b.Fatal(err)
		}
		n := 0
		run(b, tel.Telemetry(), func() {
			if n++; n == 1<<14 { // keep the exporter's memory bounded
				b.StopTimer()
				spans.Reset()
				n = 0
				b.StartTimer()
			}
		})
	})
}

// benchRegistry returns a function that invokes the bench action of a
// registry with obs, after one untimed call.
func benchRegistry(b *testing.B, obs *surface.Telemetry) func() {
	reg := surface.New(&surface.Options{Telemetry: obs})
	b.Cleanup(func() { _ = reg.Close() })
	type in struct {
		IDs []string `json:"ids"`
	}
	h, err := reg.Register(surface.Component{Type: "bench.widget", InstanceID: "w0", Description: "Bench widget",
		Actions: map[string]surface.Capability{"selectRows": surface.Action(surface.ActionDef[in, surface.None]{
			Description: "Select", Effect: surface.EffectLocalState,
			Execute: func(context.Context, *surface.Call, in) (surface.None, error) { return surface.None{}, nil },
		})}})
	if err != nil {
		b.Fatal(err)
	}
	inv := surface.Invocation{CapabilityID: "view:bench.widget.selectRows", RegistrationID: h.ID(), Input: json.RawMessage(`{"ids":["a"]}`)}
	opts := surface.InvokeOptions{Consumer: surface.Consumer{ID: "bench", Kind: surface.ConsumerTest}}
	ctx := context.Background()
	call := func() {
		if res := reg.Invoke(ctx, inv, opts); res.Error != nil {
			b.Fatal(res.Error)
		}
	}
	call()
	return call
}

// BenchmarkOverhead interleaves BenchmarkInvokeAction's calls without an
// Telemetry and with the instrumentation (no-op providers, the global
// providers with no SDK, the SDK recording to a dropping exporter), in
// batches of 256 (each first in turn), and reports the time of each and
// their ratio (x/none; target for noop ≤ 1.2). Interleaving makes the
// ratio hold up on a machine whose load changes during the run.
func BenchmarkOverhead(b *testing.B) {
	for _, c := range []struct {
		name string
		opts func(b *testing.B) *otelsurface.Options
	}{
		{"noop", func(*testing.B) *otelsurface.Options {
			return &otelsurface.Options{TracerProvider: tracenoop.NewTracerProvider(), MeterProvider: metricnoop.NewMeterProvider()}
		}},
		{"global-unset", func(*testing.B) *otelsurface.Options { return nil }},
		{"sdk-discard", func(b *testing.B) *otelsurface.Options {
			tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(discard{}))
			mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(sdkmetric.NewManualReader()))
			b.Cleanup(func() { _ = tp.Shutdown(context.Background()); _ = mp.Shutdown(context.Background()) })
			return &otelsurface.Options{TracerProvider: tp, MeterProvider: mp}
		}},
	} {
		b.Run("obs="+c.name, func(b *testing.B) {
			tel, err := otelsurface.New(c.opts(b))
			if err != nil {
				b.Fatal(err)
			}
			none, with := benchRegistry(b, nil), benchRegistry(b, tel.Telemetry())
			const batch = 256
			timed := func(call func()) time.Duration {
				start := time.Now()
				for range batch {
					call()
				}
				return time.Since(start)
			}
			var tNone, tWith time.Duration
			n := 0
			for b.Loop() {
				if n%(2*batch) == 0 {
					tNone += timed(none)
					tWith += timed(with)
				} else {
					tWith += timed(with)
					tNone += timed(none)
				}
				n += batch
			}
			b.ReportMetric(float64(tNone.Nanoseconds())/float64(n), "ns/none")
			b.ReportMetric(float64(tWith.Nanoseconds())/float64(n), "ns/with")
			b.ReportMetric(float64(tWith)/float64(tNone), "x/none")
		})
	}
}

// discard is a span exporter that drops what it is given.
type discard struct{}

func (discard) ExportSpans(context.Context, []sdktrace.ReadOnlySpan) error { return nil }
func (discard) Shutdown(context.Context) error                             { return nil }
