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

from ..core.errors import NormvizError
from ..core.tokens import MAX_CHARS_PER_TOKEN, Encoded, encode
from ..session.session import Session
from .reader import BadLine, parse_line
from .stats import MIX_RATIOS, Accumulator, needed_keys

FX_NORM = (
    "fx_norm"  # ‖f^h(x_j)‖ [L, H, n]: a per-token quantity, not a token-to-token map (kept out of the map registry)
)


def fx_norm(session: Session) -> np.ndarray:
    """‖f^h(x_j)‖ for every layer, head and token, [L, H, n] (Kobayashi et al. 2020, §4.1), with
    f^h(x_j) = (x̂_j W^V_h + b^V_h) W^O_h from :attr:`LayerDecomposition.head_vectors` (b^O excluded)."""
    out = []
    for ctx in session.layers():
        out.append(ctx.head_vectors.to(ctx.acc).norm(dim=-1).to(ctx.dtype).cpu())
        ctx.clear()
    return torch.stack(out).numpy()


def _ratio(off: torch.Tensor, own: torch.Tensor) -> torch.Tensor:
    """‖off‖ / (‖off‖ + ‖own‖) over the last axis (0 where both vanish)."""
    a, b = off.norm(dim=-1), own.norm(dim=-1)
    den = a + b
    return torch.where(den > 0, a / torch.where(den > 0, den, torch.ones_like(den)), torch.zeros_like(den))


@torch.no_grad()
def mixing_ratios(session: Session) -> dict[str, np.ndarray]:
    """The 2021 paper's mixing ratios r_i = ‖Σ_{j≠i} v_ij‖ / (‖Σ_{j≠i} v_ij‖ + ‖v_ii‖) per layer and token:
    ``norm_layer``, ``attn_res``, ``attn_res_ln`` [L, n] and per head ``norm`` [L, H, n].

    Σ_j v_ij is each stage's total vector from the recorded pass, so only the self parts v_ii are formed:
      Attn-N       v_ii = Σ_h α^h_ii f^h(x_i);   Σ_{j≠i} = z_i − x_i − b^O − v_ii   (z_i: the recorded x + Attn)
      AttnRes-N    u_ii = v_ii + x_i;            Σ_{j≠i} = z_i − b^O − u_ii        (the same vector as Attn-N's)
      AttnResLn-N  ℓ_ii = N(u_ii)/s_i;           Σ_{j≠i} = norm(z_i) − (N(b^O)/s_i + β) − ℓ_ii, norm(z_i) the
                   norm's output for the recorded z_i (post-LN LN1, pre-LN the norm before the FF), by the
                   norm's formula in float64 (Llama's RMSNorm module rounds to float32 even in float64 models)
      per head     v^h_ij = α^h_ij f^h(x_j);     Σ_j v^h_ij = (α^h f^h)_i, one [H, n, d] product
    In float64 (float32 on mps)."""
    out: dict[str, list] = {"norm": [], "norm_layer": [], "attn_res": [], "attn_res_ln": []}
    for ctx in session.layers():
        acc = ctx.acc
        f = ctx.head_vectors.to(acc)  # [H, n, d]
        alpha = ctx.alpha.to(acc)
        diag = torch.diagonal(alpha, dim1=-2, dim2=-1)  # [H, n]
        own_h = diag[..., None] * f  # α^h_ii f^h(x_i)
        out["norm"].append(_ratio(torch.bmm(alpha, f) - own_h, own_h))
        x, z, b_o = ctx.rec.x.to(acc), ctx.rec.z_attn.to(acc), ctx.b_o.to(acc)
        own = own_h.sum(0)  # v_ii
        off = z - x - b_o - own
        out["norm_layer"].append(_ratio(off, own))
        u_own = own + x
        out["attn_res"].append(_ratio(z - b_o - u_own, u_own))
        ln = ctx.ln_attn
        s = ln.scale(z)[:, None]
        ln_own = ln.linear_part(u_own) / s
        bias = ln.linear_part(b_o) / s + (ln.bias.to(acc) if ln.bias is not None else 0)
        out["attn_res_ln"].append(_ratio(ln.apply(z) - bias - ln_own, ln_own))
        ctx.clear()
    return {k: torch.stack(v).cpu().numpy() for k, v in out.items()}


@torch.no_grad()
def batch_maps(lm, encs: list[Encoded], keys: list[str]) -> list[dict[str, np.ndarray]]:
    """The maps ``keys`` (plus ``fx_norm``) of each sequence of one right-padded batch (one forward pass,
    shared by the batch's sessions; records sit on each layer's own device, so models sharded with
    ``device_map`` work too)."""
    maps = [k for k in keys if k not in (FX_NORM, MIX_RATIOS)]
    out = []
    for session in Session.from_encoded(lm, encs, options={"compute_together": False}):
        arrays = dict(session.get(maps).arrays) if maps else {}
        if FX_NORM in keys:
            arrays[FX_NORM] = fx_norm(session)
        if MIX_RATIOS in keys:
            arrays[MIX_RATIOS] = mixing_ratios(session)
        out.append({k: arrays[k] for k in keys})
    return out


# ---------------------------------------------------------------------------- one chunk
def process_chunk(
    lm,
    lines: list[tuple[int, bytes]],
    stats,
    batch_size: int,
    max_tokens: int | None,
    on_batch: Callable[[int], None] | None = None,
) -> tuple[dict[str, np.ndarray], dict]:
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
                raise BadLine(
                    f"too long: {len(raw):,} bytes, more than {MAX_CHARS_PER_TOKEN} characters per token "
                    f"of the limit of {limit} tokens (--max-tokens); not tokenised"
                )
            item = parse_line(line, raw)
            if len(item.text) + len(item.pair or "") > max_chars:
                raise BadLine(
                    f"too long: {len(item.text) + len(item.pair or ''):,} characters, more than "
                    f"{MAX_CHARS_PER_TOKEN} per token of the limit of {limit} tokens; not tokenised"
                )
            enc = encode(lm.tokenizer, item.text, item.pair, max_length=None, warn=False, decoder=lm.spec.causal)
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
        batch = good[start : start + batch_size]
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
    return acc.state(), {
        "lines": done,
        "n_tokens": n_tok,
        "bad": bad,
        "n_layers": lm.n_layers,
        "n_heads": lm.n_heads,
        "placement": lm.spec.placement,
    }


def state_to_bytes(state: dict, meta: dict) -> bytes:
    buf = io.BytesIO()
    np.savez(buf, __meta__=np.array(json.dumps(meta)), **state)
    return buf.getvalue()


def state_from_bytes(data: bytes) -> tuple[dict, dict]:
    with np.load(io.BytesIO(data), allow_pickle=False) as z:
        meta = json.loads(str(z["__meta__"]))
        state = {k: z[k] for k in z.files if k != "__meta__"}
    return state, meta
