package console_test

import (
	"bufio"
	"context"
	"encoding/json"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentsurface/agentsurface/examples/devices/agent"
	"github.com/agentsurface/agentsurface/examples/devices/console"
	"github.com/agentsurface/agentsurface/examples/devices/domain"
	"github.com/agentsurface/agentsurface/surface"
)

var bg = context.Background()

// demo is the console served by an httptest server, on a fresh seeded
// database in a temp dir.
type demo struct {
	store *domain.Store
	app   *console.App
	srv   *httptest.Server
	reqs  *requestLog
}

// requestLog records the requests a demo's server received.
type requestLog struct {
	mu   sync.Mutex
	uris []string
}

func (l *requestLog) wrap(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		l.mu.Lock()
		l.uris = append(l.uris, r.Method+" "+r.URL.RequestURI())
		l.mu.Unlock()
		h.ServeHTTP(w, r)
	})
}

// requests returns the requests received so far, as "METHOD /path?query".
func (l *requestLog) requests() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.uris)
}

func newDemo(t testing.TB, opts console.Options) *demo {
	t.Helper()
	store, err := domain.Open(bg, filepath.Join(t.TempDir(), "devices.db"))
	if err != nil {
		t.Fatal(err)
	}
	if err := store.Seed(bg); err != nil {
		t.Fatal(err)
	}
	opts.Store = store
	app, err := console.New(opts)
	if err != nil {
		t.Fatal(err)
	}
	reqs := &requestLog{}
	srv := httptest.NewServer(reqs.wrap(app))
	t.Cleanup(func() {
		_ = app.Close() // ends the event streams first
		srv.Close()
		_ = store.Close()
	})
	return &demo{store: store, app: app, srv: srv, reqs: reqs}
}

func (d *demo) mcpURL() string { return d.srv.URL + "/mcp" }

