package webhost_test

// The page script in a real headless Chromium (internal/browsertest
// skips these tests where none is installed).

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
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

// headless starts a headless Chromium for t (after the servers its
// pages talk to, so that the pages close first), or skips t.
func headless(t *testing.T) context.Context {
	t.Helper()
	browser := browsertest.Headless(t)
	if err := chromedp.Do(browser); err != nil { // start it
		t.Fatal(err)
	}
	return browser
}

// tab is one page in the test's browser, with what its console showed.
type tab struct {
	t   *testing.T
	ctx context.Context

	mu   sync.Mutex
	msgs []chromedp.ConsoleMessage
}

// openTab opens url in a new tab with cookies of its own; stub, if not
// empty, runs before the page's scripts. It waits until the page is
// live: its first patch applied.
func openTab(t *testing.T, browser context.Context, url, stub string) *tab {
	t.Helper()
	tb := newTab(t, browser, stub)
	tb.do(chromedp.Navigate(url), chromedp.WaitReady(`body[data-live]`))
	return tb
}

// newTab opens an empty tab with cookies of its own; stub, if not empty,
// runs before the scripts of the pages it loads.
func newTab(t *testing.T, browser context.Context, stub string) *tab {
	t.Helper()
	ctx, closeTab := chromedp.NewContext(browser, chromedp.WithNewBrowserContext())
	ctx, cancel := context.WithTimeout(ctx, 90*time.Second)
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
	t.Cleanup(func() {
		cancel()
		closeTab()
		<-done
	})
	if stub != "" {
		if _, err := chromedp.Call(ctx, cdppage.AddScriptToEvaluateOnNewDocument, cdppage.AddScriptToEvaluateOnNewDocumentParams{Source: stub}); err != nil {
			t.Fatal(err)
		}
	}
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

// poll waits until the JavaScript expression is true.
func (tb *tab) poll(expr string) {
	tb.t.Helper()
	ctx, cancel := context.WithTimeout(tb.ctx, waitFor)
	defer cancel()
	if _, err := chromedp.Run(ctx, chromedp.Poll[bool](expr)); err != nil {
		tb.t.Fatalf("waiting until %s: %v", expr, err)
	}
}

// pollAcross waits until the JavaScript expression is true, across
// reloads of the page (an evaluation during one fails: it is tried
// again).
func (tb *tab) pollAcross(expr string) {
	tb.t.Helper()
	deadline := time.Now().Add(waitFor)
	for {
		if ok, err := chromedp.Run(tb.ctx, chromedp.Evaluate[bool](expr)); err == nil && ok {
			return
		}
		if time.Now().After(deadline) {
			tb.t.Fatalf("waiting until %s", expr)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// problems returns the errors and exceptions the page logged.
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

// sid returns the session id the page shows.
func (tb *tab) sid() string {
	tb.t.Helper()
	v, _ := chromedp.Run(tb.ctx, chromedp.Evaluate[string](`(document.getElementById('sid') || {}).textContent || ''`))
	return v
}

// The page in a real browser while an agent works over MCP: what the
// agent does shows in the live fragments without a reload; its call that
// needs approval shows the approvals card with the exact input; a click
// on Approve (a background post) lets its retry run, and the card then
// says what became of the call. A form marked data-post posts in the
// background too.
func TestBrowserPatchesAndApprovals(t *testing.T) {
	a := newApp(t, webhost.Options{})
	browser := headless(t)
	tb := openTab(t, browser, a.srv.URL+"/", "")
	s := a.h.Session(tb.sid())
	if s == nil {
		t.Fatal("no session for the page")
	}
	eval[bool](tb, `window.noReload = true`)
	cs := a.dial(t, s.Token(), sessionless)
	requireCode(t, callTool(t, cs, "view:notes.board.add", `{"text":"from the agent"}`, nil), "ok")
	tb.poll(`document.querySelector('#notes li') && document.querySelector('#notes li').textContent === 'from the agent'`)
	tb.poll(`document.getElementById('count').textContent.startsWith('1 notes')`)

	requireCode(t, callTool(t, cs, "view:notes.board.clear", "", nil), string(surface.CodeConfirmationRequired))
	tb.do(chromedp.WaitVisible(`#agentsurface-approvals .approval button.approve`))
	card := eval[string](tb, `document.querySelector('#agentsurface-approvals .approval').textContent`)
	if !strings.Contains(card, "view:notes.board.clear") || !strings.Contains(card, "mcp-bridge:agent") {
		t.Fatalf("the card: %q", card)
	}
	tb.do(chromedp.Click(`#agentsurface-approvals .approval button.approve`), chromedp.WaitNotPresent(`#agentsurface-approvals .approval`))
	requireCode(t, callTool(t, cs, "view:notes.board.clear", "", nil), "ok")
	tb.poll(`document.querySelectorAll('#notes li').length === 0`)
	tb.poll(`(document.querySelector('#agentsurface-approvals .decisions') || {textContent: ''}).textContent.includes('done')`)

	// The page's own form, posted in the background.
	tb.do(chromedp.SendKeys(`input[name="text"]`, "typed"), chromedp.Click(`form[action="/notes"] button`))
	tb.poll(`document.querySelector('#notes li') && document.querySelector('#notes li').textContent === 'typed'`)
	tb.poll(`document.querySelector('input[name="text"]').value === ''`) // data-reset
	if !eval[bool](tb, `window.noReload === true`) {
		t.Fatal("the page reloaded")
	}
	if p := tb.problems(); len(p) > 0 {
		t.Fatalf("the page logged problems: %q", p)
	}
}

// restartable serves a Host's handler on one address, and can stop and
// start again there, as a server that goes away and comes back.
type restartable struct {
	addr    string
	handler http.Handler
	srv     *http.Server
	done    chan struct{}
}

func (r *restartable) start(t *testing.T) {
	t.Helper()
	var ln net.Listener
	var err error
	for deadline := time.Now().Add(waitFor); ; {
		if ln, err = net.Listen("tcp", r.addr); err == nil || time.Now().After(deadline) {
			break
		}
		time.Sleep(50 * time.Millisecond) // the port is being released
	}
	if err != nil {
		t.Fatal(err)
	}
	r.addr = ln.Addr().String()
	r.srv = &http.Server{Handler: r.handler}
	r.done = make(chan struct{})
	go func() {
		defer close(r.done)
		_ = r.srv.Serve(ln)
	}()
}

func (r *restartable) stop() {
	if r.srv != nil {
		_ = r.srv.Close()
		<-r.done
		r.srv = nil
	}
}

// When the server becomes unreachable, the page shows a banner saying so
// and keeps its content (never the browser's error page); when it comes
// back, the banner goes and the page is live again, on the same session,
// without a reload. When the session ended, the page loads itself again
// and gets a fresh session.
func TestBrowserReconnects(t *testing.T) {
	h, err := webhost.New(webhost.Options{NewViews: newBoard, PageGrace: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	r := &restartable{addr: "127.0.0.1:0", handler: h.Handler(mux(h))}
	r.start(t)
	t.Cleanup(func() {
		_ = h.Close()
		r.stop()
	})
	browser := headless(t)
	tb := openTab(t, browser, "http://"+r.addr+"/", "")
	first := tb.sid()
	s := h.Session(first)
	boardOf(s).add("before")
	tb.poll(`document.querySelectorAll('#notes li').length === 1`)
	eval[bool](tb, `window.noReload = true`)

	r.stop()
	tb.poll(`!document.getElementById('agentsurface-banner').hidden && document.getElementById('agentsurface-banner').textContent.includes('unreachable')`)
	if got := eval[string](tb, `location.href`); !strings.HasPrefix(got, "http://"+r.addr) {
		t.Fatalf("the page left: %s", got)
	}
	boardOf(s).add("while away")
	r.start(t)
	tb.poll(`document.getElementById('agentsurface-banner').hidden && document.querySelectorAll('#notes li').length === 2`)
	if !eval[bool](tb, `window.noReload === true`) || tb.sid() != first {
		t.Fatal("the page reloaded instead of reconnecting")
	}

	s.Close() // the session ends: a fresh one, after a reload
	tb.pollAcross(`window.noReload !== true && document.body.dataset.live === 'true' && document.getElementById('sid') !== null`)
	if second := tb.sid(); second == first || h.Session(second) == nil {
		t.Fatalf("after the session ended the page shows session %q (was %q)", second, first)
	}
}

// webmcpStub installs a model context before the page's scripts run, in
// the shape %q names: "registerTool" on document.modelContext (the
// current draft: registerTool(tool, {signal}), aborting the signal
// withdraws the tool) or "provideContext" on navigator.modelContext (the
// first drafts: provideContext({tools}) replaces them all).
// window.__webmcp records what the page offers.
const webmcpStub = `(() => {
  const api = %q;
  const live = new Map();
  const log = [];
  const mc = {};
  if (api === 'provideContext') {
    mc.provideContext = ({ tools }) => {
      live.clear();
      for (const t of tools) live.set(t.name, t);
      log.push('provide ' + tools.length);
    };
    Object.defineProperty(navigator, 'modelContext', { value: mc, configurable: true });
  } else {
    mc.registerTool = (tool, options) => {
      if (live.has(tool.name)) throw new Error('duplicate tool ' + tool.name);
      live.set(tool.name, tool);
      log.push('register ' + tool.name);
      options.signal.addEventListener('abort', () => {
        if (live.get(tool.name) === tool) {
          live.delete(tool.name);
          log.push('abort ' + tool.name);
        }
      });
    };
    Object.defineProperty(document, 'modelContext', { value: mc, configurable: true });
  }
  window.__webmcp = {
    names: () => [...live.keys()].sort(),
    log,
    call: (name, input) => {
      const t = live.get(name);
      if (!t) return Promise.reject(new Error('not offered: ' + name));
      return t.execute(input, {});
    },
  };
})();`

// The WebMCP shim in a real browser with a fake model context: it offers
// exactly the available tools and replaces them as they change; an
// agent's call runs through the session's surface and returns the
// envelope; a call that needs approval waits for the click in the page.
// AS-ADAPTER-003 (feature detection, available-only tools, refresh).
func TestBrowserWebMCP(t *testing.T) {
	browser := headless(t)
	for _, api := range []string{"registerTool", "provideContext"} {
		t.Run(api, func(t *testing.T) {
			a := newApp(t, webhost.Options{})
			s, err := a.h.NewSession(webhost.SessionOptions{})
			if err != nil {
				t.Fatal(err)
			}
			tb := openTab(t, browser, a.srv.URL+s.JoinPath(), fmt.Sprintf(webmcpStub, api))
			awaitOffered := func() []string {
				t.Helper()
				want, _ := available(t, s)
				b, _ := json.Marshal(want)
				tb.poll(fmt.Sprintf(`JSON.stringify(__webmcp.names()) === %q`, b))
				return want
			}
			if offered := awaitOffered(); slices.Contains(offered, toolClear) || !slices.Contains(offered, toolAdd) {
				t.Fatalf("offered %v", offered)
			}
			out := eval[string](tb, fmt.Sprintf(`__webmcp.call(%q, {text: 'from the browser agent'}).then((r) => JSON.stringify(r))`, toolAdd))
			var r struct {
				StructuredContent surface.Result `json:"structuredContent"`
				IsError           bool           `json:"isError"`
			}
			if err := json.Unmarshal([]byte(out), &r); err != nil || r.IsError || r.StructuredContent.Status != surface.StatusOK {
				t.Fatalf("add: %s %v", out, err)
			}
			tb.poll(`document.querySelectorAll('#notes li').length === 1`)
			if offered := awaitOffered(); !slices.Contains(offered, toolClear) {
				t.Fatalf("after adding: %v", offered)
			}
			eval[bool](tb, fmt.Sprintf(`window.__clear = __webmcp.call(%q, {}), true`, toolClear))
			tb.do(chromedp.WaitVisible(`#agentsurface-approvals .approval button.approve`))
			if card := eval[string](tb, `document.querySelector('#agentsurface-approvals .approval').textContent`); !strings.Contains(card, "webmcp:browser") {
				t.Fatalf("the card %q", card)
			}
			tb.do(chromedp.Click(`#agentsurface-approvals .approval button.approve`))
			if out := eval[string](tb, `window.__clear.then((r) => JSON.stringify(r.structuredContent.status))`); out != `"ok"` {
				t.Fatalf("clear: %s", out)
			}
			if offered := awaitOffered(); slices.Contains(offered, toolClear) {
				t.Fatalf("after clearing: %v", offered)
			}
			verb := map[string]string{"registerTool": "abort " + toolClear, "provideContext": "provide "}[api]
			if log := strings.Join(eval[[]string](tb, `__webmcp.log`), "\n"); !strings.Contains(log, verb) {
				t.Fatalf("the model-context calls lack %q:\n%s", verb, log)
			}
			if p := tb.problems(); len(p) > 0 {
				t.Fatalf("the page logged problems: %q", p)
			}
		})
	}
}

// A list marked data-stick="bottom" in a fragment (a log) keeps its
// newest line in view as patches add lines and as the window is resized;
// one the user scrolled up stays where it is, also when the scroll event
// comes too late to be seen (a busy machine fires it after the next
// patch).
func TestBrowserStickyLog(t *testing.T) {
	a := newApp(t, webhost.Options{})
	browser := headless(t)
	tb := openTab(t, browser, a.srv.URL+"/", "")
	b := boardOf(a.h.Session(tb.sid()))
	for i := range 30 {
		b.add(fmt.Sprint("line ", i))
	}
	tb.poll(`document.querySelectorAll('#log li').length === 30`)
	// A log of a third of the window's height, scrolled to its end.
	eval[bool](tb, `(() => {
		const css = new CSSStyleSheet();
		css.replaceSync('#log ol { height: 30vh; overflow: auto; margin: 0 } #log li { height: 24px }');
		document.adoptedStyleSheets = [css];
		const l = document.querySelector('#log ol');
		l.scrollTop = l.scrollHeight;
		return true;
	})()`)
	const atEnd = `(() => { const l = document.querySelector('#log ol'); return l.scrollHeight > l.clientHeight && l.scrollHeight - l.scrollTop - l.clientHeight < 8; })()`
	tb.poll(atEnd)
	b.add("line 30")
	tb.poll(`document.querySelectorAll('#log li').length === 31`)
	if !eval[bool](tb, atEnd) {
		t.Error("after a patch the log does not show its newest line")
	}
	// The window shrinks: the log, shorter, still shows its newest line.
	tb.do(chromedp.EmulateViewport(800, 300))
	tb.poll(atEnd)
	// Scrolled up, its scroll event swallowed: it stays where it is.
	tb.do(chromedp.Evaluate[chromedp.Void](`window.addEventListener('scroll', (e) => e.stopPropagation(), true); document.querySelector('#log ol').scrollTop = 0`))
	b.add("line 31")
	tb.poll(`document.querySelectorAll('#log li').length === 32`)
	if top := eval[float64](tb, `document.querySelector('#log ol').scrollTop`); top != 0 {
		t.Errorf("a log scrolled up moved to %v", top)
	}
	if p := tb.problems(); len(p) > 0 {
		t.Errorf("the page logged: %q", p)
	}
}

// The approve link the agent was handed, in a real browser: outside the
// session's browsers it is refused; in one (joined by the session's join
// link) it opens the approve page, styled by its own stylesheet under
// the strict Content-Security-Policy (nothing refused, nothing logged),
// with the exact input; a click on Approve (a plain form post, no
// script) approves, and the agent's pending call, retried, completes.
func TestBrowserApproveLink(t *testing.T) {
	a := newArchiveApp(t, webhost.Options{})
	s := a.archivable(t, "")
	args := `{"ids":["n1","n2"]}`
	p, cs := ask(t, a, s, args)
	link := s.ApproveURL(p)
	browser := headless(t)
	tb := newTab(t, browser, "")
	// Elsewhere than the session's browser, the agent's link opens
	// nothing; in it (joined), the page.
	tb.do(chromedp.Navigate(link), chromedp.WaitVisible(`main[data-refusal="sign-in"]`))
	tb.do(chromedp.Navigate(a.srv.URL+s.JoinPath()), chromedp.WaitReady(`body[data-live]`))
	tb.do(chromedp.Navigate(link), chromedp.WaitVisible(`main[data-state="ask"] button.approve`))
	input := eval[string](tb, `document.querySelector('pre.input').textContent`)
	var got map[string][]string
	if err := json.Unmarshal([]byte(input), &got); err != nil || !slices.Equal(got["ids"], []string{"n1", "n2"}) {
		t.Fatalf("the page shows the input %q", input)
	}
	if !eval[bool](tb, `getComputedStyle(document.querySelector('button.approve')).backgroundColor === 'rgb(31, 122, 61)'`) {
		t.Fatal("the stylesheet did not apply")
	}
	if eval[int](tb, `document.scripts.length`) != 0 {
		t.Fatal("the approve page has scripts")
	}
	tb.do(chromedp.Click(`main[data-state="ask"] button.approve`), chromedp.WaitVisible(`[data-outcome="approved"]`))
	if ds := s.Decisions(); len(ds) != 1 || ds[0].Channel != surface.ChannelLink {
		t.Fatalf("decisions %+v", ds)
	}
	requireCode(t, retry(t, cs, "view:notes.archive.archive", args, p.ConfirmationID), "ok")
	if got := boardOf(s).archivedIDs(); len(got) != 1 || !slices.Equal(got[0], []string{"n1", "n2"}) {
		t.Fatalf("archived %v", got)
	}
	if pr := tb.problems(); len(pr) != 1 || !strings.Contains(pr[0], "401") { // the refused first visit's
		t.Fatalf("the page logged problems: %q", pr)
	}
	// The link again: it is spent (410).
	tb.do(chromedp.Navigate(link), chromedp.WaitVisible(`main[data-refusal="decided"]`))
}
