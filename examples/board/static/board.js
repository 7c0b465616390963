// The board's own script, beside htmx and the agentsurface page script:
// htmx processes what the page script patched into a live fragment (its
// controls carry hx- attributes), and a refused htmx post shows its
// answer in the page script's banner.
document.addEventListener('agentsurface:patch', (e) => htmx.process(e.target));
document.addEventListener('htmx:responseError', (e) => {
  const banner = document.getElementById('agentsurface-banner');
  if (!banner) return;
  banner.textContent = e.detail.xhr.responseText.trim() || e.detail.xhr.statusText;
  banner.hidden = false;
});
