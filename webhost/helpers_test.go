package webhost_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/agentsurface/agentsurface/surface"
	"github.com/agentsurface/agentsurface/webhost"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	if os.Getenv("AGENTSURFACE_NO_GOLEAK") == "1" {
		os.Exit(m.Run())
	}
	goleak.VerifyTestMain(m)
}

// waitFor is the failure bound of a wait for a condition: never the
// thing waited for.
const waitFor = 30 * time.Second

// raw sends one request as an attacker would: any Host header, any
// header, no cookie jar, no redirects followed.
func (a *app) raw(t testing.TB, method, path, host string, hdr http.Header, body string) *http.Response {
	t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, a.srv.URL+path, rd)
	if err != nil {
		t.Fatal(err)
	}
	if host != "" {
		req.Host = host
	}
	for k, v := range hdr {
		req.Header[k] = v
	}
	c := *a.srv.Client()
	c.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	res, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	_, _ = io.Copy(io.Discard, res.Body)
	res.Body.Close()
	return res
}

// browser is a cookie-keeping client: one browser profile.
type browser struct {
	t      testing.TB
	a      *app
	client *http.Client
	header http.Header // sent with every request
}

func (a *app) browser(t testing.TB) *browser {
	jar, _ := cookiejar.New(nil)
	c := *a.srv.Client()
	c.Jar = jar
	c.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	return &browser{t: t, a: a, client: &c, header: http.Header{}}
}

func (b *browser) do(req *http.Request) (int, string) {
	b.t.Helper()
	for k, v := range b.header {
		req.Header[k] = v
	}
	res, err := b.client.Do(req)
	if err != nil {
		b.t.Fatal(err)
	}
	defer res.Body.Close()
	body, _ := io.ReadAll(res.Body)
	return res.StatusCode, strings.TrimSpace(string(body))
}

// get fetches path and returns the status and body.
func (b *browser) get(path string) (int, string) {
	b.t.Helper()
	req, _ := http.NewRequest(http.MethodGet, b.a.srv.URL+path, nil)
	return b.do(req)
}

// page loads the page and returns its session, by the public id the
// page shows.
func (b *browser) page() *webhost.Session {
	b.t.Helper()
	code, body := b.get("/")
	if code != http.StatusOK {
		b.t.Fatalf("GET /: %d %s", code, body)
	}
	const mark = `<code id="sid">`
	i := strings.Index(body, mark)
	if i < 0 {
		b.t.Fatalf("no session id on the page: %.300s", body)
	}
	id, _, _ := strings.Cut(body[i+len(mark):], "<")
	s := b.a.h.Session(id)
	if s == nil {
		b.t.Fatalf("no session %s", id)
	}
	return s
}

// post posts a form as the page script does.
func (b *browser) post(path string, form url.Values) (int, string) {
	b.t.Helper()
	req, _ := http.NewRequest(http.MethodPost, b.a.srv.URL+path, strings.NewReader(form.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("X-Agentsurface", "1")
	req.Header.Set("Sec-Fetch-Site", "same-origin")
	return b.do(req)
}

// cookie returns the browser's session cookie.
func (b *browser) cookie() string {
	u, _ := url.Parse(b.a.srv.URL)
	for _, c := range b.client.Jar.Cookies(u) {
		if c.Name == "agentsurface_session" {
			return c.Value
		}
	}
	return ""
}

// stream is an open event stream of a page.
type stream struct {
	events chan sse
	cancel context.CancelFunc
	done   chan struct{}
	last   map[string]string // the latest html of every fragment seen
}

// sse is one server-sent event.
type sse struct{ event, data string }

// open opens the page's event stream for fragments ids (and WebMCP
// tools with webmcp).
func (b *browser) open(webmcp bool, ids ...string) *stream {
	b.t.Helper()
	s, code := b.tryOpen(webmcp, ids...)
	if s == nil {
		b.t.Fatalf("events: %d", code)
	}
	return s
}

func (b *browser) tryOpen(webmcp bool, ids ...string) (*stream, int) {
	b.t.Helper()
	q := url.Values{}
	if len(ids) > 0 {
		q.Set("f", strings.Join(ids, ","))
	}
	if webmcp {
		q.Set("webmcp", "1")
	}
	ctx, cancel := context.WithCancel(bg)
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, b.a.srv.URL+"/agentsurface/events?"+q.Encode(), nil)
	for k, v := range b.header {
		req.Header[k] = v
	}
	res, err := b.client.Do(req)
	if err != nil {
		cancel()
		b.t.Fatal(err)
	}
	if res.StatusCode != http.StatusOK {
		cancel()
		res.Body.Close()
		return nil, res.StatusCode
	}
	s := &stream{events: make(chan sse, 256), cancel: cancel, done: make(chan struct{}), last: map[string]string{}}
	go func() {
		defer close(s.done)
		defer close(s.events)
		defer res.Body.Close()
		r := bufio.NewReader(res.Body)
		var ev sse
		for {
			line, err := r.ReadString('\n')
			if err != nil {
				return
			}
			line = strings.TrimRight(line, "\n")
			switch {
			case line == "":
				if ev.event != "" || ev.data != "" {
					select {
					case s.events <- ev:
					case <-ctx.Done():
						return
					}
				}
				ev = sse{}
			case strings.HasPrefix(line, "event: "):
				ev.event = strings.TrimPrefix(line, "event: ")
			case strings.HasPrefix(line, "data: "):
				ev.data = strings.TrimPrefix(line, "data: ")
			}
		}
	}()
	b.t.Cleanup(s.close)
	return s, http.StatusOK
}

func (s *stream) close() {
	s.cancel()
	<-s.done
}

// next returns the next event, "" when the stream ended.
func (s *stream) next(t testing.TB) sse {
	t.Helper()
	select {
	case e, ok := <-s.events:
		if !ok {
			return sse{}
		}
		return e
	case <-time.After(waitFor):
		t.Fatal("no event came")
		return sse{}
	}
}

// await reads events until fragment id satisfies ok.
func (s *stream) await(t testing.TB, id string, ok func(html string) bool) string {
	t.Helper()
	if html, seen := s.last[id]; seen && ok(html) {
		return html
	}
	deadline := time.After(waitFor)
	for {
		select {
		case e, open := <-s.events:
			if !open {
				t.Fatalf("the stream ended waiting for %s; last: %q", id, s.last[id])
			}
			if e.event != "patch" {
				continue
			}
			var p map[string]string
			if err := json.Unmarshal([]byte(e.data), &p); err != nil {
				t.Fatal(err)
			}
			for k, v := range p {
				s.last[k] = v
			}
			if html, seen := p[id]; seen && ok(html) {
				return html
			}
		case <-deadline:
			t.Fatalf("timed out waiting for fragment %s; last: %q", id, s.last[id])
		}
	}
}

// ended waits for the stream to end and returns its last event.
func (s *stream) ended(t testing.TB) sse {
	t.Helper()
	var last sse
	for {
		e := s.next(t)
		if e.event == "" {
			return last
		}
		last = e
	}
}

// bearerRT adds a bearer token to every request.
type bearerRT struct {
	token string
	next  http.RoundTripper
}

func (b bearerRT) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.token)
	return b.next.RoundTrip(r)
}

