package webhost_test

// The approve page wired into the MCP endpoint: every MCP client of a
// session reaches the person, by URL-mode elicitation where it declares
// it, by the link in CONFIRMATION_REQUIRED otherwise.

import (
	"context"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/agentsurface/agentsurface/surface"
	"github.com/agentsurface/agentsurface/webhost"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// newLinkApp serves the notes application with the archive action, with
// opts as they are: unlike newArchiveApp, no PublicURL unless opts set
// one.
func newLinkApp(t testing.TB, opts webhost.Options) *app {
	t.Helper()
	if opts.NewViews == nil {
		opts.NewViews = func(s *webhost.Session) (webhost.Views, error) { return &board{s: s, archivable: true}, nil }
	}
	h, err := webhost.New(opts)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(h.Handler(mux(h)))
	t.Cleanup(func() {
		_ = h.Close()
		srv.Close()
	})
	return &app{h: h, srv: srv}
}

// urlClient connects an MCP client with token, speaking version, that
// declares URL-mode elicitation and nothing else: every elicitation it is
// sent goes to asked, and it answers accept (it opened the page).
func (a *app) urlClient(t testing.TB, token, version string) (*mcp.ClientSession, chan *mcp.ElicitParams) {
	t.Helper()
	asked := make(chan *mcp.ElicitParams, 4)
	opts := &mcp.ClientOptions{
		Capabilities: &mcp.ClientCapabilities{Elicitation: &mcp.ElicitationCapabilities{URL: &mcp.URLElicitationCapabilities{}}},
		ElicitationHandler: func(_ context.Context, req *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
			asked <- req.Params
			return &mcp.ElicitResult{Action: "accept"}, nil
		},
	}
	tr := &mcp.StreamableClientTransport{Endpoint: a.srv.URL + "/mcp", MaxRetries: -1,
		HTTPClient: &http.Client{Transport: bearerRT{token, a.srv.Client().Transport}}}
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "url-agent", Version: "1.0.0"}, opts).
		Connect(bg, tr, &mcp.ClientSessionOptions{ProtocolVersion: version})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cs.Close() })
	return cs, asked
}

// callAsync calls a tool in the background.
func callAsync(cs *mcp.ClientSession, name, args string) <-chan *mcp.CallToolResult {
	done := make(chan *mcp.CallToolResult, 1)
	go func() {
		res, err := cs.CallTool(bg, &mcp.CallToolParams{Name: name, Arguments: jsonArgs(args)})
		if err != nil {
			res = &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: err.Error()}}}
		}
		done <- res
	}()
	return done
}

func jsonArgs(args string) any {
	if args == "" {
		return nil
	}
	return rawJSON(args)
}

type rawJSON string

func (r rawJSON) MarshalJSON() ([]byte, error) { return []byte(r), nil }

