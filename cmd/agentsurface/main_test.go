package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/http/cookiejar"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentsurface/agentsurface/examples/devices/agent"
	"github.com/agentsurface/agentsurface/examples/devices/console"
	"github.com/agentsurface/agentsurface/examples/devices/domain"
	"github.com/agentsurface/agentsurface/internal/pgtest"
	modversion "github.com/agentsurface/agentsurface/internal/version"
	"github.com/agentsurface/agentsurface/surface"
)

// consoleEvents is the event stream of the console's page, as its script
// opens it.
const consoleEvents = "/agentsurface/events?f=header,table,activity,agentsurface-approvals,detail,agent,surface"

// pg is the PostgreSQL server of this package's tests, started by the
// first test that needs one.
var pg pgtest.Lazy

func TestMain(m *testing.M) { pgtest.Main(m, &pg) }

// cli runs the command line and returns its exit status and outputs.
func cli(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	var out, errOut lockedBuffer
	code := run(context.Background(), args, &out, &errOut)
	return code, out.String(), errOut.String()
}

// lockedBuffer is a bytes.Buffer safe for concurrent use: the go-sdk
// logs a tools/list_changed notification it debounced from a timer's
// goroutine, which may run after the demo returned.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

func TestVersion(t *testing.T) {
	code, out, _ := cli(t, "version")
	if code != exitOK || !strings.HasPrefix(out, "agentsurface "+modversion.Module()+" ") || !strings.Contains(out, "go1.") {
		t.Fatalf("%d %q", code, out)
	}
	for _, flag := range []string{"--version", "-version"} {
		if code, same, _ := cli(t, flag); code != exitOK || same != out {
			t.Errorf("%s: %d %q, want what version prints", flag, code, same)
		}
	}
}

// Every command has --help (exit 0, usage on stdout); usage errors exit 2
// with the message on stderr.
func TestHelpAndUsageErrors(t *testing.T) {
	for _, cmd := range []string{"demo", "inspect", "call", "version"} {
		code, out, _ := cli(t, cmd, "--help")
		if code != exitOK || !strings.Contains(out, "Usage: agentsurface "+cmd) {
			t.Errorf("%s --help: %d %q", cmd, code, out)
		}
	}
	if code, out, _ := cli(t, "--help"); code != exitOK || !strings.Contains(out, "agentsurface demo") {
		t.Errorf("--help: %d %q", code, out)
	}
	for _, args := range [][]string{
		{}, {"nope"}, {"inspect"}, {"inspect", "a", "b"}, {"call", "http://x/mcp"}, {"call", "http://x/mcp", "tool", "{not json"},
		{"demo", "--approve"}, {"demo", "--replica-addr", "http://10.0.0.5:8080"}, {"demo", "--replica-lease", "1s"},
		{"demo", "--postgres", "postgres://x/y", "--reset"}, {"demo", "--postgres", "postgres://x/y", "--replica-lease", "0s"}, {"demo", "--bogus"}, {"demo", "--log-level", "loud"}, {"demo", "extra"}, {"version", "x"}, {"inspect", "--token"},
	} {
		code, out, errOut := cli(t, args...)
		if code != exitUsage || errOut == "" || strings.Contains(out, "agentsurface:") {
			t.Errorf("%q: %d, stdout %q, stderr %q", args, code, out, errOut)
		}
	}
}

// A port in use is one line on stderr naming --addr, and exit 1.
func TestDemoPortInUse(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	code, _, errOut := cli(t, "demo", "--addr", ln.Addr().String(), "--db", filepath.Join(t.TempDir(), "d.db"))
	if code != exitFail || strings.Count(errOut, "\n") != 1 || !strings.Contains(errOut, "--addr") || !strings.Contains(errOut, "in use") {
		t.Fatalf("%d %q", code, errOut)
	}
}

