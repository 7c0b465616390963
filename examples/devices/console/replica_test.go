package console_test

// The console on several replicas (Options.Host.Replicas, package
// webreplica), in-process: each replica is an App behind its own HTTP
// server with its own session directory on one PostgreSQL database, all
// of them on one SQLite domain file. A browser's cookie jar sends its cookie to every replica (cookies
// ignore ports), as a load balancer without stickiness would.

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/agentsurface/agentsurface/examples/devices/agent"
	"github.com/agentsurface/agentsurface/examples/devices/console"
	"github.com/agentsurface/agentsurface/examples/devices/domain"
	"github.com/agentsurface/agentsurface/mcpsurface"
	"github.com/agentsurface/agentsurface/replica"
	"github.com/agentsurface/agentsurface/surface"
	"github.com/agentsurface/agentsurface/webhost"
	"github.com/agentsurface/agentsurface/webhost/webreplica"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// replicaSecret is the cluster secret of the test replicas.
var replicaSecret = []byte("console-test-secret-0123456789abcdef")

// testLease is the replicas' lease: short, so that the end of a replica
// shows within a second or two.
const testLease = 1500 * time.Millisecond

// node is one replica of the console.
type node struct {
	*demo
	name    string
	pool    *pgxpool.Pool
	rep     *webreplica.Replicas
	stopped bool
}

// dir is the replica's session directory.
func (n *node) dir() *replica.Directory { return n.rep.Directory() }

// cluster is a set of replicas on one Postgres database and one domain
// database.
type cluster struct {
	dbURL      string
	openDomain func() (*domain.Store, error) // opens the domain database, for each replica
	nodes      []*node
}

// newCluster starts n replicas named a, b, c… on a SQLite domain file.
func newCluster(t testing.TB, n int) *cluster {
	t.Helper()
	path := filepath.Join(t.TempDir(), "devices.db")
	return newClusterOn(t, n, func() (*domain.Store, error) { return domain.Open(bg, path) })
}

// newClusterOn starts n replicas named a, b, c… on the domain database
// openDomain opens.
func newClusterOn(t testing.TB, n int, openDomain func() (*domain.Store, error)) *cluster {
	t.Helper()
	c := &cluster{dbURL: pg.Database(t), openDomain: openDomain}
	pool := openPool(t, c.dbURL)
	if err := replica.Migrate(bg, pool); err != nil {
		t.Fatal(err)
	}
	seed, err := c.openDomain()
	if err != nil {
		t.Fatal(err)
	}
	if err := seed.Seed(bg); err != nil {
		t.Fatal(err)
	}
	_ = seed.Close()
	for i := range n {
		c.nodes = append(c.nodes, c.start(t, string(rune('a'+i))))
	}
	return c
}

