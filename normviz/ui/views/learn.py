"""What the Learn page says about each map. The prose and formulas live here; the papers come from each map
family's ``REFERENCES``; every number the page shows is computed from a live analysis (see :func:`worked_example`)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ...methods import keyspace, registry


def papers_of(key: str):
    """The papers behind a map key: its family's REFERENCES."""
    return registry.family_of(key).references


@dataclass(frozen=True)
class Lesson:
    latex: str
    what: str
    shows: str
    hides: str


_LN = (
    r"\quad g_{z_i}(u) = \frac{\gamma \odot (u - \mathrm{mean}(u))}{\sqrt{\mathrm{Var}(z_i)+\epsilon}}"
    r"\ \text{(RMSNorm: } \gamma\odot u/\mathrm{rms}(z_i)\text{)}"
)

LESSONS: dict[str, Lesson] = {
    "attention": Lesson(
        r"\alpha^h_{ij} = \mathrm{softmax}_j\!\left(\frac{q^h_i \cdot k^h_j}{\sqrt{d_h}}\right)",
        "How much head h of token i looks at token j: the softmax weights.",
        "Where each head's query matches keys. Each row sums to 1.",
        "What is actually moved: a large weight on a token whose transformed vector f(x_j) is tiny moves "
        "almost nothing. Weights on [CLS]/[SEP] are often large and empty.",
    ),
    "norm": Lesson(
        r"\|\alpha^h_{ij} f^h(x_j)\|, \qquad f^h(x) = (\hat{x} W^V_h + b^V_h)\, W^O_h",
        "The length of the vector that head h actually adds to token i from token j.",
        "Weight and vector length together. Since α ≥ 0, it equals α_ij · ‖f(x_j)‖: a token whose "
        "transformed vector is short gets little through, whatever its weight.",
        "Direction: two contributions of the same length may point in opposite directions and cancel.",
    ),
    "norm_layer": Lesson(
        r"\Big\|\sum_h \alpha^h_{ij} f^h(x_j)\Big\|",
        "All heads of the layer at once: sum the head vectors from j to i first, then take the length.",
        "The layer's attention block as a whole; heads that cancel each other show less than their sum.",
        "The residual connection and the normalisation that follow.",
    ),
    "attn_res": Lesson(
        r"\Big\|\sum_h \alpha^h_{ij} f^h(x_j) + \delta_{ij}\, x_j\Big\|",
        "The attention block plus the residual connection: token i keeps its own vector x_i.",
        "How much of the new vector is the token itself (the diagonal) versus mixing from others.",
        "The layer normalisation that rescales the sum.",
    ),
    "attn_res_ln": Lesson(
        r"\|g_{z_i}(u_{ij})\|,\ u_{ij} = \sum_h \alpha^h_{ij} f^h(x_j) + \delta_{ij} x_j" + _LN,
        "The normalisation after the residual, split into one part per token (β is not a token's part).",
        "The whole attention block of a layer as the next block sees it.",
        "The feed-forward block that follows.",
    ),
    "ff": Lesson(
        r"\mathrm{FF}(y_i) = W_2\, g(W_1 y_i + b_1) + b_2 = \sum_j c_{ij} + \text{bias},"
        r"\quad c_{ij} = W_2\Big[g(h_i) \odot \tfrac{h_{ij}}{h_i}\Big]",
        "The feed-forward output split into token parts: linear before the activation, integrated gradients "
        "(from a zero baseline) through it; SwiGLU units by the same integrated gradients, in closed form.",
        "How the FF block remixes tokens even though it acts on each position separately.",
        "The residual around it; biases are their own term, not any token's part.",
    ),
    "ff_res": Lesson(
        r"\|c_{ij} + y_{ij}\|",
        "FF parts plus the residual around the FF. For pre-LN models this is the whole layer.",
        "How much of the layer output still comes from token j.",
        "Post-LN: the final layer normalisation.",
    ),
    "ff_res_ln": Lesson(
        r"\|g_{z_i}(c_{ij} + y_{ij})\|" + _LN,
        "Post-LN models: the second layer normalisation decomposed as well: the whole layer.",
        "Each token's part of the layer output exactly as the next layer receives it.",
        "Only one layer: chain layers with rollout to see the whole model.",
    ),
    "rollout_attention": Lesson(
        r"R_\ell = \hat{A}_\ell R_{\ell-1},\quad \hat{A} = \mathrm{rownorm}(0.5\,\bar{A} + 0.5\,I)",
        "Attention rollout: layer maps multiplied through the stack (rows: tokens at layer ℓ, columns: inputs).",
        "How information could have travelled from the input to layer ℓ.",
        "Assumes contributions mix linearly and the residual is half of every layer.",
    ),
    "flow": Lesson(
        r"\text{maxflow}(x_j^{(0)} \to x_i^{(\ell)}) \text{ on the layered attention graph}",
        "Attention flow: the maximum flow through the layer graph with attention weights as capacities.",
        "The bottleneck paths from input token j to token i at layer ℓ.",
        "Costly (a max-flow per pair) and still built from raw weights.",
    ),
    "effective_attention": Lesson(
        r"\tilde{\alpha}^h_i = \alpha^h_i - \mathrm{proj}_{\mathrm{null}_\mathrm{left}(T^h)}(\alpha^h_i),\quad T^h "
        r"= (\hat{x} W^V_h + b^V_h) W^O_h",
        "Effective attention: each row of α minus its part in the left null space of T (which changes nothing). "
        "The value bias is inside T by default; option effective_value_bias=false leaves it out (Brunner et al.'s "
        "bias-free form).",
        "The part of the weights that affects the output.",
        "Can be negative; rows no longer sum to 1.",
    ),
    "alti": Lesson(
        r"c_{ij} = \frac{\max(0, -d_1(y_i, t_{ij}) + \|y_i\|_1)}{\sum_k \max(0, -d_1(y_i, t_{ik}) + \|y_i\|_1)}",
        "ALTI: contributions measured by how close each transformed vector is to the output (L1).",
        "Contribution as proximity rather than length.",
        "A different notion of contribution; compare with attn_res_ln.",
    ),
    "value_zeroing": Lesson(
        r"C_{ij} = 1 - \cos(\tilde{x}_i^{\neg j}, \tilde{x}_i)",
        "Value zeroing: zero token j's value vector and measure how much token i's output changes.",
        "The effect of removing j, nonlinearities included.",
        "Needs one extra forward pass per token: costly for long texts.",
    ),
    "globenc_layer": Lesson(
        r"\|g'_{z'_i}(\ell_{ij})\|,\ \ell_{ij} = g_{z_i}(u_{ij}),\quad g'_{z'_i}(v) = "
        r"\frac{\gamma_2 \odot (v - \mathrm{mean}(v))}{\sqrt{\mathrm{Var}(z'_i)+\epsilon_2}},\ z'_i = h_i + "
        r"\mathrm{FF}(h_i)",
        "GlobEnc's per-layer map (N-Enc, Modarressi et al. 2022): the attention + residual + LN1 parts carried "
        "through the second LayerNorm's linear part. Post-LN encoders only.",
        "The whole encoder layer except the FF's own mixing: the FF output enters only through LN2's scale.",
        "How the FF block remixes tokens (see ff_res_ln, DecompX); β₁, β₂ and b^O are no token's part.",
    ),
    "globenc": Lesson(
        r"G_\ell = N_\ell\, G_{\ell-1},\quad G_0 = N_0 \quad (N_\ell = \texttt{globenc\_layer}_\ell)",
        "GlobEnc: the per-layer maps multiplied through the stack as the authors' code does: raw products, "
        "no identity, no row normalisation.",
        "Which input tokens the layer-ℓ token is built from, on the authors' scale (rows do not sum to 1).",
        "Treats norms as if they composed linearly across layers.",
    ),
    "decompx": Lesson(
        r"x^{\ell}_i = \sum_k x^{\ell}_{i\Leftarrow k},\quad x^{0}_{i\Leftarrow k} = \delta_{ik}\, x^0_k,"
        r"\quad \texttt{decompx}_{\ell,i,k} = \big\|x^{\ell}_{i\Leftarrow k}\big\|;\ \text{a bias } b "
        r"\text{ goes to part } k"
        r" \text{ by } \frac{|\langle v_{ik}, b\rangle|}{\sum_{k'}|\langle v_{ik'}, b\rangle|},\ g(h) \approx "
        r"\tfrac{g(h_i)}{h_i}\, h",
        "DecompX (Modarressi et al. 2023): every token's part of every hidden state, carried from the "
        "embeddings through attention, residuals, both norms and the feed-forward block, layer after layer, "
        "without re-mixing. Biases are split over the parts by |dot product|, the activation by its "
        "zero-origin slope g(h)/h; the parts of a row add up to the model's own hidden state.",
        "Which input tokens the layer-ℓ vector of token i is made of, with the FF block and the norms "
        "included and no rollout assumption (vectors, not norms, are composed across layers).",
        "The split is a choice: biases and the activation are shared out by rules (absdot, zero-origin slope), "
        "not measured; norms of parts that point in opposite directions do not add up. Costly: [n, n, d] per "
        "layer (opt-in). Gated FF models (SwiGLU) are refused.",
    ),
    "rollout_value_zeroing": Lesson(
        r"R_\ell = C_\ell\, R_{\ell-1},\quad C_\ell = \texttt{value\_zeroing}_\ell \text{ (rows sum to 1)}",
        "Value-zeroing rollout (Mohebbi et al. 2023): the row-normalised value-zeroing maps multiplied "
        "through the stack, no identity added (the reruns already include the residual).",
        "Which input tokens a token at layer ℓ depends on, by removal effects.",
        "Costly (value zeroing's reruns); treats removal effects as if they composed linearly.",
    ),
}
for _k, _src in (
    ("rollout_attn_res", "attn_res"),
    ("rollout_attn_res_ln", "attn_res_ln"),
    ("rollout_ff_res", "ff_res"),
    ("rollout_ff_res_ln", "ff_res_ln"),
    ("rollout_alti", "alti"),
):
    LESSONS[_k] = Lesson(
        r"R_\ell = \mathrm{rownorm}(M_\ell)\, R_{\ell-1}",
        f"Rollout of the {_src} maps: row-normalised layer maps "
        "multiplied through the stack; the residual is already inside, so no identity is added.",
        "Which input tokens the token at layer ℓ is made of.",
        "Treats the norm shares as if they mixed linearly.",
    )
