package webhost_test

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentsurface/agentsurface/mcpsurface"
	"github.com/agentsurface/agentsurface/surface"
	"github.com/agentsurface/agentsurface/webhost"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// DNS rebinding: a page on the attacker's domain, whose name now resolves
// to the application's loopback address, sends requests with its own
// Host (and Origin). Every route — the Host's and the application's —
// refuses them before creating anything: no session, no cookie, no
// approval; the loopback names and the configured hosts are served.
func TestForeignHostRefusedBeforeAnyState(t *testing.T) {
	a := newApp(t, webhost.Options{AllowedHosts: []string{"notes.internal"}})
	s := a.session(t)
	cs := a.dial(t, s.Token(), sessionless)
	requireCode(t, callTool(t, cs, "view:notes.board.add", `{"text":"x"}`, nil), "ok")
	requireCode(t, callTool(t, cs, "view:notes.board.clear", "", nil), string(surface.CodeConfirmationRequired))
	p := awaitPending(t, s)
	port := a.srv.URL[strings.LastIndex(a.srv.URL, ":"):]
	evil := "rebind.evil.example" + port
	hdr := http.Header{"Origin": {"http://" + evil}, "Sec-Fetch-Site": {"same-origin"}, "Content-Type": {"application/x-www-form-urlencoded"},
		"Authorization": {"Bearer " + s.Token()}, "Cookie": {"agentsurface_session=whatever"}}
	before := a.h.Stats()
	for _, r := range []struct{ method, path, body string }{
		{"GET", "/", ""},
		{"GET", s.JoinPath(), ""},
		{"GET", "/agentsurface/join/bogus", ""},
		{"GET", "/agentsurface/events", ""},
		{"GET", "/agentsurface/page.js", ""},
		{"GET", "/agentsurface/webmcp/tools", ""},
		{"POST", "/agentsurface/webmcp/call", `{"name":"x"}`},
		{"POST", "/agentsurface/decide", "id=" + p.ConfirmationID + "&decision=approve"},
		{"POST", "/notes", "text=rebound"},
		{"POST", "/mcp", `{"jsonrpc":"2.0","id":1,"method":"tools/list"}`},
		{"GET", "/healthz", ""},
	} {
		for _, host := range []string{evil, "rebind.evil.example", "127.0.0.1.evil.example" + port, "localhost.evil.example" + port, ""} {
			h := host
			if h == "" {
				h = "notes.internal.evil.example"
			}
			res := a.raw(t, r.method, r.path, h, hdr, r.body)
			if res.StatusCode != http.StatusMisdirectedRequest || len(res.Cookies()) > 0 || res.Header.Get("X-Frame-Options") != "DENY" {
				t.Errorf("%s %s with Host %s: %d, cookies %v", r.method, r.path, h, res.StatusCode, res.Cookies())
			}
		}
	}
	after := a.h.Stats()
	if after.Sessions != before.Sessions || after.UnusedSessions != before.UnusedSessions || after.Refused.Host != before.Refused.Host+55 {
		t.Fatalf("rebound requests: stats before %+v after %+v", before, after)
	}
	if len(s.Pending()) != 1 || len(s.Decisions()) != 0 || len(boardOf(s).list()) != 1 {
		t.Fatalf("state was touched: pending %v, decisions %v, notes %v", s.Pending(), s.Decisions(), boardOf(s).list())
	}
	for _, host := range []string{"127.0.0.1" + port, "localhost" + port, "LOCALHOST" + port, "[::1]" + port, "app.localhost" + port, "127.0.0.2" + port, "notes.internal" + port, "notes.internal", "Notes.Internal."} {
		if res := a.raw(t, "GET", "/", host, nil, ""); res.StatusCode != http.StatusOK {
			t.Errorf("GET / with Host %s: %d", host, res.StatusCode)
		}
	}
}

