package teldemo

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/pem"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
)

// env is an otlpEnv over a map.
func env(vars map[string]string) otlpEnv {
	return otlpEnv{getenv: func(k string) string { return vars[k] }, readFile: os.ReadFile}
}

// The standard variables configure the client as the OpenTelemetry
// specification says for OTLP/HTTP.
func TestOTLPClientFromEnv(t *testing.T) {
	for _, tc := range []struct {
		vars    map[string]string
		url     string
		headers http.Header
		gzip    bool
		timeout time.Duration
		err     string
	}{
		{vars: map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://collector:4318"}, url: "http://collector:4318/v1/traces", timeout: 10 * time.Second},
		{vars: map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "https://c.example/otlp/"}, url: "https://c.example/otlp/v1/traces", timeout: 10 * time.Second},
		// A per-signal URL is used as is; no path is the root.
		{vars: map[string]string{"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://c:4318/custom", "OTEL_EXPORTER_OTLP_ENDPOINT": "http://other"}, url: "http://c:4318/custom", timeout: 10 * time.Second},
		{vars: map[string]string{"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://c:4318"}, url: "http://c:4318/", timeout: 10 * time.Second},
		{vars: map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "https://c", "OTEL_EXPORTER_OTLP_INSECURE": "true"}, url: "http://c/v1/traces", timeout: 10 * time.Second},
		{vars: map[string]string{
			"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c", "OTEL_EXPORTER_OTLP_HEADERS": "api-key=a%20b, x-tenant = t1",
			"OTEL_EXPORTER_OTLP_TIMEOUT": "2500", "OTEL_EXPORTER_OTLP_TRACES_COMPRESSION": "gzip", "OTEL_EXPORTER_OTLP_COMPRESSION": "none",
		}, url: "http://c/v1/traces", headers: http.Header{"Api-Key": {"a b"}, "X-Tenant": {"t1"}}, gzip: true, timeout: 2500 * time.Millisecond},
		// The traces form of a variable wins.
		{vars: map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c", "OTEL_EXPORTER_OTLP_HEADERS": "a=1", "OTEL_EXPORTER_OTLP_TRACES_HEADERS": "b=2"},
			url: "http://c/v1/traces", headers: http.Header{"B": {"2"}}, timeout: 10 * time.Second},
		{vars: map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "collector:4318"}, err: "not an http:// or https:// URL"},
		{vars: map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c", "OTEL_EXPORTER_OTLP_HEADERS": "novalue"}, err: "malformed entry"},
		{vars: map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c", "OTEL_EXPORTER_OTLP_TIMEOUT": "10s"}, err: "milliseconds"},
		{vars: map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c", "OTEL_EXPORTER_OTLP_COMPRESSION": "zstd"}, err: "neither gzip nor none"},
		{vars: map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "https://c", "OTEL_EXPORTER_OTLP_CERTIFICATE": "/nonexistent.pem"}, err: "certificate"},
	} {
		c, err := newOTLPClient(env(tc.vars))
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("%v: got %v, want an error with %q", tc.vars, err, tc.err)
			}
			continue
		}
		if err != nil {
			t.Errorf("%v: %v", tc.vars, err)
			continue
		}
		if tc.headers == nil {
			tc.headers = http.Header{}
		}
		if c.url != tc.url || c.gzip != tc.gzip || c.timeout != tc.timeout || !equalHeaders(c.headers, tc.headers) {
			t.Errorf("%v: url %q gzip %v timeout %s headers %v", tc.vars, c.url, c.gzip, c.timeout, c.headers)
		}
	}
}

func equalHeaders(a, b http.Header) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if strings.Join(v, ",") != strings.Join(b[k], ",") {
			return false
		}
	}
	return true
}

// spansIn decodes an ExportTraceServiceRequest body (field 1, repeated
// ResourceSpans) into the names of its spans.
func spansIn(t testing.TB, body []byte) []string {
	t.Helper()
	var names []string
	for len(body) > 0 {
		num, typ, n := protowire.ConsumeTag(body)
		if n < 0 || num != 1 || typ != protowire.BytesType {
			t.Fatalf("not an ExportTraceServiceRequest: field %d type %d", num, typ)
		}
		body = body[n:]
		m, n := protowire.ConsumeBytes(body)
		if n < 0 {
			t.Fatal("truncated request")
		}
		body = body[n:]
		var rs tracepb.ResourceSpans
		if err := proto.Unmarshal(m, &rs); err != nil {
			t.Fatal(err)
		}
		for _, ss := range rs.ScopeSpans {
			for _, s := range ss.Spans {
				names = append(names, s.Name)
			}
		}
	}
	return names
}

func someSpans(names ...string) []*tracepb.ResourceSpans {
	ss := &tracepb.ScopeSpans{Scope: &commonpb.InstrumentationScope{Name: "test"}}
	for _, n := range names {
		ss.Spans = append(ss.Spans, &tracepb.Span{Name: n, TraceId: make([]byte, 16), SpanId: make([]byte, 8)})
	}
	return []*tracepb.ResourceSpans{{ScopeSpans: []*tracepb.ScopeSpans{ss}}}
}

