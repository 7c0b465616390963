package mcpsurface

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"runtime/debug"
	"strings"
	"sync"
	"time"

	"github.com/agentsurface/agentsurface/internal/randid"
	"github.com/agentsurface/agentsurface/surface"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Resolver maps an HTTP request to the session's registry and consumer,
// e.g. by a bearer or pairing token. An error (or a nil registry) means
// the request is not authenticated: it is answered 401, unless the error
// is (or wraps) [ErrNoSession]: the request is authenticated but has no
// live session to reach, and is answered 403. It is called on every
// request, so it should be a cheap lookup. A panic is recovered and
// logged, and the request answered 500.
type Resolver func(*http.Request) (*surface.Registry, surface.Consumer, error)

// ErrNoSession is what a [Resolver] returns (or wraps) for a request whose
// credentials are valid but that has no live session to reach, such as a
// verified user who has not paired a page with their agent: the request
// is answered 403 Forbidden, so that an OAuth client does not take it for
// a token to renew.
var ErrNoSession = errors.New("mcpsurface: no live session for these credentials")

// HTTPOptions configure an HTTPHandler. The zero value (or nil) is valid.
type HTTPOptions struct {
	// Options configure every Server the handler creates.
	Options
	// Stateless serves every request with a temporary MCP session (no
	// Mcp-Session-Id, no server-to-client requests), as
	// mcp.StreamableHTTPOptions.Stateless, also those of clients older
	// than 2026-07-28, which then cannot receive notifications or be
	// asked for elicitation. By default they get stateful sessions, and
	// only 2026-07-28 clients are served session-less.
	Stateless bool
	// SessionTimeout closes a stateful session that has had no request
	// in progress for this long, freeing what it held; the client must
	// initialize a new one. Zero means [DefaultSessionTimeout]; negative
	// never (sessions then live until DELETE, reclaim, Forget or Close).
	SessionTimeout time.Duration
	// MaxSessions caps the stateful sessions open at once per (registry,
	// consumer). When opening one more would exceed it, the idle session
	// (no request in progress, no open stream) idle the longest is
	// closed to make room; its id then gets 404. Only when all of them
	// are busy is the request answered 429 Too Many Requests, with a
	// JSON-RPC error of code [CodeTooManySessions]. Requests that open no
	// session, such as a probe, take no slot; a 2026-07-28 client's
	// subscriptions/listen streams, which are never idle, are capped at
	// MaxSessions on their own. Zero means [DefaultMaxSessions]; negative
	// means no cap.
	MaxSessions int
	// IdleTimeout closes and drops a cached Server that has had no request
	// and no connected session for this long, checked every IdleTimeout/4
	// whether requests come or not. Zero means [DefaultIdleTimeout];
	// negative never.
	IdleTimeout time.Duration
	// MaxRequestBodyBytes caps the body of a POSTed message; a larger one
	// is answered 413 Request Entity Too Large, whether or not it
	// declares its length. Zero means the SDK's default
	// (mcp.DefaultMaxRequestBodyBytes); negative no cap.
	MaxRequestBodyBytes int64
}

// Defaults of HTTPOptions.
const (
	// DefaultSessionTimeout is the idle timeout of stateful sessions.
	DefaultSessionTimeout = 30 * time.Minute
	// DefaultMaxSessions is the cap on stateful sessions per (registry,
	// consumer): enough for a user's several clients and their
	// reconnections, small enough that one credential cannot exhaust the
	// server's memory.
	DefaultMaxSessions = 32
	// DefaultIdleTimeout is how long an unused Server stays cached.
	DefaultIdleTimeout = 30 * time.Minute
)

// CodeTooManySessions is the JSON-RPC error code of a request refused
// because its (registry, consumer) has HTTPOptions.MaxSessions sessions
// busy (or subscriptions/listen streams open). It is in the range JSON-RPC reserves for implementation-defined
// server errors.
const CodeTooManySessions = -32029

