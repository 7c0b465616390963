package httpexec

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/agentsurface/agentsurface/surface"
)

// DefaultMaxResponseBytes is the response size limit used when
// Options.MaxResponseBytes is zero: 1 MiB.
const DefaultMaxResponseBytes = 1 << 20

const (
	// maxPathLength is the longest procedure path: a domain id,
	// "domain:" + path, is at most surface.MaxIDLength long.
	maxPathLength = surface.MaxIDLength - len("domain:")
	// maxExcerpt bounds the body excerpt written to the log, in bytes.
	maxExcerpt = 512
	// maxApprovalID bounds a server approval id forwarded to the agent.
	maxApprovalID = 128
	// approvedAtLayout is RFC 3339 in UTC with milliseconds, the
	// timestamp format of the registry.
	approvedAtLayout = "2006-01-02T15:04:05.000Z07:00"
)

// Header names of the wire protocol.
const (
	headerIdempotencyKey     = "Idempotency-Key"
	headerConsumer           = "X-Agent-Consumer"
	headerConfirmationID     = "X-Confirmation-Id"
	headerConfirmationAtTime = "X-Confirmation-Approved-At"
)

// Options configures an [Executor]. BaseURL and Paths are required; every
// other field has a documented default for its zero value.
type Options struct {
	// BaseURL is the absolute http or https URL under which the backend
	// serves procedures, e.g. "https://api.internal/rpc". Each procedure
	// path is POSTed to BaseURL + "/" + path. It must have a host and no
	// user info, query or fragment; a trailing "/" is ignored.
	BaseURL string
	// Paths is the manifest: the procedure paths the backend exposes, e.g.
	// "devices.disable". Required, non-empty, without duplicates; each
	// path is at most 121 bytes (so "domain:"+path fits a capability id)
	// and its "/"-separated segments are neither empty, "." nor "..".
	// Execute refuses every other path.
	Paths []string
	// Client sends the requests. Nil means a client of the executor's own
	// (http.DefaultClient and http.DefaultTransport are never used or
	// changed) with dial and TLS handshake timeouts of 10s, pooled
	// keep-alive connections, no proxy and no redirects: a 3xx response
	// is an error. The call's context bounds every request.
	Client *http.Client
	// Credentials derives the caller's credentials from the host context
	// (surface.ProcedureCall.Host), e.g. the session's bearer token. The
	// headers it returns are set on the request; they cannot replace the
	// headers of the wire protocol (Content-Type, Accept,
	// Idempotency-Key, X-Agent-Consumer, X-Confirmation-*). It is called
	// concurrently and must not change host. Nil means: when
	// host["authorization"] is a non-empty string, send it as is as the
	// Authorization header ("Bearer …"); else send no credentials.
	Credentials func(host map[string]any) http.Header
	// MaxResponseBytes limits the response body. A successful response
	// with a larger body fails with ErrResponseTooLarge. Zero means
	// DefaultMaxResponseBytes (1 MiB); negative is an error.
	MaxResponseBytes int64
	// Logger receives the causes of failures — statuses, body excerpts
	// (at most 512 bytes), network errors — which never reach the agent;
	// successful calls are logged at Debug level. Nil means discard.
	Logger *slog.Logger
}

// Executor is a [surface.ProcedureExecutor] that calls a domain backend
// over HTTP and JSON, following the wire protocol of the package
// documentation. Create one with [New]; it is safe for concurrent use.
type Executor struct {
	paths       []string
	endpoints   map[string]string // procedure path → endpoint URL
	client      *http.Client
	credentials func(host map[string]any) http.Header
	maxBytes    int64
	log         *slog.Logger
}

// Executor implements the registry's executor contract.
var _ surface.ProcedureExecutor = (*Executor)(nil)

