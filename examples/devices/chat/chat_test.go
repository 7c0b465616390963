package chat_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/agentsurface/agentsurface/examples/devices/agent"
	"github.com/agentsurface/agentsurface/examples/devices/chat"
	"github.com/agentsurface/agentsurface/examples/devices/console"
	"github.com/agentsurface/agentsurface/examples/devices/domain"
	"github.com/agentsurface/agentsurface/surface"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// fakeModel speaks the chat-completions API and plays a model that
// filters the table to London's offline devices, reads it, selects the
// rows it read and disables them, then answers in text.
type fakeModel struct {
	mu       sync.Mutex
	requests []request
}

type request struct {
	Model    string `json:"model"`
	Messages []struct {
		Role       string `json:"role"`
		Content    any    `json:"content"`
		ToolCallID string `json:"tool_call_id"`
	} `json:"messages"`
	Tools []struct {
		Type     string `json:"type"`
		Function struct {
			Name        string         `json:"name"`
			Description string         `json:"description"`
			Parameters  map[string]any `json:"parameters"`
		} `json:"function"`
	} `json:"tools"`
}

func (f *fakeModel) count() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.requests)
}

func (f *fakeModel) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path != "/v1/chat/completions" || r.Header.Get("Authorization") != "Bearer test-key" {
		http.Error(w, "not found", http.StatusNotFound)
		return
	}
	var req request
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	f.mu.Lock()
	f.requests = append(f.requests, req)
	turn := len(f.requests)
	f.mu.Unlock()

	tool := func(suffix string) string {
		for _, t := range req.Tools {
			if strings.HasSuffix(t.Function.Name, suffix) {
				return t.Function.Name
			}
		}
		return "missing" + suffix
	}
	lastTool := ""
	if n := len(req.Messages); n > 0 && req.Messages[n-1].Role == "tool" {
		lastTool, _ = req.Messages[n-1].Content.(string)
	}
	var name, args, text string
	switch turn {
	case 1:
		name, args = tool("__setFilter"), `{"site":"London","status":"offline"}`
	case 2:
		name, args = tool("__readState"), `{}`
	case 3:
		var env struct {
			Output struct {
				Rows []struct {
					ID string `json:"id"`
				} `json:"rows"`
			} `json:"output"`
		}
		_ = json.Unmarshal([]byte(lastTool), &env)
		ids := make([]string, len(env.Output.Rows))
		for i, row := range env.Output.Rows {
			ids[i] = row.ID
		}
		b, _ := json.Marshal(map[string]any{"ids": ids})
		name, args = tool("__selectRows"), string(b)
	case 4:
		name, args = tool("devices__disable"), `{"reason":"offline since the storm"}`
	default:
		text = "Disabled the offline devices in London."
	}
	msg := map[string]any{"role": "assistant", "content": text}
	finish := "stop"
	if name != "" {
		msg["content"] = nil
		msg["tool_calls"] = []map[string]any{{"id": fmt.Sprintf("call_%d", turn), "type": "function",
			"function": map[string]any{"name": name, "arguments": args}}}
		finish = "tool_calls"
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(map[string]any{
		"id": fmt.Sprintf("chatcmpl-%d", turn), "object": "chat.completion", "created": time.Now().Unix(), "model": req.Model,
		"choices": []map[string]any{{"index": 0, "finish_reason": finish, "message": msg}},
	})
}