// Every answer, of every route, forbids framing (the Approve button
// must not be clickjacked), sniffing and referrers (the join link is a
// credential), and the page may load only its own scripts.
func TestSecurityHeaders(t *testing.T) {
	a := newApp(t, webhost.Options{})
	s := a.session(t)
	for _, path := range []string{"/", s.JoinPath(), "/agentsurface/join/bogus", "/agentsurface/events", "/agentsurface/page.js",
		"/agentsurface/webmcp/tools", "/agentsurface/nope", "/mcp", "/healthz", "/readyz", "/nope"} {
		res := a.raw(t, "GET", path, "", nil, "")
		h := res.Header
		csp := h.Get("Content-Security-Policy")
		if h.Get("X-Frame-Options") != "DENY" || !strings.Contains(csp, "frame-ancestors 'none'") || !strings.Contains(csp, "script-src 'self'") ||
			h.Get("X-Content-Type-Options") != "nosniff" || h.Get("Referrer-Policy") != "no-referrer" {
			t.Errorf("GET %s (%d): headers %v", path, res.StatusCode, h)
		}
	}
}

// The public session id, shown on the page and in logs, is random and no
// part of the session's secrets (cookie, bearer token, join code); the
// secrets are unguessable (256 random bits each, all distinct) and never
// appear in the page's HTML, the logs (at debug level, through a whole
// session's life: page, stream, join, MCP, approval, end) or in another
// session.
func TestTokensUnguessableAndNeverLogged(t *testing.T) {
	var logs bytes.Buffer
	var mu sync.Mutex
	logger := slog.New(slog.NewTextHandler(syncWriter{&mu, &logs}, &slog.HandlerOptions{Level: slog.LevelDebug}))
	a := newApp(t, webhost.Options{Logger: logger, MaxStreams: 1})
	seen := map[string]bool{}
	var secrets []string
	for range 200 {
		s := a.session(t)
		id := strings.TrimPrefix(s.ID(), "s_")
		join := strings.TrimPrefix(s.JoinPath(), "/agentsurface/join/")
		if len(id) < 12 || seen[id] {
			t.Fatalf("id %q (seen %v)", s.ID(), seen[id])
		}
		seen[id] = true
		for _, secret := range []string{s.Token(), join} {
			if len(secret) < 43 || seen[secret] || strings.Contains(secret, id[:6]) {
				t.Fatalf("secret %q of session %s: seen %v", secret, s.ID(), seen[secret])
			}
			seen[secret] = true
		}
		secrets = append(secrets, s.Token(), join)
	}

	// A whole life, logged.
	b := a.browser(t)
	s := b.page()
	cookie := b.cookie()
	secrets = append(secrets, cookie, s.Token(), strings.TrimPrefix(s.JoinPath(), "/agentsurface/join/"))
	_, page := b.get("/")
	if strings.Contains(page, cookie) || strings.Contains(page, s.Token()) || strings.Contains(cookie, strings.TrimPrefix(s.ID(), "s_")[:6]) {
		t.Fatal("the page shows a secret, or the cookie holds the public id")
	}
	tab := b.open(true, "notes", webhost.ApprovalsID)
	b.open(false, "notes") // pushes the first out (MaxStreams 1)
	tab.ended(t)
	other := a.browser(t)
	if code, _ := other.get(s.JoinPath()); code != http.StatusSeeOther {
		t.Fatalf("join: %d", code)
	}
	cs := a.dial(t, s.Token(), stateful)
	requireCode(t, callTool(t, cs, "view:notes.board.add", `{"text":"x"}`, nil), "ok")
	requireCode(t, callTool(t, cs, "view:notes.board.clear", "", nil), string(surface.CodeConfirmationRequired))
	p := awaitPending(t, s)
	b.post("/agentsurface/decide", url.Values{"id": {p.ConfirmationID}, "decision": {"approve"}})
	requireCode(t, callTool(t, cs, "view:notes.board.clear", "", nil), "ok")
	a.raw(t, "POST", "/mcp", "", http.Header{"Authorization": {"Bearer " + s.Token() + "x"}}, `{}`)
	a.raw(t, "GET", "/agentsurface/events", "evil.example", http.Header{"Cookie": {"agentsurface_session=" + cookie}}, "")
	s.Close()
	b.post("/notes", url.Values{"text": {"late"}})
	a.raw(t, "POST", "/mcp", "", http.Header{"Authorization": {"Bearer " + s.Token()}}, `{}`)
	_ = a.h.Close()

	mu.Lock()
	text := logs.String()
	mu.Unlock()
	if !strings.Contains(text, s.ID()) {
		t.Fatalf("the log does not name the session at all; the test proves nothing:\n%s", text)
	}
	for _, secret := range secrets {
		if strings.Contains(text, secret) {
			t.Fatalf("a secret %q is in the log:\n%s", secret, text)
		}
	}
}

