// Stage mode's keyboard (normviz.ui.stage.keyboard): ←/→ layer, ↑/↓ head, Esc leaves stage mode, PageDown/PageUp
// (or n/p) the next/previous step of a talk. Each press
// is sent to the server as a trigger value; the server moves the page's own controls and reruns. Keys typed
// into a field (text, select, slider) stay the field's.
export default function(component) {
  const S = (window.__normvizKeys = window.__normvizKeys || {});
  S.send = component.setTriggerValue;
  if (!S.installed) {
    S.installed = true;
    const KEYS = {ArrowLeft: 'layer-', ArrowRight: 'layer+', ArrowUp: 'head-', ArrowDown: 'head+', Escape: 'leave',
                  PageDown: 'next', PageUp: 'prev', n: 'next', p: 'prev'};  // a presenter's remote sends PageDown/Up
    document.addEventListener('keydown', (e) => {
      const what = KEYS[e.key];
      const t = e.target;
      if (!what || !S.send || e.altKey || e.ctrlKey || e.metaKey) return;
      if (t && (t.isContentEditable || /^(INPUT|TEXTAREA|SELECT)$/.test(t.tagName) || t.getAttribute('role') === 'slider'
                || t.closest('[role="listbox"], [data-baseweb="popover"]'))) return;
      e.preventDefault();
      S.send('key', what);
    }, true);
  }
  return () => { S.send = null; };  // unmounted (stage mode left, or another page)
}