// The model loop over the page's embedded toolset: the model's tool calls
// run against the live surface, the destructive one waits for the user's
// approval in the page (the loop is blocked meanwhile), then completes;
// every result goes back to the model as the tool's answer.
func TestModelLoopWaitsForApproval(t *testing.T) {
	model := &fakeModel{}
	api := httptest.NewServer(model)
	defer api.Close()

	store, err := domain.Open(context.Background(), filepath.Join(t.TempDir(), "devices.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	if err := store.Seed(context.Background()); err != nil {
		t.Fatal(err)
	}
	loop := chat.New(api.URL+"/v1/", "test-model", "test-key")
	app, err := console.New(console.Options{Store: store, Agent: loop, AgentName: "test-model"})
	if err != nil {
		t.Fatal(err)
	}
	defer app.Close()
	s, err := app.NewSession(console.SessionOptions{KeepShown: true})
	if err != nil {
		t.Fatal(err)
	}

	requested := make(chan surface.PendingConfirmation, 1)
	unsub := s.Registry().Confirmations().Subscribe(func(list []surface.PendingConfirmation) {
		if len(list) > 0 {
			select {
			case requested <- list[0]:
			default:
			}
		}
	})
	defer unsub()
	done, err := s.Ask("Disable the offline devices in London.")
	if err != nil {
		t.Fatal(err)
	}
	var p surface.PendingConfirmation
	select {
	case p = <-requested:
	case err := <-done:
		t.Fatalf("the run ended before asking for approval: %v; chat %+v", err, s.Chat())
	case <-time.After(10 * time.Second):
		t.Fatal("no approval was requested")
	}
	if p.CapabilityID != domain.DisableID || p.ConsumerKey != "embedded:console" || !strings.Contains(p.Summary, "badge-reader-lon-02") {
		t.Fatalf("%+v", p)
	}
	if n := model.count(); n != 4 {
		t.Fatalf("the loop went on while the approval was pending: %d model requests", n)
	}
	if _, ok := s.Decide(p.ConfirmationID, true, "olivia (browser)"); !ok {
		t.Fatal("approve")
	}
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the loop did not finish")
	}

	if n := model.count(); n != 5 {
		t.Fatalf("%d model requests", n)
	}
	last := model.requests[4]
	answer, _ := last.Messages[len(last.Messages)-1].Content.(string)
	var env surface.Result
	if err := json.Unmarshal([]byte(answer), &env); err != nil || env.Status != surface.StatusOK || string(env.Output) != `{"disabled":2}` {
		t.Fatalf("the model got %s (%v)", answer, err)
	}
	if last.Messages[len(last.Messages)-1].ToolCallID != "call_4" {
		t.Fatalf("the answer is not tied to the tool call: %+v", last.Messages[len(last.Messages)-1])
	}
	// The tools sent carry the live surface: schemas, and the disable
	// tool's confirmation in its description.
	var sawEnum, sawConfirm bool
	for _, tool := range model.requests[3].Tools {
		if strings.HasSuffix(tool.Function.Name, "__setFilter") {
			props, _ := tool.Function.Parameters["properties"].(map[string]any)
			status, _ := props["status"].(map[string]any)
			_, sawEnum = status["enum"]
		}
		if strings.HasSuffix(tool.Function.Name, "devices__disable") {
			sawConfirm = strings.Contains(tool.Function.Description, "requires confirmation") && !strings.Contains(tool.Function.Description, "unavailable")
		}
	}
	if !sawEnum || !sawConfirm || model.requests[0].Model != "test-model" {
		t.Fatalf("tools: enum %v, confirmation %v", sawEnum, sawConfirm)
	}
	devices, _ := store.List(context.Background(), console.Operator, domain.Filter{Site: "London", Status: domain.StatusDisabled})
	if len(devices) != 3 { // d9, d10 and the printer d11, disabled from the start
		t.Fatalf("%+v", devices)
	}
	chatLog := s.Chat()
	said := false
	for _, e := range chatLog {
		said = said || e.Step != nil && e.Step.Outcome == "" && e.Step.Tool == "" && e.Step.Title == "Disabled the offline devices in London."
	}
	for _, e := range chatLog {
		if e.Step != nil && e.Step.Tool != "" && strings.Contains(e.Step.Title, e.Step.Tool) {
			t.Errorf("a step names its tool twice: %+v", e.Step) // the page shows the tool beside the title
		}
	}
	if chatLog[len(chatLog)-1].Text != "Done." || !said {
		t.Fatalf("%+v", chatLog)
	}
}

// A model endpoint that fails ends the run with an error, shown in the
// console; nothing is called.
func TestModelLoopEndpointDown(t *testing.T) {
	api := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, `{"error":{"message":"overloaded"}}`, http.StatusServiceUnavailable)
	}))
	defer api.Close()
	store, err := domain.Open(context.Background(), filepath.Join(t.TempDir(), "devices.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	app, err := console.New(console.Options{Store: store, Agent: chat.New(api.URL+"/v1/", "m", "k")})
	if err != nil {
		t.Fatal(err)
	}
	defer app.Close()
	s, _ := app.NewSession(console.SessionOptions{KeepShown: true})
	done, err := s.Ask("hello")
	if err != nil {
		t.Fatal(err)
	}
	if err := <-done; err == nil || !strings.Contains(err.Error(), "model request") {
		t.Fatalf("%v", err)
	}
	if c := s.Chat(); c[len(c)-1].Who != "error" {
		t.Fatalf("%+v", c)
	}
}

// roundTrip is an http.RoundTripper from a function.
type roundTrip func(*http.Request) (*http.Response, error)

func (f roundTrip) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// A model endpoint that never answers ends the run after RequestTimeout,
// with an error that says so, instead of holding the console at work; it
// is not retried.
func TestModelRequestTimeout(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var sent atomic.Int32
		loop := chat.New("http://model.invalid/v1/", "m", "")
		loop.RequestTimeout = 30 * time.Second
		loop.HTTPClient = &http.Client{Transport: roundTrip(func(r *http.Request) (*http.Response, error) {
			sent.Add(1)
			<-r.Context().Done() // hangs until the request's context ends
			return nil, r.Context().Err()
		})}
		start := time.Now()
		err := loop.Run(context.Background(), "hello", noTools{}, nil)
		if err == nil || !strings.Contains(err.Error(), "did not answer in time (30s)") {
			t.Fatalf("%v", err)
		}
		if d := time.Since(start); d != 30*time.Second {
			t.Fatalf("the run ended after %s, want 30s", d)
		}
		if n := sent.Load(); n != 1 {
			t.Fatalf("%d requests, want 1 (a timeout is not retried)", n)
		}
	})
}

