"""The Why page's view (its own URL parameters on top of the shared text and model) and its computations.

URL parameters (with the shared ``text``, ``model``, ``present``): ``position`` (a token index; default the
last), ``token`` (the target: its text, e.g. `` Paris``, or its id; default the top prediction, or at an earlier
position the text's actual next token), ``foil`` (empty: none), ``tau`` (the routes' threshold, 0.01 … 0.5).
Everything here is Streamlit-free except :func:`save_why` / :func:`why_view`; the page draws.
"""

from __future__ import annotations

import io
import json
from dataclasses import dataclass, field
from typing import NamedTuple

import numpy as np

from ...attribution import NoHeadError, readout_of
from ...attribution.predict import token_id, token_text
from ...core.errors import NormvizError, TooCostlyError
from ...viz.why import shown
from ..kit.state import QueryView
from ..kit.url_fields import url

WHY_VIEW = "_normviz_why"
FALLBACK_MODEL = "smollm2"
TOP = 10
MAX_STEPS = 64  # a continuation's steps on the page (URL ``steps``)


@dataclass
class WhyView(QueryView):
    position: int | None = url(None, "int", lo=0, none=("last", "", "-1"))  # None: the last token
    token: str = url("", "str", limit=200)  # "" = the default target
    foil: str = url("", "str", limit=200)
    tau: float = url(0.04, "float", lo=0.01, hi=0.5, digits=3)
    # the Continuation view (normviz.ui.views.continuation): 0 = off, else its steps
    steps: int = url(0, "int", lo=0, hi=MAX_STEPS)
    continuation: str = url("", "str", limit=400)  # … a given continuation (teacher-forced) instead of the greedy one
    cfoil: str = url("", "choice", choices=("", "runner-up"))  # each step's logit, or its difference to the runner-up
    problems: list[str] = field(default_factory=list, compare=False, repr=False)


def has_head(lm) -> str | None:
    """None when ``lm`` predicts tokens, else why not (what to pick instead)."""
    try:
        readout_of(lm)
    except NoHeadError as exc:
        return str(exc)
    return None


def resolve(tokenizer, vocab_size: int, value: str, what: str) -> tuple[int | None, str | None]:
    """(the id of the URL's token/foil, None) or (None, why it was ignored); "" → (None, None)."""
    if not value:
        return None, None
    try:
        if value.strip().isdigit():
            return token_id(tokenizer, int(value.strip()), vocab_size, what), None
        return token_id(tokenizer, value, vocab_size, what), None
    except NormvizError as exc:
        return None, f"Ignored the link's {what}: {exc}"


def token_param(tokenizer, vocab_size: int, tid: int) -> str:
    """How a token goes into the URL: its text when that reads back as the same id, else its id."""
    text = token_text(tokenizer, tid)
    got, _ = resolve(tokenizer, vocab_size, text, "token")
    return text if got == tid and not text.strip().isdigit() else str(tid)


def refusals(session, budget_s: float | None, tau: float = 0.01) -> dict:
    """{"sources": why refused | None, "routes": … (at threshold τ), "sinks": …} at the deployment's cost budget,
    before any work."""
    from ...attribution import adjoint, flow
    from ...methods import sinks

    opts = dict(session.options)
    if budget_s is not None:
        opts.setdefault("explain_budget_s", budget_s)
        opts.setdefault("routes_budget_s", budget_s)
        opts.setdefault("sinks_budget_s", budget_s)
    out = {}
    for name, check in (
        ("sources", lambda: adjoint.check(session.request, opts)),
        ("routes", lambda: flow.check(session.request, opts, max(float(tau), 0.01))),
        ("sinks", lambda: sinks.check(session.request, opts)),
    ):
        try:
            check()
            out[name] = None
        except TooCostlyError as exc:
            out[name] = str(exc)
    return out


class LensView(NamedTuple):
    """What the page shows of a logit lens [L+1, V] at one position: the top-``k`` table per layer and the
    log-probability columns [L+1] of the tokens it may draw (the candidates, the text's next token, a link's
    token and foil). Kept per position instead of the whole array (6 MB per position on smollm2: a visitor
    clicking through a 128-token text's positions held 0.8 GB); a tuple, so ui.memo counts its bytes."""

    table: list[dict]
    columns: dict[int, np.ndarray]

    def curves(self, ids: dict[str, int]) -> dict[str, np.ndarray]:
        """Each named token's probability after every layer [L+1] (the last: the model's own)."""
        return {name: np.exp(self.columns[t].astype(np.float64)) for name, t in ids.items()}


def lens_view(lens: np.ndarray, tokenizer, ids, top: int = 5) -> LensView:
    """The :class:`LensView` of ``lens`` [L+1, V] (log-probabilities) for the token ids ``ids``."""
    return LensView(lens_table(lens, tokenizer, top), {int(t): np.array(lens[:, int(t)]) for t in ids})


def lens_table(lens: np.ndarray, tokenizer, top: int = 5) -> list[dict]:
    """Per layer (0 = embedding … L = the model), the ``top`` tokens of the logit lens and their probabilities."""
    k = min(top, lens.shape[1])
    part = np.argpartition(-lens, k - 1, axis=1)[:, :k]  # the top k per row, unordered (no sort of V)
    rows = []
    for l in range(lens.shape[0]):
        best = part[l][np.lexsort((part[l], -lens[l, part[l]]))]  # by probability, ties by id
        row = {"after layer": l}
        for j, t in enumerate(best):
            row[f"#{j + 1}"] = f"{shown(token_text(tokenizer, int(t)))} {float(np.exp(lens[l, t])):.3f}"
        rows.append(row)
    return rows


