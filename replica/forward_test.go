package replica_test

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentsurface/agentsurface/replica"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	"pgregory.net/rapid"
)

// three starts three replicas on a fresh database behind a round-robin
// balancer.
func three(t testing.TB, o nodeOptions) ([]*node, *balancer, string) {
	t.Helper()
	_, url := migrated(t)
	nodes := []*node{startNode(t, url, "r1", o), startNode(t, url, "r2", o), startNode(t, url, "r3", o)}
	return nodes, startBalancer(t, nodes...), url
}

// Every request reaches its session's owner, whichever replica it lands
// on, and the owner sees each request once.
func TestRequestReachesOwnerWhicheverReplica(t *testing.T) {
	nodes, lb, _ := three(t, nodeOptions{})
	c := client(t)
	owners := map[string]string{} // token → replica that created it
	for range 6 {
		tok := newSession(t, c, lb.url)
		// Through the balancer, the first hit lands anywhere; its answer
		// names the owner.
		status, body := do(t, c, http.MethodGet, lb.url+"/hit", tok, "")
		if status != http.StatusOK {
			t.Fatalf("hit: %d %s", status, body)
		}
		owners[tok] = strings.Fields(body)[0]
		for i := 2; i <= 10; i++ {
			status, body = do(t, c, http.MethodGet, lb.url+"/hit", tok, "")
			if want := fmt.Sprintf("%s %d", owners[tok], i); status != http.StatusOK || body != want {
				t.Fatalf("hit %d: %d %q, want %q", i, status, body, want)
			}
		}
		// And directly at each replica.
		for j, n := range nodes {
			status, body = do(t, c, http.MethodGet, n.addr+"/hit", tok, "")
			if want := fmt.Sprintf("%s %d", owners[tok], 11+j); status != http.StatusOK || body != want {
				t.Fatalf("hit at %s: %d %q, want %q", n.name, status, body, want)
			}
		}
	}
	if len(distinct(owners)) < 2 {
		t.Fatalf("the balancer put every session on one replica: %v", owners)
	}
	var forwarded, received uint64
	for _, n := range nodes {
		st := n.dir.Stats()
		forwarded += st.Forwarded
		received += st.Received
	}
	if forwarded == 0 || forwarded != received {
		t.Fatalf("forwarded %d, received %d: want equal and non-zero", forwarded, received)
	}
}

func distinct(m map[string]string) map[string]bool {
	out := map[string]bool{}
	for _, v := range m {
		out[v] = true
	}
	return out
}

// The request arrives at the owner as the client sent it: method, path,
// query, body, Host, cookie; with X-Forwarded-For and without the hop
// header, which only the forwarding handler sees.
func TestForwardedRequestIsFaithful(t *testing.T) {
	_, url := migrated(t)
	a := startNode(t, url, "a", nodeOptions{})
	b := startNode(t, url, "b", nodeOptions{})
	c := client(t)
	tok := newSession(t, c, a.addr)
	var seen *http.Request
	var mu sync.Mutex
	a.srv.Handler = a.dir.Forward(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		seen = r.Clone(context.Background())
		mu.Unlock()
		from, ok := replica.ForwardedFrom(r.Context())
		fmt.Fprintf(w, "%v %v", from == b.dir.ID(), ok)
	}), token, nil)
	req, _ := http.NewRequest(http.MethodPut, b.addr+"/echo/x%2Fy?q=1&r=%20", strings.NewReader("the body"))
	req.Host = "console.example:8443"
	req.AddCookie(&http.Cookie{Name: "sid", Value: tok})
	res, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	var body strings.Builder
	_, _ = bufio.NewReader(res.Body).WriteTo(&body)
	res.Body.Close()
	if body.String() != "true true" {
		t.Fatalf("ForwardedFrom: %q", body.String())
	}
	mu.Lock()
	defer mu.Unlock()
	if seen.Method != http.MethodPut || seen.RequestURI != "/echo/x%2Fy?q=1&r=%20" || seen.Host != "console.example:8443" {
		t.Fatalf("owner saw %s %s Host %s", seen.Method, seen.RequestURI, seen.Host)
	}
	if c, err := seen.Cookie("sid"); err != nil || c.Value != tok {
		t.Fatalf("cookie lost: %v", err)
	}
	if seen.Header.Get(replica.HopHeader) != "" {
		t.Fatal("the hop header reached the application")
	}
	if seen.Header.Get("X-Forwarded-For") != "127.0.0.1" || seen.Header.Get("X-Forwarded-Host") != "console.example:8443" {
		t.Fatalf("X-Forwarded-*: %v", seen.Header)
	}
}

