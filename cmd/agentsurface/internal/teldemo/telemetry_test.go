package teldemo

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"go.opentelemetry.io/otel/propagation"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	"github.com/agentsurface/agentsurface/examples/devices/agent"
	"github.com/agentsurface/agentsurface/examples/devices/console"
	"github.com/agentsurface/agentsurface/examples/devices/domain"
	"github.com/agentsurface/agentsurface/webhost"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// collector is an OTLP/HTTP traces endpoint that keeps what it receives.
type collector struct {
	mu    sync.Mutex
	spans map[string][][]byte // span name → trace ids
	svc   []string            // service.name of each resource
}

func (c *collector) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(r.Body)
	req, ok := decodeExport(body)
	if err != nil || r.URL.Path != "/v1/traces" || !ok {
		http.Error(w, "bad export", http.StatusBadRequest)
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, rs := range req {
		for _, kv := range rs.GetResource().GetAttributes() {
			if kv.Key == "service.name" {
				c.svc = append(c.svc, kv.GetValue().GetStringValue())
			}
		}
		for _, ss := range rs.ScopeSpans {
			for _, s := range ss.Spans {
				c.spans[s.Name] = append(c.spans[s.Name], s.TraceId)
			}
		}
	}
	w.Header().Set("Content-Type", "application/x-protobuf") // an empty ExportTraceServiceResponse
}

// decodeExport decodes an ExportTraceServiceRequest: its field 1,
// repeated ResourceSpans.
func decodeExport(b []byte) ([]*tracepb.ResourceSpans, bool) {
	var out []*tracepb.ResourceSpans
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 || num != 1 || typ != protowire.BytesType {
			return nil, false
		}
		m, k := protowire.ConsumeBytes(b[n:])
		if k < 0 {
			return nil, false
		}
		b = b[n+k:]
		rs := &tracepb.ResourceSpans{}
		if proto.Unmarshal(m, rs) != nil {
			return nil, false
		}
		out = append(out, rs)
	}
	return out, true
}

// demoConsole is the demo's console with its telemetry over a fresh
// database, served by an httptest server.
func demoConsole(t *testing.T) (*console.App, *Telemetry, *httptest.Server) {
	t.Helper()
	ctx := context.Background()
	store, err := domain.Open(ctx, filepath.Join(t.TempDir(), "d.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = store.Close() })
	if err := store.Seed(ctx); err != nil {
		t.Fatal(err)
	}
	app, tel, err := NewConsole(ctx, console.Options{Store: store, Host: webhost.Options{Logger: slog.New(slog.DiscardHandler)}})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(app)
	t.Cleanup(func() {
		_ = app.Close()
		srv.Close()
		_ = tel.Shutdown(ctx)
	})
	return app, tel, srv
}

// The demo serves /metrics: after the scripted task, the invocation
// counter has a series per capability and outcome (ok, the two-phase
// CONFIRMATION_REQUIRED, the STALE_CAPABILITY the agent recovers from),
// the duration histogram has observations, and no label names or holds
// an instance, invocation, registration or consumer id (bounded
// cardinality, AS-OBSV-001). With OTEL_EXPORTER_OTLP_TRACES_ENDPOINT set,
// the invocation spans reach the collector over OTLP/HTTP, under the
// demo's service name, and a span an MCP client sent as the traceparent
// in _meta is the parent of its call's span.
func TestDemoMetricsAndTraces(t *testing.T) {
	col := &collector{spans: map[string][][]byte{}}
	cs := httptest.NewServer(col)
	defer cs.Close()
	t.Setenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", cs.URL+"/v1/traces")
	t.Setenv("OTEL_SERVICE_NAME", "")
	t.Setenv("OTEL_RESOURCE_ATTRIBUTES", "")

	app, tel, srv := demoConsole(t)
	if tel.exporting != "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT" {
		t.Fatalf("exporting by %q", tel.exporting)
	}
	s, err := app.NewSession(console.SessionOptions{KeepShown: true})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	var steps []agent.Step
	if err := s.PlayScripted(ctx, console.ScriptedRun{URL: srv.URL + "/mcp", Approver: "test", Report: func(st agent.Step) { steps = append(steps, st) }}); err != nil {
		t.Fatal(err)
	}

	// A client span sent in _meta.
	clientTP := sdktrace.NewTracerProvider()
	defer func() { _ = clientTP.Shutdown(ctx) }()
	cctx, span := clientTP.Tracer("client").Start(ctx, "agent step")
	meta := propagation.MapCarrier{}
	propagation.TraceContext{}.Inject(cctx, meta)
	m, err := agent.Dial(ctx, srv.URL+"/mcp", &agent.DialOptions{Token: s.Token(), HTTPClient: srv.Client()})
	if err != nil {
		t.Fatal(err)
	}
	res, err := m.Session().CallTool(cctx, &mcp.CallToolParams{Name: "view_devices__table__sortBy", Arguments: map[string]any{"column": "site"},
		Meta: mcp.Meta{"traceparent": meta["traceparent"]}})
	span.End()
	_ = m.Close()
	if err != nil || res.IsError {
		t.Fatalf("sortBy: %v %+v", err, res)
	}

	families := scrape(t, srv)
	inv := families["agentsurface_invocations_total"]
	if inv == nil || inv.GetType() != dto.MetricType_COUNTER {
		t.Fatalf("no invocation counter among %v", slices.Sorted(mapsKeys(families)))
	}
	for _, want := range []struct{ capability, status, code string }{
		{"view:devices.table.setFilter", "ok", ""},
		{"view:devices.table.selectRows", "ok", ""},
		{"domain:devices.disable", "error", "CONFIRMATION_REQUIRED"},
		{"domain:devices.disable", "ok", ""},
		{"view:devices.table.sortBy", "ok", ""},
	} {
		if n := counter(inv, want.capability, want.status, want.code); n < 1 {
			t.Errorf("no invocation counted for %+v", want)
		}
	}
	stale := false
	for _, mt := range inv.Metric {
		stale = stale || label(mt, "agentsurface_error_code") == "STALE_CAPABILITY"
	}
	if !stale {
		t.Error("the stale call of the task is not counted")
	}
	dur := families["agentsurface_invocation_duration_seconds"]
	if dur == nil || dur.GetType() != dto.MetricType_HISTOGRAM || len(dur.Metric) == 0 || dur.Metric[0].GetHistogram().GetSampleCount() == 0 {
		t.Fatalf("duration histogram: %v", dur)
	}
	allowed := []string{"agentsurface_capability_id", "agentsurface_capability_kind", "agentsurface_consumer_kind", "agentsurface_result_status",
		"agentsurface_error_code", "agentsurface_confirmation_outcome", "agentsurface_component_type", "otel_scope_name", "otel_scope_version", "otel_scope_schema_url"}
	for name, f := range families {
		if !strings.HasPrefix(name, "agentsurface_") {
			continue
		}
		for _, mt := range f.Metric {
			for _, l := range mt.Label {
				if !slices.Contains(allowed, l.GetName()) {
					t.Errorf("%s has label %s=%q", name, l.GetName(), l.GetValue())
				}
				if v := l.GetValue(); strings.HasPrefix(v, "mcp_") || strings.HasPrefix(v, "inv_") || strings.Contains(v, s.Token()) {
					t.Errorf("%s has an id as label value: %s=%q", name, l.GetName(), v)
				}
			}
		}
	}

	// Flush the spans.
	_ = app.Close()
	if err := tel.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	col.mu.Lock()
	defer col.mu.Unlock()
	for _, name := range []string{"invoke view:devices.table.setFilter", "invoke domain:devices.disable", "invoke view:devices.table.sortBy"} {
		if len(col.spans[name]) == 0 {
			t.Errorf("no span %q exported; got %v", name, slices.Sorted(mapsKeys(col.spans)))
		}
	}
	if len(col.svc) == 0 || col.svc[0] != serviceName {
		t.Errorf("service names %v", col.svc)
	}
	tid := span.SpanContext().TraceID()
	if got := col.spans["invoke view:devices.table.sortBy"]; len(got) != 1 || string(got[0]) != string(tid[:]) {
		t.Errorf("the sortBy span is in trace %x, want the client's %s", got, tid)
	}
}

// Without the OTLP endpoint variables the demo exports no span (and so
// opens no connection for telemetry); metrics are still served.
func TestDemoTelemetryDefaultsToNoExporter(t *testing.T) {
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "")
	t.Setenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "")
	_, tel, srv := demoConsole(t)
	if tel.exporting != "" || tel.tp != nil {
		t.Fatalf("exporting by %q", tel.exporting)
	}
	if f := scrape(t, srv); f["target_info"] == nil {
		t.Fatalf("/metrics without target_info: %v", slices.Sorted(mapsKeys(f)))
	}
}

