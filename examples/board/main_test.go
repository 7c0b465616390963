package main

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"slices"
	"testing"
	"time"

	"github.com/agentsurface/agentsurface/surface"
	"github.com/agentsurface/agentsurface/webhost"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// waitFor bounds a wait for a condition; it is never what is waited for.
const waitFor = 30 * time.Second

var bg = context.Background()

// server is the board on an httptest server.
type server struct {
	h   *webhost.Host
	srv *httptest.Server
}

// serve serves the board; the Host closes before the server, which ends
// the pages' event streams.
func serve(t testing.TB, opts webhost.Options) *server {
	t.Helper()
	h, handler, err := newApp(opts)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(handler)
	t.Cleanup(func() {
		_ = h.Close()
		srv.Close()
	})
	return &server{h: h, srv: srv}
}

// session makes a session of user driven without a browser, its views
// mounted as if a page showed them.
func (sv *server) session(t testing.TB, user string) *webhost.Session {
	t.Helper()
	s, err := sv.h.NewSession(webhost.SessionOptions{User: user, KeepShown: true})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// bearer adds a bearer token to every request.
type bearer struct {
	token string
	next  http.RoundTripper
}

func (b bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.token)
	return b.next.RoundTrip(r)
}

// dial connects the go-sdk MCP client to the board's endpoint over HTTP
// with token, as `claude mcp add … --header "Authorization: Bearer …"`
// does.
func (sv *server) dial(t testing.TB, token string) *mcp.ClientSession {
	t.Helper()
	tr := &mcp.StreamableClientTransport{Endpoint: sv.srv.URL + "/mcp", MaxRetries: -1,
		HTTPClient: &http.Client{Transport: bearer{token, sv.srv.Client().Transport}}}
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "board-test-agent", Version: "1.0.0"}, nil).Connect(bg, tr, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cs.Close() })
	return cs
}

// tools lists the agent's tools, by capability id.
func tools(t testing.TB, cs *mcp.ClientSession) map[string]*mcp.Tool {
	t.Helper()
	res, err := cs.ListTools(bg, nil)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]*mcp.Tool{}
	for _, tool := range res.Tools {
		id, _ := tool.Meta["agentsurface/capabilityId"].(string)
		out[id] = tool
	}
	return out
}

// call lists the tools, as an agent does before it calls, then calls the
// tool of capabilityID with args (JSON) and returns the result envelope.
func call(t testing.TB, cs *mcp.ClientSession, capabilityID, args string) surface.Result {
	t.Helper()
	tool := tools(t, cs)[capabilityID]
	if tool == nil {
		t.Fatalf("no tool for %s", capabilityID)
	}
	res, err := cs.CallTool(bg, &mcp.CallToolParams{Name: tool.Name, Arguments: json.RawMessage(args)})
	if err != nil {
		t.Fatalf("%s: %v", capabilityID, err)
	}
	b, _ := json.Marshal(res.StructuredContent)
	var r surface.Result
	if err := json.Unmarshal(b, &r); err != nil {
		t.Fatalf("%s: %v: %s", capabilityID, err, b)
	}
	return r
}

// code is "ok" or the error code of r.
func code(r surface.Result) string {
	if r.Status == surface.StatusOK {
		return "ok"
	}
	if r.Error == nil {
		return "error without a code"
	}
	return string(r.Error.Code)
}

func requireCode(t testing.TB, r surface.Result, want string) {
	t.Helper()
	if got := code(r); got != want {
		t.Fatalf("got %s, want %s: %+v", got, want, r.Error)
	}
}

// read is the board as the agent reads it.
func read(t testing.TB, cs *mcp.ClientSession) boardState {
	t.Helper()
	r := call(t, cs, "view:kanban.board.read", `{}`)
	requireCode(t, r, "ok")
	var st boardState
	if err := json.Unmarshal([]byte(r.Output), &st); err != nil {
		t.Fatalf("%v: %s", err, r.Output)
	}
	return st
}

// column is the column of card id, "" when the board has no such card.
func (st boardState) column(id string) string {
	if i := slices.IndexFunc(st.Cards, func(c Card) bool { return c.ID == id }); i >= 0 {
		return st.Cards[i].Column
	}
	return ""
}

// eventually waits until cond holds.
func eventually(t testing.TB, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(waitFor); !cond(); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting until %s", what)
		}
	}
}
