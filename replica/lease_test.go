package replica_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentsurface/agentsurface/replica"
	"github.com/jackc/pgx/v5/pgxpool"
)

// A Postgres outage of 0.8× the lease, under load through forwarding,
// ends no session: each replica serves the sessions it owns from memory
// for the whole lease and forwards to the owners it knows, renewals
// retry quickly once Postgres is back, and the sessions go on. During
// the outage only what changes ownership or needs a lookup is refused
// (a new session, the first request of a session a replica never saw),
// with a 503 within the directory's Timeout. Every request is answered
// within that Timeout (3 s here): none waits on Postgres. (Issue 38.1.)
func TestPostgresOutageShorterThanTheLeaseEndsNoSession(t *testing.T) {
	srv, _, url := privateMigrated(t)
	const lease = 15 * time.Second // the default
	const bound = 3 * time.Second  // the nodes' Options.Timeout
	nodes := []*node{startNode(t, url, "r1", nodeOptions{lease: lease}), startNode(t, url, "r2", nodeOptions{lease: lease}),
		startNode(t, url, "r3", nodeOptions{lease: lease})}
	lb := startBalancer(t, nodes...)
	c := client(t)
	toks := make([]string, 6)
	owner := map[string]string{}
	for i := range toks {
		toks[i] = newSession(t, c, nodes[i%3].addr)
		owner[toks[i]] = nodes[i%3].name
		for _, n := range nodes { // every replica knows every owner
			if status, body := do(t, c, http.MethodGet, n.addr+"/hit", toks[i], ""); status != http.StatusOK {
				t.Fatalf("warm-up at %s: %d %q", n.name, status, body)
			}
		}
	}
	unseen := newSession(t, c, nodes[0].addr) // no other replica has looked it up

	type tally struct {
		served, failed int
		slowest        time.Duration
		failures       []string
	}
	var (
		mu      sync.Mutex
		phase   = "before"
		tallies = map[string]*tally{"before": {}, "during": {}, "after": {}}
		last    = map[string]int{}
	)
	for _, tok := range toks {
		last[tok] = len(nodes)
	}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for w := range 3 {
		wg.Go(func() {
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				tok := toks[2*w+i%2] // each worker its own sessions, so each answers in order
				start := time.Now()
				status, body := do(t, c, http.MethodGet, lb.url+"/hit", tok, "")
				took := time.Since(start)
				var name string
				var n int
				fmt.Sscanf(body, "%s %d", &name, &n)
				mu.Lock()
				tl := tallies[phase]
				tl.slowest = max(tl.slowest, took)
				if status == http.StatusOK && name == owner[tok] && n == last[tok]+1 {
					tl.served++
				} else {
					tl.failed++
					tl.failures = append(tl.failures, fmt.Sprintf("%s: %d %q", tok[:6], status, body))
				}
				last[tok] = n
				mu.Unlock()
			}
		})
	}
	served := func(p string) int { mu.Lock(); defer mu.Unlock(); return tallies[p].served }
	eventually(t, 30*time.Second, "traffic flows", func() bool { return served("before") >= 30 })

	stopped := time.Now()
	mu.Lock()
	phase = "during"
	mu.Unlock()
	if err := srv.Stop(); err != nil {
		t.Fatal(err)
	}
	// What needs the directory is refused at once, with a 503.
	start := time.Now()
	if status, body := do(t, c, http.MethodPost, nodes[1].addr+"/session", "", ""); status != http.StatusServiceUnavailable || time.Since(start) > bound {
		t.Errorf("a new session during the outage: %d %q after %v, want 503 within %v", status, body, time.Since(start), bound)
	}
	start = time.Now()
	if status, body := do(t, c, http.MethodGet, nodes[2].addr+"/hit", unseen, ""); status != http.StatusServiceUnavailable ||
		!strings.Contains(body, "directory is unavailable") || time.Since(start) > bound {
		t.Errorf("a session never looked up, during the outage: %d %q after %v, want 503 within %v", status, body, time.Since(start), bound)
	}
	// The outage lasts 0.8× the lease (plus the time Postgres takes to
	// start again): the scenario's length, not a wait for a condition.
	time.Sleep(time.Until(stopped.Add(lease * 8 / 10)))
	starting := time.Now()
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	outage := time.Since(stopped)
	t.Logf("Postgres took %v to start again", time.Since(starting).Round(time.Millisecond))
	mu.Lock()
	phase = "after"
	mu.Unlock()

	// Every replica renews its lease: its deadline moves past the one
	// the outage would have ended it at.
	eventually(t, 30*time.Second, "every replica renewed its lease after the outage", func() bool {
		for _, n := range nodes {
			if !n.dir.LeaseDeadline().After(stopped.Add(lease)) {
				return false
			}
		}
		return true
	})
	eventually(t, 30*time.Second, "traffic flows after the outage", func() bool { return served("after") >= 60 })
	close(stop)
	wg.Wait()
	eventually(t, 30*time.Second, "sessions can be created again", func() bool {
		status, _ := do(t, c, http.MethodPost, lb.url+"/session", "", "")
		return status == http.StatusOK
	})
	if status, body := do(t, c, http.MethodGet, nodes[2].addr+"/hit", unseen, ""); status != http.StatusOK || body != "r1 1" {
		t.Errorf("the unseen session after the outage: %d %q", status, body)
	}

	var requests, failed int
	var slowest time.Duration
	for _, p := range []string{"before", "during", "after"} {
		tl := tallies[p]
		t.Logf("%s the outage: %d requests answered by their owner, %d failed, slowest %v", p, tl.served, tl.failed,
			tl.slowest.Round(time.Millisecond))
		requests, failed, slowest = requests+tl.served+tl.failed, failed+tl.failed, max(slowest, tl.slowest)
		if tl.failed > 0 {
			t.Errorf("%s the outage: %d requests failed: %v", p, tl.failed, tl.failures[:min(len(tl.failures), 10)])
		}
	}
	t.Logf("lease %v, Postgres away %v (%.2f× the lease): %d requests, %d errors, slowest %v",
		lease, outage.Round(time.Millisecond), outage.Seconds()/lease.Seconds(), requests, failed, slowest.Round(time.Millisecond))
	if tallies["during"].served < 30 {
		t.Errorf("only %d requests served during the outage", tallies["during"].served)
	}
	if slowest > bound {
		t.Errorf("a request took %v, beyond the bound %v", slowest, bound)
	}
	for _, n := range nodes {
		if st := n.dir.Stats(); st.LeasesLost != 0 || st.PastLease != 0 {
			t.Errorf("%s: %+v", n.name, st)
		}
	}
}

