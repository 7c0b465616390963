package console_test

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/agentsurface/agentsurface/examples/devices/console"
	"github.com/agentsurface/agentsurface/internal/browsertest"
	"github.com/agentsurface/agentsurface/surface"
	"github.com/chromedp/chromedp"
)

// artifactDir is where tests leave files for people to look at:
// $AGENTSURFACE_ARTIFACTS, else the system's temp dir.
func artifactDir(t *testing.T) string {
	dir := os.Getenv("AGENTSURFACE_ARTIFACTS")
	if dir == "" {
		dir = filepath.Join(os.TempDir(), "agentsurface-artifacts")
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	return dir
}

// headless starts a headless Chromium for the test, or skips it (see
// browsertest.Headless): call it after newDemo, so that the pages close
// before the server does.
func headless(t *testing.T) context.Context { return browsertest.Headless(t) }

// openPage opens the page of a new session of d in a headless Chromium,
// as the demo's printed link does, and waits until sel is visible. The
// context ends with the test, after at most a minute.
func openPage(t *testing.T, d *demo, sel string) (context.Context, *console.Session) {
	t.Helper()
	browser := headless(t)
	s, err := d.app.NewSession(console.SessionOptions{})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(browser, 60*time.Second)
	t.Cleanup(cancel)
	// The stream's first patch replaces every fragment: wait for it, so
	// that no element found here is swapped out under a click.
	if err := chromedp.Do(ctx, chromedp.Navigate(d.srv.URL+s.JoinPath()), chromedp.WaitReady(`body[data-live]`), chromedp.WaitVisible(sel)); err != nil {
		t.Fatal(err)
	}
	return ctx, s
}

// The console in a real headless Chromium while the scripted agent works
// over MCP: the agent's selection is highlighted in the DOM, its
// destructive call shows an approval card with the devices by name, a
// click on Approve lets the agent's retry run, and the table shows the
// new statuses without a reload. A screenshot of the page with the
// pending approval is saved as an artifact.
func TestBrowserApprovesAgentRequest(t *testing.T) {
	d := newDemo(t, console.Options{})
	ctx, s := openPage(t, d, `#table tr[data-id="d9"]`)
	// A marker that a reload would wipe.
	if _, err := chromedp.Run(ctx, chromedp.Evaluate[bool](`window.noReload = true`)); err != nil {
		t.Fatal(err)
	}

	// The agent works over MCP and waits for the click.
	var tr steps
	agentDone := make(chan error, 1)
	go func() {
		agentDone <- s.PlayScripted(ctx, console.ScriptedRun{URL: d.mcpURL(), HTTPClient: d.srv.Client(), Report: tr.report})
	}()

	// The approval card appears, with the devices by name.
	if err := chromedp.Do(ctx, chromedp.WaitVisible(`#agentsurface-approvals .approval button.approve`)); err != nil {
		t.Fatal(err)
	}
	card, err := chromedp.Run(ctx, chromedp.Text(`#agentsurface-approvals .approval`))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"badge-reader-lon-02", "hvac-ctrl-lon-03", "offline during the maintenance window"} {
		if !strings.Contains(card, want) {
			t.Fatalf("the approval card lacks %q: %s", want, card)
		}
	}
	// The agent's selection is highlighted in the DOM.
	selected, err := chromedp.Run(ctx, chromedp.Evaluate[[]string](
		`[...document.querySelectorAll('#table tr.selected[aria-selected="true"]')].map(tr => tr.dataset.id)`))
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(selected)
	if !slices.Equal(selected, []string{"d10", "d9"}) {
		t.Fatalf("highlighted rows %v, want d9 and d10", selected)
	}
	shot, err := chromedp.Run(ctx, chromedp.FullScreenshot(100)) // quality 100: a PNG
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(artifactDir(t), "console-pending-approval.png")
	if err := os.WriteFile(path, shot, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("screenshot of the console with a pending approval: %s", path)

	// Approve; the agent's retry runs; the table shows the statuses.
	if err := chromedp.Do(ctx,
		chromedp.Click(`#agentsurface-approvals .approval button.approve`),
		chromedp.WaitNotPresent(`#agentsurface-approvals .approval`),
		chromedp.WaitVisible(`#table tr[data-id="d9"] .s-disabled`),
		chromedp.WaitVisible(`#table tr[data-id="d10"] .s-disabled`),
	); err != nil {
		t.Fatal(err)
	}
	if err := <-agentDone; err != nil {
		t.Fatalf("the agent: %v (%v)", err, tr.outcomes())
	}
	noReload, err := chromedp.Run(ctx, chromedp.Evaluate[bool](`window.noReload === true`))
	if err != nil || !noReload {
		t.Fatalf("the page reloaded (%v)", err)
	}
	decided, err := chromedp.Run(ctx, chromedp.Text(`#agentsurface-approvals .decisions`))
	if err != nil || !strings.Contains(decided, "approved by olivia") {
		t.Fatalf("decisions %q %v", decided, err)
	}
	if st := d.status(t); st["d9"] != "disabled" || st["d10"] != "disabled" {
		t.Fatalf("statuses %v", st)
	}
	if ds := s.Decisions(); len(ds) != 1 || !strings.HasPrefix(ds[0].Actor, "olivia") {
		t.Fatalf("decisions %+v", ds)
	}
}

// In a real browser, the Live surface card explains what policies did: a
// capability hidden from the agent is struck out and tagged with the
// policy that hid it. A screenshot of the card is saved as an artifact.
// AS-EXPLAIN-001.
func TestBrowserSurfaceCardExplains(t *testing.T) {
	hideMutations := surface.Policy{Name: "agents-read-only", Discover: func(pc *surface.PolicyContext) surface.Decision {
		if pc.Plane == surface.PlaneDomain && pc.Effect != surface.EffectServerQuery && pc.Consumer.ID == console.ConsoleConsumer.ID {
			return surface.Hide()
		}
		return surface.Expose()
	}}
	d := newDemo(t, console.Options{Policies: []surface.Policy{hideMutations}})
	ctx, _ := openPage(t, d, `#surface li.hidden`)
	hidden, err := chromedp.Run(ctx, chromedp.Evaluate[[]string](
		`[...document.querySelectorAll('#surface li.hidden')].map(li => li.querySelector('code').textContent + ' | ' + li.querySelector('.policy').textContent + ' | ' + getComputedStyle(li.querySelector('code')).textDecorationLine)`))
	if err != nil {
		t.Fatal(err)
	}
	want := []string{
		"domain:devices.disable | agents-read-only (registry): hide | line-through",
		"domain:devices.enable | agents-read-only (registry): hide | line-through",
	}
	if !slices.Equal(hidden, want) {
		t.Fatalf("hidden rows:\n got %q\nwant %q", hidden, want)
	}
	shot, err := chromedp.Run(ctx, chromedp.Screenshot(`#surface`))
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(artifactDir(t), "console-explained-surface.png")
	if err := os.WriteFile(path, shot, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("screenshot of the explained surface card: %s", path)
}
