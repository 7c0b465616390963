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

	"github.com/agentsurface/agentsurface/surface"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Resolver maps an HTTP request to the session's registry and consumer,
// e.g. by a bearer or pairing token. An error (or a nil registry) means
// the request is not authenticated: it is answered 401. It is called on
// every request, so it should be a cheap lookup. A panic is recovered and
// logged, and the request answered 500.
type Resolver func(*http.Request) (*surface.Registry, surface.Consumer, error)

// HTTPOptions configure an HTTPHandler. The zero value (or nil) is valid.
type HTTPOptions struct {
	// Options configure every Server the handler creates.
	Options
	// Stateless serves every request with a temporary MCP session (no
	// Mcp-Session-Id, no server-to-client requests), as
	// mcp.StreamableHTTPOptions.Stateless.
	Stateless bool
	// SessionTimeout closes a stateful session that has had no request
	// in progress for this long, freeing what it held; the client must
	// initialize a new one. Zero means [DefaultSessionTimeout]; negative
	// never (sessions then live until DELETE, Forget or Close).
	SessionTimeout time.Duration
	// MaxSessions caps the stateful sessions open at once per (registry,
	// consumer). A request to open one more is answered 429 Too Many
	// Requests with a JSON-RPC error of code [CodeTooManySessions]; the
	// client can end a session with DELETE or wait for idle ones to time
	// out. Requests that open no session, such as the server/discover
	// probe a client sends before initialize, take no slot. Zero means
	// [DefaultMaxSessions]; negative means no cap.
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
// open. It is in the range JSON-RPC reserves for implementation-defined
// server errors.
const CodeTooManySessions = -32029

// HTTPHandler serves MCP over Streamable HTTP for many user sessions: one
// Server per (registry, consumer), created on first use and cached. It is
// safe for concurrent use.
type HTTPHandler struct {
	resolve Resolver
	opts    HTTPOptions
	sdk     *mcp.StreamableHTTPHandler
	log     *slog.Logger

	mu        sync.Mutex
	servers   map[serverKey]*cached
	closed    bool
	lastSweep time.Time
	sweeper   *time.Timer // sweeps idle servers while any is cached
	// sweeping is held by a running sweep timer, so that Close can wait
	// for it.
	sweeping sync.Mutex
}

// serverKey identifies the Server of a (registry, consumer) pair.
type serverKey struct {
	reg      *surface.Registry
	consumer string
}

type cached struct {
	srv      *Server
	prefix   string // every session id of srv starts with prefix + "."
	lastUsed time.Time
	opening  int // sessions being created (guarded by HTTPHandler.mu)
	// live holds the ids of the sessions an initialize request opened
	// (guarded by HTTPHandler.mu); reserve forgets those that have ended.
	live map[string]struct{}
}

type serverCtxKey struct{}

// NewHTTPHandler returns a handler serving the registries resolve maps
// requests to. Requests the resolver rejects get 401 with
// "WWW-Authenticate: Bearer" before reaching the SDK; a stateful session
// id only works with credentials that resolve to the pair it was created
// for (others get 404), so no request can reach another session's
// registry.
func NewHTTPHandler(resolve Resolver, opts *HTTPOptions) *HTTPHandler {
	h := &HTTPHandler{resolve: resolve, servers: map[serverKey]*cached{}}
	if opts != nil {
		h.opts = *opts
	}
	h.log = h.opts.Logger
	if h.log == nil {
		h.log = slog.New(slog.DiscardHandler)
	}
	if h.opts.IdleTimeout == 0 {
		h.opts.IdleTimeout = DefaultIdleTimeout
	}
	if h.opts.SessionTimeout == 0 {
		h.opts.SessionTimeout = DefaultSessionTimeout
	}
	if h.opts.MaxSessions == 0 {
		h.opts.MaxSessions = DefaultMaxSessions
	}
	h.sdk = mcp.NewStreamableHTTPHandler(func(r *http.Request) *mcp.Server {
		s, _ := r.Context().Value(serverCtxKey{}).(*mcp.Server)
		return s // set by ServeHTTP; the SDK answers 400 to nil
	}, &mcp.StreamableHTTPOptions{
		Stateless:           h.opts.Stateless,
		SessionTimeout:      max(h.opts.SessionTimeout, 0),
		MaxRequestBodyBytes: h.opts.MaxRequestBodyBytes,
		Logger:              h.opts.Logger,
	})
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
	if !h.opts.Stateless {
		sid := r.Header.Get("Mcp-Session-Id")
		if sid != "" && !strings.HasPrefix(sid, c.prefix+".") {
			http.Error(w, "session not found", http.StatusNotFound) // as the SDK answers unknown ids
			return
		}
		if sid != "" && r.Method == http.MethodDelete {
			// The SDK's session Close waits for the calls in progress:
			// end them first.
			c.srv.closeSession(sid)
			defer c.srv.sessionClosed(sid)
		}
		if sid == "" && r.Method == http.MethodPost && opensSession(r) {
			if !h.reserve(c) {
				h.tooManySessions(w, r)
				return
			}
			defer func() { h.unreserve(c, w.Header().Get("Mcp-Session-Id")) }()
		}
	}
	h.sdk.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), serverCtxKey{}, c.srv.mcp)))
}