// An owner paused past its lease (its renewals stop, as in a stalled
// process) stops serving its sessions at its lease's deadline, checked on
// each request: from the first moment another replica answers one of
// them as ended, the owner never serves it again — directly or through a
// replica that forwards to it — but refuses it (503, ErrLeaseLost), and
// it reports itself not ready. (Issue 38.5.)
func TestOwnerPastItsLeaseDeadlineStopsServingAtOnce(t *testing.T) {
	_, url := migrated(t)
	const lease = 1500 * time.Millisecond
	a := startNode(t, url, "a", nodeOptions{lease: lease})
	fwd := startNode(t, url, "fwd", nodeOptions{lease: lease}) // knows a as the owner: forwards to it
	dir := startNode(t, url, "dir", nodeOptions{lease: lease}) // reads the directory first
	c := client(t)
	tok := newSession(t, c, a.addr)
	if status, _ := do(t, c, http.MethodGet, fwd.addr+"/hit", tok, ""); status != http.StatusOK {
		t.Fatal("before the pause")
	}
	a.dir.StopRenewing()
	ended := "" // the replica that first answered the session as ended
	refusedAt := map[string]bool{}
	deadline := time.Now().Add(lease + 10*time.Second)
	for len(refusedAt) < 3 || ended == "" {
		if time.Now().After(deadline) {
			t.Fatalf("not every replica stopped serving the session (refused at %v, ended at %q)", refusedAt, ended)
		}
		for _, n := range []*node{dir, fwd, a} {
			status, body := do(t, c, http.MethodGet, n.addr+"/hit", tok, "")
			switch {
			case status == http.StatusOK && ended != "":
				t.Fatalf("%s served the session (%q) after %s had answered it as ended", n.name, body, ended)
			case status == http.StatusOK:
			case status == http.StatusUnauthorized && n != a:
				// The directory says a's lease ran out: the session ended.
				if ended == "" {
					ended = n.name
				}
				refusedAt[n.name] = true
			case status == http.StatusServiceUnavailable && strings.Contains(body, "lease has run out"):
				refusedAt[n.name] = true // a, or its answer relayed by another replica
			case status == http.StatusBadGateway && strings.Contains(body, "has stopped") && n != a:
				refusedAt[n.name] = true // forwarded to a when the renewal saw a's lease run out
			default:
				t.Fatalf("%s: %d %q", n.name, status, body)
			}
		}
	}
	if !errors.Is(a.dir.Ready(), replica.ErrLeaseLost) {
		t.Fatalf("Ready of the paused owner: %v", a.dir.Ready())
	}
	if st := a.dir.Stats(); st.PastLease == 0 {
		t.Fatalf("a's stats: %+v", st)
	}
}

