package console

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"sync"

	"github.com/agentsurface/agentsurface/mcpsurface"
	"github.com/agentsurface/agentsurface/surface"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// MCPConsumer is the consumer MCP clients of a session act as.
var MCPConsumer = surface.Consumer{ID: "agent", Kind: surface.ConsumerMCPBridge}

// mcpEndpoint is a session's MCP server: mcpsurface's Server over the
// session's registry, served over Streamable HTTP by a handler of its own,
// so MCP session ids of one browser session mean nothing to another.
type mcpEndpoint struct {
	s    *Session
	srv  *mcpsurface.Server
	http *mcp.StreamableHTTPHandler
	ts   *surface.Toolset // the live catalog, to compare with what agents were shown

	mu    sync.Mutex
	shown map[*mcp.ServerSession]*shownCatalog
}

// serveMCP serves /mcp: the bearer token picks the session; anything else
// is 401, the same for a missing, wrong or revoked token.
func (a *App) serveMCP(w http.ResponseWriter, r *http.Request) {
	token, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	s := a.byBearer(strings.TrimSpace(token))
	if !ok || s == nil {
		w.Header().Set("WWW-Authenticate", `Bearer realm="agentsurface"`)
		http.Error(w, "unauthorized", http.StatusUnauthorized)
		return
	}
	if r.ContentLength > a.opts.MaxBodyBytes {
		http.Error(w, "request body too large", http.StatusRequestEntityTooLarge)
		return
	}
	s.touch()
	ep, err := s.endpoint()
	if err != nil {
		http.Error(w, "session ended", http.StatusUnauthorized)
		return
	}
	if r.Method == http.MethodPost && r.Header.Get("Mcp-Session-Id") == "" && ep.sessions() >= a.opts.MaxMCPSessions {
		http.Error(w, "too many MCP sessions for this console session", http.StatusTooManyRequests)
		return
	}
	ep.http.ServeHTTP(w, r)
}

// endpoint returns the session's MCP endpoint, made on first use.
func (s *Session) endpoint() (*mcpEndpoint, error) {
	s.mu.Lock()
	ep, closed := s.mcp, s.closed
	s.mu.Unlock()
	switch {
	case closed:
		return nil, ErrClosed
	case ep != nil:
		return ep, nil
	}
	// Made without the session's lock: building the catalog runs the
	// views' When predicates, which take it.
	ep, err := s.newEndpoint()
	if err != nil {
		return nil, err
	}
	s.mu.Lock()
	switch {
	case s.closed:
		s.mu.Unlock()
		ep.close()
		return nil, ErrClosed
	case s.mcp != nil: // another request made one first
		won := s.mcp
		s.mu.Unlock()
		ep.close()
		return won, nil
	}
	s.mcp = ep
	s.mu.Unlock()
	return ep, nil
}

func (s *Session) newEndpoint() (*mcpEndpoint, error) {
	a := s.app
	srv, err := mcpsurface.NewServer(s.reg, MCPConsumer, &mcpsurface.Options{
		Implementation: &mcp.Implementation{Name: "agentsurface-devices", Title: "Devices console", Version: "0.1.0"},
		Logger:         a.log,
	})
	if err != nil {
		return nil, err
	}
	ts, err := surface.NewToolset(s.reg, surface.ToolsetOptions{Consumer: MCPConsumer, Topology: surface.TopologyRemote})
	if err != nil {
		_ = srv.Close()
		return nil, err
	}
	ep := &mcpEndpoint{s: s, srv: srv, ts: ts, shown: map[*mcp.ServerSession]*shownCatalog{}}
	srv.MCP().AddReceivingMiddleware(ep.pinCatalog)
	ep.http = mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv.MCP() }, &mcp.StreamableHTTPOptions{
		SessionTimeout:      a.opts.MCPSessionTimeout,
		MaxRequestBodyBytes: a.opts.MaxBodyBytes,
		Logger:              a.log,
	})
	return ep, nil
}

// sessions counts the connected MCP sessions.
func (ep *mcpEndpoint) sessions() int {
	n := 0
	for range ep.srv.MCP().Sessions() {
		n++
	}
	return n
}

// pinCatalog is MCP middleware: tools/list records what each MCP session
// was shown, and tools/call of a tool whose registration is gone since
// gets the registry's staleness verdict (see shownCatalog).
func (ep *mcpEndpoint) pinCatalog(next mcp.MethodHandler) mcp.MethodHandler {
	return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
		ss, _ := req.GetSession().(*mcp.ServerSession)
		switch method {
		case "tools/list":
			res, err := next(ctx, method, req)
			if err == nil && ss != nil {
				ep.catalog(ss).record(ep.ts.Tools())
			}
			return res, err
		case "tools/call":
			call, _ := req.(*mcp.CallToolRequest)
			if call == nil || ss == nil || call.Params == nil || call.Params.RequestState != "" {
				break
			}
			if res, stale := staleCall(ctx, ep.s.reg, MCPConsumer, ep.catalog(ss), ep.ts.Tools, call.Params.Name, call.Params.Arguments); stale {
				return toolResult(res), nil
			}
		}
		return next(ctx, method, req)
	}
}

// catalog returns the shown catalog of an MCP session, and forgets the
// catalogs of sessions that ended.
func (ep *mcpEndpoint) catalog(ss *mcp.ServerSession) *shownCatalog {
	ep.mu.Lock()
	defer ep.mu.Unlock()
	c := ep.shown[ss]
	if c == nil {
		live := map[*mcp.ServerSession]bool{}
		for x := range ep.srv.MCP().Sessions() {
			live[x] = true
		}
		for k := range ep.shown {
			if !live[k] {
				delete(ep.shown, k)
			}
		}
		c = &shownCatalog{}
		ep.shown[ss] = c
	}
	return c
}

// close ends the MCP sessions and stops following the registry.
func (ep *mcpEndpoint) close() {
	_ = ep.srv.Close()
	_ = ep.ts.Close()
}

// toolResult is a registry result as mcpsurface relays it: the envelope
// as JSON text and as structured content, isError for errors.
func toolResult(res surface.Result) *mcp.CallToolResult {
	b, _ := json.Marshal(res)
	return &mcp.CallToolResult{
		Content:           []mcp.Content{&mcp.TextContent{Text: string(b)}},
		StructuredContent: json.RawMessage(b),
		IsError:           res.Status != surface.StatusOK,
	}
}