// session starts a session driven without a browser.
func (d *demo) session(t testing.TB) *console.Session {
	t.Helper()
	s, err := d.app.NewSession(console.SessionOptions{KeepShown: true})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// dial connects an MCP client with token.
func (d *demo) dial(t testing.TB, token string) *agent.MCP {
	t.Helper()
	m, err := agent.Dial(bg, d.mcpURL(), &agent.DialOptions{Token: token, HTTPClient: d.srv.Client()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = m.Close() })
	return m
}

// status returns the status of every device.
func (d *demo) status(t testing.TB) map[string]string {
	t.Helper()
	devices, err := d.store.List(bg, console.Operator, domain.Filter{})
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, dev := range devices {
		out[dev.ID] = string(dev.Status)
	}
	return out
}

// browser is a cookie-keeping HTTP client: one browser profile.
type browser struct {
	t      testing.TB
	d      *demo
	client *http.Client
}

func (d *demo) browser(t testing.TB) *browser {
	jar, _ := cookiejar.New(nil)
	c := *d.srv.Client()
	c.Jar = jar
	c.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	return &browser{t: t, d: d, client: &c}
}

// get fetches path and returns the status and body.
func (b *browser) get(path string) (int, string) {
	b.t.Helper()
	res, err := b.client.Get(b.d.srv.URL + path)
	if err != nil {
		b.t.Fatal(err)
	}
	defer res.Body.Close()
	var sb strings.Builder
	_, _ = bufioCopy(&sb, res)
	return res.StatusCode, sb.String()
}

// post posts a form as the page's script does.
func (b *browser) post(path string, form url.Values) (int, string) {
	b.t.Helper()
	req, _ := http.NewRequest(http.MethodPost, b.d.srv.URL+path, strings.NewReader(form.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("X-Agentsurface", "1")
	req.Header.Set("Sec-Fetch-Site", "same-origin")
	res, err := b.client.Do(req)
	if err != nil {
		b.t.Fatal(err)
	}
	defer res.Body.Close()
	var sb strings.Builder
	_, _ = bufioCopy(&sb, res)
	return res.StatusCode, strings.TrimSpace(sb.String())
}

func bufioCopy(sb *strings.Builder, res *http.Response) (int64, error) {
	r := bufio.NewReader(res.Body)
	var n int64
	for {
		line, err := r.ReadString('\n')
		sb.WriteString(line)
		n += int64(len(line))
		if err != nil {
			return n, nil
		}
	}
}

// stream is an open event stream of a browser tab.
type stream struct {
	patches chan map[string]string
	// tools receives the data of "tools" events (streams opened with
	// ?webmcp=1).
	tools  chan string
	cancel context.CancelFunc
	done   chan struct{}
	// last holds the latest html of every fragment seen.
	last map[string]string
}

// eventsPath is the event stream of the console's page, as its script
// opens it: every live fragment.
const eventsPath = "/agentsurface/events?f=header,table,activity,agentsurface-approvals,detail,agent,surface"

// events opens the page's event stream.
func (b *browser) events() *stream {
	b.t.Helper()
	return b.eventsAt(eventsPath)
}

// eventsAt opens the event stream at path (eventsPath + "&webmcp=1").
func (b *browser) eventsAt(path string) *stream {
	b.t.Helper()
	ctx, cancel := context.WithCancel(bg)
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, b.d.srv.URL+path, nil)
	res, err := b.client.Do(req)
	if err != nil {
		cancel()
		b.t.Fatal(err)
	}
	if res.StatusCode != http.StatusOK {
		cancel()
		res.Body.Close()
		b.t.Fatalf("events: %s", res.Status)
	}
	s := &stream{patches: make(chan map[string]string, 64), tools: make(chan string, 64), cancel: cancel, done: make(chan struct{}), last: map[string]string{}}
	go func() {
		defer close(s.done)
		defer res.Body.Close()
		r := bufio.NewReader(res.Body)
		event := ""
		for {
			line, err := r.ReadString('\n')
			if err != nil {
				close(s.patches)
				close(s.tools)
				return
			}
			line = strings.TrimRight(line, "\n")
			switch {
			case strings.HasPrefix(line, "event: "):
				event = strings.TrimPrefix(line, "event: ")
			case strings.HasPrefix(line, "data: ") && event == "patch":
				var p map[string]string
				if json.Unmarshal([]byte(strings.TrimPrefix(line, "data: ")), &p) == nil {
					s.patches <- p
				}
			case strings.HasPrefix(line, "data: ") && event == "tools":
				s.tools <- strings.TrimPrefix(line, "data: ")
			}
		}
	}()
	b.t.Cleanup(s.close)
	return s
}

func (s *stream) close() {
	s.cancel()
	<-s.done
}

// await reads patches until fragment id satisfies ok, or fails after 10s.
func (s *stream) await(t testing.TB, id string, ok func(html string) bool) string {
	t.Helper()
	if html, seen := s.last[id]; seen && ok(html) {
		return html
	}
	deadline := time.After(10 * time.Second)
	for {
		select {
		case p, open := <-s.patches:
			if !open {
				t.Fatalf("the stream ended waiting for %s", id)
			}
			for k, v := range p {
				s.last[k] = v
			}
			if html, seen := p[id]; seen && ok(html) {
				return html
			}
		case <-deadline:
			t.Fatalf("timed out waiting for fragment %s; last: %s", id, s.last[id])
		}
	}
}

// awaitPending waits until the session has a pending confirmation and
// returns it.
func awaitPending(t testing.TB, s *console.Session) surface.PendingConfirmation {
	t.Helper()
	ch := make(chan struct{}, 1)
	unsub := s.Registry().Confirmations().Subscribe(func([]surface.PendingConfirmation) {
		select {
		case ch <- struct{}{}:
		default:
		}
	})
	defer unsub()
	deadline := time.After(10 * time.Second)
	for {
		if p := s.Pending(); len(p) > 0 {
			return p[0]
		}
		select {
		case <-ch:
		case <-deadline:
			t.Fatal("no confirmation was requested")
		}
	}
}

// steps collects a transcript.
type steps struct{ list []agent.Step }

func (s *steps) report(st agent.Step) { s.list = append(s.list, st) }

func (s *steps) outcomes() []string {
	var out []string
	for _, st := range s.list {
		out = append(out, st.Outcome)
	}
	return out
}

func (s *steps) has(outcome string) bool {
	return slices.ContainsFunc(s.list, func(st agent.Step) bool { return st.Outcome == outcome })
}

// call calls a tool by capability id, looking its name up in a fresh list.
func call(t testing.TB, m agent.Tools, capabilityID string, args string) surface.Result {
	t.Helper()
	tools, err := m.List(bg)
	if err != nil {
		t.Fatal(err)
	}
	for _, tool := range tools {
		if tool.CapabilityID == capabilityID {
			var raw json.RawMessage
			if args != "" {
				raw = json.RawMessage(args)
			}
			res, err := m.Call(bg, tool.Name, raw)
			if err != nil {
				t.Fatal(err)
			}
			return res
		}
	}
	t.Fatalf("no tool for %s", capabilityID)
	return surface.Result{}
}

func requireCode(t testing.TB, res surface.Result, want string) {
	t.Helper()
	if got := agent.Outcome(res); got != want {
		t.Fatalf("got %s, want %s: %+v", got, want, res.Error)
	}
}