LESSONS["rollout_attn_res_ln"] = Lesson(
    LESSONS["rollout_attn_res_ln"].latex,
    LESSONS["rollout_attn_res_ln"].what + ' This is the "norm rollout" baseline of Ferrando et al. 2022, not '
    "GlobEnc (which also splits the second LayerNorm and multiplies raw maps: see globenc).",
    LESSONS["rollout_attn_res_ln"].shows,
    LESSONS["rollout_attn_res_ln"].hides,
)


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


# --- at the panel: one plain line per map (what a cell means, in what unit) -------------------------------

CAPTIONS: dict[str, str] = {
    "attention": "Cell (i, j): how much token i's head looks at token j — a softmax weight, 0 … 1, each row sums to 1.",
    "norm": "Cell (i, j): the length of the vector the head really moves from token j into token i, ‖α f(x_j)‖ "
    "(in the model's vector units).",
    "norm_layer": "Cell (i, j): the length of what all heads of the layer together move from j into i, "
    "‖Σ_h α f(x_j)‖ (vector units).",
    "attn_res": "Cell (i, j): token j's part of token i's vector after attention plus the residual (the diagonal "
    "is the token keeping itself); vector units.",
    "attn_res_ln": "Cell (i, j): token j's part of token i's vector after attention, residual and the layer norm — "
    "what the next block receives; vector units.",
    "ff": "Cell (i, j): token j's part of the feed-forward block's output at token i (vector units).",
    "ff_res": "Cell (i, j): token j's part of token i after the feed-forward block and its residual "
    "(pre-LN models: the whole layer); vector units.",
    "ff_res_ln": "Cell (i, j): token j's part of token i at the layer's output, everything included (vector units).",
    "rollout_attention": "Cell (i, j): how much input token j flows into token i by layer ℓ, attention weights "
    "chained through the layers; rows sum to 1.",
    "rollout_attn_res": "Cell (i, j): input token j's share of token i by layer ℓ, attention + residual chained "
    "through the layers; rows sum to 1.",
    "rollout_attn_res_ln": "Cell (i, j): input token j's share of token i by layer ℓ, attention + residual + norm "
    "chained through the layers; rows sum to 1.",
    "rollout_ff_res": "Cell (i, j): input token j's share of token i by layer ℓ, whole layers chained; rows sum to 1.",
    "rollout_ff_res_ln": "Cell (i, j): input token j's share of token i by layer ℓ, whole layers chained; rows sum "
    "to 1.",
    "rollout_value_zeroing": "Cell (i, j): input token j's share of token i by layer ℓ, removal effects chained; "
    "rows sum to 1.",
    "effective_attention": "Cell (i, j): the part of the weight α_ij that changes the output (can be negative; "
    "rows need not sum to 1).",
    "alti": "Cell (i, j): how close token j's transformed vector is to token i's output (L1), as a share of the "
    "row; rows sum to 1.",
    "rollout_alti": "Cell (i, j): input token j's share of token i by layer ℓ, ALTI chained; rows sum to 1.",
    "globenc_layer": "Cell (i, j): token j's part of token i through attention, residual and both layer norms "
    "(vector units).",
    "globenc": "Cell (i, j): input token j's part of token i by layer ℓ, GlobEnc's raw products (no unit; rows "
    "need not sum to 1).",
    "flow": "Cell (i, j): the most attention that can flow from input token j to token i by layer ℓ (max flow); "
    "rows sum to 1.",
    "value_zeroing": "Cell (i, j): how much token i's output changes when token j's values are zeroed "
    "(cosine distance, as a share of the row).",
}


