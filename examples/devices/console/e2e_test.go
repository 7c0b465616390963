package console_test

import (
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/agentsurface/agentsurface/examples/devices/agent"
	"github.com/agentsurface/agentsurface/examples/devices/console"
	"github.com/agentsurface/agentsurface/examples/devices/domain"
	"github.com/agentsurface/agentsurface/mcpsurface"
	"github.com/agentsurface/agentsurface/surface"
	"github.com/agentsurface/agentsurface/webhost"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// The scripted task over real HTTP, with the go-sdk client: every step
// gets its expected outcome, the database holds exactly the approved
// changes, and the audit trails say who approved what, on which input.
// The agent's client declares no elicitation: it is given the approve
// link (shown whole in the transcript), which the headless user opens in
// a browser of the session and approves with a standing grant for these
// devices; a later disable of one of them runs without anyone being
// asked (the result names the grant), and one of another device asks
// again, is denied and runs nothing. AS-EXAMPLE-001 (the devices
// scenario end to end without a model), AS-STALE-001 and AS-LIFE-005 (a
// call to a replaced registration is STALE_CAPABILITY
// registration-replaced), AS-NAV-001 (close unmounts its own panel and
// settles ok), AS-INVOKE-005 and AS-BIND-004 (the approval shows the live
// bound ids), AS-CONFIRM-003 (the evidence is consumed), AS-CONFIRM-006
// (a denial is final: nothing runs), AS-ADAPTER-002 (the approve link
// and the grant id relayed in the envelope).
func TestScriptedTaskOverMCP(t *testing.T) {
	d := newDemo(t, console.Options{})
	s := d.session(t)
	before := d.status(t)
	var tr steps
	const approver = "headless user"
	err := s.PlayScripted(bg, console.ScriptedRun{URL: d.mcpURL(), Approver: approver, Report: tr.report, HTTPClient: d.srv.Client()})
	if err != nil {
		t.Fatalf("%v\n%v", err, tr.outcomes())
	}
	for _, st := range tr.list {
		if !st.Expected() {
			t.Errorf("step %d %q: %s, want %s", st.N, st.Title, st.Outcome, st.Want)
		}
	}
	if !tr.has(string(surface.CodeStaleCapability)) || !tr.has(string(surface.CodeConfirmationRequired)) || !tr.has("approved with a grant") || !tr.has("denied") {
		t.Fatalf("the transcript lacks the stale call, the confirmation, the grant or the denial: %v", tr.outcomes())
	}

	// The database: d9 and d10 (London, offline) disabled, d9 enabled and
	// disabled again within the grant; d8 (online, outside the grant)
	// untouched; nothing else.
	after := d.status(t)
	for id, st := range before {
		want := st
		if id == "d9" || id == "d10" {
			want = "disabled"
		}
		if after[id] != want {
			t.Errorf("%s: %s, want %s", id, after[id], want)
		}
	}
	for id, actions := range map[string][]string{"d10": {"disable"}, "d9": {"disable", "enable", "disable"}, "d8": nil} {
		h, err := d.store.History(bg, console.Operator, id, 0)
		if err != nil || len(h) != len(actions) {
			t.Fatalf("%s history %+v %v", id, h, err)
		}
		for i, c := range h { // newest first
			if want := actions[len(actions)-1-i]; c.Action != want || c.UserID != console.Operator.ID {
				t.Fatalf("%s history %+v", id, h)
			}
			if c.Action == "disable" && c.Reason != "offline during the maintenance window" {
				t.Fatalf("%s audit row %+v", id, c)
			}
		}
	}

	// The transcript: the links the agent was given, each that of its
	// request; the call within the grant names it.
	var links []string
	grantID := ""
	for _, st := range tr.list {
		if st.Link != "" {
			links = append(links, st.Link)
		}
		if st.Title == "disable it again: within the grant" {
			_, grantID, _ = strings.Cut(st.Detail, "allowed by ")
			grantID, _, _ = strings.Cut(grantID, ";")
		}
	}
	ds := s.Decisions()
	if len(ds) != 2 || len(links) != 2 {
		t.Fatalf("%d decisions, %d links", len(ds), len(links))
	}
	for i, dec := range ds {
		if !strings.HasPrefix(links[i], d.srv.URL+"/agentsurface/approve/"+dec.ConfirmationID+"?link=") {
			t.Fatalf("link %q for %s", links[i], dec.ConfirmationID)
		}
	}

	// The console's record of the decisions: who, how, what, the exact
	// input.
	dec := ds[0]
	var in struct {
		IDs    []string `json:"ids"`
		Reason string   `json:"reason"`
	}
	if err := json.Unmarshal([]byte(dec.Input), &in); err != nil {
		t.Fatal(err)
	}
	const actor = "olivia (operator, browser)" // the page names who decides
	if dec.Outcome != surface.OutcomeApproved || dec.Call == nil || !dec.Call.Executed || dec.Call.Status != surface.StatusOK || dec.Actor != actor ||
		dec.Channel != surface.ChannelLink || dec.CapabilityID != domain.DisableID || dec.Consumer != "mcp-bridge:agent" ||
		!slices.Equal(in.IDs, []string{"d9", "d10"}) || in.Reason != "offline during the maintenance window" {
		t.Fatalf("decision %+v (input %s)", dec, dec.Input)
	}
	if !strings.Contains(dec.Summary, "badge-reader-lon-02") || !strings.Contains(dec.Summary, "hvac-ctrl-lon-03") {
		t.Fatalf("the summary does not name the devices: %q", dec.Summary)
	}
	if dec := ds[1]; dec.Outcome != surface.OutcomeDenied || dec.Call != nil || !strings.Contains(string(dec.Input), `"d8"`) || dec.Channel != surface.ChannelLink {
		t.Fatalf("the second decision %+v", dec)
	}
	g, ok := s.Registry().Grants().Get(grantID)
	if !ok || g.ConfirmationID != dec.ConfirmationID || g.Uses != 1 || g.MaxUses != console.DisableGrants.MaxUses ||
		g.ExpiresAt.Sub(g.CreatedAt) != console.DisableGrants.MaxTTL || g.CreatedBy != actor || g.ConsumerKey != "mcp-bridge:agent" {
		t.Fatalf("the grant %q: %+v", grantID, g)
	}

	// The registry's audit trail: the approval by its actor, the grant
	// made and used, the confirmation consumed, the disables settled ok
	// for the MCP consumer (the second by the grant), the denial.
	var approved, made, used, consumed, settled, byGrant, denied bool
	for _, e := range s.Activity() {
		switch {
		case e.Type == surface.AuditConfirmationApproved && e.Actor == actor && e.CapabilityID == domain.DisableID:
			approved = true
		case e.Type == surface.AuditGrantCreated && e.GrantID == grantID && e.Actor == actor:
			made = true
		case e.Type == surface.AuditGrantUsed && e.GrantID == grantID && e.ConsumerID == "mcp-bridge:agent":
			used = true
		case e.Type == surface.AuditConfirmationConsumed && e.CapabilityID == domain.DisableID:
			consumed = true
		case e.Type == surface.AuditInvocationSettled && e.CapabilityID == domain.DisableID && e.Status == surface.StatusOK && e.GrantID == grantID:
			byGrant = true
		case e.Type == surface.AuditInvocationSettled && e.CapabilityID == domain.DisableID && e.Status == surface.StatusOK:
			settled = e.ConsumerID == "mcp-bridge:agent" && e.DurationMs != nil
		case e.Type == surface.AuditConfirmationDenied && e.ConfirmationID == ds[1].ConfirmationID:
			denied = true
		}
	}
	if !approved || !made || !used || !consumed || !settled || !byGrant || !denied {
		t.Fatalf("audit: approved %v, grant made %v used %v, consumed %v, settled %v, by the grant %v, denied %v", approved, made, used, consumed, settled, byGrant, denied)
	}
}

// Two sessions are isolated: B's token lists and calls only B's surface,
// cannot reach A's MCP session, and cannot approve A's confirmation,
// neither through the host API nor through the page. AS-CONFIRM-004 (no
// replay of evidence across registries and consumers).
func TestSessionsIsolated(t *testing.T) {
	d := newDemo(t, console.Options{})
	a, b := d.session(t), d.session(t)
	ma, mb := d.dial(t, a.Token()), d.dial(t, b.Token())

	requireCode(t, call(t, ma, "view:devices.table.selectRows", `{"ids":["d1","d2"]}`), "ok")
	res := call(t, ma, domain.DisableID, `{"reason":"a's request"}`)
	requireCode(t, res, string(surface.CodeConfirmationRequired))
	cid, _ := res.Error.Details["confirmationId"].(string)

	// B sees its own table: nothing selected, disable unavailable.
	var st console.TableState
	if err := call(t, mb, "view:devices.table.readState", "").Decode(&st); err != nil || len(st.Selection) != 0 {
		t.Fatalf("B sees a selection %v %v", st.Selection, err)
	}
	res = call(t, mb, domain.DisableID, `{"reason":"b"}`)
	requireCode(t, res, string(surface.CodeCapabilityNotAvailable))

	// B presenting A's confirmation id gets nothing.
	tools, _ := mb.List(bg)
	name := tools[slices.IndexFunc(tools, func(x agent.Tool) bool { return x.CapabilityID == domain.DisableID })].Name
	r, err := mb.Session().CallTool(bg, &mcp.CallToolParams{Name: name, Arguments: map[string]any{"reason": "a's request"},
		Meta: mcp.Meta{mcpsurface.MetaConfirmationID: cid}})
	if err != nil {
		t.Fatal(err)
	}
	env, _ := agent.Envelope(r)
	if env.Status == surface.StatusOK {
		t.Fatal("B executed with A's confirmation id")
	}

	// B cannot approve A's confirmation: not through the host API ...
	if _, ok := b.Decide(cid, true, "b"); ok {
		t.Fatal("B's session approved A's confirmation")
	}
	// ... nor through the page with B's cookie.
	bb := d.browser(t)
	if code, _ := bb.get(b.JoinPath()); code != http.StatusSeeOther {
		t.Fatalf("join: %d", code)
	}
	// B's page is told plainly that B's session has no such request, as
	// for an id nobody has: not that A's is "no longer pending".
	code, msg := bb.post("/agentsurface/decide", url.Values{"id": {cid}, "decision": {"approve"}})
	unknownCode, unknown := bb.post("/agentsurface/decide", url.Values{"id": {"cnf_nosuchthing1"}, "decision": {"approve"}})
	if code != http.StatusNotFound || msg != "There is no such approval request in this session." || unknownCode != code || unknown != msg {
		t.Fatalf("B's page approving A's confirmation: %d %q (an unknown id: %d %q)", code, msg, unknownCode, unknown)
	}
	if p := a.Pending(); len(p) != 1 || p[0].ConfirmationID != cid {
		t.Fatalf("A's confirmation is no longer pending: %+v", p)
	}

	// B's token cannot reach A's MCP session by its id. (The go-sdk client
	// speaks 2026-07-28, which has no session: open a 2025-11-25 one.)
	ireq, _ := http.NewRequest(http.MethodPost, d.mcpURL(), strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"a","version":"1"}}}`))
	ireq.Header.Set("Authorization", "Bearer "+a.Token())
	ireq.Header.Set("Content-Type", "application/json")
	ireq.Header.Set("Accept", "application/json, text/event-stream")
	ires, err := d.srv.Client().Do(ireq)
	if err != nil {
		t.Fatal(err)
	}
	ires.Body.Close()
	sid := ires.Header.Get("Mcp-Session-Id")
	if sid == "" {
		t.Fatalf("initialize: %d, no session id", ires.StatusCode)
	}
	req, _ := http.NewRequest(http.MethodPost, d.mcpURL(), strings.NewReader(`{"jsonrpc":"2.0","id":9,"method":"tools/list"}`))
	req.Header.Set("Authorization", "Bearer "+b.Token())
	req.Header.Set("Mcp-Session-Id", sid)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	hres, err := d.srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(hres.Body)
	hres.Body.Close()
	if hres.StatusCode != http.StatusNotFound || strings.Contains(string(body), "devices") {
		t.Fatalf("B with A's session id: %d %s", hres.StatusCode, body)
	}
	if s := d.status(t); s["d1"] != "online" || s["d2"] != "online" {
		t.Fatalf("devices changed: %v", s)
	}
}

// A missing, wrong or revoked token gets 401 and learns nothing; the
// token of an ended session is revoked at once.
func TestMCPTokens(t *testing.T) {
	d := newDemo(t, console.Options{})
	s := d.session(t)
	post := func(auth string) (int, string, http.Header) {
		req, _ := http.NewRequest(http.MethodPost, d.mcpURL(), strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`))
		if auth != "" {
			req.Header.Set("Authorization", auth)
		}
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		res, err := d.srv.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		b, _ := io.ReadAll(res.Body)
		return res.StatusCode, string(b), res.Header
	}
	var bodies []string
	for _, auth := range []string{"", "Bearer ", "Bearer wrong", "Basic " + s.Token(), "Bearer " + s.Token() + "x"} {
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

// Malformed JSON-RPC is a protocol error, an oversized body is refused
// with 413 before it is read, and neither reaches the registry.
func TestMCPBadInput(t *testing.T) {
	d := newDemo(t, console.Options{Host: webhost.Options{MaxBodyBytes: 4 << 10}})
	s := d.session(t)
	send := func(body string) (int, string) {
		req, _ := http.NewRequest(http.MethodPost, d.mcpURL(), strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+s.Token())
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		res, err := d.srv.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		b, _ := io.ReadAll(res.Body)
		return res.StatusCode, string(b)
	}
	if code, _ := send(`{"jsonrpc":"2.0","id":1,`); code != http.StatusBadRequest {
		t.Fatalf("truncated JSON: %d", code)
	}
	if code, _ := send(`[1,2,3]`); code < 400 {
		t.Fatalf("not a message: %d", code)
	}
	big := `{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{"x":"` + strings.Repeat("a", 8<<10) + `"}}`
	if code, _ := send(big); code != http.StatusRequestEntityTooLarge {
		t.Fatalf("oversized: %d", code)
	}
	// A chunked body (no Content-Length) over the cap is cut while read.
	req, _ := http.NewRequest(http.MethodPost, d.mcpURL(), io.MultiReader(strings.NewReader(big)))
	req.ContentLength = -1
	req.Header.Set("Authorization", "Bearer "+s.Token())
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	res, err := d.srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != http.StatusRequestEntityTooLarge {
		t.Fatalf("oversized chunked: %d", res.StatusCode)
	}
	for _, e := range s.Activity() {
		if e.Type == surface.AuditInvocationStarted {
			t.Fatalf("bad input reached the registry: %+v", e)
		}
	}
}

// The page's forms: an unknown session gets 401 (forms) or 410 (event
// stream); the session cookie is HttpOnly and SameSite=Lax; form bodies
// are capped; bad values are refused.
func TestPageAndForms(t *testing.T) {
	d := newDemo(t, console.Options{})
	b := d.browser(t)
	if code, _ := b.post("/ui/filter", url.Values{"status": {"offline"}}); code != http.StatusUnauthorized {
		t.Fatalf("no session: %d", code)
	}
	res, err := b.client.Get(d.srv.URL + eventsPath)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != http.StatusGone {
		t.Fatalf("events without a session: %d", res.StatusCode)
	}

	res, err = b.client.Get(d.srv.URL + "/")
	if err != nil {
		t.Fatal(err)
	}
	page, _ := io.ReadAll(res.Body)
	res.Body.Close()
	var c *http.Cookie
	for _, x := range res.Cookies() {
		if x.Name == "agentsurface_session" {
			c = x
		}
	}
	if c == nil || !c.HttpOnly || c.SameSite != http.SameSiteLaxMode || len(c.Value) < 40 {
		t.Fatalf("cookie %+v", c)
	}
	for _, want := range []string{"badge-reader-lon-02", "Pending approvals", "claude mcp add --transport http devices " + d.srv.URL + "/mcp", "/agentsurface/page.js"} {
		if !strings.Contains(string(page), want) {
			t.Fatalf("the page lacks %q", want)
		}
	}
	if code, _ := b.post("/ui/filter", url.Values{"status": {"broken"}}); code != http.StatusBadRequest {
		t.Fatalf("bad status: %d", code)
	}
	if code, _ := b.post("/ui/filter", url.Values{"site": {"Atlantis"}}); code != http.StatusBadRequest {
		t.Fatalf("bad site: %d", code)
	}
	if code, _ := b.post("/ui/nope", nil); code != http.StatusNotFound {
		t.Fatalf("unknown action: %d", code)
	}
	if code, _ := b.post("/ui/filter", url.Values{"site": {strings.Repeat("x", 100<<10)}}); code != http.StatusBadRequest {
		t.Fatalf("oversized form: %d", code)
	}
	// A cross-origin post is refused even with the cookie.
	req, _ := http.NewRequest(http.MethodPost, d.srv.URL+"/ui/clear", nil)
	req.Header.Set("Sec-Fetch-Site", "cross-site")
	res, err = b.client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != http.StatusForbidden {
		t.Fatalf("cross-site post: %d", res.StatusCode)
	}
	if code, _ := b.post("/ui/filter", url.Values{"site": {"london"}, "status": {"offline"}}); code != http.StatusNoContent {
		t.Fatalf("filter: %d", code)
	}
	_, page2 := b.get("/")
	if !strings.Contains(page2, "hvac-ctrl-lon-03") || strings.Contains(page2, "edge-gw-ams-01") {
		t.Fatal("the filter did not apply")
	}
}

// Two tabs of one session see the same registry: the agent's request
// shows in both, and approving in one removes the card from the other.
// AS-CONFIRM-006 (a decision is final: approving twice fails).
func TestTwoTabs(t *testing.T) {
	d := newDemo(t, console.Options{})
	s := d.session(t)
	b := d.browser(t)
	b.get(s.JoinPath())
	tab1, tab2 := b.events(), b.events()
	m := d.dial(t, s.Token())
	requireCode(t, call(t, m, "view:devices.table.selectRows", `{"ids":["d4"]}`), "ok")
	for _, tab := range []*stream{tab1, tab2} {
		tab.await(t, "table", func(h string) bool { return strings.Contains(rowHTML(h, "d4"), `class="selected"`) })
	}
	res := call(t, m, domain.DisableID, `{"reason":"lobby camera broken"}`)
	requireCode(t, res, string(surface.CodeConfirmationRequired))
	cid := res.Error.Details["confirmationId"].(string)
	for _, tab := range []*stream{tab1, tab2} {
		tab.await(t, "agentsurface-approvals", func(h string) bool {
			return strings.Contains(h, cid) && strings.Contains(h, "camera-lobby-ams-04") && strings.Contains(h, "lobby camera broken")
		})
	}
	if code, msg := b.post("/agentsurface/decide", url.Values{"id": {cid}, "decision": {"approve"}}); code != http.StatusNoContent {
		t.Fatalf("approve: %d %s", code, msg)
	}
	tab2.await(t, "agentsurface-approvals", func(h string) bool { return !strings.Contains(h, cid) && strings.Contains(h, "approved by olivia") })
	requireCode(t, call(t, m, domain.DisableID, `{"reason":"lobby camera broken"}`), "ok")
	for _, tab := range []*stream{tab1, tab2} {
		tab.await(t, "table", func(h string) bool {
			return strings.Contains(rowHTML(h, "d4"), `<span class="status s-disabled">disabled</span>`)
		})
	}
	if code, msg := b.post("/agentsurface/decide", url.Values{"id": {cid}, "decision": {"approve"}}); code != http.StatusConflict || msg != "This request was approved already by olivia (operator, browser)." {
		t.Fatalf("approving twice: %d %q", code, msg)
	}
}

// The viewer's calls are refused by the domain service itself
// (NOT_AUTHORIZED, origin server), though the surface offered them.
// AS-ERR-001 (NOT_AUTHORIZED origin server).
func TestViewerRefusedByServer(t *testing.T) {
	d := newDemo(t, console.Options{})
	s := d.session(t)
	s.SetUser(console.Viewer)
	m := d.dial(t, s.Token())
	requireCode(t, call(t, m, "view:devices.table.selectRows", `{"ids":["d11"]}`), "ok")
	res := call(t, m, domain.EnableID, `{"reason":"back to work"}`)
	requireCode(t, res, string(surface.CodeNotAuthorized))
	if res.Error.Details["origin"] != "server" {
		t.Fatalf("%+v", res.Error)
	}
	if st := d.status(t); st["d11"] != "disabled" {
		t.Fatalf("d11 %s", st["d11"])
	}
	s.SetUser(console.Operator)
	requireCode(t, call(t, m, domain.EnableID, `{"reason":"back to work"}`), "ok")
	if st := d.status(t); st["d11"] != "offline" {
		t.Fatalf("d11 %s", st["d11"])
	}
}

// A client that disconnects while its confirmation is pending leaves
// nothing behind: the approval alone executes nothing; a later identical
// call of the same consumer executes it once. AS-CONFIRM-003.
func TestClientGoneDuringPendingConfirmation(t *testing.T) {
	d := newDemo(t, console.Options{})
	s := d.session(t)
	m, err := agent.Dial(bg, d.mcpURL(), &agent.DialOptions{Token: s.Token(), HTTPClient: d.srv.Client()})
	if err != nil {
		t.Fatal(err)
	}
	requireCode(t, call(t, m, "view:devices.table.selectRows", `{"ids":["d6"]}`), "ok")
	requireCode(t, call(t, m, domain.DisableID, `{"reason":"r"}`), string(surface.CodeConfirmationRequired))
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}
	p := awaitPending(t, s)
	if _, ok := s.Decide(p.ConfirmationID, true, "olivia"); !ok {
		t.Fatal("the card could not be approved")
	}
	if st := d.status(t); st["d6"] != "offline" {
		t.Fatal("the approval executed by itself")
	}
	m2 := d.dial(t, s.Token())
	res := call(t, m2, domain.DisableID, `{"reason":"r"}`)
	requireCode(t, res, "ok")
	if st := d.status(t); st["d6"] != "disabled" {
		t.Fatalf("d6 %s", st["d6"])
	}
	h, _ := d.store.History(bg, console.Operator, "d6", 0)
	if len(h) != 1 {
		t.Fatalf("executed %d times", len(h))
	}
}