// demo --scripted --approve plays the task headless and exits 0; its
// transcript shows the outcome codes, the stale call among them.
func TestDemoScripted(t *testing.T) {
	code, out, errOut := cli(t, "demo", "--scripted", "--approve", "--addr", "127.0.0.1:0")
	if code != exitOK {
		t.Fatalf("%d\n%s\n%s", code, out, errOut)
	}
	metrics := "Metrics:         none in this build" // the default build's
	if withTelemetry != nil {
		metrics = "Metrics:         http://127.0.0.1:"
	}
	for _, want := range []string{"Devices console: http://127.0.0.1:", "claude mcp add --transport http devices", "STALE_CAPABILITY         ✓", "CONFIRMATION_REQUIRED    ✓", metrics, "OK: every step"} {
		if !strings.Contains(out, want) {
			t.Fatalf("the output lacks %q:\n%s", want, out)
		}
	}
	// The transcript is not interleaved with per-session info lines,
	// unless --log-level asks for them.
	if strings.Contains(errOut, "level=INFO") {
		t.Errorf("--scripted logged at info by default:\n%s", errOut)
	}
	if _, _, errOut := cli(t, "demo", "--scripted", "--approve", "--addr", "127.0.0.1:0", "--log-level", "info"); !strings.Contains(errOut, "level=INFO") {
		t.Errorf("--log-level info logged nothing at info:\n%s", errOut)
	}
}

// demo --scripted without --addr runs on a free port, also beside a demo
// that holds the default one.
func TestDemoScriptedBesideADemo(t *testing.T) {
	if ln, err := net.Listen("tcp", "127.0.0.1:8080"); err == nil { // else something holds it already
		defer ln.Close()
	}
	code, out, errOut := cli(t, "demo", "--scripted", "--approve")
	if code != exitOK || strings.Contains(out, "127.0.0.1:8080") {
		t.Fatalf("%d\n%s\n%s", code, out, errOut)
	}
}

// --log-format json writes one JSON object per line, each with its
// level and message; a made-up format is a usage error.
func TestDemoLogFormat(t *testing.T) {
	code, out, errOut := cli(t, "demo", "--scripted", "--approve", "--log-level", "info", "--log-format", "json")
	if code != exitOK {
		t.Fatalf("%d\n%s\n%s", code, out, errOut)
	}
	n := 0
	for line := range strings.Lines(errOut) {
		var rec map[string]any
		if err := json.Unmarshal([]byte(line), &rec); err != nil || rec["level"] == nil || rec["msg"] == nil {
			t.Fatalf("not a JSON log record: %q (%v)", line, err)
		}
		n++
	}
	if n == 0 {
		t.Fatal("nothing logged at info")
	}
	if code, _, errOut := cli(t, "demo", "--log-format", "yaml"); code != exitUsage || !strings.Contains(errOut, "--log-format") {
		t.Fatalf("--log-format yaml: %d %q", code, errOut)
	}
}

// inspect lists an endpoint's tools; call prints the envelope and exits
// 1 for an error result; a wrong token fails with exit 1.
func TestInspectAndCall(t *testing.T) {
	url, s := consoleServer(t)

	code, out, errOut := cli(t, "inspect", url, "--token", s.Token())
	if code != exitOK {
		t.Fatalf("%d %s", code, errOut)
	}
	for _, want := range []string{"TOOL", "CAPABILITY", "domain_devices__disable", "domain:devices.disable", "destructive", "required", "no: No devices are selected", "view_devices__table__selectRows"} {
		if !strings.Contains(out, want) {
			t.Fatalf("inspect lacks %q:\n%s", want, out)
		}
	}
	if code, _, errOut := cli(t, "inspect", url, "--token", "wrong"); code != exitFail || !strings.Contains(errOut, "agentsurface inspect:") {
		t.Fatalf("wrong token: %d %q", code, errOut)
	}

	code, out, _ = cli(t, "call", "--token", s.Token(), url, "view_devices__table__setFilter", `{"status":"offline"}`)
	var env struct {
		Status       string `json:"status"`
		CapabilityID string `json:"capabilityId"`
	}
	if code != exitOK || json.Unmarshal([]byte(out), &env) != nil || env.Status != "ok" || env.CapabilityID != "view:devices.table.setFilter" {
		t.Fatalf("call: %d %s", code, out)
	}
	code, out, errOut = cli(t, "call", url, "domain_devices__disable", `{"reason":"x"}`, "--token", s.Token())
	if code != exitFail || !strings.Contains(out, "CAPABILITY_NOT_AVAILABLE") || !strings.Contains(errOut, "CAPABILITY_NOT_AVAILABLE") {
		t.Fatalf("unavailable: %d %s %s", code, out, errOut)
	}
}

