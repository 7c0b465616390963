package webreplica_test

// A webhost application on several replicas, in-process: each replica is
// a Host behind its own HTTP server with its own Replicas on one
// PostgreSQL database. A browser's cookie jar sends its cookie to every
// replica (cookies ignore ports), as a load balancer without stickiness
// would.

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentsurface/agentsurface/internal/pgtest"
	"github.com/agentsurface/agentsurface/replica"
	"github.com/agentsurface/agentsurface/surface"
	"github.com/agentsurface/agentsurface/webhost"
	"github.com/agentsurface/agentsurface/webhost/webreplica"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

var pg pgtest.Lazy

func TestMain(m *testing.M) { pgtest.Main(m, &pg) }

var bg = context.Background()

const (
	secret    = "webreplica-test-secret-0123456789abcdef"
	testLease = 1500 * time.Millisecond
	waitFor   = 30 * time.Second
)

// counter is the application's views: a counter with a read, an add and
// a reset that needs approval; its page shows it live.
type counter struct {
	s        *webhost.Session
	mu       sync.Mutex
	n        int
	notified []string
}

func (c *counter) value() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.n
}

func (c *counter) Mount(ctx context.Context, s *webhost.Session) error {
	_, err := s.Registry().RegisterContext(ctx, surface.Component{
		Type: "demo.counter", Description: "A counter",
		Observations: map[string]surface.Capability{"read": surface.Observation(surface.ObservationDef[int]{
			Description: "Read the counter",
			Read:        func(context.Context, *surface.Call) (int, error) { return c.value(), nil },
		})},
		Actions: map[string]surface.Capability{
			"add": surface.Action(surface.ActionDef[surface.None, surface.None]{
				Description: "Add one", Effect: surface.EffectLocalState,
				Execute: func(context.Context, *surface.Call, surface.None) (surface.None, error) {
					c.add(1)
					return surface.None{}, nil
				},
			}),
			"reset": surface.Action(surface.ActionDef[surface.None, surface.None]{
				Description: "Reset", Effect: surface.EffectLocalState, Confirmation: surface.ConfirmRequired,
				Execute: func(context.Context, *surface.Call, surface.None) (surface.None, error) {
					c.add(-c.value())
					return surface.None{}, nil
				},
			}),
		},
	})
	return err
}

func (c *counter) add(d int) {
	c.mu.Lock()
	c.n += d
	c.mu.Unlock()
	c.s.Changed("count")
}

func (c *counter) Fragment(_ context.Context, w io.Writer, id string) error {
	if id != "count" {
		return webhost.ErrNoFragment
	}
	_, err := fmt.Fprintf(w, "%d", c.value())
	return err
}

func (c *counter) Notified(_ context.Context, topic string) {
	c.mu.Lock()
	c.notified = append(c.notified, topic)
	c.mu.Unlock()
}

func routes(h *webhost.Host) http.Handler {
	m := http.NewServeMux()
	m.Handle("GET /{$}", h.Page(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s := webhost.SessionFrom(r.Context())
		fmt.Fprintf(w, `<!doctype html><title>c</title>%s<p>session <code id="sid">%s</code></p><p id="count" data-fragment></p>`, h.Script(), s.ID())
	})))
	m.Handle("POST /add", h.Action(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		webhost.SessionFrom(r.Context()).Views().(*counter).add(1)
		h.Posted(w, r)
	})))
	return m
}

// node is one replica.
type node struct {
	name    string
	h       *webhost.Host
	rep     *webreplica.Replicas
	pool    *pgxpool.Pool
	srv     *httptest.Server
	stopped bool
}

func (n *node) url() string { return n.srv.URL }

// stop stops the replica: its Host (its sessions end, then its
// Replicas), then its server.
func (n *node) stop() {
	if n.stopped {
		return
	}
	n.stopped = true
	_ = n.h.Close()
	n.srv.Close()
}

type cluster struct {
	dbURL string
	nodes []*node
}

func newCluster(t *testing.T, n int) *cluster {
	t.Helper()
	c := &cluster{dbURL: pg.Database(t)}
	for i := range n {
		c.nodes = append(c.nodes, c.start(t, string(rune('a'+i))))
	}
	return c
}

