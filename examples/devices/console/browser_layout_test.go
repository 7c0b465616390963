package console_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/agentsurface/agentsurface/examples/devices/agent"
	"github.com/agentsurface/agentsurface/examples/devices/console"
	"github.com/agentsurface/agentsurface/surface"
	"github.com/agentsurface/agentsurface/webhost"
	"github.com/chromedp/chromedp"
)

// talker is an agent for the layout test: it reads the table a few
// times through the page's toolset, then says a long reply, with a word
// too long for any line, and ends.
type talker struct{ reply string }

func (a talker) Run(ctx context.Context, _ string, tools agent.Tools, report func(agent.Step)) error {
	list, err := tools.List(ctx)
	if err != nil {
		return err
	}
	n := 0
	for _, t := range list {
		if t.CapabilityID == "view:devices.table.readState" {
			for range 12 {
				res, err := tools.Call(ctx, t.Name, nil)
				if err != nil {
					return err
				}
				n++
				report(agent.Step{N: n, Title: "read the table", Tool: t.Name, Outcome: agent.Outcome(res)})
			}
		}
	}
	report(agent.Step{N: n + 1, Title: a.reply}) // said
	return nil
}

// layoutProblems measures the page: nothing is wider than the viewport,
// no card's content overflows it, every visible element of a card lies
// within the card, and no cell, list item or command is clipped (its
// content wider than its box). It returns what is wrong.
const layoutProblems = `(() => {
  const out = [];
  const W = document.documentElement.clientWidth;
  const name = (el) => el.tagName.toLowerCase() + (el.id ? '#' + el.id : '') + (el.className ? '.' + String(el.className).trim().replace(/\s+/g, '.') : '') +
    ' "' + el.textContent.trim().slice(0, 40) + '"';
  if (document.documentElement.scrollWidth > W + 1) out.push('the page scrolls sideways: ' + document.documentElement.scrollWidth + ' > ' + W);
  for (const card of document.querySelectorAll('.card')) {
    const cr = card.getBoundingClientRect();
    if (cr.left < -1 || cr.right > W + 1) out.push(name(card) + ' is outside the viewport: ' + cr.left + '..' + cr.right);
    if (card.scrollWidth > card.clientWidth + 1) out.push(name(card) + ' overflows: ' + card.scrollWidth + ' > ' + card.clientWidth);
    for (const el of card.querySelectorAll('th, td, li, pre, code, button, select, input, p, h2, h3, strong, span, table, dd, dt')) {
      if (el.getClientRects().length === 0) continue; // not rendered
      const r = el.getBoundingClientRect();
      if (r.width === 0) continue;
      if (r.left < cr.left - 1 || r.right > cr.right + 1) out.push(name(el) + ' sticks out of ' + name(card) + ': ' + Math.round(r.left) + '..' + Math.round(r.right) + ' in ' + Math.round(cr.left) + '..' + Math.round(cr.right));
      if (el.matches('th, td, li, pre, p') && el.scrollWidth > el.clientWidth + 1) out.push(name(el) + ' is clipped: ' + el.scrollWidth + ' > ' + el.clientWidth);
    }
  }
  return out;
})()`

