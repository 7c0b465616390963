package replica_test

import (
	"context"
	"encoding/json"
	"net/http"
	"testing"
	"time"

	"github.com/agentsurface/agentsurface/surface"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// bearer adds a session's token to every request of an MCP client.
type bearer struct {
	token string
	next  http.RoundTripper
}

func (b bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.token)
	return b.next.RoundTrip(r)
}

// mcpClient connects an MCP client of session tok to endpoint.
func mcpClient(t testing.TB, c *http.Client, endpoint, tok, version string, opts *mcp.ClientOptions) *mcp.ClientSession {
	t.Helper()
	tr := &mcp.StreamableClientTransport{Endpoint: endpoint + "/mcp", MaxRetries: -1,
		HTTPClient: &http.Client{Transport: bearer{tok, c.Transport}}}
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "test-agent", Version: "1.0.0"}, opts).
		Connect(context.Background(), tr, &mcp.ClientSessionOptions{ProtocolVersion: version})
	if err != nil {
		t.Fatalf("connect: %v", err)
	}
	t.Cleanup(func() { _ = cs.Close() })
	return cs
}

// bump calls the counter's tool and returns its structured result.
func bump(t testing.TB, cs *mcp.ClientSession, name string) bumped {
	t.Helper()
	res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: name, Arguments: map[string]any{}})
	if err != nil {
		t.Fatalf("call %s: %v", name, err)
	}
	if res.IsError {
		t.Fatalf("call %s: error result %+v", name, res.StructuredContent)
	}
	b, _ := json.Marshal(res.StructuredContent)
	var env struct {
		Output bumped `json:"output"`
	}
	if err := json.Unmarshal(b, &env); err != nil {
		t.Fatal(err)
	}
	return env.Output
}

// MCP sessions through a balancer with no stickiness: every message,
// whichever replica it lands on, reaches the session's registry on its
// owner — stateful sessions (their Mcp-Session-Id lives on the owner)
// and session-less 2026-07-28 requests alike — and the tool list's
// change notifications come back through forwarded streams.
func TestMCPSessionsThroughForwarding(t *testing.T) {
	for _, mode := range []struct {
		name      string
		stateless bool
		version   string
	}{{"stateful", false, "2025-11-25"}, {"stateless", true, "2026-07-28"}} {
		t.Run(mode.name, func(t *testing.T) {
			nodes, lb, _ := three(t, nodeOptions{stateless: mode.stateless})
			c := client(t)
			tok := newSession(t, c, nodes[1].addr)
			changed := make(chan struct{}, 8)
			cs := mcpClient(t, c, lb.url, tok, mode.version, &mcp.ClientOptions{
				ToolListChangedHandler: func(context.Context, *mcp.ToolListChangedRequest) { changed <- struct{}{} }})
			tools, err := cs.ListTools(context.Background(), nil)
			if err != nil || len(tools.Tools) != 1 {
				t.Fatalf("tools/list: %v %v", tools, err)
			}
			name := tools.Tools[0].Name
			for i := 1; i <= 6; i++ {
				if got := bump(t, cs, name); got.Replica != "r2" || got.N != i {
					t.Fatalf("call %d: %+v, want r2 %d", i, got, i)
				}
			}
			// A change of the owner's registry reaches the client.
			nodes[1].app.mu.Lock()
			reg := nodes[1].app.sessions[tok].reg
			nodes[1].app.mu.Unlock()
			if _, err := reg.Register(surface.Component{Type: "extra", InstanceID: "x", Description: "Extra",
				Actions: map[string]surface.Capability{"poke": surface.Action(surface.ActionDef[surface.None, surface.None]{
					Description: "Pokes", Effect: surface.EffectLocalState,
					Execute: func(context.Context, *surface.Call, surface.None) (surface.None, error) { return surface.None{}, nil }})}}); err != nil {
				t.Fatal(err)
			}
			select {
			case <-changed:
			case <-time.After(30 * time.Second):
				t.Fatal("no tools/list_changed through the forwarded stream")
			}
			var forwarded uint64
			for _, n := range nodes {
				forwarded += n.dir.Stats().Forwarded
			}
			if forwarded == 0 {
				t.Fatal("no MCP request was forwarded")
			}
		})
	}
}
