package console_test

// Standing grants in the console: the approval card's "approve, and allow
// this for N minutes for these devices", the Grants card with Revoke, and
// the faults an attacker tries through MCP and the page.

import (
	"encoding/json"
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

const (
	capSelect  = "view:devices.table.selectRows"
	capEnable  = "domain:devices.enable"
	taskReason = "offline during the maintenance window"
	reasonArgs = `{"reason":"` + taskReason + `"}`
)

// granted is a session whose MCP agent was allowed, by the person in the
// page's approval card, to disable d9 and d10 with the task's reason for
// 15 minutes: the agent's approved call ran (on the approval, not the
// grant), then it enabled both again, so that both are offline and the
// grant is unused.
type granted struct {
	d       *demo
	s       *console.Session
	b       *browser // the session's browser
	tab     *stream  // its page's event stream, the Grants card included
	m       *agent.MCP
	grantID string
}

func newGranted(t *testing.T) *granted {
	t.Helper()
	d := newDemo(t, console.Options{})
	s := d.session(t)
	b := d.browser(t)
	if code, _ := b.get(s.JoinPath()); code != http.StatusSeeOther {
		t.Fatalf("join: %d", code)
	}
	g := &granted{d: d, s: s, b: b, tab: b.eventsAt(eventsPath + ",grants"), m: d.dial(t, s.Token())}
	requireCode(t, call(t, g.m, capSelect, `{"ids":["d9","d10"]}`), "ok")
	res := call(t, g.m, domain.DisableID, reasonArgs)
	requireCode(t, res, string(surface.CodeConfirmationRequired))
	cid := res.Error.ConfirmationID()
	card := g.tab.await(t, "agentsurface-approvals", func(h string) bool { return strings.Contains(h, cid) })
	for _, want := range []string{`value="grant"`, "Approve, and allow this", "for these devices", `<option value="5">5 minutes</option>`,
		`<option value="15">15 minutes</option>`, "at most 10 times", "the MCP agent (mcp-bridge:agent)",
		"only these devices, or some of them: badge-reader-lon-02 (d9), hvac-ctrl-lon-03 (d10)", "reason exactly &#34;" + taskReason + "&#34;"} {
		if !strings.Contains(card, want) {
			t.Fatalf("the approval card lacks %q:\n%s", want, card)
		}
	}
	if strings.Contains(card, `<option value="60">`) {
		t.Fatalf("the card offers more than the ceiling:\n%s", card)
	}
	if code, msg := b.post("/agentsurface/decide", url.Values{"id": {cid}, "decision": {"grant"}, "minutes": {"15"}}); code != http.StatusNoContent {
		t.Fatalf("approve with a grant: %d %s", code, msg)
	}
	requireCode(t, call(t, g.m, domain.DisableID, reasonArgs), "ok") // the retry, on the approval
	gs := s.Grants()
	if len(gs) != 1 || gs[0].Uses != 0 || gs[0].ConfirmationID != cid {
		t.Fatalf("grants %+v", gs)
	}
	g.grantID = gs[0].GrantID
	requireCode(t, call(t, g.m, capEnable, `{"reason":"back for a check"}`), "ok")
	if st := d.status(t); st["d9"] != "offline" || st["d10"] != "offline" {
		t.Fatalf("devices %v", st)
	}
	return g
}

// disable has the agent select ids and disable them with args.
func (g *granted) disable(t *testing.T, args string, ids ...string) surface.Result {
	t.Helper()
	sel, _ := json.Marshal(map[string]any{"ids": ids})
	requireCode(t, call(t, g.m, capSelect, string(sel)), "ok")
	return call(t, g.m, domain.DisableID, args)
}

// audited checks that the session's audit trail (the console's Activity
// sink) settled invocation id with code ("ok" for success).
func audited(t *testing.T, s *console.Session, id string, code string) {
	t.Helper()
	for _, e := range s.Activity() {
		if e.Type == surface.AuditInvocationSettled && e.InvocationID == id && (string(e.Code) == code || code == "ok" && e.Status == surface.StatusOK) {
			return
		}
	}
	t.Fatalf("invocation %s is not audited as %s", id, code)
}

// The Grants card lists the session's active grant as the person gave
// it — what it allows, to which agent, on which devices (by name) with
// which reason, how many calls are left, until when — and follows it
// live: a call within it spends a use; Revoke (a same-origin post of the
// page, through webhost's Action) ends it, the card empties, and the
// agent's next call within its former terms asks again. Revoking is
// audited with the person's name; a grant that is not active, or not the
// session's, is not revoked.
func TestGrantsCardListsAndRevokes(t *testing.T) {
	g := newGranted(t)
	card := g.tab.await(t, "grants", func(h string) bool { return strings.Contains(h, g.grantID) })
	for _, want := range []string{"Disable devices", "the MCP agent (mcp-bridge:agent)",
		"only these devices, or some of them: badge-reader-lon-02 (d9), hvac-ctrl-lon-03 (d10)",
		"reason exactly &#34;" + taskReason + "&#34;", "nothing set but ids, reason", "10 calls left of 10", "until ", "Revoke", `action="/ui/revoke"`} {
		if !strings.Contains(card, want) {
			t.Fatalf("the Grants card lacks %q:\n%s", want, card)
		}
	}

	res := g.disable(t, reasonArgs, "d9")
	requireCode(t, res, "ok")
	if res.GrantID != g.grantID {
		t.Fatalf("allowed by %q, want %s", res.GrantID, g.grantID)
	}
	audited(t, g.s, res.InvocationID, "ok")
	g.tab.await(t, "grants", func(h string) bool { return strings.Contains(h, "9 calls left of 10") })
	g.tab.await(t, "activity", func(h string) bool {
		h = strings.ReplaceAll(h, "<wbr>", "")
		return strings.Contains(h, "ok · allowed by "+g.grantID) && strings.Contains(h, "grant used")
	})

	if code, msg := g.b.post("/ui/revoke", url.Values{"id": {g.grantID}}); code != http.StatusNoContent {
		t.Fatalf("revoke: %d %s", code, msg)
	}
	g.tab.await(t, "grants", func(h string) bool {
		return !strings.Contains(h, g.grantID) && strings.Contains(h, "No standing grants")
	})
	revoked := slices.ContainsFunc(g.s.Activity(), func(e surface.AuditEvent) bool {
		return e.Type == surface.AuditGrantRevoked && e.GrantID == g.grantID && e.Actor == "olivia (operator, browser)"
	})
	if !revoked {
		t.Fatal("the revocation is not audited with who revoked")
	}
	requireCode(t, call(t, g.m, capEnable, `{"reason":"back again"}`), "ok")
	res = g.disable(t, reasonArgs, "d9")
	requireCode(t, res, string(surface.CodeConfirmationRequired))
	audited(t, g.s, res.InvocationID, string(surface.CodeConfirmationRequired))
	if st := g.d.status(t); st["d9"] != "offline" {
		t.Fatalf("d9 %s after the revoked grant", st["d9"])
	}
	for _, id := range []string{g.grantID, "gnt_nosuchgrant1", ""} {
		if code, _ := g.b.post("/ui/revoke", url.Values{"id": {id}}); code != http.StatusNotFound {
			t.Fatalf("revoke %q: %d", id, code)
		}
	}
}

// An agent cannot make, widen or present a grant: no tool is about
// grants; grant fields in the input are refused by the schema (and the
// bound ids are locked); grant fields in _meta are ignored (the call
// outside the grant asks); with its bearer token it can reach none of the
// routes that make or end grants (the approvals card's decide, the
// Grants card's revoke, the approve page). Nothing it asked for ran, the
// grant is as the person made it, and every call is in the audit trail.
func TestAgentCannotMakeOrUseGrants(t *testing.T) {
	g := newGranted(t)
	tools, err := g.m.List(bg)
	if err != nil {
		t.Fatal(err)
	}
	for _, tool := range tools {
		if strings.Contains(strings.ToLower(tool.Name+tool.Description), "grant") {
			t.Fatalf("a tool about grants: %+v", tool)
		}
	}
	requireCode(t, call(t, g.m, capSelect, `{"ids":["d8"]}`), "ok")
	for _, args := range []string{
		`{"reason":"` + taskReason + `","grantId":"` + g.grantID + `"}`,
		`{"reason":"` + taskReason + `","grant":{"ttlMs":86400000,"maxUses":1000,"consumer":"*"}}`,
		`{"reason":"` + taskReason + `","ids":["d9"]}`, // the bound ids are locked
	} {
		res := call(t, g.m, domain.DisableID, args)
		requireCode(t, res, string(surface.CodeInvalidInput))
		audited(t, g.s, res.InvocationID, string(surface.CodeInvalidInput))
	}
	name := tools[slices.IndexFunc(tools, func(x agent.Tool) bool { return x.CapabilityID == domain.DisableID })].Name
	r, err := g.m.Session().CallTool(bg, &mcp.CallToolParams{Name: name, Arguments: json.RawMessage(reasonArgs), Meta: mcp.Meta{
		"agentsurface/grantId": g.grantID, "grantId": g.grantID, mcpsurface.MetaConfirmationID: "cnf_forgedforged",
		"agentsurface/grant": map[string]any{"constraints": []any{}, "consumer": "*"}}})
	if err != nil {
		t.Fatal(err)
	}
	res, _ := agent.Envelope(r)
	if res.Status == surface.StatusOK || res.GrantID != "" {
		t.Fatalf("d8 outside the grant, with grant fields in _meta: %+v", res)
	}
	audited(t, g.s, res.InvocationID, string(res.Error.Code))
	res = call(t, g.m, domain.DisableID, reasonArgs)
	requireCode(t, res, string(surface.CodeConfirmationRequired))
	link := res.Error.ApproveURL()
	if link == "" {
		t.Fatal("no approve link")
	}

	// The agent's token on the routes that make or end grants.
	bearer := http.Header{"Authorization": {"Bearer " + g.s.Token()}, "Sec-Fetch-Site": {"same-origin"},
		"Content-Type": {"application/x-www-form-urlencoded"}}
	for _, r := range []struct{ method, path, body string }{
		{"POST", "/agentsurface/decide", url.Values{"id": {res.Error.ConfirmationID()}, "decision": {"grant"}, "minutes": {"15"}}.Encode()},
		{"POST", "/ui/revoke", "id=" + g.grantID},
		{"GET", mustURL(t, link).RequestURI(), ""},
		{"POST", mustURL(t, link).RequestURI(), "decision=grant&minutes=15"},
	} {
		if got := g.d.raw(t, r.method, r.path, "", bearer, r.body); got.StatusCode != http.StatusUnauthorized {
			t.Fatalf("%s %s with the agent's token: %d", r.method, r.path, got.StatusCode)
		}
	}
	// The approve page, which the link reached, recorded its refusals in
	// the session's trail (the decide and revoke routes refused before
	// any session was named: those are logged and counted).
	n := 0
	for _, e := range g.s.Activity() {
		if e.Type == webhost.AuditApproveRefused && e.ConfirmationID == res.Error.ConfirmationID() && strings.HasPrefix(e.Reason, "sign-in: ") {
			n++
		}
	}
	if n != 2 {
		t.Fatalf("%d refusals of the approve link audited, want 2", n)
	}
	if st := g.d.app.Host().Stats(); st.Refused.Ended < 2 || st.Refused.Approve < 2 {
		t.Fatalf("the refusals are not counted: %+v", st.Refused)
	}
	gs := g.s.Grants()
	if len(gs) != 1 || gs[0].GrantID != g.grantID || gs[0].Uses != 0 || gs[0].MaxUses != console.DisableGrants.MaxUses || len(g.s.Pending()) != 1 {
		t.Fatalf("grants %+v, pending %+v", gs, g.s.Pending())
	}
	if st := g.d.status(t); st["d8"] != "online" || st["d9"] != "offline" || st["d10"] != "offline" {
		t.Fatalf("devices %v", st)
	}
}

// A grant is the session's, for the consumer the person approved: the
// browser's agent (WebMCP) of the same session, and the MCP agent of
// another session of the same user, disabling the very devices with the
// very reason, are asked; the person denies, and nothing runs. Another
// session's page cannot revoke the grant. A second MCP client holding
// the session's token is the same consumer (mcp-bridge:agent), which the
// card names: the grant lets it through (grants are per consumer, not
// per client: DESIGN decision 25).
func TestGrantIsTheConsumersOfTheSession(t *testing.T) {
	g := newGranted(t)
	requireCode(t, call(t, g.m, capSelect, `{"ids":["d9"]}`), "ok")

	// The browser's agent, through the page's WebMCP endpoint.
	offered := g.b.webmcpTools()
	done := make(chan surface.Result, 1)
	go func() {
		body, _ := json.Marshal(map[string]any{"name": "domain_devices__disable", "surfaceVersion": offered.SurfaceVersion, "input": json.RawMessage(reasonArgs)})
		_, out, _ := g.b.tryWebMCPPost(string(body))
		var res surface.Result
		_ = json.Unmarshal([]byte(out), &res)
		done <- res
	}()
	p := awaitPending(t, g.s)
	if p.ConsumerKey != console.WebMCPConsumer.Key() || !strings.Contains(string(p.Input), `"d9"`) {
		t.Fatalf("pending %+v", p)
	}
	if code, msg := g.b.post("/agentsurface/decide", url.Values{"id": {p.ConfirmationID}, "decision": {"deny"}}); code != http.StatusNoContent {
		t.Fatalf("deny: %d %s", code, msg)
	}
	if res := <-done; res.Status == surface.StatusOK || res.Error == nil || res.Error.Code != surface.CodeConfirmationInvalid || res.GrantID != "" {
		t.Fatalf("the browser's agent: %+v", res)
	}

	// Another session of the same user.
	other := g.d.session(t)
	mo := g.d.dial(t, other.Token())
	requireCode(t, call(t, mo, capSelect, `{"ids":["d9"]}`), "ok")
	res := call(t, mo, domain.DisableID, reasonArgs)
	requireCode(t, res, string(surface.CodeConfirmationRequired))
	audited(t, other, res.InvocationID, string(surface.CodeConfirmationRequired))
	ob := g.d.browser(t)
	if code, _ := ob.get(other.JoinPath()); code != http.StatusSeeOther {
		t.Fatalf("join: %d", code)
	}
	if code, _ := ob.post("/ui/revoke", url.Values{"id": {g.grantID}}); code != http.StatusNotFound {
		t.Fatalf("another session revoking the grant: %d", code)
	}
	if st := g.d.status(t); st["d9"] != "offline" || len(g.s.Grants()) != 1 || g.s.Grants()[0].Uses != 0 {
		t.Fatalf("d9 %s, grants %+v", st["d9"], g.s.Grants())
	}
	denied := slices.ContainsFunc(g.s.Activity(), func(e surface.AuditEvent) bool {
		return e.Type == surface.AuditConfirmationDenied && e.ConfirmationID == p.ConfirmationID
	})
	if !denied {
		t.Fatal("the browser's agent's request and its denial are not audited")
	}

	// A second MCP client with the session's token: the same consumer.
	second := g.d.dial(t, g.s.Token())
	res = call(t, second, domain.DisableID, reasonArgs)
	requireCode(t, res, "ok")
	if res.GrantID != g.grantID {
		t.Fatalf("the same consumer's second client: allowed by %q", res.GrantID)
	}
}

// An expired grant lets nothing through: a grant the host made for a
// moment ends (its expiry is audited and the Grants card drops it), and
// the agent's call within its terms then asks. Waits are for the grant's
// state, never for a duration.
func TestExpiredGrantAsks(t *testing.T) {
	d := newDemo(t, console.Options{})
	s := d.session(t)
	b := d.browser(t)
	if code, _ := b.get(s.JoinPath()); code != http.StatusSeeOther {
		t.Fatalf("join: %d", code)
	}
	tab := b.eventsAt(eventsPath + ",grants")
	m := d.dial(t, s.Token())
	requireCode(t, call(t, m, capSelect, `{"ids":["d9"]}`), "ok")
	ended := make(chan struct{}, 1)
	unsub := s.Registry().Grants().Subscribe(func(list []surface.Grant) {
		if len(list) == 0 {
			select {
			case ended <- struct{}{}:
			default:
			}
		}
	})
	defer unsub()
	gr, err := s.Registry().Grants().Create(bg, surface.GrantSpec{ConsumerKey: console.MCPConsumer.Key(), CapabilityID: domain.DisableID,
		Constraints: []surface.Constraint{surface.ValueIn("ids", "d9"), surface.ValueIn("reason", taskReason)}, TTL: 50 * time.Millisecond, MaxUses: 1}, "test")
	if err != nil {
		t.Fatal(err)
	}
	select {
	case <-ended:
	case <-time.After(30 * time.Second):
		t.Fatal("the grant did not expire")
	}
	if v, _ := s.Registry().Grants().Get(gr.GrantID); v.State != surface.GrantExpired {
		t.Fatalf("grant %+v", v)
	}
	tab.await(t, "grants", func(h string) bool { return strings.Contains(h, "No standing grants") })
	res := call(t, m, domain.DisableID, reasonArgs)
	requireCode(t, res, string(surface.CodeConfirmationRequired))
	audited(t, s, res.InvocationID, string(surface.CodeConfirmationRequired))
	if st := d.status(t); st["d9"] != "offline" {
		t.Fatalf("d9 %s", st["d9"])
	}
	expired := slices.ContainsFunc(s.Activity(), func(e surface.AuditEvent) bool {
		return e.Type == surface.AuditGrantExpired && e.GrantID == gr.GrantID
	})
	if !expired {
		t.Fatal("the expiry is not audited")
	}
	tab.await(t, "activity", func(h string) bool { return strings.Contains(h, "grant ended") })
}

// Type confusion does not escape a grant's constraints: an id as a
// number, a look-alike (a full-width digit, another case) or a padded
// one is refused before anything asks (the schema, the table's visible
// rows); one extra id in the list, a reason that is a number, a
// look-alike of the approved reason (a Cyrillic о) or the reason with a
// trailing space asks again or is refused; nothing of it runs, and every
// call is in the audit trail. Within the terms, exactly, the grant lets
// the call through.
func TestGrantTypeConfusion(t *testing.T) {
	g := newGranted(t)
	for _, sel := range []struct{ args, code string }{
		{`{"ids":[9]}`, string(surface.CodeInvalidInput)},
		{`{"ids":["d９"]}`, string(surface.CodePreconditionFailed)},
		{`{"ids":["D9"]}`, string(surface.CodePreconditionFailed)},
		{`{"ids":["d9 "]}`, string(surface.CodePreconditionFailed)},
		{`{"ids":"d9"}`, string(surface.CodeInvalidInput)},
	} {
		res := call(t, g.m, capSelect, sel.args)
		requireCode(t, res, sel.code)
		audited(t, g.s, res.InvocationID, sel.code)
	}
	for _, c := range []struct {
		ids        []string
		args, code string
	}{
		{[]string{"d9", "d8"}, reasonArgs, string(surface.CodeConfirmationRequired)},
		{[]string{"d8"}, reasonArgs, string(surface.CodeConfirmationRequired)},
		{[]string{"d9"}, `{"reason":123}`, string(surface.CodeInvalidInput)},
		{[]string{"d9"}, `{"reason":"оffline during the maintenance window"}`, string(surface.CodeConfirmationRequired)},
		{[]string{"d9"}, `{"reason":"` + taskReason + ` "}`, string(surface.CodeConfirmationRequired)},
		{[]string{"d9"}, `{"reason":"OFFLINE DURING THE MAINTENANCE WINDOW"}`, string(surface.CodeConfirmationRequired)},
	} {
		res := g.disable(t, c.args, c.ids...)
		requireCode(t, res, c.code)
		if res.GrantID != "" {
			t.Fatalf("%v %s: allowed by %s", c.ids, c.args, res.GrantID)
		}
		audited(t, g.s, res.InvocationID, c.code)
	}
	if st := g.d.status(t); st["d8"] != "online" || st["d9"] != "offline" || st["d10"] != "offline" {
		t.Fatalf("devices %v", st)
	}
	if gs := g.s.Grants(); len(gs) != 1 || gs[0].Uses != 0 {
		t.Fatalf("grants %+v", gs)
	}
	res := g.disable(t, reasonArgs, "d10", "d9")
	requireCode(t, res, "ok")
	if res.GrantID != g.grantID {
		t.Fatalf("within the terms: allowed by %q", res.GrantID)
	}
}