// HTTPHandler serves MCP over Streamable HTTP for many user sessions: one
// Server per (registry, consumer), created on first use and cached. It
// serves both protocol generations: stateful sessions (initialize,
// Mcp-Session-Id) for clients up to 2025-11-25, and session-less requests
// for 2026-07-28 and later. It is safe for concurrent use.
type HTTPHandler struct {
	resolve Resolver
	opts    HTTPOptions
	// stateful serves sessions (unless HTTPOptions.Stateless); stateless
	// serves session-less requests of 2026-07-28 and later, and every
	// request when HTTPOptions.Stateless is set.
	stateful  *mcp.StreamableHTTPHandler
	stateless *mcp.StreamableHTTPHandler
	log       *slog.Logger

	tools toolDefs // shared by the servers

	mu        sync.Mutex
	servers   map[serverKey]*cached
	closed    bool
	refused   uint64 // requests answered 429 (Stats)
	reclaimed uint64 // idle sessions closed to make room (Stats)
	lastSweep time.Time
	sweeper   *time.Timer // sweeps idle servers while any is cached
	// sweeping is held by a running sweep timer, so that Close can wait
	// for it.
	sweeping sync.Mutex
	// quiet is shut by Close: what the handler and the SDK's handlers log
	// passes it.
	quiet gate
}

// serverKey identifies the Server of a (registry, consumer) pair: the
// consumer with its grants (policies may decide by grant, so two grant
// sets are two servers).
type serverKey struct {
	reg      *surface.Registry
	kind, id string
	grants   string
}

// cached is a Server and the accounting of what its clients hold open.
// Every field but srv and prefix is guarded by HTTPHandler.mu.
type cached struct {
	srv      *Server
	prefix   string // every session id of srv starts with prefix + "."
	lastUsed time.Time
	opening  int // stateful sessions being created
	// sessions are the stateful sessions of srv, by id, with their use.
	sessions map[string]*sessionUse
	// reclaiming holds the ids of sessions being closed to make room:
	// their requests are answered 404 meanwhile.
	reclaiming map[string]struct{}
	listening  int // subscriptions/listen streams open
}

type serverCtxKey struct{}

// NewHTTPHandler returns a handler serving the registries resolve maps
// requests to. Requests the resolver rejects get 401 with
// "WWW-Authenticate: Bearer" before reaching the SDK; a stateful session
// id only works with credentials that resolve to the pair it was created
// for (others get 404), so no request can reach another session's
// registry.
//
// A request without Mcp-Session-Id whose MCP-Protocol-Version (or
// request _meta) is 2026-07-28 or later, and the server/discover probe of
// any version, are served session-less; every other request through a
// stateful session. Both reach the same Server, so a client of either
// generation sees the same tools of the same registry as the same
// consumer, and server/discover lists every version the handler serves.
func NewHTTPHandler(resolve Resolver, opts *HTTPOptions) *HTTPHandler {
	h := &HTTPHandler{resolve: resolve, servers: map[serverKey]*cached{}}
	if opts != nil {
		h.opts = *opts
	}
	h.log = h.opts.Logger
	if h.log == nil {
		h.log = slog.New(slog.DiscardHandler)
	}
	h.log = quieted(h.log, &h.quiet) // nothing is logged after Close
	if h.opts.IdleTimeout == 0 {
		h.opts.IdleTimeout = DefaultIdleTimeout
	}
	if h.opts.SessionTimeout == 0 {
		h.opts.SessionTimeout = DefaultSessionTimeout
	}
	if h.opts.MaxSessions == 0 {
		h.opts.MaxSessions = DefaultMaxSessions
	}
	getServer := func(r *http.Request) *mcp.Server {
		s, _ := r.Context().Value(serverCtxKey{}).(*mcp.Server)
		return s // set by ServeHTTP; the SDK answers 400 to nil
	}
	h.stateless = mcp.NewStreamableHTTPHandler(getServer, &mcp.StreamableHTTPOptions{
		Stateless:           true,
		MaxRequestBodyBytes: h.opts.MaxRequestBodyBytes,
		Logger:              infoAsDebug(h.log),
	})
	if !h.opts.Stateless {
		h.stateful = mcp.NewStreamableHTTPHandler(getServer, &mcp.StreamableHTTPOptions{
			SessionTimeout:      max(h.opts.SessionTimeout, 0),
			MaxRequestBodyBytes: h.opts.MaxRequestBodyBytes,
			Logger:              infoAsDebug(h.log),
		})
	}
	return h
}

var errHandlerClosed = errors.New("mcpsurface: HTTP handler closed")