// The embedded agent console with the scripted agent: the destructive
// call waits for the user's click in the page (embedded topology) and
// then completes; the stale call is refused as over MCP. AS-TOPO-002,
// AS-EXAMPLE-001.
func TestEmbeddedConsoleScripted(t *testing.T) {
	d := newDemo(t, console.Options{})
	s := d.session(t)
	done, err := s.Ask("Disable the offline devices in London.")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Ask("again"); err == nil {
		t.Fatal("a second run started while the first runs")
	}
	p := awaitPending(t, s)
	if p.ConsumerKey != "embedded:console" || !strings.Contains(p.Summary, "hvac-ctrl-lon-03") {
		t.Fatalf("%+v", p)
	}
	if _, ok := s.Decide(p.ConfirmationID, true, "olivia (browser)"); !ok {
		t.Fatal("approve")
	}
	if err := <-done; err != nil {
		t.Fatalf("%v\n%+v", err, s.Chat())
	}
	var stale bool
	for _, e := range s.Chat() {
		if e.Step != nil && e.Step.Outcome == string(surface.CodeStaleCapability) {
			stale = true
		}
	}
	if st := d.status(t); !stale || st["d9"] != "disabled" || st["d10"] != "disabled" {
		t.Fatalf("stale %v, statuses %v", stale, st)
	}
}

