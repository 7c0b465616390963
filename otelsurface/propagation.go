package otelsurface

import (
	"context"
	"net/http"

	"go.opentelemetry.io/otel/propagation"
)

// Transport returns a RoundTripper that sends each request through base
// with the trace context of the request's context injected by the
// propagator (W3C traceparent and tracestate by default). Nil base means
// http.DefaultTransport.
//
// Give it to surface/httpexec so that procedure calls continue the
// invocation's trace in the domain backend: the executor's requests carry
// the context of the invocation span.
//
//	exec, err := httpexec.New(&httpexec.Options{
//		BaseURL: "https://api.internal/rpc",
//		Paths:   []string{"devices.disable"},
//		Client: &http.Client{
//			Transport:     tel.Transport(http.DefaultTransport.(*http.Transport).Clone()),
//			CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
//		},
//	})
//
// It only propagates; for client spans of their own, wrap base with
// go.opentelemetry.io/contrib/instrumentation/net/http/otelhttp instead
// (which injects with the global propagator).
func (i *Instrumentation) Transport(base http.RoundTripper) http.RoundTripper {
	if base == nil {
		base = http.DefaultTransport
	}
	return &transport{base: base, prop: i.prop}
}

type transport struct {
	base http.RoundTripper
	prop propagation.TextMapPropagator
}

// RoundTrip implements http.RoundTripper. It does not change req: the
// headers go on a clone.
func (t *transport) RoundTrip(req *http.Request) (*http.Response, error) {
	r := req.Clone(req.Context())
	t.prop.Inject(req.Context(), propagation.HeaderCarrier(r.Header))
	return t.base.RoundTrip(r)
}

// CloseIdleConnections closes the idle connections of base, if it can,
// so http.Client.CloseIdleConnections still reaches them.
func (t *transport) CloseIdleConnections() {
	if c, ok := t.base.(interface{ CloseIdleConnections() }); ok {
		c.CloseIdleConnections()
	}
}

// ExtractMeta returns ctx carrying the trace context an MCP client sent in
// a request's _meta ("traceparent", "tracestate"), so that the spans of
// the call, the registry's invocation span first, continue the client's
// trace. Without such keys (or with malformed values) it returns ctx
// unchanged. Its signature uses no OpenTelemetry type: an MCP adapter can
// take it as a plain func option.
func (i *Instrumentation) ExtractMeta(ctx context.Context, meta map[string]any) context.Context {
	if len(meta) == 0 {
		return ctx
	}
	return i.prop.Extract(ctx, metaCarrier(meta))
}

// InjectMeta writes the trace context of ctx into meta, the _meta of an
// outgoing MCP request, for clients written in Go.
func (i *Instrumentation) InjectMeta(ctx context.Context, meta map[string]any) {
	i.prop.Inject(ctx, metaCarrier(meta))
}

// metaCarrier adapts an MCP _meta map to the propagators: string values
// only.
type metaCarrier map[string]any

func (c metaCarrier) Get(key string) string {
	s, _ := c[key].(string)
	return s
}

func (c metaCarrier) Set(key, value string) { c[key] = value }

func (c metaCarrier) Keys() []string {
	keys := make([]string, 0, len(c))
	for k := range c {
		keys = append(keys, k)
	}
	return keys
}