def caption(key: str) -> str:
    """One plain-language line for the panel of ``key`` (the registry's description when there is none)."""
    if key in CAPTIONS:
        return CAPTIONS[key]
    try:
        return keyspace.key_info(key).description
    except Exception:  # an unknown key: nothing to say
        return ""


# Every symbol the Learn page uses, defined once (shown above the tabs).
SYMBOLS: list[tuple[str, str]] = [
    ("i, j", "token positions: i receives (a row), j contributes (a column)"),
    ("ℓ, h", "a layer and an attention head of that layer"),
    ("x_j", "token j's vector entering the layer"),
    ("x̂_j", "x_j after the layer norm in front of attention (pre-LN models; post-LN: x_j itself)"),
    ("q, k, d_h", "query and key vectors of a head and their dimension"),
    ("α_ij (α^h_ij)", "the attention weight of head h from token i to token j (softmax, rows sum to 1)"),
    ("W^V, b^V, W^O", "the value projection, its bias and the output projection of a head"),
    (
        "f(x_j) = (x̂_j W^V + b^V) W^O",
        "the transformed vector of token j: what a head would add if it put all its weight on j",
    ),
    ("‖v‖", "the length (Euclidean norm) of a vector v"),
    ("δ_ij", "1 when i = j, else 0 (the residual adds each token to itself)"),
    ("u_ij", "token j's part of token i's vector after attention + residual (Σ_h α f(x_j) + δ_ij x_j)"),
    (
        "g_z(u), γ, β, ε",
        "the layer norm as a linear map of each part: centred, scaled by the token's own spread "
        "(that of the whole sum z_i) and by the weights γ; β is no token's part; ε a small constant",
    ),
    ("y_ij, c_ij", "token j's part of token i entering the feed-forward block, and of its output"),
    ("W_1, W_2, g", "the feed-forward block's two matrices and its activation (GELU, SwiGLU …)"),
    ("R_ℓ, Â, rownorm", "a rollout up to layer ℓ, a layer's map with the identity mixed in, rows rescaled to sum to 1"),
    ("T^h", "the matrix of a head's transformed vectors, one row per token"),
    ("d_1", "the L1 (Manhattan) distance used by ALTI"),
]


