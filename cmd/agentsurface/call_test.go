package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/agentsurface/agentsurface/examples/devices/agent"
	"github.com/agentsurface/agentsurface/surface"
)

// envelope decodes the result envelope call printed.
func envelope(t *testing.T, out string) surface.Result {
	t.Helper()
	var res surface.Result
	if err := json.Unmarshal([]byte(out), &res); err != nil {
		t.Fatalf("not an envelope: %v\n%s", err, out)
	}
	return res
}

// The sequence a new user types: look at the tools, select, change the
// selection, disable. Each call is its own MCP client; the endpoint
// resolves a client's calls against the tools it was last shown, which
// for a one-shot client that never listed was whatever another client
// listed last (here: inspect's, before the selection made disable
// available again). call lists first, so disable is judged against the
// surface of now and asks for the user's approval. (Issue 37 item 3.)
func TestCallSelectThenDisable(t *testing.T) {
	url, s := consoleServer(t)
	tok := "--token=" + s.Token()
	if code, _, errOut := cli(t, "inspect", url, tok); code != exitOK {
		t.Fatalf("inspect: %s", errOut)
	}
	for _, ids := range []string{`["d8"]`, `[]`, `["d9"]`} {
		if code, out, errOut := cli(t, "call", url, "view_devices__table__selectRows", `{"ids":`+ids+`}`, tok); code != exitOK {
			t.Fatalf("select %s: %s %s", ids, out, errOut)
		}
	}
	code, out, errOut := cli(t, "call", url, "domain_devices__disable", `{"reason":"lobby camera broken"}`, tok)
	res := envelope(t, out)
	if code != exitFail || res.Error == nil || res.Error.Code != surface.CodeConfirmationRequired {
		t.Fatalf("disable after the selection: %d %+v\n%s", code, res.Error, errOut)
	}
	if p := s.Pending(); len(p) != 1 || !strings.Contains(p[0].Summary, "badge-reader-lon-02") {
		t.Fatalf("the user is asked %+v, want to disable d9", p)
	}
}

// hookProxy is a reverse proxy in front of an MCP endpoint that runs a
// hook once, just before it forwards the first tools/call whose body
// contains match: the surface changes between a client's listing and its
// call. It counts the tools/list and tools/call requests it forwards.
type hookProxy struct {
	match string
	hook  func()

	mu           sync.Mutex
	fired        bool
	lists, calls int
}

func (p *hookProxy) serve(t *testing.T, target string) string {
	t.Helper()
	u, err := url.Parse(target)
	if err != nil {
		t.Fatal(err)
	}
	rp := httputil.NewSingleHostReverseProxy(&url.URL{Scheme: u.Scheme, Host: u.Host})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		r.Body = io.NopCloser(bytes.NewReader(body))
		p.mu.Lock()
		switch {
		case bytes.Contains(body, []byte(`"method":"tools/list"`)):
			p.lists++
		case bytes.Contains(body, []byte(`"method":"tools/call"`)):
			p.calls++
		}
		fire := !p.fired && bytes.Contains(body, []byte(`"method":"tools/call"`)) && bytes.Contains(body, []byte(p.match))
		if fire {
			p.fired = true
		}
		p.mu.Unlock()
		if fire {
			p.hook()
		}
		rp.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	return srv.URL + u.Path
}

func (p *hookProxy) counts() (lists, calls int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.lists, p.calls
}

// by calls a tool by name, as a client that does not list first; its
// result must be ok.
func by(t *testing.T, endpoint, token, tool, args string) {
	t.Helper()
	m, err := agent.Dial(context.Background(), endpoint, &agent.DialOptions{Token: token})
	if err != nil {
		t.Error(err)
		return
	}
	defer m.Close()
	res, err := m.Call(context.Background(), tool, json.RawMessage(args))
	if err != nil || res.Status != surface.StatusOK {
		t.Errorf("%s: %+v %v", tool, res.Error, err)
	}
}

