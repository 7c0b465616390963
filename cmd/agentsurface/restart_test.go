package main

import (
	"bufio"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/cookiejar"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/agentsurface/agentsurface/examples/devices/agent"
	"github.com/agentsurface/agentsurface/internal/browsertest"
)

// demoRun is an interactive demo running in this process, as `run` does
// for the command line.
type demoRun struct {
	out    string // what it printed, up to its Metrics line
	base   string // http://127.0.0.1:port
	join   string // the printed join link, "" for a kept session
	token  string // the printed token, "" for a kept session
	errOut *lockedBuffer
	stop   func() int // cancels it as SIGTERM does, and returns its exit status
}

// startDemo runs `demo args…` in this process until the test ends (or
// stop), and reads what it prints about its session.
func startDemo(t *testing.T, args ...string) *demoRun {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	pr, pw := io.Pipe()
	d := &demoRun{errOut: &lockedBuffer{}}
	exited := make(chan int, 1)
	go func() {
		exited <- run(ctx, append([]string{"demo", "--addr", "127.0.0.1:0"}, args...), pw, d.errOut)
		pw.Close()
	}()
	code, stopped := 0, false
	d.stop = func() int {
		if !stopped {
			stopped = true
			cancel()
			code = <-exited
		}
		return code
	}
	t.Cleanup(func() { d.stop() })
	d.read(t, pr)
	return d
}

// startDemoBin is startDemo with the binary bin (built with build tags
// that this test binary lacks) as a process of its own; stop sends it
// SIGTERM.
func startDemoBin(t *testing.T, bin string, args ...string) *demoRun {
	t.Helper()
	d := &demoRun{errOut: &lockedBuffer{}}
	cmd := exec.Command(bin, append([]string{"demo", "--addr", "127.0.0.1:0"}, args...)...)
	cmd.Stderr = d.errOut
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	code, stopped := 0, false
	d.stop = func() int {
		if !stopped {
			stopped = true
			_ = cmd.Process.Signal(syscall.SIGTERM)
			select {
			case <-exited:
			case <-time.After(30 * time.Second): // a failure bound
				_ = cmd.Process.Kill()
				<-exited
			}
			code = cmd.ProcessState.ExitCode()
		}
		return code
	}
	t.Cleanup(func() { d.stop() })
	d.read(t, stdout)
	return d
}

// read reads what the demo prints on r about its session, up to its
// Metrics line, and then discards the rest.
func (d *demoRun) read(t *testing.T, r io.Reader) {
	t.Helper()
	sc := bufio.NewScanner(r)
	var out strings.Builder
	for sc.Scan() {
		line := sc.Text()
		out.WriteString(line + "\n")
		if u, ok := strings.CutPrefix(line, "Devices console: "); ok {
			u, _, _ = strings.Cut(u, " ")
			if i := strings.Index(u, "/agentsurface/join/"); i >= 0 {
				d.base, d.join = u[:i], u[i:]
			} else {
				d.base = strings.TrimSuffix(u, "/")
			}
		}
		if _, tok, ok := strings.Cut(line, `--header "Authorization: Bearer `); ok && d.token == "" {
			d.token = strings.TrimSuffix(tok, `"`)
		}
		if strings.HasPrefix(line, "Metrics:") {
			break
		}
	}
	go func() { _, _ = io.Copy(io.Discard, r) }()
	d.out = out.String()
	if d.base == "" {
		t.Fatalf("the demo printed no console link:\n%s\n%s", d.out, d.errOut.String())
	}
}

// tools lists what an agent holding token sees through the demo's MCP
// endpoint; an error when the token is refused.
func (d *demoRun) tools(ctx context.Context, token string) ([]string, error) {
	m, err := agent.Dial(ctx, d.base+"/mcp", &agent.DialOptions{Token: token})
	if err != nil {
		return nil, err
	}
	defer m.Close()
	tools, err := m.List(ctx)
	var ids []string
	for _, tool := range tools {
		ids = append(ids, tool.CapabilityID)
	}
	return ids, err
}