// A page closed while its embedded agent waits for approval: the views
// unmount, the pending approval expires, and the run settles with the
// unmount (COMPONENT_UNMOUNTED), executing nothing. AS-LIFE-001,
// AS-STALE-001 (tombstone without a live candidate).
func TestTabClosedWhileAgentWaits(t *testing.T) {
	d := newDemo(t, console.Options{Host: webhost.Options{PageGrace: 1}}) // closed as soon as the stream ends
	b := d.browser(t)
	b.get("/")
	tab := b.events()
	var s *console.Session
	for _, x := range sessionsOf(d) {
		s = x
	}
	done, err := s.Ask("go")
	if err != nil {
		t.Fatal(err)
	}
	awaitPending(t, s)
	tab.close() // the tab closes mid-call
	err = <-done
	if err == nil || !strings.Contains(err.Error(), string(surface.CodeComponentUnmounted)) {
		t.Fatalf("run ended with %v", err)
	}
	if len(s.Pending()) != 0 {
		t.Fatal("a confirmation is still pending")
	}
	if st := d.status(t); st["d9"] != "offline" || st["d10"] != "offline" {
		t.Fatalf("executed: %v", st)
	}
}

// sessionsOf returns the sessions created by browsers, found through the
// host API's view of the live sessions.
func sessionsOf(d *demo) []*console.Session { return d.app.Sessions() }

