package otelsurface_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"go.opentelemetry.io/otel/propagation"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/agentsurface/agentsurface/surface"
	"github.com/agentsurface/agentsurface/surface/surfacetest"
)

// A procedure call over httpexec carries the invocation span's W3C trace
// context to the domain backend.
func TestHTTPExecTraceparent(t *testing.T) {
	h := newHarness(t, nil)
	var mu sync.Mutex
	var got []http.Header
	backend := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		got = append(got, r.Header.Clone())
		mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"disabled":1}`))
	}))
	defer backend.Close()
	reg := h.disableOverHTTP(t, backend)
	ctx, parent := h.tracer().Start(context.Background(), "agent turn")
	res := reg.Invoke(ctx, surface.Invocation{CapabilityID: "domain:devices.disable", Input: json.RawMessage(`{"ids":["d1"]}`)}, agent)
	parent.End()
	surfacetest.RequireOK(t, res)

	inv := h.span(t, "invoke domain:devices.disable")
	mu.Lock()
	defer mu.Unlock()
	if len(got) != 1 {
		t.Fatalf("%d requests", len(got))
	}
	tp := got[0].Get("traceparent")
	want := "00-" + inv.SpanContext.TraceID().String() + "-" + inv.SpanContext.SpanID().String() + "-01"
	if tp != want {
		t.Fatalf("backend got traceparent %q, want the invocation span's %q", tp, want)
	}
	if got[0].Get("Idempotency-Key") != res.InvocationID {
		t.Fatalf("headers = %v", got[0])
	}
	requireAttrs(t, "procedure span", inv.Attributes, map[string]any{
		"agentsurface.capability.plane": "domain", "agentsurface.capability.kind": "procedure", "agentsurface.capability.effect": "server-query",
	})
}

// Transport leaves the caller's request alone and injects nothing
// without a span.
func TestTransportDoesNotChangeTheRequest(t *testing.T) {
	h := newHarness(t, nil)
	var seen http.Header
	rt := h.tel.Transport(roundTripFunc(func(r *http.Request) (*http.Response, error) {
		seen = r.Header
		return &http.Response{StatusCode: 204, Body: http.NoBody, Request: r}, nil
	}))
	ctx, span := h.tracer().Start(context.Background(), "s")
	defer span.End()
	req, _ := http.NewRequestWithContext(ctx, "GET", "http://backend.invalid/x", nil)
	req.Header.Set("X-Mine", "1")
	if _, err := rt.RoundTrip(req); err != nil {
		t.Fatal(err)
	}
	if req.Header.Get("traceparent") != "" || seen.Get("traceparent") == "" || seen.Get("X-Mine") != "1" {
		t.Fatalf("caller's headers %v, sent %v", req.Header, seen)
	}
	req, _ = http.NewRequest("GET", "http://backend.invalid/x", nil)
	if _, err := rt.RoundTrip(req); err != nil {
		t.Fatal(err)
	}
	if seen.Get("traceparent") != "" {
		t.Fatalf("sent %v without a span", seen)
	}
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// An MCP client that sends a traceparent in a tools/call request's _meta
// gets its trace continued by the registry's span: the extractor runs in
// the tool handler, before Invoke.
func TestMCPMetaTraceContext(t *testing.T) {
	h := newHarness(t, nil)
	reg := h.registry(t, nil)
	wh := surfacetest.MustRegister(t, reg, widget("w1", nil))

	server := mcp.NewServer(&mcp.Implementation{Name: "test", Version: "1"}, nil)
	server.AddTool(&mcp.Tool{Name: "set", InputSchema: json.RawMessage(`{"type":"object"}`)},
		func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			ctx = h.tel.ExtractMeta(ctx, req.Params.Meta)
			res := reg.Invoke(ctx, surface.Invocation{CapabilityID: setID, RegistrationID: wh.ID(), Input: req.Params.Arguments}, agent)
			b, _ := json.Marshal(res)
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: string(b)}}, IsError: res.Error != nil}, nil
		})
	st, ct := mcp.NewInMemoryTransports()
	ctx := context.Background()
	ss, err := server.Connect(ctx, st, nil)
	if err != nil {
		t.Fatal(err)
	}
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "agent", Version: "1"}, nil).Connect(ctx, ct, nil)
	if err != nil {
		t.Fatal(err)
	}

	// The agent framework is another process: its own provider and
	// exporter, nothing shared but the _meta of the request.
	agentSpans := tracetest.NewInMemoryExporter()
	agentTP := sdktrace.NewTracerProvider(sdktrace.WithSyncer(agentSpans))
	defer func() { _ = agentTP.Shutdown(ctx) }()
	actx, tool := agentTP.Tracer("agent").Start(ctx, "agent tool call")
	carrier := propagation.MapCarrier{}
	propagation.TraceContext{}.Inject(actx, carrier) // what any W3C client writes
	meta := mcp.Meta{}
	for k, v := range carrier {
		meta[k] = v
	}
	if meta["traceparent"] == nil {
		t.Fatalf("the client wrote no traceparent: %v", meta)
	}
	res, err := cs.CallTool(actx, &mcp.CallToolParams{Meta: meta, Name: "set", Arguments: map[string]any{"ids": []string{"d1"}}})
	tool.End()
	if err != nil || res.IsError {
		t.Fatalf("call: %v %+v", err, res)
	}
	if err := cs.Close(); err != nil {
		t.Fatal(err)
	}
	_ = ss.Wait()

	inv := h.span(t, "invoke "+setID)
	client := agentSpans.GetSpans()[0]
	if inv.SpanContext.TraceID() != client.SpanContext.TraceID() {
		t.Fatalf("registry span trace %v, want the client's %v", inv.SpanContext.TraceID(), client.SpanContext.TraceID())
	}
	if inv.Parent.SpanID() != client.SpanContext.SpanID() || !inv.Parent.IsRemote() {
		t.Fatalf("registry span parent %v (remote %v), want the client's span %v", inv.Parent.SpanID(), inv.Parent.IsRemote(), client.SpanContext.SpanID())
	}
}

// ExtractMeta ignores what is not a W3C trace context and round-trips
// what InjectMeta writes.
func TestMetaExtractInject(t *testing.T) {
	h := newHarness(t, nil)
	ctx := context.Background()
	for _, meta := range []map[string]any{
		nil,
		{},
		{"traceparent": 42},
		{"traceparent": "00-zzz-yyy-01"},
		{"traceparent": "00-00000000000000000000000000000000-0000000000000000-01"},
		{"progressToken": "p1"},
	} {
		if got := h.tel.ExtractMeta(ctx, meta); trace.SpanContextFromContext(got).IsValid() {
			t.Fatalf("%v gave a span context", meta)
		}
	}
	sctx, span := h.tracer().Start(ctx, "client")
	defer span.End()
	meta := map[string]any{"progressToken": "p1"}
	h.tel.InjectMeta(sctx, meta)
	if _, ok := meta["traceparent"].(string); !ok || meta["progressToken"] != "p1" {
		t.Fatalf("meta = %v", meta)
	}
	got := trace.SpanContextFromContext(h.tel.ExtractMeta(ctx, meta))
	if got.TraceID() != span.SpanContext().TraceID() || got.SpanID() != span.SpanContext().SpanID() || !got.IsRemote() {
		t.Fatalf("extracted %v, want %v", got, span.SpanContext())
	}
}
