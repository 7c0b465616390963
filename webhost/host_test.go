package webhost_test

import (
	"bufio"
	"context"
	"errors"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/agentsurface/agentsurface/mcpsurface"
	"github.com/agentsurface/agentsurface/surface"
	"github.com/agentsurface/agentsurface/webhost"
	"github.com/modelcontextprotocol/go-sdk/auth"
)

// verifyToken stands for an authorization server's token verification.
func verifyToken(_ context.Context, token string, _ *http.Request) (*auth.TokenInfo, error) {
	users := map[string]string{"token-of-ann": "ann", "token-of-bob": "bob"}
	user, ok := users[token]
	if !ok {
		return nil, auth.ErrInvalidToken
	}
	return &auth.TokenInfo{UserID: user, Expiration: time.Now().Add(time.Hour)}, nil
}

// Behind OAuth, an agent acts on a session of its verified user, never
// another user's: the session the user paired last, or the one its
// request names by token if it is the user's own; a user without one
// gets 403, a request without a valid token 401. Pairing another session
// moves the agent. AS-POLICY-003 (the consumer's view is per consumer:
// the agent acts as its user).
func TestMCPOAuthPairing(t *testing.T) {
	a := newApp(t, webhost.Options{
		User: func(r *http.Request) (string, error) { return r.Header.Get("X-User"), nil },
		MCP:  webhost.MCPOptions{OAuth: &webhost.OAuthOptions{Verify: verifyToken, ResourceMetadataURL: "https://app.example/.well-known/oauth-protected-resource"}},
	})
	newUserSession := func(user, note string) *webhost.Session {
		s, err := a.h.NewSession(webhost.SessionOptions{User: user, KeepShown: true})
		if err != nil {
			t.Fatal(err)
		}
		boardOf(s).add(note)
		return s
	}
	home, work, bobs := newUserSession("ann", "home"), newUserSession("ann", "work"), newUserSession("bob", "bob's")
	read := func(token string, hdr http.Header) (string, error) {
		cs, err := a.tryDial(token, sessionless, hdr)
		if err != nil {
			return "", err
		}
		defer cs.Close()
		res := callTool(t, cs, "view:notes.board.read", "", nil)
		return string(res.Output), nil
	}
	status := func(token string, hdr http.Header) int {
		req, _ := http.NewRequest(http.MethodPost, a.srv.URL+"/mcp", strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28"}}}`))
		req.Header.Set("Authorization", "Bearer "+token)
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		req.Header.Set("Mcp-Protocol-Version", "2026-07-28")
		for k, v := range hdr {
			req.Header[k] = v
		}
		res, err := a.srv.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		return res.StatusCode
	}
	if code := status("token-of-ann", nil); code != http.StatusForbidden {
		t.Fatalf("ann has paired nothing: %d", code)
	}
	if code := status(home.Token(), nil); code != http.StatusUnauthorized {
		t.Fatalf("a session token is no OAuth token: %d", code)
	}
	work.PairAgent()
	if out, err := read("token-of-ann", nil); err != nil || out != `["work"]` {
		t.Fatalf("ann's agent: %s %v", out, err)
	}
	pair := http.Header{"Mcp-Pairing-Token": {home.Token()}}
	if out, err := read("token-of-ann", pair); err != nil || out != `["home"]` {
		t.Fatalf("ann's agent naming her home page: %s %v", out, err)
	}
	if code := status("token-of-bob", nil); code != http.StatusForbidden {
		t.Fatalf("bob has paired nothing: %d", code)
	}
	if code := status("token-of-bob", pair); code != http.StatusForbidden {
		t.Fatalf("bob naming ann's session: %d", code)
	}
	bobs.PairAgent()
	if out, err := read("token-of-bob", nil); err != nil || out != `["bob's"]` {
		t.Fatalf("bob's agent: %s %v", out, err)
	}
	home.PairAgent()
	if out, err := read("token-of-ann", nil); err != nil || out != `["home"]` {
		t.Fatalf("after pairing home: %s %v", out, err)
	}
	home.Close()
	if code := status("token-of-ann", nil); code != http.StatusForbidden {
		t.Fatalf("the paired session ended: %d", code)
	}
	if _, err := webhost.New(webhost.Options{NewViews: newBoard, MCP: webhost.MCPOptions{OAuth: &webhost.OAuthOptions{Verify: verifyToken}}}); err == nil {
		t.Fatal("OAuth without Options.User was accepted")
	}
}

// Liveness, readiness and draining: both probes answer 200; after Drain
// readiness fails and the Host still serves; after Close every request
// is answered 503, and Close ended the sessions.
func TestProbesAndDrain(t *testing.T) {
	a := newApp(t, webhost.Options{})
	s := a.session(t)
	b := a.joined(t, s)
	get := func(path string) int { return a.raw(t, "GET", path, "", nil, "").StatusCode }
	if get("/healthz") != http.StatusOK || get("/readyz") != http.StatusOK {
		t.Fatal("probes of a running Host")
	}
	a.h.Drain()
	if get("/healthz") != http.StatusOK || get("/readyz") != http.StatusServiceUnavailable {
		t.Fatal("probes of a draining Host")
	}
	tab := b.open(false, "notes")
	tab.next(t)
	_ = a.h.Close()
	if e := tab.ended(t); e.event != "ended" {
		t.Fatalf("the page's stream ended with %+v", e)
	}
	for _, path := range []string{"/healthz", "/readyz", "/", "/agentsurface/page.js"} {
		if code := get(path); code != http.StatusServiceUnavailable {
			t.Errorf("GET %s after Close: %d", path, code)
		}
	}
	select {
	case <-s.Done():
	default:
		t.Fatal("Close left a session open")
	}
	if _, err := a.h.NewSession(webhost.SessionOptions{}); !errors.Is(err, webhost.ErrClosed) {
		t.Fatalf("NewSession after Close: %v", err)
	}
}

// Host.Notify reaches every session's views that listen, once each.
func TestNotifyReachesViews(t *testing.T) {
	a := newApp(t, webhost.Options{})
	ss := []*webhost.Session{a.session(t), a.session(t), a.session(t)}
	a.h.Notify("notes")
	for _, s := range ss {
		b := boardOf(s)
		eventually(t, "the views were notified", func() bool {
			b.mu.Lock()
			defer b.mu.Unlock()
			return slices.Equal(b.notified, []string{"notes"})
		})
	}
}

// What became of an approval: the decision records the call that
// presented it, as the registry settled it — refused by a precondition
// (nothing ran, the approval still stands) and then executed on the
// next call; a request resolved outside the Host is recorded without an
// actor; one that expires says so. AS-CONFIRM-003, AS-CONFIRM-006.
func TestDecisionOutcomes(t *testing.T) {
	a := newApp(t, webhost.Options{})
	s := a.session(t)
	cs := a.dial(t, s.Token(), sessionless)
	b := boardOf(s)
	b.add("x")
	requireCode(t, callTool(t, cs, "view:notes.board.clear", "", nil), string(surface.CodeConfirmationRequired))
	p := awaitPending(t, s)
	s.Decide(p.ConfirmationID, true, "ann")
	// The precondition fails when the call comes.
	b.mu.Lock()
	b.blocked = true
	b.mu.Unlock()
	requireCode(t, callTool(t, cs, "view:notes.board.clear", "", mcpMeta(p.ConfirmationID)), string(surface.CodePreconditionFailed))
	d := s.Decisions()[0]
	if d.Call == nil || !d.Call.Settled || d.Call.Executed || d.Call.Code != surface.CodePreconditionFailed {
		t.Fatalf("the refused call: %+v", d.Call)
	}
	b.mu.Lock()
	b.blocked = false
	b.mu.Unlock()
	// The failed call is settled (and replayed for its invocation id): a
	// new call, with an id of its own, presents the approval again.
	retry := mcpMeta(p.ConfirmationID)
	retry[mcpsurface.MetaInvocationID] = "retry-1"
	requireCode(t, callTool(t, cs, "view:notes.board.clear", "", retry), "ok")
	if d := s.Decisions()[0]; d.Call == nil || !d.Call.Executed || d.Call.Status != surface.StatusOK || d.Call.InvocationID == "" {
		t.Fatalf("the executed call: %+v", d.Call)
	}

	// Resolved elsewhere: through the registry, by the application.
	b.add("z")
	clear := func() surface.Result {
		return s.Registry().Invoke(bg, surface.Invocation{CapabilityID: "view:notes.board.clear"}, surface.InvokeOptions{})
	}
	requireCode(t, clear(), string(surface.CodeConfirmationRequired))
	p2 := awaitPending(t, s)
	s.Registry().Confirmations().Resolve(p2.ConfirmationID, surface.Resolution{Approved: false, Actor: "a rule"})
	// Expired.
	requireCode(t, clear(), string(surface.CodeConfirmationRequired))
	p3 := awaitPending(t, s)
	s.Registry().Confirmations().Expire(p3.ConfirmationID)
	var got []string
	for _, d := range s.Decisions() {
		got = append(got, d.ConfirmationID+" "+string(d.Outcome)+" "+d.Actor)
	}
	want := []string{p.ConfirmationID + " approved ann", p2.ConfirmationID + " denied ", p3.ConfirmationID + " expired "}
	if !slices.Equal(got, want) {
		t.Fatalf("decisions\n got %q\nwant %q", got, want)
	}
	if _, ok := s.Decide(p3.ConfirmationID, true, "late"); ok {
		t.Fatal("an expired request was decided")
	}
	var html strings.Builder
	if err := s.RenderApprovals(&html); err != nil || !strings.Contains(html.String(), "expired before anyone decided") ||
		!strings.Contains(html.String(), "approved by ann → <strong class=\"result\">done</strong>") {
		t.Fatalf("the card: %v\n%s", err, html.String())
	}
}

// The page deciding a request of its own session that is no longer
// pending is told what became of it: approved or denied already (by
// whom), or expired; an id the session never had gets "There is no such
// approval request in this session." AS-CONFIRM-006 (a decision is
// final).
func TestDecideSaysWhatBecameOfTheRequest(t *testing.T) {
	a := newApp(t, webhost.Options{})
	br := a.browser(t)
	s := br.page()
	br.open(false)
	cs := a.dial(t, s.Token(), sessionless)
	boardOf(s).add("x")
	requireCode(t, callTool(t, cs, "view:notes.board.clear", "", nil), string(surface.CodeConfirmationRequired))
	p := awaitPending(t, s)
	decide := func(id, decision string) (int, string) {
		return br.post("/agentsurface/decide", url.Values{"id": {id}, "decision": {decision}})
	}
	if code, msg := decide(p.ConfirmationID, "deny"); code != http.StatusNoContent {
		t.Fatalf("deny: %d %s", code, msg)
	}
	if ds := s.Decisions(); len(ds) != 1 || ds[0].Channel != surface.ChannelPage {
		t.Fatalf("decisions %+v", ds)
	}
	if code, msg := decide(p.ConfirmationID, "approve"); code != http.StatusConflict || msg != "This request was denied already by anonymous (page)." {
		t.Fatalf("approving a denied request: %d %q", code, msg)
	}
	// Another consumer's request, which expires.
	requireCode(t, s.Registry().Invoke(bg, surface.Invocation{CapabilityID: "view:notes.board.clear"}, surface.InvokeOptions{}), string(surface.CodeConfirmationRequired))
	p2 := awaitPending(t, s)
	s.Registry().Confirmations().Expire(p2.ConfirmationID)
	eventually(t, "the expiry is recorded", func() bool { return len(s.Decisions()) == 2 })
	if code, msg := decide(p2.ConfirmationID, "approve"); code != http.StatusConflict || !strings.Contains(msg, "expired") {
		t.Fatalf("approving an expired request: %d %q", code, msg)
	}
	if code, msg := decide("cnf_nosuchthing1", "approve"); code != http.StatusNotFound || msg != "There is no such approval request in this session." {
		t.Fatalf("an unknown id: %d %q", code, msg)
	}
}

func mcpMeta(confirmationID string) map[string]any {
	return map[string]any{mcpsurface.MetaConfirmationID: confirmationID}
}

// Stats count what the Host holds and what it refused.
func TestStats(t *testing.T) {
	a := newApp(t, webhost.Options{})
	b := a.browser(t)
	b.page()
	b.open(false, "notes").next(t)
	a.browser(t).page()
	a.raw(t, "GET", "/", "evil.example", nil, "")
	a.raw(t, "POST", "/notes", "", http.Header{"Cookie": {"agentsurface_session=forged"}, "Sec-Fetch-Site": {"same-origin"}}, "text=x")
	st := a.h.Stats()
	if st.Sessions != 1 || st.UnusedSessions != 1 || st.Streams != 1 || st.ShownSessions != 2 || st.Refused.Host != 1 || st.Refused.Ended != 1 {
		t.Fatalf("%+v", st)
	}
}

// An open event stream gets a keep-alive comment every Heartbeat; one
// opened from another site is refused before it touches the session.
func TestStreamHeartbeatAndCrossSite(t *testing.T) {
	a := newApp(t, webhost.Options{Heartbeat: 20 * time.Millisecond})
	b := a.browser(t)
	b.page()
	req, _ := http.NewRequest(http.MethodGet, a.srv.URL+"/agentsurface/events", nil)
	req.Header.Set("Sec-Fetch-Site", "cross-site")
	if code, _ := b.do(req); code != http.StatusForbidden || a.h.Stats().Sessions != 0 {
		t.Fatalf("a cross-site stream: %d, %+v", code, a.h.Stats())
	}
	ctx, cancel := context.WithCancel(bg)
	defer cancel()
	req, _ = http.NewRequestWithContext(ctx, http.MethodGet, a.srv.URL+"/agentsurface/events", nil)
	res, err := b.client.Do(req)
	if err != nil || res.StatusCode != http.StatusOK {
		t.Fatalf("%v %v", res, err)
	}
	defer res.Body.Close()
	sc := bufio.NewScanner(res.Body)
	beats := 0
	for beats < 3 && sc.Scan() {
		if sc.Text() == ": heartbeat" {
			beats++
		}
	}
	if beats < 3 {
		t.Fatalf("%d heartbeats: %v", beats, sc.Err())
	}
}

// A join link that names no session (its session ended, or a typo) is
// answered with a page that says so and leads to Options.Home, in the
// browser that followed it: 404, no session, no cookie.
func TestJoinLinkOfNoSession(t *testing.T) {
	a := newApp(t, webhost.Options{Home: "/app/"})
	res := a.raw(t, http.MethodGet, "/agentsurface/join/bogus", "", nil, "")
	if res.StatusCode != http.StatusNotFound || !strings.HasPrefix(res.Header.Get("Content-Type"), "text/html") || len(res.Cookies()) > 0 {
		t.Fatalf("%d %q %v", res.StatusCode, res.Header.Get("Content-Type"), res.Cookies())
	}
	b := a.browser(t)
	code, body := b.get("/agentsurface/join/bogus")
	if code != http.StatusNotFound || !strings.Contains(body, "This link names no session") || !strings.Contains(body, `<a href="/app/">`) {
		t.Fatalf("%d %s", code, body)
	}
	if st := a.h.Stats(); st.Sessions+st.UnusedSessions != 0 {
		t.Fatalf("a session was made: %+v", st)
	}
}
