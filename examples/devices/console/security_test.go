package console_test

import (
	"bufio"
	"context"
	"io"
	"net/http"
	"net/url"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentsurface/agentsurface/examples/devices/console"
	"github.com/agentsurface/agentsurface/surface"
	"github.com/agentsurface/agentsurface/webhost"
)

// raw sends one request to the demo's server as an attacker would: any
// Host header, any Origin, cookies by hand, no redirects followed.
func (d *demo) raw(t testing.TB, method, path, host string, hdr http.Header, body string) *http.Response {
	t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, d.srv.URL+path, rd)
	if err != nil {
		t.Fatal(err)
	}
	if host != "" {
		req.Host = host
	}
	for k, v := range hdr {
		req.Header[k] = v
	}
	c := *d.srv.Client()
	c.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	res, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	_, _ = io.Copy(io.Discard, res.Body)
	res.Body.Close()
	return res
}

// DNS rebinding: a page on the attacker's domain, whose name now resolves
// to the console's loopback address, sends requests with its own Host
// (and Origin). Every route refuses them before creating anything: no
// session, no cookie, no approval; the loopback names and the configured
// hosts are served.
func TestDNSRebindingRefused(t *testing.T) {
	d := newDemo(t, console.Options{Host: webhost.Options{AllowedHosts: []string{"console.internal"}}})
	s := d.session(t)
	m := d.dial(t, s.Token())
	requireCode(t, call(t, m, "view:devices.table.selectRows", `{"ids":["d4"]}`), "ok")
	requireCode(t, call(t, m, "domain:devices.disable", `{"reason":"rebinding"}`), string(surface.CodeConfirmationRequired))
	p := awaitPending(t, s)
	port := d.srv.URL[strings.LastIndex(d.srv.URL, ":"):]
	evil := "rebind.evil.example" + port
	hdr := http.Header{"Origin": {"http://" + evil}, "Sec-Fetch-Site": {"same-origin"}, "Content-Type": {"application/x-www-form-urlencoded"},
		"Authorization": {"Bearer " + s.Token()}, "Cookie": {"agentsurface_session=whatever"}}
	before := len(d.app.Sessions())
	for _, r := range []struct{ method, path, body string }{
		{"GET", "/", ""},
		{"GET", s.JoinPath(), ""},
		{"GET", "/agentsurface/join/bogus", ""},
		{"GET", eventsPath, ""},
		{"GET", "/agentsurface/page.js", ""},
		{"GET", "/static/console.js", ""},
		{"GET", "/healthz", ""},
		{"POST", "/ui/clear", ""},
		{"GET", "/agentsurface/webmcp/tools", ""},
		{"POST", "/agentsurface/webmcp/call", `{"name":"x"}`},
		{"POST", "/agentsurface/decide", "id=" + p.ConfirmationID + "&decision=approve"},
		{"POST", "/mcp", `{"jsonrpc":"2.0","id":1,"method":"tools/list"}`},
	} {
		for _, host := range []string{evil, "rebind.evil.example", "127.0.0.1.evil.example" + port, "localhost.evil.example" + port} {
			res := d.raw(t, r.method, r.path, host, hdr, r.body)
			if res.StatusCode != http.StatusMisdirectedRequest || len(res.Cookies()) > 0 {
				t.Errorf("%s %s with Host %s: %d, cookies %v", r.method, r.path, host, res.StatusCode, res.Cookies())
			}
		}
	}
	if n := len(d.app.Sessions()); n != before {
		t.Fatalf("rebound requests made sessions: %d, were %d", n, before)
	}
	if len(s.Pending()) != 1 || len(s.Decisions()) != 0 {
		t.Fatalf("the approval was touched: pending %v, decisions %v", s.Pending(), s.Decisions())
	}
	for _, host := range []string{"127.0.0.1" + port, "localhost" + port, "LOCALHOST" + port, "[::1]" + port, "app.localhost" + port, "127.0.0.2" + port, "console.internal" + port, "console.internal"} {
		if res := d.raw(t, "GET", "/", host, nil, ""); res.StatusCode != http.StatusOK {
			t.Errorf("GET / with Host %s: %d", host, res.StatusCode)
		}
	}
}

