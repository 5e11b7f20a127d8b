"""Command line: ``python -m normviz export --model M --text T --out F.npz``.

Subcommands register themselves in :data:`normviz.commands.SUBCOMMANDS` (name -> (add_arguments, run)) so
later features add their own without editing the parser here; this module imports the modules that do
(:data:`PLUGINS`), from above them.
"""
from __future__ import annotations

import argparse
import os
import sys
import warnings

from .commands import SUBCOMMANDS, subcommand
from .inputs import parse_options
from .errors import NormvizError, TruncationWarning

# modules that register subcommands when imported (absent ones are skipped): a new one is added here
PLUGINS = ("normviz.corpus.cli", "normviz.align.cli", "normviz.attribution.cli", "normviz.trust.cli")


def _add_export(p: argparse.ArgumentParser) -> None:
    p.add_argument("--model", required=True, help="minilm, smollm2, a Hugging Face Hub id or a local model directory")
    p.add_argument("--text", required=True, help="the text to analyse")
    p.add_argument("--text-pair", default=None, help="optional second sentence (sentence-pair input)")
    p.add_argument("--target", default=None, help="encoder–decoder models: the target text (teacher-forced); "
                                                 "without it the target is generated greedily")
    p.add_argument("--out", required=True, help="output .npz file")
    p.add_argument("--maps", "--methods", dest="maps", nargs="*", default=None, metavar="MAP_KEY",
                   help="map keys to compute (default: every default map of the model), or family names; comma or "
                        "space separated (--methods is the older name)")
    p.add_argument("--dtype", default="float32", choices=["float32", "float64"])
    p.add_argument("--device", default=None, help="cpu, cuda or mps (default: best available)")
    p.add_argument("--max-tokens", type=int, default=None, help="truncate longer text (default: the model's window)")
    p.add_argument("--option", action="append", default=[], metavar="KEY=VALUE",
                   help="an option of the map families, e.g. --option rollout_normalization=receptive_field")
    p.add_argument("--html", default=None, metavar="FILE.html",
                   help="also write a standalone page of the maps (plotly.js embedded: opens offline)")
    p.add_argument("--html-layer", type=int, default=0, help="layer shown in the --html page (default 0)")
    p.add_argument("--html-head", type=int, default=None, help="head shown there (default: all heads)")
    p.add_argument("--html-view", default="heatmap", choices=["heatmap", "lines", "player"],
                   help="heatmaps, bertviz-style lines, or each map animated through the layers")


_parse_options = parse_options  # (in normviz.inputs, so that subcommands below this module share it)


def _run_export(args) -> int:
    from . import analyze, load
    from .inputs import check_device, check_max_tokens, check_model_name, check_text, output_file

    # every user mistake that can be seen without the model is refused before it loads
    check_model_name(args.model)
    check_text(args.text, "--text")
    check_text(args.text_pair, "--text-pair", allow_empty=True)
    check_text(args.target, "--target", allow_empty=True)
    check_max_tokens(args.max_tokens)
    check_device(args.device)
    out = output_file(args.out)
    html_out = _html_file(args.html) if args.html is not None else None
    options = _parse_options(args.option)
    keys = None
    if args.maps:
        keys = [m for item in args.maps for m in item.split(",") if m.strip()]
        from .keyspace import known, parse

        for k in keys:
            if not known(k):
                parse(k)  # an unknown key is refused by name, before the model loads
    lm = load(args.model, device=args.device, dtype=args.dtype, progress=lambda msg: print(msg, file=sys.stderr))
    if html_out is not None and lm.is_encoder_decoder:
        raise NormvizError("--html draws the maps of encoder-only and decoder-only models; for an encoder–decoder, "
                           "export the .npz without --html (or use the app's Translate page).")
    if args.target is not None and not lm.is_encoder_decoder:
        raise NormvizError(f"--target is for encoder–decoder models (Marian, BART, T5, toy-mt); {args.model!r} is not one.")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", TruncationWarning)
        analysis = analyze(lm, args.text, text_pair=args.text_pair, keys=keys, max_tokens=args.max_tokens,
                           options=options, target=args.target)
    for w in caught:
        print(f"warning: {w.message}", file=sys.stderr)
    try:
        analysis.to_npz(out)
    except OSError as exc:
        raise NormvizError(f"Could not write {str(out)!r}: {exc.strerror or exc}.") from None
    if html_out is not None:
        _write_html(analysis, html_out, args)
    for key, note in analysis.notes.items():
        print(f"note: {key}: {note}", file=sys.stderr)
    if analysis.is_encoder_decoder:
        print(f"target: {analysis.target_text}", file=sys.stderr)
    shapes = ", ".join(f"{k} {tuple(v.shape)}" for k, v in analysis.arrays.items())
    size = (f"{len(analysis.src_tokens)} source and {len(analysis.tgt_tokens)} target tokens"
            if analysis.is_encoder_decoder else f"{analysis.n_tokens} tokens")
    print(f"wrote {out}: {size}; {shapes}", file=sys.stderr)
    return 0


