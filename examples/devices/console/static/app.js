// The devices console's script: live updates over server-sent events,
// forms posted in the background, and the session's tools offered to the
// browser's agent where the browser has WebMCP. Without it the page still
// works: forms post and the page reloads.
(() => {
  'use strict';
  const banner = (text) => {
    const el = document.getElementById('banner');
    el.textContent = text;
    el.hidden = !text;
  };

  const webmcp = offerTools();
  const events = new EventSource(webmcp ? '/events?webmcp=1' : '/events');
  if (webmcp) events.addEventListener('tools', (e) => webmcp.offer(JSON.parse(e.data)));
  // A scrolled list inside a fragment (data-stick="bottom": the agent's
  // log) keeps its place across patches and resizes; one scrolled to its
  // end stays there, so the newest output stays in view. Where a list is
  // is read when a patch arrives, not from scroll events: those fire at
  // the next frame, which a busy machine delays past the patch.
  const atEnd = new Map(); // fragment id → the list was at its end (for resizes)
  const keyOf = (el) => (el.closest('[id]') || document.body).id;
  const isAtEnd = (el) => el.scrollHeight - el.scrollTop - el.clientHeight < 8;
  document.addEventListener('scroll', (e) => {
    const el = e.target;
    if (el instanceof Element && el.matches('[data-stick]')) atEnd.set(keyOf(el), isAtEnd(el));
  }, true);
  // scrolled reads each list's place: its offset, and whether it is at
  // its end.
  const scrolled = (root) => [...root.querySelectorAll('[data-stick]')].map((el) => ({ top: el.scrollTop, end: isAtEnd(el) }));
  const restore = (root, before) => {
    root.querySelectorAll('[data-stick]').forEach((el, i) => {
      const was = before[i];
      const end = was ? was.end : atEnd.get(keyOf(el)) !== false;
      el.scrollTop = end ? el.scrollHeight : was ? was.top : el.scrollTop;
      atEnd.set(keyOf(el), end);
    });
  };
  // A resize has already moved the lists: where they were comes from
  // the last scroll or patch.
  window.addEventListener('resize', () => restore(document, []));
  // The agent form lives outside its fragment (typing survives patches);
  // its buttons follow the run's state.
  const syncAgentForm = () => {
    const log = document.querySelector('#agent .chat');
    const form = document.querySelector('.agent-card form.ask');
    if (!log || !form) return;
    const busy = log.dataset.busy === 'true';
    form.querySelector('button.run').disabled = busy;
    form.querySelector('button.stop').disabled = !busy;
  };
  restore(document, []);
  syncAgentForm();

  events.addEventListener('patch', (e) => {
    const patch = JSON.parse(e.data);
    for (const [id, html] of Object.entries(patch)) {
      const el = document.getElementById(id);
      if (!el) continue;
      const before = scrolled(el);
      el.innerHTML = html;
      restore(el, before);
    }
    syncAgentForm();
    // The first patch re-renders every fragment: from here on the page
    // is live, and its elements stay until the session changes.
    document.body.dataset.live = 'true';
    banner('');
  });
  // This tab stopped following the session (too many tabs): it stays as
  // it is until the user reloads.
  events.addEventListener('bye', (e) => {
    events.close();
    if (webmcp) webmcp.offer({ surfaceVersion: '', tools: [] });
    banner(e.data);
  });
  // The session ended (it expired, the console stopped, or the replica
  // serving it drained, crashed or lost its lease), or the stream was
  // refused (410 for an ended session, 5xx when the server is not
  // reachable): load the page again, which starts a fresh session where
  // the old one is gone. Reloads back off (1s, 2s, 4s, … up to 30s, with
  // jitter) across the reloads themselves, so that a console that keeps
  // failing is never hammered; a page that stayed live for 20s starts
  // over at 1s.
  const attemptsKey = 'agentsurface.reconnects';
  const store = (f) => {
    try {
      return f(window.sessionStorage);
    } catch (_) {
      return null; // storage refused: the jittered delay still spaces reloads
    }
  };
  const attempts = () => Number(store((st) => st.getItem(attemptsKey))) || 0;
  let reconnecting = false;
  const reconnect = (why) => {
    if (reconnecting) return;
    reconnecting = true;
    events.close();
    if (webmcp) webmcp.offer({ surfaceVersion: '', tools: [] });
    const n = attempts();
    const delay = Math.min(30000, 1000 * 2 ** n) * (0.5 + Math.random() / 2);
    store((st) => st.setItem(attemptsKey, String(n + 1)));
    banner(why + ' Reconnecting in ' + Math.ceil(delay / 1000) + 's…');
    window.setTimeout(() => window.location.reload(), delay);
  };
  events.addEventListener('ended', (e) => reconnect(e.data));
  let steady = 0;
  events.addEventListener('open', () => {
    window.clearTimeout(steady);
    steady = window.setTimeout(() => store((st) => st.removeItem(attemptsKey)), 20000);
  });
  events.onerror = () => {
    window.clearTimeout(steady);
    if (events.readyState === EventSource.CLOSED) reconnect('Disconnected.');
    else banner('Reconnecting…');
  };

  async function post(action, body) {
    try {
      const res = await fetch(action, {
        method: 'POST',
        body: new URLSearchParams(body),
        headers: { 'X-Console': '1' },
        credentials: 'same-origin',
      });
      if (!res.ok) banner((await res.text()).trim());
    } catch (err) {
      banner('The console is unreachable: ' + err.message);
    }
  }

  document.addEventListener('submit', (e) => {
    const form = e.target;
    e.preventDefault();
    const submitter = e.submitter;
    const action = (submitter && submitter.getAttribute('formaction')) || form.getAttribute('action');
    post(action, new FormData(form, submitter));
    if (form.hasAttribute('data-reset')) form.reset();
  });

  document.addEventListener('change', (e) => {
    const form = e.target.closest('form[data-autosubmit]');
    if (form) form.requestSubmit();
  });

  // WebMCP: when the browser has a model context (a proposed web API:
  // document.modelContext in the current draft, navigator.modelContext
  // before), offer the session's available tools to the agent of this
  // browser. Without one, do nothing. The server sends the tools on the
  // event stream whenever they change, and offer() replaces the offered
  // set with them; a tool's execute posts to the server, which runs the
  // call through the session's surface and answers the result envelope.
  function offerTools() {
    let mc = null;
    try {
      mc = document.modelContext || navigator.modelContext || null;
    } catch (_) {
      mc = null;
    }
    if (!mc || typeof mc !== 'object') return null;
    // registerTool(tool, {signal}) adds one tool, and aborting the signal
    // withdraws it (older drafts: unregisterTool(name)); the first
    // drafts only had provideContext({tools}), which replaces them all.
    const incremental = typeof mc.registerTool === 'function';
    if (!incremental && typeof mc.provideContext !== 'function') return null;

    // offered: name → {key, version, tool, controller}. key is what an
    // agent sees of the tool and the registration it reaches; version is
    // the list the tool's calls refer to.
    let offered = new Map();

    async function call(name, version, input) {
      const res = await fetch('/webmcp/call', {
        method: 'POST',
        headers: { 'Content-Type': 'application/json' },
        credentials: 'same-origin',
        body: JSON.stringify({ name, surfaceVersion: version, input }),
      });
      if (!res.ok) throw new Error((await res.text()).trim() || res.statusText);
      const envelope = await res.json();
      // Capability errors are results, with the envelope intact.
      return {
        content: [{ type: 'text', text: JSON.stringify(envelope) }],
        structuredContent: envelope,
        isError: envelope.status !== 'ok',
      };
    }

    function entry(t, version, key) {
      const e = { key, version, controller: null };
      e.tool = {
        name: t.name,
        description: t.description,
        inputSchema: t.inputSchema,
        execute: (input) => call(t.name, e.version, input),
      };
      if (t.annotations) e.tool.annotations = t.annotations;
      return e;
    }

    function register(e) {
      e.controller = new AbortController();
      try {
        mc.registerTool(e.tool, { signal: e.controller.signal });
      } catch (err) {
        console.warn('WebMCP: the browser refused tool ' + e.tool.name + ': ' + err.message);
      }
    }

    function withdraw(e) {
      if (e.controller) e.controller.abort();
      if (typeof mc.unregisterTool === 'function') {
        try {
          mc.unregisterTool(e.tool.name);
        } catch (_) {
          // gone already: the signal withdrew it
        }
      }
    }

    return {
      // offer makes the offered tools exactly list.tools.
      offer(list) {
        const next = new Map();
        let changed = list.tools.length !== offered.size;
        for (const t of list.tools) {
          const key = JSON.stringify([t.description, t.inputSchema, t.annotations || null, t.registrationId]);
          const cur = offered.get(t.name);
          if (cur && cur.key === key) {
            cur.version = list.surfaceVersion; // unchanged: its calls refer to the new list
            next.set(t.name, cur);
          } else {
            next.set(t.name, entry(t, list.surfaceVersion, key));
            changed = true;
          }
        }
        if (incremental) {
          for (const [name, e] of offered) if (next.get(name) !== e) withdraw(e);
          for (const [name, e] of next) if (offered.get(name) !== e) register(e);
        } else if (changed) {
          mc.provideContext({ tools: [...next.values()].map((e) => e.tool) });
        }
        offered = next;
      },
    };
  }
})();
