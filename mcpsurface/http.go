package mcpsurface

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"runtime/debug"
	"strings"
	"sync"
	"time"

	"github.com/agentsurface/agentsurface/surface"
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
	// SessionTimeout closes stateful sessions idle this long; zero never.
	SessionTimeout time.Duration
	// IdleTimeout drops a cached Server that has had no request and no
	// connected session for this long. Zero means 30 minutes; negative
	// never.
	IdleTimeout time.Duration
}

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
		h.opts.IdleTimeout = 30 * time.Minute
	}
	h.sdk = mcp.NewStreamableHTTPHandler(func(r *http.Request) *mcp.Server {
		s, _ := r.Context().Value(serverCtxKey{}).(*mcp.Server)
		return s // set by ServeHTTP; the SDK answers 400 to nil
	}, &mcp.StreamableHTTPOptions{
		Stateless:      h.opts.Stateless,
		SessionTimeout: h.opts.SessionTimeout,
		Logger:         h.opts.Logger,
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
	}
	h.sdk.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), serverCtxKey{}, c.srv.mcp)))
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
		consumer.Kind = surface.MCPBridge
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
	}
	c.lastUsed = now
	h.mu.Unlock()
	if srv != nil {
		_ = srv.Close()
	}
	return c, nil
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
		if now.Sub(c.lastUsed) < idle {
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
	h.mu.Unlock()
	closeAll(out)
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
