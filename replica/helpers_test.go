package replica_test

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"log"
	"log/slog"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/agentsurface/agentsurface/internal/lbtest"
	"github.com/agentsurface/agentsurface/internal/pgtest"
	"github.com/agentsurface/agentsurface/mcpsurface"
	"github.com/agentsurface/agentsurface/replica"
	"github.com/agentsurface/agentsurface/surface"
	"github.com/jackc/pgx/v5/pgxpool"
	"go.opentelemetry.io/otel/metric"
)

// secret is the cluster secret of the tests' replicas.
var secret = []byte("0123456789abcdef0123456789abcdef-test-secret")

// openPool opens a pool on url, closed when t ends.
func openPool(t testing.TB, url string) *pgxpool.Pool {
	t.Helper()
	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		t.Fatal(err)
	}
	cfg.MaxConns = 8
	pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	return pool
}

// migrated returns a pool on a fresh, migrated database.
func migrated(t testing.TB) (*pgxpool.Pool, string) {
	t.Helper()
	url := pg.Database(t)
	pool := openPool(t, url)
	if err := replica.Migrate(context.Background(), pool); err != nil {
		t.Fatal(err)
	}
	return pool, url
}

// privateMigrated starts a server of t's own (which t may stop and
// start) and returns it with a pool on a fresh, migrated database.
func privateMigrated(t testing.TB) (*pgtest.Server, *pgxpool.Pool, string) {
	t.Helper()
	srv := pgtest.StartServer(t, nil)
	url := srv.Database(t)
	pool := openPool(t, url)
	if err := replica.Migrate(context.Background(), pool); err != nil {
		t.Fatal(err)
	}
	return srv, pool, url
}

// app is the application a test replica serves: sessions named by a
// bearer token (or the cookie "sid"), each with a counter, and routes
// that exercise what forwarding must carry. Its answers name the replica,
// so a test sees where a request was served.
type app struct {
	name string
	dir  *replica.Directory
	mcp  *mcpsurface.HTTPHandler // serves /mcp: each session's registry, by bearer token
	// audit, if set, records one invocation-settled record per /hit,
	// with the invocation id "<session>-<n>".
	audit *replica.AuditSink

	mu       sync.Mutex
	sessions map[string]*appSession

	streamsClosed atomic.Int64 // event streams whose client went away
}

type appSession struct {
	id      string
	hits    int
	pending map[string]chan bool // held calls waiting for a decision, by id
	reg     *surface.Registry    // what MCP clients of the session operate
}

// mcpConsumer is the consumer MCP clients act as.
var mcpConsumer = surface.Consumer{ID: "agent", Kind: surface.ConsumerMCPBridge}

// resolveMCP maps a bearer token to its session's registry, as the
// console does.
func (a *app) resolveMCP(r *http.Request) (*surface.Registry, surface.Consumer, error) {
	s := a.session(r)
	if s == nil {
		return nil, surface.Consumer{}, errors.New("no session")
	}
	return s.reg, mcpConsumer, nil
}

// newRegistry returns a session's registry: one component whose action
// bumps the session's counter and names the replica that ran it.
func (a *app) newRegistry(tok string) *surface.Registry {
	reg := surface.New(nil)
	_, _ = reg.Register(surface.Component{Type: "counter", InstanceID: "main", Description: "Counter",
		Actions: map[string]surface.Capability{"bump": surface.Action(surface.ActionDef[surface.None, bumped]{
			Description: "Bumps the counter", Effect: surface.EffectLocalState,
			Execute: func(context.Context, *surface.Call, surface.None) (bumped, error) {
				a.mu.Lock()
				defer a.mu.Unlock()
				s := a.sessions[tok]
				if s == nil {
					return bumped{}, errors.New("session ended")
				}
				s.hits++
				return bumped{Replica: a.name, N: s.hits}, nil
			}})}})
	return reg
}

type bumped struct {
	Replica string `json:"replica"`
	N       int    `json:"n"`
}