// The printed session of the interactive demo is like every other: an
// agent holding its token sees no tools until a page shows the session,
// and the page's tools while it does; closing the page unmounts them
// (after the grace period). AS-LIFE-001.
func TestDemoPrintedSessionFollowsThePage(t *testing.T) {
	ctx, stop := context.WithCancel(context.Background())
	pr, pw := io.Pipe()
	var errOut lockedBuffer
	exited := make(chan int, 1)
	go func() {
		exited <- run(ctx, []string{"demo", "--addr", "127.0.0.1:0", "--db", filepath.Join(t.TempDir(), "d.db")}, pw, &errOut)
		pw.Close()
	}()
	defer func() {
		stop()
		if code := <-exited; code != exitOK {
			t.Errorf("demo exited %d: %s", code, errOut.String())
		}
	}()
	var join, token string
	sc := bufio.NewScanner(pr)
	for sc.Scan() && (join == "" || token == "") {
		line := sc.Text()
		if u, ok := strings.CutPrefix(line, "Devices console: "); ok {
			join = u
		}
		if _, tok, ok := strings.Cut(line, `--header "Authorization: Bearer `); ok {
			token = strings.TrimSuffix(tok, `"`)
		}
	}
	go func() { _, _ = io.Copy(io.Discard, pr) }()
	base := join[:strings.Index(join, "/agentsurface/join/")]
	m, err := agent.Dial(ctx, base+"/mcp", &agent.DialOptions{Token: token})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	if tools, err := m.List(ctx); err != nil || len(tools) != 0 {
		t.Fatalf("before any page: %d tools (%v)", len(tools), err)
	}
	jar, _ := cookiejar.New(nil)
	hc := &http.Client{Jar: jar}
	res, err := hc.Get(join)
	if err != nil || res.StatusCode != http.StatusOK {
		t.Fatalf("join: %v %v", err, res)
	}
	res.Body.Close()
	sctx, closeTab := context.WithCancel(ctx)
	defer closeTab()
	req, _ := http.NewRequestWithContext(sctx, http.MethodGet, base+consoleEvents, nil)
	res, err = hc.Do(req)
	if err != nil || res.StatusCode != http.StatusOK {
		t.Fatalf("events: %v %v", err, res)
	}
	defer res.Body.Close()
	tools, err := m.List(ctx)
	if err != nil || !slices.ContainsFunc(tools, func(t agent.Tool) bool { return t.CapabilityID == "view:devices.table.readState" }) {
		t.Fatalf("with the page open: %+v (%v)", tools, err)
	}
}

// inspect --json prints every tool with its schema; --describe adds
// descriptions and schemas to the table; a missing or wrong token says
// how to pass one.
func TestInspectJSONDescribeAndTokens(t *testing.T) {
	url, s := consoleServer(t)
	code, out, errOut := cli(t, "inspect", url, "--token", s.Token(), "--json")
	var tools []struct {
		Name                 string         `json:"name"`
		Description          string         `json:"description"`
		InputSchema          map[string]any `json:"inputSchema"`
		CapabilityID         string         `json:"capabilityId"`
		Available            bool           `json:"available"`
		UnavailableReason    string         `json:"unavailableReason"`
		RequiresConfirmation bool           `json:"requiresConfirmation"`
	}
	if code != exitOK || json.Unmarshal([]byte(out), &tools) != nil || len(tools) < 5 {
		t.Fatalf("--json: %d %s %s", code, out, errOut)
	}
	byCap := map[string]int{}
	for i, tl := range tools {
		byCap[tl.CapabilityID] = i
	}
	dis := tools[byCap[domain.DisableID]]
	if !dis.RequiresConfirmation || dis.Available || dis.UnavailableReason == "" || dis.InputSchema["type"] != "object" || dis.Description == "" {
		t.Fatalf("disable: %+v", dis)
	}
	code, out, _ = cli(t, "inspect", url, "--token", s.Token(), "--describe")
	if code != exitOK || !strings.Contains(out, "view_devices__table__setFilter\n  ") || !strings.Contains(out, `"enum"`) || !strings.Contains(out, "input: {") {
		t.Fatalf("--describe: %d\n%s", code, out)
	}
	if code, _, errOut := cli(t, "inspect", url, "--json", "--describe"); code != exitUsage || errOut == "" {
		t.Fatalf("--json --describe: %d %q", code, errOut)
	}
	t.Setenv("AGENTSURFACE_TOKEN", "")
	for _, tc := range []struct{ token, want string }{{"", "without a token"}, {"wrong", "refused the token"}} {
		args := []string{"inspect", url}
		if tc.token != "" {
			args = append(args, "--token", tc.token)
		}
		code, _, errOut := cli(t, args...)
		if code != exitFail || !strings.Contains(errOut, tc.want) || !strings.Contains(errOut, "--token") || !strings.Contains(errOut, "$AGENTSURFACE_TOKEN") ||
			strings.Contains(errOut, "initialize") || strings.Count(errOut, "\n") != 1 {
			t.Errorf("token %q: %d %q", tc.token, code, errOut)
		}
	}
	t.Setenv("AGENTSURFACE_TOKEN", s.Token())
	if code, _, errOut := cli(t, "inspect", url); code != exitOK {
		t.Errorf("$AGENTSURFACE_TOKEN: %d %s", code, errOut)
	}
}