// An event stream through a replica that does not own the session
// delivers each event as it is written (the client reads it before the
// next exists), and a client that goes away ends the stream on the owner.
func TestStreamThroughForwarding(t *testing.T) {
	nodes, _, _ := three(t, nodeOptions{})
	owner, other := nodes[0], nodes[1]
	c := client(t)
	tok := newSession(t, c, owner.addr)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, other.addr+"/stream", nil)
	req.Header.Set("Authorization", "Bearer "+tok)
	res, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	if ct := res.Header.Get("Content-Type"); res.StatusCode != http.StatusOK || ct != "text/event-stream" {
		t.Fatalf("stream: %d %s", res.StatusCode, ct)
	}
	br := bufio.NewReader(res.Body)
	for i := range 5 {
		ev, err := readEvent(br)
		if want := fmt.Sprintf("r1 %d", i); err != nil || ev != want {
			t.Fatalf("event %d: %q %v, want %q", i, ev, err, want)
		}
		// The next event exists only after this request, through the
		// third replica.
		if status, body := do(t, c, http.MethodPost, nodes[2].addr+"/next", tok, ""); status != http.StatusOK {
			t.Fatalf("next: %d %s", status, body)
		}
	}
	cancel()
	eventually(t, 30*time.Second, "the owner sees the client go", func() bool { return owner.app.streamsClosed.Load() == 1 })
}

// A person's decision that arrives through one replica completes a call
// held open on another, through a third.
func TestDecisionThroughOneReplicaCompletesCallHeldByAnother(t *testing.T) {
	nodes, _, _ := three(t, nodeOptions{})
	c := client(t)
	tok := newSession(t, c, nodes[0].addr)
	got := make(chan string, 1)
	go func() {
		_, body := do(t, c, http.MethodGet, nodes[1].addr+"/hold?id=c1", tok, "")
		got <- body
	}()
	eventually(t, 30*time.Second, "the call is held", func() bool {
		status, _ := do(t, c, http.MethodPost, nodes[2].addr+"/decide?id=c1&approve=1", tok, "")
		return status == http.StatusOK
	})
	select {
	case body := <-got:
		if body != "r1 decided true" {
			t.Fatalf("held call: %q", body)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the held call did not complete")
	}
}

// An ended session gets the application's own answer for an ended
// session from every replica; with Ended set, that handler's.
func TestEndedSessionAnswersAsEnded(t *testing.T) {
	nodes, _, _ := three(t, nodeOptions{})
	c := client(t)
	tok := newSession(t, c, nodes[0].addr)
	nodes[0].app.endSession(tok)
	for _, n := range nodes {
		status, body := do(t, c, http.MethodGet, n.addr+"/hit", tok, "")
		if status != http.StatusUnauthorized || !strings.HasPrefix(body, "session ended") {
			t.Fatalf("at %s: %d %q", n.name, status, body)
		}
	}
	_, url := migrated(t)
	ended := &replica.ForwardOptions{Ended: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "gone for good", http.StatusNotFound)
	})}
	// a's lease must run out for b to know its sessions ended.
	a := startNode(t, url, "a", nodeOptions{forward: ended, lease: 3 * time.Second})
	b := startNode(t, url, "b", nodeOptions{forward: ended, lease: 3 * time.Second})
	tok = newSession(t, c, a.addr)
	a.crash()
	eventually(t, 30*time.Second, "b answers with Ended", func() bool {
		status, body := do(t, c, http.MethodGet, b.addr+"/hit", tok, "")
		return status == http.StatusNotFound && body == "gone for good\n"
	})
}

// A replica that dies: its sessions answer a clear error at once and the
// ended answer within the lease; nothing hangs; the other replicas'
// sessions go on working.
func TestOwnerDeathEndsItsSessionsWithinLease(t *testing.T) {
	const lease = 1500 * time.Millisecond
	nodes, lb, _ := three(t, nodeOptions{lease: lease})
	c := client(t)
	dead := newSession(t, c, nodes[0].addr)
	alive := newSession(t, c, nodes[1].addr)
	for _, n := range nodes { // every replica has looked the sessions up
		do(t, c, http.MethodGet, n.addr+"/hit", dead, "")
		do(t, c, http.MethodGet, n.addr+"/hit", alive, "")
	}
	nodes[0].crash()
	crashed := time.Now()
	seen := map[int]int{}
	for {
		start := time.Now()
		status, body := do(t, c, http.MethodGet, nodes[1+len(seen)%2].addr+"/hit", dead, "")
		if took := time.Since(start); took > 2*time.Second {
			t.Fatalf("a request for the dead replica's session took %v", took)
		}
		seen[status]++
		if status == http.StatusUnauthorized {
			if !strings.HasPrefix(body, "session ended") {
				t.Fatalf("ended answer: %q", body)
			}
			break
		}
		if status != http.StatusServiceUnavailable || !strings.Contains(body, "cannot be reached") {
			t.Fatalf("before the lease ran out: %d %q, want 503 'cannot be reached'", status, body)
		}
		if time.Since(crashed) > lease+lease/3+time.Second {
			t.Fatalf("still not ended %v after the crash (lease %v)", time.Since(crashed), lease)
		}
		time.Sleep(50 * time.Millisecond)
	}
	for range 4 {
		if status, body := do(t, c, http.MethodGet, lb.url+"/hit", alive, ""); status != http.StatusOK && status != http.StatusBadGateway {
			t.Fatalf("the live session: %d %q", status, body)
		}
		if status, body := do(t, c, http.MethodGet, nodes[2].addr+"/hit", alive, ""); status != http.StatusOK || !strings.HasPrefix(body, "r2 ") {
			t.Fatalf("the live session at r3: %d %q", status, body)
		}
	}
}

