"""Write the capability table of docs/models.md from the registry: each architecture row (model types sharing one
``ArchSpec``), the raw-attention floor, and the embedded models.

Nothing is written by hand: each row's capabilities are asked of the library itself, on a tiny random model of
that type (tools/tiny.py's config, with its LM head where the type has one; float64, float32 for mixtures of
experts): which map keys it offers
(:func:`normviz.all_keys`), and whether ``explain`` (its direct parts, its sources), ``attend``, ``graph`` and the
interventions (``knockout``, ``ablate_heads``) run or are refused, and each refusal's reason.

    python scripts/models_table.py          # rewrite the part between the markers
    python scripts/models_table.py --check  # exit 1 when the file is not current (tests/unit/test_models_table.py)
"""

from __future__ import annotations

import re
import sys
import warnings
from pathlib import Path

import doc_block  # scripts/doc_block.py, beside this script

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

DOC = ROOT / "docs" / "models.md"
BEGIN, END = "<!-- models-table:begin (scripts/models_table.py writes this part) -->", "<!-- models-table:end -->"
FLOOR_PROBE = "bloom"  # a type without a row: the floor's row is probed on it
YES, NO = "✓", "—"


def _cell(text: str) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ")


def _tiny_configs() -> dict:
    from tools import tiny

    configs = dict(tiny._configs())
    configs.update(getattr(tiny, "_later_configs", dict)())  # round 5's decoders (issue 38)
    configs.update(getattr(tiny, "_seq2seq_configs", dict)())
    out: dict = {}
    for k, c in configs.items():  # a type's first tiny config is its probe (falcon: not falcon_mq, falcon_seq)
        if k not in ("t5_gated",):
            out.setdefault(getattr(c, "model_type", k), c)
    return out


def _build(config, causal: bool):
    """A tiny random model of ``config`` with its LM head where transformers has one (a decoder's causal LM head,
    an encoder's masked-LM head, an encoder–decoder's; float64), wrapped."""
    import torch
    import transformers as tf

    import normviz
    from tools.tiny import randomize_weights, tokenizer

    config._attn_implementation = "eager"
    torch.manual_seed(0)
    model = None
    heads = (
        (tf.AutoModelForSeq2SeqLM,)
        if config.is_encoder_decoder
        else (tf.AutoModelForCausalLM,)
        if causal
        else (tf.AutoModelForMaskedLM,)
    )
    for auto in (*heads, tf.AutoModel):
        try:
            model = auto.from_config(config, attn_implementation="eager")
            break
        except ValueError:
            continue
    moe = any(getattr(config, k, None) for k in ("num_experts", "num_local_experts"))  # no float64 grouped matmul
    model = model.to(torch.float32 if moe else torch.float64).eval()
    randomize_weights(model)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return normviz.from_model(model, tokenizer() if config.is_encoder_decoder else None, name="tiny")


def _reason(exc) -> str:
    """The first sentence of a refusal, without its parentheses and the probe model's name, at most 110 characters."""
    text = re.sub(r"\s*\([^()]*\)", "", str(exc).strip()).replace("'tiny' ", "the model ")
    first = re.split(r"(?<=[.;])\s", text, maxsplit=1)[0].rstrip(".;")
    return first if len(first) <= 110 else first[:109].rstrip() + "…"


def _try(call) -> str | None:
    """None when ``call()`` runs; else the first clause of its refusal."""
    from normviz.core.errors import NormvizError

    try:
        call()
    except NotImplementedError as exc:
        return _reason(exc) or "not implemented"
    except NormvizError as exc:
        return _reason(exc)
    return None