// Cancelling the run's context (the page's Stop) ends a request at once.
func TestModelRequestCancelled(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		loop := chat.New("http://model.invalid/v1", "m", "")
		loop.HTTPClient = &http.Client{Transport: roundTrip(func(r *http.Request) (*http.Response, error) {
			<-r.Context().Done()
			return nil, r.Context().Err()
		})}
		ctx, cancel := context.WithCancel(context.Background())
		time.AfterFunc(time.Second, cancel)
		start := time.Now()
		err := loop.Run(ctx, "hello", noTools{}, nil)
		if !errors.Is(err, context.Canceled) || time.Since(start) != time.Second {
			t.Fatalf("%v after %s", err, time.Since(start))
		}
	})
}

// The wire: the path under the base URL (with or without its trailing
// slash), the bearer key only when one is given, the extra headers, and a
// retryable status sent once more while others are not; the server's
// error message reaches the run's error.
func TestModelRequestWire(t *testing.T) {
	var mu sync.Mutex
	var seen []*http.Request
	statuses := []int{}
	api := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		seen = append(seen, r.Clone(context.Background()))
		st := http.StatusOK
		if len(statuses) > 0 {
			st, statuses = statuses[0], statuses[1:]
		}
		mu.Unlock()
		if st != http.StatusOK {
			w.Header().Set("Retry-After", "0")
			http.Error(w, `{"error":{"message":"overloaded","type":"server_error"}}`, st)
			return
		}
		var req struct {
			Model    string            `json:"model"`
			Messages []json.RawMessage `json:"messages"`
		}
		if r.URL.Path != "/v1/chat/completions" || json.NewDecoder(r.Body).Decode(&req) != nil || req.Model != "m" || len(req.Messages) != 2 {
			http.Error(w, "bad request", http.StatusBadRequest)
			return
		}
		_, _ = w.Write([]byte(`{"id":"x","choices":[{"index":0,"finish_reason":"stop","message":{"role":"assistant","content":"hi"}}]}`))
	}))
	defer api.Close()
	reset := func(st ...int) {
		mu.Lock()
		seen, statuses = nil, st
		mu.Unlock()
	}
	run := func(l *chat.Loop) ([]agent.Step, error) {
		var got []agent.Step
		err := l.Run(context.Background(), "hello", noTools{}, func(s agent.Step) { got = append(got, s) })
		return got, err
	}

	keyed := chat.New(api.URL+"/v1/", "m", "sk-test")
	keyed.Header = http.Header{"Openai-Organization": {"org-1"}}
	reset(http.StatusServiceUnavailable)
	got, err := run(keyed)
	if err != nil || len(got) != 1 || got[0].Title != "hi" || len(seen) != 2 {
		t.Fatalf("retried 503: %v %+v, %d requests", err, got, len(seen))
	}
	if a, o := seen[1].Header.Get("Authorization"), seen[1].Header.Get("OpenAI-Organization"); a != "Bearer sk-test" || o != "org-1" {
		t.Fatalf("headers %q %q", a, o)
	}

	keyless := chat.New(api.URL+"/v1", "m", "")
	reset(http.StatusServiceUnavailable, http.StatusServiceUnavailable, http.StatusServiceUnavailable)
	_, err = run(keyless)
	var apiErr *chat.APIError
	if !errors.As(err, &apiErr) || apiErr.StatusCode != 503 || !strings.Contains(err.Error(), "overloaded") || len(seen) != 2 {
		t.Fatalf("503 twice: %v, %d requests", err, len(seen))
	}
	if _, ok := seen[0].Header["Authorization"]; ok {
		t.Fatalf("a key-less loop sent Authorization %q", seen[0].Header.Get("Authorization"))
	}
	reset(http.StatusUnauthorized)
	if _, err = run(keyless); !errors.As(err, &apiErr) || apiErr.StatusCode != 401 || len(seen) != 1 {
		t.Fatalf("401: %v, %d requests (not retried)", err, len(seen))
	}
}

// noTools is an empty catalog.
type noTools struct{}

func (noTools) List(context.Context) ([]agent.Tool, error) { return nil, nil }
func (noTools) Call(context.Context, string, json.RawMessage) (surface.Result, error) {
	return surface.Result{}, errors.New("no tools")
}
