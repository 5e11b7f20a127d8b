"""Value zeroing (Mohebbi et al. 2023): how much token i's layer output changes when token j's values are removed.

For layer l with recorded input x (the residual stream entering the layer), and every token j:
rerun the layer on x with the value vector of j set to zero in every head (the output of the value
projection, bias included, as in the authors' code), giving outputs õ^(j)_i. With o_i the unmodified output,

    d_ij = 1 − cos(õ^(j)_i, o_i),         value_zeroing[i, j] = d_ij / Σ_k d_ik.

(d_ij = 0 exactly when õ^(j)_i = o_i bit for bit, and for j after i in a causal model, where the rounded
cosine of a vector with itself would otherwise leave ~1e-16.)

The n reruns are one batch (in chunks bounded by ``value_zeroing_chunk_bytes``): the layer is called as
the model called it in the recorded pass, with the call arguments kept in the layer's record (attention
mask, rotary position embeddings …), and a forward hook on the value projection (fused layouts: the value
columns) zeroes the slice. One extra batch element reruns the layer unmodified; it must reproduce the
recorded layer output, and is the o_i above. Costs about n+1 layer passes per layer, so the map is opt-in.
The family reruns layers of the live model (``NEEDS_MODEL``); its hook acts only in its own thread, so other
threads' passes through the shared model run meanwhile, unchanged.
"""

from __future__ import annotations

import torch

from ..models.params import get_path
from ..record.recorder import add_hooks, owner_only, remove_hooks
from . import papers
from .base import Budget, Inputs, KeyInfo, Output, Request, per_layer, refuse_over_budget
from .family import Family

FAMILY = Family(
    name="zeroing",
    order=90,
    keys=(
        KeyInfo(
            "value_zeroing",
            "Value zeroing",
            False,
            "Cosine distance of token i's layer output when token j's values are zeroed in every head, "
            "rows normalised (Mohebbi et al. 2023). Opt-in: n+1 reruns of every layer.",
            short="value zeroing",
        ),
    ),
    unit="score (rows sum to ~1)",
    budget=Budget("zeroing", aliases=("value_zeroing_budget_s",)),  # option zeroing_budget_s
    opt_in=("value_zeroing",),
    needs_model=True,
    hooks_own_thread=True,  # its hook acts only in the thread that added it: the session need not lock the model
    heavy=True,  # costly: the public app computes it in the worker process (normviz.workers.process)
    references=(papers.MOHEBBI_2023,),
)

CHUNK_BYTES = 256 * 2**20


@torch.no_grad()
def rerun_zeroed(lm, index: int, x: torch.Tensor, targets: torch.Tensor, call: tuple[tuple, dict]) -> torch.Tensor:
    """Layer ``index`` called as in the recorded pass (``call`` = its other arguments, from the record) on a
    batch of copies of x [n, d]; copy b has token targets[b]'s values zeroed (targets[b] < 0: unmodified).
    Returns [B, n, d]."""
    layer = lm.layers[index]
    args, kwargs = call
    sl = lm.layer_params(index).value_columns
    batch = targets.shape[0]

    def zero_values(module, inputs, output):
        out = output.clone()
        b = torch.nonzero(targets >= 0).flatten()
        if isinstance(sl, slice):
            out[b, targets[b], sl] = 0
        else:  # value columns spread over the output (GPT-NeoX's per-head q|k|v): one token row at a time
            for bb in b.tolist():
                out[bb, int(targets[bb]), sl] = 0
        return out

    # the module is shared: the hook leaves other threads' calls alone (owner_only)
    hook = owner_only(zero_values)
    handles = add_hooks(lm.model, [lambda: get_path(layer, lm.spec.value).register_forward_hook(hook)])
    try:
        hs = x.unsqueeze(0).expand(batch, -1, -1).contiguous()
        alibi = kwargs.get("alibi")
        if isinstance(alibi, torch.Tensor) and batch > 1:  # ALiBi of one sequence (Falcon): one copy per row
            kwargs = {**kwargs, "alibi": alibi.repeat(batch, *([1] * (alibi.ndim - 1)))}
        out = layer(hs, *args, **kwargs)
    finally:
        remove_hooks(lm.model, handles)
    return out[0] if isinstance(out, (tuple, list)) else out