// Every answer, of every route, forbids framing (the Approve button must
// not be clickjacked), sniffing and referrers (the join link is a
// credential), and the page may load only its own scripts.
func TestSecurityHeaders(t *testing.T) {
	d := newDemo(t, console.Options{})
	s := d.session(t)
	for _, path := range []string{"/", s.JoinPath(), "/agentsurface/join/bogus", "/events", "/static/app.js", "/static/app.css", "/agentsurface/webmcp/tools", "/mcp", "/nope"} {
		res := d.raw(t, "GET", path, "", nil, "")
		h := res.Header
		csp := h.Get("Content-Security-Policy")
		if h.Get("X-Frame-Options") != "DENY" || !strings.Contains(csp, "frame-ancestors 'none'") || !strings.Contains(csp, "script-src 'self'") ||
			h.Get("X-Content-Type-Options") != "nosniff" || h.Get("Referrer-Policy") != "no-referrer" {
			t.Errorf("GET %s (%d): headers %v", path, res.StatusCode, h)
		}
	}
}

// The public session id, shown on the page and in logs, is random: it is
// no part of the session's secrets (bearer token, join code, cookie).
func TestSessionIDRevealsNothing(t *testing.T) {
	d := newDemo(t, console.Options{})
	seen := map[string]bool{}
	for range 200 {
		s := d.session(t)
		id := strings.TrimPrefix(s.ID(), "s_")
		if len(id) < 10 || seen[id] {
			t.Fatalf("id %q (seen %v)", s.ID(), seen[id])
		}
		seen[id] = true
		for _, secret := range []string{s.Token(), strings.TrimPrefix(s.JoinPath(), "/agentsurface/join/")} {
			if strings.Contains(secret, id[:6]) {
				t.Fatalf("the id %s shares %q with a secret %s", s.ID(), id[:6], secret)
			}
		}
	}
	b := d.browser(t)
	_, page := b.get("/")
	var cookie string
	for _, c := range b.client.Jar.Cookies(mustURL(t, d.srv.URL)) {
		cookie = c.Value
	}
	var sid string
	for _, x := range d.app.Sessions() {
		if strings.Contains(page, x.ID()) {
			sid = x.ID()
		}
	}
	if sid == "" || cookie == "" || strings.Contains(cookie, strings.TrimPrefix(sid, "s_")[:6]) || strings.Contains(page, cookie) {
		t.Fatalf("id %q, cookie %q", sid, cookie)
	}
}