// /metrics has the Go runtime's and the process's series, so that a leak
// of goroutines, heap or descriptors shows, and the console's session
// count, which a page visit raises.
func TestDemoMetricsRuntime(t *testing.T) {
	_, _, srv := demoConsole(t)
	gauge := func(f map[string]*dto.MetricFamily, name string) float64 {
		t.Helper()
		m := f[name]
		if m == nil || len(m.Metric) != 1 || m.Metric[0].GetGauge() == nil {
			t.Fatalf("/metrics has no gauge %s among %d families", name, len(f))
		}
		return m.Metric[0].GetGauge().GetValue()
	}
	f := scrape(t, srv)
	if n := gauge(f, "go_goroutines"); n < 2 {
		t.Errorf("go_goroutines %v", n)
	}
	if h := gauge(f, "go_memstats_heap_alloc_bytes"); h < 1<<20 {
		t.Errorf("go_memstats_heap_alloc_bytes %v", h)
	}
	if fds := gauge(f, "process_open_fds"); fds < 3 {
		t.Errorf("process_open_fds %v", fds)
	}
	if n := gauge(f, "agentsurface_console_sessions"); n != 0 {
		t.Errorf("sessions before any visit: %v", n)
	}
	resp, err := srv.Client().Get(srv.URL + "/")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if n := gauge(scrape(t, srv), "agentsurface_console_sessions"); n != 1 {
		t.Errorf("sessions after a visit: %v", n)
	}
}

// scrape GETs /metrics and parses the text format.
func scrape(t *testing.T, srv *httptest.Server) map[string]*dto.MetricFamily {
	t.Helper()
	resp, err := srv.Client().Get(srv.URL + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("/metrics: %s", resp.Status)
	}
	p := expfmt.NewTextParser(model.UTF8Validation)
	families, err := p.TextToMetricFamilies(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return families
}

// counter returns the value of the series of f with these labels.
func counter(f *dto.MetricFamily, capability, status, code string) float64 {
	for _, m := range f.Metric {
		if label(m, "agentsurface_capability_id") == capability && label(m, "agentsurface_result_status") == status && label(m, "agentsurface_error_code") == code {
			return m.GetCounter().GetValue()
		}
	}
	return 0
}

func label(m *dto.Metric, name string) string {
	for _, l := range m.Label {
		if l.GetName() == name {
			return l.GetValue()
		}
	}
	return ""
}

func mapsKeys[V any](m map[string]V) func(func(string) bool) {
	return func(yield func(string) bool) {
		for k := range m {
			if !yield(k) {
				return
			}
		}
	}
}
