// Overview's grids (normviz.ui.kit.stage.grid_clicks): a click on a head's square sends its layer and head to the
// server, which opens that head on Explore. data: {charts: [chart keys], cell: a square's side + 1 gap,
// heads: {chart key: number of heads shown (1: a layer-level map)}}.
export default function(component) {
  const S = (window.__normvizGrid = window.__normvizGrid || {});
  S.send = component.setTriggerValue;
  S.data = component.data || {};
  const attach = () => {
    for (const chart of (S.data.charts || [])) {
      const gd = document.querySelector('.st-key-' + chart + ' .js-plotly-plot');
      if (!gd || !gd.on || gd.__nvGridClick) continue;
      gd.__nvGridClick = true;
      gd.on('plotly_click', (ev) => {
        const p = ev && ev.points && ev.points[0];
        const cell = S.data.cell;
        if (!p || !cell || !S.send || p.z === null || p.z === undefined) return;  // a gap between squares
        const heads = (S.data.heads || {})[chart] || 1;
        const layer = Math.floor(p.y / cell), head = Math.floor(p.x / cell);
        S.send('cell', {layer: layer, head: heads > 1 ? head : null, chart: chart});
      });
      gd.style.cursor = 'pointer';
    }
  };
  attach();
  if (S.observer) S.observer.disconnect();
  S.observer = new MutationObserver(() => attach());
  S.observer.observe(document.body, {subtree: true, childList: true});
  return () => { if (S.observer) S.observer.disconnect(); S.send = null; };
}