def value_zeroing_layer(lm, ctx, options: dict | None = None) -> torch.Tensor:
    """The value-zeroing map of one layer, [n, n] (rows: receiving token i, columns: zeroed token j)."""
    options = options or {}
    index, x = ctx.index, ctx.rec.x
    n, d = x.shape
    call = ctx.rec.call
    p = ctx.p
    d_ff = p.w_out.shape[0]
    per_copy = n * (p.n_heads * n * 3 + 8 * d + 3 * d_ff) * x.element_size()
    budget = int(options.get("value_zeroing_chunk_bytes", CHUNK_BYTES))
    chunk = max(1, min(n + 1, budget // max(per_copy, 1)))
    targets = torch.cat([torch.tensor([-1]), torch.arange(n)]).to(x.device)  # baseline first
    outs = [rerun_zeroed(lm, index, x, targets[s : s + chunk], call) for s in range(0, n + 1, chunk)]
    out = torch.cat(outs).to(ctx.acc)
    base, zeroed = out[0], out[1:]  # [n, d], [n(j), n(i), d]
    ref = ctx.rec.out.to(ctx.acc)
    err = (base - ref).abs().max().item()
    # A wrong call (mask, positions) moves the output by O(1). Agreement is checked to 1e-6 (float64) or 1e-3
    # (float32) of the output's scale, not to float64 rounding: some model code runs parts of a float64 layer
    # in float32 (Llama's softmax), so a padded batch's record and an unpadded rerun differ by ~1e-7.
    tol = (1e-6 if x.dtype == torch.float64 else 1e-3) * max(ref.abs().max().item(), 1.0)
    if err > tol:
        raise RuntimeError(
            f"value zeroing: rerunning layer {index} unmodified gives an output {err:.2e} away from "
            f"the recorded one (tolerance {tol:.1e}); the layer call could not be reproduced"
        )
    return scores(zeroed, base, causal=lm.spec.causal).to(ctx.dtype)


def scores(zeroed: torch.Tensor, base: torch.Tensor, causal: bool = False) -> torch.Tensor:
    """value_zeroing[i, j] = d_ij / Σ_k d_ik with d_ij = 1 − cos(zeroed[j, i], base[i]) (0 when identical).

    ``zeroed`` [n(j), n(i), d]: outputs with token j's values zeroed; ``base`` [n(i), d]: unmodified outputs.
    ``causal``: token i never sees j > i, so d_ij = 0 there exactly (the reruns' rounding may differ from
    copy to copy of one batch by ~1e-16 even where the output cannot change)."""
    cos = torch.nn.functional.cosine_similarity(zeroed, base.unsqueeze(0), dim=-1)  # [j, i]
    unchanged = (zeroed == base.unsqueeze(0)).all(-1)  # identical output: distance exactly 0, not 1 − (1 − ε)
    if causal:
        n = cos.shape[0]
        unchanged |= torch.ones(n, n, dtype=torch.bool, device=cos.device).tril(-1)  # [j, i] with j > i
    dist = torch.where(unchanged, torch.zeros_like(cos), (1 - cos).clamp_min(0)).T  # [i, j]
    s = dist.sum(-1, keepdim=True)
    return torch.where(s > 0, dist / torch.where(s > 0, s, torch.ones_like(s)), torch.zeros_like(dist))


def compute(inputs: Inputs, keys, options) -> Output:
    lm = inputs.model
    return Output(
        per_layer(inputs, FAMILY.name, keys, lambda ctx: {"value_zeroing": value_zeroing_layer(lm, ctx, options)})
    )


def check(request: Request, key: str, options: dict) -> None:
    """Refuse before anything runs when L·(n+1) reruns of a layer on n tokens would take longer than option
    ``zeroing_budget_s`` (or ``value_zeroing_budget_s``)
    seconds (:func:`~normviz.methods.base.refuse_over_budget`)."""
    refuse_over_budget(request, key, options, FAMILY.budget, flops)


def flops(r: Request) -> float:
    """L·(n+1) reruns of a layer on n tokens: 2n(4d² + 2·d·d_ff + 2n·d) each."""
    n, d = r.n_tokens, r.d_model
    return r.n_layers * (n + 1) * 2.0 * n * (4 * d * d + 2 * d * r.d_ff + 2 * n * d)