// New returns an executor for the backend and manifest described by opts.
// It reports an error when opts is nil, BaseURL is not an absolute http or
// https URL, Paths is empty or holds an invalid or duplicate path, or
// MaxResponseBytes is negative. New copies what it needs from opts.
func New(opts *Options) (*Executor, error) {
	if opts == nil {
		return nil, errors.New("httpexec: Options are required (BaseURL and Paths)")
	}
	base, err := parseBaseURL(opts.BaseURL)
	if err != nil {
		return nil, err
	}
	if len(opts.Paths) == 0 {
		return nil, errors.New("httpexec: Options.Paths is empty: list the procedure paths the backend exposes")
	}
	if opts.MaxResponseBytes < 0 {
		return nil, fmt.Errorf("httpexec: Options.MaxResponseBytes is negative (%d)", opts.MaxResponseBytes)
	}
	e := &Executor{
		paths:       slices.Clone(opts.Paths),
		endpoints:   make(map[string]string, len(opts.Paths)),
		client:      opts.Client,
		credentials: opts.Credentials,
		maxBytes:    opts.MaxResponseBytes,
		log:         opts.Logger,
	}
	for _, p := range e.paths {
		if _, dup := e.endpoints[p]; dup {
			return nil, fmt.Errorf("httpexec: Options.Paths lists %q twice", p)
		}
		escaped, err := escapePath(p)
		if err != nil {
			return nil, err
		}
		e.endpoints[p] = base + "/" + escaped
	}
	if e.client == nil {
		e.client = newClient()
	}
	if e.credentials == nil {
		e.credentials = HostAuthorization
	}
	if e.maxBytes == 0 {
		e.maxBytes = DefaultMaxResponseBytes
	}
	if e.log == nil {
		e.log = slog.New(slog.DiscardHandler)
	}
	return e, nil
}

// parseBaseURL checks raw and returns it without a trailing "/". Errors
// show the URL without its password.
func parseBaseURL(raw string) (string, error) {
	if raw == "" {
		return "", errors.New("httpexec: Options.BaseURL is required")
	}
	u, err := url.Parse(raw)
	if err != nil {
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err // without the URL, which may hold a password
		}
		return "", fmt.Errorf("httpexec: Options.BaseURL is not a URL: %w", err)
	}
	switch {
	case u.Scheme != "http" && u.Scheme != "https":
		return "", fmt.Errorf("httpexec: Options.BaseURL %q is not an absolute http or https URL", u.Redacted())
	case u.Host == "" || u.Opaque != "":
		return "", fmt.Errorf("httpexec: Options.BaseURL %q has no host", u.Redacted())
	case u.User != nil:
		return "", errors.New("httpexec: Options.BaseURL has user info: pass credentials with Options.Credentials")
	case u.RawQuery != "" || u.ForceQuery || u.Fragment != "":
		return "", fmt.Errorf("httpexec: Options.BaseURL %q has a query or fragment", u.Redacted())
	}
	return strings.TrimRight(u.String(), "/"), nil
}

// escapePath validates a procedure path and path-escapes its segments.
func escapePath(p string) (string, error) {
	if p == "" || len(p) > maxPathLength || !utf8.ValidString(p) {
		return "", fmt.Errorf("httpexec: Options.Paths: %q is not a procedure path (1 to %d bytes of UTF-8)", p, maxPathLength)
	}
	segs := strings.Split(p, "/")
	for i, s := range segs {
		if s == "" || s == "." || s == ".." {
			return "", fmt.Errorf("httpexec: Options.Paths: %q has an empty, \".\" or \"..\" segment", p)
		}
		segs[i] = url.PathEscape(s)
	}
	return strings.Join(segs, "/"), nil
}