func openPool(t *testing.T, dbURL string) *pgxpool.Pool {
	t.Helper()
	cfg, err := pgxpool.ParseConfig(dbURL)
	if err != nil {
		t.Fatal(err)
	}
	cfg.MaxConns = 6
	pool, err := pgxpool.NewWithConfig(bg, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	return pool
}

// start starts a replica: the listener first (its address goes into the
// directory), then the Replicas and the Host that starts them.
func (c *cluster) start(t *testing.T, name string) *node {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	n := &node{name: name, pool: openPool(t, c.dbURL)}
	n.rep, err = webreplica.New(n.pool, "http://"+ln.Addr().String(), []byte(secret), &webreplica.Options{
		Directory: replica.Options{Name: name, Lease: testLease, Timeout: time.Second},
		Channel:   "webreplica_test",
		Audit:     &replica.AuditOptions{Replica: name, Timeout: time.Second},
		Migrate:   true,
	})
	if err != nil {
		t.Fatal(err)
	}
	n.h, err = webhost.New(webhost.Options{
		NewViews: func(s *webhost.Session) (webhost.Views, error) { return &counter{s: s}, nil },
		Replicas: n.rep,
	})
	if err != nil {
		ln.Close()
		t.Fatal(err)
	}
	n.srv = &httptest.Server{Listener: ln, Config: &http.Server{Handler: n.h.Handler(routes(n.h))}}
	n.srv.Start()
	t.Cleanup(n.stop)
	return n
}

// jar is one browser profile: its cookies go to every replica.
type jar struct {
	t      *testing.T
	client *http.Client
}

func newJar(t *testing.T) *jar {
	j, _ := cookiejar.New(nil)
	tr := &http.Transport{DisableCompression: true}
	t.Cleanup(tr.CloseIdleConnections)
	return &jar{t: t, client: &http.Client{Transport: tr, Jar: j, Timeout: waitFor,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}}
}

func (j *jar) do(method, url string, body io.Reader, hdr map[string]string) (int, string) {
	j.t.Helper()
	req, _ := http.NewRequest(method, url, body)
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	res, err := j.client.Do(req)
	if err != nil {
		j.t.Fatal(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return res.StatusCode, string(b)
}

// page loads the page through n and returns the session id it shows.
func (j *jar) page(n *node) string {
	j.t.Helper()
	code, body := j.do("GET", n.url()+"/", nil, nil)
	const mark = `<code id="sid">`
	i := strings.Index(body, mark)
	if code != http.StatusOK || i < 0 {
		j.t.Fatalf("page through %s: %d %.200s", n.name, code, body)
	}
	id, _, _ := strings.Cut(body[i+len(mark):], "<")
	return id
}

func (j *jar) post(n *node, path string, form url.Values) int {
	j.t.Helper()
	code, _ := j.do("POST", n.url()+path, strings.NewReader(form.Encode()), map[string]string{
		"Content-Type": "application/x-www-form-urlencoded", "Sec-Fetch-Site": "same-origin", "X-Agentsurface": "1"})
	return code
}

// stream reads an event stream's patches of "count".
type stream struct {
	counts chan string
	done   chan struct{}
	cancel context.CancelFunc
}

func (j *jar) events(n *node) *stream {
	j.t.Helper()
	ctx, cancel := context.WithCancel(bg)
	req, _ := http.NewRequestWithContext(ctx, "GET", n.url()+"/agentsurface/events?f=count", nil)
	res, err := j.client.Do(req)
	if err != nil || res.StatusCode != http.StatusOK {
		cancel()
		j.t.Fatalf("events through %s: %v %v", n.name, err, res)
	}
	s := &stream{counts: make(chan string, 64), done: make(chan struct{}), cancel: cancel}
	go func() {
		defer close(s.done)
		defer res.Body.Close()
		sc := bufio.NewScanner(res.Body)
		for sc.Scan() {
			if data, ok := strings.CutPrefix(sc.Text(), "data: "); ok {
				var p map[string]string
				if json.Unmarshal([]byte(data), &p) == nil {
					if v, ok := p["count"]; ok {
						select {
						case s.counts <- v:
						case <-ctx.Done():
							return
						}
					}
				}
			}
		}
	}()
	j.t.Cleanup(func() {
		cancel()
		<-s.done
	})
	return s
}

func (s *stream) await(t *testing.T, want string) {
	t.Helper()
	deadline := time.After(waitFor)
	for {
		select {
		case v := <-s.counts:
			if v == want {
				return
			}
		case <-s.done:
			t.Fatalf("the stream ended waiting for %s", want)
		case <-deadline:
			t.Fatalf("timed out waiting for count %s", want)
		}
	}
}

type bearerRT struct {
	token string
	next  http.RoundTripper
}

func (b bearerRT) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.token)
	return b.next.RoundTrip(r)
}

// mcpVia connects an MCP client of token through replica n.
func mcpVia(t *testing.T, n *node, token, version string) *mcp.ClientSession {
	t.Helper()
	tr := &mcp.StreamableClientTransport{Endpoint: n.url() + "/mcp", MaxRetries: -1,
		HTTPClient: &http.Client{Transport: bearerRT{token, http.DefaultTransport}}}
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "test-agent", Version: "1"}, nil).
		Connect(bg, tr, &mcp.ClientSessionOptions{ProtocolVersion: version})
	if err != nil {
		t.Fatalf("connect through %s: %v", n.name, err)
	}
	t.Cleanup(func() { _ = cs.Close() })
	return cs
}