def why_rows(alpha_row: np.ndarray, fx: np.ndarray, norm_row: np.ndarray, row_scale: float = 1.0) -> dict:
    """One row i of one head: α_ij, ‖f(x_j)‖ (``normviz.transformed_norms``) and the map's ‖α_ij f(x_j)‖, which
    equals α_ij · ‖f(x_j)‖ since α ≥ 0 (``product``: that product, to show the identity), each also as a share
    of its row, and the rank of every token by weight and by norm (0 = largest). ``row_scale``: 1/s_i of a norm
    after the attention output (Gemma; ``normviz.core.fx.attention_row_scale``), which the map carries: the
    product is then α_ij ‖f(x_j)‖ / s_i (on gemma3 the table's two columns differed 6.5-fold without it)."""
    a = np.asarray(alpha_row, dtype=np.float64)
    n = np.asarray(norm_row, dtype=np.float64)
    fx = np.asarray(fx, dtype=np.float64)
    share_a = a / a.sum() if a.sum() > 0 else a
    share_n = n / n.sum() if n.sum() > 0 else n
    rank = lambda v: np.argsort(np.argsort(-v, kind="stable"), kind="stable")  # noqa: E731
    return {
        "alpha": a,
        "fx": fx,
        "norm": n,
        "product": a * fx * float(row_scale),
        "row_scale": float(row_scale),
        "share_alpha": share_a,
        "share_norm": share_n,
        "rank_alpha": rank(a),
        "rank_norm": rank(n),
    }