// rowHTML returns the table row of device id in a rendered table.
func rowHTML(table, id string) string {
	i := strings.Index(table, `<tr data-id="`+id+`"`)
	if i < 0 {
		return ""
	}
	j := strings.Index(table[i:], "</tr>")
	if j < 0 {
		return table[i:]
	}
	return table[i : i+j]
}

// The Live surface card explains the surface for the page's agent: a
// capability that a policy hides is listed struck out, with the policy,
// its layer and its vote, and one that a policy disables shows the
// policy's reason; the agent itself has no trace of the hidden ones.
// AS-EXPLAIN-001, AS-EXPLAIN-004.
func TestSurfaceCardExplainsPolicies(t *testing.T) {
	noMutationsForAgents := surface.Policy{Name: "agents-read-only", Discover: func(pc *surface.PolicyContext) surface.Decision {
		if pc.Plane == surface.PlaneDomain && pc.Effect != surface.EffectServerQuery && pc.Consumer.ID == console.ConsoleConsumer.ID {
			return surface.Hide()
		}
		return surface.Expose()
	}}
	noSorting := surface.Policy{Name: "no-sorting", Discover: func(pc *surface.PolicyContext) surface.Decision {
		if pc.CapabilityID == "view:devices.table.sortBy" {
			return surface.Disable("Sorting is paused.")
		}
		return surface.Expose()
	}}
	d := newDemo(t, console.Options{Policies: []surface.Policy{noMutationsForAgents, noSorting}})
	s := d.session(t)
	b := d.browser(t)
	if code, _ := b.get(s.JoinPath()); code != http.StatusSeeOther {
		t.Fatalf("join: %d", code)
	}
	code, page := b.get("/")
	if code != http.StatusOK {
		t.Fatalf("page: %d", code)
	}
	card := page[strings.Index(page, `<div id="surface"`):]
	card = card[:strings.Index(card, "</ul>")]
	for _, want := range []string{
		`<li class="hidden"><code>` + domain.DisableID + `</code> <span class="muted">— hidden from the agent</span>`,
		`<span class="policy">agents-read-only (registry): hide</span>`,
		`<li class="unavailable"><code>view:devices.table.sortBy</code> <span class="muted">— Sorting is paused.</span><span class="policies"><span class="policy">no-sorting (registry): disable</span></span></li>`,
		`<li class="hidden"><code>` + domain.EnableID + `</code>`,
		`<li class="exposed"><code>view:devices.table.readState</code></li>`,
		`<li class="exposed"><code>` + domain.ListID + `</code></li>`,
	} {
		if !strings.Contains(card, want) {
			t.Errorf("the surface card lacks %s:\n%s", want, card)
		}
	}
	ts, err := surface.NewToolset(s.Registry(), surface.ToolsetOptions{Consumer: console.ConsoleConsumer, Topology: surface.TopologyEmbedded})
	if err != nil {
		t.Fatal(err)
	}
	defer ts.Close()
	for _, tool := range ts.Tools() {
		if tool.CapabilityID == domain.DisableID || tool.CapabilityID == domain.EnableID {
			t.Fatalf("the agent sees the hidden %s", tool.CapabilityID)
		}
	}
}

