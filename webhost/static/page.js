// The agentsurface page script (package webhost): live fragments over
// server-sent events, forms posted in the background, a banner and
// reconnection when the server is unreachable or the session ended, and
// the session's tools offered to the browser's agent where the browser
// has WebMCP. No build step, no dependency. Include it once, deferred.
//
//   - Live fragments are the elements with an id and the data-fragment
//     attribute: the event stream replaces their content ("patch"), then
//     dispatches "agentsurface:patch" on each (detail: {id}) for scripts
//     that process new content (htmx.process, …). document.body gets
//     data-live="true" once the first patch has been applied.
//   - Forms with data-post are posted in the background (the page sees
//     the result in its fragments); data-reset resets one after posting;
//     a change inside a form with data-autosubmit submits it. A failed
//     post shows its answer in the banner.
//   - An element with data-stick="bottom" inside a fragment (a log) that
//     was scrolled to its end stays there across patches and resizes;
//     one scrolled up stays where it is.
//   - The banner is the element with id agentsurface-banner, made if the
//     page has none.
(() => {
  'use strict';
  const script = document.currentScript;
  const prefix = new URL('.', script ? script.src : location.href).pathname;

  let bannerEl = document.getElementById('agentsurface-banner');
  if (!bannerEl) {
    bannerEl = document.createElement('div');
    bannerEl.id = 'agentsurface-banner';
    const st = bannerEl.style; // CSSOM, which a strict style-src allows
    st.position = 'fixed';
    st.top = '0';
    st.left = '0';
    st.right = '0';
    st.zIndex = '2147483647';
    st.padding = '6px 12px';
    st.background = '#fff3c4';
    st.color = '#222';
    st.font = '14px system-ui, sans-serif';
    st.textAlign = 'center';
    st.boxShadow = '0 1px 4px rgba(0,0,0,.2)';
    document.body.prepend(bannerEl);
  }
  bannerEl.setAttribute('role', 'status');
  bannerEl.setAttribute('aria-live', 'polite');
  const banner = (text) => {
    bannerEl.textContent = text;
    bannerEl.hidden = !text;
  };
  banner('');

  const ids = [...document.querySelectorAll('[data-fragment][id]')].map((el) => el.id);
  const webmcp = offerTools();
  const query = new URLSearchParams();
  if (ids.length) query.set('f', ids.join(','));
  if (webmcp) query.set('webmcp', '1');
  const events = new EventSource(prefix + 'events?' + query);
  if (webmcp) events.addEventListener('tools', (e) => webmcp.offer(JSON.parse(e.data)));

  // Lists that stick to their end (data-stick="bottom"): a list keeps its
  // place across patches and resizes, and one scrolled to its end stays
  // there, so that the newest line stays in view. Where a list is is
  // read when a patch arrives, not from scroll events, which fire at the
  // next frame (a busy machine delays it past the patch); a resize has
  // moved the lists already, so where they were comes from the last
  // scroll or patch.
  const atEnd = new Map(); // the id of the list's element with an id → the list was at its end
  const keyOf = (el) => (el.closest('[id]') || document.body).id;
  const isAtEnd = (el) => el.scrollHeight - el.scrollTop - el.clientHeight < 8;
  document.addEventListener('scroll', (e) => {
    const el = e.target;
    if (el instanceof Element && el.matches('[data-stick]')) atEnd.set(keyOf(el), isAtEnd(el));
  }, true);
  const scrolled = (root) => [...root.querySelectorAll('[data-stick]')].map((el) => ({ top: el.scrollTop, end: isAtEnd(el) }));
  const restore = (root, before) => {
    root.querySelectorAll('[data-stick]').forEach((el, i) => {
      const was = before[i];
      const end = was ? was.end : atEnd.get(keyOf(el)) !== false;
      el.scrollTop = end ? el.scrollHeight : was ? was.top : el.scrollTop;
      atEnd.set(keyOf(el), end);
    });
  };
  window.addEventListener('resize', () => restore(document, []));
  restore(document, []);

  events.addEventListener('patch', (e) => {
    const patch = JSON.parse(e.data);
    for (const [id, html] of Object.entries(patch)) {
      const el = document.getElementById(id);
      if (!el) continue;
      const before = scrolled(el);
      el.innerHTML = html;
      restore(el, before);
      el.dispatchEvent(new CustomEvent('agentsurface:patch', { bubbles: true, detail: { id } }));
    }
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

  // The session ended, or the stream was refused (410 for an ended
  // session, an error status from a proxy): load the page again once the
  // server answers, which starts a fresh session where the old one is
  // gone. Attempts back off (1s, 2s, 4s … 30s, jittered), counted across
  // reloads, so that a failing server is never hammered; a page live for
  // 20s starts over at 1s. The page is reloaded only after the server
  // answered a ping, so the browser never shows its own error page.
  const attemptsKey = 'agentsurface.reconnects';
  const store = (f) => {
    try {
      return f(window.sessionStorage);
    } catch (_) {
      return null; // storage refused: the jittered delay still spaces attempts
    }
  };
  const attempts = () => Number(store((st) => st.getItem(attemptsKey))) || 0;
  const backoff = () => {
    const n = attempts();
    store((st) => st.setItem(attemptsKey, String(n + 1)));
    return Math.min(30000, 1000 * 2 ** n) * (0.5 + Math.random() / 2);
  };
  let reconnecting = false;
  const reconnect = (why) => {
    if (reconnecting) return;
    reconnecting = true;
    events.close();
    if (webmcp) webmcp.offer({ surfaceVersion: '', tools: [] });
    const attempt = () => {
      const delay = backoff();
      banner(why + ' Reconnecting in ' + Math.ceil(delay / 1000) + 's…');
      window.setTimeout(async () => {
        try {
          const res = await fetch(prefix + 'ping', { cache: 'no-store', credentials: 'same-origin' });
          if (res.ok) {
            window.location.reload();
            return;
          }
        } catch (_) {
          // unreachable still
        }
        why = 'The server is unreachable.';
        attempt();
      }, delay);
    };
    attempt();
  };
  events.addEventListener('ended', (e) => reconnect(e.data));
  let steady = 0;
  events.addEventListener('open', () => {
    banner('');
    if (!ids.length) document.body.dataset.live = 'true'; // no fragment: no patch to wait for
    window.clearTimeout(steady);
    steady = window.setTimeout(() => store((st) => st.removeItem(attemptsKey)), 20000);
  });
  events.onerror = () => {
    window.clearTimeout(steady);
    if (events.readyState === EventSource.CLOSED) reconnect('Disconnected.');
    else banner('The server is unreachable. Reconnecting…'); // EventSource retries by itself
  };

  async function post(action, body) {
    try {
      const res = await fetch(action, {
        method: 'POST',
        body: new URLSearchParams(body),
        headers: { 'X-Agentsurface': '1' },
        credentials: 'same-origin',
      });
      if (!res.ok) banner((await res.text()).trim() || res.statusText);
    } catch (err) {
      banner('The server is unreachable: ' + err.message);
    }
  }

  document.addEventListener('submit', (e) => {
    const form = e.target;
    if (!(form instanceof HTMLFormElement) || !form.hasAttribute('data-post')) return;
    e.preventDefault();
    const submitter = e.submitter;
    const action = (submitter && submitter.getAttribute('formaction')) || form.getAttribute('action') || location.pathname;
    post(action, new FormData(form, submitter));
    if (form.hasAttribute('data-reset')) form.reset();
  });
  document.addEventListener('change', (e) => {
    const form = e.target instanceof Element && e.target.closest('form[data-autosubmit]');
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
      const res = await fetch(prefix + 'webmcp/call', {
        method: 'POST',
        headers: { 'Content-Type': 'application/json', 'X-Agentsurface': '1' },
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
