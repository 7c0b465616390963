package console_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/agentsurface/agentsurface/examples/devices/console"
	"github.com/agentsurface/agentsurface/examples/devices/domain"
	"github.com/agentsurface/agentsurface/surface"
)

// offeredList is the JSON of GET /webmcp/tools and of a "tools" event.
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

// webmcpTools lists the tools the page offers, as GET /webmcp/tools.
func (b *browser) webmcpTools() offeredList {
	b.t.Helper()
	code, body := b.get("/agentsurface/webmcp/tools")
	if code != http.StatusOK {
		b.t.Fatalf("GET /webmcp/tools: %d %s", code, body)
	}
	var l offeredList
	if err := json.Unmarshal([]byte(body), &l); err != nil {
		b.t.Fatalf("%v: %s", err, body)
	}
	return l
}

// webmcpPost posts a call body as the page's script does and returns the
// status and the body.
func (b *browser) webmcpPost(body string) (int, string) {
	b.t.Helper()
	code, out, err := b.tryWebMCPPost(body)
	if err != nil {
		b.t.Fatal(err)
	}
	return code, out
}

// tryWebMCPPost is webmcpPost for goroutines other than the test's.
func (b *browser) tryWebMCPPost(body string) (int, string, error) {
	req, _ := http.NewRequest(http.MethodPost, b.d.srv.URL+"/agentsurface/webmcp/call", strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Sec-Fetch-Site", "same-origin")
	res, err := b.client.Do(req)
	if err != nil {
		return 0, "", err
	}
	defer res.Body.Close()
	var sb strings.Builder
	_, _ = bufioCopy(&sb, res)
	return res.StatusCode, sb.String(), nil
}

// webmcpCall calls tool name of the list of version, as an offered tool's
// execute does, and returns the result envelope.
func (b *browser) webmcpCall(name, version, input string) surface.Result {
	b.t.Helper()
	body, _ := json.Marshal(map[string]any{"name": name, "surfaceVersion": version, "input": json.RawMessage(input)})
	code, out := b.webmcpPost(string(body))
	if code != http.StatusOK {
		b.t.Fatalf("POST /webmcp/call %s: %d %s", name, code, out)
	}
	var res surface.Result
	if err := json.Unmarshal([]byte(out), &res); err != nil {
		b.t.Fatalf("%v: %s", err, out)
	}
	return res
}

// webmcpBrowser is a browser profile bound to session s.
func (d *demo) webmcpBrowser(t *testing.T, s *console.Session) *browser {
	t.Helper()
	b := d.browser(t)
	if code, _ := b.get(s.JoinPath()); code != http.StatusSeeOther {
		t.Fatalf("join: %d", code)
	}
	return b
}

// webmcpToolset lists the session's tools for the WebMCP consumer with a
// toolset of the test's own: the reference the offered list must match.
func webmcpToolset(t *testing.T, s *console.Session) map[string]surface.Tool {
	t.Helper()
	ts, err := surface.NewToolset(s.Registry(), surface.ToolsetOptions{Consumer: console.WebMCPConsumer, Topology: surface.TopologyRemote})
	if err != nil {
		t.Fatal(err)
	}
	defer ts.Close()
	out := map[string]surface.Tool{}
	for _, tool := range ts.Tools() {
		out[tool.Name] = tool
	}
	return out
}

// available returns the sorted names of the available tools.
func available(tools map[string]surface.Tool) []string {
	var out []string
	for name, tool := range tools {
		if tool.State.Available {
			out = append(out, name)
		}
	}
	slices.Sort(out)
	return out
}

const (
	toolReadState  = "view_devices__table__readState"
	toolSelectRows = "view_devices__table__selectRows"
	toolClear      = "view_devices__table__clearSelection"
	toolOpen       = "view_devices__table__openDevice"
	toolDisable    = "domain_devices__disable"
	toolEnable     = "domain_devices__enable"
	toolList       = "domain_devices__list"
	toolReadDevice = "view_devices__detail__readDevice"
	toolClose      = "view_devices__detail__close"
)

// The list offers exactly the available tools, each with the name,
// description and input schema of the session's toolset and a read-only
// hint for reads; a call runs through the session's surface as the
// WebMCP consumer and answers the envelope; after a change the list is
// the new available set. AS-ADAPTER-003 (available-only tools, refresh),
// AS-ADAPTER-002 (the envelope relayed as is).
func TestWebMCPListAndCall_AS_ADAPTER_003(t *testing.T) {
	d := newDemo(t, console.Options{})
	s := d.session(t)
	b := d.webmcpBrowser(t, s)

	l := b.webmcpTools()
	ref := webmcpToolset(t, s)
	if !slices.Equal(l.names(), available(ref)) {
		t.Fatalf("offered %v, available %v", l.names(), available(ref))
	}
	// Unavailable tools exist but are not offered: nothing is selected.
	for _, name := range []string{toolClear, toolDisable, toolEnable} {
		if _, exists := ref[name]; !exists || ref[name].State.Available {
			t.Fatalf("%s should exist and be unavailable: %+v", name, ref[name])
		}
		if slices.Contains(l.names(), name) {
			t.Fatalf("%s is offered while unavailable", name)
		}
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
		readOnly := tool.Annotations != nil && tool.Annotations.ReadOnlyHint
		if readOnly != (tool.Name == toolReadState || tool.Name == toolList) {
			t.Errorf("%s: readOnlyHint %v", tool.Name, readOnly)
		}
	}

	// A call performs the action, as the WebMCP consumer.
	res := b.webmcpCall(toolSelectRows, l.SurfaceVersion, `{"ids":["d9","d10"]}`)
	if res.Status != surface.StatusOK || res.CapabilityID != "view:devices.table.selectRows" || !strings.HasPrefix(res.InvocationID, "inv_") {
		t.Fatalf("selectRows: %+v", res)
	}
	res = b.webmcpCall(toolReadState, l.SurfaceVersion, `{}`)
	var st console.TableState
	if err := res.Decode(&st); err != nil || !slices.Equal(st.Selection, []string{"d9", "d10"}) {
		t.Fatalf("readState: %v %+v", err, res)
	}
	if !slices.ContainsFunc(s.Activity(), func(e surface.AuditEvent) bool {
		return e.CapabilityID == "view:devices.table.selectRows" && e.ConsumerID == "webmcp:browser"
	}) {
		t.Fatal("no audit record of the call by webmcp:browser")
	}
	// Invalid input: the registry's error, relayed as the result.
	res = b.webmcpCall(toolSelectRows, l.SurfaceVersion, `{"ids":"d9"}`)
	requireCode(t, res, string(surface.CodeInvalidInput))

	// Refresh: the selection made clearSelection, disable and enable
	// available.
	l2 := b.webmcpTools()
	ref = webmcpToolset(t, s)
	if !slices.Equal(l2.names(), available(ref)) {
		t.Fatalf("after selecting: offered %v, available %v", l2.names(), available(ref))
	}
	for _, name := range []string{toolClear, toolDisable, toolEnable} {
		if !slices.Contains(l2.names(), name) {
			t.Fatalf("%s is not offered after selecting: %v", name, l2.names())
		}
	}
	if l2.SurfaceVersion == l.SurfaceVersion {
		t.Fatal("the availability flip did not move the surface version")
	}
	// A tool of the first list still works where nothing it targets changed.
	res = b.webmcpCall(toolClear, l2.SurfaceVersion, `{}`)
	if res.Status != surface.StatusOK {
		t.Fatalf("clearSelection: %+v", res.Error)
	}
	if l3 := b.webmcpTools(); slices.Contains(l3.names(), toolClear) || slices.Contains(l3.names(), toolDisable) {
		t.Fatalf("unavailable again but still offered: %v", l3.names())
	}
}

// A call that needs the user's approval waits for it and returns the
// final result: approved, the procedure runs once; denied, nothing runs
// and the envelope says CONFIRMATION_INVALID denied; a session that ends
// while a call waits ends the wait. The approval card shows the WebMCP
// consumer. AS-ADAPTER-003, with confirmation as for MCP.
func TestWebMCPCallWaitsForApproval_AS_ADAPTER_003(t *testing.T) {
	d := newDemo(t, console.Options{})
	s := d.session(t)
	b := d.webmcpBrowser(t, s)

	disable := func(ids string) (version string, done chan surface.Result) {
		l := b.webmcpTools()
		if res := b.webmcpCall(toolSelectRows, l.SurfaceVersion, `{"ids":`+ids+`}`); res.Status != surface.StatusOK {
			t.Fatalf("selectRows: %+v", res.Error)
		}
		l = b.webmcpTools()
		done = make(chan surface.Result, 1)
		go func() {
			body, _ := json.Marshal(map[string]any{"name": toolDisable, "surfaceVersion": l.SurfaceVersion, "input": map[string]any{"reason": "offline during the maintenance window"}})
			code, out, err := b.tryWebMCPPost(string(body))
			var res surface.Result
			if err != nil || code != http.StatusOK || json.Unmarshal([]byte(out), &res) != nil {
				res.Status = surface.ResultStatus(fmt.Sprintf("transport: %d %s %v", code, out, err))
			}
			done <- res
		}()
		return l.SurfaceVersion, done
	}
	await := func(done chan surface.Result) surface.Result {
		t.Helper()
		select {
		case res := <-done:
			return res
		case <-time.After(10 * time.Second):
			t.Fatal("the call did not return")
			return surface.Result{}
		}
	}

	// Approved: runs once.
	_, done := disable(`["d9","d10"]`)
	p := awaitPending(t, s)
	if p.ConsumerKey != "webmcp:browser" || p.CapabilityID != domain.DisableID || !strings.Contains(p.Summary, "hvac-ctrl-lon-03") {
		t.Fatalf("pending %+v", p)
	}
	select {
	case res := <-done:
		t.Fatalf("the call returned before the decision: %+v", res)
	default:
	}
	if _, ok := s.Decide(p.ConfirmationID, true, "olivia (operator, test)"); !ok {
		t.Fatal("decide")
	}
	res := await(done)
	if res.Status != surface.StatusOK || string(res.Output) != `{"disabled":2}` {
		t.Fatalf("approved disable: %+v %+v", res, res.Error)
	}
	if st := d.status(t); st["d9"] != "disabled" || st["d10"] != "disabled" {
		t.Fatalf("statuses %v", st)
	}

	// Denied: nothing runs.
	before := d.status(t)["d4"]
	_, done = disable(`["d4"]`)
	p = awaitPending(t, s)
	s.Decide(p.ConfirmationID, false, "olivia (operator, test)")
	res = await(done)
	requireCode(t, res, string(surface.CodeConfirmationInvalid))
	if reason, _ := res.Error.Details["reason"].(string); reason != "denied" {
		t.Fatalf("denied: %+v", res.Error)
	}
	if d.status(t)["d4"] != before {
		t.Fatal("a denied disable ran")
	}

	// The session ends while a call waits: the call returns.
	_, done = disable(`["d4"]`)
	awaitPending(t, s)
	s.Close()
	if res := await(done); res.Status == surface.StatusOK {
		t.Fatalf("a call of a closed session succeeded: %+v", res)
	}
	if d.status(t)["d4"] != before {
		t.Fatal("the disable ran after the session ended")
	}
}

// Calls refer to the list they came from: a tool whose component was
// replaced or unmounted since answers the registry's staleness verdict,
// never the new registration; an unknown tool, or a list unknown or
// older than the 16 a session keeps, answers CAPABILITY_NOT_FOUND; the
// endpoints refuse requests without the
// session's cookie, cross-site posts and malformed bodies.
// AS-ADAPTER-003, AS-STALE-001, AS-LIFE-005.
func TestWebMCPStaleAndUnknown_AS_ADAPTER_003(t *testing.T) {
	d := newDemo(t, console.Options{})
	s := d.session(t)
	b := d.webmcpBrowser(t, s)

	// The page opens d1's panel; the list offers its tools.
	if code, _ := b.post("/ui/open", url.Values{"id": {"d1"}}); code != http.StatusNoContent {
		t.Fatalf("open d1: %d", code)
	}
	v1 := b.webmcpTools()
	if !slices.Contains(v1.names(), toolReadDevice) || !slices.Contains(v1.names(), toolClose) {
		t.Fatalf("the detail panel's tools are not offered: %v", v1.names())
	}
	// The panel navigates to d2: a new registration under the same names.
	if code, _ := b.post("/ui/open", url.Values{"id": {"d2"}}); code != http.StatusNoContent {
		t.Fatalf("open d2: %d", code)
	}
	v2 := b.webmcpTools()
	res := b.webmcpCall(toolReadDevice, v1.SurfaceVersion, `{}`)
	requireCode(t, res, string(surface.CodeStaleCapability))
	if reason, _ := res.Error.Details["reason"].(string); reason != "registration-replaced" {
		t.Fatalf("stale: %+v", res.Error)
	}
	res = b.webmcpCall(toolReadDevice, v2.SurfaceVersion, `{}`)
	var dd console.DeviceDetail
	if err := res.Decode(&dd); err != nil || dd.Device.ID != "d2" {
		t.Fatalf("readDevice through the new list: %v %+v", err, res)
	}
	// Closed through the new list; its tools leave the list and a call
	// of them answers COMPONENT_UNMOUNTED.
	if res := b.webmcpCall(toolClose, v2.SurfaceVersion, `{}`); res.Status != surface.StatusOK {
		t.Fatalf("close: %+v", res.Error)
	}
	if v3 := b.webmcpTools(); slices.Contains(v3.names(), toolReadDevice) {
		t.Fatalf("an unmounted panel's tool is still offered: %v", v3.names())
	}
	requireCode(t, b.webmcpCall(toolReadDevice, v2.SurfaceVersion, `{}`), string(surface.CodeComponentUnmounted))

	// Unknown tool, unknown list.
	v := b.webmcpTools().SurfaceVersion
	requireCode(t, b.webmcpCall("view_devices__table__explode", v, `{}`), string(surface.CodeCapabilityNotFound))
	res = b.webmcpCall(toolOpen, "9999", `{"id":"d3"}`)
	requireCode(t, res, string(surface.CodeCapabilityNotFound))
	if res.Error.Retry != surface.RetryAfterRefresh || !strings.HasPrefix(res.InvocationID, "inv_") || len(res.InvocationID) != 16 {
		t.Fatalf("unknown list: %+v", res)
	}
	requireCode(t, b.webmcpCall(toolOpen, "", `{"id":"d3"}`), string(surface.CodeCapabilityNotFound))
	// A session keeps the last 16 lists: older ones are unknown.
	for i := range 17 {
		if code, _ := b.post("/ui/toggle", url.Values{"id": {"d3"}}); code != http.StatusNoContent {
			t.Fatalf("toggle: %d", code)
		}
		if l := b.webmcpTools(); l.SurfaceVersion == v {
			t.Fatalf("toggle %d did not change the surface version", i)
		}
	}
	requireCode(t, b.webmcpCall(toolReadState, v, `{}`), string(surface.CodeCapabilityNotFound))
	if res := b.webmcpCall(toolReadState, b.webmcpTools().SurfaceVersion, `{}`); res.Status != surface.StatusOK {
		t.Fatalf("readState through the newest list: %+v", res.Error)
	}

	// Refusals before any call.
	if code, _ := b.webmcpPost(`{"surfaceVersion":"` + v + `"}`); code != http.StatusBadRequest {
		t.Fatalf("no name: %d", code)
	}
	if code, _ := b.webmcpPost(`{"name":"x"} {"name":"y"}`); code != http.StatusBadRequest {
		t.Fatalf("two bodies: %d", code)
	}
	if code, _ := b.webmcpPost(`{"name":"` + strings.Repeat("x", 2<<20) + `"}`); code != http.StatusRequestEntityTooLarge {
		t.Fatalf("oversized body: %d", code)
	}
	stranger := d.browser(t)
	if code, _ := stranger.get("/agentsurface/webmcp/tools"); code != http.StatusUnauthorized {
		t.Fatalf("list without a session: %d", code)
	}
	if code, _ := stranger.webmcpPost(`{"name":"` + toolOpen + `","surfaceVersion":"` + v + `"}`); code != http.StatusUnauthorized {
		t.Fatalf("call without a session: %d", code)
	}
	req, _ := http.NewRequest(http.MethodPost, d.srv.URL+"/agentsurface/webmcp/call", strings.NewReader(`{"name":"`+toolClear+`","surfaceVersion":"`+v+`"}`))
	req.Header.Set("Sec-Fetch-Site", "cross-site")
	resp, err := b.client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusForbidden {
		t.Fatalf("cross-site call: %d", resp.StatusCode)
	}
}

// A page's event stream opened with ?webmcp=1 carries the list at once
// and again whenever it changes, and only then; a plain stream carries
// none. AS-ADAPTER-003 (refresh over the page's live channel).
func TestWebMCPStreamRefresh_AS_ADAPTER_003(t *testing.T) {
	d := newDemo(t, console.Options{})
	s := d.session(t)
	b := d.webmcpBrowser(t, s)
	plain := b.events()
	wm := b.eventsAt(eventsPath + "&webmcp=1")

	next := func() offeredList {
		t.Helper()
		select {
		case data, ok := <-wm.tools:
			if !ok {
				t.Fatal("the stream ended")
			}
			var l offeredList
			if err := json.Unmarshal([]byte(data), &l); err != nil {
				t.Fatal(err)
			}
			return l
		case <-time.After(10 * time.Second):
			t.Fatal("no tools event")
			return offeredList{}
		}
	}
	first := next()
	if !slices.Equal(first.names(), available(webmcpToolset(t, s))) || slices.Contains(first.names(), toolClear) {
		t.Fatalf("first tools event %v", first.names())
	}
	// The user selects a row in the page: the tools that became
	// available are offered.
	if code, _ := b.post("/ui/toggle", url.Values{"id": {"d3"}}); code != http.StatusNoContent {
		t.Fatalf("toggle: %d", code)
	}
	var l offeredList
	for l = next(); !slices.Contains(l.names(), toolClear); l = next() {
	}
	if !slices.Equal(l.names(), available(webmcpToolset(t, s))) {
		t.Fatalf("after the selection: %v", l.names())
	}
	// The plain stream shows the selection too. (A stream renders the
	// session as it is when it wakes, so each state is awaited before the
	// next change: it may skip a state that has already passed.)
	plain.await(t, "table", func(html string) bool { return strings.Contains(html, `class="selected"`) })
	// The user clears it: they are withdrawn.
	if code, _ := b.post("/ui/clear", nil); code != http.StatusNoContent {
		t.Fatalf("clear: %d", code)
	}
	for l = next(); slices.Contains(l.names(), toolClear); l = next() {
	}
	if !slices.Equal(l.names(), first.names()) {
		t.Fatalf("after clearing: %v, want %v", l.names(), first.names())
	}
	// The plain stream saw the clearing too, and no tools event (one sent
	// with any of its patches would have been read before the last one).
	plain.await(t, "table", func(html string) bool { return !strings.Contains(html, `class="selected"`) })
	select {
	case data := <-plain.tools:
		t.Fatalf("a plain stream got a tools event: %s", data)
	default:
	}
}

// POST /webmcp/call takes any body from the page (and so from anyone who
// can run script in it) without panicking or hanging: it answers 200 with
// a result envelope, 400 or 413. A call that needs approval waits for it;
// here every request is denied as soon as it is pending.
// AS-ADAPTER-003.
func FuzzWebMCPCall(f *testing.F) {
	d := newDemo(f, console.Options{})
	s := d.session(f)
	stop := s.Registry().Confirmations().Subscribe(func(pending []surface.PendingConfirmation) {
		for _, p := range pending {
			go s.Decide(p.ConfirmationID, false, "fuzz") // not from the listener: it runs under the store's delivery
		}
	})
	f.Cleanup(stop)
	b := d.browser(f)
	if code, _ := b.get(s.JoinPath()); code != http.StatusSeeOther {
		f.Fatalf("join: %d", code)
	}
	list := b.webmcpTools()
	for _, seed := range []string{
		`{"name":"view_devices__table__setFilter","surfaceVersion":"` + list.SurfaceVersion + `","input":{"status":"offline"}}`,
		`{"name":"view_devices__table__readState","surfaceVersion":"` + list.SurfaceVersion + `"}`,
		`{"name":"view_devices__table__selectRows","surfaceVersion":"` + list.SurfaceVersion + `","input":{"ids":["d1",7]}}`,
		`{"name":"nope","surfaceVersion":"0","input":[]}`, `{"name":""}`, `[]`, `null`, `{"name":"x"} {}`, `{"name":"x","input":"{}"}`,
		`{"name":"view_devices__table__setFilter","surfaceVersion":"` + list.SurfaceVersion + `","input":{"status":"offline","status":"online"}}`,
	} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, body string) {
		ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
		defer cancel()
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, d.srv.URL+"/agentsurface/webmcp/call", strings.NewReader(body))
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