// Ready says whether a replica should get requests: yes once it has
// registered; not from Drain on, while it still serves and forwards
// everything, claims no new session and says so; not once closed.
// (Issue 37.5.)
func TestReadyAndDrain(t *testing.T) {
	_, url := migrated(t)
	a := startNode(t, url, "a", nodeOptions{})
	b := startNode(t, url, "b", nodeOptions{})
	c := client(t)
	if err := a.dir.Ready(); err != nil {
		t.Fatalf("Ready after OpenDirectory: %v", err)
	}
	mine := newSession(t, c, a.addr)
	theirs := newSession(t, c, b.addr)
	a.dir.Drain()
	a.dir.Drain() // idempotent
	if err := a.dir.Ready(); !errors.Is(err, replica.ErrDraining) {
		t.Fatalf("Ready while draining: %v", err)
	}
	if err := b.dir.Ready(); err != nil {
		t.Fatalf("Ready of the other replica: %v", err)
	}
	if err := a.dir.Claim(context.Background(), randomToken()); !errors.Is(err, replica.ErrDraining) {
		t.Fatalf("Claim while draining: %v", err)
	}
	for _, tok := range []string{mine, theirs} {
		for _, n := range []*node{a, b} {
			if status, body := do(t, c, http.MethodGet, n.addr+"/hit", tok, ""); status != http.StatusOK {
				t.Fatalf("while a drains, at %s: %d %q", n.name, status, body)
			}
		}
	}
	a.stop()
	if err := a.dir.Ready(); !errors.Is(err, replica.ErrClosed) {
		t.Fatalf("Ready after Close: %v", err)
	}
}

