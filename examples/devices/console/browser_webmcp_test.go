package console_test

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentsurface/agentsurface/examples/devices/console"
	"github.com/agentsurface/agentsurface/surface"
	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/chromedp"
)

// webmcpStub is a model context that the browser test installs as
// navigator.modelContext before the page's scripts run, in the shape %q
// names: "registerTool" (the current draft: registerTool(tool, {signal}),
// an aborted signal withdraws the tool), "unregisterTool" (an earlier
// one: the signal is ignored, unregisterTool(name) withdraws) or
// "provideContext" (the first: provideContext({tools}) replaces them
// all). window.__webmcp records what the page offers: names() the tool
// names offered now, sorted; tool(name); call(name, input) runs a tool's
// execute as an agent would; log the model-context calls made.
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
  } else {
    mc.registerTool = (tool, options) => {
      if (live.has(tool.name)) throw new Error('duplicate tool ' + tool.name);
      live.set(tool.name, tool);
      log.push('register ' + tool.name);
      if (api === 'registerTool' && options && options.signal) {
        options.signal.addEventListener('abort', () => {
          if (live.get(tool.name) === tool) {
            live.delete(tool.name);
            log.push('abort ' + tool.name);
          }
        });
      }
    };
    if (api === 'unregisterTool') {
      mc.unregisterTool = (name) => {
        if (!live.delete(name)) throw new Error('unknown tool ' + name);
        log.push('unregister ' + name);
      };
    }
  }
  Object.defineProperty(navigator, 'modelContext', { value: mc, configurable: true });
  window.__webmcp = {
    names: () => [...live.keys()].sort(),
    tool: (name) => live.get(name),
    log,
    call: (name, input) => {
      const t = live.get(name);
      if (!t) return Promise.reject(new Error('not offered: ' + name));
      return t.execute(input, {});
    },
  };
})();`

// toolResult is what an offered tool's execute returns.
type toolResult struct {
	Content []struct {
		Type string `json:"type"`
		Text string `json:"text"`
	} `json:"content"`
	StructuredContent surface.Result `json:"structuredContent"`
	IsError           bool           `json:"isError"`
}

// tab is one page of the console in the test's browser, with what its
// console showed.
type tab struct {
	t   *testing.T
	ctx context.Context

	mu   sync.Mutex
	msgs []chromedp.ConsoleMessage
}

// openTab opens the console of session s in a new tab with its own
// cookies; stub, if not empty, runs before the page's scripts.
func openTab(t *testing.T, browser context.Context, d *demo, s *console.Session, stub string) *tab {
	t.Helper()
	ctx, closeTab := chromedp.NewContext(browser, chromedp.WithNewBrowserContext())
	ctx, cancel := context.WithTimeout(ctx, 60*time.Second)
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
		if _, err := chromedp.Call(ctx, page.AddScriptToEvaluateOnNewDocument, page.AddScriptToEvaluateOnNewDocumentParams{Source: stub}); err != nil {
			t.Fatal(err)
		}
	}
	if err := chromedp.Do(ctx,
		chromedp.Navigate(d.srv.URL+s.JoinPath()),
		chromedp.WaitVisible(`#table tr[data-id="d9"]`),
		// The stream's first patch replaces every fragment: wait for it,
		// so that no element found later is swapped out under a click.
		chromedp.WaitReady(`body[data-live]`),
	); err != nil {
		t.Fatal(err)
	}
	return tb
}

// do runs browser actions.
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

// call runs the execute of an offered tool, as the browser's agent does.
func (tb *tab) call(name, input string) toolResult {
	tb.t.Helper()
	return tb.result(fmt.Sprintf(`__webmcp.call(%q, %s)`, name, input))
}

// result awaits the promise of a tool result that expr gives.
func (tb *tab) result(expr string) toolResult {
	tb.t.Helper()
	out := eval[string](tb, `(`+expr+`).then((r) => JSON.stringify(r))`)
	var r toolResult
	if err := json.Unmarshal([]byte(out), &r); err != nil {
		tb.t.Fatalf("%v: %s", err, out)
	}
	if len(r.Content) != 1 || r.Content[0].Type != "text" {
		tb.t.Fatalf("tool result content %s", out)
	}
	var text surface.Result
	if err := json.Unmarshal([]byte(r.Content[0].Text), &text); err != nil || text.InvocationID != r.StructuredContent.InvocationID {
		tb.t.Fatalf("the text content is not the envelope: %s", out)
	}
	if r.IsError != (r.StructuredContent.Status != surface.StatusOK) {
		tb.t.Fatalf("isError %v for status %s", r.IsError, r.StructuredContent.Status)
	}
	return r
}

