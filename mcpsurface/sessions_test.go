package mcpsurface_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/agentsurface/agentsurface/mcpsurface"
	"github.com/agentsurface/agentsurface/surface"
	"github.com/agentsurface/agentsurface/surface/surfacetest"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
)

// rawClient speaks Streamable HTTP by hand, as a client that can leave
// without DELETE or drop a request mid-call: it starts no goroutine.
type rawClient struct {
	http  *http.Client
	url   string
	token string
}

// post sends one JSON-RPC message and returns the status, the session id
// header and the JSON-RPC message of the response (from JSON or the SSE
// stream), if any.
func (c rawClient) post(ctx context.Context, sid, body string) (status int, sessionID string, msg jsonrpc.Message, err error) {
	version := ""
	if sid != "" {
		version = v2025
	}
	return c.postVersion(ctx, sid, version, body)
}

// postVersion is post with an MCP-Protocol-Version header (none if "").
func (c rawClient) postVersion(ctx context.Context, sid, version, body string) (status int, sessionID string, msg jsonrpc.Message, err error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.url, strings.NewReader(body))
	if err != nil {
		return 0, "", nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Authorization", "Bearer "+c.token)
	if sid != "" {
		req.Header.Set("Mcp-Session-Id", sid)
	}
	if version != "" {
		req.Header.Set("Mcp-Protocol-Version", version)
	}
	if version >= v2026 { // 2026-07-28 requests name their method (and tool) in headers too
		var m struct {
			Method string `json:"method"`
			Params struct {
				Name string `json:"name"`
			} `json:"params"`
		}
		_ = json.Unmarshal([]byte(body), &m)
		req.Header.Set("Mcp-Method", m.Method)
		if m.Method == "tools/call" {
			req.Header.Set("Mcp-Name", m.Params.Name)
		}
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return 0, "", nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return resp.StatusCode, "", nil, err
	}
	if strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		sc := bufio.NewScanner(bytes.NewReader(b))
		sc.Buffer(nil, 1<<20)
		for sc.Scan() {
			if data, ok := strings.CutPrefix(sc.Text(), "data: "); ok {
				b = []byte(data)
			}
		}
	}
	if len(bytes.TrimSpace(b)) > 0 {
		msg, _ = jsonrpc.DecodeMessage(b)
	}
	return resp.StatusCode, resp.Header.Get("Mcp-Session-Id"), msg, nil
}

const rawInit = `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"` + v2025 + `","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}`

// open initializes a stateful session and returns its id.
func (c rawClient) open(t testing.TB) string {
	t.Helper()
	status, sid, msg, err := c.post(bg, "", rawInit)
	if err != nil || status != http.StatusOK || sid == "" {
		t.Fatalf("initialize: %d %v %+v", status, err, msg)
	}
	if status, _, _, err := c.post(bg, sid, `{"jsonrpc":"2.0","method":"notifications/initialized"}`); err != nil || status != http.StatusAccepted {
		t.Fatalf("initialized: %d %v", status, err)
	}
	return sid
}

// call sends tools/call and returns the HTTP status and the response.
func (c rawClient) call(ctx context.Context, sid string, id int, tool, args string) (int, *jsonrpc.Response, error) {
	status, _, msg, err := c.post(ctx, sid, fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":%q,"arguments":%s}}`, id, tool, args))
	resp, _ := msg.(*jsonrpc.Response)
	return status, resp, err
}

// An abandoned stateful session (no DELETE) is closed after
// DefaultSessionTimeout (30 minutes) without requests, not kept forever;
// every request restarts that clock.
func TestHTTPAbandonedSessionTimesOutByDefault(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := &httpFixture{sessions: twoUsers(t)}
		f.h = mcpsurface.NewHTTPHandler(f.resolver(), nil)
		p := servePipe(f.h)
		defer p.stop()
		defer f.h.Close()
		alice := rawClient{p.client, "http://pipe/mcp", "tok-alice"}
		sid := alice.open(t)
		if status, resp, err := alice.call(bg, sid, 2, "view_devices__table__readState", `{}`); err != nil || status != http.StatusOK || resp == nil || resp.Error != nil {
			t.Fatalf("%d %v %+v", status, err, resp)
		}
		time.Sleep(mcpsurface.DefaultSessionTimeout - time.Second)
		synctest.Wait()
		if status, _, err := alice.call(bg, sid, 3, "view_devices__table__readState", `{}`); err != nil || status != http.StatusOK {
			t.Fatalf("the session closed before its timeout: %d %v", status, err)
		}
		time.Sleep(mcpsurface.DefaultSessionTimeout)
		synctest.Wait()
		if status, _, err := alice.call(bg, sid, 4, "view_devices__table__readState", `{}`); err != nil || status != http.StatusNotFound {
			t.Fatalf("the abandoned session is still served: %d %v", status, err)
		}
		if n := mcpsurface.OpenSessions(f.h); n != 0 {
			t.Fatalf("%d sessions open", n)
		}
	})
}

