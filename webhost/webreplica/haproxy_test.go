package webreplica_test

// The balancer recipe of docs/deploy.md, run: docs/haproxy.cfg, changed
// only in its addresses, in a real HAProxy process in front of three
// in-process replicas on a real PostgreSQL. The test waits for what
// HAProxy reports on its stats socket and for what the replicas see,
// never for a duration.

import (
	"bufio"
	"bytes"
	"context"
	"encoding/csv"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/cookiejar"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/agentsurface/agentsurface/replica"
	"github.com/agentsurface/agentsurface/webhost"
	"github.com/agentsurface/agentsurface/webhost/webreplica"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// recipe is the balancer configuration deploy.md documents, and the
// addresses it names, which the test replaces with its own.
const (
	recipe     = "../../docs/haproxy.cfg"
	recipeBind = "bind :80\n"
)

var recipeServers = map[string]string{"a": "10.0.0.5:8080", "b": "10.0.0.6:8080", "c": "10.0.0.7:8080"}

// syncBuffer is a bytes.Buffer safe for concurrent use.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// balancer is a HAProxy process running the recipe.
type balancer struct {
	url    string // the frontend
	sock   string // the stats socket
	log    *syncBuffer
	cmd    *exec.Cmd
	exited chan struct{}
	// visitors is the transport of new visitors, each with its own
	// cookies.
	visitors *http.Transport
}

// startBalancer runs HAProxy with the recipe in front of the replicas at
// addrs (by server name), on a free port of its own. Its global section,
// which in production is Debian's, is the test's: the log on stdout and a
// stats socket in a temporary directory.
func startBalancer(t *testing.T, bin string, addrs map[string]string) *balancer {
	t.Helper()
	b, err := os.ReadFile(recipe)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	lb := &balancer{sock: filepath.Join(dir, "admin.sock"), log: &syncBuffer{}, visitors: &http.Transport{}}
	t.Cleanup(lb.visitors.CloseIdleConnections)
	global := "global\n    log stdout format raw local0 info\n    stats socket " + lb.sock + " mode 600 level admin\n"
	if err := os.WriteFile(filepath.Join(dir, "global.cfg"), []byte(global), 0o600); err != nil {
		t.Fatal(err)
	}
	// A port that looks free may be taken by the time HAProxy binds it:
	// try another then.
	for attempt := 0; ; attempt++ {
		port := freePort(t)
		cfg := string(b)
		replace := func(old, new string) {
			if n := strings.Count(cfg, old); n != 1 {
				t.Fatalf("%s names %q %d times, want once: update this test with the recipe", recipe, old, n)
			}
			cfg = strings.Replace(cfg, old, new, 1)
		}
		replace(recipeBind, "bind 127.0.0.1:"+port+"\n")
		for name, addr := range recipeServers {
			replace("server "+name+" "+addr+"\n", "server "+name+" "+addrs[name]+"\n")
		}
		path := filepath.Join(dir, "haproxy.cfg")
		if err := os.WriteFile(path, []byte(cfg), 0o600); err != nil {
			t.Fatal(err)
		}
		lb.url = "http://127.0.0.1:" + port
		lb.cmd = exec.Command(bin, "-db", "-f", filepath.Join(dir, "global.cfg"), "-f", path)
		lb.cmd.Stdout, lb.cmd.Stderr = lb.log, lb.log
		if err := lb.cmd.Start(); err != nil {
			t.Fatal(err)
		}
		lb.exited = make(chan struct{})
		go func(cmd *exec.Cmd, exited chan struct{}) {
			_ = cmd.Wait()
			close(exited)
		}(lb.cmd, lb.exited)
		deadline := time.Now().Add(waitFor)
		for {
			if _, err := lb.stat(); err == nil {
				t.Cleanup(func() {
					_ = lb.cmd.Process.Kill()
					<-lb.exited
					if t.Failed() {
						t.Logf("HAProxy's log:\n%s", lb.log.String())
					}
				})
				return lb
			}
			select {
			case <-lb.exited:
			case <-time.After(20 * time.Millisecond):
				if time.Now().Before(deadline) {
					continue
				}
				_ = lb.cmd.Process.Kill()
				<-lb.exited
				t.Fatalf("HAProxy did not open its stats socket within %v:\n%s", waitFor, lb.log.String())
			}
			if !strings.Contains(lb.log.String(), "cannot bind") || attempt == 5 {
				t.Fatalf("HAProxy exited:\n%s", lb.log.String())
			}
			break
		}
	}
}

// freePort returns a port that was free a moment ago.
func freePort(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	_, port, _ := net.SplitHostPort(ln.Addr().String())
	return port
}

// stat returns the status of each server of the backend ("UP", "DOWN",
// "UP 1/2" going down, ...), from the stats socket.
func (lb *balancer) stat() (map[string]string, error) {
	conn, err := net.DialTimeout("unix", lb.sock, time.Second)
	if err != nil {
		return nil, err
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(waitFor))
	if _, err := io.WriteString(conn, "show stat\n"); err != nil {
		return nil, err
	}
	b, err := io.ReadAll(conn)
	if err != nil {
		return nil, err
	}
	r := csv.NewReader(strings.NewReader(strings.TrimPrefix(string(b), "# ")))
	r.FieldsPerRecord = -1
	rows, err := r.ReadAll()
	if err != nil || len(rows) < 2 {
		return nil, fmt.Errorf("show stat: %v: %q", err, b)
	}
	col := func(name string) int { return slices.Index(rows[0], name) }
	px, sv, st := col("pxname"), col("svname"), col("status")
	if px < 0 || sv < 0 || st < 0 {
		return nil, fmt.Errorf("show stat: no pxname, svname or status column: %q", rows[0])
	}
	out := map[string]string{}
	for _, row := range rows[1:] {
		if len(row) > st && row[px] == "replicas" && row[sv] != "BACKEND" {
			out[row[sv]] = row[st]
		}
	}
	return out, nil
}

// status returns server's status.
func (lb *balancer) status(t *testing.T, server string) string {
	t.Helper()
	s, err := lb.stat()
	if err != nil {
		t.Fatalf("HAProxy's stats: %v", err)
	}
	return s[server]
}

// await waits until HAProxy reports every one of servers in status
// ("UP" or "DOWN", not in transition) and returns how long that took.
func (lb *balancer) await(t *testing.T, status string, servers ...string) time.Duration {
	t.Helper()
	start := time.Now()
	within(t, 2*waitFor, "HAProxy reports "+strings.Join(servers, ", ")+" "+status, func() bool {
		s, err := lb.stat()
		if err != nil {
			t.Fatalf("HAProxy's stats: %v", err)
		}
		for _, name := range servers {
			if s[name] != status {
				return false
			}
		}
		return true
	})
	return time.Since(start)
}

// lbNode is one replica behind the balancer. It counts the requests it
// gets from the balancer (no hop header; not the balancer's health check)
// apart from those another replica forwarded to it.
type lbNode struct {
	name    string
	addr    string
	h       *webhost.Host
	srv     *http.Server
	served  chan struct{} // closed when Serve returned
	direct  atomic.Int64
	pages   atomic.Int64 // of direct: GET /, a visitor's page
	pings   atomic.Int64 // of direct: the page script's ping
	hops    atomic.Int64
	log     *syncBuffer
	stopped bool
}

// startNode starts replica name listening on addr ("127.0.0.1:0" for any
// port).
func startNode(t *testing.T, dbURL, name, addr string) *lbNode {
	t.Helper()
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	n := &lbNode{name: name, addr: ln.Addr().String(), served: make(chan struct{}), log: &syncBuffer{}}
	rep, err := webreplica.New(openPool(t, dbURL), "http://"+n.addr, []byte(secret), &webreplica.Options{
		// The default lease: nothing here waits for one to run out, and a
		// busy machine may delay a renewal by seconds.
		Directory: replica.Options{Name: name, Logger: slog.New(slog.NewTextHandler(n.log, nil))},
		Channel:   "webreplica_test",
		Migrate:   true,
	})
	if err != nil {
		t.Fatal(err)
	}
	n.h, err = webhost.New(webhost.Options{
		NewViews: func(s *webhost.Session) (webhost.Views, error) { return &counter{s: s}, nil },
		Replicas: rep,
	})
	if err != nil {
		ln.Close()
		t.Fatal(err)
	}
	app := n.h.Handler(routes(n.h))
	n.srv = &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch {
		case r.URL.Path == "/readyz":
		case r.Header.Get(replica.HopHeader) != "":
			n.hops.Add(1)
		default:
			n.direct.Add(1)
			switch r.URL.Path {
			case "/":
				n.pages.Add(1)
			case "/agentsurface/ping":
				n.pings.Add(1)
			}
		}
		app.ServeHTTP(w, r)
	})}
	go func() {
		defer close(n.served)
		_ = n.srv.Serve(ln)
	}()
	t.Cleanup(n.stop)
	return n
}

