package console_test

import (
	"context"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentsurface/agentsurface/examples/devices/console"
	"github.com/agentsurface/agentsurface/examples/devices/domain"
	"github.com/agentsurface/agentsurface/surface"
	"github.com/chromedp/chromedp"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// untilText waits (at most 30s, polling the DOM) until the text of sel
// contains want.
func untilText(sel, want string) chromedp.Action[chromedp.Void] {
	return chromedp.Poll[chromedp.Void](`(document.querySelector(` + jsString(sel) + `)?.textContent ?? '').includes(` + jsString(want) + `)`)
}

// jsString quotes s for JavaScript.
func jsString(s string) string {
	return "'" + strings.NewReplacer(`\`, `\\`, `'`, `\'`, "\n", `\n`).Replace(s) + "'"
}

// In a real Chromium: the approval card offers "approve, and allow this
// for N minutes for these devices", its terms naming the devices; the
// person picks 5 minutes and clicks; the agent's retry runs, and the
// Grants card lists the grant (the devices by name, the reason, the
// calls left), live: a later disable within it spends a use, unasked.
// Revoke in the card ends it: the card empties, and the agent's next
// call within its former terms asks again (a new approval card). A
// screenshot of the page with the grant is saved as an artifact.
func TestBrowserGrantsCard(t *testing.T) {
	d := newDemo(t, console.Options{})
	ctx, s := openPage(t, d, `#table tr[data-id="d9"]`)
	m := d.dial(t, s.Token())
	requireCode(t, call(t, m, capSelect, `{"ids":["d9","d10"]}`), "ok")
	requireCode(t, call(t, m, domain.DisableID, reasonArgs), string(surface.CodeConfirmationRequired))

	const offer = `#agentsurface-approvals .approval .grant-offer`
	if err := chromedp.Do(ctx, chromedp.WaitVisible(offer+` button.grant`)); err != nil {
		t.Fatal(err)
	}
	text, err := chromedp.Run(ctx, chromedp.Text(offer))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"Approve, and allow this", "for these devices", "badge-reader-lon-02 (d9)", "hvac-ctrl-lon-03 (d10)", "at most 10 times"} {
		if !strings.Contains(text, want) {
			t.Fatalf("the offer lacks %q: %s", want, text)
		}
	}
	if err := chromedp.Do(ctx,
		chromedp.SetValue(offer+` select[name="minutes"]`, "5"),
		chromedp.Click(offer+` button.grant`),
		chromedp.WaitNotPresent(`#agentsurface-approvals .approval`),
		chromedp.WaitVisible(`#grants .grant-row button.revoke`),
	); err != nil {
		t.Fatal(err)
	}
	gs := s.Grants()
	if len(gs) != 1 || gs[0].ExpiresAt.Sub(gs[0].CreatedAt).Minutes() != 5 || gs[0].CreatedBy != "olivia (operator, browser)" {
		t.Fatalf("grants %+v", gs)
	}
	row, err := chromedp.Run(ctx, chromedp.Text(`#grants .grant-row`))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"Disable devices", "mcp-bridge:agent", "badge-reader-lon-02 (d9), hvac-ctrl-lon-03 (d10)", taskReason, "10 calls left of 10", gs[0].GrantID} {
		if !strings.Contains(row, want) {
			t.Fatalf("the Grants card lacks %q: %s", want, row)
		}
	}

	// The retry runs on the approval; a later disable within the grant
	// spends a use, unasked.
	requireCode(t, call(t, m, domain.DisableID, reasonArgs), "ok")
	requireCode(t, call(t, m, capEnable, `{"reason":"back for a check"}`), "ok")
	res := call(t, m, domain.DisableID, reasonArgs)
	if res.GrantID != gs[0].GrantID {
		t.Fatalf("within the grant: %+v", res)
	}
	if _, err := chromedp.Run(ctx, untilText(`#grants .grant-row`, "9 calls left of 10")); err != nil {
		t.Fatal(err)
	}
	shot, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(artifactDir(t), "console-grants-card.png")
	if err := os.WriteFile(path, shot, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("screenshot of the console with a standing grant: %s", path)

	// Revoke: the card empties; the next call asks again.
	if err := chromedp.Do(ctx,
		chromedp.Click(`#grants .grant-row button.revoke`),
		chromedp.WaitNotPresent(`#grants .grant-row`),
	); err != nil {
		t.Fatal(err)
	}
	if _, err := chromedp.Run(ctx, untilText(`#grants`, "No standing grants")); err != nil {
		t.Fatal(err)
	}
	if len(s.Grants()) != 0 {
		t.Fatalf("grants after Revoke: %+v", s.Grants())
	}
	requireCode(t, call(t, m, capEnable, `{"reason":"back again"}`), "ok")
	requireCode(t, call(t, m, domain.DisableID, reasonArgs), string(surface.CodeConfirmationRequired))
	if err := chromedp.Do(ctx, chromedp.WaitVisible(`#agentsurface-approvals .approval button.approve`)); err != nil {
		t.Fatal(err)
	}
	if st := d.status(t); st["d9"] != "offline" || st["d10"] != "offline" {
		t.Fatalf("statuses %v", st)
	}
}

// An MCP client that declares URL-mode elicitation (the go-sdk client)
// is sent to the approve page; the test opens the URL it received in
// Chromium as the session's user (the browser joined the session, so it
// holds its cookie) and clicks Approve; the very call the agent made
// completes, the devices are disabled, and the decision is recorded as
// reached by URL elicitation. AS-CONFIRM-001 (the page shows the exact
// input), AS-CONFIRM-003.
func TestBrowserApprovesURLElicitation(t *testing.T) {
	d := newDemo(t, console.Options{})
	ctx, s := openPage(t, d, `#table tr[data-id="d9"]`)
	asked := make(chan *mcp.ElicitParams, 1)
	opts := &mcp.ClientOptions{
		Capabilities: &mcp.ClientCapabilities{Elicitation: &mcp.ElicitationCapabilities{URL: &mcp.URLElicitationCapabilities{}}},
		ElicitationHandler: func(_ context.Context, req *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
			asked <- req.Params
			return &mcp.ElicitResult{Action: "accept"}, nil
		},
	}
	tr := &mcp.StreamableClientTransport{Endpoint: d.mcpURL(), MaxRetries: -1,
		HTTPClient: &http.Client{Transport: bearerRT{s.Token(), d.srv.Client().Transport}}}
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "url-agent", Version: "1.0.0"}, opts).
		Connect(ctx, tr, &mcp.ClientSessionOptions{ProtocolVersion: "2025-11-25"})
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	m := d.dial(t, s.Token())
	requireCode(t, call(t, m, capSelect, `{"ids":["d9","d10"]}`), "ok")

	done := make(chan *mcp.CallToolResult, 1)
	go func() {
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "domain_devices__disable", Arguments: map[string]any{"reason": taskReason}})
		if err != nil {
			res = &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: err.Error()}}}
		}
		done <- res
	}()
	var ep *mcp.ElicitParams
	select {
	case ep = <-asked:
	case <-ctx.Done():
		t.Fatal("no URL elicitation came")
	}
	if ep.Mode != "url" || !strings.HasPrefix(ep.URL, d.srv.URL+"/agentsurface/approve/") || !strings.Contains(ep.URL, "via=url") {
		t.Fatalf("elicitation %+v", ep)
	}
	if err := chromedp.Do(ctx,
		chromedp.Navigate(ep.URL),
		chromedp.WaitVisible(`main[data-state="ask"] button.approve`),
	); err != nil {
		t.Fatal(err)
	}
	page, err := chromedp.Run(ctx, chromedp.Text(`main`))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"badge-reader-lon-02", "hvac-ctrl-lon-03", taskReason, `"d9"`, "mcp-bridge:agent", "Approve, and allow"} {
		if !strings.Contains(page, want) {
			t.Fatalf("the approve page lacks %q: %s", want, page)
		}
	}
	if st := d.status(t); st["d9"] != "offline" {
		t.Fatal("ran before the click")
	}
	if err := chromedp.Do(ctx,
		chromedp.Click(`main[data-state="ask"] button.approve`),
		chromedp.WaitVisible(`main[data-state="decided"] .outcome[data-outcome="approved"]`),
	); err != nil {
		t.Fatal(err)
	}
	var res *mcp.CallToolResult
	select {
	case res = <-done:
	case <-ctx.Done():
		t.Fatal("the call did not complete")
	}
	if res.IsError {
		t.Fatalf("the call: %+v", res.Content)
	}
	if st := d.status(t); st["d9"] != "disabled" || st["d10"] != "disabled" {
		t.Fatalf("statuses %v", st)
	}
	ds := s.Decisions()
	if len(ds) != 1 || ds[0].Channel != surface.ChannelURL || ds[0].Actor != "olivia (operator, browser)" || ds[0].Call == nil || !ds[0].Call.Executed {
		t.Fatalf("decisions %+v", ds)
	}
}