// The scripted agent on a used database plans from what it reads: after
// a first run disabled London's offline devices, a second run finds no
// site with two offline devices and stops at its plan, saying so and
// naming --reset, without calling anything that changes the surface.
func TestScriptedAgentOnUsedDatabase(t *testing.T) {
	d := newDemo(t, console.Options{})
	first := d.session(t)
	if err := first.PlayScripted(bg, console.ScriptedRun{URL: d.mcpURL(), Approver: "t", HTTPClient: d.srv.Client()}); err != nil {
		t.Fatal(err)
	}
	second := d.session(t)
	var tr steps
	err := second.PlayScripted(bg, console.ScriptedRun{URL: d.mcpURL(), Approver: "t", HTTPClient: d.srv.Client(), Report: tr.report})
	if !errors.Is(err, agent.ErrNothingToDo) || !strings.Contains(err.Error(), "--reset") || !strings.Contains(err.Error(), "London 0") {
		t.Fatalf("%v", err)
	}
	last := tr.list[len(tr.list)-1]
	if last.Title != "plan from the table" || last.Expected() || !strings.Contains(last.Detail, "--reset") {
		t.Fatalf("the last step: %+v", last)
	}
	for _, st := range tr.list {
		if st.Tool != "" && st.Tool != "tools/list" && !strings.HasSuffix(st.Tool, "__readState") {
			t.Fatalf("it called %s", st.Tool)
		}
	}

	// With London's devices offline again and the table filtered, it
	// clears the filter, reads, and plays the task in London.
	for _, id := range []string{"d9", "d10"} {
		if _, err := d.store.Enable(bg, console.Operator, []string{id}, "back"); err != nil {
			t.Fatal(err)
		}
	}
	third := d.session(t)
	m := d.dial(t, third.Token())
	requireCode(t, call(t, m, "view:devices.table.setFilter", `{"status":"online"}`), "ok")
	tr = steps{}
	if err := third.PlayScripted(bg, console.ScriptedRun{URL: d.mcpURL(), Approver: "t", HTTPClient: d.srv.Client(), Report: tr.report}); err != nil {
		t.Fatalf("%v %v", err, tr.outcomes())
	}
	if tr.list[2].Title != "show all devices" || !strings.Contains(tr.list[4].Detail, "2 offline devices in London") {
		t.Fatalf("%+v", tr.list[:5])
	}
}