// call: CONFIRMATION_REQUIRED says how to retry; the retry with
// --confirmation-id runs the approved call; --wait waits for the user's
// decision and prints the final result (ok when approved, the refusal
// when denied). AS-CONFIRM-002 (two-phase retry with the evidence).
func TestCallConfirmation(t *testing.T) {
	url, s := consoleServer(t)
	tok := "--token=" + s.Token()
	sel := func(id string) {
		t.Helper()
		if code, out, _ := cli(t, "call", url, "view_devices__table__selectRows", `{"ids":["`+id+`"]}`, tok); code != exitOK {
			t.Fatalf("select %s: %s", id, out)
		}
	}
	sel("d4")
	args := []string{"call", url, "domain_devices__disable", `{"reason":"lobby camera broken"}`, tok}
	code, out, errOut := cli(t, args...)
	var env surface.Result
	if code != exitFail || json.Unmarshal([]byte(out), &env) != nil || env.Error == nil || env.Error.Code != surface.CodeConfirmationRequired {
		t.Fatalf("%d %s", code, out)
	}
	cid, _ := env.Error.Details["confirmationId"].(string)
	if cid == "" || !strings.Contains(errOut, "--confirmation-id "+cid) || !strings.Contains(errOut, "--wait") {
		t.Fatalf("the hint: %q", errOut)
	}
	if _, ok := s.Decide(cid, true, "olivia (test)"); !ok {
		t.Fatal("decide")
	}
	code, out, _ = cli(t, append(args, "--confirmation-id", cid)...)
	if code != exitOK || !strings.Contains(out, `"disabled": 1`) {
		t.Fatalf("retry: %d %s", code, out)
	}

	for _, approve := range []bool{true, false} {
		sel(map[bool]string{true: "d6", false: "d9"}[approve])
		type result struct {
			code     int
			out, err string
		}
		done := make(chan result, 1)
		go func() {
			code, out, errOut := cli(t, append(args, "--wait", "--poll", "20ms")...)
			done <- result{code, out, errOut}
		}()
		p := awaitPending(t, s)
		s.Decide(p.ConfirmationID, approve, "olivia (test)")
		r := <-done
		if !strings.Contains(r.err, "waiting for the user's decision on "+p.ConfirmationID) {
			t.Fatalf("approve %v: stderr %q", approve, r.err)
		}
		if approve && (r.code != exitOK || !strings.Contains(r.out, `"disabled": 1`)) {
			t.Fatalf("--wait, approved: %d %s %s", r.code, r.out, r.err)
		}
		if !approve && (r.code != exitFail || !strings.Contains(r.out, string(surface.CodeConfirmationInvalid))) {
			t.Fatalf("--wait, denied: %d %s %s", r.code, r.out, r.err)
		}
	}
}

// awaitPending waits until the session has a pending confirmation.
func awaitPending(t *testing.T, s *console.Session) surface.PendingConfirmation {
	t.Helper()
	ch := make(chan struct{}, 1)
	unsub := s.Registry().Confirmations().Subscribe(func([]surface.PendingConfirmation) {
		select {
		case ch <- struct{}{}:
		default:
		}
	})
	defer unsub()
	deadline := time.After(10 * time.Second)
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