# the row table's short column names: with the long ones ("‖α_ij f(x_j)‖ (map)") its last column scrolled out of
# the half page at 1280 px (issue 42 screenshots); the lesson's three steps spell the symbols out
PRODUCT = "α·‖f‖"
MAP_COLUMN = "map ‖αf‖"


def product_step(row_scale: float) -> tuple[str, str]:
    """Step 3 of the row's lesson and the product column's name: α_ij · ‖f(x_j)‖ (column α·‖f‖), or, where a
    norm follows the attention output (Gemma), α_ij · ‖f(x_j)‖ / s_i with this row's s_i named."""
    if abs(row_scale - 1.0) < 1e-12:
        return (
            "**3.** So the length of what really arrives is the product ‖α_ij f(x_j)‖ = α_ij · ‖f(x_j)‖ "
            f"(the columns {PRODUCT} and {MAP_COLUMN} agree).",
            PRODUCT,
        )
    return (
        "**3.** So the length of what really arrives is the product ‖α_ij f(x_j)‖ = α_ij · ‖f(x_j)‖ / s_i: this "
        "model normalises the attention output before adding it to the residual stream, which divides all of "
        f"row i by the same s_i = {1.0 / row_scale:.4g} (the columns {PRODUCT}/s_i and {MAP_COLUMN} agree; the "
        "ranks are those of α_ij · ‖f(x_j)‖).",
        f"{PRODUCT}/s_i",
    )


def row_table(w: dict, labels: list[str], seen: list[int]) -> dict[str, list]:
    """The row's table (:func:`why_rows` ``w`` over the tokens ``seen``), short column names: token j, α_ij,
    ‖f(x_j)‖, α_ij · ‖f(x_j)‖ (/ s_i), the map ‖α_ij f(x_j)‖, and the ranks (1 = largest) by α and by the map."""
    return {
        "token j": [f"{labels[j]} [{j}]" for j in seen],
        "α_ij": list(np.round(w["alpha"], 4)),
        "‖f(x_j)‖": list(np.round(w["fx"], 3)),
        product_step(w["row_scale"])[1]: list(np.round(w["product"], 4)),
        MAP_COLUMN: list(np.round(w["norm"], 4)),
        "rank α": list(w["rank_alpha"] + 1),
        "rank ‖αf‖": list(w["rank_norm"] + 1),
    }


# ---------------------------------------------------------------- why this token (the Why page's three answers)
WHY_TAB = "Why this token"
WHY_LESSON = "why"  # ?lesson=why opens the tab


def unknown_lesson(lesson: str, keys: list[str], first: str) -> str:
    """The note for a link's ``lesson=`` that names no map key (nor ``why``): what is shown instead, and the
    names that work. Plain text (the caller shows it escaped)."""
    shown = str(lesson)[:40] + ("…" if len(str(lesson)) > 40 else "")
    return (
        f"The link's lesson={shown!r} is not a lesson here; showing the first tab ({first}). Lessons: "
        + ", ".join(list(keys) + [WHY_LESSON, INDUCTION_LESSON])
        + "."
    )


