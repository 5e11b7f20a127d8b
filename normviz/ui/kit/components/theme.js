// A link's theme=dark|light (normviz.ui.kit.theme): Streamlit picks its theme in the browser (the visitor's menu
// choice, kept in localStorage per path, else the system setting) and has no server call to set it. When the
// link asks for another theme than the one shown, this stores the link's choice where Streamlit reads it and
// reloads the page once (a flag in sessionStorage: never a reload loop, even where storage is refused).
// data: {want: "dark" | "light"}.
export default function(component) {
  const want = (component.data || {}).want;
  if (want !== 'dark' && want !== 'light') return;
  const path = window.location.pathname;
  const flag = 'normviz-theme:' + path + ':' + want;
  try {
    if (window.sessionStorage.getItem(flag)) return;
    window.sessionStorage.setItem(flag, '1');
    window.localStorage.setItem('stActiveTheme-' + path + '-v2', JSON.stringify(want === 'dark' ? 'Dark' : 'Light'));
  } catch (e) {
    return;  // no storage: the page keeps the browser's theme
  }
  window.location.reload();
}