def _html_file(name: str):
    """The --html file, checked writable before the model loads (as --out is)."""
    from .inputs import output_file

    try:
        return output_file(name, suffix=".html")
    except NormvizError as exc:
        raise NormvizError(str(exc).replace("--out", "--html")) from None


def _write_html(analysis, path, args) -> None:
    """The --html page: :func:`normviz.notebook.default_view` in :func:`normviz.viz.standalone_html`."""
    from .notebook import default_view
    from .viz import standalone_html

    figs, captions = default_view(analysis, layer=args.html_layer, head=args.html_head, view=args.html_view)
    pair = f" / {analysis.text_pair}" if analysis.text_pair else ""
    page = standalone_html(figs, title=f"normviz · {analysis.model_name}", captions=captions,
                           description=f"{analysis.text}{pair}")
    try:
        path.write_text(page, encoding="utf-8")
    except OSError as exc:
        raise NormvizError(f"Could not write {str(path)!r}: {exc.strerror or exc}.") from None
    print(f"wrote {path}: {len(figs)} panels", file=sys.stderr)


subcommand("export", "analyse one text and write every map to an .npz file")((_add_export, _run_export))


class _Parser(argparse.ArgumentParser):
    """Usage mistakes on one line (``error: … (see --help)``), exit code 2."""

    def error(self, message: str):
        self.exit(2, f"error: {message.splitlines()[0] if message else 'bad arguments'} (see {self.prog} --help)\n")


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="python -m normviz", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)
    for name, (add, _run, help_text) in SUBCOMMANDS.items():
        add(sub.add_parser(name, help=help_text))
    return parser


def _load_plugins() -> None:
    """Import modules that add subcommands (they may be absent in a minimal install)."""
    import importlib

    for mod in PLUGINS:
        try:
            importlib.import_module(mod)
        except ModuleNotFoundError as exc:
            if exc.name and not exc.name.startswith(mod.rsplit(".", 1)[0]):
                raise


def main(argv: list[str] | None = None) -> int:
    _load_plugins()
    args = build_parser().parse_args(argv)
    try:
        return SUBCOMMANDS[args.command][1](args)
    except NormvizError as exc:
        print(f"error: {_one_line(exc)}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("error: interrupted", file=sys.stderr)
        return 130
    except Exception as exc:  # a bug, not a user mistake: still one line (NORMVIZ_DEBUG=1 for the traceback)
        if os.environ.get("NORMVIZ_DEBUG"):
            raise
        print(f"error: unexpected {type(exc).__name__}: {_one_line(exc)} (set NORMVIZ_DEBUG=1 for the traceback)",
              file=sys.stderr)
        return 1


def _one_line(exc: BaseException, limit: int = 600) -> str:
    text = " ".join(str(exc).split())
    return text if len(text) <= limit else text[:limit] + "…"