// A client that declares URL-mode elicitation, of either protocol
// generation, is sent to the Host's approve page with no configuration
// beyond the Host's (no PublicURL: the link is absolute under the MCP
// request's own scheme and Host), marked via=url; opened in the session's
// browser (its cookie), the page asks; the person's click approves, and
// the very call the agent made completes, the archive having run once.
// The decision is recorded as reached by URL elicitation. On the page,
// the person may also approve with a standing grant: the agent's next
// call within it runs without anyone being asked, and says which grant
// allowed it. AS-CONFIRM-001 (the page shows, and the approval binds, the
// exact input), AS-CONFIRM-003 (the approval is spent once),
// AS-ADAPTER-002 (the envelope relayed).
func TestMCPURLElicitationReachesTheApprovePage(t *testing.T) {
	for _, version := range []string{stateful, sessionless} {
		t.Run(version, func(t *testing.T) {
			audit := surface.NewMemorySink(200)
			a := newLinkApp(t, webhost.Options{Registry: func(_ *webhost.Session, o *surface.Options) { o.Audit = audit }})
			s := a.archivable(t, "")
			b := a.joined(t, s)
			cs, asked := a.urlClient(t, s.Token(), version)
			name := toolName(t, cs, "view:notes.archive.archive")

			done := callAsync(cs, name, `{"ids":["n1"]}`)
			ep := <-asked
			p := awaitPending(t, s)
			link, err := url.Parse(ep.URL)
			if err != nil || ep.Mode != "url" || !strings.HasPrefix(ep.URL, a.srv.URL+"/agentsurface/approve/"+p.ConfirmationID+"?") ||
				link.Query().Get("via") != "url" || link.Query().Get("link") == "" || !strings.Contains(ep.Message, p.Summary) {
				t.Fatalf("asked %+v for %s (%v)", ep, p.ConfirmationID, err)
			}
			code, body := b.get(link.RequestURI())
			if st, _ := pageState(body); code != http.StatusOK || st != "ask" || !strings.Contains(body, "n1") {
				t.Fatalf("the page: %d %s\n%.400s", code, st, body)
			}
			if got := boardOf(s).archivedIDs(); len(got) != 0 {
				t.Fatalf("archived before the click: %v", got)
			}
			if code, body := b.decideVia(link.RequestURI(), url.Values{"decision": {"approve"}}); code != http.StatusOK {
				t.Fatalf("approve: %d %.300s", code, body)
			}
			res := <-done
			requireCode(t, envelope(t, res), "ok")
			if got := boardOf(s).archivedIDs(); !slices.EqualFunc(got, [][]string{{"n1"}}, slices.Equal) {
				t.Fatalf("archived %v", got)
			}
			ds := s.Decisions()
			if len(ds) != 1 || ds[0].Channel != surface.ChannelURL || ds[0].Actor != "anonymous (url)" || ds[0].Call == nil || !ds[0].Call.Executed {
				t.Fatalf("decisions %+v", ds)
			}

			// Approve, and allow for a while: the next call within the
			// grant asks nobody.
			done = callAsync(cs, name, `{"ids":["n2","n3"]}`)
			ep = <-asked
			link = must(url.Parse(ep.URL))
			if code, body := b.decideVia(link.RequestURI(), url.Values{"decision": {"grant"}, "minutes": {"5"}}); code != http.StatusOK || !strings.Contains(body, "data-grant=") {
				t.Fatalf("approve with a grant: %d %.300s", code, body)
			}
			requireCode(t, envelope(t, <-done), "ok")
			grants := s.Registry().Grants().List()
			if len(grants) != 1 || grants[0].ConsumerKey != "mcp-bridge:agent" {
				t.Fatalf("grants %+v", grants)
			}
			res2 := callTool(t, cs, "view:notes.archive.archive", `{"ids":["n3"]}`, nil)
			requireCode(t, res2, "ok")
			if res2.GrantID != grants[0].GrantID {
				t.Fatalf("allowed by %q, want the grant %s", res2.GrantID, grants[0].GrantID)
			}
			select {
			case ep := <-asked:
				t.Fatalf("asked within the grant: %+v", ep)
			default:
			}
			if got := boardOf(s).archivedIDs(); len(got) != 3 {
				t.Fatalf("archived %v", got)
			}
			used := slices.ContainsFunc(audit.Events(), func(e surface.AuditEvent) bool {
				return e.Type == surface.AuditGrantUsed && e.GrantID == grants[0].GrantID
			})
			if !used {
				t.Fatal("the grant's use is not audited")
			}
		})
	}
}