// token returns the session token a request names.
func token(r *http.Request) string {
	if t, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer "); ok {
		return t
	}
	if c, err := r.Cookie("sid"); err == nil {
		return c.Value
	}
	return ""
}

func randomToken() string {
	b := make([]byte, 32)
	_, _ = rand.Read(b)
	return base64.RawURLEncoding.EncodeToString(b)
}

func (a *app) session(r *http.Request) *appSession {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.sessions[token(r)]
}

// hits returns how many /hit requests session tok has served.
func (a *app) hits(tok string) int {
	a.mu.Lock()
	defer a.mu.Unlock()
	if s := a.sessions[tok]; s != nil {
		return s.hits
	}
	return -1
}

// endSession ends a session as the console does: forget it, release it.
func (a *app) endSession(tok string) {
	a.mu.Lock()
	s := a.sessions[tok]
	delete(a.sessions, tok)
	a.mu.Unlock()
	a.dir.Release(tok)
	if s != nil {
		a.mcp.Forget(s.reg)
		_ = s.reg.Close()
	}
}

// forgetAll ends every session at once, as on a lost lease (the
// directory has forgotten their keys already).
func (a *app) forgetAll() {
	a.mu.Lock()
	ended := a.sessions
	a.sessions = map[string]*appSession{}
	a.mu.Unlock()
	for _, s := range ended {
		_ = s.reg.Close()
	}
}

// close ends every session.
func (a *app) close() {
	a.mu.Lock()
	var toks []string
	for tok := range a.sessions {
		toks = append(toks, tok)
	}
	a.mu.Unlock()
	for _, tok := range toks {
		a.endSession(tok)
	}
	_ = a.mcp.Close()
}

func (a *app) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path == "/session" && r.Method == http.MethodPost {
		tok := randomToken()
		// Claimed before the token is handed out.
		if err := a.dir.Claim(r.Context(), tok); err != nil {
			http.Error(w, err.Error(), http.StatusServiceUnavailable)
			return
		}
		a.mu.Lock()
		a.sessions[tok] = &appSession{id: tok[:6], pending: map[string]chan bool{}, reg: a.newRegistry(tok)}
		a.mu.Unlock()
		fmt.Fprint(w, tok)
		return
	}
	if r.URL.Path == "/mcp" {
		a.mcp.ServeHTTP(w, r)
		return
	}
	s := a.session(r)
	if s == nil {
		w.Header().Set("WWW-Authenticate", "Bearer")
		http.Error(w, "session ended ("+a.name+")", http.StatusUnauthorized)
		return
	}
	switch r.URL.Path {
	case "/hit":
		a.mu.Lock()
		s.hits++
		n := s.hits
		a.mu.Unlock()
		if a.audit != nil {
			_ = a.audit.For(s.id).Record(r.Context(), surface.AuditEvent{At: time.Now(), Type: surface.AuditInvocationSettled,
				InvocationID: fmt.Sprintf("%s-%d", s.id, n), Status: surface.StatusOK})
		}
		fmt.Fprintf(w, "%s %d", a.name, n)
	case "/echo":
		b, _ := io.ReadAll(r.Body)
		fmt.Fprintf(w, "%s %s %s %s", a.name, r.Method, r.URL.RequestURI(), b)
	case "/duplex":
		// Answers while the body still arrives: its headers at once, then
		// each piece of the body as it comes.
		rc := http.NewResponseController(w)
		_ = rc.EnableFullDuplex()
		w.WriteHeader(http.StatusOK)
		_ = rc.Flush()
		buf := make([]byte, 1024)
		for {
			n, err := r.Body.Read(buf)
			_, _ = w.Write(buf[:n])
			_ = rc.Flush()
			if err != nil {
				return
			}
		}
	case "/stream":
		// One event per /next of the same session: the test reads an
		// event before it asks for the next, so a proxy that held the
		// stream back would stall it.
		w.Header().Set("Content-Type", "text/event-stream")
		w.WriteHeader(http.StatusOK)
		rc := http.NewResponseController(w)
		ch := make(chan bool, 1)
		a.mu.Lock()
		s.pending["next"] = ch
		a.mu.Unlock()
		for i := 0; ; i++ {
			fmt.Fprintf(w, "data: %s %d\n\n", a.name, i)
			if rc.Flush() != nil {
				return
			}
			select {
			case <-r.Context().Done():
				a.streamsClosed.Add(1)
				return
			case <-ch:
			}
		}
	case "/next":
		a.mu.Lock()
		ch := s.pending["next"]
		a.mu.Unlock()
		if ch == nil {
			http.Error(w, "no stream", http.StatusConflict)
			return
		}
		ch <- true
	case "/hold":
		// A call waiting for a person's decision, which may arrive
		// through any replica as /decide?id=….
		id := r.URL.Query().Get("id")
		ch := make(chan bool, 1)
		a.mu.Lock()
		s.pending[id] = ch
		a.mu.Unlock()
		select {
		case ok := <-ch:
			fmt.Fprintf(w, "%s decided %v", a.name, ok)
		case <-r.Context().Done():
		}
	case "/decide":
		id := r.URL.Query().Get("id")
		a.mu.Lock()
		ch := s.pending[id]
		delete(s.pending, id)
		a.mu.Unlock()
		if ch == nil {
			http.Error(w, "nothing pending", http.StatusNotFound)
			return
		}
		ch <- r.URL.Query().Get("approve") == "1"
		fmt.Fprint(w, a.name+" ok")
	case "/slow":
		select {
		case <-time.After(time.Minute):
		case <-r.Context().Done():
		}
	default:
		http.NotFound(w, r)
	}
}