// The console at desktop and phone widths, with everything on screen: a
// pending approval, a decision that the domain then refused, the detail
// panel, the agent's log with a long reply, a full Activity card. At
// 1280, 1440 and 390 px nothing is clipped or sticks out (measured on the
// elements' boxes), the Activity card shows its Outcome and ms columns,
// the agent's log keeps its newest line in view (and a log scrolled up
// stays where it is), the Live surface states a disabled capability's
// reason once, the page logs no error (its Content Security Policy
// included), and the page that answers an unknown join link fits too.
// Screenshots of each width are left as artifacts.
func TestBrowserLayout(t *testing.T) {
	reply := "Done. " + strings.Repeat("The offline devices are disabled and the table shows them. ", 6) + strings.Repeat("x", 300)
	d := newDemo(t, console.Options{Agent: talker{reply: reply}, AgentName: "layout-model"})
	s := d.session(t)
	m := d.dial(t, s.Token())

	// An approval the domain then refuses: approved for the viewer.
	s.SetUser(console.Viewer)
	requireCode(t, call(t, m, "view:devices.table.selectRows", `{"ids":["d6"]}`), "ok")
	res := call(t, m, "domain:devices.disable", `{"reason":"flapping link"}`)
	requireCode(t, res, string(surface.CodeConfirmationRequired))
	if _, ok := s.Decide(res.Error.Details["confirmationId"].(string), true, "victor (viewer, browser)"); !ok {
		t.Fatal("decide")
	}
	requireCode(t, call(t, m, "domain:devices.disable", `{"reason":"flapping link"}`), string(surface.CodeNotAuthorized))
	s.SetUser(console.Operator)
	// A pending approval, and the detail panel open.
	requireCode(t, call(t, m, "view:devices.table.selectRows", `{"ids":["d9","d10"]}`), "ok")
	requireCode(t, call(t, m, "domain:devices.disable", `{"reason":"offline during the maintenance window, as agreed with the facilities team"}`), string(surface.CodeConfirmationRequired))
	requireCode(t, call(t, m, "view:devices.table.openDevice", `{"id":"d9"}`), "ok")
	done, err := s.Ask("Disable the offline devices in London, and tell me which ones.")
	if err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}

	browser := headless(t)
	if err := chromedp.Do(browser); err != nil { // start the browser
		t.Fatal(err)
	}
	tb := openTab(t, browser, d, s, "")
	tb.do(chromedp.WaitVisible(`#agentsurface-approvals .approval`), chromedp.WaitVisible(`#detail .detail-card`))
	atEnd := `(() => { const l = document.querySelector('#agent .chat'); return l.scrollHeight > l.clientHeight && l.scrollHeight - l.scrollTop - l.clientHeight < 8; })()`
	for _, w := range []int64{1280, 1440, 390} {
		tb.do(chromedp.EmulateViewport(w, 900))
		// The page follows the resize at its resize event.
		wctx, cancel := context.WithTimeout(tb.ctx, 30*time.Second) // a bound on failure: a busy machine is slow to lay out
		_, err := chromedp.Run(wctx, chromedp.Poll[bool](atEnd))
		cancel()
		if err != nil {
			t.Errorf("at %d px the agent's log does not show its newest line", w)
		}
		if p := eval[[]string](tb, layoutProblems); len(p) > 0 {
			t.Errorf("at %d px:\n  %s", w, strings.Join(p, "\n  "))
		}
		// The Activity card: its Outcome and ms headings (or, on a phone,
		// each row's labelled outcome) are shown within the card.
		visible := eval[bool](tb, `(() => {
			const card = document.getElementById('activity').getBoundingClientRect();
			const wide = getComputedStyle(document.querySelector('.feed thead')).display !== 'none';
			const cells = wide ? [...document.querySelectorAll('.feed th')].slice(4) : [...document.querySelectorAll('.feed td.outcome')].slice(0, 3);
			return cells.length > 0 && cells.every((c) => { const r = c.getBoundingClientRect(); return r.width > 0 && r.left >= card.left && r.right <= card.right; });
		})()`)
		if !visible {
			t.Errorf("at %d px the Activity card hides its outcome or ms column", w)
		}
		shot, err := chromedp.Run(tb.ctx, chromedp.FullScreenshot(100))
		if err != nil {
			t.Fatal(err)
		}
		path := filepath.Join(artifactDir(t), fmt.Sprintf("console-layout-%d.png", w))
		if err := os.WriteFile(path, shot, 0o644); err != nil {
			t.Fatal(err)
		}
		t.Logf("screenshot at %d px: %s", w, path)
	}

	// What the cards say: the refused approval, components, reads.
	decisions := eval[string](tb, `document.querySelector('#agentsurface-approvals .decisions').textContent`)
	if !strings.Contains(decisions, "approved by victor (viewer, browser) → refused by the domain service: NOT_AUTHORIZED") {
		t.Errorf("decisions: %q", decisions)
	}
	feed := eval[string](tb, `document.getElementById('activity').textContent`)
	for _, want := range []string{"devices.detail d9", "devices.table main", "read", "view:devices.table.readState", "approved → refused by the domain service: NOT_AUTHORIZED"} {
		if !strings.Contains(feed, want) {
			t.Errorf("the Activity card lacks %q", want)
		}
	}
	if strings.Contains(feed, "reg_") {
		t.Errorf("the Activity card shows a bare registration id")
	}
	// With nothing selected, the bound procedures are unavailable: the
	// Live surface says why once (not the reason and the live note).
	requireCode(t, call(t, m, "view:devices.table.clearSelection", ""), "ok")
	if _, err := chromedp.Run(tb.ctx, chromedp.Poll[bool](`document.querySelectorAll('#surface li.unavailable').length >= 3`)); err != nil {
		t.Fatal(err)
	}
	for _, li := range eval[[]string](tb, `[...document.querySelectorAll('#surface li.unavailable')].map((li) => li.textContent)`) {
		if strings.Count(strings.ToLower(li), "selected") > 1 || strings.Count(li, "—") != 1 {
			t.Errorf("the Live surface repeats a reason: %q", li)
		}
	}

	// The agent's log shows its newest line, and keeps it in view as the
	// next run writes; scrolled up, it stays where it was.
	tb.do(chromedp.EmulateViewport(1440, 900))
	if eval[bool](tb, `(() => { const li = document.querySelector('#agent .chat li.step:last-child, #agent .chat li:nth-last-child(2)'); return li.scrollWidth > li.clientWidth + 1; })()`) {
		t.Error("the long reply is wider than the log")
	}
	tb.do(chromedp.SendKeys(`.agent-card input[name=prompt]`, "again"), chromedp.Click(`.agent-card button.run`))
	pctx, cancel := context.WithTimeout(tb.ctx, 30*time.Second)
	defer cancel()
	if _, err := chromedp.Run(pctx, chromedp.Poll[bool](`document.querySelectorAll('#agent .chat li.you').length === 2 && document.querySelector('#agent .chat').dataset.busy === 'false'`)); err != nil {
		t.Fatalf("%v: chat %+v, banner %q", err, s.Chat(), eval[string](tb, `document.getElementById('agentsurface-banner').textContent`))
	}
	if !eval[bool](tb, atEnd) {
		t.Error("after an update the agent's log is not at its newest line")
	}
	// What the agent said reads as speech, not as a step with an outcome;
	// a step names its tool once, breakable at its separators only.
	if eval[bool](tb, `[...document.querySelectorAll('#agent .chat li')].some((li) => li.textContent.includes('→ said'))`) ||
		!eval[bool](tb, `[...document.querySelectorAll('#agent .chat li.say')].some((li) => li.textContent.startsWith('Done. The offline devices'))`) {
		t.Error("the agent's reply is not shown as what it said")
	}
	for _, li := range eval[[]string](tb, `[...document.querySelectorAll('#agent .chat li.step')].map((li) => li.innerHTML)`) {
		if strings.Count(li, "readState") != 1 || !strings.Contains(li, "_<wbr>") {
			t.Errorf("a step names its tool more than once or unbreakably: %s", li)
		}
	}
	// The scroll event of this scroll is swallowed: on a busy machine it
	// fires after the next patch arrives (at the next frame), and the page
	// must not depend on it.
	tb.do(chromedp.Evaluate[chromedp.Void](`window.addEventListener('scroll', (e) => e.stopPropagation(), true); document.querySelector('#agent .chat').scrollTop = 0`))
	if _, err := s.Ask("and once more"); err != nil {
		t.Fatal(err)
	}
	if _, err := chromedp.Run(tb.ctx, chromedp.Poll[bool](`[...document.querySelectorAll('#agent .chat li.you')].some((li) => li.textContent === 'and once more') && document.querySelector('#agent .chat').dataset.busy === 'false'`)); err != nil {
		t.Fatal(err)
	}
	if top := eval[float64](tb, `document.querySelector('#agent .chat').scrollTop`); top != 0 {
		t.Errorf("a log scrolled up moved to %v", top)
	}
	if p := tb.problems(); len(p) > 0 {
		t.Errorf("the page logged: %q", p)
	}

	// The page of an unknown join link (webhost's).
	tb.do(chromedp.Navigate(d.srv.URL+"/agentsurface/join/nope"), chromedp.WaitVisible(`main h1`))
	for _, w := range []int64{1280, 390} {
		tb.do(chromedp.EmulateViewport(w, 700))
		if p := eval[[]string](tb, layoutProblems); len(p) > 0 {
			t.Errorf("the join error page at %d px:\n  %s", w, strings.Join(p, "\n  "))
		}
	}
	shot, err := chromedp.Run(tb.ctx, chromedp.FullScreenshot(100))
	if err == nil {
		_ = os.WriteFile(filepath.Join(artifactDir(t), "console-join-unknown-390.png"), shot, 0o644)
	}
}

