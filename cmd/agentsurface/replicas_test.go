package main

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/jackc/pgx/v5"

	"github.com/agentsurface/agentsurface/examples/devices/agent"
	"github.com/agentsurface/agentsurface/internal/browsertest"
	"github.com/agentsurface/agentsurface/internal/lbtest"
	"github.com/agentsurface/agentsurface/surface"
)

// testLease is the replicas' lease in the multi-replica test: a killed
// replica's sessions end within it.
const testLease = 2 * time.Second

// fullBuild are the build tags of a binary with every optional feature
// (features.go); this test binary has none of them, so tests of those
// features run a binary built with them.
var fullBuild = []string{"postgres", "otel"}

// buildCLI builds this command with the build tags into a temporary
// directory, for tests that run it as separate processes.
func buildCLI(t *testing.T, tags ...string) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "agentsurface")
	args := []string{"build", "-o", bin}
	if len(tags) > 0 {
		args = append(args, "-tags", strings.Join(tags, ","))
	}
	out, err := exec.Command("go", append(args, ".")...).CombinedOutput()
	if err != nil {
		t.Fatalf("go build %v: %v\n%s", args, err, out)
	}
	return bin
}

// runCLI runs bin with args as a process of its own, with the extra
// environment variables env, and returns its exit status and outputs.
func runCLI(t *testing.T, bin string, env []string, args ...string) (int, string, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute) // a failure bound
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Env = append(os.Environ(), env...)
	var out, errOut lockedBuffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err := cmd.Run()
	var ee *exec.ExitError
	if err != nil && !errors.As(err, &ee) {
		t.Fatalf("%s %v: %v", bin, args, err)
	}
	return cmd.ProcessState.ExitCode(), out.String(), errOut.String()
}

// replicaProc is one `agentsurface demo --postgres` process.
type replicaProc struct {
	name   string
	cmd    *exec.Cmd
	base   string // where it listens, http://127.0.0.1:port
	join   string // its printed session's join path, /agentsurface/join/…
	token  string // and MCP bearer token
	stderr lockedBuffer
	exited chan struct{}
	err    error // the process's exit, once exited is closed
}

// startReplica starts a replica on a free loopback port and waits for
// the session it prints. Extra flags follow the others.
func startReplica(t *testing.T, bin, dbURL, secret, name string, extra ...string) *replicaProc {
	t.Helper()
	p := &replicaProc{name: name, exited: make(chan struct{})}
	p.cmd = exec.Command(bin, append([]string{"demo", "--addr", "127.0.0.1:0", "--postgres", dbURL,
		"--replica-name", name, "--replica-lease", testLease.String(), "--log-level", "debug"}, extra...)...)
	p.cmd.Env = append(os.Environ(), envReplicaSecret+"="+secret)
	p.cmd.Stderr = &p.stderr
	stdout, err := p.cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { p.err = p.cmd.Wait(); close(p.exited) }()
	t.Cleanup(func() {
		p.stop(t)
		if t.Failed() {
			t.Logf("%s's log:\n%s", name, p.stderr.String())
		}
	})
	lines := make(chan string)
	found := make(chan struct{})
	defer close(found)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			select {
			case lines <- sc.Text():
			case <-found: // nobody reads any more: drain
			}
		}
	}()
	timeout := time.After(60 * time.Second)
	for p.join == "" || p.token == "" {
		select {
		case line := <-lines:
			if u, ok := strings.CutPrefix(line, "Devices console: "); ok {
				i := strings.Index(u, "/agentsurface/join/")
				p.base, p.join = u[:i], u[i:]
			}
			if _, tok, ok := strings.Cut(line, `--header "Authorization: Bearer `); ok {
				p.token = strings.TrimSuffix(tok, `"`)
			}
		case <-p.exited:
			t.Fatalf("%s exited: %v\n%s", name, p.err, p.stderr.String())
		case <-timeout:
			t.Fatalf("%s printed no session within a minute:\n%s", name, p.stderr.String())
		}
	}
	return p
}