// stream opens the standalone SSE stream (GET) of session sid and
// returns once the server has answered its headers; stop ends it.
func (c rawClient) stream(t testing.TB, sid string) (stop func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(bg)
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, c.url, nil)
	req.Header.Set("Accept", "text/event-stream")
	req.Header.Set("Authorization", "Bearer "+c.token)
	req.Header.Set("Mcp-Session-Id", sid)
	req.Header.Set("Mcp-Protocol-Version", v2025)
	resp, err := c.http.Do(req)
	if err != nil || resp.StatusCode != http.StatusOK {
		cancel()
		t.Fatalf("GET stream: %v %v", resp, err)
	}
	return func() {
		cancel()
		resp.Body.Close()
	}
}

// listTools sends tools/list on session sid and returns the HTTP status.
func (c rawClient) listTools(t testing.TB, sid string) int {
	t.Helper()
	status, _, _, err := c.post(bg, sid, `{"jsonrpc":"2.0","id":5,"method":"tools/list"}`)
	if err != nil {
		t.Fatal(err)
	}
	return status
}

// Abandoned sessions never lock a credential out: clients that leave
// without DELETE (as the conformance suite and crashed clients do) fill
// MaxSessions, and a new initialize closes the session idle the longest
// instead of being refused. 34 initializes without DELETE against the
// default cap of 32 all succeed; the two oldest sessions are gone (404),
// the 32 others still work.
func TestHTTPAbandonedSessionsNeverLockOut(t *testing.T) {
	f := newHTTP(t, nil, twoUsers(t))
	alice := rawClient{f.srv.Client(), f.srv.URL, "tok-alice"}
	const n = mcpsurface.DefaultMaxSessions + 2
	var sids []string
	for i := range n {
		status, sid, msg, err := alice.post(bg, "", rawInit)
		if err != nil || status != http.StatusOK || sid == "" {
			t.Fatalf("initialize %d of %d: %d %q %v %+v", i+1, n, status, sid, err, msg)
		}
		sids = append(sids, sid)
	}
	for i, sid := range sids {
		want := http.StatusOK
		if i < n-mcpsurface.DefaultMaxSessions {
			want = http.StatusNotFound // reclaimed
		}
		if got := alice.listTools(t, sid); got != want {
			t.Errorf("session %d: %d, want %d", i+1, got, want)
		}
	}
	if open := mcpsurface.OpenSessions(f.h); open != mcpsurface.DefaultMaxSessions {
		t.Fatalf("%d sessions open, want %d", open, mcpsurface.DefaultMaxSessions)
	}
}