// stop stops the replica as deploy.md says, once the balancer has taken it
// out: Close (its sessions end, it leaves the directory), then Shutdown.
// Shutdown's deadline is the grace of the streams this replica relays for
// the sessions of others, which do not end on their own.
func (n *lbNode) stop() {
	if n.stopped {
		return
	}
	n.stopped = true
	_ = n.h.Close()
	ctx, cancel := context.WithTimeout(bg, 2*time.Second)
	defer cancel()
	if err := n.srv.Shutdown(ctx); err != nil {
		_ = n.srv.Close()
	}
	<-n.served
}

// answer is one request's outcome through the balancer.
type answer struct {
	code int
	by   string // Agentsurface-Replica
	body string
}

func (j *jar) get(url string, hdr map[string]string) answer {
	j.t.Helper()
	return j.send(http.MethodGet, url, nil, hdr)
}

func (j *jar) send(method, url string, body io.Reader, hdr map[string]string) answer {
	j.t.Helper()
	a, err := j.try(method, url, body, hdr)
	if err != nil {
		j.t.Fatal(err)
	}
	return a
}

func (j *jar) try(method, url string, body io.Reader, hdr map[string]string) (answer, error) {
	req, _ := http.NewRequest(method, url, body)
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	res, err := j.client.Do(req)
	if err != nil {
		return answer{}, err
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	return answer{code: res.StatusCode, by: res.Header.Get(replica.ServedByHeader), body: string(b)}, err
}

// sessionOf returns the session id a page shows, or "".
func sessionOf(body string) string {
	const mark = `<code id="sid">`
	i := strings.Index(body, mark)
	if i < 0 {
		return ""
	}
	id, _, _ := strings.Cut(body[i+len(mark):], "<")
	return id
}

var postHeaders = map[string]string{"Content-Type": "application/x-www-form-urlencoded", "Sec-Fetch-Site": "same-origin", "X-Agentsurface": "1"}

// browser is a page's browser, its session owned by owner.
type browser struct {
	j     *jar
	id    string
	owner string
	tab   *tab
}

// tab is a page's event stream: it keeps the last count it showed.
type tab struct {
	mu     sync.Mutex
	count  string
	done   chan struct{}
	cancel context.CancelFunc
}

// open opens the page's event stream through base, as the page script
// does.
func (b *browser) open(t *testing.T, base string) {
	t.Helper()
	ctx, cancel := context.WithCancel(bg)
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, base+"/agentsurface/events?f=count", nil)
	streams := &http.Client{Transport: b.j.client.Transport, Jar: b.j.client.Jar} // no timeout: it stays open
	res, err := streams.Do(req)
	if err != nil || res.StatusCode != http.StatusOK {
		cancel()
		t.Fatalf("the event stream of %s's session: %v %v", b.owner, err, res)
	}
	tb := &tab{done: make(chan struct{}), cancel: cancel}
	go func() {
		defer close(tb.done)
		defer res.Body.Close()
		sc := bufio.NewScanner(res.Body)
		for sc.Scan() {
			if data, ok := strings.CutPrefix(sc.Text(), "data: "); ok {
				var p map[string]string
				if json.Unmarshal([]byte(data), &p) == nil {
					if v, ok := p["count"]; ok {
						tb.mu.Lock()
						tb.count = v
						tb.mu.Unlock()
					}
				}
			}
		}
	}()
	t.Cleanup(func() {
		cancel()
		<-tb.done
	})
	b.tab = tb
}

