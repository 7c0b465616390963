package webhost

import (
	"cmp"
	"errors"
	"net/http"
	"strings"
	"time"

	"github.com/agentsurface/agentsurface/mcpsurface"
	"github.com/agentsurface/agentsurface/surface"
	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/modelcontextprotocol/go-sdk/oauthex"
)

// OAuthOptions put the MCP endpoint behind an OAuth authorization server,
// through go-sdk's auth package: every request needs a bearer token that
// Verify accepts (else 401 with the protected-resource metadata's URL, so
// that the client finds where to sign in), and acts on a session of the
// token's user, never another user's, by the rule mcpsurface recommends:
// the session the user paired last with [Session.PairAgent], or the one
// a request names by its token ([Session.Token]) in the PairingHeader, if
// it is the user's own. A user without such a live session gets 403
// (mcpsurface.ErrNoSession). Sessions then belong to users:
// Options.User is required.
type OAuthOptions struct {
	// Verify checks a bearer token and returns who it was issued to
	// (TokenInfo.UserID, compared with Session.User). Required.
	Verify auth.TokenVerifier
	// Scopes the token must have.
	Scopes []string
	// ResourceMetadataURL is the URL of the protected-resource metadata
	// (RFC 9728), sent in 401 answers.
	ResourceMetadataURL string
	// Metadata, if set, is served at /.well-known/oauth-protected-resource.
	Metadata *oauthex.ProtectedResourceMetadata
	// PairingHeader names the header by which a request names the
	// session it acts on. Default "Mcp-Pairing-Token".
	PairingHeader string
}

func (o *OAuthOptions) pairingHeader() string { return cmp.Or(o.PairingHeader, "Mcp-Pairing-Token") }

// newMCPHandler serves the MCP endpoint for every session: the bearer
// token (or with OAuth, the verified user's pairing) picks the session's
// registry; anything else is 401 (403 for a verified user without a
// session). mcpsurface keeps one MCP server per session, binds MCP
// session ids to it, closes idle sessions, caps them per session, and
// resolves each MCP session's calls against the tools it last listed.
// Its confirmations reach the person through the approve page
// ([Host.ApproveURL]), unless Options.MCP.HTTP sets its own ApproveURL.
func (h *Host) newMCPHandler() *mcpsurface.HTTPHandler {
	o := h.opts.MCP.HTTP
	if o.MaxSessions == 0 {
		o.MaxSessions = 8
	}
	if o.SessionTimeout == 0 {
		o.SessionTimeout = 10 * time.Minute
	}
	if o.MaxRequestBodyBytes == 0 {
		o.MaxRequestBodyBytes = h.opts.MaxBodyBytes
	}
	if o.Logger == nil {
		o.Logger = h.log
	}
	if o.ApproveURL == nil {
		o.ApproveURL = h.ApproveURL
	}
	return mcpsurface.NewHTTPHandler(h.resolveMCP, &o)
}

// mcpRoute is the MCP endpoint, behind the OAuth check when configured.
// It tells the calls the base URL their request came to (baseHeader).
func (h *Host) mcpRoute() http.Handler {
	var next http.Handler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h.stats.add(&h.stats.mcpRequests)
		r = r.WithContext(r.Context()) // a copy, whose header may change
		r.Header = r.Header.Clone()
		r.Header.Set(baseHeader, requestBase(r))
		h.mcp.ServeHTTP(w, r)
	})
	if o := h.opts.MCP.OAuth; o != nil {
		next = auth.RequireBearerToken(o.Verify, &auth.RequireBearerTokenOptions{
			ResourceMetadataURL: o.ResourceMetadataURL, Scopes: o.Scopes,
		})(next)
	}
	return next
}

func (h *Host) metadataHandler() http.Handler {
	return auth.ProtectedResourceMetadataHandler(h.opts.MCP.OAuth.Metadata)
}

// baseHeader carries the base URL (scheme and Host) of an MCP request
// to the tool calls it makes, for their approve links
// ([Host.ApproveURL]): the SDK hands a call its request's header
// (mcp.RequestExtra.Header), not its Host. mcpRoute sets it on every
// request, replacing whatever the client sent.
const baseHeader = "Agentsurface-Request-Base"

