// Reports the width in px (to 40 px) of the page's main column and the window's height (to 20 px) to the server
// (normviz.ui.kit.sizing), again whenever either changes. The column itself is watched (a ResizeObserver), not
// only the window: opening or closing the sidebar (Esc out of stage mode opens it) changes the column's width
// with no window resize, and panels sized for the old width were then drawn too tall for their column (each
// heatmap centred ~70 px below its colour bar). data: {known: [width, height] last reported, container: the
// column's CSS selector}.
export default function(component) {
  const { setStateValue, data } = component;
  const known = (data && data.known) || [];
  const selector = (data && data.container) || "body";
  const measure = () => {
    const el = document.querySelector(selector);
    const w = Math.round((el ? el.clientWidth : window.innerWidth) / 40) * 40;
    const h = Math.round(window.innerHeight / 20) * 20;
    if (w > 0 && w !== known[0]) { setStateValue("width", w); }
    if (h > 0 && h !== known[1]) { setStateValue("height", h); }
  };
  measure();
  let t = null;
  const later = () => { clearTimeout(t); t = setTimeout(measure, 300); };  // once the sidebar's slide has ended
  window.addEventListener("resize", later);
  const el = document.querySelector(selector);
  const observer = el && typeof ResizeObserver !== "undefined" ? new ResizeObserver(later) : null;
  if (observer) observer.observe(el);
  return () => {
    clearTimeout(t);
    window.removeEventListener("resize", later);
    if (observer) observer.disconnect();
  };
}