// A forwarded request streams both ways at once: an owner that answers
// while the body still arrives gets the rest of the body, and the client
// the rest of the answer. (The forwarding replica's server would
// otherwise drain and close the body when the answer's headers go out,
// under the forwarding, breaking the connection to the owner.)
func TestForwardingIsFullDuplex(t *testing.T) {
	nodes, _, _ := three(t, nodeOptions{})
	c := client(t)
	tok := newSession(t, c, nodes[0].addr)
	pr, pw := io.Pipe()
	req, _ := http.NewRequest(http.MethodPost, nodes[1].addr+"/duplex", pr)
	req.Header.Set("Authorization", "Bearer "+tok)
	type answer struct {
		res *http.Response
		err error
	}
	got := make(chan answer, 1)
	go func() { res, err := c.Do(req); got <- answer{res, err} }()
	go func() { _, _ = pw.Write([]byte("ping ")) }()
	var a answer
	select {
	case a = <-got:
	case <-time.After(30 * time.Second):
		t.Fatal("no answer headers while the body is still open")
	}
	if a.err != nil || a.res.StatusCode != http.StatusOK {
		t.Fatalf("answer: %v %+v", a.err, a.res)
	}
	defer a.res.Body.Close()
	first := make([]byte, 5)
	if _, err := io.ReadFull(a.res.Body, first); err != nil || string(first) != "ping " {
		t.Fatalf("first piece: %q %v", first, err)
	}
	go func() { _, _ = pw.Write([]byte("pong")); _ = pw.Close() }()
	rest := make(chan string, 1)
	go func() { b, _ := io.ReadAll(a.res.Body); rest <- string(b) }()
	select {
	case r := <-rest:
		if r != "pong" {
			t.Fatalf("the rest of the answer: %q, want the rest of the body", r)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the rest of the body never reached the owner")
	}
}

// A replica that stops cleanly leaves the directory, and its sessions
// answer as ended at once on every replica, even those that remembered
// it as their owner: none has to wait for its next renewal, and no
// request gets the 503 of an unreachable owner.
func TestCleanStopEndsSessionsAtOnce(t *testing.T) {
	_, url := migrated(t)
	a := startNode(t, url, "a", nodeOptions{lease: time.Hour}) // no renewal notices anything during the test
	b := startNode(t, url, "b", nodeOptions{lease: time.Hour})
	c := client(t)
	tok := newSession(t, c, a.addr)
	if status, body := do(t, c, http.MethodGet, b.addr+"/hit", tok, ""); status != http.StatusOK {
		t.Fatalf("before the stop: %d %q", status, body)
	}
	a.stop()
	for range 3 {
		start := time.Now()
		status, body := do(t, c, http.MethodGet, b.addr+"/hit", tok, "")
		if status != http.StatusUnauthorized || body != "session ended (b)\n" {
			t.Fatalf("after a's clean stop: %d %q, want b's ended answer", status, body)
		}
		if took := time.Since(start); took > time.Second {
			t.Fatalf("the ended answer took %v", took)
		}
	}
	if st := b.dir.Stats(); st.Unreachable != 0 || st.Ended != 3 {
		t.Fatalf("b's outcomes: %+v", st)
	}
}

// A replica that stalls (stops renewing its lease and answering, as a
// frozen process) ends the requests waiting on it when its lease runs
// out, with a clear error; an owner that is merely slow to answer is cut
// off by ResponseHeaderTimeout where one is set.
func TestStalledAndSlowOwners(t *testing.T) {
	const lease = 1500 * time.Millisecond
	_, url := migrated(t)
	a := startNode(t, url, "a", nodeOptions{lease: lease})
	b := startNode(t, url, "b", nodeOptions{lease: lease})
	bt := startNode(t, url, "bt", nodeOptions{lease: lease,
		forward: &replica.ForwardOptions{ResponseHeaderTimeout: 300 * time.Millisecond}})
	c := client(t)
	tok := newSession(t, c, a.addr)

	start := time.Now()
	status, body := do(t, c, http.MethodGet, bt.addr+"/slow", tok, "")
	if took := time.Since(start); status != http.StatusGatewayTimeout || took > 2*time.Second ||
		!strings.Contains(body, "did not answer in time") {
		t.Fatalf("slow owner: %d %q after %v, want 504 within the timeout", status, body, took)
	}
	if bt.dir.Stats().Timeout != 1 {
		t.Fatalf("Timeout count: %+v", bt.dir.Stats())
	}

	done := make(chan struct{})
	go func() {
		defer close(done)
		start := time.Now()
		status, body := do(t, c, http.MethodGet, b.addr+"/slow", tok, "")
		if took := time.Since(start); status != http.StatusBadGateway || !strings.Contains(body, "has stopped") ||
			took > lease+lease/3+2*time.Second {
			t.Errorf("stalled owner: %d %q after %v, want 502 within the lease", status, body, took)
		}
	}()
	eventually(t, 30*time.Second, "the request reached the owner", func() bool { return b.dir.Stats().Forwarded >= 1 })
	a.dir.StopRenewing() // the process stalls: no renewal; its server still holds the request
	<-done
	if b.dir.Stats().Gone != 1 {
		t.Fatalf("Gone count: %+v", b.dir.Stats())
	}
}

// A replica that claims a session it does not hold (here: a directory
// row pointing the session at it) gets the request once, answers it as
// ended, and never forwards it further; the real owner's session is not
// reached.
func TestLyingReplicaCannotReachTheSession(t *testing.T) {
	pool, url := migrated(t)
	owner := startNode(t, url, "owner", nodeOptions{})
	liar := startNode(t, url, "liar", nodeOptions{})
	entry := startNode(t, url, "entry", nodeOptions{})
	c := client(t)
	tok := newSession(t, c, owner.addr)
	if _, err := pool.Exec(context.Background(), `UPDATE agentsurface_sessions SET replica = $1 WHERE key = $2`,
		liar.dir.ID(), owner.dir.KeyOf(tok)); err != nil {
		t.Fatal(err)
	}
	status, body := do(t, c, http.MethodGet, entry.addr+"/hit", tok, "")
	if status != http.StatusUnauthorized || body != "session ended (liar)\n" {
		t.Fatalf("through the liar: %d %q", status, body)
	}
	if st := liar.dir.Stats(); st.Received != 1 || st.Forwarded != 0 {
		t.Fatalf("liar: %+v, want one received, none forwarded on", st)
	}
	if owner.app.hits(tok) != 0 || owner.dir.Stats().Received != 0 {
		t.Fatal("the request reached the real owner's session")
	}
	// The owner itself still serves its session.
	if status, body := do(t, c, http.MethodGet, owner.addr+"/hit", tok, ""); status != http.StatusOK || body != "owner 1" {
		t.Fatalf("at the owner: %d %q", status, body)
	}
}

// A row for a replica that is gone: one whose lease has run out answers
// as ended; one whose lease looks live but whose address refuses
// connections answers 503 at once; one whose address now belongs to a
// new registration answers as ended.
func TestDeadReplicaRows(t *testing.T) {
	pool, url := migrated(t)
	entry := startNode(t, url, "entry", nodeOptions{})
	other := startNode(t, url, "other", nodeOptions{})
	c := client(t)
	ctx := context.Background()
	insert := func(id, addr, expires string) string {
		tok := randomToken()
		if _, err := pool.Exec(ctx, `INSERT INTO agentsurface_replicas (id, name, addr, expires_at) VALUES ($1, 'ghost', $2, now() + $3::interval)`,
			id, addr, expires); err != nil {
			t.Fatal(err)
		}
		if _, err := pool.Exec(ctx, `INSERT INTO agentsurface_sessions (key, replica) VALUES ($1, $2)`, entry.dir.KeyOf(tok), id); err != nil {
			t.Fatal(err)
		}
		return tok
	}
	expired := insert("r_expired", "http://127.0.0.1:1", "-1 second")
	if status, body := do(t, c, http.MethodGet, entry.addr+"/hit", expired, ""); status != http.StatusUnauthorized || body != "session ended (entry)\n" {
		t.Fatalf("expired owner: %d %q", status, body)
	}
	refusing := insert("r_refusing", "http://127.0.0.1:1", "1 hour")
	start := time.Now()
	if status, body := do(t, c, http.MethodGet, entry.addr+"/hit", refusing, ""); status != http.StatusServiceUnavailable ||
		!strings.Contains(body, "cannot be reached") || time.Since(start) > 2*time.Second {
		t.Fatalf("refusing owner: %d %q after %v", status, body, time.Since(start))
	}
	// A live row at other's address but under another id: other gets a
	// request signed for a registration it is not.
	reused := insert("r_previous", other.addr, "1 hour")
	if status, body := do(t, c, http.MethodGet, entry.addr+"/hit", reused, ""); status != http.StatusUnauthorized || body != "session ended (other)\n" {
		t.Fatalf("address reused: %d %q", status, body)
	}
	if st := other.dir.Stats(); st.Ended != 1 || st.Received != 0 {
		t.Fatalf("other: %+v", st)
	}
}

// Forged and guessed tokens reach no session, on any replica: they find
// no owner and get the ended answer; none is forwarded.
func TestForgedTokensReachNoSession(t *testing.T) {
	nodes, lb, _ := three(t, nodeOptions{})
	c := client(t)
	real := newSession(t, c, nodes[0].addr)
	rapid.Check(t, func(rt *rapid.T) {
		forged := rapid.OneOf(
			rapid.StringMatching(`[A-Za-z0-9_-]{0,60}`),
			rapid.Just(real[:len(real)-1]),
			rapid.Just(real+"x"),
			rapid.Just(strings.ToUpper(real)),
			rapid.Custom(func(rt *rapid.T) string { // one character changed
				i := rapid.IntRange(0, len(real)-1).Draw(rt, "i")
				ch := rapid.SampledFrom([]byte("AZaz09_-")).Draw(rt, "c")
				if real[i] == ch {
					ch = '.'
				}
				return real[:i] + string(ch) + real[i+1:]
			}),
		).Draw(rt, "token")
		if forged == "" || forged == real {
			return
		}
		url := rapid.SampledFrom([]string{lb.url, nodes[0].addr, nodes[1].addr, nodes[2].addr}).Draw(rt, "at")
		status, body := do(t, c, http.MethodGet, url+"/hit", forged, "")
		if status != http.StatusUnauthorized || !strings.HasPrefix(body, "session ended") {
			rt.Fatalf("forged token %q at %s: %d %q", forged, url, status, body)
		}
	})
	for _, n := range nodes {
		if st := n.dir.Stats(); st.Forwarded != 0 || st.Received != 0 {
			t.Fatalf("%s forwarded or received a forged token: %+v", n.name, st)
		}
	}
	if nodes[0].app.hits(real) != 0 {
		t.Fatal("a forged token reached the session")
	}
}

// Only a request signed with the cluster secret, for this request and
// recently, skips forwarding; anything else with the hop header is
// refused before the application sees it.
func TestHopHeaderIsAuthenticated(t *testing.T) {
	_, url := migrated(t)
	a := startNode(t, url, "a", nodeOptions{})
	b := startNode(t, url, "b", nodeOptions{})
	c := client(t)
	tok := newSession(t, c, a.addr)
	host := strings.TrimPrefix(b.addr, "http://")
	now := time.Now()
	valid := b.dir.SignHop(a.dir.ID(), b.dir.ID(), now, http.MethodGet, host, "/hit", tok)
	for name, h := range map[string]string{
		"garbage":       "v1 nonsense",
		"other uri":     b.dir.SignHop(a.dir.ID(), b.dir.ID(), now, http.MethodGet, host, "/other", tok),
		"other method":  b.dir.SignHop(a.dir.ID(), b.dir.ID(), now, http.MethodPost, host, "/hit", tok),
		"other token":   b.dir.SignHop(a.dir.ID(), b.dir.ID(), now, http.MethodGet, host, "/hit", tok+"x"),
		"stale":         b.dir.SignHop(a.dir.ID(), b.dir.ID(), now.Add(-time.Minute), http.MethodGet, host, "/hit", tok),
		"future":        b.dir.SignHop(a.dir.ID(), b.dir.ID(), now.Add(time.Minute), http.MethodGet, host, "/hit", tok),
		"tampered from": strings.Replace(valid, a.dir.ID(), "r_000000000000000000000000", 1),
	} {
		req, _ := http.NewRequest(http.MethodGet, b.addr+"/hit", nil)
		req.Header.Set("Authorization", "Bearer "+tok)
		req.Header.Set(replica.HopHeader, h)
		res, err := c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		if res.StatusCode != http.StatusForbidden {
			t.Errorf("%s: %d, want 403", name, res.StatusCode)
		}
	}
	if got := b.dir.Stats().BadHops; got != 7 {
		t.Fatalf("BadHops = %d, want 7", got)
	}
	// A valid hop is served where it lands, never forwarded again, even
	// though the directory says a owns the session: b has no such
	// session and answers as ended. (Loop protection.)
	req, _ := http.NewRequest(http.MethodGet, b.addr+"/hit", nil)
	req.Header.Set("Authorization", "Bearer "+tok)
	req.Header.Set(replica.HopHeader, valid)
	res, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != http.StatusUnauthorized || b.dir.Stats().Forwarded != 0 || a.app.hits(tok) != 0 {
		t.Fatalf("valid hop: %d, stats %+v", res.StatusCode, b.dir.Stats())
	}
}

// While Postgres cannot be read, a request that needs the directory gets
// 503 within the timeout; owned and remembered sessions go on working.
func TestDirectoryUnavailable(t *testing.T) {
	srv, _, url := privateMigrated(t)
	const lease = 20 * time.Second // longer than the outage
	a := startNode(t, url, "a", nodeOptions{lease: lease})
	b := startNode(t, url, "b", nodeOptions{lease: lease})
	c := client(t)
	known := newSession(t, c, a.addr)
	unseen := newSession(t, c, a.addr)
	if status, _ := do(t, c, http.MethodGet, b.addr+"/hit", known, ""); status != http.StatusOK {
		t.Fatal("before the outage")
	}
	if err := srv.Stop(); err != nil {
		t.Fatal(err)
	}
	for _, at := range []*node{a, b} {
		if status, body := do(t, c, http.MethodGet, at.addr+"/hit", known, ""); status != http.StatusOK {
			t.Fatalf("known session at %s during the outage: %d %q", at.name, status, body)
		}
	}
	start := time.Now()
	status, body := do(t, c, http.MethodGet, b.addr+"/hit", unseen, "")
	if status != http.StatusServiceUnavailable || !strings.Contains(body, "directory is unavailable") || time.Since(start) > 3*time.Second {
		t.Fatalf("unseen session during the outage: %d %q after %v", status, body, time.Since(start))
	}
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	// The pools' idle connections died with the server; the directory
	// retries on a fresh one, so the first requests already succeed.
	if status, body := do(t, c, http.MethodGet, b.addr+"/hit", unseen, ""); status != http.StatusOK {
		t.Fatalf("the first lookup after the restart: %d %q", status, body)
	}
	if status, body := do(t, c, http.MethodPost, a.addr+"/session", "", ""); status != http.StatusOK {
		t.Fatalf("the first claim after the restart: %d %q", status, body)
	}
	if a.dir.Stats().LeasesLost+b.dir.Stats().LeasesLost != 0 {
		t.Fatal("a lease was lost to an outage shorter than the lease")
	}
}

// The directory's metrics count each request by outcome, as Stats does.
func TestForwardingMetrics(t *testing.T) {
	_, url := migrated(t)
	readers := []*sdkmetric.ManualReader{sdkmetric.NewManualReader(), sdkmetric.NewManualReader()}
	var nodes []*node
	for i, name := range []string{"a", "b"} {
		mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(readers[i]))
		t.Cleanup(func() { _ = mp.Shutdown(context.Background()) })
		nodes = append(nodes, startNode(t, url, name, nodeOptions{meter: mp}))
	}
	c := client(t)
	tok := newSession(t, c, nodes[0].addr)
	do(t, c, http.MethodGet, nodes[1].addr+"/hit", tok, "")
	do(t, c, http.MethodGet, nodes[1].addr+"/hit", randomToken(), "")
	read := func(r *sdkmetric.ManualReader) map[string]int64 {
		var rm metricdata.ResourceMetrics
		if err := r.Collect(context.Background(), &rm); err != nil {
			t.Fatal(err)
		}
		out := map[string]int64{}
		for _, sm := range rm.ScopeMetrics {
			for _, m := range sm.Metrics {
				switch d := m.Data.(type) {
				case metricdata.Sum[int64]:
					for _, dp := range d.DataPoints {
						v, _ := dp.Attributes.Value("agentsurface.replica.outcome")
						out[m.Name+"/"+v.AsString()] = dp.Value
					}
				case metricdata.Gauge[int64]:
					for _, dp := range d.DataPoints {
						out[m.Name] = dp.Value
					}
				}
			}
		}
		return out
	}
	a, b := read(readers[0]), read(readers[1])
	if a["agentsurface.replica.requests/local"] != 1 || a["agentsurface.replica.requests/received"] != 1 ||
		a["agentsurface.replica.sessions"] != 1 {
		t.Fatalf("owner's metrics: %v", a)
	}
	if b["agentsurface.replica.requests/forwarded"] != 1 || b["agentsurface.replica.requests/ended"] != 1 ||
		b["agentsurface.replica.sessions"] != 0 {
		t.Fatalf("entry replica's metrics: %v", b)
	}
}