// ServeHTTP authenticates the request with the resolver and serves it with
// the Server of its (registry, consumer).
func (h *HTTPHandler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	reg, consumer, err := h.resolveRecovered(r)
	if errors.Is(err, errResolverPanicked) {
		http.Error(w, "internal error", http.StatusInternalServerError)
		return
	}
	if errors.Is(err, ErrNoSession) {
		http.Error(w, "no live session for these credentials", http.StatusForbidden)
		return
	}
	if err != nil || reg == nil {
		w.Header().Set("WWW-Authenticate", `Bearer realm="agentsurface"`)
		http.Error(w, "unauthorized", http.StatusUnauthorized)
		return
	}
	c, err := h.server(reg, consumer)
	switch {
	case errors.Is(err, errHandlerClosed):
		http.Error(w, "server closed", http.StatusServiceUnavailable)
		return
	case err != nil:
		h.log.Error("mcpsurface: cannot create a server", "error", err)
		http.Error(w, "internal error", http.StatusInternalServerError)
		return
	}
	r = r.WithContext(context.WithValue(r.Context(), serverCtxKey{}, c.srv.mcp))
	sid := r.Header.Get("Mcp-Session-Id")
	// A 2026-07-28 request names its method in a header, which the SDK
	// checks against the body: its body need not be read ahead.
	modern := sid == "" && r.Header.Get("Mcp-Protocol-Version") >= sessionlessVersion
	var body *peeked
	if r.Method == http.MethodPost && (sid == "" || h.stateful == nil) && !modern {
		body = peek(r)
	}
	if h.stateful == nil || modern || (sid == "" && sessionlessHTTP(r, body)) {
		if (body != nil && body.listens()) || (modern && r.Method == http.MethodPost && r.Header.Get("Mcp-Method") == "subscriptions/listen") {
			if !h.listen(c) {
				if body == nil { // a 2026-07-28 request: read it, to answer its id
					body = peek(r)
				}
				h.tooManySessions(w, body)
				return
			}
			defer h.unlisten(c)
		}
		h.stateless.ServeHTTP(w, r)
		return
	}
	switch {
	case sid != "":
		if !strings.HasPrefix(sid, c.prefix+".") {
			http.Error(w, "session not found", http.StatusNotFound) // as the SDK answers unknown ids
			return
		}
		u := h.use(c, sid)
		if u == nil { // being reclaimed
			http.Error(w, "session not found", http.StatusNotFound)
			return
		}
		defer h.release(c, sid, u)
		if r.Method == http.MethodDelete {
			// The SDK's session Close waits for the calls in progress:
			// end them first.
			c.srv.closeSession(sid)
			sw := &statusWriter{ResponseWriter: w}
			h.stateful.ServeHTTP(sw, r)
			deleted := sw.status == http.StatusNoContent
			c.srv.sessionClosed(sid, deleted)
			if deleted {
				h.forget(c, sid)
			}
			return
		}
	case body != nil && body.opens():
		ok, victims := h.reserve(c)
		h.reclaim(c, victims)
		if !ok {
			h.tooManySessions(w, body)
			return
		}
		defer func() { h.unreserve(c, w.Header().Get("Mcp-Session-Id")) }()
	}
	h.stateful.ServeHTTP(w, r)
}

// statusWriter records the status of a response.
type statusWriter struct {
	http.ResponseWriter
	status int
}

func (w *statusWriter) WriteHeader(status int) {
	w.status = status
	w.ResponseWriter.WriteHeader(status)
}

// The protocol revision from which requests carry no session.
const sessionlessVersion = "2026-07-28"

// sessionlessHTTP reports whether a request without a session id and
// without a 2026-07-28 MCP-Protocol-Version header is served session-less
// all the same: the protocol version in the _meta of one of its requests
// is 2026-07-28 or later (the SDK then answers that the header is
// missing).
func sessionlessHTTP(r *http.Request, body *peeked) bool {
	if body == nil || !body.whole {
		return false
	}
	for _, req := range body.reqs {
		if metaVersion(req.Params) >= sessionlessVersion {
			return true // the SDK answers it: the header is missing
		}
	}
	return false
}

// metaVersion returns the protocol version a request's params carry in
// _meta, or "".
func metaVersion(params json.RawMessage) string {
	if !bytes.Contains(params, []byte(mcp.MetaKeyProtocolVersion)) {
		return ""
	}
	var p struct {
		Meta map[string]any `json:"_meta"`
	}
	_ = json.Unmarshal(params, &p)
	v, _ := p.Meta[mcp.MetaKeyProtocolVersion].(string)
	return v
}