// A client that declares no elicitation gets the approve link in
// CONFIRMATION_REQUIRED (details.approveUrl and the message), absolute
// under the request's Host; opened in the session's browser and
// approved, the agent's retry runs once, and the decision is recorded as
// reached by the link. The link follows the Host the request named (one
// the guard allows), never a forwarding header; with
// Options.PublicURL, it is under PublicURL whatever the request named.
// AS-ADAPTER-002, AS-CONFIRM-003.
func TestMCPApproveLinkForClientsWithoutElicitation(t *testing.T) {
	for _, version := range []string{stateful, sessionless} {
		t.Run(version, func(t *testing.T) {
			a := newLinkApp(t, webhost.Options{})
			s := a.archivable(t, "")
			b := a.joined(t, s)
			cs := a.dial(t, s.Token(), version)
			res := callTool(t, cs, "view:notes.archive.archive", `{"ids":["n1"]}`, nil)
			requireCode(t, res, string(surface.CodeConfirmationRequired))
			link := res.Error.ApproveURL()
			if !strings.HasPrefix(link, a.srv.URL+"/agentsurface/approve/"+res.Error.ConfirmationID()+"?link=") ||
				strings.Contains(link, "via=") || !strings.Contains(res.Error.Message, link) {
				t.Fatalf("link %q, message %q", link, res.Error.Message)
			}
			if code, body := b.decideVia(pathOf(t, link), url.Values{"decision": {"approve"}}); code != http.StatusOK {
				t.Fatalf("approve: %d %.300s", code, body)
			}
			requireCode(t, retry(t, cs, "view:notes.archive.archive", `{"ids":["n1"]}`, res.Error.ConfirmationID()), "ok")
			if ds := s.Decisions(); len(ds) != 1 || ds[0].Channel != surface.ChannelLink || len(boardOf(s).archivedIDs()) != 1 {
				t.Fatalf("decisions %+v, archived %v", ds, boardOf(s).archivedIDs())
			}

			// Another allowed Host (a loopback name: the SDK refuses a
			// non-loopback Host on a loopback listener), and forwarding
			// headers that lie.
			_, port, _ := strings.Cut(strings.TrimPrefix(a.srv.URL, "http://"), ":")
			hdr := http.Header{"X-Forwarded-Host": {"evil.example"}, "X-Forwarded-Proto": {"https"}, "Forwarded": {"host=evil.example;proto=https"}}
			other, err := a.dialVia(s.Token(), version, "localhost:"+port, hdr)
			if err != nil {
				t.Fatal(err)
			}
			defer other.Close()
			res = callTool(t, other, "view:notes.archive.archive", `{"ids":["n2"]}`, nil)
			requireCode(t, res, string(surface.CodeConfirmationRequired))
			if link := res.Error.ApproveURL(); !strings.HasPrefix(link, "http://localhost:"+port+"/agentsurface/approve/") || strings.Contains(link, "evil") {
				t.Fatalf("link %q", link)
			}
		})
	}

	// With PublicURL, links are under it.
	a := newLinkApp(t, webhost.Options{PublicURL: "https://devices.example.com/"})
	s := a.archivable(t, "")
	res := callTool(t, a.dial(t, s.Token(), sessionless), "view:notes.archive.archive", `{"ids":["n1"]}`, nil)
	if link := res.Error.ApproveURL(); !strings.HasPrefix(link, "https://devices.example.com/agentsurface/approve/"+res.Error.ConfirmationID()+"?link=") {
		t.Fatalf("link %q", link)
	}
}

// dialVia connects an MCP client whose requests name host in their Host
// header and carry hdr.
func (a *app) dialVia(token, version, host string, hdr http.Header) (*mcp.ClientSession, error) {
	rt := hostRT{host: host, next: headerRT{hdr, bearerRT{token, a.srv.Client().Transport}}}
	tr := &mcp.StreamableClientTransport{Endpoint: a.srv.URL + "/mcp", MaxRetries: -1, HTTPClient: &http.Client{Transport: rt}}
	return mcp.NewClient(&mcp.Implementation{Name: "test-agent", Version: "1.0.0"}, nil).
		Connect(bg, tr, &mcp.ClientSessionOptions{ProtocolVersion: version})
}

// hostRT sends every request with another Host header.
type hostRT struct {
	host string
	next http.RoundTripper
}

func (h hostRT) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Host = h.host
	return h.next.RoundTrip(r)
}

// The application's own ApproveURL hook wins over the Host's; and where
// no link can be made (the hook gives none), the answer is the
// registry's, unchanged: no approveUrl, the plain message.
func TestMCPApproveURLOfTheApplication(t *testing.T) {
	var calls []string
	o := webhost.Options{}
	o.MCP.HTTP.ApproveURL = func(_ context.Context, p surface.PendingConfirmation) string {
		calls = append(calls, p.ConfirmationID) // one client, one call at a time
		if len(calls) == 1 {
			return "https://approvals.example/" + p.ConfirmationID
		}
		return ""
	}
	a := newLinkApp(t, o)
	s := a.archivable(t, "")
	cs := a.dial(t, s.Token(), sessionless)
	res := callTool(t, cs, "view:notes.archive.archive", `{"ids":["n1"]}`, nil)
	if link := res.Error.ApproveURL(); link != "https://approvals.example/"+res.Error.ConfirmationID() {
		t.Fatalf("link %q", link)
	}
	res = callTool(t, cs, "view:notes.archive.archive", `{"ids":["n2"]}`, nil)
	requireCode(t, res, string(surface.CodeConfirmationRequired))
	if _, ok := res.Error.Details["approveUrl"]; ok || strings.Contains(res.Error.Message, "http") {
		t.Fatalf("a link where none could be made: %+v", res.Error)
	}
}

