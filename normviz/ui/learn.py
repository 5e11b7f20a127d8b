"""What the Learn page says about each map. The prose and formulas live here; the papers come from each map
family's ``REFERENCES``; every number the page shows is computed from a live analysis (see :func:`worked_example`)."""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..methods import registry

def papers_of(key: str):
    """The papers behind a map key: its family's REFERENCES."""
    return registry.family_of(key).REFERENCES


@dataclass(frozen=True)
class Lesson:
    latex: str
    what: str
    shows: str
    hides: str


_LN = (r"\quad g_{z_i}(u) = \frac{\gamma \odot (u - \mathrm{mean}(u))}{\sqrt{\mathrm{Var}(z_i)+\epsilon}}"
       r"\ \text{(RMSNorm: } \gamma\odot u/\mathrm{rms}(z_i)\text{)}")

LESSONS: dict[str, Lesson] = {
    "attention": Lesson(
        r"\alpha^h_{ij} = \mathrm{softmax}_j\!\left(\frac{q^h_i \cdot k^h_j}{\sqrt{d_h}}\right)",
        "How much head h of token i looks at token j: the softmax weights.",
        "Where each head's query matches keys. Each row sums to 1.",
        "What is actually moved: a large weight on a token whose transformed vector f(x_j) is tiny moves "
        "almost nothing. Weights on [CLS]/[SEP] are often large and empty."),
    "norm": Lesson(
        r"\|\alpha^h_{ij} f^h(x_j)\|, \qquad f^h(x) = (\hat{x} W^V_h + b^V_h)\, W^O_h",
        "The length of the vector that head h actually adds to token i from token j.",
        "Weight and vector length together. Since α ≥ 0, it equals α_ij · ‖f(x_j)‖: a token whose "
        "transformed vector is short gets little through, whatever its weight.",
        "Direction: two contributions of the same length may point in opposite directions and cancel."),
    "norm_layer": Lesson(
        r"\Big\|\sum_h \alpha^h_{ij} f^h(x_j)\Big\|",
        "All heads of the layer at once: sum the head vectors from j to i first, then take the length.",
        "The layer's attention block as a whole; heads that cancel each other show less than their sum.",
        "The residual connection and the normalisation that follow."),
    "attn_res": Lesson(
        r"\Big\|\sum_h \alpha^h_{ij} f^h(x_j) + \delta_{ij}\, x_j\Big\|",
        "The attention block plus the residual connection: token i keeps its own vector x_i.",
        "How much of the new vector is the token itself (the diagonal) versus mixing from others.",
        "The layer normalisation that rescales the sum."),
    "attn_res_ln": Lesson(
        r"\|g_{z_i}(u_{ij})\|,\ u_{ij} = \sum_h \alpha^h_{ij} f^h(x_j) + \delta_{ij} x_j" + _LN,
        "The normalisation after the residual, split into one part per token (β is not a token's part).",
        "The whole attention block of a layer as the next block sees it.",
        "The feed-forward block that follows."),
    "ff": Lesson(
        r"\mathrm{FF}(y_i) = W_2\, g(W_1 y_i + b_1) + b_2 = \sum_j c_{ij} + \text{bias},"
        r"\quad c_{ij} = W_2\Big[g(h_i) \odot \tfrac{h_{ij}}{h_i}\Big]",
        "The feed-forward output split into token parts: linear before the activation, integrated gradients "
        "(from a zero baseline) through it; SwiGLU units by the same integrated gradients, in closed form.",
        "How the FF block remixes tokens even though it acts on each position separately.",
        "The residual around it; biases are their own term, not any token's part."),
    "ff_res": Lesson(
        r"\|c_{ij} + y_{ij}\|",
        "FF parts plus the residual around the FF. For pre-LN models this is the whole layer.",
        "How much of the layer output still comes from token j.",
        "Post-LN: the final layer normalisation."),
    "ff_res_ln": Lesson(
        r"\|g_{z_i}(c_{ij} + y_{ij})\|" + _LN,
        "Post-LN models: the second layer normalisation decomposed as well: the whole layer.",
        "Each token's part of the layer output exactly as the next layer receives it.",
        "Only one layer: chain layers with rollout to see the whole model."),
    "rollout_attention": Lesson(
        r"R_\ell = \hat{A}_\ell R_{\ell-1},\quad \hat{A} = \mathrm{rownorm}(0.5\,\bar{A} + 0.5\,I)",
        "Attention rollout: layer maps multiplied through the stack (rows: tokens at layer ℓ, columns: inputs).",
        "How information could have travelled from the input to layer ℓ.",
        "Assumes contributions mix linearly and the residual is half of every layer."),
    "flow": Lesson(
        r"\text{maxflow}(x_j^{(0)} \to x_i^{(\ell)}) \text{ on the layered attention graph}",
        "Attention flow: the maximum flow through the layer graph with attention weights as capacities.",
        "The bottleneck paths from input token j to token i at layer ℓ.",
        "Costly (a max-flow per pair) and still built from raw weights."),
    "effective_attention": Lesson(
        r"\tilde{\alpha}^h_i = \alpha^h_i - \mathrm{proj}_{\mathrm{null}_\mathrm{left}(T^h)}(\alpha^h_i),\quad T^h = (\hat{x} W^V_h + b^V_h) W^O_h",
        "Effective attention: each row of α minus its part in the left null space of T (which changes nothing). "
        "The value bias is inside T by default; option effective_value_bias=false leaves it out (Brunner et al.'s "
        "bias-free form).",
        "The part of the weights that affects the output.",
        "Can be negative; rows no longer sum to 1."),
    "alti": Lesson(
        r"c_{ij} = \frac{\max(0, -d_1(y_i, t_{ij}) + \|y_i\|_1)}{\sum_k \max(0, -d_1(y_i, t_{ik}) + \|y_i\|_1)}",
        "ALTI: contributions measured by how close each transformed vector is to the output (L1).",
        "Contribution as proximity rather than length.",
        "A different notion of contribution; compare with attn_res_ln."),
    "value_zeroing": Lesson(
        r"C_{ij} = 1 - \cos(\tilde{x}_i^{\neg j}, \tilde{x}_i)",
        "Value zeroing: zero token j's value vector and measure how much token i's output changes.",
        "The effect of removing j, nonlinearities included.",
        "Needs one extra forward pass per token: costly for long texts."),
    "globenc_layer": Lesson(
        r"\|g'_{z'_i}(\ell_{ij})\|,\ \ell_{ij} = g_{z_i}(u_{ij}),\quad g'_{z'_i}(v) = "
        r"\frac{\gamma_2 \odot (v - \mathrm{mean}(v))}{\sqrt{\mathrm{Var}(z'_i)+\epsilon_2}},\ z'_i = h_i + \mathrm{FF}(h_i)",
        "GlobEnc's per-layer map (N-Enc, Modarressi et al. 2022): the attention + residual + LN1 parts carried "
        "through the second LayerNorm's linear part. Post-LN encoders only.",
        "The whole encoder layer except the FF's own mixing: the FF output enters only through LN2's scale.",
        "How the FF block remixes tokens (see ff_res_ln, DecompX); β₁, β₂ and b^O are no token's part."),
    "globenc": Lesson(
        r"G_\ell = N_\ell\, G_{\ell-1},\quad G_0 = N_0 \quad (N_\ell = \texttt{globenc\_layer}_\ell)",
        "GlobEnc: the per-layer maps multiplied through the stack as the authors' code does: raw products, "
        "no identity, no row normalisation.",
        "Which input tokens the layer-ℓ token is built from, on the authors' scale (rows do not sum to 1).",
        "Treats norms as if they composed linearly across layers."),
    "decompx": Lesson(
        r"x^{\ell}_i = \sum_k x^{\ell}_{i\Leftarrow k},\quad x^{0}_{i\Leftarrow k} = \delta_{ik}\, x^0_k,"
        r"\quad \texttt{decompx}_{\ell,i,k} = \big\|x^{\ell}_{i\Leftarrow k}\big\|;\ \text{a bias } b \text{ goes to part } k"
        r" \text{ by } \frac{|\langle v_{ik}, b\rangle|}{\sum_{k'}|\langle v_{ik'}, b\rangle|},\ g(h) \approx \tfrac{g(h_i)}{h_i}\, h",
        "DecompX (Modarressi et al. 2023): every token's part of every hidden state, carried from the "
        "embeddings through attention, residuals, both norms and the feed-forward block, layer after layer, "
        "without re-mixing. Biases are split over the parts by |dot product|, the activation by its "
        "zero-origin slope g(h)/h; the parts of a row add up to the model's own hidden state.",
        "Which input tokens the layer-ℓ vector of token i is made of, with the FF block and the norms "
        "included and no rollout assumption (vectors, not norms, are composed across layers).",
        "The split is a choice: biases and the activation are shared out by rules (absdot, zero-origin slope), "
        "not measured; norms of parts that point in opposite directions do not add up. Costly: [n, n, d] per "
        "layer (opt-in). Gated FF models (SwiGLU) are refused."),
    "rollout_value_zeroing": Lesson(
        r"R_\ell = C_\ell\, R_{\ell-1},\quad C_\ell = \texttt{value\_zeroing}_\ell \text{ (rows sum to 1)}",
        "Value-zeroing rollout (Mohebbi et al. 2023): the row-normalised value-zeroing maps multiplied "
        "through the stack, no identity added (the reruns already include the residual).",
        "Which input tokens a token at layer ℓ depends on, by removal effects.",
        "Costly (value zeroing's reruns); treats removal effects as if they composed linearly."),
}
for _k, _src in (("rollout_attn_res", "attn_res"), ("rollout_attn_res_ln", "attn_res_ln"),
                 ("rollout_ff_res", "ff_res"), ("rollout_ff_res_ln", "ff_res_ln"), ("rollout_alti", "alti")):
    LESSONS[_k] = Lesson(
        r"R_\ell = \mathrm{rownorm}(M_\ell)\, R_{\ell-1}", f"Rollout of the {_src} maps: row-normalised layer maps "
        "multiplied through the stack; the residual is already inside, so no identity is added.",
        "Which input tokens the token at layer ℓ is made of.", "Treats the norm shares as if they mixed linearly.")
