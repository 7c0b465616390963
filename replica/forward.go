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

// ServedByHeader is the response header that names the replica that
// served a request (its Options.Name): Forward sets it on every answer
// given on this replica — a request for a session it owns or naming
// none, one another replica forwarded here, the ended answer, an error
// of forwarding — and relays the owner's on a forwarded answer. It tells
// an operator which replica's log to read; it is not authenticated.
const ServedByHeader = "Agentsurface-Replica"

// DefaultResponseHeaderTimeout is ForwardOptions.ResponseHeaderTimeout's
// default.
const DefaultResponseHeaderTimeout = time.Minute

// ForwardOptions configure [Directory.Forward]. Nil, like every zero
// field, means the documented defaults.
type ForwardOptions struct {
	// Ended serves requests for a session that no live replica owns. Nil
	// means the wrapped handler serves them: it holds no such session, so
	// it answers exactly as it does for any ended one (its 401 with a
	// message, or a new session for a page).
	Ended http.Handler
	// ErrorHandler answers a request that could not be forwarded or whose
	// owner failed, or a request for a session of this replica arriving
	// after its lease's deadline; err wraps one of ErrUnavailable,
	// ErrOwnerUnreachable, ErrOwnerFailed, ErrOwnerGone, ErrOwnerTimeout,
	// ErrBadHop or ErrLeaseLost. Nil means [DefaultErrorHandler].
	ErrorHandler func(w http.ResponseWriter, r *http.Request, err error)
	// ResponseHeaderTimeout bounds the wait for the response headers of
	// a forwarded request: an owner that is alive (it renews its lease)
	// but sends no headers by then is cut off, and the client gets 504
	// ([ErrOwnerTimeout]). Zero means [DefaultResponseHeaderTimeout], one
	// minute: twice the registry's longest default execution bound (a
	// procedure's 30 s), so no call the registry lets run is cut, while a
	// stuck owner holds a request a minute at most. Only the wait for the
	// headers is bounded: event streams and MCP streams send theirs at
	// once and then stay open as long as they need. A negative value
	// means no bound (an owner that stalls is still found out when its
	// lease runs out: ErrOwnerGone).
	ResponseHeaderTimeout time.Duration
	// LongLived reports the requests that may legitimately wait longer
	// than ResponseHeaderTimeout before the owner sends headers, such as
	// a call held open until a person approves it, or a long poll; they
	// are bounded only by the owner's lease and by the client. Nil means
	// none. It is called once per forwarded request, on the replica that
	// forwards it.
	LongLived func(r *http.Request) bool
	// MaxHopAge is how old (or how far in the future, for clocks apart) a
	// forwarded request's signature may be. Default 30s.
	MaxHopAge time.Duration
}