def lens_curves(lens: np.ndarray, ids: dict[str, int]) -> dict[str, np.ndarray]:
    """Each named token's probability after every layer [L+1]."""
    return {name: np.exp(lens[:, t].astype(np.float64)) for name, t in ids.items()}


def routes_at(session, position: int, tau: float):
    """The routes of ``session`` at ``position`` and threshold τ (≥ 0.01, the slider's least), computed at the
    lowest τ asked so far per session and position (ui.memo: shared by every visitor of the same text) and
    re-extracted from it for a higher τ (:meth:`Routes.above`: no model work). The first view pays for its own
    τ only (τ = 0.04 reaches about half the rows of τ = 0.01)."""
    from ...attribution import routes
    from ..kit.memo import memoised

    tau = max(float(tau), 0.01)
    held = memoised(session, ("why_routes", int(position)), lambda: [None])  # a box: the lowest τ's routes
    r = held[0]
    if r is None or r.threshold > tau:
        r = routes(session, position=position, threshold=tau)
        held[0] = r
    return r if r.threshold == tau else r.above(tau)


def attend_at(session, layer: int, head: int, position: int, key: int, by_token: bool):
    """Why head (layer, head) attends from ``position`` to ``key``: :meth:`normviz.Session.attend`, once per
    session (ui.memo: shared by every visitor of the same text)."""
    from ..kit.memo import memoised

    return memoised(
        session,
        ("why_attend", int(layer), int(head), int(position), int(key), bool(by_token)),
        lambda: session.attend(int(layer), int(head), query=int(position), key=int(key), by_token=bool(by_token)),
    )


def graph_at(session, token: int, foil: int | None, position: int):
    """The attribution graph (:func:`normviz.graph`) of the page's prediction, once per session and target."""
    from ...attribution.graph import graph
    from ..kit.memo import memoised

    return memoised(
        session,
        ("why_graph", int(token), foil, int(position)),
        lambda: graph(session, token=int(token), foil=foil, position=int(position)),
    )


def grid_columns(e) -> tuple[np.ndarray, dict[str, np.ndarray]]:
    """The heads grid of an Explanation: heads.sum(-1) [L, H], and the extra columns FF [L], b^O [L], the
    embedding (layer 0's row) and the final norm's/head's bias (the last layer's row). Every cell sums to total."""
    L = e.heads.shape[0]
    emb = np.full(L, np.nan)
    emb[0] = e.embedding
    fin = np.full(L, np.nan)
    fin[-1] = e.final_bias
    return e.heads.sum(-1), {"FF": e.ff, "b^O": e.attn_bias, "embedding": emb, "final bias": fin}


def numbers(e, candidates, lens_ids: dict[str, int], lens, routes=None, sources=None) -> dict:
    """Every number the page shows, as one dict of numpy arrays / numbers / strings (``lens``: the [L+1, V]
    log-probabilities or their :class:`LensView`)."""
    out = e.to_dict(with_sources=False) if e is not None else {}
    out["candidate_tokens"] = np.array([c.token for c in candidates])
    out["candidate_ids"] = np.array([c.id for c in candidates])
    out["candidate_probs"] = np.array([c.prob for c in candidates])
    curves = lens.curves(lens_ids) if isinstance(lens, LensView) else lens_curves(lens, lens_ids)
    for name, p in curves.items():
        out[f"lens_prob_{name}"] = p
    if sources is not None:
        out["sources"], out["bias"] = sources
    if routes is not None:
        out.update({f"routes_{k}": v for k, v in routes.arrays().items()})
        out["routes_threshold"] = routes.threshold
    return out


def to_npz(d: dict) -> bytes:
    buf = io.BytesIO()
    np.savez_compressed(buf, **{k: np.asarray(v) for k, v in d.items()})
    return buf.getvalue()


def to_json(d: dict) -> bytes:
    """JSON of :func:`numbers` (NaN, an empty cell of the grid's extra columns, as null)."""

    def plain(v):
        if isinstance(v, np.ndarray):
            return [plain(x) for x in v.tolist()] if v.dtype.kind == "f" else v.tolist()
        if isinstance(v, list):
            return [plain(x) for x in v]
        if isinstance(v, np.generic):
            v = v.item()
        if isinstance(v, float) and not np.isfinite(v):
            return None
        return v

    return json.dumps({k: plain(v) for k, v in d.items()}, ensure_ascii=False, default=str).encode("utf-8")


# ---------------------------------------------------------------- Streamlit: the view in session and URL
def why_view():
    """The page's own view (from the URL on the session's first run, then kept)."""
    from ..kit.session_view import view_from_url

    return view_from_url(WhyView, WHY_VIEW)


def follow_text(model: str, text: str, why, keys: tuple[str, ...]) -> bool:
    """A new text (or model: another tokenisation) is explained at its own last position, for its own top
    prediction, with no foil: the page's text-dependent boxes ``keys`` of the previous text are dropped
    (:func:`normviz.ui.kit.session_view.follow_text`; they would explain another token of the new one: issue 29,
    issue 42's key token). True when that happened. The session's first run keeps the link's position, token and
    foil."""
    from ..kit.session_view import follow_text as follow

    if not follow(keys, model, text):
        return False
    why.position, why.token, why.foil = None, "", ""
    return True


def save_why(shared, why) -> None:
    """Keep both views and write both into the URL (the shared one's fields, then the page's own)."""
    import streamlit as st

    from ..kit.session_view import VIEW

    st.session_state[VIEW] = shared
    st.session_state[WHY_VIEW] = why
    st.query_params.from_dict({**shared.to_query(), **why.to_query()})
