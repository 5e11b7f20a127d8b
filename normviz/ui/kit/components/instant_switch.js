// Instant layer/head switching on Explore (normviz.ui.kit.instant): when the layer slider or the head box moves,
// every panel with a frame for the new (layer, head) is redrawn from it at once; the server's rerun follows.
// data: {enabled, frames_json: {chart key: {"<layer>:<head>": {restyle, title}}}, controls: the watched
// widgets, named once in normviz/ui/kit/controls.py: {layer_key, head_key, head_prefix, all_heads}}.

// The frame name of a layer slider value and a head box text ("head 3" → "2:3", "all heads" → "2:-1"), or null.
export function frameName(layerValue, headText, controls) {
  const layer = parseInt(layerValue, 10);
  const text = String(headText).trim();
  let head = null;
  if (text === controls.all_heads) {
    head = -1;
  } else if (text.startsWith(controls.head_prefix) && /^\d+$/.test(text.slice(controls.head_prefix.length))) {
    head = parseInt(text.slice(controls.head_prefix.length), 10);
  }
  return Number.isNaN(layer) || head === null ? null : layer + ':' + head;
}

export default function(component) {
  const S = (window.__normvizInstant = window.__normvizInstant || {});
  const data = component.data || {};
  if (data.frames_json !== S.raw) {  // parsed once per new set of frames, not per rerun
    S.raw = data.frames_json;
    S.frames = data.frames_json ? JSON.parse(data.frames_json) : {};
  }
  S.data = data;
  if (!S.installed) {
    S.installed = true;
    const current = () => {  // the layer slider's and the head box's values as a frame name, or null
      const c = (S.data || {}).controls;
      if (!c) return null;
      const slider = document.querySelector('.st-key-' + c.layer_key + ' input[type="range"]');
      const box = document.querySelector('.st-key-' + c.head_key + ' input');
      if (!slider || !box || box.getAttribute('aria-expanded') === 'true') return null;
      return frameName(slider.value, box.value, c);
    };
    S.check = () => {
      const d = S.data, P = window.Plotly, name = current();
      if (!d.enabled || !P || !name) return;
      const todo = [];
      for (const [chart, frames] of Object.entries(S.frames || {})) {
        const gd = document.querySelector('.st-key-' + chart + ' .js-plotly-plot');
        const f = frames[name];
        if (!gd || !gd.data || !gd.layout || !f) return;  // a chart without this frame: the server draws it
        const meta = gd.layout.meta || (gd.layout.meta = {});
        if (meta.frame !== name) todo.push([gd, meta, f]);  // meta.frame: what the chart shows now
      }
      for (const [gd, meta, f] of todo) {
        meta.frame = name;
        P.update(gd, f.restyle, {'title.text': '<b>' + f.title + '</b>'}, [0]);  // bold, as Streamlit's theme
      }
    };
    let queued = false;
    new MutationObserver(() => {
      if (queued) return;
      queued = true;
      requestAnimationFrame(() => { queued = false; S.check(); });
    }).observe(document.body, {subtree: true, childList: true, characterData: true, attributes: true,
                                attributeFilter: ['value', 'aria-valuetext', 'aria-expanded']});
  }
  S.check();
  return () => { S.data = {}; S.frames = {}; S.raw = undefined; };  // unmounted (another page)
}
