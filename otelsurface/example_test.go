package otelsurface_test

import (
	"context"
	"encoding/json"
	"fmt"

	"go.opentelemetry.io/otel/attribute"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/agentsurface/agentsurface/otelsurface"
	"github.com/agentsurface/agentsurface/surface"
)

func ExampleNew() {
	// An SDK with in-memory exporters; a service would export with OTLP
	// (see the package documentation).
	spans := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(spans))
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	ctx := context.Background()
	defer func() { _ = tp.Shutdown(ctx); _ = mp.Shutdown(ctx) }()

	tel, err := otelsurface.New(&otelsurface.Options{TracerProvider: tp, MeterProvider: mp})
	if err != nil {
		fmt.Println(err)
		return
	}
	reg := surface.New(&surface.Options{Telemetry: tel.Telemetry()})
	defer reg.Close()
	type selection struct {
		IDs []string `json:"ids"`
	}
	h, err := reg.Register(surface.Component{
		Type: "devices.table", InstanceID: "main", Description: "Devices table",
		Actions: map[string]surface.Capability{
			"selectRows": surface.Action(surface.ActionDef[selection, surface.None]{
				Description: "Replace the selection", Effect: surface.EffectLocalState,
				Execute: func(ctx context.Context, call *surface.Call, in selection) (surface.None, error) {
					return surface.None{}, nil // ctx carries the invocation span
				},
			}),
		},
	})
	if err != nil {
		fmt.Println(err)
		return
	}

	res := reg.Invoke(ctx, surface.Invocation{
		CapabilityID: "view:devices.table.selectRows", RegistrationID: h.ID(), Input: json.RawMessage(`{"ids":["d1"]}`),
	}, surface.InvokeOptions{Consumer: surface.Consumer{ID: "session-1", Kind: surface.ConsumerMCPBridge}})
	fmt.Println(res.Status)

	span := spans.GetSpans()[0]
	fmt.Println(span.Name)
	set := attribute.NewSet(span.Attributes...)
	for _, k := range []attribute.Key{"agentsurface.capability.kind", "agentsurface.capability.effect", "agentsurface.result.status"} {
		v, _ := set.Value(k)
		fmt.Printf("  %s=%s\n", k, v.String())
	}

	var rm metricdata.ResourceMetrics
	_ = reader.Collect(ctx, &rm)
	for _, m := range rm.ScopeMetrics[0].Metrics {
		if sum, ok := m.Data.(metricdata.Sum[int64]); ok && m.Name == "agentsurface.invocations" {
			dp := sum.DataPoints[0]
			fmt.Println(m.Name, dp.Attributes.Encoded(attribute.DefaultEncoder()), dp.Value)
		}
	}
	// Output:
	// ok
	// invoke view:devices.table.selectRows
	//   agentsurface.capability.kind=action
	//   agentsurface.capability.effect=local-state
	//   agentsurface.result.status=ok
	// agentsurface.invocations agentsurface.capability.id=view:devices.table.selectRows,agentsurface.capability.kind=action,agentsurface.consumer.kind=mcp-bridge,agentsurface.result.status=ok 1
}