func openPool(t testing.TB, dbURL string) *pgxpool.Pool {
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

// start starts a replica as the demo does: the listener first (its
// address goes into the directory), then the App with webreplica's
// Replicas, which its Host starts.
func (c *cluster) start(t testing.TB, name string) *node {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	n := &node{name: name, pool: openPool(t, c.dbURL)}
	n.rep, err = webreplica.New(n.pool, "http://"+ln.Addr().String(), replicaSecret, &webreplica.Options{
		Directory: replica.Options{Name: name, Lease: testLease, Timeout: time.Second},
		Channel:   "agentsurface_devices",
		Audit:     &replica.AuditOptions{Replica: name, Timeout: time.Second},
	})
	if err != nil {
		ln.Close()
		t.Fatal(err)
	}
	store, err := c.openDomain()
	if err != nil {
		ln.Close()
		t.Fatal(err)
	}
	app, err := console.New(console.Options{Store: store, Host: webhost.Options{Replicas: n.rep}})
	if err != nil {
		ln.Close()
		t.Fatal(err)
	}
	reqs := &requestLog{}
	srv := &httptest.Server{Listener: ln, Config: &http.Server{Handler: reqs.wrap(app)}}
	srv.Start()
	n.demo = &demo{store: store, app: app, srv: srv, reqs: reqs}
	t.Cleanup(n.stop)
	return n
}

// stop stops the replica: the App (its sessions end, then its Host stops
// the replicas' listener, directory, whose sessions end for every
// replica at once, and audit writer, which flushes), then the server.
func (n *node) stop() {
	if n.stopped {
		return
	}
	n.stopped = true
	_ = n.app.Close()
	n.srv.Close()
	_ = n.store.Close()
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
	return &jar{t: t, client: &http.Client{Transport: tr, Jar: j, Timeout: 20 * time.Second,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}}
}

// at returns the profile's browser talking to replica n.
func (j *jar) at(n *node) *browser { return &browser{t: j.t, d: n.demo, client: j.client} }

// pageSession returns the public session id the page shows.
func pageSession(t *testing.T, html string) string {
	t.Helper()
	const mark = "session <code>"
	i := strings.Index(html, mark)
	if i < 0 {
		t.Fatalf("no session id on the page: %.300s", html)
	}
	id, _, _ := strings.Cut(html[i+len(mark):], "<")
	return id
}

// mcpVia connects an MCP client of token through replica n, speaking
// protocol version.
func mcpVia(t *testing.T, n *node, token, version string) *mcp.ClientSession {
	t.Helper()
	tr := &mcp.StreamableClientTransport{Endpoint: n.mcpURL(), MaxRetries: -1,
		HTTPClient: &http.Client{Transport: bearerRT{token, http.DefaultTransport}}}
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "test-agent", Version: "1.0.0"}, nil).
		Connect(bg, tr, &mcp.ClientSessionOptions{ProtocolVersion: version})
	if err != nil {
		t.Fatalf("connect through %s: %v", n.name, err)
	}
	t.Cleanup(func() { _ = cs.Close() })
	return cs
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