// newClient returns the default client: its own transport with bounded
// dialing and handshakes, and no redirects.
func newClient() *http.Client {
	dialer := &net.Dialer{Timeout: 10 * time.Second, KeepAlive: 30 * time.Second}
	return &http.Client{
		Transport: &http.Transport{
			DialContext:           dialer.DialContext,
			ForceAttemptHTTP2:     true,
			TLSHandshakeTimeout:   10 * time.Second,
			ExpectContinueTimeout: time.Second,
			IdleConnTimeout:       90 * time.Second,
			MaxIdleConns:          100,
			MaxIdleConnsPerHost:   16,
		},
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
}

// HostAuthorization is the default [Options.Credentials]: when
// host["authorization"] is a non-empty string it returns it as the
// Authorization header, as is; else it returns nil.
func HostAuthorization(host map[string]any) http.Header {
	v, ok := host["authorization"].(string)
	if !ok || v == "" {
		return nil
	}
	return http.Header{"Authorization": {v}}
}

// Paths returns the manifest, in the order of Options.Paths. The slice is
// a copy.
func (e *Executor) Paths() []string { return slices.Clone(e.paths) }

// CloseIdleConnections closes the idle keep-alive connections of the
// executor's client (Options.Client, when given). The executor stays
// usable. Call it when the executor
// is no longer needed; it is safe to call more than once.
func (e *Executor) CloseIdleConnections() { e.client.CloseIdleConnections() }

// Execute performs call by POSTing its effective input to the backend, as
// the package documentation describes, and returns the backend's JSON
// output. A path outside the manifest fails with ErrUnknownPath before any
// request. The backend's refusals come back as a *surface.Error;
// everything else is an ordinary error, marked [surface.Transient] when a
// retry may succeed.
func (e *Executor) Execute(ctx context.Context, call *surface.ProcedureCall) (json.RawMessage, error) {
	if call == nil {
		return nil, errors.New("httpexec: nil ProcedureCall")
	}
	endpoint, ok := e.endpoints[call.Path]
	if !ok {
		return nil, fmt.Errorf("%w (procedure %q)", ErrUnknownPath, call.Path)
	}
	body := []byte(call.Input)
	if len(body) == 0 {
		body = []byte("{}")
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, endpoint, bytes.NewReader(body))
	if err != nil {
		return nil, fmt.Errorf("httpexec: procedure %q: %w", call.Path, err)
	}
	e.setHeaders(req.Header, call)

	start := time.Now()
	resp, err := e.client.Do(req)
	if err != nil {
		return nil, e.networkFailure(ctx, call, start, err)
	}
	defer resp.Body.Close()

	data, over, readErr := readBody(resp, e.maxBytes)
	if readErr != nil && (success(resp.StatusCode) || ctx.Err() != nil) {
		return nil, e.networkFailure(ctx, call, start, readErr)
	}
	r := response{status: resp.StatusCode, body: data, over: over, readErr: readErr, start: start}
	return e.settle(ctx, call, &r)
}

// setHeaders sets the credential headers, then the protocol headers,
// which credentials cannot replace.
func (e *Executor) setHeaders(h http.Header, call *surface.ProcedureCall) {
	for k, vs := range e.credentials(call.Host) {
		k = http.CanonicalHeaderKey(k)
		h.Del(k)
		for _, v := range vs {
			h.Add(k, v)
		}
	}
	h.Set("Content-Type", "application/json")
	h.Set("Accept", "application/json")
	h.Set(headerConsumer, call.Consumer.Key())
	h.Del(headerIdempotencyKey)
	if call.InvocationID != "" {
		h.Set(headerIdempotencyKey, call.InvocationID)
	}
	h.Del(headerConfirmationID)
	h.Del(headerConfirmationAtTime)
	if ev := call.Confirmation; ev != nil {
		if ev.ID != "" {
			h.Set(headerConfirmationID, ev.ID)
		}
		if !ev.ApprovedAt.IsZero() {
			h.Set(headerConfirmationAtTime, ev.ApprovedAt.UTC().Format(approvedAtLayout))
		}
	}
}

// readBody reads at most limit bytes of the body. over reports a body
// longer than limit; then data holds what was read, possibly nothing.
func readBody(resp *http.Response, limit int64) (data []byte, over bool, err error) {
	if resp.ContentLength > limit {
		return nil, true, nil
	}
	data, err = io.ReadAll(io.LimitReader(resp.Body, limit+1))
	if int64(len(data)) > limit {
		return data[:limit], true, nil
	}
	return data, false, err
}

func success(status int) bool {
	return status == http.StatusOK || status == http.StatusCreated || status == http.StatusNoContent
}

// response is what settle needs of an HTTP response.
type response struct {
	status  int
	body    []byte // at most MaxResponseBytes
	over    bool   // the body was longer than body
	readErr error  // reading the body failed (error statuses only)
	start   time.Time
}

// settle maps a response onto an output or an error.
func (e *Executor) settle(ctx context.Context, call *surface.ProcedureCall, r *response) (json.RawMessage, error) {
	switch r.status {
	case http.StatusOK, http.StatusCreated:
		if r.over {
			e.logResponse(ctx, slog.LevelWarn, "httpexec: response body too large", call, r, slog.Int64("limit", e.maxBytes))
			return nil, fmt.Errorf("%w (procedure %q, limit %d bytes)", ErrResponseTooLarge, call.Path, e.maxBytes)
		}
		out := bytes.TrimSpace(r.body)
		if len(out) == 0 {
			out = []byte("null")
		} else if !json.Valid(out) {
			e.logResponse(ctx, slog.LevelWarn, "httpexec: response body is not JSON", call, r)
			return nil, fmt.Errorf("%w (procedure %q)", ErrNotJSON, call.Path)
		}
		e.logResponse(ctx, slog.LevelDebug, "httpexec: procedure succeeded", call, r)
		return json.RawMessage(out), nil
	case http.StatusNoContent:
		e.logResponse(ctx, slog.LevelDebug, "httpexec: procedure succeeded", call, r)
		return json.RawMessage("null"), nil
	}

	if r.status >= 400 && r.status < 500 {
		body := parseRefusal(r)
		if demand, id := e.approvalDemand(ctx, call, r, body); demand {
			details := map[string]any{"origin": "server"}
			msg := "The domain service requires the user's approval for this call."
			if id != "" {
				details["confirmationId"] = id
				msg = "" // the default: retry with the confirmationId once approved
			}
			e.logResponse(ctx, slog.LevelInfo, "httpexec: the backend demands approval", call, r)
			return nil, surface.NewError(surface.CodeConfirmationRequired, msg, details)
		}
		if r.status == http.StatusUnauthorized || r.status == http.StatusForbidden || body.notAuthorized() {
			e.logResponse(ctx, slog.LevelInfo, "httpexec: the backend refused the caller", call, r)
			return nil, surface.NewError(surface.CodeNotAuthorized, "", map[string]any{"origin": "server"})
		}
	}

	switch r.status {
	case http.StatusBadRequest, http.StatusUnprocessableEntity:
		e.logResponse(ctx, slog.LevelInfo, "httpexec: the backend rejected the input", call, r)
		return nil, surface.NewError(surface.CodeInvalidInput, "", map[string]any{
			"issues": []surface.Issue{{Path: "", Message: "the domain service rejected the input"}},
		})
	case http.StatusNotFound:
		e.logResponse(ctx, slog.LevelError, "httpexec: the backend does not serve a path of the manifest", call, r)
		return nil, &StatusError{Path: call.Path, StatusCode: r.status}
	case http.StatusRequestTimeout, http.StatusTooManyRequests:
		e.logResponse(ctx, slog.LevelWarn, "httpexec: the backend is busy", call, r)
		return nil, surface.Transient(&StatusError{Path: call.Path, StatusCode: r.status})
	}
	if r.status >= 500 && r.status < 600 {
		e.logResponse(ctx, slog.LevelWarn, "httpexec: the backend failed", call, r)
		return nil, surface.Transient(&StatusError{Path: call.Path, StatusCode: r.status})
	}
	e.logResponse(ctx, slog.LevelWarn, "httpexec: unexpected response status", call, r)
	return nil, &StatusError{Path: call.Path, StatusCode: r.status}
}

// refusal is what a 4xx response body may say, when it is a JSON object.
type refusal struct {
	body map[string]any // nil when the body is not a JSON object
	data map[string]any // body["data"], when an object
	code string         // body["code"], when a string
}

// parseRefusal reads the body of a 4xx response.
func parseRefusal(r *response) refusal {
	var body map[string]any
	if r.over || r.readErr != nil || json.Unmarshal(r.body, &body) != nil {
		return refusal{} // not a JSON object: only the status speaks
	}
	data, _ := body["data"].(map[string]any)
	code, _ := body["code"].(string)
	return refusal{body: body, data: data, code: code}
}

// notAuthorized reports whether the body names an authorization refusal:
// a code or status of UNAUTHORIZED, FORBIDDEN, 401 or 403.
func (b refusal) notAuthorized() bool {
	for _, v := range []any{b.body["code"], b.body["status"]} {
		switch v := v.(type) {
		case string:
			switch v {
			case "UNAUTHORIZED", "FORBIDDEN", "401", "403":
				return true
			}
		case float64:
			if v == http.StatusUnauthorized || v == http.StatusForbidden {
				return true
			}
		}
	}
	return false
}

// approvalDemand reports whether a 4xx response demands approval, and the
// approval id, when the backend gave a safe one.
func (e *Executor) approvalDemand(ctx context.Context, call *surface.ProcedureCall, r *response, b refusal) (demand bool, id string) {
	body, data := b.body, b.data
	demand = r.status == http.StatusPreconditionRequired ||
		b.code == "APPROVAL_REQUIRED" ||
		data["approvalRequired"] == true
	if !demand {
		return false, ""
	}
	raw, ok := body["approvalId"].(string)
	if !ok {
		raw, ok = data["approvalId"].(string)
	}
	if !ok {
		return true, ""
	}
	if !safeID(raw) {
		e.logResponse(ctx, slog.LevelWarn, "httpexec: dropped an unsafe approval id", call, r)
		return true, ""
	}
	return true, raw
}

// safeID reports whether s may be shown to the agent as a confirmation id.
func safeID(s string) bool {
	if s == "" || len(s) > maxApprovalID {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9':
		case c == '.', c == '_', c == ':', c == '~', c == '-':
		default:
			return false
		}
	}
	return true
}

