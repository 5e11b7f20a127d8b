"""``python -m normviz export --model M --text T --out F.npz``: one text's maps to an .npz (and an --html page)."""

from __future__ import annotations

import argparse
import sys
import warnings

from ..core.commands import subcommand
from ..core.errors import NormvizError, TruncationWarning
from ._options import parse_options


def _add_export(p: argparse.ArgumentParser) -> None:
    p.add_argument("--model", required=True, help="minilm, smollm2, a Hugging Face Hub id or a local model directory")
    p.add_argument("--text", required=True, help="the text to analyse")
    p.add_argument("--text-pair", default=None, help="optional second sentence (sentence-pair input)")
    p.add_argument(
        "--target",
        default=None,
        help="encoder–decoder models: the target text (teacher-forced); without it the target is generated greedily",
    )
    p.add_argument("--out", required=True, help="output .npz file")
    p.add_argument(
        "--maps",
        "--methods",
        dest="maps",
        nargs="*",
        default=None,
        metavar="MAP_KEY",
        help="map keys to compute (default: every default map of the model), or family names; comma or "
        "space separated (--methods is the older name)",
    )
    p.add_argument("--dtype", default="float32", choices=["float32", "float64"])
    p.add_argument("--device", default=None, help="cpu, cuda or mps (default: best available)")
    p.add_argument("--max-tokens", type=int, default=None, help="truncate longer text (default: the model's window)")
    p.add_argument(
        "--option",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="an option of the map families, e.g. --option rollout_normalization=receptive_field",
    )
    p.add_argument(
        "--html",
        default=None,
        metavar="FILE.html",
        help="also write a standalone page of the maps (plotly.js embedded: opens offline)",
    )
    p.add_argument("--html-layer", type=int, default=0, help="layer shown in the --html page (default 0)")
    p.add_argument("--html-head", type=int, default=None, help="head shown there (default: all heads)")
    p.add_argument(
        "--html-view",
        default="heatmap",
        choices=["heatmap", "lines", "player"],
        help="heatmaps, bertviz-style lines, or each map animated through the layers",
    )


def _run_export(args) -> int:
    from .. import analyze, load
    from ..core.inputs import check_device, check_max_tokens, check_model_name, check_text

    # every user mistake that can be seen without the model is refused before it loads
    check_model_name(args.model)
    check_text(args.text, "--text")
    check_text(args.text_pair, "--text-pair", allow_empty=True)
    check_text(args.target, "--target", allow_empty=True)
    check_max_tokens(args.max_tokens)
    check_device(args.device)
    out = _npz_file(args.out)
    html_out = _html_file(args.html) if args.html is not None else None
    options = parse_options(args.option)
    keys = None
    if args.maps:
        keys = [m for item in args.maps for m in item.split(",") if m.strip()]
        from ..methods.keyspace import known, parse

        for k in keys:
            if not known(k):
                parse(k)  # an unknown key is refused by name, before the model loads
    lm = load(args.model, device=args.device, dtype=args.dtype, progress=lambda msg: print(msg, file=sys.stderr))
    if html_out is not None and lm.is_encoder_decoder:
        raise NormvizError(
            "--html draws the maps of encoder-only and decoder-only models; for an encoder–decoder, "
            "export the .npz without --html (or use the app's Translate page)."
        )
    if args.target is not None and not lm.is_encoder_decoder:
        raise NormvizError(
            f"--target is for encoder–decoder models (Marian, BART, T5, toy-mt); {args.model!r} is not one."
        )
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", TruncationWarning)
        analysis = analyze(
            lm,
            args.text,
            text_pair=args.text_pair,
            keys=keys,
            max_tokens=args.max_tokens,
            options=options,
            target=args.target,
        )
    for w in caught:
        print(f"warning: {w.message}", file=sys.stderr)
    try:
        with open(out, "wb") as fh:  # under the name given (numpy would add .npz to M.NPZ)
            analysis.to_npz(fh)
    except OSError as exc:
        raise NormvizError(f"Could not write {str(out)!r}: {exc.strerror or exc}.") from None
    if html_out is not None:
        _write_html(analysis, html_out, args)
    for key, note in analysis.notes.items():
        print(f"note: {key}: {note}", file=sys.stderr)
    if analysis.is_encoder_decoder:
        print(f"target: {analysis.target_text}", file=sys.stderr)
    shapes = ", ".join(f"{k} {tuple(v.shape)}" for k, v in analysis.arrays.items())
    size = (
        f"{len(analysis.src_tokens)} source and {len(analysis.tgt_tokens)} target tokens"
        if analysis.is_encoder_decoder
        else f"{analysis.n_tokens} tokens"
    )
    print(f"wrote {out}: {size}; {shapes}", file=sys.stderr)
    return 0


def _npz_file(name: str):
    """The --out file: an .npz (a name without an ending gets .npz, as numpy would add it); another ending
    (x.csv) is refused, not written as x.csv.npz."""
    from pathlib import Path

    from ..core.inputs import output_file

    suffix = Path(name).suffix if name else ""
    if suffix and suffix.lower() != ".npz":
        raise NormvizError(
            f"--out {name!r}: export writes an .npz file (numpy arrays, one per map key); name it "
            f"{str(Path(name).with_suffix('.npz'))!r}."
        )
    return output_file(name, suffix=suffix or ".npz")


def _html_file(name: str):
    """The --html file, checked writable before the model loads (as --out is)."""
    from ..core.inputs import output_file

    try:
        return output_file(name, suffix=".html")
    except NormvizError as exc:
        raise NormvizError(str(exc).replace("--out", "--html")) from None


def _write_html(analysis, path, args) -> None:
    """The --html page: :func:`normviz.viz.notebook.default_view` in :func:`normviz.viz.standalone_html`."""
    from ..viz import standalone_html
    from ..viz.notebook import default_view

    figs, captions = default_view(analysis, layer=args.html_layer, head=args.html_head, view=args.html_view)
    pair = f" / {analysis.text_pair}" if analysis.text_pair else ""
    page = standalone_html(
        figs, title=f"normviz · {analysis.model_name}", captions=captions, description=f"{analysis.text}{pair}"
    )
    try:
        path.write_text(page, encoding="utf-8")
    except OSError as exc:
        raise NormvizError(f"Could not write {str(path)!r}: {exc.strerror or exc}.") from None
    print(f"wrote {path}: {len(figs)} panels", file=sys.stderr)


subcommand("export", "analyse one text and write every map to an .npz file")((_add_export, _run_export))