// The printed session is kept across restarts of the same database,
// SQLite or PostgreSQL: the next start makes it again under the hashes
// the database kept, says that the earlier token still works instead of
// printing one, and the MCP token, the join link and the cookie of a page
// of the first start reach it again; nothing in the database or the logs
// is a credential. --new-token makes a new one, and the old token, link
// and page stop working. (Issue 37 item 4.)
func TestDemoKeepsItsSessionAcrossRestarts(t *testing.T) {
	for _, backend := range []string{"sqlite", "postgres"} {
		t.Run(backend, func(t *testing.T) {
			var args []string
			startDemo := startDemo
			if backend == "sqlite" {
				args = []string{"--db", filepath.Join(t.TempDir(), "d.db")}
			} else {
				// This test binary is the default build: --postgres
				// needs one with the postgres tag.
				bin := buildCLI(t, fullBuild...)
				startDemo = func(t *testing.T, args ...string) *demoRun { return startDemoBin(t, bin, args...) }
				t.Setenv(envReplicaSecret, "")
				args = []string{"--postgres", pg.Database(t), "--replica-name", "solo", "--drain", "0s"}
			}
			ctx := context.Background()
			first := startDemo(t, args...)
			if first.join == "" || first.token == "" {
				t.Fatalf("the first start printed no link or token:\n%s", first.out)
			}
			// A page of the first start: its cookie, its views mounted.
			jar, _ := cookiejar.New(nil)
			hc := &http.Client{Jar: jar}
			page := func(d *demoRun) (int, string) {
				t.Helper()
				res, err := hc.Get(d.base + "/")
				if err != nil {
					t.Fatal(err)
				}
				defer res.Body.Close()
				b, _ := io.ReadAll(res.Body)
				return res.StatusCode, string(b)
			}
			res, err := hc.Get(first.base + first.join)
			if err != nil || res.StatusCode != http.StatusOK {
				t.Fatalf("join: %v %v", err, res)
			}
			res.Body.Close()
			_, html := page(first)
			id := pageSession(t, html)
			if code := first.stop(); code != exitOK {
				t.Fatalf("the first start exited %d: %s", code, first.errOut.String())
			}

			second := startDemo(t, args...)
			if second.token != "" || second.join != "" || strings.Contains(second.out, "Bearer") ||
				!strings.Contains(second.out, "still works") || !strings.Contains(second.out, "--new-token") || !strings.Contains(second.out, id) {
				t.Fatalf("the second start's output:\n%s", second.out)
			}
			// The page's cookie reaches the same session (the cookie jar
			// sends it to any port of the host).
			if code, html := page(second); code != http.StatusOK || pageSession(t, html) != id {
				t.Fatalf("the page after the restart: %d, session %q, want %q", code, pageSession(t, html), id)
			}
			// The agent's token: while that page shows the session, its
			// tools.
			sctx, closeTab := context.WithCancel(ctx)
			defer closeTab()
			req, _ := http.NewRequestWithContext(sctx, http.MethodGet, second.base+consoleEvents, nil)
			tab, err := hc.Do(req)
			if err != nil || tab.StatusCode != http.StatusOK {
				t.Fatalf("the page's event stream after the restart: %v %v", err, tab)
			}
			defer tab.Body.Close()
			if tools, err := second.tools(ctx, first.token); err != nil || !slices.Contains(tools, "view:devices.table.readState") {
				t.Fatalf("the first start's token after the restart: %v %v", tools, err)
			}
			// The join link printed by the first start.
			other := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
			res, err = other.Get(second.base + first.join)
			if err != nil {
				t.Fatal(err)
			}
			res.Body.Close()
			if res.StatusCode != http.StatusSeeOther {
				t.Fatalf("the first start's link after the restart: %s", res.Status)
			}
			// No credential in the logs.
			for _, secret := range []string{first.token, strings.TrimPrefix(first.join, "/agentsurface/join/")} {
				if strings.Contains(first.errOut.String()+second.errOut.String(), secret) {
					t.Fatal("a credential was logged")
				}
			}
			closeTab()
			if code := second.stop(); code != exitOK {
				t.Fatalf("the second start exited %d: %s", code, second.errOut.String())
			}

			// --new-token: a new session, printed; the old one is gone.
			third := startDemo(t, append(args, "--new-token")...)
			if third.token == "" || third.token == first.token || third.join == "" {
				t.Fatalf("--new-token printed:\n%s", third.out)
			}
			if _, err := third.tools(ctx, first.token); !errors.Is(err, agent.ErrUnauthorized) {
				t.Fatalf("the old token after --new-token: %v", err)
			}
			if code, html := page(third); code != http.StatusOK || pageSession(t, html) == id {
				t.Fatalf("the old page after --new-token: %d, session %q", code, pageSession(t, html))
			}
			if _, err := third.tools(ctx, third.token); err != nil {
				t.Fatalf("the new token: %v", err)
			}
			third.stop()
			// And the next start keeps the new one.
			fourth := startDemo(t, args...)
			if _, err := fourth.tools(ctx, third.token); err != nil || fourth.token != "" {
				t.Fatalf("the new token after another restart: %v (printed %q)", err, fourth.token)
			}
		})
	}
}

