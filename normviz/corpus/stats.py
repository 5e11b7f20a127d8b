"""Corpus statistics of Kobayashi et al. (2020, 2021, 2024) as sums that combine across chunks.

Every statistic is accumulated per sequence into plain sums and counts (a *state*: a dict of numpy
arrays), so chunks computed anywhere (in-process, on Ray workers, before an interruption) merge exactly by
adding their states. Notation: sequence of n tokens, layer l, head h, map m_ij (row i = receiving token,
column j = contributing token). "Visible" pairs are all (i, j) for encoders and j ≤ i for causal decoders.

Statistics (all in float64):

``fx_cv``           coefficient of variation of ‖f^h(x_j)‖ over the tokens j of one sequence,
                    std/mean with the population std, averaged over sequences with n ≥ 2 (2020 §4.1,
                    BERT-base ≈ 0.22). ``fx_cv_pooled``: the same over all tokens of the corpus at once.
``share``           for category c (start, sep, period, comma, other) and map m ∈ {α, ‖αf(x)‖} per head:
                    share_c = mean over receiving tokens i of Σ_{j∈c} m_ij / Σ_j m_ij (2020 Fig. 3).
                    ``token_share``: the fraction of tokens in c, the level a uniform map would give.
``rho_alpha_fx``    Spearman ρ (average ranks) between α^h_ij and ‖f^h(x_j)‖ over the visible pairs of
                    one sequence, averaged over sequences (2020 §4.2: negative in BERT).
``rho_fx_freq``     Spearman ρ, over token types (special tokens excluded), between the type's mean
                    ‖f^h(x)‖ and its frequency rank in this corpus (1 = most frequent; 2020 §4.3:
                    frequent tokens get small ‖f(x)‖, i.e. ρ > 0).
``mixing_<key>``    context-mixing ratio of Kobayashi et al. 2021 (§5, Table 2), exactly as their code
                    computes it: for the per-pair vectors v_ij of a stage,
                        r_i = ‖Σ_{j≠i} v_ij‖ / (‖Σ_{j≠i} v_ij‖ + ‖v_ii‖)
                    (the vectors mixed in from other tokens summed first, then the norm), for the stages
                    ``norm_layer`` (v_ij = Σ_h α^h_ij f^h(x_j), Attn-N), ``attn_res`` (+ δ_ij x_j, AttnRes-N)
                    and ``attn_res_ln`` (the norm's linear part over s_i, AttnResLn-N). Σ_j v_ij is the stage's
                    own total vector from the recorded pass (z_i − b^O for ``attn_res``, the norm's output
                    minus its bias term for ``attn_res_ln``, z_i − x_i − b^O for ``norm_layer``), so
                    Σ_{j≠i} v_ij = total − v_ii and no [n, n, d] tensor is built
                    (:func:`normviz.corpus.chunks.mixing_ratios`). For ``attention``: r_i = Σ_{j≠i} ᾱ_ij with
                    ᾱ the head mean of α (Attn-W). Per head (``head_stats``): ``mixing_attention`` Σ_{j≠i} α^h_ij
                    and ``mixing_norm`` with v_ij = α^h_ij f^h(x_j). Averaged as Table 2 averages: pooled over
                    every receiving token i of every sentence (special tokens included) per layer, then the
                    mean over layers (the paper's mean over all (sentence, layer, token) ratios, since every
                    layer has the same tokens). Tokens that see only themselves (a decoder's first token)
                    are left out. The paper's BERT-base means: 97.1 (Attn-W) / 85.2 (Attn-N) /
                    22.3 (AttnRes-N) / 18.8 (AttnResLn-N) %; note their inputs had 12 % of the words replaced
                    by [MASK] (the MLM setting), ours are the corpus as given.
``mixing_share_<key>`` normviz's earlier, different statistic: the share of the non-self *norms*,
                    Σ_{j≠i} m_ij / Σ_j m_ij with m the map (``norm_layer``, ``attn_res``, ``attn_res_ln``, and
                    ``ff``, ``ff_res``, ``ff_res_ln`` when ``ff_change`` is chosen; per head ``norm``). Larger than
                    the paper's ratio (norms of parts add up to more than the norm of their sum); never compare
                    it with Table 2.
``ff_change_<key>`` contextualisation change by the feed-forward block: 1 − Spearman ρ between the map
                    before the FF (``attn_res_ln``) and the map after it (``ff``, ``ff_res``,
                    ``ff_res_ln``) over the visible pairs of one sequence, averaged over sequences with
                    n ≥ 2 (Kobayashi et al. 2024).
"""

from __future__ import annotations

import numpy as np
from scipy.stats import rankdata