// The surface changes between call's listing and its call (the page
// opens a detail panel): disable answers STALE_CAPABILITY with retry
// after-refresh, and call lists again and calls once more, as the result
// says, and prints the final answer. When the tool itself went away
// meanwhile (the detail panel closed), call says so plainly, and so it
// does for a tool that was not offered at all. (Issue 37 item 3.)
func TestCallRefreshesAndRetriesOnce(t *testing.T) {
	endpoint, s := consoleServer(t)
	tok := "--token=" + s.Token()
	if code, out, _ := cli(t, "call", endpoint, "view_devices__table__selectRows", `{"ids":["d4"]}`, tok); code != exitOK {
		t.Fatalf("select: %s", out)
	}

	p := &hookProxy{match: "domain_devices__disable", hook: func() {
		by(t, endpoint, s.Token(), "view_devices__table__openDevice", `{"id":"d1"}`)
	}}
	via := p.serve(t, endpoint)
	code, out, errOut := cli(t, "call", via, "domain_devices__disable", `{"reason":"lobby camera broken"}`, tok)
	if out == "" {
		t.Fatalf("disable with the surface changed under it: %d %s", code, errOut)
	}
	res := envelope(t, out)
	if code != exitFail || res.Error == nil || res.Error.Code != surface.CodeConfirmationRequired {
		t.Fatalf("disable with the surface changed under it: %d %+v\n%s", code, res.Error, errOut)
	}
	if lists, calls := p.counts(); lists != 2 || calls != 2 {
		t.Fatalf("call made %d listings and %d calls, want 2 and 2 (list, STALE_CAPABILITY, list, retry)", lists, calls)
	}
	var stale int
	for _, e := range s.Activity() {
		if e.Code == surface.CodeStaleCapability {
			stale++
		}
	}
	if stale != 1 {
		t.Fatalf("%d STALE_CAPABILITY calls in the Activity, want the one retried", stale)
	}

	// The detail panel is open: its readDevice is offered. It closes
	// between the listing and the call: the tool is gone.
	p = &hookProxy{match: "view_devices__detail__readDevice", hook: func() {
		by(t, endpoint, s.Token(), "view_devices__detail__close", `{}`)
	}}
	via = p.serve(t, endpoint)
	code, out, errOut = cli(t, "call", via, "view_devices__detail__readDevice", `{}`, tok)
	if code != exitFail || out != "" || !strings.Contains(errOut, "the tool view_devices__detail__readDevice is gone") ||
		!strings.Contains(errOut, "agentsurface inspect") || strings.Count(errOut, "\n") != 1 {
		t.Fatalf("a tool gone after the refresh: %d %q %q", code, out, errOut)
	}
	if lists, calls := p.counts(); lists != 2 || calls != 1 {
		t.Fatalf("call made %d listings and %d calls, want 2 and 1", lists, calls)
	}
	// Called again: it is not offered at all; nothing is called.
	code, out, errOut = cli(t, "call", via, "view_devices__detail__readDevice", `{}`, tok)
	if code != exitFail || out != "" || !strings.Contains(errOut, "offers no tool view_devices__detail__readDevice") {
		t.Fatalf("a tool not offered: %d %q %q", code, out, errOut)
	}
	if _, calls := p.counts(); calls != 1 {
		t.Fatalf("a tool not offered was called")
	}
}