// An upload posts protobuf (gzipped when asked) with the configured
// headers; 503 is retried, 400 is not, and a partial success is an error
// that says how many spans the collector rejected.
func TestOTLPUpload(t *testing.T) {
	var mu sync.Mutex
	var got [][]string
	var encodings, keys []string
	answers := []int{}
	col := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		if r.Header.Get("Content-Encoding") == "gzip" {
			zr, err := gzip.NewReader(bytes.NewReader(body))
			if err != nil {
				http.Error(w, "bad gzip", http.StatusBadRequest)
				return
			}
			body, _ = io.ReadAll(zr)
		}
		mu.Lock()
		defer mu.Unlock()
		got = append(got, spansIn(t, body))
		encodings = append(encodings, r.Header.Get("Content-Encoding"))
		keys = append(keys, r.Header.Get("Api-Key"))
		status := http.StatusOK
		if len(answers) > 0 {
			status, answers = answers[0], answers[1:]
		}
		switch status {
		case http.StatusOK:
			w.Header().Set("Content-Type", "application/x-protobuf")
		case 299: // partial success: rejected_spans 2, error_message "full"
			var ps []byte
			ps = protowire.AppendTag(ps, 1, protowire.VarintType)
			ps = protowire.AppendVarint(ps, 2)
			ps = protowire.AppendTag(ps, 2, protowire.BytesType)
			ps = protowire.AppendString(ps, "full")
			var b []byte
			b = protowire.AppendTag(b, 1, protowire.BytesType)
			b = protowire.AppendBytes(b, ps)
			w.Header().Set("Content-Type", "application/x-protobuf")
			_, _ = w.Write(b)
		default:
			http.Error(w, "no", status)
		}
	}))
	defer col.Close()
	reset := func(st ...int) {
		mu.Lock()
		got, encodings, keys, answers = nil, nil, nil, st
		mu.Unlock()
	}
	c, err := newOTLPClient(env(map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": col.URL, "OTEL_EXPORTER_OTLP_HEADERS": "api-key=k1", "OTEL_EXPORTER_OTLP_COMPRESSION": "gzip"}))
	if err != nil {
		t.Fatal(err)
	}
	c.retryBase = time.Millisecond
	ctx := context.Background()

	reset(http.StatusServiceUnavailable, http.StatusTooManyRequests)
	if err := c.UploadTraces(ctx, someSpans("a", "b")); err != nil {
		t.Fatal(err)
	}
	if len(got) != 3 || strings.Join(got[2], ",") != "a,b" || encodings[2] != "gzip" || keys[2] != "k1" {
		t.Fatalf("retried upload: %v %v %v", got, encodings, keys)
	}
	reset(http.StatusBadRequest)
	if err := c.UploadTraces(ctx, someSpans("c")); err == nil || !strings.Contains(err.Error(), "400") || len(got) != 1 {
		t.Fatalf("400: %v after %d posts", err, len(got))
	}
	reset(299)
	if err := c.UploadTraces(ctx, someSpans("d")); err == nil || !strings.Contains(err.Error(), "2 spans rejected: full") {
		t.Fatalf("partial success: %v", err)
	}
	// A collector that keeps answering 503 is retried until the export's
	// timeout, then the error says so.
	c.timeout = 50 * time.Millisecond
	reset(503, 503, 503, 503, 503, 503, 503, 503, 503, 503, 503, 503, 503, 503, 503, 503, 503, 503, 503, 503)
	if err := c.UploadTraces(ctx, someSpans("e")); err == nil || !strings.Contains(err.Error(), "gave up retrying") {
		t.Fatalf("503 forever: %v", err)
	}
	// After Stop, a retry wait ends at once. The collector keeps answering
	// 503: a post of the abandoned export above may still reach it and take
	// an answer meant for this one.
	c.timeout, c.retryBase = time.Minute, time.Minute
	reset(503, 503, 503, 503)
	_ = c.Stop(ctx)
	if err := c.UploadTraces(ctx, someSpans("f")); err == nil || !strings.Contains(err.Error(), "exporter stopped") {
		t.Fatalf("stopped: %v", err)
	}
}

// An https collector is reached with the CA of
// OTEL_EXPORTER_OTLP_CERTIFICATE, and refused without it.
func TestOTLPCertificate(t *testing.T) {
	col := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	defer col.Close()
	file := filepath.Join(t.TempDir(), "ca.pem")
	if err := os.WriteFile(file, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: col.Certificate().Raw}), 0o600); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	trusted, err := newOTLPClient(env(map[string]string{"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": col.URL + "/v1/traces", "OTEL_EXPORTER_OTLP_CERTIFICATE": file}))
	if err != nil {
		t.Fatal(err)
	}
	if err := trusted.UploadTraces(ctx, someSpans("a")); err != nil {
		t.Fatal(err)
	}
	untrusted, err := newOTLPClient(env(map[string]string{"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": col.URL + "/v1/traces"}))
	if err != nil {
		t.Fatal(err)
	}
	if err := untrusted.UploadTraces(ctx, someSpans("a")); err == nil || !strings.Contains(err.Error(), "certificate") {
		t.Fatalf("untrusted: %v", err)
	}
}
