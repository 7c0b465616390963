package webhost_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/agentsurface/agentsurface/surface"
	"github.com/agentsurface/agentsurface/webhost"
)

// offeredList is the JSON of GET …/webmcp/tools and of a "tools" event.
type offeredList struct {
	SurfaceVersion string `json:"surfaceVersion"`
	Tools          []struct {
		Name           string          `json:"name"`
		Description    string          `json:"description"`
		InputSchema    json.RawMessage `json:"inputSchema"`
		RegistrationID string          `json:"registrationId"`
		Annotations    *struct {
			ReadOnlyHint bool `json:"readOnlyHint"`
		} `json:"annotations"`
	} `json:"tools"`
}

func (l offeredList) names() []string {
	var out []string
	for _, t := range l.Tools {
		out = append(out, t.Name)
	}
	slices.Sort(out)
	return out
}

const (
	toolRead     = "view_notes__board__read"
	toolAdd      = "view_notes__board__add"
	toolClear    = "view_notes__board__clear"
	toolOpen     = "view_notes__board__open"
	toolReadNote = "view_notes__detail__readNote"
)

// webmcpTools lists the tools the page offers.
func (b *browser) webmcpTools() offeredList {
	b.t.Helper()
	code, body := b.get("/agentsurface/webmcp/tools")
	if code != http.StatusOK {
		b.t.Fatalf("GET webmcp/tools: %d %s", code, body)
	}
	var l offeredList
	if err := json.Unmarshal([]byte(body), &l); err != nil {
		b.t.Fatalf("%v: %s", err, body)
	}
	return l
}