// callCap calls the tool of capabilityID on cs and returns the envelope.
func callCap(t *testing.T, cs *mcp.ClientSession, capabilityID, args string, meta mcp.Meta) surface.Result {
	t.Helper()
	list, err := cs.ListTools(bg, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, tool := range list.Tools {
		if agent.FromMCP(tool).CapabilityID != capabilityID {
			continue
		}
		res, err := cs.CallTool(bg, &mcp.CallToolParams{Name: tool.Name, Arguments: json.RawMessage(args), Meta: meta})
		if err != nil {
			t.Fatalf("call %s: %v", capabilityID, err)
		}
		env, err := agent.Envelope(res)
		if err != nil {
			t.Fatal(err)
		}
		return env
	}
	t.Fatalf("no tool for %s", capabilityID)
	return surface.Result{}
}

// rawMCP posts one JSON-RPC message with token to replica n.
func rawMCP(t *testing.T, n *node, token string) (int, string) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, n.mcpURL(), strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`))
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

// within polls cond every 20ms until it holds or d passes, and returns
// how long it took.
func within(t *testing.T, d time.Duration, what string, cond func() bool) time.Duration {
	t.Helper()
	start := time.Now()
	for !cond() {
		if time.Since(start) > d {
			t.Fatalf("not within %v: %s", d, what)
		}
		time.Sleep(20 * time.Millisecond)
	}
	return time.Since(start)
}

// A page session made through replica a is served by a whichever
// replica its requests reach: the page, its event stream (which streams
// a's changes), its form posts and the WebMCP endpoints, and the join
// link; b makes no session of its own for them.
func TestReplicaPageServedByOwner(t *testing.T) {
	c := newCluster(t, 2)
	a, b := c.nodes[0], c.nodes[1]
	j := newJar(t)
	code, html := j.at(a).get("/")
	if code != http.StatusOK {
		t.Fatalf("page at a: %d", code)
	}
	id := pageSession(t, html)
	if code, html := j.at(b).get("/"); code != http.StatusOK || pageSession(t, html) != id {
		t.Fatalf("page through b: %d, session %s, want %s", code, pageSession(t, html), id)
	}
	tab := j.at(b).events()
	tab.await(t, "table", func(h string) bool { return strings.Contains(h, `data-id="d4"`) })
	if code, msg := j.at(b).post("/ui/toggle", url.Values{"id": {"d4"}}); code != http.StatusNoContent {
		t.Fatalf("toggle through b: %d %s", code, msg)
	}
	tab.await(t, "table", func(h string) bool { return strings.Contains(rowHTML(h, "d4"), `class="selected"`) })
	s := a.app.Sessions()
	if len(s) != 1 || s[0].ID() != id {
		t.Fatalf("a's sessions %v, want only %s", s, id)
	}
	hosted := s[0]
	want := strings.Join(available(webmcpToolset(t, hosted)), " ")
	if got := strings.Join(j.at(b).webmcpTools().names(), " "); got != want || !strings.Contains(got, toolDisable) {
		t.Fatalf("WebMCP tools through b: %s, want a's %s", got, want)
	}
	if n := len(b.app.Sessions()); n != 0 {
		t.Fatalf("b holds %d sessions", n)
	}
	if st := b.dir().Stats(); st.Forwarded == 0 {
		t.Fatalf("b forwarded nothing: %+v", st)
	}
	// The join link of a's session, followed through b.
	other, err := a.app.NewSession(console.SessionOptions{KeepShown: true})
	if err != nil {
		t.Fatal(err)
	}
	j2 := newJar(t)
	if code, _ := j2.at(b).get(other.JoinPath()); code != http.StatusSeeOther {
		t.Fatalf("join through b: %d", code)
	}
	if _, html := j2.at(b).get("/"); pageSession(t, html) != other.ID() {
		t.Fatalf("the joined page shows %s, want %s", pageSession(t, html), other.ID())
	}
	if n := len(b.app.Sessions()); n != 0 {
		t.Fatalf("b holds %d sessions after the join", n)
	}
}

// An MCP client of a's session connected through b — both protocol
// generations — operates a's registry: its selection is the page's on a.
func TestReplicaMCPReachesOwner(t *testing.T) {
	c := newCluster(t, 2)
	a, b := c.nodes[0], c.nodes[1]
	for _, version := range []string{"2025-11-25", "2026-07-28"} {
		t.Run(version, func(t *testing.T) {
			s, err := a.app.NewSession(console.SessionOptions{KeepShown: true})
			if err != nil {
				t.Fatal(err)
			}
			cs := mcpVia(t, b, s.Token(), version)
			if res := callCap(t, cs, "view:devices.table.selectRows", `{"ids":["d4","d7"]}`, nil); res.Status != surface.StatusOK {
				t.Fatalf("selectRows through b: %+v", res.Error)
			}
			res := callCap(t, cs, "view:devices.table.readState", `{}`, nil)
			var st console.TableState
			if err := res.Decode(&st); err != nil || strings.Join(st.Selection, ",") != "d4,d7" {
				t.Fatalf("a's selection read through b: %+v %v", st, err)
			}
			if len(b.app.Sessions()) != 0 {
				t.Fatal("b made a session")
			}
		})
	}
}

// An approval posted through b completes a call held open on a (the
// page's WebMCP agent waiting for the click), and an MCP agent's
// two-phase disable through b runs after the approval posted through
// b; the audit of both replicas lands in agentsurface_audit with the
// session of each record. AS-CONFIRM-001.
func TestReplicaApprovalThroughAnotherReplica(t *testing.T) {
	c := newCluster(t, 2)
	a, b := c.nodes[0], c.nodes[1]
	s, err := a.app.NewSession(console.SessionOptions{KeepShown: true})
	if err != nil {
		t.Fatal(err)
	}
	j := newJar(t)
	if code, _ := j.at(b).get(s.JoinPath()); code != http.StatusSeeOther {
		t.Fatalf("join through b: %d", code)
	}

	// WebMCP: the call is held open on a until the approval through b.
	onA := j.at(a)
	l := onA.webmcpTools()
	if res := onA.webmcpCall(toolSelectRows, l.SurfaceVersion, `{"ids":["d9","d10"]}`); res.Status != surface.StatusOK {
		t.Fatalf("selectRows: %+v", res.Error)
	}
	l = onA.webmcpTools()
	done := make(chan surface.Result, 1)
	go func() {
		body, _ := json.Marshal(map[string]any{"name": toolDisable, "surfaceVersion": l.SurfaceVersion, "input": map[string]any{"reason": "maintenance"}})
		code, out, err := onA.tryWebMCPPost(string(body))
		var res surface.Result
		if err != nil || code != http.StatusOK || json.Unmarshal([]byte(out), &res) != nil {
			res.Status = surface.ResultStatus(fmt.Sprintf("transport: %d %s %v", code, out, err))
		}
		done <- res
	}()
	p := awaitPending(t, s)
	if code, msg := j.at(b).post("/agentsurface/decide", url.Values{"id": {p.ConfirmationID}, "decision": {"approve"}}); code != http.StatusNoContent {
		t.Fatalf("approve through b: %d %s", code, msg)
	}
	select {
	case res := <-done:
		if res.Status != surface.StatusOK || string(res.Output) != `{"disabled":2}` {
			t.Fatalf("the held call: %+v %+v", res, res.Error)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the call held on a did not complete after the approval through b")
	}

	// MCP through b: CONFIRMATION_REQUIRED, approved through b, retried
	// through b.
	cs := mcpVia(t, b, s.Token(), "2025-11-25")
	callCap(t, cs, "view:devices.table.selectRows", `{"ids":["d4"]}`, nil)
	res := callCap(t, cs, domain.DisableID, `{"reason":"lobby camera broken"}`, nil)
	requireCode(t, res, string(surface.CodeConfirmationRequired))
	cid := res.Error.Details["confirmationId"].(string)
	if code, msg := j.at(b).post("/agentsurface/decide", url.Values{"id": {cid}, "decision": {"approve"}}); code != http.StatusNoContent {
		t.Fatalf("approve through b: %d %s", code, msg)
	}
	requireCode(t, callCap(t, cs, domain.DisableID, `{"reason":"lobby camera broken"}`, mcp.Meta{mcpsurface.MetaConfirmationID: cid}), "ok")
	if st := a.status(t); st["d4"] != "disabled" || st["d9"] != "disabled" || st["d10"] != "disabled" {
		t.Fatalf("statuses %v", st)
	}
	if ds := s.Decisions(); len(ds) != 2 || ds[0].Outcome != surface.OutcomeApproved || ds[1].Outcome != surface.OutcomeApproved {
		t.Fatalf("decisions on a: %+v", ds)
	}

	// b's own session, for b's audit.
	sb, err := b.app.NewSession(console.SessionOptions{KeepShown: true})
	if err != nil {
		t.Fatal(err)
	}
	csb := mcpVia(t, a, sb.Token(), "2026-07-28")
	callCap(t, csb, "view:devices.table.selectRows", `{"ids":["d1"]}`, nil)

	// The audit of both, after a graceful stop (nothing lost).
	a.stop()
	b.stop()
	pool := openPool(t, c.dbURL)
	count := func(rep, session, typ string) int {
		var n int
		if err := pool.QueryRow(bg, `SELECT count(*) FROM agentsurface_audit WHERE replica = $1 AND session = $2 AND type = $3`,
			rep, session, typ).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	if n := count("a", s.ID(), string(surface.AuditConfirmationApproved)); n != 2 {
		t.Errorf("a's approvals in the table: %d, want 2", n)
	}
	if n := count("a", s.ID(), string(surface.AuditInvocationSettled)); n < 3 {
		t.Errorf("a's settled calls in the table: %d", n)
	}
	if n := count("b", sb.ID(), string(surface.AuditInvocationSettled)); n < 1 {
		t.Errorf("b's settled calls in the table: %d", n)
	}
	if n := count("b", s.ID(), string(surface.AuditInvocationSettled)); n != 0 {
		t.Errorf("b recorded %d calls of a's session", n)
	}
	var approver string
	if err := pool.QueryRow(bg, `SELECT actor FROM agentsurface_audit WHERE session = $1 AND type = $2 ORDER BY id LIMIT 1`,
		s.ID(), string(surface.AuditConfirmationApproved)).Scan(&approver); err != nil || !strings.Contains(approver, "browser") {
		t.Errorf("the approval's actor %q %v", approver, err)
	}
}

// A domain write on a refreshes the page of a session on b: the
// Notifier carries it (b's stream has no other reason to change).
func TestReplicaDomainWriteRefreshesOtherReplica(t *testing.T) {
	c := newCluster(t, 2)
	a, b := c.nodes[0], c.nodes[1]
	j := newJar(t)
	if code, _ := j.at(b).get("/"); code != http.StatusOK {
		t.Fatal(code)
	}
	tab := j.at(b).events()
	tab.await(t, "table", func(h string) bool { return strings.Contains(rowHTML(h, "d4"), "s-offline") })
	s, err := a.app.NewSession(console.SessionOptions{KeepShown: true})
	if err != nil {
		t.Fatal(err)
	}
	m := a.dial(t, s.Token())
	requireCode(t, call(t, m, "view:devices.table.selectRows", `{"ids":["d4"]}`), "ok")
	res := call(t, m, domain.DisableID, `{"reason":"lobby camera broken"}`)
	cid := res.Error.Details["confirmationId"].(string)
	if _, ok := s.Decide(cid, true, "olivia (operator, test)"); !ok {
		t.Fatal("decide")
	}
	var name string
	tools, err := m.List(bg)
	if err != nil {
		t.Fatal(err)
	}
	for _, tool := range tools {
		if tool.CapabilityID == domain.DisableID {
			name = tool.Name
		}
	}
	res, err = m.CallWith(bg, name, json.RawMessage(`{"reason":"lobby camera broken"}`), agent.CallOptions{ConfirmationID: cid})
	if err != nil {
		t.Fatal(err)
	}
	requireCode(t, res, "ok")
	tab.await(t, "table", func(h string) bool { return strings.Contains(rowHTML(h, "d4"), "s-disabled") })
}

// A replica that stops: every other replica answers its sessions as
// ended within the lease — MCP 401 with the app's message, the event
// stream 410, the page a fresh session — while their own sessions go on.
func TestReplicaStopEndsItsSessions(t *testing.T) {
	c := newCluster(t, 2)
	a, b := c.nodes[0], c.nodes[1]
	sa, err := a.app.NewSession(console.SessionOptions{KeepShown: true})
	if err != nil {
		t.Fatal(err)
	}
	sb, err := b.app.NewSession(console.SessionOptions{KeepShown: true})
	if err != nil {
		t.Fatal(err)
	}
	j := newJar(t)
	j.at(b).get(sa.JoinPath())
	tab := j.at(b).eventsAt(eventsPath)
	tab.await(t, "table", func(h string) bool { return h != "" })
	csb := mcpVia(t, b, sb.Token(), "2025-11-25")
	// The app's answer for a session it does not know; then b looks a's
	// token up, and remembers a as its owner.
	_, ended := rawMCP(t, b, "no-such-token")
	if code, _ := rawMCP(t, b, sa.Token()); code != http.StatusOK {
		t.Fatalf("a's token through b: %d", code)
	}

	a.stop()
	// The stream through b ends.
	select {
	case <-tab.done:
	case <-time.After(5 * time.Second):
		t.Fatal("the stream through b outlived its replica")
	}
	// Until b's next renewal sees a gone, b still knows a as the owner
	// and answers 503 with Retry-After (a cannot be reached); then as
	// ended.
	var unreachable int
	took := within(t, testLease, "b answers a's MCP token as ended", func() bool {
		code, body := rawMCP(t, b, sa.Token())
		if code == http.StatusServiceUnavailable {
			unreachable++
		}
		return code == http.StatusUnauthorized && body == ended
	})
	t.Logf("a's sessions ended on b %v after a stopped (%d answers 503 before)", took.Round(time.Millisecond), unreachable)
	res, err := j.client.Get(b.srv.URL + eventsPath)
	if err != nil {
		t.Fatal(err)
	}
	msg, _ := io.ReadAll(res.Body)
	res.Body.Close()
	if res.StatusCode != http.StatusGone || !strings.Contains(string(msg), "session has ended") {
		t.Fatalf("a's event stream through b: %d %s", res.StatusCode, msg)
	}
	code, html := j.at(b).get("/")
	if code != http.StatusOK || pageSession(t, html) == sa.ID() {
		t.Fatalf("a's page through b: %d, session %s", code, pageSession(t, html))
	}
	if len(b.app.Sessions()) != 2 { // sb and the fresh page's
		t.Fatalf("b holds %d sessions", len(b.app.Sessions()))
	}
	if res := callCap(t, csb, "view:devices.table.selectRows", `{"ids":["d2"]}`, nil); res.Status != surface.StatusOK {
		t.Fatalf("b's own session after a stopped: %+v", res.Error)
	}
}

// A replica whose lease runs out (its row expired, as after a long
// Postgres outage) ends its sessions itself (webreplica tells its Host), the
// others answer them as ended, and it takes new sessions again once it
// has registered anew.
func TestReplicaLeaseLostEndsSessions(t *testing.T) {
	c := newCluster(t, 2)
	a, b := c.nodes[0], c.nodes[1]
	sa, err := a.app.NewSession(console.SessionOptions{KeepShown: true})
	if err != nil {
		t.Fatal(err)
	}
	_, ended := rawMCP(t, b, "no-such-token")
	if code, _ := rawMCP(t, b, sa.Token()); code != http.StatusOK {
		t.Fatalf("a's session through b: %d", code)
	}
	id := a.dir().ID()
	if _, err := c.nodes[1].pool.Exec(bg, `UPDATE agentsurface_replicas SET expires_at = now() - interval '1 second' WHERE id = $1`, id); err != nil {
		t.Fatal(err)
	}
	select {
	case <-sa.Done():
	case <-time.After(2 * testLease):
		t.Fatal("a's session outlived a's lease")
	}
	within(t, testLease, "b answers a's session as ended", func() bool {
		code, body := rawMCP(t, b, sa.Token())
		return code == http.StatusUnauthorized && body == ended
	})
	if code, body := rawMCP(t, a, sa.Token()); code != http.StatusUnauthorized || body != ended {
		t.Fatalf("a's session on a: %d %s", code, body)
	}
	var s2 *console.Session
	within(t, 2*testLease, "a takes new sessions again", func() bool {
		s2, err = a.app.NewSession(console.SessionOptions{KeepShown: true})
		return err == nil
	})
	if a.dir().ID() == id {
		t.Fatal("a did not register anew")
	}
	if code, _ := rawMCP(t, b, s2.Token()); code != http.StatusOK {
		t.Fatalf("a's new session through b: %d", code)
	}
}

// Without a directory that can claim, a visitor gets a page that tries
// again (503, Retry-After) and the host API the error; nothing hangs.
func TestReplicaClaimFailure(t *testing.T) {
	c := newCluster(t, 1)
	a := c.nodes[0]
	_ = a.dir().Close() // claims fail from now on
	if _, err := a.app.NewSession(console.SessionOptions{}); !errors.Is(err, webhost.ErrUnavailable) || !errors.Is(err, replica.ErrClosed) {
		t.Fatalf("NewSession: %v", err)
	}
	res, err := http.Get(a.srv.URL + "/")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(res.Body)
	res.Body.Close()
	if res.StatusCode != http.StatusServiceUnavailable || res.Header.Get("Retry-After") == "" ||
		!strings.Contains(string(body), `http-equiv="refresh"`) {
		t.Fatalf("page: %d %q %s", res.StatusCode, res.Header.Get("Retry-After"), body)
	}
	if len(a.app.Sessions()) != 0 {
		t.Fatal("a session without a claim")
	}
}
