package mcpsurface_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"testing/synctest"

	"github.com/agentsurface/agentsurface/mcpsurface"
	"github.com/agentsurface/agentsurface/surface"
	"github.com/agentsurface/agentsurface/surface/surfacetest"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// One default handler serves both protocol generations for the same
// user: a 2025-11-25 client through a stateful session, a 2026-07-28
// client session-less (it has no session id), both resolved to the same
// registry and consumer, so each sees what the other did; server/discover
// lists every revision the handler serves, the 2026-07-28 one included.
func TestHTTPOneHandlerBothGenerations(t *testing.T) {
	users := twoUsers(t)
	f := newHTTP(t, nil, users)
	older := f.mustClient(t, "tok-alice", v2025, nil)
	newer := f.mustClient(t, "tok-alice", v2026, nil)
	if older.ID() == "" || newer.ID() != "" {
		t.Fatalf("session ids %q (2025-11-25), %q (2026-07-28): want a session only for the older client", older.ID(), newer.ID())
	}
	if got, want := newer.InitializeResult().ProtocolVersion, v2026; got != want {
		t.Fatalf("the 2026 client negotiated %s", got)
	}
	if a, b := names(listTools(t, older)), names(listTools(t, newer)); a != b {
		t.Fatalf("the generations see different tools:\n%s\n%s", a, b)
	}
	requireOK(t, callTool(t, newer, "view_devices__table__selectRows", map[string]any{"ids": []string{"d2"}}, nil))
	env := callTool(t, older, "view_devices__table__readState", nil, nil)
	if string(env.Output) != `{"rows":["d1","d2"],"selected":["d2"]}` {
		t.Fatalf("the older client does not see the newer one's change: %s", env.Output)
	}
	// Both act as the resolver's consumer.
	for _, cs := range []*mcp.ClientSession{older, newer} {
		requireCode(t, callTool(t, cs, "view_devices__table__wipe", map[string]any{"ids": []string{cs.ID()}}, nil), surface.CodeConfirmationRequired)
	}
	for _, p := range users["tok-alice"].reg.Confirmations().Pending() {
		if p.ConsumerKey != "mcp-bridge:alice" {
			t.Fatalf("pending for %s", p.ConsumerKey)
		}
	}

	raw := rawClient{f.srv.Client(), f.srv.URL, "tok-alice"}
	status, _, msg, err := raw.postVersion(bg, "", v2026, `{"jsonrpc":"2.0","id":1,"method":"server/discover","params":{"_meta":`+meta2026+`}}`)
	if err != nil || status != http.StatusOK {
		t.Fatalf("discover: %d %v", status, err)
	}
	var disc mcp.DiscoverResult
	resp, _ := msg.(*jsonrpc.Response)
	if resp == nil || resp.Error != nil || json.Unmarshal(resp.Result, &disc) != nil {
		t.Fatalf("discover: %+v", msg)
	}
	if !slices.Equal(disc.SupportedVersions, mcp.SupportedProtocolVersions()) {
		t.Fatalf("discover lists %v, want every version served: %v", disc.SupportedVersions, mcp.SupportedProtocolVersions())
	}
	if disc.Capabilities == nil || disc.Capabilities.Tools == nil || !disc.Capabilities.Tools.ListChanged {
		t.Fatalf("capabilities %+v", disc.Capabilities)
	}
}