// Closing the tab of a session made without KeepShown (the demo's printed
// session is one) unmounts its views after PageGrace, in a real browser;
// opening it again mounts them. AS-LIFE-001.
func TestBrowserTabCloseUnmounts(t *testing.T) {
	d := newDemo(t, console.Options{Host: webhost.Options{PageGrace: 200 * time.Millisecond}})
	s, err := d.app.NewSession(console.SessionOptions{})
	if err != nil {
		t.Fatal(err)
	}
	mounted := func() int { return len(s.Registry().Snapshot(surface.SnapshotOptions{}).Components) }
	changed := make(chan struct{}, 16)
	unsub := s.Registry().Subscribe(func(surface.Event) {
		select {
		case changed <- struct{}{}:
		default:
		}
	})
	defer unsub()
	await := func(want int) {
		t.Helper()
		deadline := time.After(10 * time.Second)
		for mounted() != want {
			select {
			case <-changed:
			case <-deadline:
				t.Fatalf("%d components mounted, want %d", mounted(), want)
			}
		}
	}
	if mounted() != 0 {
		t.Fatal("mounted before any page")
	}
	browser := headless(t)
	if err := chromedp.Do(browser); err != nil {
		t.Fatal(err)
	}
	tabCtx, closeTab := chromedp.NewContext(browser)
	if err := chromedp.Do(tabCtx, chromedp.Navigate(d.srv.URL+s.JoinPath()), chromedp.WaitReady(`body[data-live]`)); err != nil {
		t.Fatal(err)
	}
	await(1)
	closeTab() // closes the tab: its event stream ends
	await(0)
	again, closeAgain := chromedp.NewContext(browser)
	defer closeAgain()
	if err := chromedp.Do(again, chromedp.Navigate(d.srv.URL+s.JoinPath()), chromedp.WaitReady(`body[data-live]`)); err != nil {
		t.Fatal(err)
	}
	await(1)
}
