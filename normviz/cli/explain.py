"""``python -m normviz explain --model M --text T [--token TOK] [--foil TOK] [--position P] --out FILE.npz|.json``.

Writes the fields of :class:`normviz.attribution.Explanation` (``total``, ``heads`` [L,H,n], ``attn_bias`` [L],
``ff`` [L], ``embedding``, ``final_bias``, ``sources`` [n], ``bias``, ``sources_by_layer`` [L+1, n],
``bias_by_layer`` [L+1]; encoder–decoders also ``cross_heads``,
``cross_bias``, ``source_tokens``), the token, foil and position explained, ``tokens``, and the top predictions
(``top_ids``, ``top_tokens``, ``top_probs``, ``top_logits``). Every user mistake that can be seen without the
model (names, text, position, output file, token options) is refused on one line with exit code 2 before the
model loads. ``sources`` runs under a default time budget (``SOURCES_BUDGET_S``, through the cost check of
:func:`normviz.attribution.adjoint.check`): over it they are refused with a note (``sources_refused`` in the
output) before any work; ``--option explain_budget_s=SECONDS`` sets another.
"""

from __future__ import annotations

import argparse
import sys
import warnings
from pathlib import Path

from ..core.commands import subcommand
from ..core.errors import NormvizError, NotApplicableError, TooCostlyError, TruncationWarning
from . import _continuation

SOURCES_BUDGET_S = 300.0  # the CLI's default time budget for sources (estimated seconds; option explain_budget_s)


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--model",
        required=True,
        help="smollm2, a decoder's Hub id or directory, a BERT MLM, or an encoder–decoder such as toy-mt",
    )
    p.add_argument("--text", required=True, help="the text (encoder–decoders: the source)")
    p.add_argument("--target", default=None, help="encoder–decoders: the target (teacher-forced; default: generated)")
    p.add_argument(
        "--token",
        default=None,
        help="the token to explain, as ONE token's text (e.g. ' Paris' with its "
        "space); default: the model's top prediction",
    )
    p.add_argument("--token-id", type=int, default=None, help="the token to explain, by id")
    p.add_argument("--foil", default=None, help="explain token minus this token's logit (one token's text)")
    p.add_argument("--foil-id", type=int, default=None, help="the foil by id")
    p.add_argument(
        "--actual-next",
        action="store_true",
        help="explain the text's own next token after --position (why was it predictable here?)",
    )
    p.add_argument(
        "--position",
        type=int,
        default=-1,
        help="the position whose prediction is explained (negative: from the end; default −1)",
    )
    p.add_argument("--top", type=int, default=10, help="how many top predictions to write (default 10)")
    p.add_argument("--out", required=True, help="output file: .npz or .json")
    p.add_argument("--no-sources", action="store_true", help="skip the propagated parts (sources, bias)")
    p.add_argument("--dtype", default="float32", choices=["float32", "float64"])
    p.add_argument("--device", default=None, help="cpu, cuda or mps (default: best available)")
    p.add_argument("--max-tokens", type=int, default=None, help="truncate longer text (default: the model's window)")
    p.add_argument(
        "--option",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help=f"options, e.g. --option explain_budget_s=60 (sources' time budget in seconds; default "
        f"{SOURCES_BUDGET_S:g})",
    )
    p.add_argument(
        "--graph",
        default=None,
        metavar="FILE",
        help="also write the attribution graph (heads and FF blocks as nodes, exact edges): .json in "
        "Neuronpedia's graph format, .plain.json, or .npz (pre-LN decoders)",
    )
    p.add_argument("--node-threshold", type=float, default=0.8, help="graph pruning: cumulative node influence kept")
    p.add_argument("--edge-threshold", type=float, default=0.98, help="graph pruning: cumulative edge influence kept")
    p.add_argument(
        "--continue",
        dest="continue_steps",
        type=int,
        default=None,
        metavar="T",
        help="explain every step of the model's greedy continuation of T tokens (--foil runner-up: "
        "each step against its best other token)",
    )
    p.add_argument(
        "--continuation",
        default=None,
        metavar="TEXT",
        help="explain every step of this continuation of the text, teacher-forced",
    )
    p.add_argument(
        "--html",
        default=None,
        metavar="FILE.html",
        help="with --continue/--continuation: also a page that opens offline (text, steps × tokens)",
    )


def _output(out: str) -> Path:
    from ..core.inputs import output_file

    suffix = Path(out).suffix if out else ""
    if suffix.lower() not in (".npz", ".json"):
        raise NormvizError(f"--out {out!r}: name a .npz or .json file (e.g. explain.npz).")
    return output_file(out, suffix=suffix)  # the name as given (G.JSON stays G.JSON)


def _same_file(a: Path, b: Path) -> bool:
    a, b = a.expanduser().resolve(), b.expanduser().resolve()
    if a == b:
        return True
    try:
        return a.exists() and b.exists() and a.samefile(b)
    except OSError:
        return False