// Every result whose content depends on the consumer is private: a
// shared cache must not serve one user's tool list to another. Lists are
// in a deterministic order (by name), the same on every request.
func TestHTTPResultsPrivateAndOrdered(t *testing.T) {
	users := twoUsers(t)
	reg := users["tok-alice"].reg
	surfacetest.MustRegister(t, reg, users["tok-alice"].app.domainPanel())
	f := newHTTP(t, nil, users)
	raw := rawClient{f.srv.Client(), f.srv.URL, "tok-alice"}
	call := func(method string) map[string]json.RawMessage {
		t.Helper()
		status, _, msg, err := raw.postVersion(bg, "", v2026, fmt.Sprintf(`{"jsonrpc":"2.0","id":1,"method":%q,"params":{"_meta":%s}}`, method, meta2026))
		resp, _ := msg.(*jsonrpc.Response)
		if err != nil || status != http.StatusOK || resp == nil || resp.Error != nil {
			t.Fatalf("%s: %d %v %+v", method, status, err, msg)
		}
		var m map[string]json.RawMessage
		if err := json.Unmarshal(resp.Result, &m); err != nil {
			t.Fatal(err)
		}
		return m
	}
	var first []byte
	for i := range 3 {
		m := call("tools/list")
		if scope := string(m["cacheScope"]); scope != `"private"` {
			t.Fatalf("tools/list cacheScope %s, want private", scope)
		}
		var list struct {
			Tools []struct{ Name string } `json:"tools"`
		}
		_ = json.Unmarshal(m["tools"], &list.Tools)
		if !slices.IsSortedFunc(list.Tools, func(a, b struct{ Name string }) int { return strings.Compare(a.Name, b.Name) }) || len(list.Tools) != 9 {
			t.Fatalf("tools not in name order: %s", m["tools"])
		}
		if i == 0 {
			first = m["tools"]
		} else if !bytes.Equal(first, m["tools"]) {
			t.Fatalf("tools/list %d differs from the first", i)
		}
	}
	if scope := string(call("server/discover")["cacheScope"]); scope != `"private"` {
		t.Fatalf("server/discover cacheScope %s, want private", scope)
	}
}

// listens records the status of every subscriptions/listen request.
type listens struct {
	next http.RoundTripper
	mu   sync.Mutex
	got  []int
}

func (l *listens) RoundTrip(r *http.Request) (*http.Response, error) {
	resp, err := l.next.RoundTrip(r)
	if err == nil && r.Header.Get("Mcp-Method") == "subscriptions/listen" {
		l.mu.Lock()
		l.got = append(l.got, resp.StatusCode)
		l.mu.Unlock()
	}
	return resp, err
}

func (l *listens) last() (n int, status int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.got) == 0 {
		return 0, 0
	}
	return len(l.got), l.got[len(l.got)-1]
}

// A 2026-07-28 client's subscriptions/listen streams are never idle: they
// are capped per consumer at MaxSessions, and one more is refused (429)
// until a stream closes; other users and requests without a stream are
// not affected.
func TestHTTPListenStreamsCapped(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const limit = 2
		f := &httpFixture{sessions: twoUsers(t)}
		f.h = mcpsurface.NewHTTPHandler(f.resolver(), &mcpsurface.HTTPOptions{MaxSessions: limit})
		p := servePipe(f.h)
		defer p.stop()
		defer f.h.Close()
		rec := &listens{next: p.tr}
		opts := &mcp.ClientOptions{ToolListChangedHandler: func(context.Context, *mcp.ToolListChangedRequest) {}}
		dial := func(token string, opts *mcp.ClientOptions) *mcp.ClientSession {
			tr := &mcp.StreamableClientTransport{Endpoint: "http://pipe/mcp", MaxRetries: -1,
				HTTPClient: &http.Client{Transport: bearer{token, rec}}}
			cs, err := mcp.NewClient(&mcp.Implementation{Name: "listener", Version: "1"}, opts).
				Connect(bg, tr, &mcp.ClientSessionOptions{ProtocolVersion: v2026})
			if err != nil {
				t.Fatal(err)
			}
			synctest.Wait()
			return cs
		}
		var open []*mcp.ClientSession
		for i := range limit {
			open = append(open, dial("tok-alice", opts))
			if n, status := rec.last(); n != i+1 || status != http.StatusOK {
				t.Fatalf("listen %d: %d", i+1, status)
			}
		}
		over := dial("tok-alice", opts)
		if _, status := rec.last(); status != http.StatusTooManyRequests {
			t.Fatalf("a listen stream beyond MaxSessions: %d", status)
		}
		_ = over.Close()
		// The refusal answers the request: a JSON-RPC error with its id.
		raw := rawClient{p.client, "http://pipe/mcp", "tok-alice"}
		status, _, msg, err := raw.postVersion(bg, "", v2026,
			`{"jsonrpc":"2.0","id":7,"method":"subscriptions/listen","params":{"notifications":{"toolsListChanged":true},"_meta":`+meta2026+`}}`)
		resp, _ := msg.(*jsonrpc.Response)
		var wire *jsonrpc.Error
		if err != nil || status != http.StatusTooManyRequests || resp == nil || !errors.As(resp.Error, &wire) ||
			wire.Code != mcpsurface.CodeTooManySessions || resp.ID.Raw() != int64(7) {
			t.Fatalf("a refused listen: %d %v %+v", status, err, msg)
		}
		plain := dial("tok-alice", nil) // no stream: not refused
		listTools(t, plain)
		_ = plain.Close()
		bob := dial("tok-bob", opts)
		if _, status := rec.last(); status != http.StatusOK {
			t.Fatalf("another user's stream: %d", status)
		}
		_ = bob.Close()
		_ = open[0].Close()
		synctest.Wait() // the stream has ended on the server
		again := dial("tok-alice", opts)
		if _, status := rec.last(); status != http.StatusOK {
			t.Fatalf("a closed stream made no room: %d", status)
		}
		for _, cs := range []*mcp.ClientSession{again, open[1]} {
			_ = cs.Close()
		}
	})
}