CATEGORIES = ("start", "sep", "period", "comma", "other")
STATISTICS = ("cv", "shares", "spearman", "frequency", "mixing", "ff_change")
STAT_TITLES = {
    "cv": "Coefficient of variation of ‖f(x)‖",
    "shares": "Share of weight vs norm received by token categories",
    "spearman": "Spearman ρ between α and ‖f(x)‖",
    "frequency": "Spearman ρ between ‖f(x)‖ and token frequency rank",
    "mixing": "Context-mixing ratio (2021, Table 2 definition)",
    "ff_change": "Contextualisation change by the FF block (2024)",
}
LAYER_MIX_KEYS = ("attention", "norm_layer", "attn_res", "attn_res_ln", "ff", "ff_res", "ff_res_ln")
HEAD_MIX_KEYS = ("attention", "norm")
PAPER_MIX_KEYS = ("attention", "norm_layer", "attn_res", "attn_res_ln")  # Table 2's four rows (W, N, ResN, ResLnN)
MIX_RATIOS = "mixing_ratios"  # per-token ratios of the paper's definition (not a map key; see corpus.chunks)
MIX_DEFINITION = "r_i = ‖Σ_{j≠i} v_ij‖ / (‖Σ_{j≠i} v_ij‖ + ‖v_ii‖) (Kobayashi et al. 2021; attention: Σ_{j≠i} ᾱ_ij)"
SHARE_DEFINITION = "Σ_{j≠i} ‖v_ij‖ / Σ_j ‖v_ij‖ (share of the non-self norms; not the paper's ratio)"
FF_AFTER = ("ff", "ff_res", "ff_res_ln")


def ff_after_keys(placement: str) -> tuple[str, ...]:
    return FF_AFTER if placement == "post" else FF_AFTER[:2]


def needed_keys(stats, placement: str) -> list[str]:
    """The maps the chosen statistics need: registry keys, plus ``fx_norm`` (‖f(x)‖ per head and token)."""
    keys: list[str] = []

    def add(*ks):
        keys.extend(k for k in ks if k not in keys)

    stats = set(stats)
    if stats & {"cv", "spearman", "frequency"}:
        add("fx_norm")
    if stats & {"shares", "spearman"}:
        add("attention")
    if "shares" in stats:
        add("norm")
    if "mixing" in stats:
        add("attention", "norm", "norm_layer", "attn_res", "attn_res_ln", MIX_RATIOS)
    if "ff_change" in stats:
        add("attn_res_ln", *ff_after_keys(placement))
    return keys


def categorize(labels: list[str], special: list[bool]) -> np.ndarray:
    """Category index per token: position 0 → start ([CLS]/BOS, or a decoder's first token, its attention
    sink); other special tokens → sep ([SEP]/EOS); "." → period; "," → comma; everything else → other."""
    out = np.full(len(labels), CATEGORIES.index("other"), dtype=np.int64)
    for j, (lab, sp) in enumerate(zip(labels, special)):
        if j == 0:
            out[j] = 0
        elif sp:
            out[j] = 1
        elif lab.strip() == ".":
            out[j] = 2
        elif lab.strip() == ",":
            out[j] = 3
    return out


def visible_mask(n: int, causal: bool) -> np.ndarray:
    return np.tril(np.ones((n, n), dtype=bool)) if causal else np.ones((n, n), dtype=bool)