// shows waits until the page shows count.
func (b *browser) shows(t *testing.T, count int) {
	t.Helper()
	want := fmt.Sprint(count)
	within(t, waitFor, fmt.Sprintf("the page of %s's session shows %s", b.owner, want), func() bool {
		b.tab.mu.Lock()
		defer b.tab.mu.Unlock()
		return b.tab.count == want
	})
}

// servedBy records the replica that answered an MCP client's posts.
type servedBy struct {
	next http.RoundTripper
	mu   sync.Mutex
	last string
}

func (s *servedBy) RoundTrip(r *http.Request) (*http.Response, error) {
	res, err := s.next.RoundTrip(r)
	if err == nil && r.Method == http.MethodPost {
		s.mu.Lock()
		s.last = res.Header.Get(replica.ServedByHeader)
		s.mu.Unlock()
	}
	return res, err
}

func (s *servedBy) get() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.last
}

// agent is an MCP client (a stateful session of the 2025-11-25
// generation, with its stream) of a session owned by owner, connected
// through the balancer.
type agent struct {
	owner string
	s     *webhost.Session
	cs    *mcp.ClientSession
	by    *servedBy
}

func connectAgent(t *testing.T, lb *balancer, owner string, s *webhost.Session) *agent {
	t.Helper()
	tr := &http.Transport{}
	t.Cleanup(tr.CloseIdleConnections)
	by := &servedBy{next: bearerRT{s.Token(), tr}}
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "test-agent", Version: "1"}, nil).Connect(bg,
		&mcp.StreamableClientTransport{Endpoint: lb.url + "/mcp", HTTPClient: &http.Client{Transport: by}},
		&mcp.ClientSessionOptions{ProtocolVersion: "2025-11-25"})
	if err != nil {
		t.Fatalf("connect an agent of %s's session through the balancer: %v", owner, err)
	}
	t.Cleanup(func() { _ = cs.Close() })
	return &agent{owner: owner, s: s, cs: cs, by: by}
}