def probe(lm) -> dict:
    """What ``lm`` offers, asked of the library: {column: ✓ or the refusal}, and {refused key: its reason}."""
    import normviz
    from normviz.core.tokens import Encoded
    from normviz.methods import keyspace

    ids = [5, 9, 14, 3, 22]
    enc = Encoded(ids=ids, tokens=[str(i) for i in ids], labels=[str(i) for i in ids], special=[False] * 5, dropped=0)
    if lm.is_encoder_decoder:
        s = normviz.Session.from_ids(lm, ids, [0] + ids[:3])
    else:
        s = normviz.Session.from_encoded(lm, [enc])[0]
    every = [keyspace.spell(st, k) for st in keyspace.stacks_of(lm) for k in keyspace.all_keys(None, stack=st)]
    offered = keyspace.all_keys(lm)
    refused = {}
    for k in every:
        if k not in offered:
            why = keyspace.refusal(lm, k)
            if why:
                refused[k] = _reason(why)
    cols = {"maps": f"{len(offered)} of {len(every)}"}
    if lm.note:  # the raw-attention floor: one reason for all
        return {"cols": {**cols, **{c: f"{NO} (needs a row)" for c in COLUMNS[1:]}}, "refused": refused}
    explain = _try(lambda: s.explain())
    if explain is None:
        e = s.explain()
        cols["explain"] = YES if e.has_direct else f"sources only: {_reason(e.direct_refusal)}"
        cols["sources"] = YES if _try(lambda: e.sources) is None else _try(lambda: e.sources)
    else:
        cols["explain"] = cols["sources"] = explain
    cols["attend"] = _try(lambda: s.attend(0, 0, -1, 0)) or YES
    cols["graph"] = _try(lambda: normviz.graph(s)) or YES
    knock = _try(lambda: s.knockout()) or _try(lambda: s.ablate_heads())
    cols["interventions"] = knock or YES
    return {"cols": cols, "refused": refused}


def rows() -> list[dict]:
    from normviz.models import arch

    configs = _tiny_configs()
    groups: dict[int, list[str]] = {}
    specs = {}
    for mt, spec in arch.ARCHITECTURES.items():
        groups.setdefault(id(spec), []).append(mt)
        specs[id(spec)] = spec
    label = {mt: fam for fam, types in arch.FAMILIES.items() for mt in types}
    out = []
    for key, types in groups.items():
        probe_type = next((t for t in types if t in configs), None)
        row = {"types": types, "family": label.get(types[0], specs[key].family), "probe": probe_type}
        if probe_type is not None:
            row.update(probe(_build(configs[probe_type], specs[key].causal)))
        out.append(row)
    import transformers as tf

    floor = _build(tf.BloomConfig(vocab_size=97, hidden_size=32, n_layer=2, n_head=4), True)
    out.append(
        {
            "types": ["any other type (e.g. bloom, mpt)"],
            "family": "the raw-attention floor (no row)",
            "probe": FLOOR_PROBE,
            **probe(floor),
            "floor": True,
        }
    )
    return out


COLUMNS = ("maps", "explain", "sources", "attend", "graph", "interventions")


def _needs(refused: dict, floor: bool) -> str:
    if floor:
        return "every other key: an architecture row"
    by_reason: dict[str, list[str]] = {}
    for k, why in refused.items():
        chained = re.match(r"^'[^']+' needs '([^']+)'", why)  # a key refused for another key's reason
        by_reason.setdefault(f"needs `{chained.group(1)}`" if chained else why, []).append(k)
    return "; ".join(f"{', '.join(f'`{k}`' for k in ks)}: {why}" for why, ks in by_reason.items()) or NO


def tables() -> str:
    import normviz

    out = [
        "### What each model type gets",
        "",
        (
            "Asked of the library on a tiny random model of each row (`python scripts/models_table.py`): "
            f"{YES} runs; otherwise the refusal's first clause. *maps*: the map keys offered of those the stacks "
            "register; *interventions*: `knockout` and `ablate_heads`."
        ),
        "",
        "| model types | family | " + " | ".join(COLUMNS) + " | refused keys: what they need |",
        "|---|---|" + "---|" * len(COLUMNS) + "---|",
    ]
    for row in rows():
        types = ", ".join(f"`{t}`" if not t.startswith("any") else t for t in row["types"])
        if "cols" not in row:
            out.append(
                f"| {types} | {_cell(row['family'])} | " + " | ".join("(no tiny config)" for _ in COLUMNS) + " | |"
            )
            continue
        cells = [_cell(row["cols"][c]) for c in COLUMNS]
        out.append(
            f"| {types} | {_cell(row['family'])} | "
            + " | ".join(cells)
            + " | "
            + _cell(_needs(row["refused"], row.get("floor", False)))
            + " |"
        )
    out += ["", "### Embedded models", "", "| name | model | install | licence |", "|---|---|---|---|"]
    for name, m in normviz.EMBEDDED.items():
        out.append(f"| `{name}` | {_cell(m.title)} | `{_cell(m.install)}` | {_cell(m.licence or NO)} |")
    return "\n".join(out) + "\n"


def main(argv: list[str]) -> int:
    return doc_block.main(argv, DOC, BEGIN, END, tables, "models_table.py")


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