// peekBytes bounds what ServeHTTP reads of a body before the SDK does.
const peekBytes = 64 << 10

// peeked is what ServeHTTP read ahead of a session-less POST's body.
type peeked struct {
	// whole is set when the body was read in full (within peekBytes) and
	// is JSON-RPC requests (or notifications), all in reqs.
	whole bool
	reqs  []*jsonrpc.Request
}

// peek reads a POST's body ahead of the SDK, within peekBytes, and puts
// what it read back in front of the rest of r.Body. It decodes the body
// as the SDK does (readBatch): with its JSON decoder, which is
// case-sensitive, not encoding/json's.
func peek(r *http.Request) *peeked {
	p := &peeked{}
	if r.Body == nil || r.Body == http.NoBody {
		return p
	}
	b, err := io.ReadAll(io.LimitReader(r.Body, peekBytes+1))
	r.Body = struct {
		io.Reader
		io.Closer
	}{io.MultiReader(bytes.NewReader(b), r.Body), r.Body}
	if err != nil || len(b) > peekBytes {
		return p
	}
	var raw []json.RawMessage
	if json.Unmarshal(b, &raw) != nil {
		raw = []json.RawMessage{b}
	}
	for _, m := range raw {
		req, ok := decodeRequest(m)
		if !ok {
			p.reqs = nil
			return p
		}
		p.reqs = append(p.reqs, req)
	}
	p.whole = true
	return p
}

// opens reports whether the POST may open a stateful session: unless its
// body is, in full, JSON-RPC requests none of which is initialize. A
// probe, such as the ping or server/discover a client may send first, is
// answered by the SDK on a session that ends with the request and is never
// given to the client: it takes none of MaxSessions. A body that could not
// be read whole within peekBytes, or that holds anything but requests,
// counts as opening one.
func (p *peeked) opens() bool {
	if !p.whole {
		return true
	}
	for _, req := range p.reqs {
		if req.Method == "initialize" {
			return true
		}
	}
	return false
}

// listens reports whether the body opens a subscriptions/listen stream.
// A body that could not be read whole counts as one.
func (p *peeked) listens() bool {
	if !p.whole {
		return true
	}
	for _, req := range p.reqs {
		if req.Method == "subscriptions/listen" {
			return true
		}
	}
	return false
}

var errResolverPanicked = errors.New("mcpsurface: the resolver panicked")

// resolveRecovered calls the resolver; a panic is logged and returned as
// errResolverPanicked.
func (h *HTTPHandler) resolveRecovered(r *http.Request) (reg *surface.Registry, consumer surface.Consumer, err error) {
	defer func() {
		if rec := recover(); rec != nil {
			h.log.Error("mcpsurface: the resolver panicked", "panic", fmt.Sprint(rec), "stack", string(debug.Stack()))
			reg, consumer, err = nil, surface.Consumer{}, errResolverPanicked
		}
	}()
	return h.resolve(r)
}

// server returns the cached Server of a pair, creating it on first use.
func (h *HTTPHandler) server(reg *surface.Registry, consumer surface.Consumer) (*cached, error) {
	if consumer.Kind == "" {
		consumer.Kind = surface.ConsumerMCPBridge
	}
	if consumer.ID == "" {
		consumer.ID = "anonymous" // as the registry names it
	}
	key := serverKey{reg: reg, kind: string(consumer.Kind), id: consumer.ID}
	if len(consumer.Grants) > 0 {
		key.grants = strings.Join(consumer.Grants, "\x1f")
	}
	now := time.Now()
	h.mu.Lock()
	if h.closed {
		h.mu.Unlock()
		return nil, errHandlerClosed
	}
	idle := h.sweepLocked(now)
	c := h.servers[key]
	if c != nil && closed(reg) { // the registry closed: its server goes too
		delete(h.servers, key)
		idle = append(idle, c.srv)
		c = nil
	}
	if c != nil {
		c.lastUsed = now
		h.mu.Unlock()
		closeAll(idle)
		return c, nil
	}
	h.mu.Unlock()
	closeAll(idle)

	// Created outside the lock: NewServer reads the registry's catalog,
	// which runs app code.
	prefix := randid.Text()
	srv, err := newServer(reg, consumer, &h.opts.Options, prefix, &h.tools)
	if err != nil {
		return nil, err
	}
	h.mu.Lock()
	if h.closed {
		h.mu.Unlock()
		_ = srv.Close()
		return nil, errHandlerClosed
	}
	if c = h.servers[key]; c == nil { // else another request won the race
		c = &cached{srv: srv, prefix: prefix}
		h.servers[key] = c
		srv = nil
		h.armSweepLocked()
	}
	c.lastUsed = now
	h.mu.Unlock()
	if srv != nil {
		_ = srv.Close()
	}
	return c, nil
}