func call(t *testing.T, cs *mcp.ClientSession, tool string) surface.Result {
	t.Helper()
	res, err := cs.CallTool(bg, &mcp.CallToolParams{Name: tool})
	if err != nil {
		t.Fatal(err)
	}
	b, _ := json.Marshal(res.StructuredContent)
	var r surface.Result
	if err := json.Unmarshal(b, &r); err != nil {
		t.Fatal(err)
	}
	return r
}

// rawMCP posts one JSON-RPC message with token to replica n.
func rawMCP(t *testing.T, n *node, token string) (int, string) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, n.url()+"/mcp", strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`))
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return res.StatusCode, strings.TrimSpace(string(b))
}

// within polls cond every 20ms until it holds or the bound passes.
func within(t *testing.T, d time.Duration, what string, cond func() bool) {
	t.Helper()
	start := time.Now()
	for !cond() {
		if time.Since(start) > d {
			t.Fatalf("not within %v: %s", d, what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// A browser's session made through replica a is served by a whichever
// replica its requests reach — the event stream (streaming a's
// changes), the form posts, the approvals — and b makes no session of
// its own for them. The application's code is the one-process code, with
// Replicas passed in its Options.
func TestPageServedByOwner(t *testing.T) {
	c := newCluster(t, 2)
	a, b := c.nodes[0], c.nodes[1]
	j := newJar(t)
	id := j.page(a)
	s := a.h.Session(id)
	if s == nil {
		t.Fatalf("a does not hold the page's session %s", id)
	}
	tab := j.events(b)
	tab.await(t, "0")
	if code := j.post(b, "/add", nil); code != http.StatusNoContent {
		t.Fatalf("a form post through b: %d", code)
	}
	tab.await(t, "1")
	if got := j.page(b); got != id {
		t.Fatalf("the page through b shows session %s, want %s", got, id)
	}
	if n := len(b.h.Sessions()); n != 0 {
		t.Fatalf("b holds %d sessions", n)
	}
	// An approval through b.
	res := s.Registry().Invoke(bg, surface.Invocation{CapabilityID: "view:demo.counter.reset"}, surface.InvokeOptions{})
	if res.Error == nil || res.Error.Code != surface.CodeConfirmationRequired {
		t.Fatalf("%+v", res)
	}
	cid, _ := res.Error.Details["confirmationId"].(string)
	if code := j.post(b, "/agentsurface/decide", url.Values{"id": {cid}, "decision": {"approve"}}); code != http.StatusNoContent {
		t.Fatalf("approve through b: %d", code)
	}
	if ds := s.Decisions(); len(ds) != 1 || ds[0].Outcome != surface.OutcomeApproved {
		t.Fatalf("decisions %+v", ds)
	}
}

// An agent reaches its session's owner through any replica, on both
// protocol generations; the session's audit records reach the shared
// table under its public id.
func TestMCPReachesOwnerAndAuditIsShared(t *testing.T) {
	c := newCluster(t, 2)
	a, b := c.nodes[0], c.nodes[1]
	s, err := a.h.NewSession(webhost.SessionOptions{KeepShown: true})
	if err != nil {
		t.Fatal(err)
	}
	for _, version := range []string{"2025-11-25", "2026-07-28"} {
		cs := mcpVia(t, b, s.Token(), version)
		if r := call(t, cs, "view_demo__counter__add"); r.Status != surface.StatusOK {
			t.Fatalf("%s: %+v", version, r.Error)
		}
	}
	if v := s.Views().(*counter).value(); v != 2 {
		t.Fatalf("counter %d", v)
	}
	if code, _ := rawMCP(t, b, "no-such-token"); code != http.StatusUnauthorized {
		t.Fatalf("an unknown token through b: %d", code)
	}
	a.stop() // flushes a's audit
	var n int
	if err := b.pool.QueryRow(bg, `SELECT count(*) FROM agentsurface_audit WHERE session = $1 AND replica = 'a' AND capability_id = 'view:demo.counter.add'`, s.ID()).Scan(&n); err != nil {
		t.Fatal(err)
	}
	if n < 2 {
		t.Fatalf("%d audit records of the calls in the shared table", n)
	}
}

// Host.Notify on one replica reaches the views of every replica's
// sessions.
func TestNotifyReachesEveryReplica(t *testing.T) {
	c := newCluster(t, 2)
	a, b := c.nodes[0], c.nodes[1]
	sa, _ := a.h.NewSession(webhost.SessionOptions{})
	sb, _ := b.h.NewSession(webhost.SessionOptions{})
	a.h.Notify("prices")
	for _, s := range []*webhost.Session{sa, sb} {
		v := s.Views().(*counter)
		within(t, waitFor, "the views of "+s.ID()+" were notified", func() bool {
			v.mu.Lock()
			defer v.mu.Unlock()
			return len(v.notified) == 1 && v.notified[0] == "prices"
		})
	}
}

// When a replica stops, its sessions end for every replica: a page's
// stream through another replica ends, its token is answered as ended
// there, and its page gets a fresh session there.
func TestStopEndsItsSessions(t *testing.T) {
	c := newCluster(t, 2)
	a, b := c.nodes[0], c.nodes[1]
	j := newJar(t)
	id := j.page(a)
	s := a.h.Session(id)
	tab := j.events(b)
	tab.await(t, "0")
	_, ended := rawMCP(t, b, "no-such-token")
	a.stop()
	select {
	case <-tab.done:
	case <-time.After(waitFor):
		t.Fatal("the stream through b outlived its replica")
	}
	within(t, waitFor, "b answers a's token as ended", func() bool {
		code, body := rawMCP(t, b, s.Token())
		return code == http.StatusUnauthorized && body == ended
	})
	if got := j.page(b); got == id || b.h.Session(got) == nil {
		t.Fatalf("a's page through b: session %s", got)
	}
}

// A replica whose lease runs out (its row expired, as after a long
// Postgres outage) ends its sessions itself, is not ready until it has
// registered anew, and then takes new sessions again.
func TestLeaseLostEndsSessions(t *testing.T) {
	c := newCluster(t, 2)
	a, b := c.nodes[0], c.nodes[1]
	s, err := a.h.NewSession(webhost.SessionOptions{KeepShown: true})
	if err != nil {
		t.Fatal(err)
	}
	id := a.rep.Directory().ID()
	if _, err := b.pool.Exec(bg, `UPDATE agentsurface_replicas SET expires_at = now() - interval '1 second' WHERE id = $1`, id); err != nil {
		t.Fatal(err)
	}
	select {
	case <-s.Done():
	case <-time.After(waitFor):
		t.Fatal("a's session outlived a's lease")
	}
	within(t, waitFor, "a takes new sessions again", func() bool {
		_, err := a.h.NewSession(webhost.SessionOptions{})
		return err == nil
	})
	if a.rep.Directory().ID() == id || a.rep.Ready() != nil {
		t.Fatalf("a did not register anew: %v", a.rep.Ready())
	}
	res, err := http.Get(a.url() + "/readyz")
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != http.StatusOK {
		t.Fatalf("readiness after registering anew: %d", res.StatusCode)
	}
}

// Without a directory that can claim, a visitor gets a page that tries
// again (503, Retry-After), the host API ErrUnavailable, readiness fails;
// nothing hangs and no session is made.
func TestClaimFailure(t *testing.T) {
	c := newCluster(t, 1)
	a := c.nodes[0]
	_ = a.rep.Directory().Close() // claims fail from now on
	if _, err := a.h.NewSession(webhost.SessionOptions{}); !errors.Is(err, webhost.ErrUnavailable) || !errors.Is(err, replica.ErrClosed) {
		t.Fatalf("NewSession: %v", err)
	}
	res, err := http.Get(a.url() + "/")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(res.Body)
	res.Body.Close()
	if res.StatusCode != http.StatusServiceUnavailable || res.Header.Get("Retry-After") == "" || !strings.Contains(string(body), `http-equiv="refresh"`) {
		t.Fatalf("page: %d %q %s", res.StatusCode, res.Header.Get("Retry-After"), body)
	}
	if len(a.h.Sessions()) != 0 || a.h.Stats().Refused.Unavailable == 0 {
		t.Fatalf("sessions %d, stats %+v", len(a.h.Sessions()), a.h.Stats())
	}
}

// New refuses the options the Host owns.
func TestNewRefusesHostOwnedOptions(t *testing.T) {
	pool := &pgxpool.Pool{}
	for _, o := range []webreplica.Options{
		{Directory: replica.Options{OnLeaseLost: func() {}}},
		{Forward: replica.ForwardOptions{LongLived: func(*http.Request) bool { return true }}},
		{Forward: replica.ForwardOptions{ErrorHandler: func(http.ResponseWriter, *http.Request, error) {}}},
	} {
		if _, err := webreplica.New(pool, "http://127.0.0.1:1", []byte(secret), &o); err == nil {
			t.Errorf("accepted %+v", o)
		}
	}
}

// An approve link reaches its session's owner through any replica: it
// names the session by its public id, which the owner claimed with the
// session's credentials. Opened through b in a browser of the session
// (joined through b), a's session's request shows and is approved (as
// "link"); in a browser of no session it is refused; b makes no
// session; a forged link and a link naming no session are refused
// through b alike, and a replayed one says it is decided.
func TestApproveLinkReachesOwner(t *testing.T) {
	c := newCluster(t, 2)
	a, b := c.nodes[0], c.nodes[1]
	s, err := a.h.NewSession(webhost.SessionOptions{KeepShown: true})
	if err != nil {
		t.Fatal(err)
	}
	res := s.Registry().Invoke(bg, surface.Invocation{CapabilityID: "view:demo.counter.reset"}, surface.InvokeOptions{})
	if res.Error == nil || res.Error.Code != surface.CodeConfirmationRequired {
		t.Fatalf("%+v", res)
	}
	p := s.Pending()[0]
	link := s.ApproveURL(p)
	stranger := newJar(t)
	if code, _ := stranger.do("GET", b.url()+link, nil, nil); code != http.StatusUnauthorized {
		t.Fatalf("the link outside the session's browsers, through b: %d", code)
	}
	phone := newJar(t)
	if code, _ := phone.do("GET", b.url()+s.JoinPath(), nil, nil); code != http.StatusSeeOther {
		t.Fatalf("join through b: %d", code)
	}
	code, page := phone.do("GET", b.url()+link, nil, nil)
	if code != http.StatusOK || !strings.Contains(page, `data-state="ask"`) || !strings.Contains(page, p.ConfirmationID) {
		t.Fatalf("the link through b: %d %.300s", code, page)
	}
	form := map[string]string{"Content-Type": "application/x-www-form-urlencoded", "Sec-Fetch-Site": "same-origin"}
	forged := link[:len(link)-2] + "AA"
	if strings.HasSuffix(link, "AA") {
		forged = link[:len(link)-2] + "BA"
	}
	i := strings.Index(link, "link=s_")
	nobody := link[:i] + "link=s_nosuchsession.u" + link[strings.LastIndex(link, "."):]
	for _, l := range []string{forged, nobody} {
		if code, _ := phone.do("POST", b.url()+l, strings.NewReader("decision=approve"), form); code != http.StatusNotFound {
			t.Fatalf("a bad link through b: %d", code)
		}
	}
	if code, page := phone.do("POST", b.url()+link, strings.NewReader("decision=approve"), form); code != http.StatusOK || !strings.Contains(page, `data-outcome="approved"`) {
		t.Fatalf("approve through b: %d %.300s", code, page)
	}
	if ds := s.Decisions(); len(ds) != 1 || ds[0].Outcome != surface.OutcomeApproved || ds[0].Channel != surface.ChannelLink {
		t.Fatalf("decisions %+v", ds)
	}
	if code, _ := phone.do("GET", b.url()+link, nil, nil); code != http.StatusGone {
		t.Fatalf("replayed through b: %d", code)
	}
	if n := len(b.h.Sessions()); n != 0 {
		t.Fatalf("b holds %d sessions", n)
	}
	if res := s.Registry().Invoke(bg, surface.Invocation{CapabilityID: "view:demo.counter.reset", ConfirmationID: p.ConfirmationID}, surface.InvokeOptions{}); res.Status != surface.StatusOK {
		t.Fatalf("the retry: %+v", res.Error)
	}
}
