package mcpsurface_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentsurface/agentsurface/mcpsurface"
	"github.com/agentsurface/agentsurface/surface"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// panicServerEnv makes the test binary serve the hostile registry over
// Streamable HTTP instead of running tests (see TestMain).
const panicServerEnv = "AGENTSURFACE_MCPSURFACE_PANIC_SERVER"

// secret is the panic text: it may reach the operator's log, never the
// agent.
const secret = "secret-internal-detail"

// hostileIn is an action input whose decoding panics on the text "boom":
// agent input drives it.
type hostileIn struct{ Text string }

func (h *hostileIn) UnmarshalJSON(b []byte) error {
	var raw struct {
		Text string `json:"text"`
	}
	if err := json.Unmarshal(b, &raw); err != nil {
		return err
	}
	if raw.Text == "boom" {
		panic("hostileIn.UnmarshalJSON: " + secret)
	}
	h.Text = raw.Text
	return nil
}

// hostileOut is an action output whose encoding panics on the text "boom".
type hostileOut struct{ Text string }

func (h hostileOut) MarshalJSON() ([]byte, error) {
	if h.Text == "boom" {
		panic("hostileOut.MarshalJSON: " + secret)
	}
	return json.Marshal(map[string]string{"text": h.Text})
}

var textSchema = json.RawMessage(`{"type":"object","properties":{"text":{"type":"string"}},"required":["text"],"additionalProperties":false}`)

// hostileComponent is "hostile": parse decodes hostileIn, render encodes
// hostileOut; both echo the text.
func hostileComponent() surface.Component {
	return surface.Component{
		Type: "hostile", Description: "Capabilities whose input or output codecs panic",
		Actions: map[string]surface.Capability{
			"parse": surface.Action(surface.ActionDef[hostileIn, hostileOut]{
				Description: "Decode the text", Effect: surface.EffectLocalState,
				InputSchema: textSchema, OutputSchema: textSchema,
				Execute: func(_ context.Context, _ *surface.Call, in hostileIn) (hostileOut, error) {
					return hostileOut(in), nil
				},
			}),
			"render": surface.Action(surface.ActionDef[labelIn, hostileOut]{
				Description: "Encode the text", Effect: surface.EffectLocalState, OutputSchema: textSchema,
				Execute: func(_ context.Context, _ *surface.Call, in labelIn) (hostileOut, error) {
					return hostileOut{Text: in.Label}, nil
				},
			}),
		},
	}
}

// servePanicServer is the program the subprocess test starts: it serves
// the hostile registry to two tokens over Streamable HTTP on loopback,
// prints its URL, logs JSON to stderr and stops when stdin closes.
func servePanicServer() int {
	log := slog.New(slog.NewJSONHandler(os.Stderr, nil))
	reg := surface.New(&surface.Options{Logger: log}) // the core recovers and logs user-code panics
	defer reg.Close()
	if _, err := reg.Register(hostileComponent()); err != nil {
		log.Error("register", "error", err)
		return 1
	}
	h := mcpsurface.NewHTTPHandler(func(r *http.Request) (*surface.Registry, surface.Consumer, error) {
		switch tok := strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer "); tok {
		case "tok-a", "tok-b":
			return reg, surface.Consumer{ID: tok}, nil
		}
		return nil, surface.Consumer{}, errors.New("unknown token")
	}, &mcpsurface.HTTPOptions{Options: mcpsurface.Options{Logger: log}})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		log.Error("listen", "error", err)
		return 1
	}
	srv := &http.Server{Handler: h}
	go func() { _ = srv.Serve(ln) }()
	fmt.Printf("http://%s/mcp\n", ln.Addr())
	_, _ = io.Copy(io.Discard, os.Stdin)
	_ = h.Close()
	_ = srv.Close()
	return 0
}

// panicServer is a running subprocess of servePanicServer.
type panicServer struct {
	url    string
	stdin  io.Closer
	cmd    *exec.Cmd
	stderr syncBuffer
}

func (p *panicServer) log() string { return p.stderr.String() }

func startPanicServer(t *testing.T) *panicServer {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	p := &panicServer{}
	p.cmd = exec.Command(exe, "-test.run=^$")
	p.cmd.Env = append(os.Environ(), panicServerEnv+"=1")
	p.cmd.Stderr = &p.stderr
	stdin, err := p.cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := p.cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	p.stdin = stdin
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = p.stdin.Close()
		_ = p.cmd.Process.Kill() // no-op once it has exited
		_ = p.cmd.Wait()
	})
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil {
		t.Fatalf("the server printed no URL: %v\n%s", err, p.log())
	}
	p.url = strings.TrimSpace(line)
	return p
}

// connectTo opens a session on the subprocess with a token.
func (p *panicServer) connectTo(t *testing.T, token string) *mcp.ClientSession {
	t.Helper()
	tr := &mcp.StreamableClientTransport{Endpoint: p.url, MaxRetries: -1,
		HTTPClient: &http.Client{Transport: bearer{token, http.DefaultTransport}, Timeout: 20 * time.Second}}
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "hostile-agent", Version: "1"}, nil).
		Connect(bg, tr, &mcp.ClientSessionOptions{ProtocolVersion: v2025})
	if err != nil {
		t.Fatalf("connect %s: %v\n%s", token, err, p.log())
	}
	t.Cleanup(func() { _ = cs.Close() })
	return cs
}

