package mcpsurface_test

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/agentsurface/agentsurface/mcpsurface"
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
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.url, strings.NewReader(body))
	if err != nil {
		return 0, "", nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Authorization", "Bearer "+c.token)
	if sid != "" {
		req.Header.Set("Mcp-Session-Id", sid)
		req.Header.Set("Mcp-Protocol-Version", v2025)
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

// One credential cannot open sessions without bound: beyond MaxSessions
// (default DefaultMaxSessions) per (registry, consumer), opening one is
// answered 429 with a JSON-RPC error a client can read; other users are
// not affected, and a DELETE frees a slot.
func TestHTTPSessionsCappedPerConsumer(t *testing.T) {
	for _, limit := range []int{0, 3} {
		t.Run(fmt.Sprint("MaxSessions=", limit), func(t *testing.T) {
			f := newHTTP(t, &mcpsurface.HTTPOptions{MaxSessions: limit}, twoUsers(t))
			want := limit
			if limit == 0 {
				want = mcpsurface.DefaultMaxSessions
			}
			alice := rawClient{f.srv.Client(), f.srv.URL, "tok-alice"}
			var sids []string
			for range want {
				sids = append(sids, alice.open(t))
			}
			status, sid, msg, err := alice.post(bg, "", rawInit)
			if err != nil || status != http.StatusTooManyRequests || sid != "" {
				t.Fatalf("session %d: %d %q %v", want+1, status, sid, err)
			}
			resp, ok := msg.(*jsonrpc.Response)
			if !ok || resp.Error == nil {
				t.Fatalf("no JSON-RPC error: %+v", msg)
			}
			var wire *jsonrpc.Error
			if !errors.As(resp.Error, &wire) || wire.Code != mcpsurface.CodeTooManySessions ||
				!strings.Contains(wire.Message, fmt.Sprintf("limit is %d", want)) || resp.ID.Raw() != int64(1) {
				t.Fatalf("error %+v id %v", resp.Error, resp.ID)
			}
			if _, err := f.client(t, "tok-alice", v2025, nil); err == nil || !strings.Contains(err.Error(), "Too Many Requests") {
				t.Fatalf("an SDK client opened one more session: %v", err)
			}
			// Another user is not affected.
			bob := f.mustClient(t, "tok-bob", v2025, nil)
			listTools(t, bob)
			// A DELETE frees a slot.
			req, _ := http.NewRequest(http.MethodDelete, f.srv.URL, nil)
			req.Header.Set("Authorization", "Bearer tok-alice")
			req.Header.Set("Mcp-Session-Id", sids[0])
			dr, err := f.srv.Client().Do(req)
			if err != nil || dr.StatusCode != http.StatusNoContent {
				t.Fatalf("DELETE: %v %v", dr, err)
			}
			dr.Body.Close()
			alice.open(t)
		})
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
