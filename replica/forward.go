package replica

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/httputil"
	"strings"
	"time"
)

// More errors of forwarding (see also [ErrNoOwner], [ErrUnavailable]).
var (
	// ErrOwnerUnreachable: the owner could not be connected to; nothing
	// was sent to it.
	ErrOwnerUnreachable = errors.New("replica: the replica serving this session cannot be reached")
	// ErrOwnerFailed: the connection to the owner broke before it
	// answered; the request may or may not have been carried out.
	ErrOwnerFailed = errors.New("replica: the replica serving this session failed before answering")
	// ErrOwnerGone: the owner's lease ran out before it answered: it has
	// stopped, and the session has ended.
	ErrOwnerGone = errors.New("replica: the replica serving this session has stopped; the session has ended")
	// ErrOwnerTimeout: the owner sent no response headers within
	// ForwardOptions.ResponseHeaderTimeout.
	ErrOwnerTimeout = errors.New("replica: the replica serving this session did not answer in time")
	// ErrBadHop: a request carried a HopHeader that does not verify.
	ErrBadHop = errors.New("replica: invalid forwarded request")
)

// ForwardOptions configure [Directory.Forward]. Token is required.
type ForwardOptions struct {
	// Token returns the secret by which r names its session (a cookie's
	// value, a bearer token), or "" when r names none, e.g. a first visit
	// or a static file. It is called once per request, on the replica the
	// request lands on and again on the owner, which authenticates the
	// token itself as it would without forwarding. Required.
	Token func(r *http.Request) string
	// Ended serves requests for a session that no live replica owns. Nil
	// means the wrapped handler serves them: it holds no such session, so
	// it answers exactly as it does for any ended one (its 401 with a
	// message, or a new session for a page).
	Ended http.Handler
	// ErrorHandler answers a request that could not be forwarded or whose
	// owner failed; err wraps one of ErrUnavailable, ErrOwnerUnreachable,
	// ErrOwnerFailed, ErrOwnerGone, ErrOwnerTimeout or ErrBadHop. Nil
	// means [DefaultErrorHandler].
	ErrorHandler func(w http.ResponseWriter, r *http.Request, err error)
	// ResponseHeaderTimeout, if positive, bounds the wait for the owner's
	// response headers (then ErrOwnerTimeout). Leave it zero where the
	// application holds requests open before answering, such as a call
	// waiting for a person's approval: a stalled owner is still found out,
	// when its lease runs out (ErrOwnerGone).
	ResponseHeaderTimeout time.Duration
	// MaxHopAge is how old (or how far in the future, for clocks apart) a
	// forwarded request's signature may be. Default 30s.
	MaxHopAge time.Duration
}

// Forward returns a handler that serves each request where its session
// lives: requests for sessions this replica owns, and requests naming no
// session, go to next; requests for a session another live replica owns
// are proxied to it, streamed both ways (server-sent events and MCP
// streams are flushed as they come; a client that goes away cancels the
// forwarded request); requests for a session no live replica owns go to
// opts.Ended. A forwarded request is authenticated ([HopHeader]) and
// served by next on the replica it reaches: it is never forwarded again.
//
// Forwarding does not authenticate the session: the owner does, as
// without forwarding. The directory stores no token, so a forged or
// guessed one finds no owner, or reaches the owner of its hash and is
// refused there.
func (d *Directory) Forward(next http.Handler, opts ForwardOptions) http.Handler {
	if opts.Token == nil {
		panic("replica: ForwardOptions.Token is required")
	}
	if opts.MaxHopAge <= 0 {
		opts.MaxHopAge = 30 * time.Second
	}
	if opts.ErrorHandler == nil {
		opts.ErrorHandler = DefaultErrorHandler
	}
	f := &forwarder{d: d, next: next, opts: opts}
	f.proxy = &httputil.ReverseProxy{
		Rewrite:        f.rewrite,
		Transport:      d.transport,
		FlushInterval:  -1, // every write reaches the client at once
		ModifyResponse: f.responded,
		ErrorHandler:   f.proxyError,
		ErrorLog:       slog.NewLogLogger(d.log.Handler(), slog.LevelDebug),
	}
	return f
}

type forwarder struct {
	d     *Directory
	next  http.Handler
	opts  ForwardOptions
	proxy *httputil.ReverseProxy
}

// hopKey is the context key of the replica a request was forwarded from.
type hopCtxKey struct{}

// ForwardedFrom reports the id of the replica that forwarded the request
// whose context is ctx, when it was forwarded and its [HopHeader]
// verified. Headers such as X-Forwarded-For and X-Forwarded-Proto of such
// a request were set by that replica.
func ForwardedFrom(ctx context.Context) (replicaID string, ok bool) {
	id, ok := ctx.Value(hopCtxKey{}).(string)
	return id, ok
}

