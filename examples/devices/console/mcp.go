package console

import (
	"errors"
	"net/http"
	"strings"

	"github.com/agentsurface/agentsurface/mcpsurface"
	"github.com/agentsurface/agentsurface/surface"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// MCPConsumer is the consumer MCP clients of a session act as.
var MCPConsumer = surface.Consumer{ID: "agent", Kind: surface.ConsumerMCPBridge}

// newMCPHandler serves /mcp for every browser session: the bearer token
// picks the session's registry; anything else is 401, the same for a
// missing, wrong or revoked token. mcpsurface keeps one MCP server per
// session, binds MCP session ids to it, closes idle sessions, caps them
// per session, and resolves each MCP session's calls against the tools it
// last listed.
func (a *App) newMCPHandler() *mcpsurface.HTTPHandler {
	return mcpsurface.NewHTTPHandler(a.resolveMCP, &mcpsurface.HTTPOptions{
		Options: mcpsurface.Options{
			Implementation: &mcp.Implementation{Name: "agentsurface-devices", Title: "Devices console"}, // Version: the module's
			Logger:         a.log,
			TraceContext:   a.opts.TraceContext,
		},
		SessionTimeout:      a.opts.MCPSessionTimeout,
		MaxSessions:         a.opts.MaxMCPSessions,
		MaxRequestBodyBytes: a.opts.MaxBodyBytes,
	})
}

var errNoSession = errors.New("console: no session for this token")

// resolveMCP maps a request's bearer token to its session's registry.
func (a *App) resolveMCP(r *http.Request) (*surface.Registry, surface.Consumer, error) {
	token, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	if !ok {
		return nil, surface.Consumer{}, errNoSession
	}
	s, _ := a.lookup(credToken, strings.TrimSpace(token), true)
	if s == nil {
		return nil, surface.Consumer{}, errNoSession
	}
	return s.reg, MCPConsumer, nil
}

// serveMCP serves /mcp; a body declaring more than MaxBodyBytes is
// refused before it is read.
func (a *App) serveMCP(w http.ResponseWriter, r *http.Request) {
	if r.ContentLength > a.opts.MaxBodyBytes {
		http.Error(w, "request body too large", http.StatusRequestEntityTooLarge)
		return
	}
	a.mcp.ServeHTTP(w, r)
}