// A panic in user code driven by agent input (an input type's
// UnmarshalJSON, an output type's MarshalJSON) is recovered: the agent
// gets an isError EXECUTION_FAILED handler-error result without the panic
// text, the operator gets a log line, and the process keeps serving every
// session. The server runs as a separate process so that a panic that
// escaped would kill it, not the test.
func TestPanicInAgentDrivenUserCodeKeepsProcessServing(t *testing.T) {
	p := startPanicServer(t)
	mallory := p.connectTo(t, "tok-a")

	// A panic while decoding the input settles as the input phase's error
	// (INVALID_INPUT, one issue at the root); one while encoding the
	// output as the handler's (EXECUTION_FAILED handler-error).
	for _, c := range []struct {
		tool, what string
		code       surface.Code
		retry      surface.Retry
	}{
		{"view_hostile__parse", "input decoding", surface.CodeInvalidInput, surface.RetryWithChanges},
		{"view_hostile__render", "output encoding", surface.CodeExecutionFailed, surface.RetryNo},
	} {
		args := map[string]any{"text": "boom"}
		if c.tool == "view_hostile__render" {
			args = map[string]any{"label": "boom"}
		}
		res, err := mallory.CallTool(bg, &mcp.CallToolParams{Name: c.tool, Arguments: args})
		if err != nil {
			t.Fatalf("%s panic: the call failed instead of returning a result: %v\nserver log:\n%s", c.what, err, p.log())
		}
		env := decode(t, res)
		e := requireCode(t, env, c.code)
		if e.Retry != string(c.retry) || (c.code == surface.CodeExecutionFailed && e.Details["reason"] != "handler-error") {
			t.Fatalf("%s panic: %+v", c.what, e)
		}
		if raw, _ := json.Marshal(res); bytes.Contains(raw, []byte(secret)) || bytes.Contains(raw, []byte("goroutine")) {
			t.Fatalf("%s panic: internal text reached the agent: %s", c.what, raw)
		}
		if env.InvocationID == "" || env.CapabilityID != "view:hostile."+strings.TrimPrefix(c.tool, "view_hostile__") {
			t.Fatalf("%s panic: envelope %+v", c.what, env)
		}
	}

	// The same session and a new one of another consumer keep working.
	echo := callTool(t, mallory, "view_hostile__parse", map[string]any{"text": "fine"}, nil)
	requireOK(t, echo)
	alice := p.connectTo(t, "tok-b")
	if got := names(listTools(t, alice)); got != "view_hostile__parse,view_hostile__render" {
		t.Fatalf("alice sees %s", got)
	}
	env := callTool(t, alice, "view_hostile__render", map[string]any{"label": "hello"}, nil)
	requireOK(t, env)
	if string(env.Output) != `{"text":"hello"}` {
		t.Fatalf("output %s", env.Output)
	}

	_ = p.stdin.Close()
	if err := p.cmd.Wait(); err != nil {
		t.Fatalf("server exited with %v\n%s", err, p.log())
	}
	log := p.log()
	for _, want := range []string{"hostileIn.UnmarshalJSON: " + secret, "hostileOut.MarshalJSON: " + secret} {
		if !strings.Contains(log, want) {
			t.Fatalf("the operator log lacks %q:\n%s", want, log)
		}
	}
}

// A panicking resolver fails its request with 500 and a log line; the
// handler keeps serving the other requests.
func TestPanicInResolverAnswers500(t *testing.T) {
	users := twoUsers(t)
	var logs syncBuffer
	f := &httpFixture{sessions: users}
	f.h = mcpsurface.NewHTTPHandler(func(r *http.Request) (*surface.Registry, surface.Consumer, error) {
		tok := strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer ")
		if tok == "tok-panic" {
			panic("resolver: " + secret)
		}
		s, ok := users[tok]
		if !ok {
			return nil, surface.Consumer{}, errors.New("unknown token")
		}
		return s.reg, s.consumer, nil
	}, &mcpsurface.HTTPOptions{Options: mcpsurface.Options{Logger: slog.New(slog.NewTextHandler(&logs, nil))}})
	f.srv = httptest.NewServer(f.h)
	t.Cleanup(func() {
		_ = f.h.Close()
		f.srv.Close()
	})
	req, _ := http.NewRequest(http.MethodPost, f.srv.URL, strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"tools/list"}`))
	req.Header.Set("Authorization", "Bearer tok-panic")
	resp, err := f.srv.Client().Do(req)
	if err != nil {
		t.Fatalf("the request was aborted: %v", err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusInternalServerError || bytes.Contains(body, []byte(secret)) {
		t.Fatalf("%d %s", resp.StatusCode, body)
	}
	if !strings.Contains(logs.String(), "resolver: "+secret) {
		t.Fatalf("not logged: %s", logs.String())
	}
	alice := f.mustClient(t, "tok-alice", v2025, nil)
	requireOK(t, callTool(t, alice, "view_devices__table__readState", nil, nil))
}

// syncBuffer is a bytes.Buffer safe for concurrent writes (a log sink).
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