// add calls the counter's add as the agent; it returns a problem or "".
func (a *agent) add() string {
	res, err := a.cs.CallTool(bg, &mcp.CallToolParams{Name: "view_demo__counter__add"})
	if err != nil {
		return fmt.Sprintf("agent of %s: %v", a.owner, err)
	}
	if res.IsError {
		return fmt.Sprintf("agent of %s: %+v", a.owner, res.StructuredContent)
	}
	return ""
}

// problems collects what went wrong in the requests that must all work.
type problems struct {
	mu   sync.Mutex
	list []string
	n    int // requests made
}

func (p *problems) add(format string, args ...any) {
	p.mu.Lock()
	p.list = append(p.list, fmt.Sprintf(format, args...))
	p.mu.Unlock()
}

func (p *problems) count(n int) {
	p.mu.Lock()
	p.n += n
	p.mu.Unlock()
}

// round makes the requests that must keep working whatever happens to
// replica a: a new visitor's page, and for each session of another
// replica its page, a form post and its agent's call, all through the
// balancer. notBy names the replicas that must not serve a visitor.
func round(t *testing.T, lb *balancer, ps *problems, pages []*browser, agents []*agent, notBy ...string) {
	cookies, _ := cookiejar.New(nil)
	visitor := &jar{t: t, client: &http.Client{Transport: lb.visitors, Jar: cookies, Timeout: waitFor}}
	v, err := visitor.try(http.MethodGet, lb.url+"/", nil, nil)
	switch {
	case err != nil:
		ps.add("a visitor's page: %v", err)
	case v.code != http.StatusOK || sessionOf(v.body) == "":
		ps.add("a visitor's page: %d by %q: %.200s", v.code, v.by, v.body)
	case slices.Contains(notBy, v.by):
		ps.add("a visitor's page was served by %s", v.by)
	}
	n := 1
	for _, b := range pages {
		g, err := b.j.try(http.MethodGet, lb.url+"/", nil, nil)
		if err != nil || g.code != http.StatusOK || sessionOf(g.body) != b.id || g.by != b.owner {
			ps.add("the page of %s's session %s: %v %d by %q showing %q", b.owner, b.id, err, g.code, g.by, sessionOf(g.body))
		}
		p, err := b.j.try(http.MethodPost, lb.url+"/add", nil, postHeaders)
		if err != nil || p.code != http.StatusNoContent || p.by != b.owner {
			ps.add("a form post of %s's session: %v %d by %q", b.owner, err, p.code, p.by)
		}
		n += 2
	}
	for _, a := range agents {
		if p := a.add(); p != "" {
			ps.add("%s", p)
		}
		n++
	}
	ps.count(n)
}

