package mcpsurface_test

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/agentsurface/agentsurface/mcpsurface"
	"github.com/agentsurface/agentsurface/surface"
	"github.com/agentsurface/agentsurface/surface/surfacetest"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// session is one user's registry behind a pairing token.
type session struct {
	reg      *surface.Registry
	app      *app
	consumer surface.Consumer
}

// httpFixture serves sessions by bearer token (or ?token= for clients
// that cannot send headers).
type httpFixture struct {
	h        *mcpsurface.HTTPHandler
	srv      *httptest.Server
	sessions map[string]*session
	resolves atomic.Int64
}

func newHTTP(t testing.TB, opts *mcpsurface.HTTPOptions, sessions map[string]*session) *httpFixture {
	t.Helper()
	f := &httpFixture{sessions: sessions}
	f.h = mcpsurface.NewHTTPHandler(f.resolver(), opts)
	f.srv = httptest.NewServer(f.h)
	t.Cleanup(func() {
		_ = f.h.Close() // ends the sessions, so the server can close
		f.srv.Close()
	})
	return f
}

// resolver resolves the fixture's sessions by bearer token, or by the
// token query parameter for clients that cannot send headers.
func (f *httpFixture) resolver() mcpsurface.Resolver {
	return func(r *http.Request) (*surface.Registry, surface.Consumer, error) {
		f.resolves.Add(1)
		tok := strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer ")
		if tok == "" {
			tok = r.URL.Query().Get("token")
		}
		s, ok := f.sessions[tok]
		if !ok {
			return nil, surface.Consumer{}, errors.New("unknown token")
		}
		return s.reg, s.consumer, nil
	}
}

type bearer struct {
	token string
	next  http.RoundTripper
}

func (b bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.token)
	return b.next.RoundTrip(r)
}

// client connects an SDK client with a token.
func (f *httpFixture) client(t testing.TB, token, version string, opts *mcp.ClientOptions) (*mcp.ClientSession, error) {
	t.Helper()
	tr := &mcp.StreamableClientTransport{Endpoint: f.srv.URL, MaxRetries: -1,
		HTTPClient: &http.Client{Transport: bearer{token, f.srv.Client().Transport}}}
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "http-client", Version: "1.0.0"}, opts).
		Connect(bg, tr, &mcp.ClientSessionOptions{ProtocolVersion: version})
	if err == nil {
		t.Cleanup(func() { _ = cs.Close() })
	}
	return cs, err
}

func (f *httpFixture) mustClient(t testing.TB, token, version string, opts *mcp.ClientOptions) *mcp.ClientSession {
	t.Helper()
	cs, err := f.client(t, token, version, opts)
	if err != nil {
		t.Fatalf("connect with %q: %v", token, err)
	}
	return cs
}

// post sends a raw JSON-RPC request.
func (f *httpFixture) post(t testing.TB, token, sessionID, body string) *http.Response {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, f.srv.URL, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	if sessionID != "" {
		req.Header.Set("Mcp-Session-Id", sessionID)
		req.Header.Set("Mcp-Protocol-Version", v2025)
	}
	resp, err := f.srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp
}

func twoUsers(t testing.TB) map[string]*session {
	regA, a, _ := newApp(t)
	regB := surfacetest.NewRegistry(t, nil)
	b := &app{}
	regB.SetProcedureExecutor(b.executor())
	surfacetest.MustRegister(t, regB, b.domainPanel())
	return map[string]*session{
		"tok-alice": {reg: regA, app: a, consumer: surface.Consumer{ID: "alice", Kind: surface.ConsumerMCPBridge}},
		"tok-bob":   {reg: regB, app: b, consumer: surface.Consumer{ID: "bob"}},
	}
}

// httpModes are the ways a client reaches an HTTPHandler: the default
// handler serves 2025-11-25 clients stateful sessions and 2026-07-28
// clients session-less requests; with HTTPOptions.Stateless every request
// is session-less, also those of older clients.
var httpModes = []struct {
	name      string
	stateless bool // HTTPOptions.Stateless
	version   string
}{
	{"stateful", false, v2025},
	{"default-2026", false, v2026},
	{"stateless", true, v2026},
	{"stateless-legacy", true, v2025},
}

