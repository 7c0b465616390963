package mcpsurface

import (
	"context"
	"sync"

	"github.com/agentsurface/agentsurface/surface"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// A call acts on what its client was shown (DESIGN decision 16): it
// resolves against the catalog of the last tools/list answered to that
// client, so that a tool whose component was replaced or unmounted since
// is answered as stale rather than run against what the client never
// saw. pins remembers those catalogs per client: per MCP session, and for
// requests without a session (over HTTP: 2026-07-28 clients, and every
// client of a stateless handler) per credential, the client a
// confirmation binds to (clientOf). The session-less clients remembered
// are bounded by maxListedClients: beyond it, the one that listed or
// called the longest ago is forgotten, and its calls resolve against the
// current catalog, as those of a client that never listed.

// maxListedClients bounds the session-less clients of a Server whose
// last catalog is remembered.
const maxListedClients = 64

// pin is receiving middleware: a tools/list answered to a client records
// the catalog it showed, which the client's later calls resolve against.
func (s *Server) pin(next mcp.MethodHandler) mcp.MethodHandler {
	return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
		if method != "tools/list" || s.meta() {
			return next(ctx, method, req)
		}
		res, err, cat := s.list.list(func() (mcp.Result, error) { return next(ctx, method, req) })
		if err == nil {
			s.pins.record(req, cat)
		}
		return res, err
	}
}

// catalogFor returns the catalog the calls of req's client resolve
// against: the one of its last tools/list, else the current one.
func (s *Server) catalogFor(req mcp.Request) *surface.Catalog {
	if cat := s.pins.shownTo(req); cat != nil {
		return cat
	}
	if cat := s.list.catalog(); cat != nil {
		return cat
	}
	return s.ts.Catalog()
}

// shownOnly reports whether req's client was shown a tool called name
// that the SDK's tool set no longer has: only this package can answer
// its call.
func (s *Server) shownOnly(req mcp.Request, name string) bool {
	if s.list.serves(name) {
		return false
	}
	cat := s.pins.shownTo(req)
	if cat == nil {
		return false
	}
	_, ok := cat.Tool(name)
	return ok
}

// pins is what each client of a Server was last shown. It is safe for
// concurrent use.
type pins struct {
	srv *mcp.Server // whose sessions these are

	mu       sync.Mutex
	closed   bool
	sessions map[*mcp.ServerSession]*surface.Catalog // each session's last tools/list
	clients  map[string]*clientPin                   // each session-less client's, by clientOf
	tick     uint64                                  // counts the uses of clients
}

// clientPin is the catalog a session-less client was last shown, and
// when it last listed or called (a tick of pins).
type clientPin struct {
	cat  *surface.Catalog
	used uint64
}

// record makes cat the catalog the client of req was shown.
func (p *pins) record(req mcp.Request, cat *surface.Catalog) {
	ss, ok := req.GetSession().(*mcp.ServerSession)
	if !ok || cat == nil {
		return
	}
	if sessionless(req) {
		p.mu.Lock()
		defer p.mu.Unlock()
		if !p.closed {
			p.pinClient(clientOf(req), cat)
		}
		return
	}
	p.mu.Lock()
	_, known := p.sessions[ss]
	p.mu.Unlock()
	if !known {
		p.forgetEnded()
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.closed {
		if p.sessions == nil {
			p.sessions = map[*mcp.ServerSession]*surface.Catalog{}
		}
		p.sessions[ss] = cat
	}
}

// shownTo returns the catalog of the last tools/list answered to the
// client of req, or nil if it has not listed.
func (p *pins) shownTo(req mcp.Request) *surface.Catalog {
	p.mu.Lock()
	defer p.mu.Unlock()
	if sessionless(req) {
		c := p.clients[clientOf(req)]
		if c == nil {
			return nil
		}
		p.tick++
		c.used = p.tick
		return c.cat
	}
	if ss, ok := req.GetSession().(*mcp.ServerSession); ok && ss != nil {
		return p.sessions[ss]
	}
	return nil
}

// pinClient makes cat the catalog of the session-less client, and
// forgets the client used the longest ago if there are too many. p.mu is
// held.
func (p *pins) pinClient(client string, cat *surface.Catalog) {
	p.tick++
	if c := p.clients[client]; c != nil {
		c.cat, c.used = cat, p.tick
		return
	}
	if len(p.clients) >= maxListedClients {
		oldest, at := "", uint64(0)
		for k, c := range p.clients {
			if oldest == "" || c.used < at {
				oldest, at = k, c.used
			}
		}
		delete(p.clients, oldest)
	}
	if p.clients == nil {
		p.clients = map[string]*clientPin{}
	}
	p.clients[client] = &clientPin{cat: cat, used: p.tick}
}

// forgetEnded drops the catalogs of the sessions that have ended, and
// with them the last references this package held to those sessions.
func (p *pins) forgetEnded() {
	p.mu.Lock()
	if len(p.sessions) == 0 {
		p.mu.Unlock()
		return
	}
	// Only sessions known before the SDK is asked which are live: one
	// recorded meanwhile is live, whatever the answer says.
	known := make([]*mcp.ServerSession, 0, len(p.sessions))
	for k := range p.sessions {
		known = append(known, k)
	}
	p.mu.Unlock()
	live := map[*mcp.ServerSession]bool{}
	for x := range p.srv.Sessions() {
		live[x] = true
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, k := range known {
		if !live[k] {
			delete(p.sessions, k)
		}
	}
	p.sessions = orNil(p.sessions) // an emptied map keeps its memory
}

// forgetSession drops the catalog of the session with id, which has
// ended (the SDK may still list it for a moment), and those of the other
// sessions that have ended.
func (p *pins) forgetSession(id string) {
	p.mu.Lock()
	for ss := range p.sessions {
		if ss.ID() == id {
			delete(p.sessions, ss)
		}
	}
	p.sessions = orNil(p.sessions)
	p.mu.Unlock()
	p.forgetEnded()
}

// close forgets every catalog and records none after.
func (p *pins) close() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.closed = true
	p.sessions, p.clients = nil, nil
}

// counts returns how many sessions' and session-less clients' catalogs p
// keeps.
func (p *pins) counts() (sessions, clients int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.sessions), len(p.clients)
}

// sessionless reports whether req came without a session: over HTTP with
// no session id (2026-07-28 clients, and every client of a stateless
// handler), each request on a temporary MCP session of its own.
func sessionless(req mcp.Request) bool {
	ss, ok := req.GetSession().(*mcp.ServerSession)
	e := req.GetExtra()
	return ok && ss.ID() == "" && e != nil && e.Header != nil
}

// orNil returns m, or nil if it is empty, so that a map that grew and
// emptied again frees its memory.
func orNil[K comparable, V any](m map[K]V) map[K]V {
	if len(m) == 0 {
		return nil
	}
	return m
}
