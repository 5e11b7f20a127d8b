"""Screenshots of every page at 1280×800 and 1920×1080 in light and dark, in stage mode and not.

    .venv/bin/python scripts/screenshots.py OUT_DIR [--text "A sentence."] [--model smollm2] [--sizes 1280x800 ...]

Files: OUT_DIR/<page>_<w>x<h>_<mode>.png (``--by-variant``: OUT_DIR/<w>x<h>_<mode>/<page>.png; ``--full``: the
whole page too, as …_full.png) (the same helper as the real-browser test, tests/helpers/browser.py). Each is taken
once every chart on the page has drawn (``--timeout`` s at most: past it the shot is taken anyway and the chart that
did not draw is named at the end; the exit status is then 1).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from urllib.parse import urlencode

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from tools.browser import MODES, SHOT_PAGES, SIZES, chromium, screenshots, streamlit_server  # noqa: E402


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("out")
    ap.add_argument("--text", default="The cat sat on the mat because it was tired.")
    ap.add_argument("--pair", default="")
    ap.add_argument("--model", default="minilm")
    ap.add_argument("--sizes", nargs="*", default=[f"{w}x{h}" for w, h in SIZES])
    ap.add_argument("--modes", nargs="*", default=MODES, choices=MODES)
    ap.add_argument("--timeout", type=float, default=240, help="s to wait for a page's charts (default 240)")
    ap.add_argument("--resume", action="store_true", help="skip the shots already in OUT (a pass cut short)")
    ap.add_argument("--full", action="store_true", help="also the whole page of each (…_full.png)")
    ap.add_argument(
        "--by-variant",
        action="store_true",
        help="files as OUT/<w>x<h>_<mode>/<page>[_full].png, one folder per variant",
    )
    ap.add_argument("--pages", nargs="*", default=[p for p, _ in SHOT_PAGES], choices=[p for p, _ in SHOT_PAGES])
    args = ap.parse_args(argv)
    sizes = [tuple(int(x) for x in s.lower().split("x")) for s in args.sizes]
    query = urlencode({k: v for k, v in (("text", args.text), ("pair", args.pair), ("model", args.model)) if v})
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    problems: list[str] = []
    with streamlit_server(log_path=str(out / "streamlit.log")) as url, chromium() as driver:
        files = screenshots(
            driver,
            url,
            out,
            query=query,
            pages=[p for p in SHOT_PAGES if p[0] in args.pages],
            sizes=sizes,
            modes=args.modes,
            full=args.full,
            timeout=args.timeout,
            problems=problems,
            skip_existing=args.resume,
        )
    for f in files:
        if args.by_variant:
            f = by_variant(f, out)
        print(f)
    for p in problems:
        print("not drawn:", p, file=sys.stderr)
    if problems:
        sys.exit(1)


def by_variant(f: Path, out: Path) -> Path:
    """``OUT/<page>_<w>x<h>_<mode>[_full].png`` moved to ``OUT/<w>x<h>_<mode>/<page>[_full].png``."""
    page, size, rest = f.stem.split("_", 2)
    mode, _, full = rest.partition("_")
    to = out / f"{size}_{mode}" / (page + ("_" + full if full else "") + ".png")
    to.parent.mkdir(parents=True, exist_ok=True)
    return f.replace(to)


if __name__ == "__main__":
    main()