// The page's scripted agent says that it ignores the prompt it is given.
func TestScriptedAgentSaysItIgnoresThePrompt(t *testing.T) {
	d := newDemo(t, console.Options{})
	s := d.session(t)
	done, err := s.Ask("Enable the printer in London.")
	if err != nil {
		t.Fatal(err)
	}
	p := awaitPending(t, s)
	s.Decide(p.ConfirmationID, false, "olivia")
	<-done
	chat := s.Chat()
	if len(chat) < 2 || chat[1].Step == nil || chat[1].Step.Title != agent.IgnoresPrompt {
		t.Fatalf("%+v", chat[:2])
	}
}

// The Activity card shows a read once, also one that fails before
// reaching the component: such a read is both audited and announced by
// the registry's invocation events, and the card used to show it twice.
// An agent reads the table after the page closed (COMPONENT_UNMOUNTED):
// one line. (Issue 37 item 8.)
func TestActivityShowsAFailedReadOnce(t *testing.T) {
	d := newDemo(t, console.Options{Host: webhost.Options{PageGrace: 1}}) // closed as soon as the stream ends
	s, err := d.app.NewSession(console.SessionOptions{})
	if err != nil {
		t.Fatal(err)
	}
	b := d.browser(t)
	b.get(s.JoinPath())
	tab := b.events()
	m := d.dial(t, s.Token())
	tools, err := m.List(bg)
	if err != nil {
		t.Fatal(err)
	}
	read := tools[slices.IndexFunc(tools, func(x agent.Tool) bool { return x.CapabilityID == "view:devices.table.readState" })].Name
	requireCode(t, must(m.Call(bg, read, nil)), "ok")
	tab.close() // the page closes: the table unmounts
	deadline := time.Now().Add(30 * time.Second)
	for len(s.Registry().Snapshot(surface.SnapshotOptions{}).Components) != 0 {
		if time.Now().After(deadline) {
			t.Fatal("the table did not unmount")
		}
		time.Sleep(10 * time.Millisecond)
	}
	res := must(m.Call(bg, read, nil))
	requireCode(t, res, string(surface.CodeComponentUnmounted))
	var audited bool
	for _, e := range s.Activity() {
		audited = audited || e.InvocationID == res.InvocationID
	}
	if !audited {
		t.Fatal("the failed read was not audited: the test no longer shows what it is about")
	}
	var card strings.Builder
	if err := s.Fragment(bg, &card, "activity"); err != nil {
		t.Fatal(err)
	}
	var reads, failed int
	for _, row := range strings.Split(card.String(), "<tr") {
		if strings.Contains(row, "readState") {
			reads++
			if strings.Contains(row, "UNMOUNTED") && strings.Contains(row, `data-label="Event">read<`) {
				failed++
			}
		}
	}
	if reads != 2 || failed != 1 {
		t.Fatalf("%d lines of reads, %d of the failed one, want 2 and 1:\n%s", reads, failed, card.String())
	}
}