// pageSession returns the public session id the console's page shows.
func pageSession(t *testing.T, html string) string {
	t.Helper()
	_, rest, ok := strings.Cut(html, "session <code>")
	if !ok {
		t.Fatalf("no session id on the page: %.300s", html)
	}
	id, _, _ := strings.Cut(rest, "<")
	return id
}

// demoProc is `agentsurface demo` running as a process of its own.
type demoProc struct {
	cmd    *exec.Cmd
	base   string
	out    string // what it printed, up to its Metrics line
	stderr lockedBuffer
	exited chan struct{}
	err    error
}

// startDemoProc starts bin demo args… and waits for what it prints.
func startDemoProc(t *testing.T, bin string, args ...string) *demoProc {
	t.Helper()
	p := &demoProc{cmd: exec.Command(bin, append([]string{"demo"}, args...)...), exited: make(chan struct{})}
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
		_ = p.cmd.Process.Kill()
		<-p.exited
	})
	lines := make(chan string)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
	}()
	var out strings.Builder
	timeout := time.After(60 * time.Second) // a failure bound
	for {
		select {
		case line, ok := <-lines:
			if !ok {
				t.Fatalf("the demo exited: %v\n%s\n%s", p.err, out.String(), p.stderr.String())
			}
			out.WriteString(line + "\n")
			if u, ok := strings.CutPrefix(line, "Devices console: "); ok {
				u, _, _ = strings.Cut(u, " ")
				if i := strings.Index(u, "/agentsurface/join/"); i >= 0 {
					u = u[:i]
				}
				p.base = strings.TrimSuffix(u, "/")
			}
			if strings.HasPrefix(line, "Metrics:") {
				p.out = out.String()
				go func() {
					for range lines {
					}
				}()
				return p
			}
		case <-timeout:
			t.Fatalf("the demo printed nothing within a minute:\n%s", p.stderr.String())
		}
	}
}

// status GETs path and returns the status code, 0 when nothing answers.
func status(url string) int {
	res, err := http.Get(url)
	if err != nil {
		return 0
	}
	res.Body.Close()
	return res.StatusCode
}

