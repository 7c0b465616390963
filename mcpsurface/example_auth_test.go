package mcpsurface_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync"
	"time"

	"github.com/agentsurface/agentsurface/mcpsurface"
	"github.com/agentsurface/agentsurface/surface"
	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/modelcontextprotocol/go-sdk/oauthex"
)

// PairingHeader carries, on a request of an authenticated agent, the
// pairing token of the page session it means to act on.
const PairingHeader = "Mcp-Pairing-Token"

// pages is an application's directory of live page sessions: each has a
// registry, a pairing token shown on the page, and its user. A user
// pairs one of their pages with their agent ("use with my agent").
type pages struct {
	mu       sync.Mutex
	byToken  map[string]*page
	pairedTo map[string]*page // by user: the page the user paired last
}

type page struct {
	user  string
	token string
	reg   *surface.Registry
}

func (p *pages) add(user, token string, reg *surface.Registry) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.byToken == nil {
		p.byToken, p.pairedTo = map[string]*page{}, map[string]*page{}
	}
	p.byToken[token] = &page{user: user, token: token, reg: reg}
}

// pair makes the page of token the one its user's agent acts on.
func (p *pages) pair(token string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if pg := p.byToken[token]; pg != nil {
		p.pairedTo[pg.user] = pg
	}
}

// resolve is the Resolver: the verified bearer token says who; the
// pairing says which of that user's live pages. A request naming a page
// by its pairing token gets that page if it is the user's own; any other
// request gets the page the user paired last. A user with no such page is
// ErrNoSession (403), never another user's page.
func (p *pages) resolve(r *http.Request) (*surface.Registry, surface.Consumer, error) {
	ti := auth.TokenInfoFromContext(r.Context()) // set by auth.RequireBearerToken
	if ti == nil || ti.UserID == "" {
		return nil, surface.Consumer{}, errors.New("not authenticated")
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	pg := p.pairedTo[ti.UserID]
	if tok := r.Header.Get(PairingHeader); tok != "" {
		pg = p.byToken[tok]
	}
	if pg == nil || pg.user != ti.UserID || closed(pg.reg) {
		return nil, surface.Consumer{}, mcpsurface.ErrNoSession
	}
	return pg.reg, surface.Consumer{ID: ti.UserID, Kind: surface.ConsumerMCPBridge}, nil
}

func closed(reg *surface.Registry) bool {
	select {
	case <-reg.Done():
		return true
	default:
		return false
	}
}

// verifyToken stands for the authorization server's token verification
// (JWT signature and claims, or introspection).
func verifyToken(_ context.Context, token string, _ *http.Request) (*auth.TokenInfo, error) {
	users := map[string]string{"token-of-ann": "ann", "token-of-bob": "bob"}
	user, ok := users[token]
	if !ok {
		return nil, auth.ErrInvalidToken
	}
	return &auth.TokenInfo{UserID: user, Scopes: []string{"devices"}, Expiration: time.Now().Add(time.Hour)}, nil
}

// A deployment behind OAuth: go-sdk's auth.RequireBearerToken verifies
// the bearer token before mcpsurface sees the request, and advertises the
// protected-resource metadata (RFC 9728) an MCP client discovers its
// authorization server from; the resolver maps the verified user to the
// page session the user paired with their agent.
func Example_authorization() {
	mux := http.NewServeMux()
	srv := httptest.NewServer(mux)
	defer srv.Close()

	var dir pages
	home, work := surface.New(nil), surface.New(nil) // two live pages of Ann's
	defer home.Close()
	defer work.Close()
	for name, reg := range map[string]*surface.Registry{"home": home, "work": work} {
		_, _ = reg.Register(surface.Component{Type: "page", Description: "The " + name + " page",
			Observations: map[string]surface.Capability{"where": surface.Observation(surface.ObservationDef[string]{
				Description: "Which page this is",
				Read:        func(context.Context, *surface.Call) (string, error) { return name, nil },
			})}})
	}
	dir.add("ann", "pair-home", home)
	dir.add("ann", "pair-work", work)
	dir.pair("pair-work") // Ann clicks "use with my agent" on her work page

	h := mcpsurface.NewHTTPHandler(dir.resolve, nil)
	defer h.Close()
	metadataURL := srv.URL + "/.well-known/oauth-protected-resource"
	mux.Handle("/.well-known/oauth-protected-resource", auth.ProtectedResourceMetadataHandler(&oauthex.ProtectedResourceMetadata{
		Resource:             srv.URL + "/mcp",
		AuthorizationServers: []string{"https://auth.example.com"},
		ScopesSupported:      []string{"devices"},
	}))
	mux.Handle("/mcp", auth.RequireBearerToken(verifyToken, &auth.RequireBearerTokenOptions{
		ResourceMetadataURL: metadataURL, Scopes: []string{"devices"},
	})(h))

	// Without a token: 401, and where to find the authorization server.
	resp, _ := http.Post(srv.URL+"/mcp", "application/json", nil)
	resp.Body.Close()
	fmt.Println(resp.StatusCode, resp.Header.Get("WWW-Authenticate") == `Bearer resource_metadata="`+metadataURL+`", scope="devices"`)

	// Ann's agent, with her token, acts on the page she paired.
	ctx := context.Background()
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "agent", Version: "1"}, nil).Connect(ctx,
		&mcp.StreamableClientTransport{Endpoint: srv.URL + "/mcp", HTTPClient: &http.Client{
			Transport: bearer{"token-of-ann", http.DefaultTransport}}}, nil)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer cs.Close()
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "view_page__where"})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(res.StructuredContent.(map[string]any)["output"])
	// Output:
	// 401 true
	// work
}
