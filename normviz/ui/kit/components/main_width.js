// Reports the width in px (to 40 px) of the page's main column and the window's height (to 20 px) to the server
// (normviz.ui.kit.sizing), again after a resize. data: {known: [width, height] last reported, container: the
// column's CSS selector}.
export default function(component) {
  const { setStateValue, data } = component;
  const measure = () => {
    const el = document.querySelector((data && data.container) || "body");
    const w = Math.round((el ? el.clientWidth : window.innerWidth) / 40) * 40;
    const h = Math.round(window.innerHeight / 20) * 20;
    const known = (data && data.known) || [];
    if (w > 0 && w !== known[0]) { setStateValue("width", w); }
    if (h > 0 && h !== known[1]) { setStateValue("height", h); }
  };
  measure();
  let t = null;
  const onResize = () => { clearTimeout(t); t = setTimeout(measure, 400); };
  window.addEventListener("resize", onResize);
  return () => window.removeEventListener("resize", onResize);
}
