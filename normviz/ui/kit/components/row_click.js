// A heatmap whose rows are steps (the Why page's Continuation view, normviz.ui.kit.stage.row_clicks): a click on
// any cell of a row sends that row's index to the server, which opens the step. data: {chart: the chart's key}.
// Its own state (window.__normvizRow), apart from grid_click.js, so both can be on one page.

// The row a plotly click point is on: the number in its row label 'token [k]', else the cell's row index.
export function rowOf(point) {
  if (!point) return null;
  const m = /\s\[(\d+)\](?: \(.*\))?$/.exec(String(point.y == null ? '' : point.y));
  if (m) return parseInt(m[1], 10);
  const n = point.pointNumber;
  return Array.isArray(n) && Number.isInteger(n[0]) ? n[0] : null;
}

export default function(component) {
  const S = (window.__normvizRow = window.__normvizRow || {});
  S.send = component.setTriggerValue;
  S.data = component.data || {};
  const attach = () => {
    const chart = S.data.chart;
    const gd = chart && document.querySelector('.st-key-' + chart + ' .js-plotly-plot');
    if (!gd || !gd.on || gd.__nvRowClick) return;
    gd.__nvRowClick = true;
    gd.on('plotly_click', (ev) => {
      const row = rowOf(ev && ev.points && ev.points[0]);
      if (row === null || !S.send) return;
      S.send('row', {row: row, chart: S.data.chart});
    });
    gd.style.cursor = 'pointer';
  };
  attach();
  if (S.observer) S.observer.disconnect();
  S.observer = new MutationObserver(() => attach());
  S.observer.observe(document.body, {subtree: true, childList: true});
  return () => { if (S.observer) S.observer.disconnect(); S.send = null; };
}