// A replica says in its log, with the peer's id, name, address and why,
// when another replica leaves (a clean stop) and when another's lease
// runs out (a crash). (Issue 37.5.)
func TestPeerDepartureIsLogged(t *testing.T) {
	_, url := migrated(t)
	logs := new(syncWriter)
	const lease = time.Second
	_ = startNode(t, url, "watcher", nodeOptions{lease: lease, log: slog.New(slog.NewTextHandler(logs, nil))})
	leaving := startNode(t, url, "leaving", nodeOptions{lease: lease})
	dying := startNode(t, url, "dying", nodeOptions{lease: lease})
	line := func(msg, id string) string {
		for l := range strings.SplitSeq(logs.String(), "\n") {
			if strings.Contains(l, msg) && strings.Contains(l, "peer="+id) {
				return l
			}
		}
		return ""
	}
	for _, n := range []*node{leaving, dying} {
		eventually(t, 30*time.Second, n.name+" seen live", func() bool { return line("a peer is live", n.dir.ID()) != "" })
	}
	leftID, diedID := leaving.dir.ID(), dying.dir.ID()
	leaving.stop()
	dying.crash()
	eventually(t, 30*time.Second, "the departures logged", func() bool {
		return line("a peer left", leftID) != "" && line("lease ran out", diedID) != ""
	})
	for _, c := range []struct {
		line, level, name, addr, why string
	}{
		{line("a peer left", leftID), "INFO", "leaving", leaving.addr, "left the directory"},
		{line("lease ran out", diedID), "WARN", "dying", dying.addr, "its lease ran out"},
	} {
		if !strings.Contains(c.line, "level="+c.level) || !strings.Contains(c.line, "name="+c.name) ||
			!strings.Contains(c.line, "addr="+c.addr) || !strings.Contains(c.line, c.why) {
			t.Errorf("log line %q: want level %s, name %s, addr %s and why", c.line, c.level, c.name, c.addr)
		}
	}
	if n := strings.Count(logs.String(), "peer="+diedID); n != 2 { // live, then gone: once each
		t.Errorf("the dead peer is in %d log lines, want 2:\n%s", n, logs.String())
	}
}

// The directory runs its statements on the application's pool and never
// resets it: after a statement failed on a broken connection (here: its
// backend terminated), a connection the application holds is still
// open once returned, and the lookup still succeeds, on a fresh
// connection. (Issue 36.5.)
func TestDirectoryLeavesTheApplicationsPoolAlone(t *testing.T) {
	admin, url := migrated(t)
	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		t.Fatal(err)
	}
	cfg.MaxConns = 2
	cfg.ShouldPing = func(context.Context, pgxpool.ShouldPingParams) bool { return false } // hand out dead connections as they are
	pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	ctx := context.Background()
	d, err := replica.OpenDirectory(ctx, pool, "http://127.0.0.1:1", secret, &replica.Options{Lease: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	other := startNode(t, url, "other", nodeOptions{})
	tok := randomToken()
	if err := other.dir.Claim(ctx, tok); err != nil {
		t.Fatal(err)
	}
	held, err := pool.Acquire(ctx) // the application's
	if err != nil {
		t.Fatal(err)
	}
	var heldPID, idlePID uint32
	if err := held.QueryRow(ctx, `SELECT pg_backend_pid()`).Scan(&heldPID); err != nil {
		t.Fatal(err)
	}
	if err := pool.QueryRow(ctx, `SELECT pg_backend_pid()`).Scan(&idlePID); err != nil { // the other, idle one
		t.Fatal(err)
	}
	if _, err := admin.Exec(ctx, `SELECT pg_terminate_backend($1)`, idlePID); err != nil {
		t.Fatal(err)
	}
	if o, err := d.Owner(ctx, tok); err != nil || o.Name != "other" {
		t.Fatalf("lookup on a pool with a broken connection: %+v %v", o, err)
	}
	held.Release()
	var alive bool
	if err := admin.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM pg_stat_activity WHERE pid = $1)`, heldPID).Scan(&alive); err != nil {
		t.Fatal(err)
	}
	if !alive || pool.Stat().TotalConns() != 2 || !slices.Contains(pidsOf(t, pool), heldPID) {
		t.Fatalf("the application's connection was closed (alive %v, %d connections)", alive, pool.Stat().TotalConns())
	}
}

// pidsOf returns the backend pids of every connection pool holds.
func pidsOf(t *testing.T, pool *pgxpool.Pool) []uint32 {
	t.Helper()
	var pids []uint32
	var conns []*pgxpool.Conn
	for range pool.Stat().TotalConns() {
		c, err := pool.Acquire(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		conns = append(conns, c)
		pids = append(pids, c.Conn().PgConn().PID())
	}
	for _, c := range conns {
		c.Release()
	}
	return pids
}
