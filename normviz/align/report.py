"""What ``python -m normviz align`` writes: aer.csv, the per-layer and per-head tables, predicted alignments."""

from __future__ import annotations

import csv
import os
import shutil
import tempfile
from pathlib import Path

from .corpus import TABLE_COLUMNS, AlignResult
from .extract import SETTINGS, head_label
from .formats import format_pharaoh


def layer_table_text(res: AlignResult) -> str:
    """AER (%) of the layer views (weights averaged over heads; norms of the heads' summed vectors), the best
    layer of each column last. Layers count from 0."""
    t = res.layer_table() * 100
    names = [f"{m} {s}" for s, m in TABLE_COLUMNS]
    lines = ["AER % per layer (head = all; lower is better)", "layer  " + "  ".join(f"{n:>10}" for n in names)]
    for l in range(res.n_layers):
        lines.append(f"{l:>5}  " + "  ".join(f"{v:>10.1f}" for v in t[l]))
    best = t.argmin(axis=0)
    lines.append(" best  " + "  ".join(f"{f'{t[b, c]:.1f} (L{b})':>10}" for c, b in enumerate(best)))
    return "\n".join(lines)


def head_table_text(res: AlignResult) -> str:
    """AER (%) of every head, one block per method and setting (rows layers, columns heads)."""
    lines = []
    for setting in SETTINGS:
        for method in ("weight", "norm"):
            lines.append(f"AER % per head: {method}, {setting}")
            lines.append("layer  " + "  ".join(f"{f'h{h}':>6}" for h in range(res.n_heads)))
            for l in range(res.n_layers):
                lines.append(
                    f"{l:>5}  " + "  ".join(f"{res.aer(method, setting, l, h) * 100:>6.1f}" for h in range(res.n_heads))
                )
            lines.append("")
    return "\n".join(lines)


OUTPUTS = ("alignments", "bad_lines.tsv", "aer.csv", "aer_layers.txt", "aer_heads.txt")  # all a run may write


def write_outputs(res: AlignResult, out: Path) -> dict[str, Path]:
    """Write everything under ``out``; returns name -> path (under ``out``).

    The files are written into a temporary directory inside ``out`` and renamed into place only once all
    are complete; every output of an earlier run (:data:`OUTPUTS`) that this run does not write is removed, so
    ``out`` never mixes two runs (an earlier ``aer.csv`` beside a run without ``--gold``) and an interrupted
    run leaves the earlier results whole. Other files in ``out`` are left alone."""
    out.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=".align-", dir=out))
    try:
        written = _write_all(res, tmp)
        for name in OUTPUTS:
            old = out / name
            if old.is_dir() and not old.is_symlink():
                shutil.rmtree(old)
            elif old.exists() or old.is_symlink():
                old.unlink()
        for name, path in written.items():
            os.replace(path, out / path.name)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return {name: out / path.name for name, path in written.items()}


def _write_all(res: AlignResult, out: Path) -> dict[str, Path]:
    files: dict[str, Path] = {}
    pred = out / "alignments"
    pred.mkdir(exist_ok=True)
    for (method, setting), per_line in res.best.items():
        for l in range(res.n_layers):
            for h in range(res.n_heads + 1):
                label = head_label(h, res.n_heads)
                path = pred / f"{method}.{setting}.layer{l}.head{label}.txt"
                path.write_text(
                    "".join(
                        format_pharaoh(links) + "\n" if links is not None else "\n"
                        for links in res.predicted(method, setting, l, label)
                    ),
                    encoding="utf-8",
                )
    files["alignments"] = pred
    if res.bad_lines:
        files["bad_lines"] = out / "bad_lines.tsv"
        files["bad_lines"].write_text(
            "line\treason\n" + "".join(f"{k}\t{r}\n" for k, r in res.bad_lines), encoding="utf-8"
        )
    if not res.has_gold:
        return files
    files["aer"] = out / "aer.csv"
    with files["aer"].open("w", newline="", encoding="utf-8") as f:
        w = csv.DictWriter(f, fieldnames=["method", "setting", "layer", "head", "aer"])
        w.writeheader()
        for row in res.aer_rows():
            w.writerow({**row, "aer": f"{row['aer']:.6f}"})
    files["layers"] = out / "aer_layers.txt"
    files["layers"].write_text(layer_table_text(res) + "\n", encoding="utf-8")
    files["heads"] = out / "aer_heads.txt"
    files["heads"].write_text(head_table_text(res), encoding="utf-8")
    return files