type syncWriter struct {
	mu *sync.Mutex
	b  *bytes.Buffer
}

func (w syncWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b.Write(p)
}

// heapAfterGC returns the live heap.
func heapAfterGC() uint64 {
	runtime.GC()
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.HeapAlloc
}

// A flood of cookieless page loads and bogus join links: the sessions it
// makes stay within MaxUnusedSessions, the memory does not grow with the
// requests, the sessions in use are untouched, and a visitor arriving
// during the flood gets a working page.
func TestSessionFloodBounded(t *testing.T) {
	const unused = 40
	a := newApp(t, webhost.Options{MaxUnusedSessions: unused})
	early := a.browser(t)
	early.page()
	earlyTab := early.open(false, "notes")

	flood := func(n int) {
		var wg sync.WaitGroup
		for w := range 4 {
			wg.Go(func() {
				for i := w; i < n; i += 4 {
					path := "/"
					if i%5 == 0 {
						path = "/agentsurface/join/bogus" + string(rune('a'+i%26))
					}
					res := a.raw(t, "GET", path, "", nil, "")
					if want := map[bool]int{true: http.StatusNotFound, false: http.StatusOK}[path != "/"]; res.StatusCode != want {
						t.Errorf("GET %s: %d", path, res.StatusCode)
						return
					}
				}
			})
		}
		wg.Wait()
	}
	flood(200) // warms what is allocated once
	heap0 := heapAfterGC()
	flood(1000)
	heap1 := heapAfterGC()
	st := a.h.Stats()
	if st.UnusedSessions > unused || st.Sessions != 1 || len(a.h.Sessions()) > unused+1 {
		t.Fatalf("after the flood: %+v, %d sessions", st, len(a.h.Sessions()))
	}
	t.Logf("live heap %d KiB after 200 requests, %d KiB after 1200", heap0>>10, heap1>>10)
	if heap1 > heap0+4<<20 {
		t.Fatalf("the heap grew with the requests: %d KiB → %d KiB", heap0>>10, heap1>>10)
	}
	if code, msg := early.post("/notes", url.Values{"text": {"still here"}}); code != http.StatusNoContent {
		t.Fatalf("the early visitor's session: %d %s", code, msg)
	}
	earlyTab.await(t, "notes", func(h string) bool { return h == "<li>still here</li>" })

	// A visitor arriving during a flood gets a page that works.
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		for {
			select {
			case <-stop:
				return
			default:
				a.raw(t, "GET", "/", "", nil, "")
			}
		}
	})
	late := a.browser(t)
	late.page()
	lateTab := late.open(false, "notes")
	close(stop)
	wg.Wait()
	if code, msg := late.post("/notes", url.Values{"text": {"late"}}); code != http.StatusNoContent {
		t.Fatalf("the late visitor's session: %d %s", code, msg)
	}
	lateTab.await(t, "notes", func(h string) bool { return h == "<li>late</li>" })
}