def rowwise_spearman(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Spearman ρ of each row pair (average ranks for ties); NaN where a row is constant or too short."""
    if x.shape[-1] < 2:
        return np.full(x.shape[:-1], np.nan)
    rx = rankdata(x, axis=-1)
    ry = rankdata(y, axis=-1)
    rx = rx - rx.mean(-1, keepdims=True)
    ry = ry - ry.mean(-1, keepdims=True)
    den = np.sqrt((rx * rx).sum(-1) * (ry * ry).sum(-1))
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(den > 0, (rx * ry).sum(-1) / np.where(den > 0, den, 1.0), np.nan)


class Accumulator:
    """Sums and counts of every chosen statistic; ``add`` one sequence, ``state`` to save, ``merge`` to combine."""

    def __init__(self, n_layers: int, n_heads: int, placement: str, stats=STATISTICS, causal: bool | None = None):
        self.L, self.H, self.placement = n_layers, n_heads, placement
        # causal: from the model's ArchSpec (the engine passes it); every pre-LN family we know is a decoder
        self.causal = placement == "pre" if causal is None else causal
        self.stats = tuple(s for s in STATISTICS if s in set(stats))
        L, H, C = n_layers, n_heads, len(CATEGORIES)
        z = np.zeros
        self.s: dict[str, np.ndarray] = {"n_sequences": z(()), "n_tokens": z(())}
        if "cv" in self.stats:
            self.s.update(
                fx_cv_sum=z((L, H)), fx_cv_count=z((L, H)), fx_sum=z((L, H)), fx_sumsq=z((L, H)), fx_count=z(())
            )
        if "shares" in self.stats:
            self.s.update(share_weight=z((L, H, C)), share_norm=z((L, H, C)), share_rows=z(()), category_tokens=z(C))
        if "spearman" in self.stats:
            self.s.update(rho_alpha_fx_sum=z((L, H)), rho_alpha_fx_count=z((L, H)))
        if "mixing" in self.stats:
            for k in HEAD_MIX_KEYS:
                self.s[f"mixing_head_{k}_sum"] = z((L, H))
            self.s["mixing_head_share_norm_sum"] = z((L, H))
            self.s["mixing_head_rows"] = z(())
            self.s["mixing_head_norm_rows"] = z(())
            for k in PAPER_MIX_KEYS:
                self.s[f"mixing_{k}_sum"] = z(L)
                self.s[f"mixing_{k}_rows"] = z(L)
            for k in self._share_mix_keys():
                self.s[f"mixing_share_{k}_sum"] = z(L)
                self.s[f"mixing_share_{k}_rows"] = z(L)
        if "ff_change" in self.stats:
            for k in ff_after_keys(placement):
                self.s[f"ff_change_{k}_sum"] = z(L)
                self.s[f"ff_change_{k}_count"] = z(L)
        self.types: dict[int, int] = {}
        self.type_tokens: list[str] = []
        self._type_count = np.zeros(0)
        self._type_fx = np.zeros((L, H, 0))

    def _share_mix_keys(self):
        keys = list(LAYER_MIX_KEYS[1:4])
        if "ff_change" in self.stats:
            keys += list(ff_after_keys(self.placement))
        return keys

    # ------------------------------------------------------------------ one sequence
    def add(
        self,
        maps: dict[str, np.ndarray],
        token_ids: list[int],
        tokens: list[str],
        labels: list[str],
        special: list[bool],
    ) -> None:
        """Add one sequence. ``maps``: arrays of that sequence as from :func:`normviz.analyze` (any float dtype)."""
        s = self.s
        n = len(token_ids)
        s["n_sequences"] += 1
        s["n_tokens"] += n
        vis = visible_mask(n, self.causal)
        flat = vis.reshape(-1)
        f = maps["fx_norm"].astype(np.float64) if "fx_norm" in maps else None
        if "cv" in self.stats:
            if n >= 2:
                mean = f.mean(-1)
                cv = np.divide(f.std(-1), mean, out=np.full_like(mean, np.nan), where=mean > 0)
                ok = np.isfinite(cv)
                s["fx_cv_sum"] += np.where(ok, cv, 0.0)
                s["fx_cv_count"] += ok
            s["fx_sum"] += f.sum(-1)
            s["fx_sumsq"] += (f * f).sum(-1)
            s["fx_count"] += n
        if "shares" in self.stats:
            onehot = np.eye(len(CATEGORIES))[categorize(labels, special)]  # [n, C]
            s["category_tokens"] += onehot.sum(0)
            s["share_rows"] += n
            for name, key in (("share_weight", "attention"), ("share_norm", "norm")):
                m = maps[key].astype(np.float64) * vis
                tot = m.sum(-1, keepdims=True)
                part = np.divide(m @ onehot, tot, out=np.zeros(m.shape[:-1] + (len(CATEGORIES),)), where=tot > 0)
                s[name] += part.sum(-2)
        if "spearman" in self.stats:
            a = maps["attention"].astype(np.float64)
            fb = np.broadcast_to(f[:, :, None, :], a.shape)
            rho = rowwise_spearman(a.reshape(self.L, self.H, -1)[..., flat], fb.reshape(self.L, self.H, -1)[..., flat])
            ok = np.isfinite(rho)
            s["rho_alpha_fx_sum"] += np.where(ok, rho, 0.0)
            s["rho_alpha_fx_count"] += ok
        if "frequency" in self.stats:
            for j, (tid, tok, sp) in enumerate(zip(token_ids, tokens, special)):
                if sp:
                    continue
                col = self._type_col(int(tid), tok)
                self._type_count[col] += 1
                self._type_fx[:, :, col] += f[:, :, j]
        if "mixing" in self.stats:
            rows = vis.sum(-1) >= 2  # receiving tokens that can mix at all
            eye = np.eye(n, dtype=bool)

            def share(m):  # the earlier statistic: Σ_{j≠i} m_ij / Σ_j m_ij
                m = m.astype(np.float64) * vis
                tot = m.sum(-1)
                off = tot - m[..., eye].reshape(m.shape[:-2] + (n,))
                r = np.divide(off, tot, out=np.zeros_like(tot), where=tot > 0)
                return (r * rows).sum(-1)

            def off_weight(a):  # Σ_{j≠i} α_ij
                a = a.astype(np.float64) * vis
                return ((a.sum(-1) - a[..., eye].reshape(a.shape[:-2] + (n,))) * rows).sum(-1)

            # the paper's vector ratios need the stage vectors (maps[MIX_RATIOS], from batch_maps); a caller that
            # passes maps only gets them left out (NaN in the tables), never replaced by the share statistic
            ratios = maps.get(MIX_RATIOS)
            s["mixing_head_rows"] += rows.sum()
            s["mixing_head_attention_sum"] += off_weight(maps["attention"])
            s["mixing_head_share_norm_sum"] += share(maps["norm"])
            s["mixing_attention_sum"] += off_weight(maps["attention"].mean(1))
            s["mixing_attention_rows"] += rows.sum()
            if ratios is not None:
                s["mixing_head_norm_sum"] += (ratios["norm"].astype(np.float64) * rows).sum(-1)
                s["mixing_head_norm_rows"] += rows.sum()
                for k in PAPER_MIX_KEYS[1:]:
                    s[f"mixing_{k}_sum"] += (ratios[k].astype(np.float64) * rows).sum(-1)
                    s[f"mixing_{k}_rows"] += rows.sum()
            for k in self._share_mix_keys():
                s[f"mixing_share_{k}_sum"] += share(maps[k])
                s[f"mixing_share_{k}_rows"] += rows.sum()
        if "ff_change" in self.stats and n >= 2:
            before = maps["attn_res_ln"].astype(np.float64).reshape(self.L, -1)[:, flat]
            for k in ff_after_keys(self.placement):
                after = maps[k].astype(np.float64).reshape(self.L, -1)[:, flat]
                rho = rowwise_spearman(before, after)
                ok = np.isfinite(rho)
                s[f"ff_change_{k}_sum"] += np.where(ok, 1.0 - rho, 0.0)
                s[f"ff_change_{k}_count"] += ok

    def _type_col(self, tid: int, tok: str) -> int:
        col = self.types.get(tid)
        if col is None:
            col = self.types[tid] = len(self.type_tokens)
            self.type_tokens.append(tok)
            if col >= self._type_count.shape[0]:
                grow = max(64, col)
                self._type_count = np.concatenate([self._type_count, np.zeros(grow)])
                self._type_fx = np.concatenate([self._type_fx, np.zeros((self.L, self.H, grow))], axis=-1)
        return col

    # ------------------------------------------------------------------ states
    def state(self) -> dict[str, np.ndarray]:
        out = {k: v.copy() for k, v in self.s.items()}
        if "frequency" in self.stats:
            t = len(self.type_tokens)
            out["type_ids"] = np.array(list(self.types), dtype=np.int64)
            out["type_tokens"] = np.array(self.type_tokens, dtype=str)
            out["type_count"] = self._type_count[:t].copy()
            out["type_fx_sum"] = self._type_fx[:, :, :t].copy()
        return out


def merge(states: list[dict[str, np.ndarray]]) -> dict[str, np.ndarray]:
    """Add states key by key; token types are joined by id. The order of ``states`` fixes the float sums."""
    if not states:
        raise ValueError("nothing to merge")
    out = {k: np.array(v, copy=True) for k, v in states[0].items()}
    freq = "type_ids" in out
    if freq:
        cols = {int(t): i for i, t in enumerate(out["type_ids"])}
        tokens = list(out["type_tokens"])
        counts = list(out["type_count"])
        fx = [out["type_fx_sum"][:, :, i] for i in range(len(tokens))]
    for st in states[1:]:
        for k, v in st.items():
            if k.startswith("type_"):
                continue
            out[k] = out[k] + v
        if freq:
            for i, t in enumerate(st["type_ids"]):
                c = cols.get(int(t))
                if c is None:
                    cols[int(t)] = len(tokens)
                    tokens.append(st["type_tokens"][i])
                    counts.append(st["type_count"][i])
                    fx.append(st["type_fx_sum"][:, :, i].copy())
                else:
                    counts[c] += st["type_count"][i]
                    fx[c] = fx[c] + st["type_fx_sum"][:, :, i]
    if freq:
        out["type_ids"] = np.array(list(cols), dtype=np.int64)
        out["type_tokens"] = np.array(tokens, dtype=str)
        out["type_count"] = np.array(counts, dtype=np.float64)
        L, H = out["type_fx_sum"].shape[:2]
        out["type_fx_sum"] = np.stack(fx, -1) if fx else np.zeros((L, H, 0))
    return out
