package mcpsurface_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/agentsurface/agentsurface/mcpsurface"
	"github.com/agentsurface/agentsurface/surface"
	"github.com/agentsurface/agentsurface/surface/surfacetest"
	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/modelcontextprotocol/go-sdk/oauthex"
)

// authFixture is the handler behind auth.RequireBearerToken with
// protected-resource metadata, over the pages directory of
// Example_authorization: Ann has two pages (home, work), Bob one.
type authFixture struct {
	srv      *httptest.Server
	dir      *pages
	regs     map[string]*surface.Registry // by pairing token
	metadata string
}

func newAuthFixture(t *testing.T) *authFixture {
	f := &authFixture{dir: &pages{}, regs: map[string]*surface.Registry{}}
	for _, p := range []struct{ user, token string }{{"ann", "pair-home"}, {"ann", "pair-work"}, {"bob", "pair-bob"}} {
		reg := surfacetest.NewRegistry(t, nil)
		surfacetest.MustRegister(t, reg, surface.Component{Type: "page", Description: "Page",
			Observations: map[string]surface.Capability{"where": surfacetest.Value("Which page this is", p.token)},
			Actions: map[string]surface.Capability{"wipe": surface.Action(surface.ActionDef[surface.None, surface.None]{
				Description: "Wipes", Effect: surface.EffectLocalState, Confirmation: surface.ConfirmRequired,
				Execute: func(context.Context, *surface.Call, surface.None) (surface.None, error) {
					return surface.None{}, nil
				}})}})
		f.dir.add(p.user, p.token, reg)
		f.regs[p.token] = reg
	}
	mux := http.NewServeMux()
	f.srv = httptest.NewServer(mux)
	f.metadata = f.srv.URL + "/.well-known/oauth-protected-resource"
	h := mcpsurface.NewHTTPHandler(f.dir.resolve, nil)
	mux.Handle("/.well-known/oauth-protected-resource", auth.ProtectedResourceMetadataHandler(&oauthex.ProtectedResourceMetadata{
		Resource: f.srv.URL + "/mcp", AuthorizationServers: []string{"https://auth.example.com"}, ScopesSupported: []string{"devices"},
	}))
	mux.Handle("/mcp", auth.RequireBearerToken(func(ctx context.Context, token string, r *http.Request) (*auth.TokenInfo, error) {
		if token == "token-without-scope" {
			ti, _ := verifyToken(ctx, "token-of-ann", r)
			ti.Scopes = nil
			return ti, nil
		}
		return verifyToken(ctx, token, r)
	}, &auth.RequireBearerTokenOptions{ResourceMetadataURL: f.metadata, Scopes: []string{"devices"}})(h))
	t.Cleanup(func() {
		_ = h.Close()
		f.srv.Close()
	})
	return f
}

// headers adds a bearer token and, if set, a pairing token to requests.
type headers struct {
	token, pairing string
	next           http.RoundTripper
}

func (h headers) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+h.token)
	if h.pairing != "" {
		r.Header.Set(PairingHeader, h.pairing)
	}
	return h.next.RoundTrip(r)
}

func (f *authFixture) connect(t *testing.T, token, pairing, version string) (*mcp.ClientSession, error) {
	t.Helper()
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "agent", Version: "1"}, nil).Connect(bg,
		&mcp.StreamableClientTransport{Endpoint: f.srv.URL + "/mcp", MaxRetries: -1,
			HTTPClient: &http.Client{Transport: headers{token, pairing, f.srv.Client().Transport}}},
		&mcp.ClientSessionOptions{ProtocolVersion: version})
	if err == nil {
		t.Cleanup(func() { _ = cs.Close() })
	}
	return cs, err
}

// where returns the pairing token of the page a session acts on.
func where(t *testing.T, cs *mcp.ClientSession) string {
	t.Helper()
	env := callTool(t, cs, "view_page__where", nil, nil)
	requireOK(t, env)
	var s string
	_ = json.Unmarshal(env.Output, &s)
	return s
}