// node is one replica: its listener, server, directory and app.
type node struct {
	name string
	addr string // http://127.0.0.1:port
	dir  *replica.Directory
	app  *app
	srv  *http.Server
	ln   net.Listener
	pool *pgxpool.Pool
	done chan struct{}
}

type nodeOptions struct {
	lease time.Duration
	// stateless serves MCP without protocol sessions (2026-07-28).
	stateless bool
	forward   *replica.ForwardOptions
	// log, if set, receives the directory's log (else the test's log).
	log *slog.Logger
	// onLeaseLost, if set, is the directory's OnLeaseLost.
	onLeaseLost func()
	// meter, if set, is the directory's MeterProvider.
	meter metric.MeterProvider
	// audit makes the app record its hits in an AuditSink (node.app.audit),
	// durable with durableAudit.
	audit, durableAudit bool
}

// startNode starts a replica on a database.
func startNode(t testing.TB, url, name string, o nodeOptions) *node {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	n := &node{name: name, addr: "http://" + ln.Addr().String(), ln: ln, pool: openPool(t, url), done: make(chan struct{})}
	if o.lease == 0 {
		// Long enough that no renewal misses it on a busy machine: a test
		// of what happens when a lease runs out sets its own.
		o.lease = 30 * time.Second
	}
	if o.log == nil {
		o.log = testLogger(t)
	}
	n.app = &app{name: name, sessions: map[string]*appSession{}}
	// As an application should, the app ends its sessions when the lease
	// is lost: the other replicas answer them as ended.
	onLeaseLost := func() {
		n.app.forgetAll()
		if o.onLeaseLost != nil {
			o.onLeaseLost()
		}
	}
	n.dir, err = replica.OpenDirectory(context.Background(), n.pool, n.addr, secret, &replica.Options{
		Name: name, Lease: o.lease, Timeout: 3 * time.Second, OnLeaseLost: onLeaseLost,
		Logger: o.log, MeterProvider: o.meter,
	})
	if err != nil {
		ln.Close()
		t.Fatal(err)
	}
	n.app.dir = n.dir
	n.app.mcp = mcpsurface.NewHTTPHandler(n.app.resolveMCP, &mcpsurface.HTTPOptions{Stateless: o.stateless})
	if o.audit {
		n.app.audit = replica.NewAuditSink(n.pool, &replica.AuditOptions{Replica: name, Timeout: 2 * time.Second,
			Durable: o.durableAudit})
	}
	n.srv = &http.Server{Handler: n.dir.Forward(n.app, token, o.forward), ReadHeaderTimeout: 5 * time.Second}
	go func() {
		defer close(n.done)
		_ = n.srv.Serve(ln)
	}()
	t.Cleanup(n.stop)
	return n
}