// Postgres stops and starts again under traffic through the balancer:
// every request is answered by its session's owner or refused with a
// clear 503, none waits past the timeout, sessions cannot be created
// while it is down and can again after, and the audit of every request
// served is in the table once the replicas stop.
func TestPostgresRestartUnderTraffic(t *testing.T) {
	srv, _, url := privateMigrated(t)
	const lease = 20 * time.Second // longer than the outage
	nodes := []*node{startNode(t, url, "r1", nodeOptions{lease: lease, audit: true}),
		startNode(t, url, "r2", nodeOptions{lease: lease, audit: true}),
		startNode(t, url, "r3", nodeOptions{lease: lease, audit: true})}
	lb := startBalancer(t, nodes...)
	c := client(t)
	toks := make([]string, 6)
	for i := range toks {
		toks[i] = newSession(t, c, lb.url)
	}
	var (
		mu      sync.Mutex
		served  int
		refused int
		owner   = map[string]string{}
		last    = map[string]int{}
	)
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for w := range 2 {
		wg.Go(func() {
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				tok := toks[(2*i+w)%len(toks)] // each worker its own sessions, so answers come in order
				start := time.Now()
				status, body := do(t, c, http.MethodGet, lb.url+"/hit", tok, "")
				if took := time.Since(start); took > 5*time.Second {
					t.Errorf("a request took %v", took)
				}
				mu.Lock()
				switch status {
				case http.StatusOK:
					var name string
					var n int
					fmt.Sscanf(body, "%s %d", &name, &n)
					if o, ok := owner[tok]; ok && o != name || n <= last[tok] {
						t.Errorf("session %s answered by %s with %d after %s %d", tok[:6], name, n, owner[tok], last[tok])
					}
					owner[tok], last[tok] = name, n
					served++
				case http.StatusServiceUnavailable:
					refused++
				default:
					t.Errorf("answer %d %q", status, body)
				}
				mu.Unlock()
			}
		})
	}
	count := func() int { mu.Lock(); defer mu.Unlock(); return served }
	eventually(t, 30*time.Second, "traffic flows", func() bool { return count() > 50 })
	if err := srv.Stop(); err != nil {
		t.Fatal(err)
	}
	before := count()
	eventually(t, 30*time.Second, "traffic flows with Postgres down", func() bool { return count() > before+50 })
	if status, body := do(t, c, http.MethodPost, lb.url+"/session", "", ""); status != http.StatusServiceUnavailable {
		t.Fatalf("a new session with Postgres down: %d %q", status, body)
	}
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	eventually(t, 15*time.Second, "sessions can be created again", func() bool {
		status, _ := do(t, c, http.MethodPost, lb.url+"/session", "", "")
		return status == http.StatusOK
	})
	after := count()
	eventually(t, 30*time.Second, "traffic flows after the restart", func() bool { return count() > after+50 })
	close(stop)
	wg.Wait()
	for _, n := range nodes {
		n.stop()
		if st := n.app.audit.Stats(); st.Dropped != 0 {
			t.Fatalf("%s dropped audit records: %+v", n.name, st)
		}
	}
	var rows int
	// pool's idle connection died with the server; a new pool has none.
	if err := openPool(t, url).QueryRow(context.Background(), `SELECT count(DISTINCT invocation_id) FROM agentsurface_audit`).Scan(&rows); err != nil {
		t.Fatal(err)
	}
	if rows != served {
		t.Fatalf("audit table holds %d hits, %d were served", rows, served)
	}
	for _, n := range nodes {
		if n.dir.Stats().LeasesLost != 0 {
			t.Fatalf("%s lost its lease", n.name)
		}
	}
}