// An approval that expires unanswered does not vanish from the card: the
// card says it expired and that nothing ran, and the Activity card has
// the expiry. (Issue 37 item 8.)
func TestApprovalCardSaysItExpired(t *testing.T) {
	d := newDemo(t, console.Options{Host: webhost.Options{ConfirmationTTL: 300 * time.Millisecond}})
	s := d.session(t)
	b := d.browser(t)
	b.get(s.JoinPath())
	tab := b.events()
	m := d.dial(t, s.Token())
	requireCode(t, call(t, m, "view:devices.table.selectRows", `{"ids":["d4"]}`), "ok")
	res := call(t, m, domain.DisableID, `{"reason":"lobby camera broken"}`)
	requireCode(t, res, string(surface.CodeConfirmationRequired))
	cid := res.Error.ConfirmationID()
	tab.await(t, "agentsurface-approvals", func(h string) bool { return strings.Contains(h, cid) && strings.Contains(h, "Approve") })
	card := tab.await(t, "agentsurface-approvals", func(h string) bool { return !strings.Contains(h, "Approve") })
	if !strings.Contains(card, "⌛ expired") || !strings.Contains(card, "expired before anyone decided: nothing ran") || !strings.Contains(card, "camera-lobby-ams-04") {
		t.Fatalf("the card after the expiry:\n%s", card)
	}
	tab.await(t, "activity", func(h string) bool { return strings.Contains(h, "approval expired") })
	if st := d.status(t); st["d4"] != "offline" {
		t.Fatalf("d4 %s", st["d4"])
	}
}

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}