// peekBytes bounds what opensSession reads of a body before the SDK does.
const peekBytes = 64 << 10

// opensSession reports whether a POST without a session id may open a
// session: unless its body is JSON-RPC requests none of which is
// initialize. A probe, such as the server/discover a 2026 client sends
// first, is answered by the SDK on a session that ends with the request
// and is never given to the client: it takes none of MaxSessions. A body
// it cannot read whole within peekBytes, or that holds anything but
// requests, counts as opening one. It puts
// what it read back in front of the rest of r.Body.
func opensSession(r *http.Request) bool {
	if r.Body == nil || r.Body == http.NoBody {
		return true
	}
	b, err := io.ReadAll(io.LimitReader(r.Body, peekBytes+1))
	r.Body = struct {
		io.Reader
		io.Closer
	}{io.MultiReader(bytes.NewReader(b), r.Body), r.Body}
	if err != nil || len(b) > peekBytes {
		return true
	}
	// Decoded as the SDK decodes it (readBatch): its JSON decoder, which
	// is case-sensitive, decides the method, not encoding/json's.
	var raw []json.RawMessage
	if json.Unmarshal(b, &raw) != nil {
		raw = []json.RawMessage{b}
	}
	for _, m := range raw {
		req, ok := decodeRequest(m)
		if !ok || req.Method == "initialize" {
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
	key := serverKey{reg: reg, consumer: consumerKey(consumer)}
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
	prefix := randomID(16)
	srv, err := newServer(reg, consumer, &h.opts.Options, prefix)
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

// reserve counts a session about to be opened for c, unless c has
// MaxSessions open or opening. Open are the sessions an initialize
// opened that the SDK still has: each is counted once, by opening while
// its request runs, then by live; the SDK's sessions of probes and of
// requests in progress are not.
func (h *HTTPHandler) reserve(c *cached) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	if limit := h.opts.MaxSessions; limit > 0 && c.opening+len(c.live) >= limit {
		var open []string
		for ss := range c.srv.mcp.Sessions() {
			if _, ok := c.live[ss.ID()]; ok {
				open = append(open, ss.ID())
			}
		}
		if len(open) < len(c.live) { // forget the ended ones
			clear(c.live)
			for _, id := range open {
				c.live[id] = struct{}{}
			}
		}
		if c.opening+len(c.live) >= limit {
			return false
		}
	}
	c.opening++
	return true
}

// unreserve ends a reservation; sid is the id of the session its
// request opened, if any.
func (h *HTTPHandler) unreserve(c *cached, sid string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	c.opening--
	if sid != "" && h.opts.MaxSessions > 0 {
		if c.live == nil {
			c.live = map[string]struct{}{}
		}
		c.live[sid] = struct{}{}
	}
}

// tooManySessions answers a request that would open a session beyond
// MaxSessions: 429 with a JSON-RPC error response to the request.
func (h *HTTPHandler) tooManySessions(w http.ResponseWriter, r *http.Request) {
	var id jsonrpc.ID // null unless the body is one request
	if body, err := io.ReadAll(io.LimitReader(r.Body, 64<<10)); err == nil {
		if req, ok := decodeRequest(body); ok {
			id = req.ID
		}
	}
	data, _ := json.Marshal(map[string]int{"maxSessions": h.opts.MaxSessions})
	resp, _ := jsonrpc.EncodeMessage(&jsonrpc.Response{ID: id, Error: &jsonrpc.Error{
		Code: CodeTooManySessions,
		Message: fmt.Sprintf("Too many MCP sessions are open for this user (the limit is %d). "+
			"End one with an HTTP DELETE of its Mcp-Session-Id, or wait for idle sessions to time out.", h.opts.MaxSessions),
		Data: data,
	}})
	h.log.Warn("mcpsurface: refused a session beyond MaxSessions", "maxSessions", h.opts.MaxSessions)
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusTooManyRequests)
	_, _ = w.Write(resp)
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
	h.mu.Unlock()
	closeAll(idle)
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

// Close closes all cached Servers and their sessions; later requests get
// 503. It is idempotent.
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

// consumerKey identifies a consumer with its grants (policies may decide
// by grant, so two grant sets are two servers).
func consumerKey(c surface.Consumer) string {
	return c.Key() + "\x00" + strings.Join(c.Grants, "\x1f")
}
