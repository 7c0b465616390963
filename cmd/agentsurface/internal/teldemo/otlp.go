package teldemo

// The demo's OTLP/HTTP traces client. The OpenTelemetry exporter
// (otlptrace) turns spans into OTLP messages and batches them; this
// client posts them, protobuf over HTTP, as the OTLP specification says.
// The SDK's own otlptracehttp client does the same, but its shared
// configuration code links the whole gRPC stack and grpc-gateway into the
// binary (about 7% of a cold build of this command) for a transport the
// demo never uses.

import (
	"bytes"
	"cmp"
	"compress/gzip"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"path"
	"strconv"
	"strings"
	"sync"
	"time"

	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
)

// otlpClient implements otlptrace.Client: it posts
// ExportTraceServiceRequest messages to an OTLP/HTTP endpoint.
type otlpClient struct {
	url      string
	headers  http.Header
	gzip     bool
	timeout  time.Duration // of one export, retries included
	hc       *http.Client
	stop     chan struct{}
	stopOnce sync.Once
	// retryBase is the first wait before a retry; the waits double up to
	// 30 s. Default 1 s.
	retryBase time.Duration
}

// otlpEnv reads the standard OTEL_EXPORTER_OTLP_* variables; a
// TRACES_ variable wins over its generic form.
type otlpEnv struct {
	getenv   func(string) string
	readFile func(string) ([]byte, error)
}

func (e otlpEnv) get(name string) string {
	return cmp.Or(strings.TrimSpace(e.getenv("OTEL_EXPORTER_OTLP_TRACES_"+name)), strings.TrimSpace(e.getenv("OTEL_EXPORTER_OTLP_"+name)))
}

// newOTLPClient configures a client from the environment, as the
// OpenTelemetry specification describes the variables for OTLP/HTTP:
//
//   - OTEL_EXPORTER_OTLP_TRACES_ENDPOINT is the URL spans are posted to,
//     as is; else OTEL_EXPORTER_OTLP_ENDPOINT is a base URL, and they go
//     to its path joined with v1/traces;
//   - _HEADERS: key=value pairs, comma separated, values URL-encoded;
//   - _TIMEOUT: milliseconds an export may take (default 10 s);
//   - _COMPRESSION: gzip or none;
//   - _CERTIFICATE: a PEM file of the CAs that sign the collector's
//     certificate; _CLIENT_CERTIFICATE and _CLIENT_KEY: PEM files of a
//     client certificate, for mutual TLS;
//   - _INSECURE=true sends to http even when the URL says https.
func newOTLPClient(e otlpEnv) (*otlpClient, error) {
	c := &otlpClient{headers: http.Header{}, timeout: 10 * time.Second, stop: make(chan struct{}), retryBase: time.Second}
	raw, joinPath := strings.TrimSpace(e.getenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")), false
	if raw == "" {
		raw, joinPath = strings.TrimSpace(e.getenv("OTEL_EXPORTER_OTLP_ENDPOINT")), true
	}
	u, err := url.Parse(raw)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("the OTLP endpoint %q is not an http:// or https:// URL", raw)
	}
	switch {
	case joinPath:
		u.Path = path.Join("/", u.Path, "v1/traces")
	case u.Path == "":
		u.Path = "/"
	}
	if b, err := strconv.ParseBool(e.get("INSECURE")); err == nil && b {
		u.Scheme = "http"
	}
	c.url = u.String()

	if h := e.get("HEADERS"); h != "" {
		for pair := range strings.SplitSeq(h, ",") {
			k, v, ok := strings.Cut(pair, "=")
			k = strings.TrimSpace(k)
			uv, err := url.PathUnescape(strings.TrimSpace(v))
			if !ok || k == "" || err != nil {
				return nil, fmt.Errorf("the OTLP headers variable has a malformed entry %q (want key=url-encoded-value)", pair)
			}
			c.headers.Set(k, uv)
		}
	}
	if s := e.get("TIMEOUT"); s != "" {
		ms, err := strconv.Atoi(s)
		if err != nil || ms <= 0 {
			return nil, fmt.Errorf("the OTLP timeout %q is not a positive number of milliseconds", s)
		}
		c.timeout = time.Duration(ms) * time.Millisecond
	}
	switch s := e.get("COMPRESSION"); s {
	case "gzip":
		c.gzip = true
	case "", "none":
	default:
		return nil, fmt.Errorf("the OTLP compression %q is neither gzip nor none", s)
	}

	tr := http.DefaultTransport.(*http.Transport).Clone()
	if f := e.get("CERTIFICATE"); f != "" {
		pem, err := e.readFile(f)
		if err != nil {
			return nil, fmt.Errorf("the OTLP certificate: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("the OTLP certificate %s holds no PEM certificate", f)
		}
		tr.TLSClientConfig = &tls.Config{RootCAs: pool}
	}
	certFile, keyFile := e.get("CLIENT_CERTIFICATE"), e.get("CLIENT_KEY")
	if certFile != "" || keyFile != "" {
		certPEM, err1 := e.readFile(certFile)
		keyPEM, err2 := e.readFile(keyFile)
		if err := errors.Join(err1, err2); err != nil {
			return nil, fmt.Errorf("the OTLP client certificate: %w", err)
		}
		cert, err := tls.X509KeyPair(certPEM, keyPEM)
		if err != nil {
			return nil, fmt.Errorf("the OTLP client certificate: %w", err)
		}
		if tr.TLSClientConfig == nil {
			tr.TLSClientConfig = &tls.Config{}
		}
		tr.TLSClientConfig.Certificates = []tls.Certificate{cert}
	}
	c.hc = &http.Client{Transport: tr}
	return c, nil
}

// Start implements otlptrace.Client.
func (c *otlpClient) Start(context.Context) error { return nil }

// Stop implements otlptrace.Client: exports waiting to retry give up.
func (c *otlpClient) Stop(context.Context) error {
	c.stopOnce.Do(func() { close(c.stop) })
	c.hc.CloseIdleConnections()
	return nil
}

// UploadTraces implements otlptrace.Client: one POST of the spans, sent
// again after 429, 502, 503 or 504 (waiting as Retry-After says, or
// doubling waits from retryBase) and after a connection that got no
// answer, within the timeout.
func (c *otlpClient) UploadTraces(ctx context.Context, spans []*tracepb.ResourceSpans) error {
	body, err := exportRequest(spans)
	if err != nil {
		return err
	}
	if c.gzip {
		var b bytes.Buffer
		zw := gzip.NewWriter(&b)
		_, _ = zw.Write(body)
		if err := zw.Close(); err != nil {
			return err
		}
		body = b.Bytes()
	}
	ctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	wait := c.retryBase
	var retried error // the last failure worth a retry
	for {
		retryAfter, err := c.post(ctx, body)
		if err != nil && retried != nil && ctx.Err() != nil {
			// The timeout ended a retry's post: the collector's last
			// answer says more than the deadline does.
			return fmt.Errorf("%w (gave up retrying: %v)", retried, context.Cause(ctx))
		}
		if retryAfter < 0 || err == nil {
			return err
		}
		retried = err
		if retryAfter == 0 {
			retryAfter, wait = wait, min(2*wait, 30*time.Second)
		}
		t := time.NewTimer(retryAfter)
		select {
		case <-ctx.Done():
			t.Stop()
			return fmt.Errorf("%w (gave up retrying: %v)", err, context.Cause(ctx))
		case <-c.stop:
			t.Stop()
			return fmt.Errorf("%w (gave up retrying: the exporter stopped)", err)
		case <-t.C:
		}
	}
}

// post sends body once. retryAfter is negative when the failure is not
// worth a retry, 0 for the next backoff step, positive for the server's
// Retry-After.
func (c *otlpClient) post(ctx context.Context, body []byte) (retryAfter time.Duration, _ error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.url, bytes.NewReader(body))
	if err != nil {
		return -1, err
	}
	for k, v := range c.headers {
		req.Header[k] = v
	}
	req.Header.Set("Content-Type", "application/x-protobuf")
	req.Header.Set("User-Agent", "agentsurface-demo OTLP/HTTP")
	if c.gzip {
		req.Header.Set("Content-Encoding", "gzip")
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		// Retried: what the SDK's client retries (a reset or timed-out
		// connection), and a kept-alive connection the server closed.
		var ue *url.Error
		if ctx.Err() == nil && (errors.As(err, &ue) && ue.Temporary() || errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF)) {
			return 0, err
		}
		return -1, err
	}
	defer resp.Body.Close()
	answer, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	if resp.StatusCode/100 == 2 {
		if resp.Header.Get("Content-Type") == "application/x-protobuf" {
			if n, msg := partialSuccess(answer); n > 0 || msg != "" {
				return -1, fmt.Errorf("OTLP partial success: %d spans rejected: %s", n, msg)
			}
		}
		return -1, nil
	}
	err = fmt.Errorf("OTLP export to %s: %s: %s", c.url, resp.Status, cmp.Or(strings.TrimSpace(string(answer)), "(empty)"))
	switch resp.StatusCode {
	case http.StatusTooManyRequests, http.StatusBadGateway, http.StatusServiceUnavailable, http.StatusGatewayTimeout:
		if s, perr := strconv.Atoi(resp.Header.Get("Retry-After")); perr == nil && s > 0 {
			return time.Duration(s) * time.Second, err
		}
		return 0, err
	}
	return -1, err
}