// The handler behind go-sdk's bearer-token verification: a request
// without a valid token (or without the required scope) never reaches
// mcpsurface and learns where the authorization server is (RFC 9728);
// the resolver gets the verified user, whose agent reaches the page the
// user paired, or the page it names by pairing token if it is the user's
// own; another user's page is never reachable; a user who paired nothing
// gets 403, not 401. Re-pairing moves the agent: its old stateful session
// ends (404) and the next one acts on the new page.
func TestAuthorizationBehindBearerToken(t *testing.T) {
	f := newAuthFixture(t)

	// The protected-resource metadata.
	resp, err := http.Get(f.metadata)
	if err != nil {
		t.Fatal(err)
	}
	var meta oauthex.ProtectedResourceMetadata
	_ = json.NewDecoder(resp.Body).Decode(&meta)
	resp.Body.Close()
	if meta.Resource != f.srv.URL+"/mcp" || len(meta.AuthorizationServers) != 1 {
		t.Fatalf("metadata %+v", meta)
	}
	// No, a bad, or an under-scoped token: refused before the SDK.
	for _, c := range []struct {
		token string
		want  int
	}{{"", http.StatusUnauthorized}, {"forged", http.StatusUnauthorized}, {"token-without-scope", http.StatusForbidden}} {
		req, _ := http.NewRequest(http.MethodPost, f.srv.URL+"/mcp", strings.NewReader(rawInit))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		if c.token != "" {
			req.Header.Set("Authorization", "Bearer "+c.token)
		}
		resp, err := f.srv.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != c.want || !strings.Contains(resp.Header.Get("WWW-Authenticate"), `resource_metadata="`+f.metadata+`"`) ||
			resp.Header.Get("Mcp-Session-Id") != "" {
			t.Fatalf("token %q: %d %v %s", c.token, resp.StatusCode, resp.Header, body)
		}
	}

	for _, version := range versions {
		t.Run(version, func(t *testing.T) {
			f.dir.pair("pair-work")
			// Ann's agent reaches the page she paired; naming her other page
			// reaches that one.
			paired, err := f.connect(t, "token-of-ann", "", version)
			if err != nil {
				t.Fatal(err)
			}
			if got := where(t, paired); got != "pair-work" {
				t.Fatalf("Ann's agent acts on %s", got)
			}
			named, err := f.connect(t, "token-of-ann", "pair-home", version)
			if err != nil {
				t.Fatal(err)
			}
			if got := where(t, named); got != "pair-home" {
				t.Fatalf("naming the home page reached %s", got)
			}
			// The resolver got the verified user: she is the consumer.
			requireCode(t, callTool(t, paired, "view_page__wipe", nil, nil), surface.CodeConfirmationRequired)
			if p := f.regs["pair-work"].Confirmations().Pending(); len(p) == 0 || p[len(p)-1].ConsumerKey != "mcp-bridge:ann" {
				t.Fatalf("pending %+v", p)
			}

			// Bob's page is out of Ann's reach, by pairing token or at all.
			if _, err := f.connect(t, "token-of-ann", "pair-bob", version); err == nil || !strings.Contains(err.Error(), "Forbidden") {
				t.Fatalf("Ann named Bob's page: %v", err)
			}
			if _, err := f.connect(t, "token-of-bob", "", version); err == nil || !strings.Contains(err.Error(), "Forbidden") {
				t.Fatalf("Bob, who paired nothing: %v", err)
			}
			f.dir.pair("pair-bob")
			bob, err := f.connect(t, "token-of-bob", "", version)
			if err != nil {
				t.Fatal(err)
			}
			if got := where(t, bob); got != "pair-bob" {
				t.Fatalf("Bob's agent acts on %s", got)
			}
			if version == v2025 {
				// Bob's token with Ann's session id: refused.
				req, _ := http.NewRequest(http.MethodPost, f.srv.URL+"/mcp", strings.NewReader(`{"jsonrpc":"2.0","id":7,"method":"tools/list"}`))
				req.Header.Set("Content-Type", "application/json")
				req.Header.Set("Accept", "application/json, text/event-stream")
				req.Header.Set("Authorization", "Bearer token-of-bob")
				req.Header.Set("Mcp-Session-Id", paired.ID())
				req.Header.Set("Mcp-Protocol-Version", v2025)
				resp, err := f.srv.Client().Do(req)
				if err != nil {
					t.Fatal(err)
				}
				resp.Body.Close()
				if resp.StatusCode != http.StatusNotFound {
					t.Fatalf("Bob with Ann's session id: %d", resp.StatusCode)
				}
			}

			// Ann pairs her home page: her agent moves there.
			f.dir.pair("pair-home")
			if version == v2025 {
				if _, err := paired.ListTools(bg, nil); err == nil {
					t.Fatal("the session of the unpaired page is still served")
				}
			}
			again, err := f.connect(t, "token-of-ann", "", version)
			if err != nil {
				t.Fatal(err)
			}
			if got := where(t, again); got != "pair-home" {
				t.Fatalf("after re-pairing, Ann's agent acts on %s", got)
			}
			f.dir.mu.Lock()
			delete(f.dir.pairedTo, "bob")
			f.dir.mu.Unlock()
		})
	}
}
