package otelsurface_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"

	"go.opentelemetry.io/otel/attribute"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/agentsurface/agentsurface/otelsurface"
	"github.com/agentsurface/agentsurface/surface"
	"github.com/agentsurface/agentsurface/surface/httpexec"
	"github.com/agentsurface/agentsurface/surface/surfacetest"
)

// harness is an Instrumentation over the SDK with in-memory exporters:
// spans are exported synchronously as they end, metrics read on demand.
type harness struct {
	spans  *tracetest.InMemoryExporter
	tp     *sdktrace.TracerProvider
	reader *sdkmetric.ManualReader
	tel    *otelsurface.Instrumentation
}

func newHarness(t testing.TB, opts *otelsurface.Options) *harness {
	t.Helper()
	h := &harness{spans: tracetest.NewInMemoryExporter(), reader: sdkmetric.NewManualReader()}
	h.tp = sdktrace.NewTracerProvider(sdktrace.WithSyncer(h.spans))
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(h.reader))
	t.Cleanup(func() {
		_ = h.tp.Shutdown(context.Background())
		_ = mp.Shutdown(context.Background())
	})
	var o otelsurface.Options
	if opts != nil {
		o = *opts
	}
	o.TracerProvider, o.MeterProvider = h.tp, mp
	tel, err := otelsurface.New(&o)
	if err != nil {
		t.Fatal(err)
	}
	h.tel = tel
	return h
}

// registry returns an instrumented registry, closed when the test ends.
func (h *harness) registry(t testing.TB, opts *surface.Options) *surface.Registry {
	var o surface.Options
	if opts != nil {
		o = *opts
	}
	o.Telemetry = h.tel.Telemetry()
	return surfacetest.NewRegistry(t, &o)
}

// disableOverHTTP returns an instrumented registry whose procedure
// domain:devices.disable is executed by httpexec against backend, through
// the Instrumentation's propagating Transport.
func (h *harness) disableOverHTTP(t testing.TB, backend *httptest.Server) *surface.Registry {
	t.Helper()
	exec, err := httpexec.New(&httpexec.Options{BaseURL: backend.URL + "/rpc", Paths: []string{"devices.disable"},
		Client: &http.Client{Transport: h.tel.Transport(backend.Client().Transport)}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(exec.CloseIdleConnections)
	reg := h.registry(t, nil)
	reg.SetProcedureExecutor(exec)
	type in struct {
		IDs []string `json:"ids"`
	}
	type out struct {
		Disabled int `json:"disabled"`
	}
	surfacetest.MustRegister(t, reg, surface.Component{Type: "devices.table", Description: "Devices", Procedures: []surface.Capability{
		surface.Procedure(surface.ProcedureDef[in, out]{ID: "domain:devices.disable", Description: "Disable devices", Effect: surface.EffectServerQuery}),
	}})
	return reg
}

// tracer is a tracer of the harness's provider, for the test's own spans.
func (h *harness) tracer() trace.Tracer { return h.tp.Tracer("test") }

// span returns the one ended span named name.
func (h *harness) span(t testing.TB, name string) tracetest.SpanStub {
	t.Helper()
	var found []tracetest.SpanStub
	for _, s := range h.spans.GetSpans() {
		if s.Name == name {
			found = append(found, s)
		}
	}
	if len(found) != 1 {
		t.Fatalf("%d spans named %q, want 1; spans: %v", len(found), name, names(h.spans.GetSpans()))
	}
	return found[0]
}

func names(spans tracetest.SpanStubs) []string {
	out := make([]string, len(spans))
	for i, s := range spans {
		out[i] = s.Name
	}
	return out
}

// attrs returns attributes as a map of their values.
func attrs(kvs []attribute.KeyValue) map[string]any {
	m := make(map[string]any, len(kvs))
	for _, kv := range kvs {
		m[string(kv.Key)] = kv.Value.AsInterface()
	}
	return m
}

// requireAttrs fails unless every wanted attribute has its value.
func requireAttrs(t testing.TB, what string, got []attribute.KeyValue, want map[string]any) {
	t.Helper()
	m := attrs(got)
	for k, v := range want {
		if m[k] != v {
			t.Errorf("%s: attribute %s = %v (%T), want %v (%T)", what, k, m[k], m[k], v, v)
		}
	}
}

// requireNoAttrs fails if any of keys is set.
func requireNoAttrs(t testing.TB, what string, got []attribute.KeyValue, keys ...string) {
	t.Helper()
	m := attrs(got)
	for _, k := range keys {
		if v, ok := m[k]; ok {
			t.Errorf("%s: attribute %s = %v, want none", what, k, v)
		}
	}
}

func eventNames(s tracetest.SpanStub) []string {
	out := make([]string, len(s.Events))
	for i, e := range s.Events {
		out[i] = e.Name
	}
	return out
}

// point is one series of a metric: a sum's value, or a histogram's count
// and sum.
type point struct {
	value int64
	count uint64
	sum   float64
}

// metrics collects every metric: name → series (encoded attributes,
// "k=v,k=v" sorted) → point.
func (h *harness) metrics(t testing.TB) map[string]map[string]point {
	t.Helper()
	var rm metricdata.ResourceMetrics
	if err := h.reader.Collect(context.Background(), &rm); err != nil {
		t.Fatal(err)
	}
	out := map[string]map[string]point{}
	for _, sm := range rm.ScopeMetrics {
		if sm.Scope.Name != otelsurface.ScopeName {
			t.Fatalf("scope %q", sm.Scope.Name)
		}
		for _, m := range sm.Metrics {
			series := map[string]point{}
			switch d := m.Data.(type) {
			case metricdata.Sum[int64]:
				for _, dp := range d.DataPoints {
					series[dp.Attributes.Encoded(attribute.DefaultEncoder())] = point{value: dp.Value}
				}
			case metricdata.Histogram[float64]:
				for _, dp := range d.DataPoints {
					series[dp.Attributes.Encoded(attribute.DefaultEncoder())] = point{count: dp.Count, sum: dp.Sum}
				}
			default:
				t.Fatalf("metric %s has data %T", m.Name, m.Data)
			}
			out[m.Name] = series
		}
	}
	return out
}

type widgetInput struct {
	IDs []string `json:"ids"`
}

// widget is a component "obs.widget" whose action "set" runs run (nil:
// return at once) and whose action "wipe" needs the user's confirmation.
func widget(instance string, run func(ctx context.Context) error) surface.Component {
	exec := func(ctx context.Context, _ *surface.Call, _ widgetInput) (surface.None, error) {
		if run != nil {
			return surface.None{}, run(ctx)
		}
		return surface.None{}, nil
	}
	return surface.Component{
		Type: "obs.widget", InstanceID: instance, Description: "Observed widget",
		Actions: map[string]surface.Capability{
			"set":  surface.Action(surface.ActionDef[widgetInput, surface.None]{Description: "Set", Effect: surface.EffectLocalState, Execute: exec}),
			"wipe": surface.Action(surface.ActionDef[widgetInput, surface.None]{Description: "Wipe", Effect: surface.EffectLocalState, Confirmation: surface.ConfirmRequired, Execute: exec}),
		},
	}
}

const (
	setID  = "view:obs.widget.set"
	wipeID = "view:obs.widget.wipe"
)

var agent = surface.InvokeOptions{Consumer: surface.Consumer{ID: "session-7", Kind: surface.ConsumerMCPBridge}}

func call(capID, regID, confirmationID string) surface.Invocation {
	return surface.Invocation{CapabilityID: capID, RegistrationID: regID, Input: json.RawMessage(`{"ids":["d1"]}`), ConfirmationID: confirmationID}
}