// fwdCtxKey is the context key of a request being forwarded.
type fwdCtxKey struct{}

// forwarding is a request on its way to its owner.
type forwarding struct {
	peer  *peer
	key   key
	from  string
	timer *time.Timer // ResponseHeaderTimeout, stopped by the response
}

func (f *forwarder) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if v := r.Header.Values(HopHeader); len(v) > 0 {
		f.serveHop(w, r, v)
		return
	}
	token := f.opts.Token(r)
	if token == "" {
		f.d.stats.add(outcomeLocal)
		f.next.ServeHTTP(w, r)
		return
	}
	k := f.d.key(token)
	p, local, err := f.d.lookup(r.Context(), k)
	switch {
	case local:
		f.d.stats.add(outcomeLocal)
		f.next.ServeHTTP(w, r)
	case errors.Is(err, ErrNoOwner) || errors.Is(err, ErrClosed):
		f.ended(w, r)
	case err != nil:
		f.fail(w, r, err)
	default:
		f.forward(w, r, p, k)
	}
}

// serveHop serves a request another replica forwarded: here, whatever the
// directory says, once its header verifies.
func (f *forwarder) serveHop(w http.ResponseWriter, r *http.Request, values []string) {
	h, err := parseHop(values[0])
	if err != nil || len(values) != 1 {
		f.fail(w, r, fmt.Errorf("%w: %v", ErrBadHop, errBadHopHeader))
		return
	}
	k := f.d.key(f.opts.Token(r))
	if !f.d.verifyHop(h, time.Now(), f.opts.MaxHopAge, r.Method, r.Host, r.RequestURI, k) {
		f.fail(w, r, fmt.Errorf("%w: the signature does not verify or is older than %v", ErrBadHop, f.opts.MaxHopAge))
		return
	}
	r.Header.Del(HopHeader)
	r = r.WithContext(context.WithValue(r.Context(), hopCtxKey{}, h.from))
	if to := f.d.ID(); h.to != to {
		// Meant for an earlier registration of this replica, whose
		// sessions ended with its lease.
		f.d.log.Warn("replica: request forwarded to a previous registration of this replica; answering as ended",
			"from", h.from, "to", h.to, "self", to)
		f.ended(w, r)
		return
	}
	f.d.stats.add(outcomeReceived)
	f.next.ServeHTTP(w, r)
}

func (f *forwarder) ended(w http.ResponseWriter, r *http.Request) {
	f.d.stats.add(outcomeEnded)
	if f.opts.Ended != nil {
		f.opts.Ended.ServeHTTP(w, r)
		return
	}
	f.next.ServeHTTP(w, r)
}

// forward proxies r to p, stopping it when p's lease runs out or, if
// set, when p sends no headers in time.
func (f *forwarder) forward(w http.ResponseWriter, r *http.Request, p *peer, k key) {
	ctx, cancel := context.WithCancelCause(r.Context())
	defer cancel(nil)
	untrack, ok := f.d.track(p, cancel)
	if !ok {
		f.ended(w, r) // gone since the lookup
		return
	}
	defer untrack()
	fw := &forwarding{peer: p, key: k, from: f.d.ID()}
	if t := f.opts.ResponseHeaderTimeout; t > 0 {
		fw.timer = time.AfterFunc(t, func() { cancel(ErrOwnerTimeout) })
		defer fw.timer.Stop()
	}
	f.d.stats.add(outcomeForwarded)
	// The body and the answer stream at once. Without it this server
	// drains and closes the request body when the answer's headers go
	// out, under the proxy still copying it to the owner, which then
	// breaks the connection to the owner mid-answer.
	_ = http.NewResponseController(w).EnableFullDuplex()
	f.proxy.ServeHTTP(w, r.WithContext(context.WithValue(ctx, fwdCtxKey{}, fw)))
	// Whatever of the body the owner did not take (all of it when the
	// owner could not be reached) is drained here, before returning. In
	// full duplex the server would drain it only after the handler
	// returned, and the background read that reaching its end starts
	// would then break the connection's next request (golang/go#68560).
	_ = r.Body.Close()
}

