// Keeps what the visitor types into a text box from being lost when the app's server goes away
// (normviz.ui.kit.session_view.url_follows). The server writes the view into the URL after each run, but a text
// typed while the server was away (its process killed and started again) never reached a run: the restarted
// server's new session ran from the URL's older text, and the typed text was gone (issue 42).
// - At each keystroke the text goes into the URL here, in the browser, whatever the server does.
// - Once the page's lost connection is back: if a box holds a text no run has seen, the page is loaded again
//   from its URL (Streamlit's own rerun sends the query string the server last wrote, not the browser's), else a
//   run is asked for (the restarted server's new session runs nothing until asked: the page kept the dead
//   process's charts). One watcher for the page, whichever boxes are mounted.
// data: {key: the text box's widget key, param: its URL parameter, value: the box's text in this run}.
export default function(component) {
  const data = component.data || {};
  const key = data.key, param = data.param, ran = data.value;
  if (!key || !param) return;
  const write = (event) => {
    try {
      const url = new URL(window.location.href);
      const value = event.target.value;
      if (url.searchParams.get(param) === value) return;
      url.searchParams.set(param, value);
      window.history.replaceState(window.history.state, "", url.toString());
    } catch (e) { /* a URL the browser will not take: the server's copy stays */ }
  };
  const boxes = () => Array.from(document.querySelectorAll(".st-key-" + key + " input, .st-key-" + key + " textarea"));
  const watched = new Set();
  const attach = () => {
    boxes().forEach((el) => {
      if (watched.has(el)) return;
      watched.add(el);
      el.addEventListener("input", write);
    });
  };
  attach();
  const observer = new MutationObserver(attach);  // a box drawn after this script (a later run, another column)
  observer.observe(document.body, { childList: true, subtree: true });
  const me = {
    unsent: () => typeof ran === "string" && boxes().some((el) => el.value !== ran),
    rerun: () => component.setTriggerValue("reconnected", Date.now()),
  };
  const R = (window.__normvizReconnect = window.__normvizReconnect || { boxes: [], lost: false, timer: null });
  R.boxes.push(me);
  if (!R.timer) {
    R.timer = setInterval(() => {
      const status = document.querySelector('[data-testid="stStatusWidget"]');
      const down = !!document.querySelector('[data-testid="stConnectionStatus"]')
        || (status !== null && /CONNECTING|Connection error/i.test(status.innerText || ""));
      if (down) { R.lost = true; return; }
      if (!R.lost || !R.boxes.length) return;
      R.lost = false;
      if (R.boxes.some((b) => b.unsent())) { window.location.reload(); } else { R.boxes[0].rerun(); }
    }, 500);
  }
  return () => {
    observer.disconnect();
    watched.forEach((el) => el.removeEventListener("input", write));
    R.boxes = R.boxes.filter((b) => b !== me);
    if (!R.boxes.length && R.timer) { clearInterval(R.timer); R.timer = null; }
  };
}