// awaitOffered waits until the page offers exactly the tools available
// to the WebMCP consumer now, and returns them.
func (tb *tab) awaitOffered(s *console.Session) []string {
	tb.t.Helper()
	want := available(webmcpToolset(tb.t, s))
	b, _ := json.Marshal(want)
	ctx, cancel := context.WithTimeout(tb.ctx, 30*time.Second)
	defer cancel()
	if _, err := chromedp.Run(ctx, chromedp.Poll[bool](fmt.Sprintf(`JSON.stringify(__webmcp.names()) === %q`, b))); err != nil {
		tb.t.Fatalf("offered %v, available %v: %v", eval[[]string](tb, `__webmcp.names()`), want, err)
	}
	return want
}

// problems returns the warnings, errors and exceptions the page logged.
func (tb *tab) problems() []string {
	tb.mu.Lock()
	defer tb.mu.Unlock()
	var out []string
	for _, m := range tb.msgs {
		if m.Type == chromedp.ConsoleError || m.Type == chromedp.ConsoleWarning || m.IsException() {
			out = append(out, m.String()+" ("+m.URL+")")
		}
	}
	return out
}

// The page in a real headless Chromium, with a model context stubbed in
// before its scripts run, in each shape the WebMCP drafts have had: it
// offers exactly the available tools, with the server's names,
// descriptions and schemas; an agent's call of a tool performs the action
// (the selection shows in the table) and returns the envelope; a call
// that needs approval waits for the click on Approve in the same page;
// when the surface changes (the user selects, opens a panel, navigates
// it, clears the selection) the offered set is replaced so that it again
// equals the available tools, and a tool withdrawn because its panel was
// replaced answers STALE_CAPABILITY. Without a model context the page
// offers nothing, asks the server for nothing WebMCP and logs no error.
// AS-ADAPTER-003 (feature detection, available-only tools, refresh).
func TestBrowserWebMCP_AS_ADAPTER_003(t *testing.T) {
	browser := headless(t)
	if err := chromedp.Do(browser); err != nil { // start the browser
		t.Fatal(err)
	}

	for _, api := range []string{"registerTool", "unregisterTool", "provideContext"} {
		t.Run(api, func(t *testing.T) {
			d := newDemo(t, console.Options{}) // closes after the tab
			s, err := d.app.NewSession(console.SessionOptions{})
			if err != nil {
				t.Fatal(err)
			}
			tb := openTab(t, browser, d, s, fmt.Sprintf(webmcpStub, api))

			// Available-only: nothing is selected, so clearSelection,
			// disable and enable are not offered.
			offered := tb.awaitOffered(s)
			if slices.Contains(offered, toolClear) || slices.Contains(offered, toolDisable) || !slices.Contains(offered, toolSelectRows) {
				t.Fatalf("offered %v", offered)
			}
			ref := webmcpToolset(t, s)[toolSelectRows]
			if got := eval[string](tb, fmt.Sprintf(`JSON.stringify(__webmcp.tool(%q).inputSchema)`, toolSelectRows)); got != string(ref.InputSchema) {
				t.Fatalf("inputSchema %s, want %s", got, ref.InputSchema)
			}
			if got := eval[string](tb, fmt.Sprintf(`__webmcp.tool(%q).description`, toolSelectRows)); got != ref.Description {
				t.Fatalf("description %q, want %q", got, ref.Description)
			}
			if !eval[bool](tb, fmt.Sprintf(`__webmcp.tool(%q).annotations.readOnlyHint === true && !__webmcp.tool(%q).annotations`, toolReadState, toolSelectRows)) {
				t.Fatal("readOnlyHint: only reads")
			}

			// The agent selects two rows: the page shows them, and the
			// tools that became available are offered.
			if r := tb.call(toolSelectRows, `{ids: ['d9', 'd10']}`); r.IsError {
				t.Fatalf("selectRows: %+v", r.StructuredContent.Error)
			}
			tb.do(chromedp.WaitVisible(`#table tr.selected[data-id="d9"]`), chromedp.WaitVisible(`#table tr.selected[data-id="d10"]`))
			if offered := tb.awaitOffered(s); !slices.Contains(offered, toolDisable) || !slices.Contains(offered, toolClear) {
				t.Fatalf("after selecting: %v", offered)
			}

			// The agent disables them: the call waits for the click on
			// Approve in the page, then returns the final result.
			eval[bool](tb, fmt.Sprintf(`window.__disable = __webmcp.call(%q, {reason: 'offline during the maintenance window'}), true`, toolDisable))
			tb.do(chromedp.WaitVisible(`#agentsurface-approvals .approval button.approve`))
			card := eval[string](tb, `document.querySelector('#agentsurface-approvals .approval').textContent`)
			if !strings.Contains(card, "webmcp:browser") || !strings.Contains(card, "hvac-ctrl-lon-03") {
				t.Fatalf("approval card %q", card)
			}
			tb.do(chromedp.Click(`#agentsurface-approvals .approval button.approve`))
			r := tb.result(`window.__disable`)
			if r.IsError || string(r.StructuredContent.Output) != `{"disabled":2}` {
				t.Fatalf("disable: %+v", r.StructuredContent)
			}
			tb.do(chromedp.WaitVisible(`#table tr[data-id="d9"] .s-disabled`), chromedp.WaitVisible(`#table tr[data-id="d10"] .s-disabled`))
			if st := d.status(t); st["d9"] != "disabled" || st["d10"] != "disabled" {
				t.Fatalf("statuses %v", st)
			}

			// The user opens a device: its panel's tools are offered.
			tb.do(chromedp.Click(`#table tr[data-id="d1"] button.link`), chromedp.WaitVisible(`#detail .detail-card`))
			if offered := tb.awaitOffered(s); !slices.Contains(offered, toolReadDevice) {
				t.Fatalf("after opening d1: %v", offered)
			}
			eval[bool](tb, fmt.Sprintf(`window.__d1 = __webmcp.tool(%q), true`, toolReadDevice))
			// The panel navigates to d2: same names, a new registration,
			// so a new tool; the withdrawn one answers STALE_CAPABILITY.
			tb.do(chromedp.Click(`#table tr[data-id="d2"] button.link`))
			ctx, cancel := context.WithTimeout(tb.ctx, 30*time.Second)
			_, err = chromedp.Run(ctx, chromedp.Poll[bool](fmt.Sprintf(`__webmcp.tool(%q) && __webmcp.tool(%q) !== window.__d1`, toolReadDevice, toolReadDevice)))
			cancel()
			if err != nil {
				t.Fatalf("the replaced panel's tool was not replaced: %v", err)
			}
			tb.awaitOffered(s)
			if r := tb.result(`window.__d1.execute({}, {})`); r.StructuredContent.Error == nil || r.StructuredContent.Error.Code != surface.CodeStaleCapability {
				t.Fatalf("withdrawn tool: %+v", r.StructuredContent)
			}
			var dd console.DeviceDetail
			if r := tb.call(toolReadDevice, `{}`); r.StructuredContent.Decode(&dd) != nil || dd.Device.ID != "d2" {
				t.Fatalf("readDevice: %+v", r.StructuredContent)
			}
			// The agent closes the panel: its tools are withdrawn.
			if r := tb.call(toolClose, `{}`); r.IsError {
				t.Fatalf("close: %+v", r.StructuredContent.Error)
			}
			tb.do(chromedp.WaitNotPresent(`#detail .detail-card`))
			if offered := tb.awaitOffered(s); slices.Contains(offered, toolReadDevice) {
				t.Fatalf("after closing: %v", offered)
			}
			// The user clears the selection: the tools that became
			// unavailable are withdrawn.
			tb.do(chromedp.Click(`button[formaction="/ui/clear"]`), chromedp.WaitNotPresent(`#table tr.selected`))
			if offered := tb.awaitOffered(s); slices.Contains(offered, toolClear) || slices.Contains(offered, toolDisable) {
				t.Fatalf("after clearing: %v", offered)
			}

			// The page used the shape the browser has.
			log := strings.Join(eval[[]string](tb, `__webmcp.log`), "\n")
			verb := map[string]string{"registerTool": "abort " + toolReadDevice, "unregisterTool": "unregister " + toolReadDevice, "provideContext": "provide "}[api]
			if !strings.Contains(log, verb) {
				t.Fatalf("the model-context calls lack %q:\n%s", verb, log)
			}
			if p := tb.problems(); len(p) > 0 {
				t.Fatalf("the page logged problems: %q", p)
			}
		})
	}

	t.Run("absent", func(t *testing.T) {
		d := newDemo(t, console.Options{})
		s, err := d.app.NewSession(console.SessionOptions{})
		if err != nil {
			t.Fatal(err)
		}
		tb := openTab(t, browser, d, s, "")
		// The surface changes; the page follows it, as always.
		tb.do(chromedp.Click(`#table tr[data-id="d3"] button.check`), chromedp.WaitVisible(`#table tr.selected[data-id="d3"]`))
		if !eval[bool](tb, `navigator.modelContext === undefined && document.modelContext === undefined`) {
			t.Fatal("the page installed a model context")
		}
		if p := tb.problems(); len(p) > 0 {
			t.Fatalf("the page logged problems: %q", p)
		}
		events := false
		for _, r := range d.reqs.requests() {
			if strings.Contains(r, "webmcp") {
				t.Fatalf("a page without a model context requested %s", r)
			}
			events = events || strings.HasPrefix(r, "GET /agentsurface/events?")
		}
		if !events {
			t.Fatalf("no event stream: %v", d.reqs.requests())
		}
	})
}