// call --wait asks again and again while the user has not decided; the
// Activity card shows the waiting call once, not a line per poll, and
// then its outcome. (Issue 37 item 8.)
func TestCallWaitAddsOneActivityLine(t *testing.T) {
	endpoint, s := consoleServer(t)
	tok := "--token=" + s.Token()
	if code, out, _ := cli(t, "call", endpoint, "view_devices__table__selectRows", `{"ids":["d4"]}`, tok); code != exitOK {
		t.Fatalf("select: %s", out)
	}
	polls := make(chan struct{}, 100)
	unsub := s.Registry().Subscribe(func(e surface.Event) {
		if st, ok := e.(surface.InvocationSettled); ok && st.Code == surface.CodeConfirmationRequired {
			select {
			case polls <- struct{}{}:
			default:
			}
		}
	})
	defer unsub()
	type result struct {
		code     int
		out, err string
	}
	done := make(chan result, 1)
	go func() {
		code, out, errOut := cli(t, "call", endpoint, "domain_devices__disable", `{"reason":"lobby camera broken"}`, tok, "--wait", "--poll", "10ms")
		done <- result{code, out, errOut}
	}()
	deadline := time.After(60 * time.Second)
	for range 6 { // the first ask and five polls
		select {
		case <-polls:
		case r := <-done:
			t.Fatalf("call returned while waiting: %+v", r)
		case <-deadline:
			t.Fatal("call --wait did not ask again")
		}
	}
	p := awaitPending(t, s)
	if _, ok := s.Decide(p.ConfirmationID, true, "olivia (test)"); !ok {
		t.Fatal("decide")
	}
	r := <-done
	if r.code != exitOK || !strings.Contains(r.out, `"disabled": 1`) {
		t.Fatalf("--wait, approved: %d %s %s", r.code, r.out, r.err)
	}
	var asked, settled []string
	for _, e := range s.Activity() {
		if e.Type != surface.AuditInvocationSettled || e.CapabilityID != "domain:devices.disable" {
			continue
		}
		if e.Code == surface.CodeConfirmationRequired {
			asked = append(asked, e.InvocationID)
		} else {
			settled = append(settled, string(e.Status))
		}
	}
	if len(asked) != 1 || len(settled) != 1 || settled[0] != "ok" {
		t.Fatalf("the Activity shows the waiting call %d times (%v) and its outcome %v; want once, then ok", len(asked), asked, settled)
	}
}

// call --wait stopped by SIGTERM says it was interrupted (and that the
// approval stays pending), not that --timeout passed; --timeout passing
// says so. (Issue 37 item 8.)
func TestCallWaitInterruptedOrTimedOut(t *testing.T) {
	endpoint, s := consoleServer(t)
	tok := "--token=" + s.Token()
	if code, out, _ := cli(t, "call", endpoint, "view_devices__table__selectRows", `{"ids":["d4"]}`, tok); code != exitOK {
		t.Fatalf("select: %s", out)
	}
	bin := buildCLI(t)
	cmd := exec.Command(bin, "call", endpoint, "domain_devices__disable", `{"reason":"lobby camera broken"}`, tok, "--wait", "--poll", "50ms")
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stdout bytes.Buffer
	cmd.Stdout = &stdout
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	lines := make(chan string, 16)
	go func() {
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
	}()
	var errOut []string
	deadline := time.After(60 * time.Second)
	for waiting := false; !waiting; {
		select {
		case l, ok := <-lines:
			if !ok {
				t.Fatalf("call exited before waiting: %v", errOut)
			}
			errOut = append(errOut, l)
			waiting = strings.Contains(l, "waiting for the user's decision")
		case <-deadline:
			_ = cmd.Process.Kill()
			t.Fatalf("call never said it waits: %v", errOut)
		}
	}
	p := awaitPending(t, s)
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	for l := range lines {
		errOut = append(errOut, l)
	}
	err = cmd.Wait()
	msg := strings.Join(errOut, "\n")
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != exitFail {
		t.Fatalf("exit: %v, want status %d\n%s", err, exitFail, msg)
	}
	if !strings.Contains(msg, "interrupted while waiting for the decision on "+p.ConfirmationID) || !strings.Contains(msg, "terminated") ||
		strings.Contains(msg, "within --timeout") || !strings.Contains(msg, "--confirmation-id "+p.ConfirmationID) {
		t.Fatalf("stderr after SIGTERM:\n%s", msg)
	}
	if stdout.Len() != 0 {
		t.Fatalf("stdout after SIGTERM: %s", stdout.String())
	}
	if pending := s.Pending(); len(pending) != 1 || pending[0].ConfirmationID != p.ConfirmationID {
		t.Fatalf("the approval request after the interruption: %+v, want still pending", pending)
	}

	// Nobody decides within --timeout.
	code, out, msg2 := cli(t, "call", endpoint, "domain_devices__disable", `{"reason":"lobby camera broken"}`, tok, "--wait", "--poll", "50ms", "--timeout", "2s")
	if code != exitFail || out != "" || !strings.Contains(msg2, "--timeout (2s)") || strings.Contains(msg2, "interrupted") {
		t.Fatalf("--timeout: %d %q %q", code, out, msg2)
	}
}