func mustURL(t testing.TB, s string) *url.URL {
	t.Helper()
	u, err := url.Parse(s)
	if err != nil {
		t.Fatal(err)
	}
	return u
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
	d := newDemo(t, console.Options{Host: webhost.Options{MaxUnusedSessions: unused}})
	// A visitor with an open page, before the flood.
	early := d.browser(t)
	early.get("/")
	earlyTab := early.events()

	flood := func(n int) {
		var wg sync.WaitGroup
		for w := range 4 {
			wg.Go(func() {
				for i := w; i < n; i += 4 {
					path := "/"
					if i%5 == 0 {
						path = "/agentsurface/join/bogus" + string(rune('a'+i%26))
					}
					res := d.raw(t, "GET", path, "", nil, "")
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
	if n := len(d.app.Sessions()); n > unused+1 {
		t.Fatalf("%d sessions after the flood, want at most %d unused + 1 in use", n, unused)
	}
	t.Logf("live heap %d KiB after 200 requests, %d KiB after 1200", heap0>>10, heap1>>10)
	if heap1 > heap0+4<<20 {
		t.Fatalf("the heap grew with the requests: %d KiB → %d KiB", heap0>>10, heap1>>10)
	}
	// The early visitor's page still works.
	if code, msg := early.post("/ui/filter", url.Values{"status": {"offline"}}); code != http.StatusNoContent {
		t.Fatalf("the early visitor's session: %d %s", code, msg)
	}
	earlyTab.await(t, "table", func(h string) bool {
		return strings.Contains(h, "hvac-ctrl-lon-03") && !strings.Contains(h, "edge-gw-ams-01")
	})

	// A visitor arriving during a flood gets a page that works.
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		for {
			select {
			case <-stop:
				return
			default:
				d.raw(t, "GET", "/", "", nil, "")
			}
		}
	})
	late := d.browser(t)
	if code, _ := late.get("/"); code != http.StatusOK {
		t.Fatalf("late visitor: %d", code)
	}
	lateTab := late.events()
	close(stop)
	wg.Wait()
	if code, msg := late.post("/ui/filter", url.Values{"site": {"Berlin"}}); code != http.StatusNoContent {
		t.Fatalf("the late visitor's session: %d %s", code, msg)
	}
	lateTab.await(t, "table", func(h string) bool {
		return strings.Contains(h, "kiosk-ber-01") && !strings.Contains(h, "edge-gw-ams-01")
	})
}

// When MaxSessions sessions are in use, a new visitor takes the place of
// the one idle the longest without an open page; when every one has an
// open page, the new visitor is told the console is full (503), and no
// open page loses its session.
func TestUsedSessionsCapacity(t *testing.T) {
	const max = 4
	d := newDemo(t, console.Options{Host: webhost.Options{MaxSessions: max}})
	var tabs []*browser
	for range max {
		b := d.browser(t)
		b.get("/")
		if code, msg := b.post("/ui/clear", nil); code != http.StatusNoContent { // uses it, without a page open
			t.Fatalf("%d %s", code, msg)
		}
		tabs = append(tabs, b)
	}
	// A fifth visitor: the first session, idle the longest, makes room.
	fifth := d.browser(t)
	fifth.get("/")
	fifthTab := fifth.events()
	if code, _ := tabs[0].post("/ui/clear", nil); code != http.StatusUnauthorized {
		t.Fatalf("the idlest session was not reclaimed: %d", code)
	}
	if code, _ := tabs[1].post("/ui/clear", nil); code != http.StatusNoContent {
		t.Fatalf("another session was reclaimed: %d", code)
	}
	// Every session with an open page: the next visitor is refused.
	for _, b := range tabs[1:] {
		b.events()
	}
	sixth := d.browser(t)
	if code, _ := sixth.get("/"); code != http.StatusOK {
		t.Fatalf("the page itself: %d", code)
	}
	res, err := sixth.client.Get(d.srv.URL + eventsPath)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != http.StatusServiceUnavailable {
		t.Fatalf("a visitor beyond capacity: %d", res.StatusCode)
	}
	if code, _ := tabs[3].post("/ui/clear", nil); code != http.StatusNoContent {
		t.Fatalf("an open page lost its session: %d", code)
	}
	if code, _ := fifth.post("/ui/filter", url.Values{"site": {"Berlin"}}); code != http.StatusNoContent {
		t.Fatalf("the fifth visitor's session: %d", code)
	}
	fifthTab.await(t, "table", func(h string) bool {
		return strings.Contains(h, "kiosk-ber-01") && !strings.Contains(h, "edge-gw-ams-01")
	})
}

// One cookie opening many event streams holds at most MaxStreams: each
// newer stream pushes the oldest out, which is told so and ends; the
// newest go on following the session.
func TestStreamsPerSessionBounded(t *testing.T) {
	const max, extra = 3, 4
	d := newDemo(t, console.Options{Host: webhost.Options{MaxStreams: max}})
	b := d.browser(t)
	b.get("/")
	type tab struct{ events chan string } // "patch", or "bye: <message>"
	var tabs []tab
	for range max + extra {
		ctx, cancel := context.WithCancel(bg)
		t.Cleanup(cancel)
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, d.srv.URL+eventsPath, nil)
		res, err := b.client.Do(req)
		if err != nil || res.StatusCode != http.StatusOK {
			t.Fatalf("stream: %v %v", err, res)
		}
		tb := tab{events: make(chan string, 16)}
		go func() {
			defer res.Body.Close()
			defer close(tb.events)
			sc := bufio.NewScanner(res.Body)
			sc.Buffer(nil, 1<<20)
			ev := ""
			for sc.Scan() {
				line := sc.Text()
				if e, ok := strings.CutPrefix(line, "event: "); ok {
					ev = e
				} else if data, ok := strings.CutPrefix(line, "data: "); ok {
					if ev == "bye" {
						tb.events <- "bye: " + data
					} else {
						tb.events <- ev
					}
				}
			}
		}()
		tabs = append(tabs, tb)
	}
	next := func(i int) string {
		select {
		case e, ok := <-tabs[i].events:
			if !ok {
				return "closed"
			}
			return e
		case <-time.After(10 * time.Second):
			t.Fatalf("stream %d: nothing came", i)
			return ""
		}
	}
	for i := range tabs {
		if e := next(i); e != "patch" { // the first render
			t.Fatalf("stream %d began with %q", i, e)
		}
	}
	for i := range extra {
		if e := next(i); !strings.HasPrefix(e, "bye: ") || !strings.Contains(e, "too many tabs") {
			t.Fatalf("stream %d, pushed out: %q", i, e)
		}
		if e := next(i); e != "closed" {
			t.Fatalf("stream %d went on after bye: %q", i, e)
		}
	}
	if code, msg := b.post("/ui/filter", url.Values{"status": {"offline"}}); code != http.StatusNoContent {
		t.Fatalf("%d %s", code, msg)
	}
	for i := extra; i < len(tabs); i++ {
		if e := next(i); e != "patch" {
			t.Fatalf("stream %d, among the newest, got %q", i, e)
		}
	}
}
