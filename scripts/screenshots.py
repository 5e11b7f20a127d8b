"""Take 1280×800 screenshots of every page: python scripts/screenshots.py OUT_DIR [page-query …]."""
from __future__ import annotations

import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from tests.browser import chromium, streamlit_server, wait_for_app  # noqa: E402

PAGES = [("explore", "/", 4), ("explore_focus", "/?focus=2&head=3&layer=2", 5), ("overview", "/Overview", 2),
         ("learn", "/Learn", 1), ("explore_present", "/?present=1", 2), ("explore_dark", "/?layer=1", 4),
         ("explore_smollm2", "/?model=smollm2&layer=20", 4)]


def main(out: str, only: list[str]) -> None:
    out_dir = Path(out)
    out_dir.mkdir(parents=True, exist_ok=True)
    with streamlit_server(log_path=str(out_dir / "streamlit.log")) as url, chromium() as driver:
        for name, path, charts in PAGES:
            if only and name not in only:
                continue
            driver.execute_cdp_cmd("Emulation.setEmulatedMedia", {"features": [
                {"name": "prefers-color-scheme", "value": "dark" if name.endswith("_dark") else "light"}]})
            driver.get(url + path)
            state = wait_for_app(driver, charts)
            time.sleep(1)
            driver.save_screenshot(str(out_dir / f"{name}.png"))
            print(name, state)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2:])