// When MaxSessions sessions are in use, a new visitor takes the place of
// the one idle the longest without an open page; when every one has an
// open page, the new visitor is told the server is full (503), and no
// open page loses its session.
func TestUsedSessionsCapacity(t *testing.T) {
	const max = 4
	a := newApp(t, webhost.Options{MaxSessions: max})
	var tabs []*browser
	for range max {
		b := a.browser(t)
		b.page()
		if code, msg := b.post("/notes", url.Values{"text": {"x"}}); code != http.StatusNoContent { // uses it, without a page open
			t.Fatalf("%d %s", code, msg)
		}
		tabs = append(tabs, b)
	}
	fifth := a.browser(t)
	fifth.page()
	fifthTab := fifth.open(false, "notes")
	if code, _ := tabs[0].post("/notes", url.Values{"text": {"x"}}); code != http.StatusUnauthorized {
		t.Fatalf("the idlest session was not reclaimed: %d", code)
	}
	if code, _ := tabs[1].post("/notes", url.Values{"text": {"x"}}); code != http.StatusNoContent {
		t.Fatalf("another session was reclaimed: %d", code)
	}
	for _, b := range tabs[1:] {
		b.open(false)
	}
	sixth := a.browser(t)
	if code, _ := sixth.get("/"); code != http.StatusOK {
		t.Fatalf("the page itself: %d", code)
	}
	if _, code := sixth.tryOpen(false); code != http.StatusServiceUnavailable {
		t.Fatalf("a visitor beyond capacity: %d", code)
	}
	if code, _ := tabs[3].post("/notes", url.Values{"text": {"x"}}); code != http.StatusNoContent {
		t.Fatalf("an open page lost its session: %d", code)
	}
	if code, _ := fifth.post("/notes", url.Values{"text": {"fifth"}}); code != http.StatusNoContent {
		t.Fatalf("the fifth visitor's session: %d", code)
	}
	fifthTab.await(t, "notes", func(h string) bool { return h == "<li>fifth</li>" })
	if st := a.h.Stats(); st.Refused.Full == 0 || st.Sessions != max {
		t.Fatalf("stats %+v", st)
	}
}

// One cookie opening many event streams holds at most MaxStreams: each
// newer stream pushes the oldest out, which is told so and ends; the
// newest go on following the session.
func TestStreamsPerSessionBounded(t *testing.T) {
	const max, extra = 3, 4
	a := newApp(t, webhost.Options{MaxStreams: max})
	b := a.browser(t)
	b.page()
	var tabs []*stream
	for range max + extra {
		tab := b.open(false, "notes")
		if e := tab.next(t); e.event != "patch" { // the first render
			t.Fatalf("a stream began with %+v", e)
		}
		tabs = append(tabs, tab)
	}
	for i := range extra {
		if e := tabs[i].ended(t); e.event != "bye" || !strings.Contains(e.data, "too many tabs") {
			t.Fatalf("stream %d, pushed out: %+v", i, e)
		}
	}
	if code, msg := b.post("/notes", url.Values{"text": {"n"}}); code != http.StatusNoContent {
		t.Fatalf("%d %s", code, msg)
	}
	for i := extra; i < len(tabs); i++ {
		tabs[i].await(t, "notes", func(h string) bool { return h == "<li>n</li>" })
	}
	if st := a.h.Stats(); st.Streams != max || st.Refused.PushedOut != extra {
		t.Fatalf("stats %+v", st)
	}
}

// A client that opens a page's stream and stops reading is cut once a
// write cannot be made within WriteTimeout: the stream ends, the session
// stops rendering for it, and the cut is counted.
func TestSlowClientCut(t *testing.T) {
	a := newApp(t, webhost.Options{WriteTimeout: 300 * time.Millisecond})
	b := a.browser(t)
	s := b.page()
	boardOf(s).pad = 256 << 10 // every render of "count" is large
	u, _ := url.Parse(a.srv.URL)
	conn, err := net.Dial("tcp", u.Host)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	fmt.Fprintf(conn, "GET /agentsurface/events?f=count HTTP/1.1\r\nHost: %s\r\nCookie: agentsurface_session=%s\r\n\r\n", u.Host, b.cookie())
	st, err := http.ReadResponse(bufio.NewReader(conn), nil) // the headers; then nothing is read
	if err != nil || st.StatusCode != http.StatusOK {
		t.Fatalf("%v %v", st, err)
	}
	deadline := time.Now().Add(waitFor)
	for a.h.Stats().Streams > 0 {
		if time.Now().After(deadline) {
			t.Fatalf("the slow client was not cut: %+v", a.h.Stats())
		}
		boardOf(s).add("more") // one more large patch to write
		time.Sleep(20 * time.Millisecond)
	}
	if st := a.h.Stats(); st.Refused.SlowClients != 1 {
		t.Fatalf("stats %+v", st)
	}
}