// requestBase is the base URL a request came to: its Host header (which
// the guard checked), over https when it came over TLS to this server.
// Forwarding headers are not read: any client can send them.
func requestBase(r *http.Request) string {
	scheme := "http"
	if r.TLS != nil {
		scheme = "https"
	}
	return scheme + "://" + r.Host
}

// mcpBase returns the base URL of the MCP request that made the call
// req, as mcpRoute recorded it, or "".
func mcpBase(req *mcp.CallToolRequest) string {
	if req.Extra == nil || req.Extra.Header == nil {
		return ""
	}
	return req.Extra.Header.Get(baseHeader)
}

// urlElicited reports whether an approve link asked for during the call
// req is the URL of a URL-mode elicitation, as mcpsurface decides it: a
// call's first round (no request state) of a client that declares
// elicitation.url, unless Options.MCP.HTTP.NoURLElicitation.
func (h *Host) urlElicited(req *mcp.CallToolRequest) bool {
	if h.opts.MCP.HTTP.NoURLElicitation || req.Session == nil || req.Params == nil || req.Params.RequestState != "" {
		return false
	}
	caps := req.ClientCapabilities()
	return caps != nil && caps.Elicitation != nil && caps.Elicitation.URL != nil
}

var errNoSession = errors.New("webhost: no session for this token")

// resolveMCP maps an MCP request to its session's registry and consumer.
func (h *Host) resolveMCP(r *http.Request) (*surface.Registry, surface.Consumer, error) {
	if h.opts.MCP.OAuth != nil {
		return h.resolveOAuth(r)
	}
	s, _ := h.lookup(credToken, bearer(r), true)
	if s == nil {
		h.stats.add(&h.stats.ended)
		return nil, surface.Consumer{}, errNoSession
	}
	return s.reg, h.opts.MCP.Consumer, nil
}

// resolveOAuth maps a verified user's request to the session the user
// paired, or the one named in the pairing header if it is the user's.
func (h *Host) resolveOAuth(r *http.Request) (*surface.Registry, surface.Consumer, error) {
	ti := auth.TokenInfoFromContext(r.Context())
	if ti == nil || ti.UserID == "" {
		return nil, surface.Consumer{}, errNoSession
	}
	var s *Session
	if tok := r.Header.Get(h.opts.MCP.OAuth.pairingHeader()); tok != "" {
		s, _ = h.lookup(credToken, tok, true)
	} else {
		h.mu.Lock()
		s = h.paired[ti.UserID]
		h.mu.Unlock()
		if s != nil {
			s.touch()
		}
	}
	if s == nil || s.user != ti.UserID {
		h.stats.add(&h.stats.otherUser)
		return nil, surface.Consumer{}, mcpsurface.ErrNoSession
	}
	c := h.opts.MCP.Consumer
	c.ID = ti.UserID
	return s.reg, c, nil
}

// PairAgent makes this session the one its user's agent acts on over MCP
// with OAuth ("use with my agent"): requests of that user that name no
// session by the pairing header reach it, until another session of the
// user is paired or it ends. An MCP session open on the session paired
// before ends, so that the agent moves with the pairing. Without
// Options.MCP.OAuth it does nothing: the session's token is the pairing.
func (s *Session) PairAgent() {
	h := s.h
	if h.opts.MCP.OAuth == nil || s.user == "" {
		return
	}
	h.mu.Lock()
	if h.dir.byID[s.id] != s { // ended
		h.mu.Unlock()
		return
	}
	if h.paired == nil {
		h.paired = map[string]*Session{}
	}
	old := h.paired[s.user]
	h.paired[s.user] = s
	h.mu.Unlock()
	if old != nil && old != s && h.mcp != nil {
		h.mcp.Forget(old.reg)
	}
}

// bearer returns a request's bearer token, or "".
func bearer(r *http.Request) string {
	t, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	if !ok {
		return ""
	}
	return strings.TrimSpace(t)
}
