"""One chunk of corpus lines → parsed, tokenised, length-sorted padded batches → summed statistics.

Each batch is one recorded forward pass shared by the batch's sessions (:meth:`normviz.Session.from_encoded`,
the entry :func:`normviz.analyze_batch` uses too); the maps come from ``session.get(keys)``.
Used by both engines (in-process and Ray), so they give the same numbers.
"""
from __future__ import annotations

import io
import json
from typing import Callable

import numpy as np
import torch

from ..errors import NormvizError
from ..session import Session
from ..tokens import MAX_CHARS_PER_TOKEN, Encoded, encode
from .reader import BadLine, parse_line
from .stats import Accumulator, needed_keys

FX_NORM = "fx_norm"  # ‖f^h(x_j)‖ [L, H, n]: a per-token quantity, not a token-to-token map (kept out of the map registry)


def fx_norm(session: Session) -> np.ndarray:
    """‖f^h(x_j)‖ for every layer, head and token, [L, H, n] (Kobayashi et al. 2020, §4.1), with
    f^h(x_j) = (x̂_j W^V_h + b^V_h) W^O_h from :attr:`LayerDecomposition.head_vectors` (b^O excluded)."""
    out = []
    for ctx in session.layers():
        out.append(ctx.head_vectors.to(ctx.acc).norm(dim=-1).to(ctx.dtype).cpu())
        ctx.clear()
    return torch.stack(out).numpy()


@torch.no_grad()
def batch_maps(lm, encs: list[Encoded], keys: list[str]) -> list[dict[str, np.ndarray]]:
    """The maps ``keys`` (plus ``fx_norm``) of each sequence of one right-padded batch (one forward pass,
    shared by the batch's sessions; records sit on each layer's own device, so models sharded with
    ``device_map`` work too)."""
    maps = [k for k in keys if k != FX_NORM]
    out = []
    for session in Session.from_encoded(lm, encs, options={"compute_together": False}):
        arrays = dict(session.get(maps).arrays) if maps else {}
        if FX_NORM in keys:
            arrays[FX_NORM] = fx_norm(session)
        out.append({k: arrays[k] for k in keys})
    return out


# ---------------------------------------------------------------------------- one chunk
def process_chunk(lm, lines: list[tuple[int, bytes]], stats, batch_size: int, max_tokens: int | None,
                  on_batch: Callable[[int], None] | None = None) -> tuple[dict[str, np.ndarray], dict]:
    """Parse, tokenise, batch and accumulate one chunk. Returns (state, meta) with meta = lines analysed,
    their token counts and the bad lines ``[[line, reason], …]``. ``on_batch(k)``: k sentences done."""
    limit = min(max_tokens, lm.max_length) if max_tokens else lm.max_length
    keys = needed_keys(stats, lm.spec.placement)
    acc = Accumulator(lm.n_layers, lm.n_heads, lm.spec.placement, stats, causal=lm.spec.causal)
    bad: list[list] = []
    good: list[tuple[int, Encoded]] = []
    max_chars = limit * MAX_CHARS_PER_TOKEN  # more characters than this cannot fit: refused before decoding
    for line, raw in lines:
        try:
            if len(raw) > 4 * max_chars:
                raise BadLine(f"too long: {len(raw):,} bytes, more than {MAX_CHARS_PER_TOKEN} characters per token "
                              f"of the limit of {limit} tokens (--max-tokens); not tokenised")
            item = parse_line(line, raw)
            if len(item.text) + len(item.pair or "") > max_chars:
                raise BadLine(f"too long: {len(item.text) + len(item.pair or ''):,} characters, more than "
                              f"{MAX_CHARS_PER_TOKEN} per token of the limit of {limit} tokens; not tokenised")
            enc = encode(lm.tokenizer, item.text, item.pair, max_length=None, warn=False)
            if len(enc.ids) > limit:
                raise BadLine(f"too long: {len(enc.ids)} tokens, the limit is {limit} (--max-tokens)")
            if len(enc.ids) < 2:
                raise BadLine("only one token: nothing to contextualise")
            good.append((line, enc))
        except BadLine as exc:
            bad.append([line, str(exc)])
        except NormvizError as exc:
            bad.append([line, str(exc)])
    good.sort(key=lambda le: (-len(le[1].ids), le[0]))
    done: list[int] = []
    n_tok: list[int] = []
    for start in range(0, len(good), batch_size):
        batch = good[start:start + batch_size]
        try:
            results = batch_maps(lm, [e for _, e in batch], keys)
            pairs = list(zip(batch, results))
        except (RuntimeError, ValueError) as exc:  # e.g. out of memory: retry one by one, log what fails
            if lm.device.type == "cuda":
                torch.cuda.empty_cache()
            pairs = []
            for le in batch:
                try:
                    pairs.append((le, batch_maps(lm, [le[1]], keys)[0]))
                except (RuntimeError, ValueError) as exc1:
                    bad.append([le[0], f"analysis failed: {type(exc1).__name__}: {exc1}"])
            del exc
        for (line, enc), maps in pairs:
            acc.add(maps, enc.ids, enc.tokens, enc.labels, enc.special)
            done.append(line)
            n_tok.append(len(enc.ids))
        if on_batch:
            on_batch(len(batch))
    bad.sort()
    return acc.state(), {"lines": done, "n_tokens": n_tok, "bad": bad, "n_layers": lm.n_layers,
                         "n_heads": lm.n_heads, "placement": lm.spec.placement}


def state_to_bytes(state: dict, meta: dict) -> bytes:
    buf = io.BytesIO()
    np.savez(buf, __meta__=np.array(json.dumps(meta)), **state)
    return buf.getvalue()


def state_from_bytes(data: bytes) -> tuple[dict, dict]:
    with np.load(io.BytesIO(data), allow_pickle=False) as z:
        meta = json.loads(str(z["__meta__"]))
        state = {k: z[k] for k in z.files if k != "__meta__"}
    return state, meta


