package main

// The board in a real headless Chromium (internal/browsertest skips the
// test where none is installed): its htmx controls, its live fragments
// while an agent works over MCP, the approvals card, WebMCP, the user
// switch and the page-bound lifecycle.

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentsurface/agentsurface/internal/browsertest"
	"github.com/agentsurface/agentsurface/surface"
	"github.com/agentsurface/agentsurface/webhost"
	cdppage "github.com/chromedp/cdproto/page"
	"github.com/chromedp/chromedp"
)

// tab is one page in the test's browser, with what its console showed.
type tab struct {
	t     *testing.T
	ctx   context.Context
	close func()

	mu   sync.Mutex
	msgs []chromedp.ConsoleMessage
}

// openTab opens url in a new tab with cookies of its own, after running
// stub before the page's scripts, and waits until the page is live (its
// first patch applied).
func openTab(t *testing.T, browser context.Context, url, stub string) *tab {
	t.Helper()
	ctx, closeTab := chromedp.NewContext(browser, chromedp.WithNewBrowserContext())
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	tb := &tab{t: t, ctx: ctx}
	msgs := chromedp.Console(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for m, err := range msgs {
			if err != nil {
				return
			}
			tb.mu.Lock()
			tb.msgs = append(tb.msgs, m)
			tb.mu.Unlock()
		}
	}()
	var once sync.Once
	tb.close = func() {
		once.Do(func() {
			cancel()
			closeTab()
			<-done
		})
	}
	t.Cleanup(tb.close)
	if _, err := chromedp.Call(ctx, cdppage.AddScriptToEvaluateOnNewDocument, cdppage.AddScriptToEvaluateOnNewDocumentParams{Source: stub}); err != nil {
		t.Fatal(err)
	}
	tb.do(chromedp.Navigate(url), chromedp.WaitReady(`body[data-live]`))
	return tb
}

func (tb *tab) do(steps ...chromedp.Action[chromedp.Void]) {
	tb.t.Helper()
	if err := chromedp.Do(tb.ctx, steps...); err != nil {
		tb.t.Fatal(err)
	}
}

// eval evaluates a JavaScript expression, awaiting a promise, into T.
func eval[T any](tb *tab, expr string) T {
	tb.t.Helper()
	v, err := chromedp.Run(tb.ctx, chromedp.Evaluate[T](expr, chromedp.EvalAwaitPromise))
	if err != nil {
		tb.t.Fatalf("%s: %v", expr, err)
	}
	return v
}

// poll waits until the JavaScript expression is true, across reloads.
func (tb *tab) poll(expr string) {
	tb.t.Helper()
	for deadline := time.Now().Add(waitFor); ; time.Sleep(20 * time.Millisecond) {
		if ok, err := chromedp.Run(tb.ctx, chromedp.Evaluate[bool](expr)); err == nil && ok {
			return
		}
		if time.Now().After(deadline) {
			tb.t.Fatalf("timed out waiting until %s", expr)
		}
	}
}

// problems returns the errors, warnings and exceptions the page logged:
// a script the Content-Security-Policy refused shows here.
func (tb *tab) problems() []string {
	tb.mu.Lock()
	defer tb.mu.Unlock()
	var out []string
	for _, m := range tb.msgs {
		if m.Type == chromedp.ConsoleError || m.Type == chromedp.ConsoleWarning || m.IsException() {
			out = append(out, m.String())
		}
	}
	return out
}

// session is the session the page shows.
func (tb *tab) session(sv *server) *webhost.Session {
	tb.t.Helper()
	s := sv.h.Session(eval[string](tb, `document.body.dataset.session`))
	if s == nil {
		tb.t.Fatal("no session for the page")
	}
	return s
}

// stub runs before the page's scripts: hx-confirm's dialog answers yes,
// and a fake WebMCP model context (the current draft's registerTool)
// records the tools the page offers in window.__webmcp.
const stub = `(() => {
  window.confirm = () => true;
  const live = new Map();
  Object.defineProperty(document, 'modelContext', { configurable: true, value: {
    registerTool: (tool, { signal }) => {
      live.set(tool.name, tool);
      signal.addEventListener('abort', () => live.get(tool.name) === tool && live.delete(tool.name));
    },
  } });
  window.__webmcp = { names: () => [...live.keys()].sort(), call: (name, input) => live.get(name).execute(input, {}) };
})();`

// moveButton clicks the button that moves card id to column.
func moveButton(id, column string) string {
	return fmt.Sprintf(`[...document.querySelectorAll('#card-%s .move button')].find((b) => b.textContent.includes(%q)).click(), true`, id, column)
}