// The approvals card offers the approve page's grant: the same offer
// (Session.GrantOffer), "approve, and allow" for the durations offered;
// its post makes exactly that grant, for the asking consumer, whatever
// else the form names; a duration not offered, a grant where none is
// offered, or another session's request decides nothing. The agent's next
// call within the grant runs unasked; one outside it asks again.
func TestApprovalsCardOffersTheGrant(t *testing.T) {
	a := newArchiveApp(t, webhost.Options{})
	s := a.archivable(t, "")
	b := a.joined(t, s)
	tab := b.open(false, webhost.ApprovalsID)
	args := `{"ids":["n1","n2"]}`
	p, cs := ask(t, a, s, args)
	offer := s.GrantOffer(p)
	if offer == nil || !slices.Equal(offer.Minutes, []int{5, 15, 30}) || offer.MaxUses != 3 || offer.Consumer != "mcp-bridge:agent" {
		t.Fatalf("offer %+v", offer)
	}
	if s.GrantOffer(surface.PendingConfirmation{ConfirmationID: "cnf_nothere"}) != nil {
		t.Fatal("an offer for a request that is not pending")
	}
	card := tab.await(t, webhost.ApprovalsID, func(h string) bool { return strings.Contains(h, p.ConfirmationID) })
	for _, want := range []string{`value="grant"`, `<option value="5">`, `<option value="30">`, "(at most 3)",
		`ids: a non-empty list of &#34;n1&#34;, &#34;n2&#34; only`, "mcp-bridge:agent"} {
		if !strings.Contains(card, want) {
			t.Fatalf("the card lacks %q:\n%s", want, card)
		}
	}
	// The page shows the same terms.
	if _, page := b.get(pathOf(t, s.ApproveURL(p))); !strings.Contains(page, offer.Terms[1]) && !strings.Contains(page, strings.ReplaceAll(offer.Terms[1], `"`, "&#34;")) {
		t.Fatalf("the page's terms differ from the card's: %v", offer.Terms)
	}

	for _, minutes := range []string{"60", "0", "", "5 minutes"} {
		if code, _ := b.post("/agentsurface/decide", url.Values{"id": {p.ConfirmationID}, "decision": {"grant"}, "minutes": {minutes}}); code != http.StatusBadRequest {
			t.Fatalf("minutes %q: %d", minutes, code)
		}
	}
	other := a.archivable(t, "")
	po, _ := ask(t, a, other, `{"ids":["n9"]}`)
	if code, _ := b.post("/agentsurface/decide", url.Values{"id": {po.ConfirmationID}, "decision": {"grant"}, "minutes": {"5"}}); code != http.StatusNotFound {
		t.Fatalf("another session's request: %d", code)
	}
	if len(s.Pending()) != 1 || len(other.Pending()) != 1 || len(s.Registry().Grants().List())+len(other.Registry().Grants().List()) != 0 {
		t.Fatal("a refused post decided")
	}
	code, msg := b.post("/agentsurface/decide", url.Values{"id": {p.ConfirmationID}, "decision": {"grant"}, "minutes": {"15"},
		"consumer": {"*"}, "constraints": {"[]"}, "maxUses": {"100"}, "ids": {"n3"}})
	if code != http.StatusNoContent {
		t.Fatalf("grant: %d %s", code, msg)
	}
	gs := s.Registry().Grants().List()
	if len(gs) != 1 || gs[0].ConsumerKey != "mcp-bridge:agent" || gs[0].MaxUses != 3 || gs[0].ExpiresAt.Sub(gs[0].CreatedAt) != 15*time.Minute ||
		!sameConstraints(gs[0].Constraints, offer.Constraints) || gs[0].CreatedBy != "anonymous (page)" || gs[0].ConfirmationID != p.ConfirmationID {
		t.Fatalf("grants %+v", gs)
	}
	requireCode(t, retry(t, cs, "view:notes.archive.archive", args, p.ConfirmationID), "ok")
	res := callTool(t, cs, "view:notes.archive.archive", `{"ids":["n1"]}`, nil)
	requireCode(t, res, "ok")
	if res.GrantID != gs[0].GrantID {
		t.Fatalf("grant id %q", res.GrantID)
	}
	requireCode(t, callTool(t, cs, "view:notes.archive.archive", `{"ids":["n1","n3"]}`, nil), string(surface.CodeConfirmationRequired))
	if got := boardOf(s).archivedIDs(); len(got) != 2 {
		t.Fatalf("archived %v", got)
	}
	// The card of a request whose capability allows no grant offers none.
	requireCode(t, callTool(t, cs, "view:notes.board.clear", "", nil), string(surface.CodeConfirmationRequired))
	clear := awaitPending(t, s)
	for _, q := range s.Pending() {
		if q.CapabilityID == "view:notes.board.clear" {
			clear = q
		}
	}
	if s.GrantOffer(clear) != nil {
		t.Fatal("an offer for clear")
	}
	if code, _ := b.post("/agentsurface/decide", url.Values{"id": {clear.ConfirmationID}, "decision": {"grant"}, "minutes": {"5"}}); code != http.StatusBadRequest {
		t.Fatalf("a grant for clear: %d", code)
	}
}