func decodeRequest(body []byte) (*jsonrpc.Request, bool) {
	msg, err := jsonrpc.DecodeMessage(body)
	if err != nil {
		return nil, false
	}
	req, ok := msg.(*jsonrpc.Request)
	return req, ok
}

// sweepLocked removes, at most every IdleTimeout/4, the servers idle
// longer than IdleTimeout with no session, and returns them for closing.
func (h *HTTPHandler) sweepLocked(now time.Time) []*Server {
	idle := h.opts.IdleTimeout
	if idle < 0 || now.Sub(h.lastSweep) < idle/4 {
		return nil
	}
	h.lastSweep = now
	var out []*Server
	for k, c := range h.servers {
		if closed(k.reg) {
			delete(h.servers, k)
			out = append(out, c.srv)
			continue
		}
		if now.Sub(c.lastUsed) < idle || c.opening > 0 {
			continue
		}
		busy := false
		for range c.srv.mcp.Sessions() {
			busy = true
			break
		}
		if !busy {
			delete(h.servers, k)
			out = append(out, c.srv)
		}
	}
	return out
}

// armSweepLocked schedules a sweep while servers are cached, so that the
// servers of pairs that went away are closed without further requests.
func (h *HTTPHandler) armSweepLocked() {
	if h.sweeper != nil || h.closed || h.opts.IdleTimeout < 0 || len(h.servers) == 0 {
		return
	}
	h.sweeper = time.AfterFunc(max(h.opts.IdleTimeout/4, 10*time.Millisecond), h.sweepByTimer)
}

func (h *HTTPHandler) sweepByTimer() {
	h.sweeping.Lock()
	defer h.sweeping.Unlock()
	h.mu.Lock()
	h.sweeper = nil
	if h.closed {
		h.mu.Unlock()
		return
	}
	idle := h.sweepLocked(time.Now())
	h.armSweepLocked()
	kept := make([]*Server, 0, len(h.servers))
	for _, c := range h.servers {
		kept = append(kept, c.srv)
	}
	h.mu.Unlock()
	closeAll(idle)
	for _, s := range kept { // sessions that timed out leave nothing behind
		s.pins.forgetEnded()
	}
}

// Forget closes and drops the servers of reg, ending their sessions.
// Servers of closed registries are also dropped on their next request and
// by the periodic sweep; Forget does it at once.
func (h *HTTPHandler) Forget(reg *surface.Registry) {
	h.mu.Lock()
	var out []*Server
	for k, c := range h.servers {
		if k.reg == reg {
			delete(h.servers, k)
			out = append(out, c.srv)
		}
	}
	h.mu.Unlock()
	closeAll(out)
}

// Close closes all cached Servers and their sessions (see
// [Server.Close]); later requests get 503. Once it returns, nothing the
// handler or its servers started is still running (requests that were
// being served end with their HTTP server's handling of them), and
// nothing more is logged for them. It is idempotent.
func (h *HTTPHandler) Close() error {
	h.mu.Lock()
	h.closed = true
	var out []*Server
	for _, c := range h.servers {
		out = append(out, c.srv)
	}
	clear(h.servers)
	if h.sweeper != nil {
		h.sweeper.Stop()
		h.sweeper = nil
	}
	h.mu.Unlock()
	closeAll(out)
	h.sweeping.Lock() // a sweep that had started has finished
	h.sweeping.Unlock()
	h.quiet.close()
	return nil
}

// closed reports whether reg has been closed.
func closed(reg *surface.Registry) bool {
	select {
	case <-reg.Done():
		return true
	default:
		return false
	}
}

func closeAll(servers []*Server) {
	for _, s := range servers {
		_ = s.Close()
	}
}
