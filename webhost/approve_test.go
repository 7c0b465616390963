package webhost_test

// The approve page and its signed links, as the user and as an attacker.

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"html"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/agentsurface/agentsurface/mcpsurface"
	"github.com/agentsurface/agentsurface/surface"
	"github.com/agentsurface/agentsurface/webhost"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"pgregory.net/rapid"
)

// logs is a log that tests read.
type logs struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (l *logs) logger() *slog.Logger {
	return slog.New(slog.NewTextHandler(syncWriter{&l.mu, &l.buf}, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

func (l *logs) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.String()
}

// count counts the lines of the log that contain every one of parts.
func (l *logs) count(parts ...string) int {
	n := 0
	for line := range strings.Lines(l.String()) {
		ok := true
		for _, p := range parts {
			ok = ok && strings.Contains(line, p)
		}
		if ok {
			n++
		}
	}
	return n
}

// newArchiveApp serves the notes application with the archive action
// (which allows standing grants), at a PublicURL that is its server's.
func newArchiveApp(t testing.TB, opts webhost.Options) *app {
	t.Helper()
	if opts.NewViews == nil {
		opts.NewViews = func(s *webhost.Session) (webhost.Views, error) { return &board{s: s, archivable: true}, nil }
	}
	srv := httptest.NewUnstartedServer(nil)
	if opts.PublicURL == "" {
		opts.PublicURL = "http://" + srv.Listener.Addr().String()
	}
	h, err := webhost.New(opts)
	if err != nil {
		srv.Close()
		t.Fatal(err)
	}
	srv.Config.Handler = h.Handler(mux(h))
	srv.Start()
	t.Cleanup(func() {
		_ = h.Close()
		srv.Close()
	})
	return &app{h: h, srv: srv}
}

// headerUser is an Options.User: the signed-in user is the X-User
// header, and a request without one is not signed in.
func headerUser(r *http.Request) (string, error) {
	if u := r.Header.Get("X-User"); u != "" {
		return u, nil
	}
	return "", http.ErrNoCookie
}

// as is a browser signed in as user (Options.User headerUser).
func (a *app) as(t testing.TB, user string) *browser {
	b := a.browser(t)
	b.header.Set("X-User", user)
	return b
}

// archivable makes a session with the archive action, kept shown.
func (a *app) archivable(t testing.TB, user string) *webhost.Session {
	t.Helper()
	s, err := a.h.NewSession(webhost.SessionOptions{KeepShown: true, User: user})
	if err != nil {
		t.Fatal(err)
	}
	boardOf(s).add("first")
	return s
}

func (b *board) archivedIDs() [][]string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return slices.Clone(b.archived)
}

// ask has the session's agent call archive with ids over MCP: the call
// needs approval; it returns the pending request and the agent.
func ask(t testing.TB, a *app, s *webhost.Session, args string) (surface.PendingConfirmation, *mcp.ClientSession) {
	t.Helper()
	cs := a.dial(t, s.Token(), sessionless)
	res := callTool(t, cs, "view:notes.archive.archive", args, nil)
	requireCode(t, res, string(surface.CodeConfirmationRequired))
	id, _ := res.Error.Details["confirmationId"].(string)
	for _, p := range s.Pending() {
		if p.ConfirmationID == id {
			return p, cs
		}
	}
	t.Fatalf("%s is not pending", id)
	return surface.PendingConfirmation{}, nil
}

// retry is the agent's retry with the confirmation id as evidence.
func retry(t testing.TB, cs *mcp.ClientSession, capabilityID, args, confirmationID string) surface.Result {
	t.Helper()
	return callTool(t, cs, capabilityID, args, mcp.Meta{mcpsurface.MetaConfirmationID: confirmationID})
}

// pathOf returns the path and query of an absolute link, for a browser
// of the app.
func pathOf(t testing.TB, link string) string {
	t.Helper()
	u, err := url.Parse(link)
	if err != nil || u.Path == "" {
		t.Fatalf("link %q: %v", link, err)
	}
	return u.RequestURI()
}

var (
	stateRe   = regexp.MustCompile(`data-state="([a-z]+)"`)
	refusalRe = regexp.MustCompile(`data-refusal="([a-z-]+)"`)
	outcomeRe = regexp.MustCompile(`class="outcome" data-outcome="([a-z]+)"`)
)

// pageState returns what an approve page shows: ask, decided or refused,
// and the refusal's reason.
func pageState(body string) (state, refusal string) {
	if m := stateRe.FindStringSubmatch(body); m != nil {
		state = m[1]
	}
	if m := refusalRe.FindStringSubmatch(body); m != nil {
		refusal = m[1]
	}
	return state, refusal
}

// decideVia posts a decision to an approve page as its form does.
func (b *browser) decideVia(path string, form url.Values) (int, string) {
	b.t.Helper()
	req, _ := http.NewRequest(http.MethodPost, b.a.srv.URL+path, strings.NewReader(form.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Sec-Fetch-Site", "same-origin")
	req.Header.Set("Origin", b.a.srv.URL)
	return b.do(req)
}

// The approve link, end to end: the agent's call needs approval; its
// link opens, in a browser that has never seen the application, a page
// with the exact input (escaped), the summary, who asks and the expiry;
// opening it decides nothing (not even with a decision in its query),
// sets no cookie and binds the browser to nothing; the click decides, as
// "link", by the session's user; the agent's retry runs once. Replayed,
// the link only says the request was decided. AS-CONFIRM-001 (the exact
// input), AS-CONFIRM-003 (single use).
func TestApproveLinkDecidesOnce(t *testing.T) {
	audit := surface.NewMemorySink(100)
	var mu sync.Mutex
	var changes []surface.ConfirmationChange
	a := newArchiveApp(t, webhost.Options{User: headerUser, Registry: func(_ *webhost.Session, o *surface.Options) {
		o.Audit = audit
		o.Telemetry = &surface.Telemetry{Confirmation: func(c surface.ConfirmationChange) {
			mu.Lock()
			changes = append(changes, c)
			mu.Unlock()
		}}
	}})
	s := a.archivable(t, "alice")
	args := `{"ids":["n1","<script>alert(1)</script>"]}`
	p, cs := ask(t, a, s, args)
	link := s.ApproveURL(p)
	if !strings.HasPrefix(link, a.srv.URL+"/agentsurface/approve/"+p.ConfirmationID+"?link="+s.ID()+".u.") {
		t.Fatalf("the link %q", link)
	}
	if got := a.h.ApproveURL(bg, p); got != link {
		t.Fatalf("Host.ApproveURL %q, Session.ApproveURL %q", got, link)
	}
	if got := a.h.ApproveURL(bg, surface.PendingConfirmation{ConfirmationID: p.ConfirmationID}); got != link {
		t.Fatalf("Host.ApproveURL by id alone: %q", got)
	}
	// The agent holds the link: with it and its bearer token, not signed
	// in as alice, it opens nothing and decides nothing.
	path := pathOf(t, link)
	agent := http.Header{"Authorization": {"Bearer " + s.Token()}, "Sec-Fetch-Site": {"same-origin"},
		"Content-Type": {"application/x-www-form-urlencoded"}}
	for _, m := range []string{"GET", "POST"} {
		if res := a.raw(t, m, path, "", agent, "decision=approve"); res.StatusCode != http.StatusUnauthorized {
			t.Fatalf("the agent %s its link: %d", m, res.StatusCode)
		}
	}
	phone := a.as(t, "alice")
	for _, q := range []string{"", "&decision=approve"} {
		req, _ := http.NewRequest(http.MethodGet, a.srv.URL+path+q, nil)
		req.Header.Set("X-User", "alice")
		res, err := phone.client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(res.Body)
		res.Body.Close()
		page := string(body)
		if state, _ := pageState(page); res.StatusCode != http.StatusOK || state != "ask" {
			t.Fatalf("GET the link: %d %s", res.StatusCode, page)
		}
		if len(res.Cookies()) != 0 || phone.cookie() != "" {
			t.Fatalf("the link set a cookie: %v", res.Cookies())
		}
		if res.Header.Get("Cache-Control") != "no-store" || res.Header.Get("Content-Security-Policy") != webhost.DefaultContentSecurityPolicy ||
			res.Header.Get("X-Frame-Options") != "DENY" {
			t.Fatalf("headers %v", res.Header)
		}
		for _, want := range []string{p.CapabilityID, "mcp-bridge:agent", html.EscapeString(p.Summary), `&#34;n1&#34;`,
			`&lt;script&gt;alert(1)&lt;/script&gt;`, p.ExpiresAt.UTC().Format("15:04:05"), `value="approve"`, `value="deny"`,
			`href="/agentsurface/approve.css"`} {
			if !strings.Contains(page, want) {
				t.Errorf("the page lacks %q:\n%s", want, page)
			}
		}
		if strings.Contains(page, "<script>alert") || strings.Contains(page, "<script") {
			t.Fatalf("the page runs a script:\n%s", page)
		}
	}
	if len(s.Pending()) != 1 || len(s.Decisions()) != 0 {
		t.Fatal("a GET decided")
	}
	if code, css := phone.get("/agentsurface/approve.css"); code != http.StatusOK || !strings.Contains(css, ".actions") {
		t.Fatalf("the stylesheet: %d", code)
	}

	code, page := phone.decideVia(path, url.Values{"decision": {"approve"}})
	if m := outcomeRe.FindStringSubmatch(page); code != http.StatusOK || m == nil || m[1] != "approved" {
		t.Fatalf("approve: %d %s", code, page)
	}
	ds := s.Decisions()
	if len(ds) != 1 || ds[0].Outcome != surface.OutcomeApproved || ds[0].Channel != surface.ChannelLink || ds[0].Actor != "alice (link)" {
		t.Fatalf("decisions %+v", ds)
	}
	requireCode(t, retry(t, cs, "view:notes.archive.archive", args, p.ConfirmationID), "ok")
	if got := boardOf(s).archivedIDs(); len(got) != 1 {
		t.Fatalf("archived %v", got)
	}
	// The registry's audit and telemetry say who decided, and how.
	approved := slices.IndexFunc(audit.Events(), func(e surface.AuditEvent) bool {
		return e.Type == surface.AuditConfirmationApproved && e.ConfirmationID == p.ConfirmationID && e.Actor == "alice (link)"
	})
	mu.Lock()
	decided := slices.IndexFunc(changes, func(c surface.ConfirmationChange) bool {
		return c.ConfirmationID == p.ConfirmationID && c.Outcome == surface.OutcomeApproved && c.Channel == surface.ChannelLink && c.Approver == surface.ApproverUser
	})
	mu.Unlock()
	if approved < 0 || decided < 0 {
		t.Fatalf("audit %+v, telemetry %+v", audit.Events(), changes)
	}

	// Replayed: the page says it is decided, and nothing more happens.
	for _, try := range []func() (int, string){
		func() (int, string) { return phone.get(path) },
		func() (int, string) { return phone.decideVia(path, url.Values{"decision": {"approve"}}) },
		func() (int, string) { return a.as(t, "alice").decideVia(path, url.Values{"decision": {"deny"}}) },
	} {
		code, page := try()
		if _, reason := pageState(page); code != http.StatusGone || reason != "decided" || !strings.Contains(page, "approved already by alice (link)") {
			t.Fatalf("replayed: %d %s", code, page)
		}
	}
	if ds := s.Decisions(); len(ds) != 1 || ds[0].Outcome != surface.OutcomeApproved {
		t.Fatalf("decisions after the replay %+v", ds)
	}
	retry(t, cs, "view:notes.archive.archive", args, p.ConfirmationID) // a replay of the settled call, at most
	if got := boardOf(s).archivedIDs(); len(got) != 1 {
		t.Fatalf("archived %v", got)
	}
	if s.ApproveURL(p) != "" {
		t.Fatal("a link for a decided request")
	}
}

// The approve page in the session's own browser: its cookie opens it
// (ApprovePath) and its click decides, as "page"; without the cookie,
// with only the agent's MCP bearer token, or with another session's
// cookie, it opens nothing and decides nothing — another session's
// request and an unknown one answer alike.
func TestApprovePageWithTheCookie(t *testing.T) {
	a := newArchiveApp(t, webhost.Options{})
	b := a.browser(t)
	s := b.page()
	boardOf(s).mu.Lock()
	boardOf(s).archivable = true
	boardOf(s).mu.Unlock()
	b.open(false) // the page mounts the views
	other := a.browser(t)
	other.page()
	eventually(t, "the archive is mounted", func() bool { return len(s.Registry().Snapshot(surface.SnapshotOptions{}).Components) == 2 })
	p, cs := ask(t, a, s, `{"ids":["n1"]}`)
	path := a.h.ApprovePath(p.ConfirmationID)

	bearer := http.Header{"Authorization": {"Bearer " + s.Token()}, "Sec-Fetch-Site": {"same-origin"}, "Content-Type": {"application/x-www-form-urlencoded"}}
	if res := a.raw(t, "GET", path, "", bearer, ""); res.StatusCode != http.StatusUnauthorized {
		t.Fatalf("GET with the agent's token: %d", res.StatusCode)
	}
	if res := a.raw(t, "POST", path, "", bearer, "decision=approve"); res.StatusCode != http.StatusUnauthorized {
		t.Fatalf("POST with the agent's token: %d", res.StatusCode)
	}
	code, theirs := other.get(path)
	unknownCode, unknown := other.get(a.h.ApprovePath("cnf_nosuchthing1"))
	if _, reason := pageState(theirs); code != http.StatusNotFound || reason != "not-found" || unknownCode != code ||
		strings.ReplaceAll(theirs, p.ConfirmationID, "") != strings.ReplaceAll(unknown, "cnf_nosuchthing1", "") {
		t.Fatalf("another session's request: %d %s; an unknown one: %d %s", code, theirs, unknownCode, unknown)
	}
	if code, _ := other.decideVia(path, url.Values{"decision": {"approve"}}); code != http.StatusNotFound {
		t.Fatalf("another session deciding: %d", code)
	}
	if len(s.Pending()) != 1 || len(s.Decisions()) != 0 {
		t.Fatal("decided without the session's cookie")
	}

	code, page := b.get(path)
	if state, _ := pageState(page); code != http.StatusOK || state != "ask" || !strings.Contains(page, `action="`+path+`"`) {
		t.Fatalf("the page with the cookie: %d %s", code, page)
	}
	code, page = b.decideVia(path, url.Values{"decision": {"deny"}})
	if m := outcomeRe.FindStringSubmatch(page); code != http.StatusOK || m == nil || m[1] != "denied" {
		t.Fatalf("deny: %d %s", code, page)
	}
	if ds := s.Decisions(); len(ds) != 1 || ds[0].Outcome != surface.OutcomeDenied || ds[0].Channel != surface.ChannelPage || ds[0].Actor != "anonymous (page)" {
		t.Fatalf("decisions %+v", ds)
	}
	requireCode(t, retry(t, cs, "view:notes.archive.archive", `{"ids":["n1"]}`, p.ConfirmationID), string(surface.CodeConfirmationInvalid))
	if len(boardOf(s).archivedIDs()) != 0 {
		t.Fatal("a denied call ran")
	}
}

// An attacker's links: a signature with a bit flipped, truncated,
// extended, empty, re-encoded, of another request of the same session,
// of another session, a session id swapped, the link of one request
// presented for another. Each is refused with the one 404 an unknown
// request gets (no oracle), on GET and POST; nothing is decided; each is
// logged at warn without the signature, and counted.
func TestForgedApproveLinksRefused(t *testing.T) {
	var log logs
	a := newArchiveApp(t, webhost.Options{Logger: log.logger(), User: headerUser})
	s, other := a.archivable(t, "alice"), a.archivable(t, "alice")
	p, _ := ask(t, a, s, `{"ids":["n1"]}`)
	p2, _ := ask(t, a, s, `{"ids":["n2"]}`)
	po, _ := ask(t, a, other, `{"ids":["n1"]}`)
	link, link2, linkOther := s.ApproveURL(p), s.ApproveURL(p2), other.ApproveURL(po)
	sig := func(link string) (sidKind, sig string) { // "s_….u", signature
		v := must(url.Parse(link)).Query().Get("link")
		i := strings.LastIndex(v, ".")
		return v[:i], v[i+1:]
	}
	sid, good := sig(link)
	osid, otherSig := sig(linkOther)
	_, sig2 := sig(link2)
	bare := strings.TrimSuffix(sid, ".u")
	raw := must(base64.RawURLEncoding.DecodeString(good))
	flipped := func(bit int) string {
		b := slices.Clone(raw)
		b[bit/8] ^= 1 << (bit % 8)
		return base64.RawURLEncoding.EncodeToString(b)
	}
	// The last character of 32 bytes in base64 carries 2 unused bits: a
	// lax decoder would take a second spelling of the same signature.
	last := good[len(good)-1]
	alphabet := "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"
	respelled := good[:len(good)-1] + string(alphabet[strings.IndexByte(alphabet, last)^1])
	approve := func(id string) string { return "/agentsurface/approve/" + id }
	q := func(v string) string { return "?" + url.Values{"link": {v}}.Encode() }
	forged := map[string]string{
		"bit 0 flipped":                 approve(p.ConfirmationID) + q(sid+"."+flipped(0)),
		"bit 255 flipped":               approve(p.ConfirmationID) + q(sid+"."+flipped(255)),
		"truncated":                     approve(p.ConfirmationID) + q(sid+"."+good[:len(good)-1]),
		"truncated to nothing":          approve(p.ConfirmationID) + q(sid+"."),
		"extended":                      approve(p.ConfirmationID) + q(sid+"."+good+"A"),
		"respelled":                     approve(p.ConfirmationID) + q(sid+"."+respelled),
		"no session":                    approve(p.ConfirmationID) + q(good),
		"another request's signature":   approve(p.ConfirmationID) + q(sid+"."+sig2),
		"the signature on another id":   approve(p2.ConfirmationID) + q(sid+"."+good),
		"another session's id":          approve(p.ConfirmationID) + q(osid+"."+good),
		"another session's request":     approve(po.ConfirmationID) + q(sid+"."+otherSig),
		"another session's signature":   approve(p.ConfirmationID) + q(sid+"."+otherSig),
		"a request of the other's link": approve(p.ConfirmationID) + q(osid+"."+otherSig),
		"an unknown session":            approve(p.ConfirmationID) + q("s_nosuchsession.u."+good),
		"no kind":                       approve(p.ConfirmationID) + q(bare+"."+good),
		"another kind":                  approve(p.ConfirmationID) + q(bare+".x."+good),
		"the notified kind":             approve(p.ConfirmationID) + q(bare+".n."+good),
		"an unknown request":            approve("cnf_nosuchthing1") + q(sid+"."+good),
	}
	phone := a.as(t, "alice")
	_, want := phone.get(forged["an unknown request"])
	want = strings.ReplaceAll(want, "cnf_nosuchthing1", "")
	for name, path := range forged {
		code, page := phone.get(path)
		_, reason := pageState(page)
		id := strings.TrimPrefix(strings.Split(path, "?")[0], "/agentsurface/approve/")
		if code != http.StatusNotFound || reason != "not-found" || strings.ReplaceAll(page, id, "") != want {
			t.Errorf("GET %s: %d %s", name, code, page)
		}
		if code, _ := phone.decideVia(path, url.Values{"decision": {"approve"}}); code != http.StatusNotFound {
			t.Errorf("POST %s: %d", name, code)
		}
	}
	if len(s.Pending()) != 2 || len(other.Pending()) != 1 || len(s.Decisions())+len(other.Decisions()) != 0 {
		t.Fatalf("a forged link decided: %+v %+v", s.Decisions(), other.Decisions())
	}
	if n := log.count("level=WARN", "approve page refused", "reason=not-found"); n != 2*len(forged)+1 {
		t.Fatalf("%d refusals logged, want %d:\n%s", n, 2*len(forged)+1, log.String())
	}
	if n := log.count("why=\"forged link\""); n == 0 {
		t.Fatalf("no forgery logged as such:\n%s", log.String())
	}
	if st := a.h.Stats(); st.Refused.Approve != uint64(2*len(forged)+1) {
		t.Fatalf("stats %+v", st.Refused)
	}
	for _, secret := range []string{good, otherSig, sig2, flipped(0)} {
		if strings.Contains(log.String(), secret) {
			t.Fatal("the log holds a link's signature")
		}
	}
	// The genuine links still work.
	for _, l := range []string{link, link2} {
		if code, page := phone.get(pathOf(t, l)); code != http.StatusOK {
			t.Fatalf("the genuine link: %d %s", code, page)
		}
	}
}

// With Options.User, a link needs its session's user signed in: opened
// by another signed-in user it is refused (403), and opened by nobody
// signed in it asks to sign in (401) — and the link stays good for its
// user, whose decision records them. Both refusals are logged.
func TestApproveLinkNeedsItsUser(t *testing.T) {
	var log logs
	a := newArchiveApp(t, webhost.Options{Logger: log.logger(), User: func(r *http.Request) (string, error) {
		if u := r.Header.Get("X-User"); u != "" {
			return u, nil
		}
		return "", http.ErrNoCookie
	}})
	s := a.archivable(t, "alice")
	p, cs := ask(t, a, s, `{"ids":["n1"]}`)
	path := pathOf(t, s.ApproveURL(p))
	bob, nobody, alice := a.browser(t), a.browser(t), a.browser(t)
	bob.header.Set("X-User", "bob")
	alice.header.Set("X-User", "alice")
	for name, b := range map[string]*browser{"bob": bob, "nobody": nobody} {
		want, reason := http.StatusForbidden, "other-user"
		if name == "nobody" {
			want, reason = http.StatusUnauthorized, "sign-in"
		}
		code, page := b.get(path)
		if _, got := pageState(page); code != want || got != reason || strings.Contains(page, `n1`) {
			t.Fatalf("%s opens alice's link: %d %s", name, code, page)
		}
		if code, _ := b.decideVia(path, url.Values{"decision": {"approve"}}); code != want {
			t.Fatalf("%s posts to alice's link: %d", name, code)
		}
	}
	if len(s.Decisions()) != 0 {
		t.Fatal("decided by another user")
	}
	if n := log.count("level=WARN", "reason=other-user"); n != 2 {
		t.Fatalf("%d other-user refusals logged:\n%s", n, log.String())
	}
	if code, _ := alice.decideVia(path, url.Values{"decision": {"approve"}}); code != http.StatusOK {
		t.Fatalf("alice: %d", code)
	}
	if ds := s.Decisions(); len(ds) != 1 || ds[0].Actor != "alice (link)" {
		t.Fatalf("decisions %+v", ds)
	}
	requireCode(t, retry(t, cs, "view:notes.archive.archive", `{"ids":["n1"]}`, p.ConfirmationID), "ok")
}

// The approve page decides only on a same-origin POST: a cross-site
// post with a genuine link (or the cookie) is refused before anything
// is looked up, a GET never decides, a post with a decision the page did
// not offer is refused; a link a URL-mode elicitation opened records its
// channel as "url".
func TestApprovePostGuarded(t *testing.T) {
	var log logs
	a := newArchiveApp(t, webhost.Options{Logger: log.logger(), User: headerUser})
	s := a.archivable(t, "alice")
	p, _ := ask(t, a, s, `{"ids":["n1"]}`)
	path := pathOf(t, s.ApproveURL(p))
	form := "decision=approve"
	for _, hdr := range []http.Header{
		{"Sec-Fetch-Site": {"cross-site"}, "X-User": {"alice"}},
		{"Sec-Fetch-Site": {"same-site"}, "X-User": {"alice"}},
		{"Origin": {"https://evil.example"}, "X-User": {"alice"}},
	} {
		hdr.Set("Content-Type", "application/x-www-form-urlencoded")
		res := a.raw(t, "POST", path, "", hdr, form)
		if res.StatusCode != http.StatusForbidden {
			t.Fatalf("a cross-origin post %v: %d", hdr, res.StatusCode)
		}
	}
	if n := log.count("level=WARN", "reason=cross-origin"); n != 3 {
		t.Fatalf("%d cross-origin refusals logged", n)
	}
	for _, m := range []string{"GET", "HEAD"} {
		if res := a.raw(t, m, path+"&decision=approve", "", http.Header{"X-User": {"alice"}}, ""); res.StatusCode != http.StatusOK {
			t.Fatalf("%s: %d", m, res.StatusCode)
		}
	}
	b := a.as(t, "alice")
	for _, f := range []url.Values{{}, {"decision": {"yes"}}, {"decision": {"APPROVE"}}, {"decision": {"grant"}, "minutes": {"0"}}} {
		if code, page := b.decideVia(path, f); code != http.StatusBadRequest || !strings.Contains(page, `data-refusal="bad-form"`) {
			t.Fatalf("form %v: %d %s", f, code, page)
		}
	}
	if len(s.Decisions()) != 0 || len(s.Pending()) != 1 {
		t.Fatal("decided")
	}
	if code, _ := b.decideVia(path+"&via=url", url.Values{"decision": {"approve"}}); code != http.StatusOK {
		t.Fatalf("approve: %d", code)
	}
	if ds := s.Decisions(); len(ds) != 1 || ds[0].Channel != surface.ChannelURL || ds[0].Actor != "alice (url)" {
		t.Fatalf("decisions %+v", ds)
	}
}

// The approve page through a foreign Host (DNS rebinding) is refused by
// the guard before the link, the session or the request is looked up:
// nothing is logged about an approval, nothing counted but the Host.
func TestApprovePageForeignHost(t *testing.T) {
	var log logs
	a := newArchiveApp(t, webhost.Options{Logger: log.logger()})
	s := a.archivable(t, "")
	p, _ := ask(t, a, s, `{"ids":["n1"]}`)
	path := pathOf(t, s.ApproveURL(p))
	hdr := http.Header{"Sec-Fetch-Site": {"same-origin"}, "Content-Type": {"application/x-www-form-urlencoded"}}
	for _, m := range []string{"GET", "POST"} {
		if res := a.raw(t, m, path, "rebind.evil.example", hdr, "decision=approve"); res.StatusCode != http.StatusMisdirectedRequest {
			t.Fatalf("%s through a foreign Host: %d", m, res.StatusCode)
		}
	}
	if st := a.h.Stats(); st.Refused.Host != 2 || st.Refused.Approve != 0 || strings.Contains(log.String(), "approve page") {
		t.Fatalf("stats %+v, log:\n%s", st.Refused, log.String())
	}
	if len(s.Pending()) != 1 || len(s.Decisions()) != 0 {
		t.Fatal("decided")
	}
}

// "Approve, and allow this for N minutes": the page offers a grant
// bounded by the capability's ceiling, for the approved call's consumer,
// with constraints derived from the approved input, shown plainly. The
// post picks a duration among those offered and nothing else: a form
// that names constraints, a TTL, uses or another consumer is read for
// its duration only; a duration as text, negative, zero, or above the
// ceiling is refused and approves nothing. The grant lets later calls
// within its constraints through, and a call outside them (one more id,
// a member the person never saw) asks again.
func TestApproveWithGrant(t *testing.T) {
	var log logs
	a := newArchiveApp(t, webhost.Options{Logger: log.logger(), User: headerUser})
	s := a.archivable(t, "alice")
	args := `{"ids":["n1","n2"]}`
	p, cs := ask(t, a, s, args)
	path := pathOf(t, s.ApproveURL(p))
	b := a.as(t, "alice")
	code, page := b.get(path)
	for _, want := range []string{`name="minutes"`, `<option value="5">`, `<option value="15">`, `<option value="30">`,
		`no input other than ids`, `ids: a non-empty list of &#34;n1&#34;, &#34;n2&#34; only`, "at most 3 times", `value="grant"`} {
		if !strings.Contains(page, want) {
			t.Errorf("the page lacks %q", want)
		}
	}
	if code != http.StatusOK || strings.Contains(page, `<option value="60">`) {
		t.Fatalf("%d %s", code, page)
	}
	for _, minutes := range []string{"15 minutes", "-5", "0", "60", "31", "1e1", " 15", "0x0f", "", "15.0"} {
		code, page := b.decideVia(path, url.Values{"decision": {"grant"}, "minutes": {minutes}})
		if _, reason := pageState(page); code != http.StatusBadRequest || reason != "bad-form" {
			t.Fatalf("minutes %q: %d %s", minutes, code, page)
		}
	}
	if len(s.Pending()) != 1 || len(s.Registry().Grants().List()) != 0 {
		t.Fatal("a bad form decided")
	}
	code, page = b.decideVia(path, url.Values{"decision": {"grant"}, "minutes": {"15"},
		"constraints": {`[]`}, "ttl": {"24h"}, "maxUses": {"1000"}, "consumer": {"*"}, "ids": {"n3"}})
	if code != http.StatusOK || !strings.Contains(page, "data-grant=") {
		t.Fatalf("grant: %d %s", code, page)
	}
	gs := s.Registry().Grants().List()
	if len(gs) != 1 {
		t.Fatalf("grants %+v", gs)
	}
	g := gs[0]
	want := []surface.Constraint{surface.OnlyKeys("", "ids"), surface.ValueIn("ids", "n1", "n2")}
	if g.ConsumerKey != "mcp-bridge:agent" || g.CapabilityID != "view:notes.archive.archive" || g.InstanceID != "main" || g.MaxUses != 3 ||
		g.ExpiresAt.Sub(g.CreatedAt) != 15*time.Minute || g.ConfirmationID != p.ConfirmationID || g.CreatedBy != "alice (link)" ||
		!sameConstraints(g.Constraints, want) {
		t.Fatalf("grant %+v", g)
	}
	requireCode(t, retry(t, cs, "view:notes.archive.archive", args, p.ConfirmationID), "ok")
	requireCode(t, callTool(t, cs, "view:notes.archive.archive", `{"ids":["n2"]}`, nil), "ok") // within: no question
	for _, outside := range []string{`{"ids":["n1","n3"]}`, `{"ids":["n1"],"force":true}`, `{"ids":[]}`, `{"ids":["N1"]}`} {
		requireCode(t, callTool(t, cs, "view:notes.archive.archive", outside, nil), string(surface.CodeConfirmationRequired))
	}
	if got := boardOf(s).archivedIDs(); len(got) != 2 {
		t.Fatalf("archived %v", got)
	}
	if g, _ := s.Registry().Grants().Get(g.GrantID); g.Uses != 1 {
		t.Fatalf("grant uses %d", g.Uses)
	}
	if n := log.count("level=WARN", "reason=bad-form", "grant duration not offered"); n != 10 {
		t.Fatalf("%d bad durations logged", n)
	}
}

func sameConstraints(a, b []surface.Constraint) bool {
	ja, _ := json.Marshal(a)
	jb, _ := json.Marshal(b)
	return bytes.Equal(ja, jb)
}

// A capability that allows no grant is offered none, and a post that
// asks for one anyway approves nothing.
func TestApproveOffersNoGrantWhereNoneIsAllowed(t *testing.T) {
	a := newArchiveApp(t, webhost.Options{User: headerUser})
	s := a.archivable(t, "alice")
	cs := a.dial(t, s.Token(), sessionless)
	requireCode(t, callTool(t, cs, "view:notes.board.clear", "", nil), string(surface.CodeConfirmationRequired))
	p := awaitPending(t, s)
	path := pathOf(t, s.ApproveURL(p))
	b := a.as(t, "alice")
	if _, page := b.get(path); strings.Contains(page, `value="grant"`) || strings.Contains(page, `name="minutes"`) {
		t.Fatalf("a grant offered:\n%s", page)
	}
	if code, _ := b.decideVia(path, url.Values{"decision": {"grant"}, "minutes": {"5"}}); code != http.StatusBadRequest {
		t.Fatalf("a grant asked for: %d", code)
	}
	if len(s.Pending()) != 1 || len(s.Registry().Grants().List()) != 0 {
		t.Fatal("decided")
	}
}

// Options.RenderApprove renders the page instead of the default, under
// the Host's status and headers.
func TestRenderApprove(t *testing.T) {
	var seen []webhost.ApprovePage
	var mu sync.Mutex
	a := newArchiveApp(t, webhost.Options{User: headerUser, RenderApprove: func(w io.Writer, p webhost.ApprovePage) error {
		mu.Lock()
		seen = append(seen, p)
		mu.Unlock()
		_, err := io.WriteString(w, "custom "+string(p.Refusal))
		return err
	}})
	s := a.archivable(t, "alice")
	p, _ := ask(t, a, s, `{"ids":["n1"]}`)
	b := a.as(t, "alice")
	res := a.raw(t, "GET", pathOf(t, s.ApproveURL(p)), "", http.Header{"X-User": {"alice"}}, "")
	if res.StatusCode != http.StatusOK || res.Header.Get("Content-Security-Policy") == "" || res.Header.Get("Cache-Control") != "no-store" {
		t.Fatalf("%d %v", res.StatusCode, res.Header)
	}
	if code, body := b.get(a.h.ApprovePath("cnf_nosuchthing1") + "?link=x.y"); code != http.StatusNotFound || body != "custom not-found" {
		t.Fatalf("%d %q", code, body)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(seen) != 2 || !seen[0].Ask || seen[0].Request.ConfirmationID != p.ConfirmationID || seen[0].Session != s ||
		seen[0].Grant == nil || !strings.Contains(seen[0].Action, "?link=") || seen[1].Session != nil || seen[1].Request.ConfirmationID != "" {
		t.Fatalf("pages %+v", seen)
	}
}

// serve answers one request through h's handler in memory, as from
// loopback, signed in as user (headerUser) unless it is "".
func serve(h http.Handler, method, target, user string, form url.Values) (int, string) {
	var body io.Reader
	if form != nil {
		body = strings.NewReader(form.Encode())
	}
	req := httptest.NewRequest(method, target, body)
	req.Host = "127.0.0.1"
	if user != "" {
		req.Header.Set("X-User", user)
	}
	if form != nil {
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		req.Header.Set("Sec-Fetch-Site", "same-origin")
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	return rec.Code, rec.Body.String()
}

// An approve link expires with its request, on the registry's clock: at
// the request's expiry the page says so (410) and decides nothing, even
// before the registry's timer has expired the request; and once it has,
// the same. Under synctest: virtual time. AS-CONFIRM-006 (expiry).
func TestApproveLinkExpires(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var skew atomic.Int64 // how far the registry's clock runs ahead
		const ttl = 2 * time.Minute
		h, err := webhost.New(webhost.Options{
			NewViews:        func(s *webhost.Session) (webhost.Views, error) { return &board{s: s, archivable: true}, nil },
			ConfirmationTTL: ttl, MCP: webhost.MCPOptions{Disabled: true}, User: headerUser,
			Registry: func(_ *webhost.Session, o *surface.Options) {
				o.Now = func() time.Time { return time.Now().Add(time.Duration(skew.Load())) }
			},
		})
		if err != nil {
			t.Fatal(err)
		}
		defer h.Close()
		handler := h.Handler(nil)
		s := must(h.NewSession(webhost.SessionOptions{KeepShown: true, User: "alice"}))
		request := func(ids string) surface.PendingConfirmation {
			res := s.Registry().Invoke(bg, surface.Invocation{CapabilityID: "view:notes.archive.archive", Input: json.RawMessage(`{"ids":["` + ids + `"]}`)},
				surface.InvokeOptions{Consumer: surface.Consumer{ID: "agent", Kind: surface.ConsumerMCPBridge}})
			if res.Error == nil || res.Error.Code != surface.CodeConfirmationRequired {
				t.Fatalf("%+v", res)
			}
			id, _ := res.Error.Details["confirmationId"].(string)
			for _, p := range s.Pending() {
				if p.ConfirmationID == id {
					return p
				}
			}
			t.Fatal("not pending")
			return surface.PendingConfirmation{}
		}

		p := request("n1")
		link := s.ApproveURL(p)
		time.Sleep(ttl - time.Second)
		if code, _ := serve(handler, "GET", link, "alice", nil); code != http.StatusOK {
			t.Fatalf("a second before the expiry: %d", code)
		}
		time.Sleep(time.Second)
		synctest.Wait() // the registry's timer has expired it
		for _, m := range []string{"GET", "POST"} {
			code, page := serve(handler, m, link, "alice", url.Values{"decision": {"approve"}})
			if _, reason := pageState(page); code != http.StatusGone || reason != "expired" {
				t.Fatalf("%s at the expiry: %d %s", m, code, page)
			}
		}
		if ds := s.Decisions(); len(ds) != 1 || ds[0].Outcome != surface.OutcomeExpired {
			t.Fatalf("decisions %+v", ds)
		}

		// The registry's clock past the expiry, its timer not yet.
		p2 := request("n2")
		link2 := s.ApproveURL(p2)
		skew.Store(int64(ttl))
		for _, m := range []string{"GET", "POST"} {
			code, page := serve(handler, m, link2, "alice", url.Values{"decision": {"approve"}})
			if _, reason := pageState(page); code != http.StatusGone || reason != "expired" {
				t.Fatalf("%s with the request's time up: %d %s", m, code, page)
			}
		}
		if len(s.Pending()) != 1 || len(s.Decisions()) != 1 {
			t.Fatalf("decided: %+v", s.Decisions())
		}
	})
}

// Property: no link but the one issued opens the approve page or
// decides: whatever is flipped, cut, inserted or swapped in the link's
// value or the request id of its path, the page refuses it and the
// request stays pending.
func TestNoLinkButTheIssuedOne(t *testing.T) {
	a := newArchiveApp(t, webhost.Options{User: headerUser})
	s := a.archivable(t, "alice")
	p, _ := ask(t, a, s, `{"ids":["n1"]}`)
	p2, _ := ask(t, a, s, `{"ids":["n2"]}`)
	other := a.archivable(t, "alice")
	po, _ := ask(t, a, other, `{"ids":["n1"]}`)
	u := must(url.Parse(s.ApproveURL(p)))
	value := u.Query().Get("link")
	handler := a.h.Handler(mux(a.h))
	chars := "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_.=%+/ \x00é"
	rapid.Check(t, func(rt *rapid.T) {
		id, v := p.ConfirmationID, value
		for range rapid.IntRange(1, 3).Draw(rt, "mutations") {
			switch rapid.IntRange(0, 6).Draw(rt, "kind") {
			case 0: // flip a bit of the signature
				i := strings.LastIndexByte(v, '.')
				if i < 0 {
					continue
				}
				sig, err := base64.RawURLEncoding.DecodeString(v[i+1:])
				if err != nil || len(sig) == 0 {
					continue
				}
				bit := rapid.IntRange(0, 8*len(sig)-1).Draw(rt, "bit")
				sig[bit/8] ^= 1 << (bit % 8)
				v = v[:i+1] + base64.RawURLEncoding.EncodeToString(sig)
			case 1: // replace a character
				if len(v) == 0 {
					continue
				}
				i := rapid.IntRange(0, len(v)-1).Draw(rt, "at")
				v = v[:i] + string(chars[rapid.IntRange(0, len(chars)-1).Draw(rt, "char")]) + v[i+1:]
			case 2: // delete one
				if len(v) == 0 {
					continue
				}
				i := rapid.IntRange(0, len(v)-1).Draw(rt, "at")
				v = v[:i] + v[i+1:]
			case 3: // insert one
				i := rapid.IntRange(0, len(v)).Draw(rt, "at")
				v = v[:i] + string(chars[rapid.IntRange(0, len(chars)-1).Draw(rt, "char")]) + v[i:]
			case 4: // cut
				v = v[:rapid.IntRange(0, len(v)).Draw(rt, "keep")]
			case 5: // another request
				id = rapid.SampledFrom([]string{p2.ConfirmationID, po.ConfirmationID, "cnf_nosuchthing1", strings.ToUpper(p.ConfirmationID), p.ConfirmationID + "x"}).Draw(rt, "id")
			case 6: // another session's id, or case changed, or the other kind
				i := strings.IndexByte(v, '.')
				if i < 0 {
					continue
				}
				switch rapid.IntRange(0, 1).Draw(rt, "what") {
				case 0:
					v = rapid.SampledFrom([]string{other.ID(), strings.ToUpper(v[:i]), ""}).Draw(rt, "session") + v[i:]
				case 1:
					v = strings.Replace(v, ".u.", ".n.", 1)
				}
			}
		}
		if id == p.ConfirmationID && v == value {
			return // the issued link itself
		}
		target := "/agentsurface/approve/" + url.PathEscape(id) + "?" + url.Values{"link": {v}}.Encode()
		if code, page := serve(handler, "GET", target, "alice", nil); code == http.StatusOK || strings.Contains(page, `data-state="ask"`) {
			rt.Fatalf("GET %s: %d", target, code)
		}
		if code, _ := serve(handler, "POST", target, "alice", url.Values{"decision": {"approve"}}); code == http.StatusOK {
			rt.Fatalf("POST %s: %d", target, code)
		}
	})
	if len(s.Pending()) != 2 || len(other.Pending()) != 1 || len(s.Decisions())+len(other.Decisions()) != 0 {
		t.Fatal("a mutated link decided")
	}
	if code, _ := serve(handler, "GET", u.RequestURI(), "alice", nil); code != http.StatusOK {
		t.Fatalf("the issued link: %d", code)
	}
}

// Without Options.User, a session's user is its browser: the link
// handed to the agent opens only in a browser of the session (its
// cookie), so that the agent, which holds it, cannot approve with it —
// not with its bearer token, not from a browser of its own, not from
// another session's; the link the notifier sent the user opens anywhere,
// and its decision is recorded as "webhook".
func TestApproveLinkWithoutUsers(t *testing.T) {
	notified := make(chan string, 4)
	a := newArchiveApp(t, webhost.Options{Notifier: webhost.NotifierOptions{
		Notify: func(_ context.Context, _ *webhost.Session, _ surface.PendingConfirmation, link string) error {
			notified <- link
			return nil
		}}})
	s := a.archivable(t, "")
	p, cs := ask(t, a, s, `{"ids":["n1"]}`)
	path := pathOf(t, s.ApproveURL(p))
	stranger, other, own := a.browser(t), a.browser(t), a.browser(t)
	other.page()
	if code, _ := own.get(s.JoinPath()); code != http.StatusSeeOther {
		t.Fatalf("join: %d", code)
	}
	agent := http.Header{"Authorization": {"Bearer " + s.Token()}, "Sec-Fetch-Site": {"same-origin"},
		"Content-Type": {"application/x-www-form-urlencoded"}}
	for _, m := range []string{"GET", "POST"} {
		if res := a.raw(t, m, path, "", agent, "decision=approve"); res.StatusCode != http.StatusUnauthorized {
			t.Fatalf("the agent %s its link: %d", m, res.StatusCode)
		}
	}
	for b, want := range map[*browser]int{stranger: http.StatusUnauthorized, other: http.StatusForbidden} {
		if code, page := b.get(path); code != want || strings.Contains(page, "n1") {
			t.Fatalf("the agent's link elsewhere: %d %s", code, page)
		}
		if code, _ := b.decideVia(path, url.Values{"decision": {"approve"}}); code != want {
			t.Fatalf("the agent's link posted elsewhere: %d", code)
		}
	}
	if len(s.Decisions()) != 0 {
		t.Fatal("decided")
	}
	if code, _ := own.decideVia(path, url.Values{"decision": {"deny"}}); code != http.StatusOK {
		t.Fatalf("the session's browser: %d", code)
	}
	if ds := s.Decisions(); len(ds) != 1 || ds[0].Channel != surface.ChannelLink || ds[0].Outcome != surface.OutcomeDenied {
		t.Fatalf("decisions %+v", ds)
	}

	<-notified // the first request's
	p2, _ := ask(t, a, s, `{"ids":["n2"]}`)
	var link string
	select {
	case link = <-notified:
	case <-time.After(waitFor):
		t.Fatal("not notified")
	}
	if !strings.Contains(link, "?link="+s.ID()+".n.") || link == s.ApproveURL(p2) {
		t.Fatalf("the notified link %q", link)
	}
	if code, _ := stranger.decideVia(pathOf(t, link), url.Values{"decision": {"approve"}}); code != http.StatusOK {
		t.Fatalf("the notified link on another device: %d", code)
	}
	ds := s.Decisions()
	if len(ds) != 2 || ds[1].ConfirmationID != p2.ConfirmationID || ds[1].Channel != surface.ChannelWebhook || ds[1].Actor != "anonymous (webhook)" {
		t.Fatalf("decisions %+v", ds)
	}
	requireCode(t, retry(t, cs, "view:notes.archive.archive", `{"ids":["n2"]}`, p2.ConfirmationID), "ok")
}
