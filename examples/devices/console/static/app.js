// The devices console's script: live updates over server-sent events, and
// forms posted in the background. Without it the page still works: forms
// post and the page reloads.
(() => {
  'use strict';
  const banner = (text) => {
    const el = document.getElementById('banner');
    el.textContent = text;
    el.hidden = !text;
  };

  const events = new EventSource('/events');
  events.addEventListener('patch', (e) => {
    const patch = JSON.parse(e.data);
    for (const [id, html] of Object.entries(patch)) {
      const el = document.getElementById(id);
      if (el) el.innerHTML = html;
    }
    banner('');
  });
  events.addEventListener('bye', (e) => {
    events.close();
    banner(e.data);
  });
  events.onerror = () => {
    if (events.readyState === EventSource.CLOSED) banner('Disconnected. Reload the page.');
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
})();