// Two users with different tokens each see and call only their own
// surface; an unknown token gets 401 before the SDK; a session id only
// works with the credentials it was created with.
func TestHTTPSessionIsolation(t *testing.T) {
	for _, mode := range httpModes {
		t.Run(mode.name, func(t *testing.T) {
			users := twoUsers(t)
			f := newHTTP(t, &mcpsurface.HTTPOptions{Stateless: mode.stateless}, users)
			alice := f.mustClient(t, "tok-alice", mode.version, nil)
			bob := f.mustClient(t, "tok-bob", mode.version, nil)
			if got := names(listTools(t, alice)); got != "view_devices__table__label,view_devices__table__open,view_devices__table__readState,view_devices__table__selectRows,view_devices__table__wipe" {
				t.Fatalf("alice sees %s", got)
			}
			if got := names(listTools(t, bob)); got != "domain_devices__disable,domain_devices__list,domain_devices__notify,view_devices__panel__count" {
				t.Fatalf("bob sees %s", got)
			}
			requireOK(t, callTool(t, alice, "view_devices__table__selectRows", map[string]any{"ids": []string{"d1"}}, nil))
			env := callTool(t, bob, "domain_devices__list", nil, nil)
			requireOK(t, env)
			if string(env.Output) != `["d1","d2"]` {
				t.Fatalf("%s", env.Output)
			}
			if _, err := bob.CallTool(bg, &mcp.CallToolParams{Name: "view_devices__table__selectRows", Arguments: map[string]any{"ids": []string{"d1"}}}); err == nil {
				t.Fatal("bob reached alice's tool")
			}
			// Consumers are the resolver's: Bob's got the MCP kind.
			cid, _ := requireCode(t, callTool(t, bob, "domain_devices__disable", map[string]any{"ids": []string{"d1"}}, nil), surface.CodeConfirmationRequired).Details["confirmationId"].(string)
			if p := users["tok-bob"].reg.Confirmations().Pending(); len(p) != 1 || p[0].ConfirmationID != cid || p[0].ConsumerKey != "mcp-bridge:bob" {
				t.Fatalf("%+v", p)
			}

			for _, tok := range []string{"", "tok-mallory"} {
				resp := f.post(t, tok, "", `{"jsonrpc":"2.0","id":1,"method":"tools/list"}`)
				if resp.StatusCode != http.StatusUnauthorized || !strings.HasPrefix(resp.Header.Get("WWW-Authenticate"), "Bearer") {
					t.Fatalf("token %q: %d %v", tok, resp.StatusCode, resp.Header)
				}
			}
			if _, err := f.client(t, "tok-mallory", mode.version, nil); err == nil {
				t.Fatal("an unknown token connected")
			}
			if !mode.stateless && mode.version == v2025 {
				sid := alice.ID()
				if sid == "" {
					t.Fatal("no session id")
				}
				if resp := f.post(t, "tok-bob", sid, `{"jsonrpc":"2.0","id":7,"method":"tools/list"}`); resp.StatusCode != http.StatusNotFound {
					t.Fatalf("bob with alice's session: %d", resp.StatusCode)
				}
				if resp := f.post(t, "tok-alice", sid, `{"jsonrpc":"2.0","id":7,"method":"tools/list"}`); resp.StatusCode != http.StatusOK {
					t.Fatalf("alice with her session: %d", resp.StatusCode)
				}
			}
		})
	}
}

// The tool list follows the registry over HTTP, stateful (standalone SSE)
// and session-less (subscriptions/listen), from one handler.
func TestHTTPListChanged(t *testing.T) {
	for _, mode := range httpModes {
		if mode.name == "stateless-legacy" {
			continue // no notification channel
		}
		t.Run(mode.name, func(t *testing.T) {
			users := twoUsers(t)
			f := newHTTP(t, &mcpsurface.HTTPOptions{Stateless: mode.stateless}, users)
			ch := newChanges()
			alice := f.mustClient(t, "tok-alice", mode.version, &mcp.ClientOptions{ToolListChangedHandler: ch.handler})
			bob := f.mustClient(t, "tok-bob", mode.version, nil)
			s := users["tok-alice"]
			surfacetest.MustRegister(t, s.reg, s.app.domainPanel())
			ch.waitFor(t, alice, func(m map[string]*mcp.Tool) bool { return len(m) == 9 })
			if n := len(listTools(t, bob)); n != 4 {
				t.Fatalf("bob's list changed: %d", n)
			}
		})
	}
}

// Elicitation over HTTP: stateful sessions use elicitation/create on the
// SSE stream; 2026-07-28 clients answer input requests (MRTR, with the
// signed request state) natively, from the default handler as from a
// stateless one; stateless legacy sessions cannot be asked and get
// two-phase.
func TestHTTPElicitation(t *testing.T) {
	for _, mode := range httpModes {
		for _, action := range []string{"accept", "decline"} {
			t.Run(mode.name+"/"+action, func(t *testing.T) {
				users := twoUsers(t)
				f := newHTTP(t, &mcpsurface.HTTPOptions{Stateless: mode.stateless, Options: mcpsurface.Options{Elicit: true}}, users)
				var asked atomic.Int64
				alice := f.mustClient(t, "tok-alice", mode.version, answering(action, true, &asked, nil))
				env := callTool(t, alice, "view_devices__table__wipe", map[string]any{"ids": []string{"d1"}}, nil)
				wipes := users["tok-alice"].app.wipes.Load()
				switch {
				case mode.name == "stateless-legacy":
					requireCode(t, env, surface.CodeConfirmationRequired)
					if asked.Load() != 0 {
						t.Fatal("asked over a channel that cannot answer")
					}
					return
				case action == "accept":
					requireOK(t, env)
					if wipes != 1 {
						t.Fatalf("wipes %d", wipes)
					}
				default:
					if e := requireCode(t, env, surface.CodeConfirmationInvalid); e.Details["reason"] != "denied" || wipes != 0 {
						t.Fatalf("%+v, wipes %d", e, wipes)
					}
				}
				if asked.Load() != 1 {
					t.Fatalf("asked %d times", asked.Load())
				}
			})
		}
	}
}