def check_arguments(args) -> Path:
    """Every mistake visible without the model; the output path."""
    from ..core.inputs import check_device, check_max_tokens, check_model_name, check_text
    from ._options import parse_options as _parse_options

    check_model_name(args.model)
    from ..models.loading import EMBEDDED, resolve

    if args.model.strip().lower() not in EMBEDDED:  # a directory without config.json, a malformed id …
        resolve(args.model)
    check_text(args.text, "--text")
    check_text(args.target, "--target", allow_empty=True)
    check_max_tokens(args.max_tokens)
    check_device(args.device)
    chosen = [
        name
        for name, v in (
            ("--token", args.token),
            ("--token-id", args.token_id),
            ("--actual-next", args.actual_next or None),
        )
        if v is not None
    ]
    if len(chosen) > 1:
        raise NormvizError(f"{' and '.join(chosen)} both name the token to explain; give one of them.")
    if args.foil is not None and args.foil_id is not None:
        raise NormvizError("--foil and --foil-id both name the foil; give one of them.")
    for name, value in (("--token", args.token), ("--foil", args.foil)):
        if value is not None and value == "":
            raise NormvizError(f"{name} is empty; give one token's text (e.g. ' Paris') or use {name}-id.")
    for name, value in (("--token-id", args.token_id), ("--foil-id", args.foil_id)):
        if value is not None and value < 0:
            raise NormvizError(f"{name} {value}: token ids are 0 or more.")
    if (
        args.token is not None
        and args.token == args.foil
        or args.token_id is not None
        and args.token_id == args.foil_id
    ):
        raise NormvizError("the token and the foil are the same: their logit difference is 0 by definition.")
    if args.top < 1:
        raise NormvizError(f"--top {args.top}: give 1 or more.")
    options = _parse_options(args.option)
    out = _output(args.out)
    args.html_path = _continuation.check(args)
    if args.graph is not None:
        from ..attribution.graph import graph_suffix

        graph_suffix(args.graph, "--graph")
        for name, t in (("--node-threshold", args.node_threshold), ("--edge-threshold", args.edge_threshold)):
            if not 0.0 <= t <= 1.0:
                raise NormvizError(f"{name} {t}: give a fraction in [0, 1].")
        from ..core.inputs import output_file

        graph_out = output_file(args.graph, suffix=Path(args.graph).suffix)
        if _same_file(graph_out, out):
            raise NormvizError(
                f"--graph {args.graph!r} is the --out file: the graph would overwrite the "
                "explanation; give it another name (e.g. graph.json)."
            )
    _check_with_tokenizer(args, options)
    return out


def _check_with_tokenizer(args, options: dict) -> None:
    """Checks that need the tokenizer or the config, done before the weights load where both can be read
    from files already here (:func:`normviz.models.loading.preview`): --token / --foil one token each; a
    --graph that is not applicable (post-LN) or would pass the memory budget even at its fewest tokens."""
    if args.token is None and args.foil is None and args.graph is None:
        return
    from ..models.loading import preview

    got = preview(args.model)
    if got is None:
        return  # checked once the model is loaded
    config, tokenizer = got
    from ..attribution.predict import token_id

    for what, value in (("token", args.token), ("foil", args.foil)):
        if value is not None and not (what == "foil" and value == "runner-up" and _continuation.wanted(args)):
            token_id(tokenizer, value, 1 << 62, what)  # one token, or the refusal that names its pieces
    if args.graph is None:
        return
    import torch

    from ..attribution.graph import accumulation_itemsize, too_costly
    from ..core import memory
    from ..models.loading import check_supported
    from ..models.params import head_counts, sizes

    try:
        spec = check_supported(config, args.model)
    except NormvizError:
        return  # the load refuses it with its own message
    if spec.placement != "pre" or spec.is_encoder_decoder:
        raise NormvizError(
            f"--graph needs a pre-LN decoder, where every component writes into one residual "
            f"stream read by the logit; {args.model!r} is not one (use the explanation's sources)."
        )
    # the fewest tokens the text can have: a word is at least one token (and --max-tokens cuts it)
    n = max(2, len(args.text.split()))
    if args.max_tokens is not None:
        n = min(n, args.max_tokens)
    d, d_ff = sizes(config, spec)
    n_layers = spec.fields.get(config, ("num_hidden_layers", "n_layer", "num_layers"))
    if n_layers is None:
        return
    dtype = torch.float64 if args.dtype == "float64" else torch.float32
    refusal = too_costly(
        n, int(n_layers), head_counts(config, spec)[0], d, d_ff, accumulation_itemsize(dtype), memory.budget_mb(options)
    )
    if refusal is not None:
        raise NormvizError(f"--graph: {refusal} (The text has at least {n} tokens; refused before the model loads.)")


