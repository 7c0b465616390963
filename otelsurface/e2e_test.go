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

	"github.com/agentsurface/agentsurface/mcpsurface"
	"github.com/agentsurface/agentsurface/surface"
)

// One trace end to end (AS-OBSV-001): an agent framework's span, sent by
// a go-sdk MCP client over real Streamable HTTP as the W3C traceparent in
// the tool call's _meta, is continued by mcpsurface (its TraceContext
// option is ExtractMeta), parents the registry's invocation span, and
// reaches the domain backend in the traceparent header of the procedure's
// httpexec request (the Instrumentation's Transport injects it with the
// propagator).
func TestMCPToBackendOneTrace(t *testing.T) {
	h := newHarness(t, nil)
	ctx := context.Background()

	var mu sync.Mutex
	var received []http.Header
	backend := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		received = append(received, r.Header.Clone())
		mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"disabled":1}`))
	}))
	defer backend.Close()
	reg := h.disableOverHTTP(t, backend)

	handler := mcpsurface.NewHTTPHandler(func(r *http.Request) (*surface.Registry, surface.Consumer, error) {
		return reg, surface.Consumer{ID: "agent"}, nil
	}, &mcpsurface.HTTPOptions{Options: mcpsurface.Options{TraceContext: h.tel.ExtractMeta}})
	srv := httptest.NewServer(handler)
	defer srv.Close()
	defer handler.Close()

	cs, err := mcp.NewClient(&mcp.Implementation{Name: "agent", Version: "1"}, nil).Connect(ctx,
		&mcp.StreamableClientTransport{Endpoint: srv.URL, HTTPClient: srv.Client(), MaxRetries: -1}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	tools, err := cs.ListTools(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	var tool string
	for _, tl := range tools.Tools {
		if tl.Meta[mcpsurface.MetaCapabilityID] == "domain:devices.disable" {
			tool = tl.Name
		}
	}
	if tool == "" {
		t.Fatalf("no tool for the procedure in %d tools", len(tools.Tools))
	}

	// The agent framework is another process: its own provider, nothing
	// shared but the request's _meta, written by the propagator.
	agentSpans := tracetest.NewInMemoryExporter()
	agentTP := sdktrace.NewTracerProvider(sdktrace.WithSyncer(agentSpans))
	defer func() { _ = agentTP.Shutdown(ctx) }()
	actx, span := agentTP.Tracer("agent").Start(ctx, "agent tool call")
	carrier := propagation.MapCarrier{}
	propagation.TraceContext{}.Inject(actx, carrier)
	meta := mcp.Meta{}
	for k, v := range carrier {
		meta[k] = v
	}
	res, err := cs.CallTool(actx, &mcp.CallToolParams{Meta: meta, Name: tool, Arguments: map[string]any{"ids": []string{"d1"}}})
	span.End()
	if err != nil || res.IsError {
		t.Fatalf("call: %v %+v", err, res)
	}
	var env struct {
		Status string `json:"status"`
	}
	if err := json.Unmarshal([]byte(res.Content[0].(*mcp.TextContent).Text), &env); err != nil || env.Status != "ok" {
		t.Fatalf("envelope %v: %v", env, err)
	}

	client := agentSpans.GetSpans()[0].SpanContext
	inv := h.span(t, "invoke domain:devices.disable")
	if inv.SpanContext.TraceID() != client.TraceID() {
		t.Fatalf("invocation span in trace %v, want the client's %v", inv.SpanContext.TraceID(), client.TraceID())
	}
	if inv.Parent.SpanID() != client.SpanID() || !inv.Parent.IsRemote() {
		t.Fatalf("invocation span's parent %v (remote %v), want the client's span %v", inv.Parent.SpanID(), inv.Parent.IsRemote(), client.SpanID())
	}
	mu.Lock()
	defer mu.Unlock()
	if len(received) != 1 {
		t.Fatalf("the backend got %d requests", len(received))
	}
	got := trace.SpanContextFromContext(propagation.TraceContext{}.Extract(ctx, propagation.HeaderCarrier(received[0])))
	if got.TraceID() != client.TraceID() || got.SpanID() != inv.SpanContext.SpanID() {
		t.Fatalf("the backend got traceparent %q: trace %v parent %v, want trace %v parent %v (the invocation span)",
			received[0].Get("traceparent"), got.TraceID(), got.SpanID(), client.TraceID(), inv.SpanContext.SpanID())
	}
}