// stop stops the replica as a deploy does (SIGTERM), and fails the test
// unless it exits cleanly within 20 s.
func (p *replicaProc) stop(t *testing.T) {
	select {
	case <-p.exited:
		return
	default:
	}
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.exited:
		if p.err != nil {
			t.Errorf("%s exited: %v", p.name, p.err)
		}
	case <-time.After(20 * time.Second):
		_ = p.cmd.Process.Kill()
		<-p.exited
		t.Errorf("%s did not stop within 20 s of SIGTERM", p.name)
	}
}

// kill ends the replica as a crash does: no clean-up at all.
func (p *replicaProc) kill() {
	_ = p.cmd.Process.Kill()
	<-p.exited
}

// visitor is a browser session without a browser: its cookie, its open
// event stream and its agent, every request through the balancer.
type visitor struct {
	front string
	hc    *http.Client
	agent *agent.MCP
	tools map[string]agent.Tool // by capability id
	feed  *eventFeed
}

// visit joins a replica's printed session through the balancer (front),
// opens its event stream (the page's views mount on the owner) and
// connects its agent.
func visit(ctx context.Context, t *testing.T, front string, p *replicaProc) *visitor {
	t.Helper()
	jar, _ := cookiejar.New(nil)
	v := &visitor{front: front, hc: &http.Client{Jar: jar}}
	res, err := v.hc.Get(front + p.join)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != http.StatusOK {
		t.Fatalf("join %s's session: %s", p.name, res.Status)
	}
	v.feed = openFeed(ctx, t, v.hc, front+consoleEvents)
	if v.agent, err = agent.Dial(ctx, front+"/mcp", &agent.DialOptions{Token: p.token}); err != nil {
		t.Fatalf("MCP for %s's session: %v", p.name, err)
	}
	t.Cleanup(func() { v.agent.Close() })
	v.refreshTools(ctx, t, "view:devices.table.readState")
	return v
}