LESSONS["rollout_attn_res_ln"] = Lesson(
    LESSONS["rollout_attn_res_ln"].latex,
    LESSONS["rollout_attn_res_ln"].what + " This is the \"norm rollout\" baseline of Ferrando et al. 2022, not "
    "GlobEnc (which also splits the second LayerNorm and multiplies raw maps: see globenc).",
    LESSONS["rollout_attn_res_ln"].shows, LESSONS["rollout_attn_res_ln"].hides)


def worked_example(matrix: np.ndarray) -> dict[str, np.ndarray]:
    """Numbers the page prints under each map's table: row sums and the diagonal's share of each row."""
    m = np.asarray(matrix, dtype=np.float64)
    total = np.abs(m).sum(-1)
    diag = np.divide(np.abs(np.diag(m)), total, out=np.zeros_like(total), where=total > 0)
    return {"row_sum": m.sum(-1), "self_share": diag}


def value_norms_from(attention: np.ndarray, norm: np.ndarray) -> tuple[np.ndarray, float]:
    """‖f(x_j)‖ recovered from one head: norm_ij / α_ij for every row i. Returns the per-column value (the
    row mean) and the largest relative spread across rows, which is ~0 because ‖α f‖ = α ‖f‖ for α ≥ 0."""
    a = np.asarray(attention, dtype=np.float64)
    n = np.asarray(norm, dtype=np.float64)
    ok = a > 1e-6
    ratio = np.where(ok, n / np.where(ok, a, 1.0), np.nan)
    col = np.nanmean(ratio, axis=0)
    spread = np.nanmax(np.abs(ratio - col[None, :]) / np.maximum(np.abs(col[None, :]), 1e-12))
    return col, float(spread)