// stop stops the replica gracefully: server, then directory.
func (n *node) stop() {
	n.app.close() // ends MCP sessions, so that the server can close
	_ = n.srv.Close()
	<-n.done
	_ = n.dir.Close()
	if n.app.audit != nil {
		_ = n.app.audit.Close()
	}
}

// crash stops the replica dead: connections refused, lease not renewed,
// nothing cleaned up.
func (n *node) crash() {
	n.dir.Crash()
	_ = n.srv.Close()
	<-n.done
	n.app.close() // what a dead process holds is gone
}

// balancer is a round-robin reverse proxy over replicas, with no
// stickiness: each request goes to the next one.
type balancer struct {
	srv   *http.Server
	url   string
	next  atomic.Uint64
	tr    *http.Transport
	done  chan struct{}
	nodes []*node
}

func startBalancer(t testing.TB, nodes ...*node) *balancer {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	b := &balancer{url: "http://" + ln.Addr().String(), nodes: nodes, done: make(chan struct{}),
		tr: &http.Transport{MaxIdleConnsPerHost: 256, DisableCompression: true}}
	targets := make([]*url.URL, len(nodes))
	for i, n := range nodes {
		targets[i], _ = url.Parse(n.addr)
	}
	rp := &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			pr.SetURL(targets[(b.next.Add(1)-1)%uint64(len(targets))])
			pr.Out.Host = pr.In.Host
		},
		Transport: b.tr, FlushInterval: -1,
		ErrorLog: log.New(io.Discard, "", 0), // a crashed replica is expected; the test checks the answers
	}
	// Bodies are read whole first, as a real balancer does: a plain
	// ReverseProxy's transport can break a stream otherwise (see
	// lbtest.Buffered).
	b.srv = &http.Server{Handler: lbtest.Buffered(rp)}
	go func() {
		defer close(b.done)
		_ = b.srv.Serve(ln)
	}()
	t.Cleanup(func() {
		_ = b.srv.Close()
		<-b.done
		b.tr.CloseIdleConnections()
	})
	return b
}

// client is an HTTP client for tests, its idle connections closed at the
// end.
func client(t testing.TB) *http.Client {
	tr := &http.Transport{MaxIdleConnsPerHost: 256, DisableCompression: true}
	t.Cleanup(tr.CloseIdleConnections)
	return &http.Client{Transport: tr, Timeout: 20 * time.Second}
}

// do sends a request with the bearer token tok and returns the status
// and body.
func do(t testing.TB, c *http.Client, method, url, tok string, body string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if tok != "" {
		req.Header.Set("Authorization", "Bearer "+tok)
	}
	res, err := c.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, url, err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return res.StatusCode, string(b)
}

// newSession creates a session through url and returns its token.
func newSession(t testing.TB, c *http.Client, url string) string {
	t.Helper()
	status, body := do(t, c, http.MethodPost, url+"/session", "", "")
	if status != http.StatusOK {
		t.Fatalf("create session: %d %s", status, body)
	}
	return body
}

// eventually polls cond every 20ms until it holds or d passes.
func eventually(t testing.TB, d time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("not within %v: %s", d, what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// readEvent reads one server-sent event's data line.
func readEvent(br *bufio.Reader) (string, error) {
	for {
		line, err := br.ReadString('\n')
		if err != nil {
			return "", err
		}
		if d, ok := strings.CutPrefix(strings.TrimRight(line, "\n"), "data: "); ok {
			return d, nil
		}
	}
}

// testLogger returns a logger writing to t's log.
func testLogger(t testing.TB) *slog.Logger {
	return slog.New(slog.NewTextHandler(testWriter{t}, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

type testWriter struct{ t testing.TB }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimSpace(string(p)))
	return len(p), nil
}
