"""``normviz explain --continue T [--continuation TEXT] [--foil TOK|runner-up] --out cont.npz|cont.json
[--html cont.html]``: every step of a continuation explained (:mod:`normviz.attribution.continuation`).

Writes :meth:`Continuation.to_dict`'s fields: ``generated_ids``, ``tokens``, ``positions`` [T], ``totals`` [T],
``sources`` [T, N] (NaN — null in JSON — after each step's position), ``bias`` [T], ``columns`` [N], ``heads``
[T, L, H], ``ff`` [T, L] … ; ``--html`` also writes a page that opens offline (the text, the steps × tokens
heatmap, each step's total, hover for every value)."""

from __future__ import annotations

import sys
from pathlib import Path

from ..core.errors import NormvizError

CONFLICTS = (("--token", "token"), ("--token-id", "token_id"), ("--actual-next", "actual_next"), ("--graph", "graph"))


def wanted(args) -> bool:
    """Whether the command explains a continuation (``--continue`` or ``--continuation``)."""
    return args.continue_steps is not None or args.continuation is not None


def check(args) -> Path | None:
    """The continuation options' mistakes, before the model loads; the --html path (or None)."""
    from ..core.inputs import output_file

    if args.html is not None and not wanted(args):
        raise NormvizError("--html draws a continuation: give --continue T (or --continuation TEXT) with it.")
    if not wanted(args):
        return None
    if args.continue_steps is not None and args.continuation is not None:
        raise NormvizError("--continue generates a continuation and --continuation gives one; use one of them.")
    if args.continue_steps is not None and not 1 <= args.continue_steps <= 512:
        raise NormvizError(f"--continue {args.continue_steps}: give a number of tokens from 1 to 512.")
    if args.continuation is not None and args.continuation == "":
        raise NormvizError("--continuation is empty; give the continuation's text.")
    for flag, name in CONFLICTS:
        if getattr(args, name, None) not in (None, False):
            raise NormvizError(f"{flag} explains one position; a continuation explains every step (leave it out).")
    if args.position != -1:
        raise NormvizError("--position explains one position; a continuation starts after the text's end.")
    if args.html is None:
        return None
    if not str(args.html).lower().endswith(".html"):
        raise NormvizError(f"--html {args.html!r}: name a .html file.")
    try:
        return output_file(args.html, suffix=".html")
    except NormvizError as exc:
        raise NormvizError(str(exc).replace("--out", "--html")) from None


def run(args, session, out: Path, html: Path | None, write) -> int:
    """Explain the continuation of ``session``'s text and write ``out`` (and the ``html`` page)."""
    foil = args.foil if args.foil is not None else args.foil_id
    c = session.explain_continuation(max_new_tokens=args.continue_steps, continuation=args.continuation, foil=foil)
    data = c.to_dict()
    if out.suffix == ".json":  # NaN (the columns after each step's position) as null
        try:
            out.write_text(c.to_json(), encoding="utf-8")
        except OSError as exc:
            raise NormvizError(f"Could not write {str(out)!r}: {exc.strerror or exc}.") from None
    else:
        write(out, data)
    print(f"wrote {out}: {len(c)} steps ({c.note}): {c.text!r}", file=sys.stderr)
    if c.direct_refusal:
        print(f"note: {c.direct_refusal}", file=sys.stderr)
    if html is not None:
        from ..viz.continuation import continuation_page

        try:
            html.write_text(continuation_page(data, prompt=session.text), encoding="utf-8")
        except OSError as exc:
            raise NormvizError(f"Could not write {str(html)!r}: {exc.strerror or exc}.") from None
        print(f"wrote {html}", file=sys.stderr)
    return 0