// Bad input is refused on every path, the same as before both
// generations shared the handler: an unknown token gets 401 before the
// SDK (no session is opened, no server created); a body over
// MaxRequestBodyBytes gets 413, declared length or not; malformed JSON-RPC
// gets 400; and none of them leaves a session behind.
func TestHTTPBadInputOnEveryPath(t *testing.T) {
	users := twoUsers(t)
	f := newHTTP(t, &mcpsurface.HTTPOptions{MaxRequestBodyBytes: 4 << 10}, users)
	alice := rawClient{f.srv.Client(), f.srv.URL, "tok-alice"}
	sid := alice.open(t)
	big := `{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{"_meta":` + meta2026 + `,"x":"` + strings.Repeat("a", 8<<10) + `"}}`
	bigInit := rawInit[:len(rawInit)-1] + `,"x":"` + strings.Repeat("a", 8<<10) + `"}`
	paths := []struct {
		name, sid, version string
	}{
		{"stateful session", sid, v2025},
		{"new session", "", ""},
		{"2026-07-28", "", v2026},
	}
	for _, p := range paths {
		for _, c := range []struct {
			what, token, body string
			want              int
		}{
			{"unknown token", "tok-mallory", `{"jsonrpc":"2.0","id":1,"method":"tools/list"}`, http.StatusUnauthorized},
			{"too large", "tok-alice", map[bool]string{true: bigInit, false: big}[p.name == "new session"], http.StatusRequestEntityTooLarge},
			{"malformed", "tok-alice", `{"jsonrpc":"2.0","id":1,"method":`, http.StatusBadRequest},
		} {
			before := f.resolves.Load()
			status, gotSID, _, err := rawClient{f.srv.Client(), f.srv.URL, c.token}.postVersion(bg, p.sid, p.version, c.body)
			if err != nil || status != c.want || gotSID != "" {
				t.Errorf("%s, %s: %d %q %v, want %d", p.name, c.what, status, gotSID, err, c.want)
			}
			if f.resolves.Load() == before {
				t.Errorf("%s, %s: the resolver was not asked", p.name, c.what)
			}
		}
	}
	if n := mcpsurface.OpenSessions(f.h); n != 1 {
		t.Fatalf("%d sessions open, want Alice's one", n)
	}
	if n := mcpsurface.CachedServers(f.h); n != 1 {
		t.Fatalf("%d servers cached: an unknown token made one", n)
	}
}