// Approvals are bound to their session: another session cannot decide
// one by its id, through the host API, its page (its cookie), or its
// agent presenting the id as evidence; a cross-origin post with the
// right cookie is refused. The approval stays pending, untouched, and
// nothing runs. AS-CONFIRM-004 (no replay across consumers and
// registrations).
func TestApprovalsBoundToTheirSession(t *testing.T) {
	a := newApp(t, webhost.Options{})
	ab, bb := a.browser(t), a.browser(t)
	sa, sb := ab.page(), bb.page()
	ab.open(false)
	bb.open(false)
	ca, cb := a.dial(t, sa.Token(), sessionless), a.dial(t, sb.Token(), sessionless)
	requireCode(t, callTool(t, ca, "view:notes.board.add", `{"text":"a's"}`, nil), "ok")
	requireCode(t, callTool(t, cb, "view:notes.board.add", `{"text":"b's"}`, nil), "ok")
	requireCode(t, callTool(t, ca, "view:notes.board.clear", "", nil), string(surface.CodeConfirmationRequired))
	p := awaitPending(t, sa)

	if _, ok := sb.Decide(p.ConfirmationID, true, "b"); ok {
		t.Fatal("B's session approved A's confirmation")
	}
	// B's page is told plainly that B has no such request, as for an id
	// nobody has: not that A's is "no longer pending", or anything else
	// that would tell it apart.
	code, msg := bb.post("/agentsurface/decide", url.Values{"id": {p.ConfirmationID}, "decision": {"approve"}})
	unknownCode, unknown := bb.post("/agentsurface/decide", url.Values{"id": {"cnf_nosuchthing1"}, "decision": {"approve"}})
	if code != http.StatusNotFound || msg != "There is no such approval request in this session." || unknownCode != code || msg != unknown {
		t.Fatalf("B's page approving A's confirmation: %d %q (an unknown id: %d %q)", code, msg, unknownCode, unknown)
	}
	res := callTool(t, cb, "view:notes.board.clear", "", mcp.Meta{mcpsurface.MetaConfirmationID: p.ConfirmationID})
	if res.Status == surface.StatusOK {
		t.Fatal("B executed with A's confirmation id")
	}
	// A's own cookie, from another origin.
	req, _ := http.NewRequest(http.MethodPost, a.srv.URL+"/agentsurface/decide", strings.NewReader(url.Values{"id": {p.ConfirmationID}, "decision": {"approve"}}.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Sec-Fetch-Site", "cross-site")
	req.Header.Set("Origin", "https://evil.example")
	if code, _ := ab.do(req); code != http.StatusForbidden {
		t.Fatalf("a cross-origin approval: %d", code)
	}
	if pa := sa.Pending(); len(pa) != 1 || pa[0].ConfirmationID != p.ConfirmationID || len(sa.Decisions()) != 0 {
		t.Fatalf("A's confirmation was touched: %+v %+v", pa, sa.Decisions())
	}
	if len(boardOf(sa).list()) != 1 || len(boardOf(sb).list()) != 1 {
		t.Fatal("something was cleared")
	}
	if st := a.h.Stats(); st.Refused.CrossOrigin != 1 {
		t.Fatalf("stats %+v", st)
	}
}

// Bodies are bounded: a body declaring more than MaxBodyBytes is
// refused with 413 before it is read, on every route, the
// application's too; one that does not declare its length is cut at the
// limit.
func TestBodyLimits(t *testing.T) {
	a := newApp(t, webhost.Options{MaxBodyBytes: 4 << 10})
	s := a.session(t)
	b := a.browser(t)
	b.page()
	big := strings.Repeat("x", 8<<10)
	for _, path := range []string{"/notes", "/mcp", "/agentsurface/decide", "/agentsurface/webmcp/call"} {
		res := a.raw(t, "POST", path, "", http.Header{"Cookie": {"agentsurface_session=" + b.cookie()}, "Authorization": {"Bearer " + s.Token()},
			"Content-Type": {"application/x-www-form-urlencoded"}}, "text="+big)
		if res.StatusCode != http.StatusRequestEntityTooLarge {
			t.Errorf("POST %s with a large body: %d", path, res.StatusCode)
		}
	}
	// No declared length: the application's form parse fails at the cap.
	pr, pw := io.Pipe()
	go func() {
		_, _ = pw.Write([]byte("text=" + big))
		_ = pw.Close()
	}()
	req, _ := http.NewRequest(http.MethodPost, a.srv.URL+"/notes", pr)
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Sec-Fetch-Site", "same-origin")
	if code, _ := b.do(req); code != http.StatusBadRequest {
		t.Fatalf("a chunked large body: %d", code)
	}
	if n := len(boardOf(b.page()).list()); n != 0 {
		t.Fatalf("%d notes were added", n)
	}
}

// A request of another user never reaches a user's session: a page gets
// a session of its own, everything else 403; a request whose user the
// application refuses gets 401 before any session is made.
func TestSessionsBelongToTheirUser(t *testing.T) {
	a := newApp(t, webhost.Options{
		User: func(r *http.Request) (string, error) {
			u := r.Header.Get("X-User")
			if u == "mallory" {
				return "", fmt.Errorf("not signed in")
			}
			return u, nil
		},
		// The default host context carries the user, for policies.
		Registry: func(_ *webhost.Session, o *surface.Options) {
			o.Policies = []surface.Policy{surface.Authenticated("user")}
		},
	})
	ann := a.browser(t)
	ann.header.Set("X-User", "ann")
	s := ann.page()
	if s.User() != "ann" || s.Registry() == nil {
		t.Fatalf("user %q", s.User())
	}
	ann.open(false)
	if code, _ := ann.post("/notes", url.Values{"text": {"ann's"}}); code != http.StatusNoContent {
		t.Fatalf("ann: %d", code)
	}
	bob := a.browser(t)
	bob.header.Set("X-User", "bob")
	bob.client.Jar = ann.client.Jar // bob signs in in ann's browser
	if code, _ := bob.post("/notes", url.Values{"text": {"bob's"}}); code != http.StatusForbidden {
		t.Fatalf("bob with ann's cookie: %d", code)
	}
	if _, code := bob.tryOpen(false); code != http.StatusForbidden {
		t.Fatalf("bob's stream with ann's cookie: %d", code)
	}
	if code, _ := bob.get(s.JoinPath()); code != http.StatusNotFound {
		t.Fatalf("bob joining ann's session: %d", code)
	}
	sb := bob.page()
	if sb == s || sb.User() != "bob" || len(boardOf(sb).list()) != 0 {
		t.Fatalf("bob's page got session %s of %q", sb.ID(), sb.User())
	}
	if got := boardOf(s).list(); len(got) != 1 || got[0] != "ann's" {
		t.Fatalf("ann's notes %v", got)
	}
	mallory := a.browser(t)
	mallory.header.Set("X-User", "mallory")
	n := len(a.h.Sessions())
	if code, _ := mallory.get("/"); code != http.StatusUnauthorized || len(a.h.Sessions()) != n {
		t.Fatalf("a refused user: %d, %d sessions (were %d)", code, len(a.h.Sessions()), n)
	}
	// Ann's agent sees her tools: the policy found her in the host
	// context; an anonymous session's agent sees none.
	if tools := must(a.dial(t, s.Token(), sessionless).ListTools(bg, nil)); len(tools.Tools) == 0 {
		t.Fatal("ann's agent sees no tools")
	}
	anon, err := a.h.NewSession(webhost.SessionOptions{KeepShown: true})
	if err != nil {
		t.Fatal(err)
	}
	if tools := must(a.dial(t, anon.Token(), sessionless).ListTools(bg, nil)); len(tools.Tools) != 0 {
		t.Fatalf("an anonymous session's agent sees %d tools", len(tools.Tools))
	}
}