// webmcpPost posts a call body as the page script does.
func (b *browser) webmcpPost(body string) (int, string) {
	b.t.Helper()
	req, _ := http.NewRequest(http.MethodPost, b.a.srv.URL+"/agentsurface/webmcp/call", strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Sec-Fetch-Site", "same-origin")
	return b.do(req)
}

// webmcpCall calls tool name of the list of version and returns the
// envelope.
func (b *browser) webmcpCall(name, version, input string) surface.Result {
	b.t.Helper()
	body, _ := json.Marshal(map[string]any{"name": name, "surfaceVersion": version, "input": json.RawMessage(input)})
	code, out := b.webmcpPost(string(body))
	if code != http.StatusOK {
		b.t.Fatalf("POST webmcp/call %s: %d %s", name, code, out)
	}
	var res surface.Result
	if err := json.Unmarshal([]byte(out), &res); err != nil {
		b.t.Fatalf("%v: %s", err, out)
	}
	return res
}

// joined is a browser bound to session s by its join link.
func (a *app) joined(t testing.TB, s *webhost.Session) *browser {
	t.Helper()
	b := a.browser(t)
	if code, _ := b.get(s.JoinPath()); code != http.StatusSeeOther {
		t.Fatalf("join: %d", code)
	}
	return b
}

// available lists the session's tools for the WebMCP consumer with a
// toolset of the test's own: the reference the offered list must match.
func available(t testing.TB, s *webhost.Session) (names []string, tools map[string]surface.Tool) {
	t.Helper()
	ts, err := surface.NewToolset(s.Registry(), surface.ToolsetOptions{Consumer: surface.Consumer{ID: "browser", Kind: surface.ConsumerWebMCP}, Topology: surface.TopologyRemote})
	if err != nil {
		t.Fatal(err)
	}
	defer ts.Close()
	tools = map[string]surface.Tool{}
	for _, tool := range ts.Tools() {
		tools[tool.Name] = tool
		if tool.State.Available {
			names = append(names, tool.Name)
		}
	}
	slices.Sort(names)
	return names, tools
}

// The list offers exactly the available tools, each with the name,
// description and input schema of the session's toolset and a read-only
// hint for reads; a call runs through the session's surface as the
// WebMCP consumer and answers the envelope; after a change the list is
// the new available set. AS-ADAPTER-003 (available-only tools, refresh),
// AS-ADAPTER-002 (envelopes relayed as they are).
func TestWebMCPListAndCall(t *testing.T) {
	a := newApp(t, webhost.Options{})
	s := a.session(t)
	b := a.joined(t, s)
	l := b.webmcpTools()
	names, ref := available(t, s)
	if !slices.Equal(l.names(), names) || slices.Contains(names, toolClear) || ref[toolClear].Name == "" {
		t.Fatalf("offered %v, available %v (clear: %+v)", l.names(), names, ref[toolClear])
	}
	if l.SurfaceVersion != s.Registry().Version() {
		t.Fatalf("list version %s, registry %s", l.SurfaceVersion, s.Registry().Version())
	}
	for _, tool := range l.Tools {
		want := ref[tool.Name]
		var compact bytes.Buffer
		_ = json.Compact(&compact, tool.InputSchema)
		if tool.Description != want.Description || compact.String() != string(want.InputSchema) || tool.RegistrationID != want.RegistrationID {
			t.Errorf("%s: offered %q %s %s, toolset %q %s %s", tool.Name, tool.Description, compact.String(), tool.RegistrationID,
				want.Description, want.InputSchema, want.RegistrationID)
		}
		if readOnly := tool.Annotations != nil && tool.Annotations.ReadOnlyHint; readOnly != (tool.Name == toolRead) {
			t.Errorf("%s: readOnlyHint %v", tool.Name, readOnly)
		}
	}
	res := b.webmcpCall(toolAdd, l.SurfaceVersion, `{"text":"from the browser"}`)
	if res.Status != surface.StatusOK || res.CapabilityID != "view:notes.board.add" || !strings.HasPrefix(res.InvocationID, "inv_") {
		t.Fatalf("add: %+v", res)
	}
	var got []string
	if err := json.Unmarshal([]byte(b.webmcpCall(toolRead, l.SurfaceVersion, `{}`).Output), &got); err != nil || !slices.Equal(got, []string{"from the browser"}) {
		t.Fatalf("read: %v %v", got, err)
	}
	requireCode(t, b.webmcpCall(toolAdd, l.SurfaceVersion, `{"text":7}`), string(surface.CodeInvalidInput))
	l2 := b.webmcpTools()
	if names, _ := available(t, s); !slices.Equal(l2.names(), names) || !slices.Contains(names, toolClear) {
		t.Fatalf("after adding: offered %v, available %v", l2.names(), names)
	}
}

// A call that needs the user's approval waits for it and returns the
// final result: approved, it runs once; denied, nothing runs and the
// envelope says CONFIRMATION_INVALID denied; a session that ends while a
// call waits ends the wait. The approval shows the WebMCP consumer.
// AS-ADAPTER-003, AS-CONFIRM-006.
func TestWebMCPCallWaitsForApproval(t *testing.T) {
	a := newApp(t, webhost.Options{})
	s := a.session(t)
	b := a.joined(t, s)
	clear := func() chan surface.Result {
		boardOf(s).add("x")
		l := b.webmcpTools()
		done := make(chan surface.Result, 1)
		go func() {
			body, _ := json.Marshal(map[string]any{"name": toolClear, "surfaceVersion": l.SurfaceVersion})
			req, _ := http.NewRequest(http.MethodPost, a.srv.URL+"/agentsurface/webmcp/call", bytes.NewReader(body))
			req.Header.Set("Sec-Fetch-Site", "same-origin")
			var r surface.Result
			res, err := b.client.Do(req)
			if err == nil {
				out, _ := io.ReadAll(res.Body)
				res.Body.Close()
				if json.Unmarshal(out, &r) != nil {
					r.Status = surface.ResultStatus(fmt.Sprintf("transport: %d %s", res.StatusCode, out))
				}
			} else {
				r.Status = surface.ResultStatus("transport: " + err.Error())
			}
			done <- r
		}()
		return done
	}
	await := func(done chan surface.Result) surface.Result {
		t.Helper()
		select {
		case r := <-done:
			return r
		case <-time.After(waitFor):
			t.Fatal("the call did not return")
			return surface.Result{}
		}
	}

	done := clear()
	p := awaitPending(t, s)
	if p.ConsumerKey != "webmcp:browser" || p.CapabilityID != "view:notes.board.clear" {
		t.Fatalf("pending %+v", p)
	}
	select {
	case r := <-done:
		t.Fatalf("the call returned before the decision: %+v", r)
	default:
	}
	s.Decide(p.ConfirmationID, true, "the user")
	if r := await(done); r.Status != surface.StatusOK || len(boardOf(s).list()) != 0 {
		t.Fatalf("approved: %+v %v", r, boardOf(s).list())
	}
	if d := s.Decisions(); len(d) != 1 || d[0].Call == nil || !d[0].Call.Executed || d[0].Consumer != "webmcp:browser" {
		t.Fatalf("decisions %+v", d)
	}

	done = clear()
	p = awaitPending(t, s)
	s.Decide(p.ConfirmationID, false, "the user")
	r := await(done)
	requireCode(t, r, string(surface.CodeConfirmationInvalid))
	if reason, _ := r.Error.Details["reason"].(string); reason != "denied" || len(boardOf(s).list()) != 1 {
		t.Fatalf("denied: %+v, notes %v", r.Error, boardOf(s).list())
	}

	done = clear()
	awaitPending(t, s)
	s.Close()
	if r := await(done); r.Status == surface.StatusOK {
		t.Fatalf("a call of a closed session succeeded: %+v", r)
	}
}

// Calls refer to the list they came from: a tool whose component was
// replaced since answers the registry's staleness verdict, never the new
// registration's result; an unknown tool or list answers
// CAPABILITY_NOT_FOUND; the endpoints refuse requests without the
// session's cookie, cross-site posts and malformed bodies.
// AS-ADAPTER-003, AS-STALE-001, AS-LIFE-005.
func TestWebMCPStaleAndRefused(t *testing.T) {
	a := newApp(t, webhost.Options{})
	s := a.session(t)
	b := a.joined(t, s)
	boardOf(s).add("first")
	boardOf(s).add("second")
	l := b.webmcpTools()
	requireCode(t, b.webmcpCall(toolOpen, l.SurfaceVersion, `{"index":0}`), "ok")
	v1 := b.webmcpTools()
	requireCode(t, b.webmcpCall(toolOpen, v1.SurfaceVersion, `{"index":1}`), "ok")
	v2 := b.webmcpTools()
	// The panel navigated: a new registration of notes.detail under the
	// same tool name.
	name := func(l offeredList) string {
		for _, n := range l.names() {
			if strings.HasPrefix(n, toolReadNote) {
				return n
			}
		}
		t.Fatalf("no readNote tool in %v", l.names())
		return ""
	}
	res := b.webmcpCall(name(v1), v1.SurfaceVersion, `{}`)
	requireCode(t, res, string(surface.CodeStaleCapability))
	if reason, _ := res.Error.Details["reason"].(string); reason != "registration-replaced" {
		t.Fatalf("stale: %+v", res.Error)
	}
	res = b.webmcpCall(name(v2), v2.SurfaceVersion, `{}`)
	if res.Status != surface.StatusOK || string(res.Output) != `"second"` {
		t.Fatalf("the open panel: %+v", res)
	}
	requireCode(t, b.webmcpCall("view_notes__board__explode", v2.SurfaceVersion, `{}`), string(surface.CodeCapabilityNotFound))
	res = b.webmcpCall(toolRead, "9999", `{}`)
	requireCode(t, res, string(surface.CodeCapabilityNotFound))
	if res.Error.Retry != surface.RetryAfterRefresh || !strings.HasPrefix(res.InvocationID, "inv_") || len(res.InvocationID) != 16 {
		t.Fatalf("unknown list: %+v", res)
	}

	for body, want := range map[string]int{
		`{"surfaceVersion":"1"}`:    http.StatusBadRequest,
		`{"name":"x"} {"name":"y"}`: http.StatusBadRequest,
		`[]`:                        http.StatusBadRequest,
		`{"name":"` + strings.Repeat("x", 2<<20) + `"}`: http.StatusRequestEntityTooLarge,
	} {
		if code, _ := b.webmcpPost(body); code != want {
			t.Errorf("body %.40q: %d, want %d", body, code, want)
		}
	}
	stranger := a.browser(t)
	if code, _ := stranger.get("/agentsurface/webmcp/tools"); code != http.StatusUnauthorized {
		t.Fatalf("list without a session: %d", code)
	}
	if code, _ := stranger.webmcpPost(`{"name":"` + toolRead + `","surfaceVersion":"1"}`); code != http.StatusUnauthorized {
		t.Fatalf("call without a session: %d", code)
	}
	req, _ := http.NewRequest(http.MethodPost, a.srv.URL+"/agentsurface/webmcp/call", strings.NewReader(`{"name":"`+toolAdd+`","surfaceVersion":"`+v2.SurfaceVersion+`","input":{"text":"csrf"}}`))
	req.Header.Set("Sec-Fetch-Site", "cross-site")
	if code, _ := b.do(req); code != http.StatusForbidden || len(boardOf(s).list()) != 2 {
		t.Fatalf("cross-site call: %d, notes %v", code, boardOf(s).list())
	}
}

// A page's event stream opened with webmcp=1 carries the list at once
// and again whenever it changes; a plain stream carries none.
// AS-ADAPTER-003 (refresh over the page's live channel).
func TestWebMCPStreamRefresh(t *testing.T) {
	a := newApp(t, webhost.Options{})
	s := a.session(t)
	b := a.joined(t, s)
	plain := b.open(false, "notes")
	wm := b.open(true, "notes")
	next := func() offeredList {
		t.Helper()
		for {
			e := wm.next(t)
			if e.event == "" {
				t.Fatal("the stream ended")
			}
			if e.event != "tools" {
				continue
			}
			var l offeredList
			if err := json.Unmarshal([]byte(e.data), &l); err != nil {
				t.Fatal(err)
			}
			return l
		}
	}
	first := next()
	if names, _ := available(t, s); !slices.Equal(first.names(), names) || slices.Contains(names, toolClear) {
		t.Fatalf("first tools event %v", first.names())
	}
	boardOf(s).add("x") // clear becomes available
	var l offeredList
	for l = next(); !slices.Contains(l.names(), toolClear); l = next() {
	}
	plain.await(t, "notes", func(h string) bool { return h == "<li>x</li>" })
	boardOf(s).clear()
	for l = next(); slices.Contains(l.names(), toolClear); l = next() {
	}
	if !slices.Equal(l.names(), first.names()) {
		t.Fatalf("after clearing: %v, want %v", l.names(), first.names())
	}
	plain.await(t, "notes", func(h string) bool { return h == "" })
	for {
		select {
		case e := <-plain.events:
			if e.event == "tools" {
				t.Fatalf("a plain stream got a tools event: %s", e.data)
			}
			continue
		default:
		}
		break
	}
}

// The call endpoint takes any body from the page (and so from anyone who
// can run script in it) without panicking or hanging: it answers 200
// with a result envelope, 400 or 413. Every approval asked is denied as
// soon as it is pending. AS-ADAPTER-003.
func FuzzWebMCPCall(f *testing.F) {
	a := newApp(f, webhost.Options{})
	s := a.session(f)
	boardOf(s).add("x")
	stop := s.Registry().Confirmations().Subscribe(func(pending []surface.PendingConfirmation) {
		for _, p := range pending {
			go s.Decide(p.ConfirmationID, false, "fuzz")
		}
	})
	f.Cleanup(stop)
	b := a.joined(f, s)
	v := b.webmcpTools().SurfaceVersion
	for _, seed := range []string{
		`{"name":"` + toolAdd + `","surfaceVersion":"` + v + `","input":{"text":"y"}}`,
		`{"name":"` + toolRead + `","surfaceVersion":"` + v + `"}`,
		`{"name":"` + toolClear + `","surfaceVersion":"` + v + `"}`,
		`{"name":"` + toolOpen + `","surfaceVersion":"` + v + `","input":{"index":-1}}`,
		`{"name":"nope","surfaceVersion":"0","input":[]}`, `{"name":""}`, `[]`, `null`, `{"name":"x"} {}`, `{"name":"x","input":"{}"}`,
	} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, body string) {
		ctx, cancel := context.WithTimeout(t.Context(), waitFor)
		defer cancel()
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, a.srv.URL+"/agentsurface/webmcp/call", strings.NewReader(body))
		req.Header.Set("Sec-Fetch-Site", "same-origin")
		res, err := b.client.Do(req)
		if err != nil {
			t.Fatalf("%q: %v", body, err)
		}
		defer res.Body.Close()
		out, _ := io.ReadAll(res.Body)
		switch res.StatusCode {
		case http.StatusBadRequest, http.StatusRequestEntityTooLarge:
		case http.StatusOK:
			var r surface.Result
			if err := json.Unmarshal(out, &r); err != nil || (r.Status != surface.StatusOK && (r.Status != surface.StatusError || r.Error == nil)) {
				t.Fatalf("%q: not an envelope: %s", body, out)
			}
		default:
			t.Fatalf("%q: status %d %s", body, res.StatusCode, out)
		}
	})
}
