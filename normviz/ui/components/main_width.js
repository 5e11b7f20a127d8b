// Reports the width in px (to 40 px) of the page's main column to the server (normviz.ui.sizing.main_width),
// again after a resize. data: {known: the width last reported, container: the column's CSS selector}.
export default function(component) {
  const { setStateValue, data } = component;
  const measure = () => {
    const el = document.querySelector((data && data.container) || "body");
    const w = Math.round((el ? el.clientWidth : window.innerWidth) / 40) * 40;
    if (w > 0 && w !== (data && data.known)) { setStateValue("width", w); }
  };
  measure();
  let t = null;
  const onResize = () => { clearTimeout(t); t = setTimeout(measure, 400); };
  window.addEventListener("resize", onResize);
  return () => window.removeEventListener("resize", onResize);
}