// A forwarded request whose body the owner never read (here: the owner
// cannot be reached, so nothing was sent) leaves the client's connection
// usable: the next request on it is answered. Forwarding streams both
// ways, and net/http's server, which otherwise drains an unread body
// while the handler still runs, would drain it only after the handler
// returned, starting a background read that its next request read then
// panicked on ("invalid concurrent Body.Read call"), dropping the
// connection (golang/go#68560).
func TestForwardedBodyLeftUnreadKeepsConnection(t *testing.T) {
	_, url := migrated(t)
	a := startNode(t, url, "a", nodeOptions{lease: time.Hour}) // a's lease outlives the test: a is unreachable, not gone
	b := startNode(t, url, "b", nodeOptions{lease: time.Hour})
	tok := newSession(t, client(t), a.addr)
	a.crash()
	conn, err := net.Dial("tcp", strings.TrimPrefix(b.addr, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	br := bufio.NewReader(conn)
	for i, req := range []string{
		"POST /echo HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer " + tok + "\r\nContent-Length: 5\r\n\r\nhello",
		"GET /hit HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer " + tok + "\r\n\r\n",
	} {
		if _, err := io.WriteString(conn, req); err != nil {
			t.Fatalf("request %d: %v", i+1, err)
		}
		res, err := http.ReadResponse(br, nil)
		if err != nil {
			t.Fatalf("request %d on the same connection: %v (the server dropped it)", i+1, err)
		}
		_, _ = io.Copy(io.Discard, res.Body)
		res.Body.Close()
		if res.StatusCode != http.StatusServiceUnavailable {
			t.Fatalf("request %d: %s, want 503 (owner unreachable)", i+1, res.Status)
		}
	}
}

// Every answer names the replica that served it: the owner, for a
// request served where it landed and for one forwarded (the forwarding
// replica relays the owner's header); the replica that answered, for
// the ended answer and for an error of forwarding. (Issue 37.5.)
func TestServedByHeaderNamesTheReplica(t *testing.T) {
	_, url := migrated(t)
	a := startNode(t, url, "a", nodeOptions{lease: time.Hour})
	b := startNode(t, url, "b", nodeOptions{lease: time.Hour})
	gone := startNode(t, url, "gone", nodeOptions{lease: time.Hour})
	c := client(t)
	tok := newSession(t, c, a.addr)
	dead := newSession(t, c, gone.addr)
	if status, _ := do(t, c, http.MethodGet, b.addr+"/hit", dead, ""); status != http.StatusOK {
		t.Fatal("b looks the session of gone up")
	}
	gone.crash() // its lease outlives the test: b gets connection refused
	for _, x := range []struct {
		at, tok, path string
		status        int
		servedBy      string
	}{
		{a.addr, tok, "/hit", http.StatusOK, "a"},                     // local
		{b.addr, tok, "/hit", http.StatusOK, "a"},                     // forwarded: the owner's
		{b.addr, "", "/hit", http.StatusUnauthorized, "b"},            // names no session
		{b.addr, randomToken(), "/hit", http.StatusUnauthorized, "b"}, // ended
		{b.addr, dead, "/hit", http.StatusServiceUnavailable, "b"},    // owner unreachable
		{a.addr, tok, "/nothing", http.StatusNotFound, "a"},           // the application's own answer
		{b.addr, tok, "/nothing", http.StatusNotFound, "a"},           // the same, forwarded
	} {
		req, _ := http.NewRequest(http.MethodGet, x.at+x.path, nil)
		if x.tok != "" {
			req.Header.Set("Authorization", "Bearer "+x.tok)
		}
		res, err := c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		if got := res.Header.Values(replica.ServedByHeader); res.StatusCode != x.status || len(got) != 1 || got[0] != x.servedBy {
			t.Errorf("GET %s%s: %d %s: %v, want %d and %q", x.at, x.path, res.StatusCode, replica.ServedByHeader, got, x.status, x.servedBy)
		}
	}
}

// An owner that is alive (it renews its lease) but sends no answer is
// cut off after ResponseHeaderTimeout with a clear 504 (ErrOwnerTimeout),
// while a request the application marks long-lived, such as a call held
// until a person approves it, waits past that timeout and completes. The
// bound applies by default. (Issue 38.5.)
func TestStuckOwnerIsBoundedButLongLivedRequestsWait(t *testing.T) {
	if got := replica.ResponseHeaderTimeoutOf(replica.NewForwarder(nil)); got != replica.DefaultResponseHeaderTimeout || got <= 0 {
		t.Fatalf("the default bound: %v", got)
	}
	_, url := migrated(t)
	const timeout = 300 * time.Millisecond
	a := startNode(t, url, "a", nodeOptions{})
	b := startNode(t, url, "b", nodeOptions{forward: &replica.ForwardOptions{ResponseHeaderTimeout: timeout,
		LongLived: func(r *http.Request) bool { return r.URL.Path == "/hold" }}})
	c := client(t)
	tok := newSession(t, c, a.addr)
	held := make(chan string, 1)
	go func() {
		status, body := do(t, c, http.MethodGet, b.addr+"/hold?id=h1", tok, "")
		held <- fmt.Sprint(status, " ", body)
	}()
	eventually(t, 30*time.Second, "the call is held on a", func() bool {
		a.app.mu.Lock()
		defer a.app.mu.Unlock()
		return a.app.sessions[tok].pending["h1"] != nil
	})
	// A request sent after the held one is cut off: more than the
	// timeout has passed for the held one too.
	start := time.Now()
	status, body := do(t, c, http.MethodGet, b.addr+"/slow", tok, "")
	if took := time.Since(start); status != http.StatusGatewayTimeout || !strings.Contains(body, "did not answer in time") ||
		took < timeout || took > timeout+5*time.Second {
		t.Fatalf("the stuck request: %d %q after %v, want 504 after %v", status, body, took, timeout)
	}
	if status, body := do(t, c, http.MethodPost, a.addr+"/decide?id=h1&approve=1", tok, ""); status != http.StatusOK {
		t.Fatalf("decide: %d %q", status, body)
	}
	select {
	case got := <-held:
		if got != "200 a decided true" {
			t.Fatalf("the long-lived call: %q", got)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the long-lived call did not complete")
	}
	if st := b.dir.Stats(); st.Timeout != 1 || st.Forwarded != 2 {
		t.Fatalf("b's stats: %+v", st)
	}
	if st := a.dir.Stats(); st.LeasesLost != 0 {
		t.Fatalf("a's stats: %+v", st)
	}
}