def run(args) -> int:
    import numpy as np

    from ..attribution import actual_next
    from ..attribution.adjoint import BUDGET
    from ..models import load
    from ..session.session import Session
    from ._options import parse_options as _parse_options

    out = check_arguments(args)
    options = _parse_options(args.option)
    options.setdefault(BUDGET.option, SOURCES_BUDGET_S)  # a long text's sources are refused, not run for an hour
    lm = load(args.model, device=args.device, dtype=args.dtype, progress=lambda msg: print(msg, file=sys.stderr))
    if args.target is not None and not lm.is_encoder_decoder:
        raise NormvizError(
            f"--target is for encoder–decoder models (toy-mt, Marian, BART …); {args.model!r} is not one."
        )
    extra = {"target": args.target} if lm.is_encoder_decoder else {}
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", TruncationWarning)
        s = Session(lm, args.text, max_tokens=args.max_tokens, options=options, **extra)
        if args.graph is not None:  # its memory, before the explanation's minutes
            _check_graph_memory(s)
        if _continuation.wanted(args):
            return _continuation.run(args, s, out, args.html_path, _write)
        token = args.token if args.token is not None else args.token_id
        if args.actual_next:
            token = actual_next(s, args.position)
        foil = args.foil if args.foil is not None else args.foil_id
        e = s.explain(token=token, foil=foil, position=args.position)
        top = s.predict(top=args.top, position=args.position)
    for w in caught:
        print(f"warning: {w.message}", file=sys.stderr)
    data = e.to_dict(with_sources=False)
    if not e.has_direct:
        print(f"note: {e.direct_refusal}", file=sys.stderr)
    if not args.no_sources:
        try:
            data["sources"], data["bias"] = e.sources, e.bias
            data["sources_by_layer"], data["bias_by_layer"] = e.sources_by_layer, e.bias_by_layer
        except (TooCostlyError, NotApplicableError) as exc:
            data["sources_refused"] = str(exc)
            hint = (
                f" (--option {BUDGET.option}=SECONDS sets the budget; default {SOURCES_BUDGET_S:g})"
                if isinstance(exc, TooCostlyError)
                else ""
            )
            print(f"note: sources refused: {exc}{hint}", file=sys.stderr)
    data.update(
        top_ids=np.array([c.id for c in top]),
        top_tokens=np.array([c.token for c in top]),
        top_probs=np.array([c.prob for c in top]),
        top_logits=np.array([c.logit for c in top]),
    )
    _write(out, data)
    vs = f" vs {e.foil_text!r}" if e.foil is not None else ""
    print(f"wrote {out}: {e.token_text!r}{vs} at position {e.position}, total {e.total:.4f}", file=sys.stderr)
    if args.graph is not None:
        from ..attribution.graph import graph

        g = graph(
            s,
            token=e.token,
            foil=e.foil,
            position=e.position,
            node_threshold=args.node_threshold,
            edge_threshold=args.edge_threshold,
        )
        try:
            g.save(args.graph, slug=Path(args.graph).stem.replace(".plain", ""))
        except OSError as exc:
            raise NormvizError(f"Could not write {args.graph!r}: {exc.strerror or exc}.") from None
        print(
            f"wrote {args.graph}: {int(g.node_mask.sum())} of {g.n_nodes} nodes, {int(g.edge_mask.sum())} edges "
            f"(thresholds {args.node_threshold} / {args.edge_threshold}), {sum(g.seconds.values()):.1f} s",
            file=sys.stderr,
        )
    return 0


def _check_graph_memory(session) -> None:
    from ..attribution.graph import accumulation_itemsize, too_costly
    from ..core import memory

    lm = session.lm
    if lm.is_encoder_decoder or lm.spec.placement != "pre":
        return  # graph() refuses it with its own message
    d, d_ff = lm.sizes
    refusal = too_costly(
        session.n_tokens,
        lm.n_layers,
        lm.n_heads,
        d,
        d_ff,
        accumulation_itemsize(lm.dtype),
        memory.budget_mb(session.options),
    )
    if refusal is not None:
        raise NormvizError(f"--graph: {refusal} Nothing was written.")


def _write(out: Path, data: dict) -> None:
    import json

    import numpy as np

    try:
        if out.suffix.lower() == ".json":
            plain = {
                k: (v.tolist() if isinstance(v, np.ndarray) else v.item() if isinstance(v, np.generic) else v)
                for k, v in data.items()
            }
            out.write_text(json.dumps(plain, ensure_ascii=False), encoding="utf-8")
        else:
            with open(out, "wb") as fh:  # the name as given (numpy would add .npz to E.NPZ)
                np.savez(fh, **{k: np.asarray(v) for k, v in data.items()})
    except OSError as exc:
        raise NormvizError(f"Could not write {str(out)!r}: {exc.strerror or exc}.") from None


subcommand("explain", "why this token: a prediction split exactly over layers, heads and input tokens")(
    (add_arguments, run)
)