// Reclaim takes the session idle the longest (a request counts as use),
// never one with a request in progress or an open stream: with every
// session busy, opening one more is answered 429 with a JSON-RPC error a
// client can read. Other users are not affected, and a session that turns
// idle (its stream closed) makes room again.
func TestHTTPBusySessionsCapped(t *testing.T) {
	const limit = 3
	f := newHTTP(t, &mcpsurface.HTTPOptions{MaxSessions: limit}, twoUsers(t))
	gate := make(chan struct{})
	entered := make(chan struct{})
	users := f.sessions
	surfacetest.MustRegister(t, users["tok-alice"].reg, surface.Component{Type: "gate", Description: "Gate",
		Observations: map[string]surface.Capability{"wait": surface.Observation(surface.ObservationDef[string]{
			Description: "Waits for the gate",
			Read: func(ctx context.Context, _ *surface.Call) (string, error) {
				close(entered)
				select {
				case <-gate:
				case <-ctx.Done():
				}
				return "open", nil
			},
		})}})
	alice := rawClient{f.srv.Client(), f.srv.URL, "tok-alice"}
	var sids []string
	for range limit {
		sids = append(sids, alice.open(t))
	}
	// sids[0] is used again: sids[1] is now the session idle the longest.
	if alice.listTools(t, sids[0]) != http.StatusOK {
		t.Fatal("tools/list")
	}
	fourth := alice.open(t)
	if alice.listTools(t, sids[1]) != http.StatusNotFound {
		t.Fatal("the session idle the longest was not the one reclaimed")
	}
	sids = []string{sids[0], sids[2], fourth}
	for _, sid := range sids {
		if alice.listTools(t, sid) != http.StatusOK {
			t.Fatalf("session %s was reclaimed", sid)
		}
	}

	// Every session busy: two hold their stream, one a call in progress.
	stop0 := alice.stream(t, sids[0])
	defer stop0()
	stop1 := alice.stream(t, sids[1])
	defer stop1()
	done := make(chan int, 1)
	go func() {
		status, _, _ := alice.call(bg, sids[2], 9, "view_gate__wait", `{}`)
		done <- status
	}()
	select {
	case <-entered:
	case s := <-done:
		t.Fatalf("the call returned %d without waiting", s)
	}

	status, sid, msg, err := alice.post(bg, "", rawInit)
	if err != nil || status != http.StatusTooManyRequests || sid != "" {
		t.Fatalf("beyond %d busy sessions: %d %q %v", limit, status, sid, err)
	}
	resp, ok := msg.(*jsonrpc.Response)
	if !ok || resp.Error == nil {
		t.Fatalf("no JSON-RPC error: %+v", msg)
	}
	var wire *jsonrpc.Error
	if !errors.As(resp.Error, &wire) || wire.Code != mcpsurface.CodeTooManySessions ||
		!strings.Contains(wire.Message, fmt.Sprintf("limit is %d", limit)) || resp.ID.Raw() != int64(1) {
		t.Fatalf("error %+v id %v", resp.Error, resp.ID)
	}
	if _, err := f.client(t, "tok-alice", v2025, nil); err == nil || !strings.Contains(err.Error(), "Too Many Requests") {
		t.Fatalf("an SDK client opened one more session: %v", err)
	}
	// Another user is not affected, and a 2026-07-28 client of the same
	// user opens no session at all.
	bob := f.mustClient(t, "tok-bob", v2025, nil)
	listTools(t, bob)
	listTools(t, f.mustClient(t, "tok-alice", v2026, nil))

	// The call ends: its session is idle again, and makes room.
	close(gate)
	if s := <-done; s != http.StatusOK {
		t.Fatalf("the call: %d", s)
	}
	alice.open(t)
	if alice.listTools(t, sids[2]) != http.StatusNotFound {
		t.Fatal("the idle session was not reclaimed")
	}
	for _, sid := range sids[:2] {
		if alice.listTools(t, sid) != http.StatusOK {
			t.Fatal("a session with an open stream was reclaimed")
		}
	}
}

// The Server of a (registry, consumer) whose sessions all went away
// without DELETE is closed after IdleTimeout even if no request ever
// comes again.
func TestHTTPAbandonedServerFreedWithoutRequests(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := &httpFixture{sessions: twoUsers(t)}
		f.h = mcpsurface.NewHTTPHandler(f.resolver(), &mcpsurface.HTTPOptions{SessionTimeout: time.Minute, IdleTimeout: 2 * time.Minute})
		p := servePipe(f.h)
		defer p.stop()
		defer f.h.Close()
		for _, tok := range []string{"tok-alice", "tok-bob"} {
			rawClient{p.client, "http://pipe/mcp", tok}.open(t)
		}
		if n := mcpsurface.CachedServers(f.h); n != 2 {
			t.Fatalf("%d servers", n)
		}
		time.Sleep(4 * time.Minute)
		synctest.Wait()
		if s, n := mcpsurface.OpenSessions(f.h), mcpsurface.CachedServers(f.h); s != 0 || n != 0 {
			t.Fatalf("%d sessions, %d servers still held", s, n)
		}
	})
}