// On SIGTERM the demo says it is not ready (/readyz 503) while it still
// serves (/healthz 200, its pages) for --drain, then stops; a load
// balancer polling /readyz stops sending it requests before it is gone.
// Before the signal both probes answer 200. (Issue 37 item 5.)
func TestDemoDrainsBeforeStopping(t *testing.T) {
	bin := buildCLI(t)
	p := startDemoProc(t, bin, "--addr", "127.0.0.1:0", "--db", filepath.Join(t.TempDir(), "d.db"), "--drain", "3s")
	if h, r := status(p.base+"/healthz"), status(p.base+"/readyz"); h != http.StatusOK || r != http.StatusOK {
		t.Fatalf("before the signal: healthz %d, readyz %d", h, r)
	}
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(30 * time.Second) // a failure bound
	for status(p.base+"/readyz") != http.StatusServiceUnavailable {
		if time.Now().After(deadline) {
			t.Fatalf("/readyz never said not ready:\n%s", p.stderr.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
	drained := time.Now()
	if h, page := status(p.base+"/healthz"), status(p.base+"/"); h != http.StatusOK || page != http.StatusOK {
		t.Fatalf("while draining: healthz %d, the page %d", h, page)
	}
	select {
	case <-p.exited:
	case <-time.After(30 * time.Second): // a failure bound
		t.Fatalf("the demo did not stop after draining:\n%s", p.stderr.String())
	}
	if p.err != nil {
		t.Fatalf("the demo exited: %v\n%s", p.err, p.stderr.String())
	}
	if took := time.Since(drained); took > 30*time.Second {
		t.Fatalf("it stopped %v after it began to drain", took)
	}
	if !strings.Contains(p.stderr.String(), "draining") {
		t.Fatalf("no log line says it drains:\n%s", p.stderr.String())
	}
}

// A page left open in a real browser while the demo restarts on the same
// database: when the demo stops, the page says it is reconnecting (and
// stays on its own URL, never the browser's error page); when the demo
// is back, the page is live again on the same session, which the agent's
// token of the first start still reaches: what the agent selects, the
// page shows. (Issue 37 item 4.)
func TestBrowserPageSurvivesDemoRestart(t *testing.T) {
	bin := buildCLI(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String() // the same address both times: the page's origin
	ln.Close()
	args := []string{"--addr", addr, "--db", filepath.Join(t.TempDir(), "d.db")}
	first := startDemoProc(t, bin, args...)
	var join, token string
	for line := range strings.Lines(first.out) {
		if u, ok := strings.CutPrefix(line, "Devices console: "); ok {
			join = strings.TrimSpace(u)
		}
		if _, tok, ok := strings.Cut(line, `--header "Authorization: Bearer `); ok && token == "" {
			token, _, _ = strings.Cut(tok, `"`)
		}
	}
	browser := browsertest.Headless(t)
	ctx, cancel := context.WithTimeout(browser, 3*time.Minute) // a failure bound
	defer cancel()
	if err := chromedp.Do(ctx, chromedp.Navigate(join), chromedp.WaitReady(`body[data-live]`), chromedp.WaitVisible(`#table tr[data-id="d4"]`)); err != nil {
		t.Fatal(err)
	}
	sessionOf := `(document.body.innerHTML.match(/session <code>(s_[^<]+)<\/code>/) || [])[1] || ''`
	id, err := chromedp.Run(ctx, chromedp.Evaluate[string](sessionOf))
	if err != nil || id == "" {
		t.Fatalf("the page's session: %q %v", id, err)
	}

	// The demo stops: the page says it reconnects, and stays.
	if err := first.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	<-first.exited
	if _, err := chromedp.Run(ctx, chromedp.Poll[bool](`(() => { const b = document.getElementById('agentsurface-banner'); return !b.hidden && /[Rr]econnecting/.test(b.textContent); })()`)); err != nil {
		t.Fatalf("no reconnecting banner: %v", err)
	}
	if href, _ := chromedp.Run(ctx, chromedp.Evaluate[string](`location.href`)); !strings.HasPrefix(href, "http://"+addr) {
		t.Fatalf("the page left for %q", href)
	}

	// It comes back: the same session, live, which the agent's token of
	// the first start reaches.
	second := startDemoProc(t, bin, args...)
	if strings.Contains(second.out, "Bearer") {
		t.Fatalf("the second start printed a token:\n%s", second.out)
	}
	deadline := time.Now().Add(90 * time.Second) // a failure bound
	for {
		// A page being reloaded has no body to evaluate in: try again.
		now, _ := chromedp.Run(ctx, chromedp.Evaluate[string](sessionOf))
		live, _ := chromedp.Run(ctx, chromedp.Evaluate[bool](`document.body.dataset.live === 'true' && document.getElementById('agentsurface-banner').hidden`))
		if live && now == id {
			break
		}
		if live && now != "" && now != id {
			t.Fatalf("the page came back on another session %q, not %q", now, id)
		}
		if time.Now().After(deadline) {
			t.Fatalf("the page did not come back: session %q, live %v\n%s", now, live, second.stderr.String())
		}
		time.Sleep(100 * time.Millisecond)
	}
	m, err := agent.Dial(ctx, second.base+"/mcp", &agent.DialOptions{Token: token})
	if err != nil {
		t.Fatalf("the first start's token: %v", err)
	}
	defer m.Close()
	tools, err := m.List(ctx)
	if err != nil {
		t.Fatal(err)
	}
	i := slices.IndexFunc(tools, func(tool agent.Tool) bool { return tool.CapabilityID == "view:devices.table.selectRows" })
	if i < 0 {
		t.Fatalf("no selectRows among %v", tools)
	}
	if res, err := m.Call(ctx, tools[i].Name, []byte(`{"ids":["d4"]}`)); err != nil || agent.Outcome(res) != "ok" {
		t.Fatalf("selectRows: %v %+v", err, res)
	}
	if err := chromedp.Do(ctx, chromedp.WaitVisible(`#table tr.selected[data-id="d4"]`)); err != nil {
		t.Fatalf("the page does not show the agent's selection: %v", err)
	}
	if err := second.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	<-second.exited
}