// rewrite addresses the outgoing request to the owner and signs it. The
// Host header stays the client's, so the owner checks it as it would
// without forwarding.
func (f *forwarder) rewrite(pr *httputil.ProxyRequest) {
	fw := pr.In.Context().Value(fwdCtxKey{}).(*forwarding)
	pr.SetURL(fw.peer.url)
	pr.Out.Host = pr.In.Host
	// Keep what a load balancer in front said, and add this hop.
	for _, h := range [...]string{"X-Forwarded-For", "X-Forwarded-Host", "X-Forwarded-Proto"} {
		if v := pr.In.Header.Values(h); len(v) > 0 {
			pr.Out.Header[h] = v
		}
	}
	if ip, _, err := net.SplitHostPort(pr.In.RemoteAddr); err == nil {
		if prior := pr.Out.Header.Get("X-Forwarded-For"); prior != "" {
			ip = prior + ", " + ip
		}
		pr.Out.Header.Set("X-Forwarded-For", ip)
	}
	if pr.Out.Header.Get("X-Forwarded-Host") == "" {
		pr.Out.Header.Set("X-Forwarded-Host", pr.In.Host)
	}
	if pr.Out.Header.Get("X-Forwarded-Proto") == "" {
		proto := "http"
		if pr.In.TLS != nil {
			proto = "https"
		}
		pr.Out.Header.Set("X-Forwarded-Proto", proto)
	}
	pr.Out.Header.Set(HopHeader, f.d.signHop(fw.from, fw.peer.id, time.Now(), pr.Out.Method, pr.Out.Host,
		pr.Out.URL.RequestURI(), fw.key))
}

// responded stops the response-header timer.
func (f *forwarder) responded(res *http.Response) error {
	if fw, ok := res.Request.Context().Value(fwdCtxKey{}).(*forwarding); ok && fw.timer != nil {
		fw.timer.Stop()
	}
	return nil
}

// proxyError answers a request the owner did not answer.
func (f *forwarder) proxyError(w http.ResponseWriter, r *http.Request, err error) {
	cause := context.Cause(r.Context())
	var op *net.OpError
	switch {
	case errors.Is(cause, ErrOwnerGone):
		err = fmt.Errorf("%w: %v", ErrOwnerGone, err)
	case errors.Is(cause, ErrOwnerTimeout):
		err = fmt.Errorf("%w: %v", ErrOwnerTimeout, err)
	case r.Context().Err() != nil:
		return // the client went away: nobody to answer
	case errors.As(err, &op) && op.Op == "dial":
		// Nothing reached the owner. One that has left the directory (a
		// clean stop) or whose lease has run out has ended its sessions:
		// answer so at once rather than when the renewal notices.
		if fw, _ := r.Context().Value(fwdCtxKey{}).(*forwarding); fw != nil && f.d.left(r.Context(), fw.peer) {
			f.ended(w, r)
			return
		}
		err = fmt.Errorf("%w: %v", ErrOwnerUnreachable, err)
	default:
		err = fmt.Errorf("%w: %v", ErrOwnerFailed, err)
	}
	fw, _ := r.Context().Value(fwdCtxKey{}).(*forwarding)
	if fw != nil {
		f.d.log.Warn("replica: forwarding failed", "to", fw.peer.id, "name", fw.peer.name,
			"method", r.Method, "path", r.URL.Path, "error", err)
	}
	f.fail(w, r, err)
}

// fail counts err and answers with the ErrorHandler.
func (f *forwarder) fail(w http.ResponseWriter, r *http.Request, err error) {
	o := outcomeFailed
	switch {
	case errors.Is(err, ErrUnavailable):
		o = outcomeUnavailable
	case errors.Is(err, ErrOwnerUnreachable):
		o = outcomeUnreachable
	case errors.Is(err, ErrOwnerGone):
		o = outcomeGone
	case errors.Is(err, ErrOwnerTimeout):
		o = outcomeTimeout
	case errors.Is(err, ErrBadHop):
		o = outcomeBadHop
	}
	f.d.stats.add(o)
	if o == outcomeUnavailable {
		f.d.log.Warn("replica: cannot read the session directory", "method", r.Method, "path", r.URL.Path, "error", err)
	}
	f.opts.ErrorHandler(w, r, err)
}

// DefaultErrorHandler answers a request that could not be forwarded with
// a plain-text message and a status: 503 with Retry-After when the
// directory or the owner could not be reached (trying again may work),
// 502 when the owner failed or stopped before answering, 504 when it did
// not answer in time, 403 for a forwarded request that does not verify.
func DefaultErrorHandler(w http.ResponseWriter, _ *http.Request, err error) {
	status := http.StatusBadGateway
	switch {
	case errors.Is(err, ErrUnavailable), errors.Is(err, ErrOwnerUnreachable):
		status = http.StatusServiceUnavailable
		w.Header().Set("Retry-After", "1")
	case errors.Is(err, ErrOwnerTimeout):
		status = http.StatusGatewayTimeout
	case errors.Is(err, ErrBadHop):
		status = http.StatusForbidden
	}
	msg := "the request could not be forwarded"
	for _, s := range [...]error{ErrUnavailable, ErrOwnerUnreachable, ErrOwnerFailed, ErrOwnerGone, ErrOwnerTimeout, ErrBadHop} {
		if errors.Is(err, s) { // its sentence; the cause is for the log
			msg = strings.TrimPrefix(s.Error(), "replica: ")
			break
		}
	}
	http.Error(w, msg, status)
}