// Protocol versions of the two generations MCP clients speak.
const (
	stateful    = "2025-11-25"
	sessionless = "2026-07-28"
)

// dial connects an MCP client with token, speaking version.
func (a *app) dial(t testing.TB, token, version string) *mcp.ClientSession {
	t.Helper()
	cs, err := a.tryDial(token, version, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cs.Close() })
	return cs
}

func (a *app) tryDial(token, version string, hdr http.Header) (*mcp.ClientSession, error) {
	var rt http.RoundTripper = a.srv.Client().Transport
	if token != "" {
		rt = bearerRT{token, rt}
	}
	if hdr != nil {
		rt = headerRT{hdr, rt}
	}
	tr := &mcp.StreamableClientTransport{Endpoint: a.srv.URL + "/mcp", MaxRetries: -1, HTTPClient: &http.Client{Transport: rt}}
	return mcp.NewClient(&mcp.Implementation{Name: "test-agent", Version: "1.0.0"}, nil).
		Connect(bg, tr, &mcp.ClientSessionOptions{ProtocolVersion: version})
}

type headerRT struct {
	h    http.Header
	next http.RoundTripper
}

func (h headerRT) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	for k, v := range h.h {
		r.Header[k] = v
	}
	return h.next.RoundTrip(r)
}

// callTool calls a tool by capability id through cs, with args (JSON or
// ""), and optional _meta, and returns the result envelope.
func callTool(t testing.TB, cs *mcp.ClientSession, capabilityID, args string, meta mcp.Meta) surface.Result {
	t.Helper()
	name := toolName(t, cs, capabilityID)
	var raw any
	if args != "" {
		raw = json.RawMessage(args)
	}
	res, err := cs.CallTool(bg, &mcp.CallToolParams{Name: name, Arguments: raw, Meta: meta})
	if err != nil {
		t.Fatalf("%s: %v", capabilityID, err)
	}
	return envelope(t, res)
}

// toolName returns the name of the tool of capabilityID in a fresh list.
func toolName(t testing.TB, cs *mcp.ClientSession, capabilityID string) string {
	t.Helper()
	tools, err := cs.ListTools(bg, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, tool := range tools.Tools {
		if m, _ := tool.Meta["agentsurface/capabilityId"].(string); m == capabilityID {
			return tool.Name
		}
	}
	t.Fatalf("no tool for %s", capabilityID)
	return ""
}

func envelope(t testing.TB, res *mcp.CallToolResult) surface.Result {
	t.Helper()
	b, err := json.Marshal(res.StructuredContent)
	if err != nil {
		t.Fatal(err)
	}
	var r surface.Result
	if err := json.Unmarshal(b, &r); err != nil {
		t.Fatalf("%v: %s", err, b)
	}
	return r
}

// code returns "ok" or the error code of a result.
func code(r surface.Result) string {
	if r.Status == surface.StatusOK {
		return "ok"
	}
	if r.Error == nil {
		return "error without code"
	}
	return string(r.Error.Code)
}

func requireCode(t testing.TB, r surface.Result, want string) {
	t.Helper()
	if got := code(r); got != want {
		t.Fatalf("got %s, want %s: %+v", got, want, r.Error)
	}
}

// awaitPending waits until s has a pending confirmation and returns it.
func awaitPending(t testing.TB, s *webhost.Session) surface.PendingConfirmation {
	t.Helper()
	ch := make(chan struct{}, 1)
	unsub := s.Registry().Confirmations().Subscribe(func([]surface.PendingConfirmation) {
		select {
		case ch <- struct{}{}:
		default:
		}
	})
	defer unsub()
	deadline := time.After(waitFor)
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

// eventually polls cond, waking on every change of s's registry and
// pending confirmations (and at least every 10ms), until it holds.
func eventually(t testing.TB, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(waitFor)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting until %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func must[T any](v T, err error) T {
	if err != nil {
		panic(fmt.Sprint(err))
	}
	return v
}