INDUCTION_LESSON = "induction"  # ?lesson=induction: the lesson "find the induction circuit" (views.learn_circuit)
WHY_FORMULAS = [
    (
        "Direct logit attribution",
        r"\mathrm{logit}(w)-\mathrm{logit}(f) = \langle N(x^L_i), u\rangle + \langle\beta,u\rangle + b,\quad "
        r"u = W_U[w]-W_U[f],\quad N(c) = \frac{\gamma\odot c}{\mathrm{rms}(x^L_i)}",
        "Freeze the final norm's scale at the model's own x^L_i: the readout is linear, so every vector written "
        "into the residual stream, x^L_i = x^0_i + Σ_l (Σ_h Σ_j α^{l,h}_ij f^{l,h}(x̂_j) + b^O_l + FF_l), gets its own "
        "exact part ⟨N(c), u⟩ (nostalgebraist 2020; TransformerLens's direct logit attribution, here with the real "
        "norm scale). The parts sum to the model's logit (difference).",
    ),
    (
        "The exact propagation (sources)",
        r"x^{l}_i = \sum_k p^{l}_{i,k} + p^{l}_{i,\mathrm{bias}},\qquad "
        r"\mathrm{sources}_k = \langle N(p^L_{i,k}), u\rangle,\qquad \sum_k \mathrm{sources}_k + \mathrm{bias} = "
        r"\mathrm{logit}(w)-\mathrm{logit}(f)",
        "Each input token k starts as its embedding x^0_k; every component carries each part with the model's own "
        "α and norm scales; the FF activation is split by integrated gradients from zero (DecompX, Modarressi et "
        "al. 2023, with the biases kept as one part). So a token's part includes everything it reached through "
        "other tokens, layer by layer.",
    ),
    (
        "Information-flow routes",
        r"\mathrm{prox}(z, y) = \max\!\big(\|y\|_1 - \|z-y\|_1,\ 0\big),\qquad "
        r"\mathrm{imp}(z_k) = \frac{\mathrm{prox}(z_k, y)}{\sum_m \mathrm{prox}(z_m, y)}",
        "Ferrando & Voita 2024: at each sum y of the residual stream (after attention: residual + one part per head "
        "and source token + b^O; after FF: residual + FF), a part's importance is its L1 proximity to the sum, "
        "normalised. From the prediction's node, edges above τ are followed backwards: the graph of what mattered.",
    ),
]


def why_example(session, tau: float = 0.04) -> dict:
    """The three answers on a (3-token) session, as tables: direct parts per layer, sources per token, and
    the routes' edges above ``tau``; with the identities checked (each sums to ``total``)."""
    from ...attribution import routes as _routes

    e = session.explain()
    L = e.heads.shape[0]
    direct = [{"part": "embedding x⁰", "logit part": e.embedding}]
    for l in range(L):
        direct.append({"part": f"layer {l}: heads", "logit part": float(e.heads[l].sum())})
        direct.append({"part": f"layer {l}: b^O", "logit part": float(e.attn_bias[l])})
        direct.append({"part": f"layer {l}: FF", "logit part": float(e.ff[l])})
    direct.append({"part": "final norm β + head bias", "logit part": e.final_bias})
    tokens = list(session.labels)
    sources = [{"token": f"{t!r} [{k}]", "logit part": float(v)} for k, t in enumerate(tokens) for v in [e.sources[k]]]
    sources.append({"token": "all biases", "logit part": e.bias})
    r = _routes(session, threshold=tau)
    edges = [
        {
            "layer": x["layer"],
            "kind": x["kind"] + (f" head {x['head']}" if x["head"] is not None else ""),
            "from": f"{tokens[x['from_token']]!r} [{x['from_token']}]",
            "to": f"{tokens[x['to_token']]!r} [{x['to_token']}]",
            "importance": round(x["weight"], 4),
        }
        for x in r.edges
    ]
    return {
        "token": e.token_text,
        "total": e.total,
        "direct": direct,
        "direct_sum": sum(d["logit part"] for d in direct),
        "sources": sources,
        "sources_sum": float(e.sources.sum() + e.bias),
        "edges": edges,
    }