// exportRequest encodes an ExportTraceServiceRequest: its one field,
// resource_spans (1), repeated.
func exportRequest(spans []*tracepb.ResourceSpans) ([]byte, error) {
	var b []byte
	for _, rs := range spans {
		m, err := proto.Marshal(rs)
		if err != nil {
			return nil, err
		}
		b = protowire.AppendTag(b, 1, protowire.BytesType)
		b = protowire.AppendBytes(b, m)
	}
	return b, nil
}

// partialSuccess decodes the partial_success (1) of an
// ExportTraceServiceResponse: rejected_spans (1) and error_message (2).
func partialSuccess(b []byte) (rejected int64, msg string) {
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return 0, ""
		}
		b = b[n:]
		if num != 1 || typ != protowire.BytesType {
			if n = protowire.ConsumeFieldValue(num, typ, b); n < 0 {
				return 0, ""
			}
			b = b[n:]
			continue
		}
		ps, n := protowire.ConsumeBytes(b)
		if n < 0 {
			return 0, ""
		}
		b = b[n:]
		for len(ps) > 0 {
			num, typ, n := protowire.ConsumeTag(ps)
			if n < 0 {
				return rejected, msg
			}
			ps = ps[n:]
			switch {
			case num == 1 && typ == protowire.VarintType:
				v, n := protowire.ConsumeVarint(ps)
				if n < 0 {
					return rejected, msg
				}
				rejected, ps = int64(v), ps[n:]
			case num == 2 && typ == protowire.BytesType:
				v, n := protowire.ConsumeBytes(ps)
				if n < 0 {
					return rejected, msg
				}
				msg, ps = string(v), ps[n:]
			default:
				if n = protowire.ConsumeFieldValue(num, typ, ps); n < 0 {
					return rejected, msg
				}
				ps = ps[n:]
			}
		}
	}
	return rejected, msg
}
