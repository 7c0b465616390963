// The devices console's own script, beside the agentsurface page script
// (which keeps the live fragments up to date and posts the forms): the
// agent's form lives outside its fragment, so that what is typed
// survives patches, and its buttons follow the run's state.
(() => {
  'use strict';
  const syncAgentForm = () => {
    const log = document.querySelector('#agent .chat');
    const form = document.querySelector('.agent-card form.ask');
    if (!log || !form) return;
    const busy = log.dataset.busy === 'true';
    form.querySelector('button.run').disabled = busy;
    form.querySelector('button.stop').disabled = !busy;
  };
  document.addEventListener('agentsurface:patch', (e) => {
    if (e.detail && e.detail.id === 'agent') syncAgentForm();
  });
  syncAgentForm();
})();