// A refusal the approve page can tell is about a request of a session
// goes to that session's audit trail: a genuine link opened by another
// user (with who tried), a bad form posted through it, the link opened
// again once the request was decided. A forged link, which names no
// session it can be trusted to be about, is only logged: it adds nothing
// to the trail, however many times it is tried.
func TestApproveRefusalsAudited(t *testing.T) {
	audit := surface.NewMemorySink(200)
	a := newArchiveApp(t, webhost.Options{User: headerUser, Registry: func(_ *webhost.Session, o *surface.Options) { o.Audit = audit }})
	s := a.archivable(t, "alice")
	p, _ := ask(t, a, s, `{"ids":["n1"]}`)
	path := pathOf(t, s.ApproveURL(p))
	refused := func() []surface.AuditEvent {
		var out []surface.AuditEvent
		for _, e := range audit.Events() {
			if e.Type == webhost.AuditApproveRefused {
				out = append(out, e)
			}
		}
		return out
	}
	forged := path[:len(path)-4] + "AAAA"
	for range 5 {
		if code, _ := a.as(t, "alice").get(forged); code != http.StatusNotFound {
			t.Fatalf("forged: %d", code)
		}
	}
	if n := len(refused()); n != 0 {
		t.Fatalf("%d records of forged links", n)
	}
	if code, _ := a.as(t, "mallory").get(path); code != http.StatusForbidden {
		t.Fatalf("another user: %d", code)
	}
	alice := a.as(t, "alice")
	if code, _ := alice.decideVia(path, url.Values{"decision": {"grant"}, "minutes": {"600"}}); code != http.StatusBadRequest {
		t.Fatalf("bad form: %d", code)
	}
	if code, _ := alice.decideVia(path, url.Values{"decision": {"deny"}}); code != http.StatusOK {
		t.Fatalf("deny: %d", code)
	}
	if code, _ := alice.get(path); code != http.StatusGone {
		t.Fatalf("decided: %d", code)
	}
	got := refused()
	want := []struct{ reason, actor string }{
		{"other-user: a link opened by another user", "mallory"},
		{"bad-form: a grant duration not offered", ""},
		{"decided: decided already", ""},
	}
	if len(got) != len(want) {
		t.Fatalf("records %+v", got)
	}
	for i, e := range got {
		if e.Reason != want[i].reason || e.Actor != want[i].actor || e.ConfirmationID != p.ConfirmationID ||
			e.CapabilityID != p.CapabilityID || e.ConsumerID != p.ConsumerKey || e.At.IsZero() {
			t.Fatalf("record %d: %+v", i, e)
		}
	}
}
