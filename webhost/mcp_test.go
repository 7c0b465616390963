package webhost_test

import (
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"testing"

	"github.com/agentsurface/agentsurface/mcpsurface"
	"github.com/agentsurface/agentsurface/surface"
	"github.com/agentsurface/agentsurface/webhost"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Agents of both protocol generations reach the session their token
// names over real HTTP with the go-sdk client: they list the page's
// tools, read, act, and see the page's navigation as a changed list; the
// page sees what they did in its live fragments. AS-LIFE-001 (tools live
// while mounted), AS-ADAPTER-002 (envelopes relayed).
func TestMCPBothGenerations(t *testing.T) {
	a := newApp(t, webhost.Options{})
	for _, version := range []string{stateful, sessionless} {
		t.Run(version, func(t *testing.T) {
			b := a.browser(t)
			s := b.page()
			tab := b.open(false, "notes", "count", "detail")
			tab.await(t, "count", func(h string) bool { return strings.HasPrefix(h, "0 notes") })
			cs := a.dial(t, s.Token(), version)
			requireCode(t, callTool(t, cs, "view:notes.board.add", `{"text":"from `+version+`"}`, nil), "ok")
			var notes []string
			res := callTool(t, cs, "view:notes.board.read", "", nil)
			requireCode(t, res, "ok")
			if err := json.Unmarshal([]byte(res.Output), &notes); err != nil || !slices.Equal(notes, []string{"from " + version}) {
				t.Fatalf("read %s: %v", res.Output, err)
			}
			tab.await(t, "notes", func(h string) bool { return h == "<li>from "+version+"</li>" })
			tab.await(t, "count", func(h string) bool { return strings.HasPrefix(h, "1 notes") })

			// Navigation: the detail panel mounts; the agent's list follows.
			requireCode(t, callTool(t, cs, "view:notes.board.open", `{"index":0}`, nil), "ok")
			tab.await(t, "detail", func(h string) bool { return h == "open=true" })
			requireCode(t, callTool(t, cs, "view:notes.detail.readNote", "", nil), "ok")
		})
	}
}

// A missing, wrong or revoked token gets 401 and learns nothing; an
// ended session's token is revoked at once.
func TestMCPTokens(t *testing.T) {
	a := newApp(t, webhost.Options{})
	s := a.session(t)
	post := func(auth string) (int, string, http.Header) {
		req, _ := http.NewRequest(http.MethodPost, a.srv.URL+"/mcp", strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`))
		if auth != "" {
			req.Header.Set("Authorization", auth)
		}
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		res, err := a.srv.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		body, _ := io.ReadAll(res.Body)
		return res.StatusCode, string(body), res.Header
	}
	var bodies []string
	for _, auth := range []string{"", "Bearer ", "Bearer wrong", "Basic " + s.Token(), "Bearer " + s.Token() + "x", "Bearer " + s.JoinPath()} {
		code, body, h := post(auth)
		if code != http.StatusUnauthorized || h.Get("WWW-Authenticate") == "" {
			t.Fatalf("%q: %d", auth, code)
		}
		bodies = append(bodies, body)
	}
	for _, b := range bodies {
		if b != bodies[0] {
			t.Fatalf("401 bodies differ: %q vs %q", b, bodies[0])
		}
	}
	if code, _, _ := post("Bearer " + s.Token()); code != http.StatusOK {
		t.Fatalf("the right token: %d", code)
	}
	s.Close()
	if code, body, _ := post("Bearer " + s.Token()); code != http.StatusUnauthorized || body != bodies[0] {
		t.Fatalf("a revoked token: %d %q", code, body)
	}
}

// An agent's call that needs approval waits for the user, who decides in
// the page: the approvals card shows the exact input; Approve lets the
// agent's retry (the same call again) execute once; the decision shows
// what became of the call. A denial executes nothing. AS-CONFIRM-003
// (single use), AS-CONFIRM-006 (denial final).
func TestApprovalInThePage(t *testing.T) {
	a := newApp(t, webhost.Options{})
	b := a.browser(t)
	s := b.page()
	tab := b.open(false, "notes", webhost.ApprovalsID)
	cs := a.dial(t, s.Token(), sessionless)
	requireCode(t, callTool(t, cs, "view:notes.board.add", `{"text":"keep me"}`, nil), "ok")

	requireCode(t, callTool(t, cs, "view:notes.board.clear", "", nil), string(surface.CodeConfirmationRequired))
	p := awaitPending(t, s)
	card := tab.await(t, webhost.ApprovalsID, func(h string) bool { return strings.Contains(h, p.ConfirmationID) })
	for _, want := range []string{"view:notes.board.clear", "mcp-bridge:agent", `name="decision" value="approve"`, "expires", "Exact input"} {
		if !strings.Contains(card, want) {
			t.Fatalf("the card lacks %q: %s", want, card)
		}
	}
	if code, msg := b.post("/agentsurface/decide", url.Values{"id": {p.ConfirmationID}, "decision": {"approve"}}); code != http.StatusNoContent {
		t.Fatalf("approve: %d %s", code, msg)
	}
	tab.await(t, webhost.ApprovalsID, func(h string) bool { return strings.Contains(h, "approved by anonymous (page)") })
	requireCode(t, callTool(t, cs, "view:notes.board.clear", "", nil), "ok")
	tab.await(t, "notes", func(h string) bool { return h == "" })
	tab.await(t, webhost.ApprovalsID, func(h string) bool { return strings.Contains(h, "done") })
	ds := s.Decisions()
	if len(ds) != 1 || ds[0].Outcome != surface.OutcomeApproved || ds[0].Call == nil || !ds[0].Call.Settled ||
		ds[0].Call.Status != surface.StatusOK || !ds[0].Call.Executed || ds[0].Actor != "anonymous (page)" {
		t.Fatalf("decisions %+v (call %+v)", ds, ds[0].Call)
	}
	// The approval is spent: presenting it again executes nothing.
	boardOf(s).add("again")
	// (mcpsurface replays the first call's settled result for it, or the
	// registry refuses the spent evidence: either way nothing runs.)
	callTool(t, cs, "view:notes.board.clear", "", mcp.Meta{mcpsurface.MetaConfirmationID: p.ConfirmationID})
	if !slices.Equal(boardOf(s).list(), []string{"again"}) {
		t.Fatalf("a spent approval executed again: notes %v", boardOf(s).list())
	}

	// A denial: nothing runs, and the agent learns it was denied.
	requireCode(t, callTool(t, cs, "view:notes.board.clear", "", nil), string(surface.CodeConfirmationRequired))
	p2 := awaitPending(t, s)
	if _, ok := s.Decide(p2.ConfirmationID, false, "olivia"); !ok {
		t.Fatal("deny")
	}
	res := callTool(t, cs, "view:notes.board.clear", "", nil)
	if res.Status == surface.StatusOK || res.Error.Code != surface.CodeConfirmationInvalid {
		t.Fatalf("after a denial: %+v", res)
	}
	if !slices.Equal(boardOf(s).list(), []string{"again"}) {
		t.Fatalf("notes %v", boardOf(s).list())
	}
	tab.await(t, webhost.ApprovalsID, func(h string) bool { return strings.Contains(h, "denied by olivia") })
}
