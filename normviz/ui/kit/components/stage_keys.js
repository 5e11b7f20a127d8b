// Stage mode's keyboard (normviz.ui.kit.stage.keyboard): ←/→ layer, ↑/↓ head, Space plays the layers (again: pause),
// f focuses the token under the mouse (f away from a chart: no focus), Esc leaves stage mode, PageDown/PageUp
// (or n/p) the next/previous step of a talk. Keys typed into a field (text, select, slider) stay the field's.
// ←/→ (and Space's steps) move the page's layer slider itself where it is one (Explore, Translate): the same key
// pressed on the slider's thumb, so the instant switch draws the new layer from its frames at once and the slider
// sends its value, exactly as if the visitor had used it. Every other press (and ←/→ where the layer control is not
// a slider, e.g. Why's position box) is sent to the server as a trigger value; the server moves the control and reruns.
// data: {layer: the layer control's index, layers: how many, layer_key: its widget key}.
const KEYS = {ArrowLeft: 'layer-', ArrowRight: 'layer+', ArrowUp: 'head-', ArrowDown: 'head+', Escape: 'leave',
              PageDown: 'next', PageUp: 'prev', n: 'next', p: 'prev'};  // a presenter's remote sends PageDown/Up

// The original token position named by a hover label ('cat [2]', 'the·2 [5] (the 2nd occurrence of …)'), or null.
export function positionOf(name) {
  const m = /\s\[(\d+)\](?: \(.*\))?$/.exec(String(name == null ? '' : name));
  return m ? parseInt(m[1], 10) : null;
}

// The token a plotly hover point is on: a heatmap cell's row (the receiving token), else the bar's token.
export function hoveredPosition(point) {
  if (!point) return null;
  const row = positionOf(point.y);
  if (row !== null) return row;
  const col = positionOf(point.x);
  if (col !== null) return col;
  return point.customdata && point.customdata.length ? positionOf(point.customdata[0]) : null;
}

// What a key sends to the server ('layer+', 'focus:5', 'focus:none' …), 'play' for Space, or null.
export function keyAction(key, hovered) {
  if (key === ' ' || key === 'Spacebar') return 'play';
  if (key === 'f' || key === 'F') return hovered === null || hovered === undefined ? 'focus:none' : 'focus:' + hovered;
  return KEYS[key] || null;
}

// The key a layer press becomes on the layer slider's thumb ('layer+' → ArrowRight, 'layer0' → Home), or null.
export function sliderKey(what) {
  return {'layer+': 'ArrowRight', 'layer-': 'ArrowLeft', 'layer0': 'Home'}[what] || null;
}

// Where the layer slider stands: {layer: its value's index, layers: how many}, or null when it is not on the page.
function sliderState(input) {
  if (!input) return null;
  const lo = parseFloat(input.min), hi = parseFloat(input.max), v = parseFloat(input.value);
  const step = parseFloat(input.step) || 1;
  if ([lo, hi, v].some(Number.isNaN)) return null;
  return {layer: Math.round((v - lo) / step), layers: Math.round((hi - lo) / step) + 1};
}

// The layer the page's first panel shows (its title's "layer N"), or null where no panel names one.
function shownLayer() {
  const gd = document.querySelector('[class*="st-key-panel_"] .js-plotly-plot');
  const m = /layer (\d+)/.exec(String(gd && gd.layout && gd.layout.title ? gd.layout.title.text : ''));
  return m ? parseInt(m[1], 10) : null;
}

export default function(component) {
  const S = (window.__normvizKeys = window.__normvizKeys || {});
  S.send = component.setTriggerValue;
  S.data = component.data || {};
  const slider = () => {  // the page's layer slider (its hidden range input), or null where the control is another
    const k = (S.data || {}).layer_key;
    return k ? document.querySelector('.st-key-' + k + ' [data-testid="stSlider"] input[type="range"]') : null;
  };
  const layer = (what) => {  // a layer press: on the slider's thumb where there is one, else the server's trigger
    const input = slider(), key = sliderKey(what);
    if (input && key && !input.disabled) {
      for (const type of ['keydown', 'keyup']) {
        input.dispatchEvent(new KeyboardEvent(type, {key: key, code: key, bubbles: true, cancelable: true}));
      }
      return;
    }
    if (S.send) S.send('key', what);
  };
  const where = () => sliderState(slider()) || S.data || {};
  const stop = () => { if (S.timer) { clearInterval(S.timer); S.timer = null; } };
  const pause = () => {  // stop where the panels are: a step still on its way to the server is taken back
    stop();
    const now = where(), seen = shownLayer();
    for (let k = now.layer; seen !== null && k > seen; k--) layer('layer-');
  };
  const play = () => {  // one layer a second up to the last (from the first when already there)
    if (S.timer) { pause(); return; }
    const d = where();
    if (!(d.layers > 1)) return;
    if (d.layer >= d.layers - 1) layer('layer0');
    S.timer = setInterval(() => {
      const now = where(), seen = shownLayer();
      if (!S.send || now.layer >= now.layers - 1) { stop(); return; }
      if (seen !== null && seen < now.layer) return;  // the last step is not drawn yet: wait for it
      layer('layer+');
    }, 1000);
  };
  if (!S.installed) {
    S.installed = true;
    document.addEventListener('mouseover', (e) => {  // charts come and go with reruns: hook each once
      const gd = e.target && e.target.closest && e.target.closest('.js-plotly-plot');
      if (!gd || gd.__normvizHover || !gd.on) return;
      gd.__normvizHover = true;
      gd.on('plotly_hover', (ev) => { S.hovered = hoveredPosition(ev && ev.points && ev.points[0]); });
      gd.on('plotly_unhover', () => { S.hovered = null; });
    }, true);
    document.addEventListener('keydown', (e) => {
      const t = e.target;
      const what = keyAction(e.key, S.hovered);
      if (!what || !S.send || e.altKey || e.ctrlKey || e.metaKey) return;
      if (t && (t.isContentEditable || /^(INPUT|TEXTAREA|SELECT|BUTTON)$/.test(t.tagName) || t.getAttribute('role') === 'slider'
                || t.closest('[role="listbox"], [data-baseweb="popover"]'))) return;
      e.preventDefault();
      if (what === 'play') { play(); return; }
      if (what === 'layer+' || what === 'layer-') { layer(what); return; }
      stop();
      S.send('key', what);
    }, true);
  }
  return () => { stop(); S.send = null; };  // unmounted (stage mode left, or another page)
}