// spread sends requests naming no session through the balancer and
// checks that the replicas in want, and only they, answered them and got
// them from the balancer.
func spread(t *testing.T, lb *balancer, nodes map[string]*lbNode, want ...string) map[string]int {
	t.Helper()
	before := map[string]int64{}
	for name, n := range nodes {
		before[name] = n.pings.Load()
	}
	j := newJar(t)
	by := map[string]int{}
	const requests = 30
	for range requests {
		a := j.get(lb.url+"/agentsurface/ping", nil)
		if a.code != http.StatusNoContent {
			t.Fatalf("a ping through the balancer: %d by %q: %s", a.code, a.by, a.body)
		}
		by[a.by]++
	}
	for name, n := range nodes {
		got := n.pings.Load() - before[name]
		if slices.Contains(want, name) {
			if by[name] == 0 || got != int64(by[name]) {
				t.Fatalf("%s answered %d of %d pings and got %d from the balancer, want some and the same: %v", name, by[name], requests, got, by)
			}
		} else if got != 0 || by[name] != 0 {
			t.Fatalf("%s answered %d pings and got %d requests from the balancer, want none: %v", name, by[name], got, by)
		}
	}
	return by
}

// The recipe docs/haproxy.cfg in a real HAProxy in front of three
// replicas: HAProxy spreads requests over the ready replicas; a replica
// that drains (Host.Drain) gets no new request from HAProxy once its
// check on /readyz marked it down, while its sessions' requests still
// reach it, forwarded by the others; new visitors never see the drain
// (HAProxy tries a GET answered 503 on another replica); once it has
// closed, its sessions end (a page gets a new session elsewhere, an
// agent 401), and the pages and agents of the other replicas' sessions
// keep working throughout, none of their requests failing; started
// again, HAProxy marks it up and it gets requests again.
func TestHAProxyRecipe(t *testing.T) {
	bin, err := exec.LookPath("haproxy")
	if err != nil {
		bin, err = exec.LookPath("/usr/sbin/haproxy") // Debian's, not on a user's PATH
	}
	if err != nil {
		t.Skip("haproxy is not installed (Debian: apt-get install haproxy; .ci/run installs it), so the balancer recipe docs/haproxy.cfg is not tested")
	}
	began := time.Now()
	dbURL := pg.Database(t)
	names := []string{"a", "b", "c"}
	nodes := map[string]*lbNode{}
	addrs := map[string]string{}
	for _, name := range names {
		nodes[name] = startNode(t, dbURL, name, "127.0.0.1:0")
		addrs[name] = nodes[name].addr
	}
	lb := startBalancer(t, bin, addrs)
	lb.await(t, "UP", names...)

	// HAProxy spreads requests over the ready replicas.
	t.Logf("pings over three ready replicas: %v", spread(t, lb, nodes, names...))

	// A browser whose session each replica owns (its first page was
	// served there), its event stream open through the balancer; an
	// agent of a session of each replica, through the balancer.
	var pages []*browser
	owners := map[string]*browser{}
	for len(owners) < len(names) {
		j := newJar(t)
		a := j.get(lb.url+"/", nil)
		id := sessionOf(a.body)
		if a.code != http.StatusOK || id == "" || nodes[a.by] == nil || nodes[a.by].h.Session(id) == nil {
			t.Fatalf("a first page through the balancer: %d by %q: %.200s", a.code, a.by, a.body)
		}
		if owners[a.by] == nil {
			b := &browser{j: j, id: id, owner: a.by}
			b.open(t, lb.url)
			b.shows(t, 0)
			owners[a.by] = b
			pages = append(pages, b)
		}
	}
	agents := map[string]*agent{}
	for _, name := range names {
		s, err := nodes[name].h.NewSession(webhost.SessionOptions{KeepShown: true})
		if err != nil {
			t.Fatal(err)
		}
		agents[name] = connectAgent(t, lb, name, s)
		if p := agents[name].add(); p != "" {
			t.Fatal(p)
		}
	}
	others := []*browser{owners["b"], owners["c"]}
	otherAgents := []*agent{agents["b"], agents["c"]}
	ps := &problems{}
	round(t, lb, ps, others, otherAgents)

	// Replica a drains. Until HAProxy's check marks it down it still
	// gets requests; a visitor it cannot take (it claims no new session)
	// is answered by another replica, HAProxy trying the GET again there.
	setup := time.Since(began)
	a := nodes["a"]
	drained := time.Now()
	a.h.Drain()
	pagesBefore := a.pages.Load()
	for range 3 { // three visitors in a row: round robin sends one to a while it is up
		round(t, lb, ps, nil, nil, "a")
	}
	if st := lb.status(t, "a"); st != "DOWN" {
		if a.pages.Load() == pagesBefore {
			t.Fatalf("while HAProxy had a %q, none of three visitors reached it", st)
		}
		t.Logf("a draining, HAProxy's check has it %q: %d visitors reached it, another replica answered them", st, a.pages.Load()-pagesBefore)
	}
	for deadline := time.Now().Add(2 * waitFor); lb.status(t, "a") != "DOWN"; {
		if time.Now().After(deadline) {
			t.Fatalf("HAProxy did not mark a down within %v of its drain: %q", 2*waitFor, lb.status(t, "a"))
		}
		round(t, lb, ps, others, otherAgents, "a")
	}
	drainToDown := time.Since(drained)

	// Marked down, a gets no request from HAProxy, and still serves its
	// sessions: their requests reach it through the other replicas.
	direct, hops := a.direct.Load(), a.hops.Load()
	spread(t, lb, nodes, "b", "c")
	round(t, lb, ps, others, otherAgents, "a")
	ab := owners["a"]
	if g := ab.j.get(lb.url+"/", nil); g.code != http.StatusOK || sessionOf(g.body) != ab.id || g.by != "a" {
		t.Fatalf("the page of a's session while a drains: %d by %q showing %q", g.code, g.by, sessionOf(g.body))
	}
	if p := ab.j.send(http.MethodPost, lb.url+"/add", nil, postHeaders); p.code != http.StatusNoContent || p.by != "a" {
		t.Fatalf("a form post of a's session while a drains: %d by %q", p.code, p.by)
	}
	ab.shows(t, 1)
	if p := agents["a"].add(); p != "" || agents["a"].by.get() != "a" {
		t.Fatalf("the agent of a's session while a drains: %q, served by %q", p, agents["a"].by.get())
	}
	if d, h := a.direct.Load()-direct, a.hops.Load()-hops; d != 0 || h < 3 {
		t.Fatalf("marked down, a got %d requests from the balancer (want 0) and %d forwarded by the others (want 3 or more)", d, h)
	}

	// a stops (Close, then Shutdown) while the other replicas' pages and
	// agents go on; none of their requests fails.
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			select {
			case <-stop:
				return
			default:
				round(t, lb, ps, others, otherAgents, "a")
			}
		}
	}()
	stopping := time.Now()
	a.stop()
	stopped := time.Since(stopping)
	select {
	case <-ab.tab.done:
	case <-time.After(waitFor):
		t.Fatal("the event stream of a's session outlived a")
	}
	within(t, waitFor, "the other replicas log that a left", func() bool {
		for _, n := range []*lbNode{nodes["b"], nodes["c"]} {
			if !slices.ContainsFunc(strings.Split(n.log.String(), "\n"), func(line string) bool {
				return strings.Contains(line, `level=INFO msg="replica: a peer left; its sessions have ended"`) &&
					strings.Contains(line, " name=a addr=http://"+addrs["a"]+" ")
			}) {
				return false
			}
		}
		return true
	})
	// a's sessions have ended: its page gets a new session elsewhere, its
	// agent 401 (the answer for an ended session).
	if g := ab.j.get(lb.url+"/", nil); g.code != http.StatusOK || sessionOf(g.body) == ab.id || g.by == "a" || nodes[g.by].h.Session(sessionOf(g.body)) == nil {
		t.Fatalf("the page of a's ended session: %d by %q showing %q", g.code, g.by, sessionOf(g.body))
	}
	within(t, waitFor, "an agent of a's ended session gets 401 through the balancer", func() bool {
		req, _ := http.NewRequest(http.MethodPost, lb.url+"/mcp", strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"tools/list"}`))
		req.Header.Set("Authorization", "Bearer "+agents["a"].s.Token())
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		switch res.StatusCode {
		case http.StatusUnauthorized:
		case http.StatusServiceUnavailable, http.StatusBadGateway:
			// While a stops, before the replica forwarding it heard that
			// a left: a refused it, or closed the connection.
		default:
			t.Fatalf("an agent of a's ended session: %d, want 401", res.StatusCode)
		}
		return res.StatusCode == http.StatusUnauthorized
	})
	close(stop)
	wg.Wait()
	spread(t, lb, nodes, "b", "c")
	// The other replicas' pages follow their sessions still: a stream a
	// relayed ended with a, and reconnects (as the page script does).
	for _, b := range others {
		select {
		case <-b.tab.done:
			b.open(t, lb.url)
		default:
		}
		if p := b.j.send(http.MethodPost, lb.url+"/add", nil, postHeaders); p.code != http.StatusNoContent {
			t.Fatalf("a form post of %s's session after a stopped: %d", b.owner, p.code)
		}
		b.shows(t, nodes[b.owner].h.Session(b.id).Views().(*counter).value())
	}
	round(t, lb, ps, others, otherAgents, "a")

	// a starts again at the same address: HAProxy's check marks it up and
	// it gets requests again.
	restarted := time.Now()
	nodes["a"] = startNode(t, dbURL, "a", addrs["a"])
	lb.await(t, "UP", "a")
	startToUp := time.Since(restarted)
	t.Logf("pings after a restarted: %v", spread(t, lb, nodes, names...))
	round(t, lb, ps, others, otherAgents)

	ps.mu.Lock()
	defer ps.mu.Unlock()
	for _, p := range ps.list {
		t.Error(p)
	}
	t.Logf("setup %v, drain to marked down %v, Close and Shutdown %v, start to marked up %v; %d requests of visitors and of the other replicas' sessions, %d failed; test %v",
		setup.Round(time.Millisecond), drainToDown.Round(time.Millisecond), stopped.Round(time.Millisecond), startToUp.Round(time.Millisecond),
		ps.n, len(ps.list), time.Since(began).Round(time.Millisecond))
}

// deploy.md explains every line of the recipe (the server lines by the
// first of them).
func TestDeployExplainsHAProxyRecipe(t *testing.T) {
	cfg, err := os.ReadFile(recipe)
	if err != nil {
		t.Fatal(err)
	}
	doc, err := os.ReadFile("../../docs/deploy.md")
	if err != nil {
		t.Fatal(err)
	}
	servers := 0
	for _, line := range strings.Split(string(cfg), "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		if strings.HasPrefix(line, "server ") {
			if servers++; servers > 1 {
				continue
			}
		}
		if !strings.Contains(string(doc), "| `"+line+"` |") {
			t.Errorf("docs/deploy.md does not explain %q (a table row starting | `%s` |)", line, line)
		}
	}
}