// networkFailure logs err, a failure to send the request or read the
// response, and returns it wrapped, marked transient when a retry may
// succeed.
func (e *Executor) networkFailure(ctx context.Context, call *surface.ProcedureCall, start time.Time, err error) error {
	transient := isTransient(ctx, err)
	if e.log.Enabled(ctx, slog.LevelWarn) {
		e.log.LogAttrs(ctx, slog.LevelWarn, "httpexec: request failed",
			slog.String("path", call.Path),
			slog.String("invocationId", call.InvocationID),
			slog.Duration("duration", time.Since(start)),
			slog.Bool("transient", transient),
			slog.String("err", err.Error()))
	}
	if cerr := ctx.Err(); cerr != nil && !errors.Is(err, cerr) {
		err = fmt.Errorf("%w (%w)", cerr, err)
	}
	err = fmt.Errorf("httpexec: procedure %q: %w", call.Path, err)
	if transient {
		return surface.Transient(err)
	}
	return err
}

// isTransient classifies a network failure: an expired deadline, a
// timeout, a refused, reset or dropped connection, an unreachable host or
// a DNS error may pass; a cancellation, TLS and certificate errors or a
// malformed request will not.
func isTransient(ctx context.Context, err error) bool {
	switch ctx.Err() {
	case context.DeadlineExceeded:
		return true
	case context.Canceled:
		return false
	}
	if errors.Is(err, context.DeadlineExceeded) {
		return true
	}
	if errors.Is(err, context.Canceled) {
		return false
	}
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		return true
	}
	var dns *net.DNSError
	if errors.As(err, &dns) {
		return true
	}
	if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
		return true
	}
	var op *net.OpError
	if errors.As(err, &op) {
		switch op.Op {
		case "dial", "read", "write":
			return true
		}
	}
	return false
}

// logResponse logs a response with a body excerpt.
func (e *Executor) logResponse(ctx context.Context, level slog.Level, msg string, call *surface.ProcedureCall, r *response, extra ...slog.Attr) {
	if !e.log.Enabled(ctx, level) {
		return
	}
	attrs := append([]slog.Attr{
		slog.String("path", call.Path),
		slog.String("invocationId", call.InvocationID),
		slog.Int("status", r.status),
		slog.Duration("duration", time.Since(r.start)),
		slog.String("body", excerpt(r.body, r.over)),
	}, extra...)
	if r.readErr != nil {
		attrs = append(attrs, slog.String("readErr", r.readErr.Error()))
	}
	e.log.LogAttrs(ctx, level, msg, attrs...)
}

// excerpt returns the start of body as valid UTF-8, at most maxExcerpt
// bytes, ending in "…" when cut.
func excerpt(body []byte, over bool) string {
	cut := over
	if len(body) > maxExcerpt {
		body, cut = body[:maxExcerpt], true
	}
	s := strings.ToValidUTF8(string(body), "\uFFFD")
	if cut {
		s += "…"
	}
	return s
}