// The board in a browser while an agent works: the page's htmx controls
// select and move cards (also inside content the page script patched in);
// what the agent does shows without a reload; its delete shows the
// approvals card with the exact input, Approve in the page lets its retry
// run, and the card says what became of it. The page offers the same
// tools through WebMCP. The page's own delete goes through hx-confirm. A
// user switch gets victor a session of his own, whose changes the store
// refuses (the banner says why). Closing the page unmounts the board: the
// agent's tools go. No reload, and nothing refused by the
// Content-Security-Policy, happens on the way. AS-LIFE-001,
// AS-ADAPTER-003.
func TestBrowserBoard(t *testing.T) {
	sv := serve(t, webhost.Options{PageGrace: 300 * time.Millisecond})
	browser := browsertest.Headless(t)
	if err := chromedp.Do(browser); err != nil { // start it
		t.Fatal(err)
	}
	tb := openTab(t, browser, sv.srv.URL+"/", stub)
	s := tb.session(sv)
	if s.User() != "alice" {
		t.Fatalf("the page's user is %q", s.User())
	}
	eval[bool](tb, `window.noReload = true`)
	v := s.Views().(*views)

	// The page's controls (htmx posts).
	tb.do(chromedp.Click(`#card-c1 input[type=checkbox]`))
	eventually(t, "the page selected c1", func() bool { return slices.Equal(v.state().Selected, []string{"c1"}) })
	tb.poll(`document.querySelector('#board button.delete') !== null`) // patched in
	eval[bool](tb, moveButton("c2", "doing"))
	tb.poll(`document.querySelector('[data-column="doing"] #card-c2') !== null`)

	// The agent, live in the page.
	cs := sv.dial(t, s.Token())
	requireCode(t, call(t, cs, "domain:cards.move", `{"id":"c3","column":"done"}`), "ok")
	tb.poll(`document.querySelector('[data-column="done"] #card-c3') !== null`)
	eval[bool](tb, moveButton("c3", "todo")) // a control the page script patched in, processed by htmx
	tb.poll(`document.querySelector('[data-column="todo"] #card-c3') !== null`)

	requireCode(t, call(t, cs, "domain:cards.delete", `{}`), string(surface.CodeConfirmationRequired))
	tb.do(chromedp.WaitVisible(`#agentsurface-approvals .approval button.approve`))
	card := eval[string](tb, `document.querySelector('#agentsurface-approvals .approval').textContent`)
	if !strings.Contains(card, "domain:cards.delete") || !strings.Contains(card, `"c1"`) || strings.Contains(card, `"c2"`) {
		t.Fatalf("the approvals card: %q", card)
	}
	tb.do(chromedp.Click(`#agentsurface-approvals .approval button.approve`), chromedp.WaitNotPresent(`#agentsurface-approvals .approval`))
	requireCode(t, call(t, cs, "domain:cards.delete", `{}`), "ok")
	tb.poll(`document.getElementById('card-c1') === null`)
	tb.poll(`document.querySelector('#agentsurface-approvals .decisions .good') !== null`)

	// WebMCP: the page offers the session's tools to the browser's agent.
	read := tools(t, cs)["view:kanban.board.read"].Name
	tb.poll(fmt.Sprintf(`__webmcp.names().includes(%q)`, read))
	var res struct {
		StructuredContent surface.Result `json:"structuredContent"`
	}
	out := eval[string](tb, fmt.Sprintf(`__webmcp.call(%q, {}).then((r) => JSON.stringify(r))`, read))
	if err := json.Unmarshal([]byte(out), &res); err != nil || res.StructuredContent.Status != surface.StatusOK ||
		!strings.Contains(string(res.StructuredContent.Output), `"c4"`) {
		t.Fatalf("the WebMCP read: %s %v", out, err)
	}

	// The page's own delete, confirmed in the page (hx-confirm).
	tb.do(chromedp.Click(`#card-c4 input[type=checkbox]`))
	tb.poll(`document.querySelector('#board button.delete') !== null`)
	tb.do(chromedp.Click(`#board button.delete`))
	tb.poll(`document.getElementById('card-c4') === null`)

	if !eval[bool](tb, `window.noReload === true`) {
		t.Fatal("the page reloaded")
	}
	if p := tb.problems(); len(p) > 0 {
		t.Fatalf("the page logged problems: %q", p)
	}

	// victor signs in: a session of his own; the store refuses his move.
	tb.do(chromedp.SetValue(`select[name="user"]`, "victor"), chromedp.Click(`form.user button`))
	tb.poll(fmt.Sprintf(`document.body.dataset.live === 'true' && document.body.dataset.session !== %q`, s.ID()))
	vs := tb.session(sv)
	if vs.User() != "victor" || vs == s {
		t.Fatalf("after the switch: %q", vs.User())
	}
	eval[bool](tb, moveButton("c2", "done"))
	tb.poll(`document.getElementById('agentsurface-banner').textContent.includes('only an editor may change the board')`)
	tb.poll(`document.querySelector('[data-column="doing"] #card-c2') !== null`)

	// The page closes: the board unmounts, the agent's tools go.
	vc := sv.dial(t, vs.Token())
	if len(tools(t, vc)) == 0 || !vs.Shown() {
		t.Fatal("no tools while the page shows the session")
	}
	tb.close()
	eventually(t, "the board unmounted", func() bool { return !vs.Shown() })
	if got := tools(t, vc); len(got) != 0 {
		t.Fatalf("tools after the page closed: %v", keys(got))
	}
}