// Forward returns a handler that serves each request where its session
// lives. token returns the secret by which a request names its session (a
// cookie's value, a bearer token), or "" when it names none, such as a
// first visit or a static file; it is called once per request, on the
// replica the request lands on and again on the owner, which
// authenticates the token itself as it would without forwarding. opts
// may be nil.
//
// Requests for sessions this replica owns, and requests naming no
// session, go to next; requests for a session another live replica owns
// are proxied to it, streamed both ways (server-sent events and MCP
// streams are flushed as they come; a client that goes away cancels the
// forwarded request); requests for a session no live replica owns go to
// opts.Ended. A forwarded request is authenticated ([HopHeader]) and
// served by next on the replica it reaches: it is never forwarded again.
// Every answer names the replica that served it ([ServedByHeader]).
//
// Forwarding does not authenticate the session: the owner does, as
// without forwarding. The directory stores no token, so a forged or
// guessed one finds no owner, or reaches the owner of its hash and is
// refused there.
func (d *Directory) Forward(next http.Handler, token func(r *http.Request) string, opts *ForwardOptions) http.Handler {
	if token == nil {
		panic("replica: Forward needs a token function")
	}
	var o ForwardOptions
	if opts != nil {
		o = *opts
	}
	if o.MaxHopAge <= 0 {
		o.MaxHopAge = 30 * time.Second
	}
	if o.ErrorHandler == nil {
		o.ErrorHandler = DefaultErrorHandler
	}
	if o.ResponseHeaderTimeout == 0 {
		o.ResponseHeaderTimeout = DefaultResponseHeaderTimeout
	}
	f := &forwarder{d: d, next: next, token: token, opts: o}
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
	token func(r *http.Request) string
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
	token := f.token(r)
	if token == "" {
		f.local(w, r, outcomeLocal)
		return
	}
	k := f.d.key(token)
	p, local, err := f.d.lookup(r.Context(), k)
	switch {
	case local:
		f.local(w, r, outcomeLocal)
	case errors.Is(err, ErrNoOwner) || errors.Is(err, ErrClosed):
		f.ended(w, r)
	case errors.Is(err, ErrLeaseLost):
		// This replica's session, but its lease may have run out: every
		// other replica may answer it as ended already, and the
		// application, which has not heard yet, would still serve it.
		f.fail(w, r, err)
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
	k := f.d.key(f.token(r))
	if !f.d.verifyHop(h, time.Now(), f.opts.MaxHopAge, r.Method, r.Host, r.RequestURI, k) {
		f.fail(w, r, fmt.Errorf("%w: the signature does not verify or is older than %v", ErrBadHop, f.opts.MaxHopAge))
		return
	}
	r.Header.Del(HopHeader)
	r = r.WithContext(context.WithValue(r.Context(), hopCtxKey{}, h.from))
	to, err := f.d.lease.valid(time.Now())
	switch {
	case err != nil && h.to == f.d.ID():
		// For this registration, past its lease's deadline.
		f.d.poke()
		f.fail(w, r, fmt.Errorf("%w: a forwarded request arrived after the lease's deadline", err))
	case err != nil || h.to != to:
		// Meant for an earlier registration of this replica, whose
		// sessions ended with its lease.
		f.d.log.Warn("replica: request forwarded to a previous registration of this replica; answering as ended",
			"from", h.from, "to", h.to, "self", f.d.ID())
		f.ended(w, r)
	default:
		f.local(w, r, outcomeReceived)
	}
}

// local serves r here.
func (f *forwarder) local(w http.ResponseWriter, r *http.Request, o outcome) {
	f.d.stats.add(o)
	f.servedHere(w)
	f.next.ServeHTTP(w, r)
}

// servedHere names this replica in the answer.
func (f *forwarder) servedHere(w http.ResponseWriter) {
	if f.d.opts.Name != "" {
		w.Header().Set(ServedByHeader, f.d.opts.Name)
	}
}

func (f *forwarder) ended(w http.ResponseWriter, r *http.Request) {
	f.d.stats.add(outcomeEnded)
	f.servedHere(w)
	if f.opts.Ended != nil {
		f.opts.Ended.ServeHTTP(w, r)
		return
	}
	f.next.ServeHTTP(w, r)
}

// forward proxies r to p, stopping it when p's lease runs out or when p
// sends no headers in time (unless r is long-lived).
func (f *forwarder) forward(w http.ResponseWriter, r *http.Request, p *peer, k key) {
	ctx, cancel := context.WithCancelCause(r.Context())
	defer cancel(nil)
	untrack, ok := f.d.peers.track(p, cancel)
	if !ok {
		f.ended(w, r) // gone since the lookup
		return
	}
	defer untrack()
	fw := &forwarding{peer: p, key: k, from: f.d.ID()}
	if t := f.opts.ResponseHeaderTimeout; t > 0 && (f.opts.LongLived == nil || !f.opts.LongLived(r)) {
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
		f.d.log.Warn("replica: forwarding failed", "to", fw.peer.id, "name", fw.peer.name, "addr", fw.peer.addr,
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
	case errors.Is(err, ErrLeaseLost):
		o = outcomePastLease
	}
	f.d.stats.add(o)
	f.servedHere(w)
	if o == outcomeUnavailable {
		f.d.log.Warn("replica: cannot read the session directory", "method", r.Method, "path", r.URL.Path, "error", err)
	}
	f.opts.ErrorHandler(w, r, err)
}

// DefaultErrorHandler answers a request that could not be forwarded with
// a plain-text message and a status: 503 with Retry-After when the
// directory or the owner could not be reached, or when this replica's
// lease ran out (trying again may work: another replica answers, or this
// one once it has ended the session), 502 when the owner failed or
// stopped before answering, 504 when it did not answer in time, 403 for a
// forwarded request that does not verify.
func DefaultErrorHandler(w http.ResponseWriter, _ *http.Request, err error) {
	status := http.StatusBadGateway
	switch {
	case errors.Is(err, ErrUnavailable), errors.Is(err, ErrOwnerUnreachable), errors.Is(err, ErrLeaseLost):
		status = http.StatusServiceUnavailable
		w.Header().Set("Retry-After", "1")
	case errors.Is(err, ErrOwnerTimeout):
		status = http.StatusGatewayTimeout
	case errors.Is(err, ErrBadHop):
		status = http.StatusForbidden
	}
	msg := "the request could not be forwarded"
	for _, s := range [...]error{ErrUnavailable, ErrOwnerUnreachable, ErrOwnerFailed, ErrOwnerGone, ErrOwnerTimeout, ErrBadHop, ErrLeaseLost} {
		if errors.Is(err, s) { // its sentence; the cause is for the log
			msg = strings.TrimPrefix(s.Error(), "replica: ")
			break
		}
	}
	http.Error(w, msg, status)
}