// Servers are cached per (registry, consumer), resolved on every request;
// Forget drops a registry's servers and their sessions; Close ends
// everything and later requests get 503.
func TestHTTPCacheForgetClose(t *testing.T) {
	users := twoUsers(t)
	users["tok-alice-2"] = &session{reg: users["tok-alice"].reg, consumer: surface.Consumer{ID: "alice", Kind: surface.ConsumerMCPBridge}}
	f := newHTTP(t, nil, users)
	a1 := f.mustClient(t, "tok-alice", v2025, nil)
	a2 := f.mustClient(t, "tok-alice-2", v2025, nil)
	listTools(t, a1)
	listTools(t, a2)
	// One server for both of Alice's tokens: a session of one works with
	// the other, since both resolve to the same pair.
	if resp := f.post(t, "tok-alice-2", a1.ID(), `{"jsonrpc":"2.0","id":9,"method":"tools/list"}`); resp.StatusCode != http.StatusOK {
		t.Fatalf("same pair, other token: %d", resp.StatusCode)
	}
	if f.resolves.Load() == 0 {
		t.Fatal("resolver not called")
	}

	f.h.Forget(users["tok-alice"].reg)
	if _, err := a1.ListTools(bg, nil); err == nil {
		t.Fatal("session survived Forget")
	}
	a3 := f.mustClient(t, "tok-alice", v2025, nil) // a new server for the pair
	listTools(t, a3)
	if resp := f.post(t, "tok-alice", a1.ID(), `{"jsonrpc":"2.0","id":9,"method":"tools/list"}`); resp.StatusCode != http.StatusNotFound {
		t.Fatalf("old session after Forget: %d", resp.StatusCode)
	}

	_ = f.h.Close()
	_ = f.h.Close()
	if resp := f.post(t, "tok-bob", "", `{"jsonrpc":"2.0","id":1,"method":"tools/list"}`); resp.StatusCode != http.StatusServiceUnavailable {
		t.Fatalf("after Close: %d", resp.StatusCode)
	}
}

// A cached server idle past IdleTimeout with no session is dropped; the
// pair gets a new one on its next request (new invocation-id prefix).
func TestHTTPIdleServersDropped(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := &httpFixture{sessions: twoUsers(t)}
		f.h = mcpsurface.NewHTTPHandler(f.resolver(), &mcpsurface.HTTPOptions{Stateless: true, IdleTimeout: time.Minute})
		p := servePipe(f.h)
		defer p.stop()
		defer f.h.Close()
		alice := connectPipe(t, p, "tok-alice", v2026, nil)
		defer alice.Close()
		prefix := func(env envelope) string { return env.InvocationID[:strings.LastIndexByte(env.InvocationID, '_')] }
		first := prefix(callTool(t, alice, "view_devices__table__readState", nil, nil))
		time.Sleep(59 * time.Second)
		if again := prefix(callTool(t, alice, "view_devices__table__readState", nil, nil)); again != first {
			t.Fatal("the server was not cached")
		}
		time.Sleep(2 * time.Minute)
		synctest.Wait()
		if n := mcpsurface.CachedServers(f.h); n != 0 {
			t.Fatalf("%d idle servers kept", n)
		}
		if later := prefix(callTool(t, alice, "view_devices__table__readState", nil, nil)); later == first {
			t.Fatal("the idle server was kept")
		}
	})
}

// A closed registry's server is dropped on the next request for it: its
// sessions end without an explicit Forget.
func TestHTTPClosedRegistryDropped(t *testing.T) {
	users := twoUsers(t)
	f := newHTTP(t, nil, users)
	a1 := f.mustClient(t, "tok-alice", v2025, nil)
	listTools(t, a1)
	_ = users["tok-alice"].reg.Close()
	if resp := f.post(t, "tok-alice", a1.ID(), `{"jsonrpc":"2.0","id":9,"method":"tools/list"}`); resp.StatusCode != http.StatusNotFound {
		t.Fatalf("session of a closed registry: %d", resp.StatusCode)
	}
	bob := f.mustClient(t, "tok-bob", v2025, nil)
	listTools(t, bob) // other sessions are unaffected
}