// refreshTools lists the tools until they hold want.
func (v *visitor) refreshTools(ctx context.Context, t *testing.T, want string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		tools, err := v.agent.List(ctx)
		if err != nil {
			t.Fatal(err)
		}
		v.tools = map[string]agent.Tool{}
		for _, tool := range tools {
			v.tools[tool.CapabilityID] = tool
		}
		if _, ok := v.tools[want]; ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("no %s among the tools: %v", want, tools)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// call calls the tool of a capability.
func (v *visitor) call(ctx context.Context, t *testing.T, capID, args string, o agent.CallOptions) surface.Result {
	t.Helper()
	tool, ok := v.tools[capID]
	if !ok {
		t.Fatalf("no tool for %s", capID)
	}
	res, err := v.agent.CallWith(ctx, tool.Name, json.RawMessage(args), o)
	if err != nil {
		t.Fatalf("%s: %v", capID, err)
	}
	return res
}

// decide posts the page's approval of a confirmation.
func (v *visitor) decide(t *testing.T, cid string) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, v.front+"/agentsurface/decide", strings.NewReader(url.Values{"id": {cid}, "decision": {"approve"}}.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Sec-Fetch-Site", "same-origin")
	req.Header.Set("X-Agentsurface", "1")
	res, err := v.hc.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != http.StatusNoContent {
		t.Fatalf("approve %s: %s", cid, res.Status)
	}
}

// disableOnce disables one device as an agent does: select it, call
// devices.disable under invocation id key, have the user approve, retry.
// It returns the retry's result and the approval it presented.
func (v *visitor) disableOnce(ctx context.Context, t *testing.T, device, key string) (surface.Result, string) {
	t.Helper()
	if res := v.call(ctx, t, "view:devices.table.selectRows", `{"ids":["`+device+`"]}`, agent.CallOptions{}); res.Status != surface.StatusOK {
		t.Fatalf("select %s: %+v", device, res.Error)
	}
	v.refreshTools(ctx, t, "domain:devices.disable")
	args := `{"reason":"replaced under warranty"}`
	res := v.call(ctx, t, "domain:devices.disable", args, agent.CallOptions{InvocationID: key})
	if res.Error == nil || res.Error.Code != surface.CodeConfirmationRequired {
		t.Fatalf("disable %s: want CONFIRMATION_REQUIRED, got %+v", device, res)
	}
	cid, _ := res.Error.Details["confirmationId"].(string)
	v.decide(t, cid)
	return v.call(ctx, t, "domain:devices.disable", args, agent.CallOptions{InvocationID: key, ConfirmationID: cid}), cid
}

// eventFeed reads an event stream into memory.
type eventFeed struct {
	mu   sync.Mutex
	text strings.Builder
	done chan struct{}
	err  error
}

func openFeed(ctx context.Context, t *testing.T, hc *http.Client, u string) *eventFeed {
	t.Helper()
	sctx, cancel := context.WithCancel(ctx)
	req, _ := http.NewRequestWithContext(sctx, http.MethodGet, u, nil)
	res, err := hc.Do(req)
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	if res.StatusCode != http.StatusOK || !strings.HasPrefix(res.Header.Get("Content-Type"), "text/event-stream") {
		cancel()
		res.Body.Close()
		t.Fatalf("events: %s %s", res.Status, res.Header.Get("Content-Type"))
	}
	f := &eventFeed{done: make(chan struct{})}
	go func() {
		defer close(f.done)
		defer res.Body.Close()
		buf := make([]byte, 32<<10)
		for {
			n, err := res.Body.Read(buf)
			f.mu.Lock()
			f.text.Write(buf[:n])
			if err != nil {
				f.err = err
			}
			f.mu.Unlock()
			if err != nil {
				return
			}
		}
	}()
	t.Cleanup(func() { cancel(); <-f.done })
	return f
}

// waitFor waits until the stream's text holds s.
func (f *eventFeed) waitFor(t *testing.T, s string, within time.Duration) {
	t.Helper()
	deadline := time.Now().Add(within)
	for time.Now().Before(deadline) {
		f.mu.Lock()
		ok := strings.Contains(f.text.String(), s)
		f.mu.Unlock()
		if ok {
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("the event stream did not show %q within %s", s, within)
}

// mark returns how much the stream has received, for since.
func (f *eventFeed) mark() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.text.Len()
}

// since returns what the stream received after mark m.
func (f *eventFeed) since(m int) string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.text.String()[m:]
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// Three `agentsurface demo --postgres` processes behind a round-robin
// balancer without stickiness: every request of a session reaches the
// replica that owns it, wherever it lands; an approval clicked in a real
// browser on one replica completes the agent's call held by another; a
// domain write on one replica shows on the pages of the others; a
// retried write reaching another replica executes once; a killed
// replica's sessions end with a clear answer within its lease while the
// others' keep working, and the audit table holds the settlement record
// of every call it answered before it was killed (the audit is durable:
// an answer leaves once its record is committed); the audit table holds
// every replica's records, none lost by a graceful stop.
//
// With AGENTSURFACE_TEST_ASYNC_AUDIT=1 the replicas run with
// --audit-durable=false, and the test reports the records the kill lost
// instead of failing on them: the figure durability is measured against.
func TestThreeReplicasBehindARoundRobinBalancer(t *testing.T) {
	dbURL := pg.Database(t)
	bin := buildCLI(t, fullBuild...)
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	secret := randomHex(32)
	async := os.Getenv("AGENTSURFACE_TEST_ASYNC_AUDIT") == "1"
	var audit []string
	if async {
		audit = []string{"--audit-durable=false"}
	}
	var reps []*replicaProc
	var bases []string
	for i := range 3 {
		p := startReplica(t, bin, dbURL, secret, fmt.Sprintf("replica-%d", i+1), audit...)
		reps, bases = append(reps, p), append(bases, p.base)
	}
	lb, err := lbtest.New(bases...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(lb.Close)
	front := httptest.NewServer(lb)
	t.Cleanup(front.Close) // after the visitors' streams have closed
	db, err := pgx.Connect(ctx, dbURL)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close(context.Background())

	// Every replica's session, reached only through the balancer: its
	// page's event stream, its agent's MCP session and calls, each
	// request landing on whichever replica is next.
	var vs []*visitor
	for _, p := range reps {
		v := visit(ctx, t, front.URL, p)
		for k := range 3 {
			if res := v.call(ctx, t, "view:devices.table.readState", `{}`, agent.CallOptions{}); res.Status != surface.StatusOK {
				t.Fatalf("readState on %s's session: %+v", p.name, res.Error)
			}
			// Actions are audited (observations are not): three records
			// per replica, named by the invocation ids sent.
			res := v.call(ctx, t, "view:devices.table.selectRows", fmt.Sprintf(`{"ids":["d%d"]}`, k+1), agent.CallOptions{InvocationID: fmt.Sprintf("%s-select-%d", p.name, k)})
			if res.Status != surface.StatusOK {
				t.Fatalf("selectRows on %s's session: %+v", p.name, res.Error)
			}
		}
		vs = append(vs, v)
	}
	if served := lb.Served(); slices.Contains(served, 0) {
		t.Fatalf("the balancer did not spread the requests: %v", served)
	}

	// A real browser shows replica-1's session while talking to
	// replica-2 only: every request of the page is forwarded. The agent
	// works through the balancer; the click on Approve reaches
	// replica-2, and the agent's retry on replica-1 runs.
	t.Run("approval through another replica", func(t *testing.T) {
		bctx := browsertest.Headless(t)
		bctx, bcancel := context.WithTimeout(bctx, 90*time.Second)
		defer bcancel()
		if err := chromedp.Do(bctx, chromedp.Navigate(reps[1].base+reps[0].join), chromedp.WaitReady(`body[data-live]`), chromedp.WaitVisible(`#table tr[data-id="d9"]`)); err != nil {
			t.Fatal(err)
		}
		mark := vs[2].feed.mark()
		played := make(chan error, 1)
		go func() {
			a := &agent.Scripted{TwoPhase: true} // no AwaitApproval: it polls, as any remote agent does
			played <- a.Run(bctx, "", vs[0].agent, nil)
		}()
		if err := chromedp.Do(bctx,
			chromedp.WaitVisible(`#agentsurface-approvals .approval button.approve`),
			chromedp.Click(`#agentsurface-approvals .approval button.approve`),
			chromedp.WaitVisible(`#table tr[data-id="d9"] .s-disabled`),
			chromedp.WaitVisible(`#table tr[data-id="d10"] .s-disabled`),
		); err != nil {
			t.Fatal(err)
		}
		if err := <-played; err != nil {
			t.Fatalf("the agent: %v", err)
		}
		// The page of replica-3's session heard of the write on
		// replica-1 and shows it.
		deadline := time.Now().Add(10 * time.Second)
		for !strings.Contains(vs[2].feed.since(mark), "hvac-ctrl-lon-03") {
			if time.Now().After(deadline) {
				t.Fatalf("replica-3's page was not refreshed after the write on replica-1")
			}
			time.Sleep(20 * time.Millisecond)
		}
	})

	// The same disable, retried under the same invocation id by the same
	// agent, its requests landing on whichever replica is next, executes
	// once: after someone brought the device back online, the retry
	// changes nothing and answers what the first call did. Another
	// session's agent (on another replica) choosing the same id has a key
	// of its own: its approved disable executes and is answered with what
	// it did.
	// AS-IDENT-001 and AS-IDENT-006 across replicas: the retry carries
	// approved evidence under the same id and runs once. AS-IDENT-004
	// across replicas: ids are the agent's own.
	t.Run("retried write executes once", func(t *testing.T) {
		args := `{"reason":"replaced under warranty"}`
		disableRecords := func() (status string, changes int) {
			t.Helper()
			if err := db.QueryRow(ctx, `SELECT status, (SELECT count(*) FROM audit_log WHERE device_id = 'd4' AND action = 'disable') FROM devices WHERE id = 'd4'`).Scan(&status, &changes); err != nil {
				t.Fatal(err)
			}
			return status, changes
		}
		first, cid := vs[1].disableOnce(ctx, t, "d4", "maintenance-7")
		if first.Status != surface.StatusOK || string(first.Output) != `{"disabled":1}` {
			t.Fatalf("first disable: %+v %s", first.Error, first.Output)
		}
		if _, err := db.Exec(ctx, `UPDATE devices SET status = 'online' WHERE id = 'd4'`); err != nil {
			t.Fatal(err)
		}
		for range 3 {
			retry := vs[1].call(ctx, t, "domain:devices.disable", args, agent.CallOptions{InvocationID: "maintenance-7", ConfirmationID: cid})
			if retry.Status != surface.StatusOK || string(retry.Output) != `{"disabled":1}` {
				t.Fatalf("retry: %+v %s", retry.Error, retry.Output)
			}
		}
		if status, changes := disableRecords(); status != "online" || changes != 1 {
			t.Fatalf("after the retries: d4 %s with %d disable records, want online and 1", status, changes)
		}
		other, _ := vs[2].disableOnce(ctx, t, "d4", "maintenance-7")
		if other.Status != surface.StatusOK || string(other.Output) != `{"disabled":1}` {
			t.Fatalf("another session's disable under the same id: %+v %s", other.Error, other.Output)
		}
		if status, changes := disableRecords(); status != "disabled" || changes != 2 {
			t.Fatalf("after another session's disable: d4 %s with %d disable records, want disabled and 2", status, changes)
		}
	})

	// Audit from every replica lands in one table.
	waitAudit := func(t *testing.T, name string, want int) {
		t.Helper()
		deadline := time.Now().Add(15 * time.Second)
		for {
			var n int
			if err := db.QueryRow(ctx, `SELECT count(*) FROM agentsurface_audit WHERE replica = $1 AND invocation_id LIKE $1 || '-select-%'`, name).Scan(&n); err != nil {
				t.Fatal(err)
			}
			if n >= want || time.Now().After(deadline) {
				if n < want {
					rows, _ := db.Query(ctx, `SELECT replica, coalesce(session, ''), type, coalesce(capability_id, ''), coalesce(invocation_id, '') FROM agentsurface_audit ORDER BY id DESC LIMIT 20`)
					recent, _ := pgx.CollectRows(rows, func(r pgx.CollectableRow) (string, error) {
						var a, b, c, d, e string
						err := r.Scan(&a, &b, &c, &d, &e)
						return strings.Join([]string{a, b, c, d, e}, " "), err
					})
					t.Fatalf("%s: %d audit records of its selections, want %d; the newest records:\n%s", name, n, want, strings.Join(recent, "\n"))
				}
				return
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	waitAudit(t, "replica-3", 3)

	// A crash under load: replica-3 dies while its session's agent calls
	// an audited action through the balancer. Every call it answered has
	// its settlement record. Within its lease its session answers as
	// ended, with a message, and the others keep working.
	t.Run("crash", func(t *testing.T) {
		var (
			mu    sync.Mutex
			acked []string // invocation ids of the calls answered ok
		)
		stop := make(chan struct{})
		var wg sync.WaitGroup
		for w := range 4 {
			wg.Go(func() {
				for i := 0; ; i++ {
					select {
					case <-stop:
						return
					default:
					}
					id := fmt.Sprintf("replica-3-load-%d-%d", w, i)
					res, err := vs[2].agent.CallWith(ctx, vs[2].tools["view:devices.table.selectRows"].Name,
						json.RawMessage(fmt.Sprintf(`{"ids":["d%d"]}`, 1+i%8)), agent.CallOptions{InvocationID: id})
					if err == nil && res.Status == surface.StatusOK {
						mu.Lock()
						acked = append(acked, id)
						mu.Unlock()
					}
				}
			})
		}
		count := func() int { mu.Lock(); defer mu.Unlock(); return len(acked) }
		loadBy := time.Now().Add(60 * time.Second)
		for count() < 200 {
			if time.Now().After(loadBy) {
				t.Fatalf("only %d calls answered under load in a minute", count())
			}
			time.Sleep(10 * time.Millisecond)
		}
		reps[2].kill()
		killed := time.Now()
		close(stop)
		wg.Wait()
		rows, err := db.Query(ctx, `SELECT invocation_id FROM agentsurface_audit WHERE replica = 'replica-3'
			AND type = 'invocation-settled' AND status = 'ok' AND invocation_id = ANY($1)`, acked)
		if err != nil {
			t.Fatal(err)
		}
		stored, err := pgx.CollectRows(rows, pgx.RowTo[string])
		if err != nil {
			t.Fatal(err)
		}
		var lost []string
		for _, id := range acked {
			if !slices.Contains(stored, id) {
				lost = append(lost, id)
			}
		}
		mode := "durable"
		if async {
			mode = "asynchronous"
		}
		t.Logf("%s audit: %d calls answered before the kill, %d of their settlement records lost %v", mode, len(acked), len(lost), lost)
		if len(lost) > 0 && !async {
			t.Errorf("the kill lost the settlement records of %d answered calls: %v", len(lost), lost)
		}

		deadline := killed.Add(testLease + 3*time.Second)
		for {
			// Until the lease runs out: 503, the owner cannot be reached
			// (the client may try again), or 502 for a request the owner
			// was reading when it died. Then: 401, the session ended.
			_, err := vs[2].agent.List(ctx)
			if err != nil && strings.Contains(err.Error(), "Unauthorized") {
				t.Logf("replica-3's session ended %s after the crash: %v", time.Since(killed).Round(time.Millisecond), err)
				break
			}
			if err != nil && !strings.Contains(err.Error(), "Service Unavailable") && !strings.Contains(err.Error(), "Bad Gateway") {
				t.Fatalf("while the lease runs: %v, want 503 or 502", err)
			}
			if time.Now().After(deadline) {
				t.Fatalf("replica-3's session still answers %s after the crash (lease %s)", time.Since(killed), testLease)
			}
			time.Sleep(100 * time.Millisecond)
		}
		// A new MCP client with the dead session's token gets 401.
		if _, err := agent.Dial(ctx, front.URL+"/mcp", &agent.DialOptions{Token: reps[2].token}); !errors.Is(err, agent.ErrUnauthorized) {
			t.Fatalf("dialing the dead replica's session: %v, want 401", err)
		}
		for i, v := range vs[:2] {
			for range 3 {
				if res := v.call(ctx, t, "view:devices.table.readState", `{}`, agent.CallOptions{}); res.Status != surface.StatusOK {
					t.Fatalf("replica-%d's session after the crash: %+v", i+1, res.Error)
				}
			}
		}
	})

	// A graceful stop writes every queued record.
	reps[0].stop(t)
	reps[1].stop(t)
	for _, p := range reps[:2] {
		var n int
		if err := db.QueryRow(ctx, `SELECT count(*) FROM agentsurface_audit WHERE replica = $1 AND invocation_id LIKE $1 || '-select-%' AND type = 'invocation-settled'`, p.name).Scan(&n); err != nil {
			t.Fatal(err)
		}
		if n != 3 {
			t.Fatalf("%s: %d settled records of its 3 selections after a graceful stop", p.name, n)
		}
	}
	var replicas []string
	rows, err := db.Query(ctx, `SELECT DISTINCT replica FROM agentsurface_audit ORDER BY 1`)
	if err != nil {
		t.Fatal(err)
	}
	replicas, err = pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(replicas, []string{"replica-1", "replica-2", "replica-3"}) {
		t.Fatalf("replicas in the audit table: %v", replicas)
	}
}

// demo --postgres alone: the scripted task on PostgreSQL, one replica
// with a secret of its own; with --replica-addr and no shared secret it
// refuses to start, saying what to set.
func TestDemoScriptedOnPostgres(t *testing.T) {
	dbURL := pg.Database(t)
	bin := buildCLI(t, fullBuild...)
	t.Setenv(envReplicaSecret, "")
	code, out, errOut := runCLI(t, bin, nil, "demo", "--scripted", "--approve", "--addr", "127.0.0.1:0", "--postgres", dbURL, "--replica-name", "solo")
	if code != exitOK || !strings.Contains(out, "OK: every step got the expected outcome") {
		t.Fatalf("%d\n%s\n%s", code, out, errOut)
	}
	ctx := context.Background()
	db, err := pgx.Connect(ctx, dbURL)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close(ctx)
	var disabled, audited int
	if err := db.QueryRow(ctx, `SELECT (SELECT count(*) FROM devices WHERE status = 'disabled'),
		(SELECT count(*) FROM agentsurface_audit WHERE replica = 'solo' AND capability_id = 'domain:devices.disable' AND type = 'invocation-settled')`).Scan(&disabled, &audited); err != nil {
		t.Fatal(err)
	}
	if disabled != 3 || audited < 1 { // d11 from the seed, d9 and d10 by the task
		t.Fatalf("after the task: %d disabled devices, %d settled disable records", disabled, audited)
	}
	code, _, errOut = runCLI(t, bin, nil, "demo", "--addr", "127.0.0.1:0", "--postgres", dbURL, "--replica-addr", "http://127.0.0.1:1")
	if code != exitFail || !strings.Contains(errOut, envReplicaSecret) {
		t.Fatalf("--replica-addr without a secret: %d %q", code, errOut)
	}
}
