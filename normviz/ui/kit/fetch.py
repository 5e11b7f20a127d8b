"""One way down for every page and both model kinds: the shared session of a text, then its maps.

:func:`session_for` gives ``normviz.Session(lm, text, pair, target=…)`` from the server-wide cache (tokenised
once, recorded on its first map); :func:`get_maps` gives ``session.get(keys, strict=False)`` with a progress bar
(refused keys in ``Analysis.refused``). Self-attention pages pass ``target=None``; Translate passes the target
text ("" = the model generates it). Either shows an error box and returns None when it cannot go on.
"""

from __future__ import annotations

import contextlib
import time

import streamlit as st

import normviz
from normviz import methods
from normviz.core.errors import NormvizError

from . import timing
from .interrupts import deferred_interrupts
from .keys import known_keys
from .messages import say, shorten_error
from .safe import plain
from .settings import settings
from .state import token_cap
from .stores import server_memory, session_cache, visitor_id


def session_options(lm) -> dict:
    """Options every session of this deployment gets: the cost budget of every family that has one (its
    ``KeyInfo.budget_option``, checked before anything runs): NORMVIZ_FF_BUDGET seconds for the feed-forward
    maps, NORMVIZ_COST_BUDGET for the others (value zeroing, ALTI, effective attention, GlobEnc, DecompX, and
    any family registered later, and the Why page's routes); default 60 each; the memory budget of whole map arrays
    (NORMVIZ_MEMORY_BUDGET_MB, default 2048); and no recording pass stopped early (``stop_early``)."""
    conf = settings()
    import normviz.attribution  # noqa: F401 — registers explain's and routes' budgets (``import normviz`` is lazy)

    options = {name: conf.cost_budget_s for name in methods.all_budget_options()}  # explain's and routes' too
    options[methods.budget_option("ff")] = conf.ff_budget_s
    options["routes_budget_s"] = conf.cost_budget_s  # the Why page's routes: refused over it, stopped at 4× it
    options["memory_budget_mb"] = conf.memory_budget_mb
    # a shared session is asked for predictions and other maps later: one full pass, never a second one
    options["stop_early"] = False
    return options


def heavy_worker():
    """The server's worker process(es) for the costly maps (NORMVIZ_HEAVY_WORKERS; None: 0, all in-process);
    in the public app (NORMVIZ_PUBLIC=1) long texts' layers are computed there too (:mod:`normviz.workers.process`)."""
    from normviz.workers.process import shared_worker

    conf = settings()
    worker = shared_worker(conf.heavy_workers, long_layers=conf.public)
    if worker is not None:
        worker.wanted = visitor_connected  # a job still waiting for the worker when its visitor left is dropped
    return worker


def visitor_connected() -> bool:
    """Whether the visitor of this script run is still connected (True outside a run or a running server)."""
    visitor = visitor_id()
    if visitor is None:
        return True
    try:
        from streamlit.runtime import Runtime

        return not Runtime.exists() or Runtime.instance().is_active_session(visitor)
    except Exception:  # pragma: no cover - the job runs, as before
        return True


def _cut(texts: list[str], limit: int) -> tuple[list[str], str | None]:
    """``texts`` cut to ``limit`` characters in all (before tokenising: bounded time and memory for any input),
    and a note when anything was cut."""
    total = sum(len(t) for t in texts)
    if total <= limit:
        return texts, None
    out, left = [], limit
    for t in texts:
        out.append(t[:left])
        left = max(0, left - len(t))
    return out, cut_note(texts, out, limit)


def cut_note(texts: list[str], kept: list[str], limit: int, names=("second text", "target")) -> str:
    """What cutting ``texts`` to ``kept`` did, said of each box: a second text (or target) dropped because the
    first fills the limit, or cut; the first text alone cut."""
    why = f"at most {limit:,} characters are analysed: NORMVIZ_MAX_TOKENS × 50"
    first, rest = texts[0], [(n, t, k) for n, t, k in zip(names, texts[1:], kept[1:]) if t]
    if not rest:
        return (
            f"The text is {len(first):,} characters long; "
            f"only the first {limit:,} are analysed (NORMVIZ_MAX_TOKENS × 50)."
        )
    dropped = [f"the {n} ({len(t):,} characters)" for n, t, k in rest if not k]
    cut = [
        f"the {n} is cut to its first {len(k):,} of {len(t):,} characters" for n, t, k in rest if k and len(k) < len(t)
    ]
    if dropped and len(first) >= limit:
        first_cut = f", cut to its first {limit:,} characters" if len(first) > limit else ""
        return (
            f"Both boxes are full: the first text alone is {len(first):,} characters, so "
            f"{' and '.join(dropped)} {'was' if len(dropped) == 1 else 'were'} dropped and the first is analysed "
            f"alone{first_cut}, not as a pair ({why})."
        )
    said = cut + [f"{d} was dropped" for d in dropped]
    return f"The texts are {sum(len(t) for t in texts):,} characters together: {'; '.join(said)} ({why})."


def _truncation_note(lm, message: str, cap: int) -> str:
    """A truncation warning, with what would change the limit: the token cap, unless the model's own window
    is the limit (toy-mt reads 64 tokens)."""
    if cap < lm.max_length:
        return f"{message} Set NORMVIZ_MAX_TOKENS to change the limit."
    return f"{message} That is {lm.name}'s own window ({lm.max_length} tokens): shorten the text."


AXIS_NAMES = {"encoder": "source", "decoder": "target"}  # an encoder–decoder's texts; any other stack: "text"


def truncation_notes(session, lm, cap: int) -> list[str]:
    """What was cut from ``session``'s texts, read from the values the library returns (each axis's
    ``Encoded.dropped``), not from its TruncationWarning: ``warnings.catch_warnings`` is module-global, so two
    visitors' first views at once lost their note or got each other's (issue 42)."""
    notes = []
    for stack in session.stacks:
        if stack == "cross":  # its rows and columns are the decoder's and the encoder's
            continue
        enc = session.axis(stack)
        if enc.dropped:
            what = AXIS_NAMES.get(stack, "text")
            notes.append(
                _truncation_note(
                    lm,
                    f"The {what} is {len(enc.ids) + enc.dropped} tokens long, more than "
                    f"the limit of {len(enc.ids)}; {enc.dropped} tokens were dropped "
                    "from the end.",
                    cap,
                )
            )
    return notes


def prepared(lm, text: str, pair: str, target_text: str, cap: int, options: dict):
    """(the session of this text, its truncation notes): what the server-wide session cache keeps. New sessions
    of different texts are made at once (a fast tokenizer's shared truncation setting is held by
    ``core.tokens.tokenizer_lock`` in the library, tested with concurrent encodings there)."""
    session = normviz.Session(
        lm, text, pair or None, target=target_text or None, max_tokens=cap, options=options, worker=heavy_worker()
    )
    return session, truncation_notes(session, lm, cap)


def session_for(lm, text: str, pair: str = "", *, target: str | None = None):
    """The shared session of this text (pair, or an encoder–decoder's source and target), or None after an
    error box. A text cut at the character or token limit says so. ``target=None`` is a self-attention page's
    request: an encoder–decoder model is pointed to the Translate page (its maps need a source and a target)."""
    seq2seq = bool(getattr(lm, "is_encoder_decoder", False))
    if seq2seq and target is None:
        say(
            "info",
            f"{lm.name} is an encoder–decoder (translation) model: its encoder, decoder and "
            "cross-attention maps are on the Translate page, with a source and a target text.",
        )
        return None
    cap = token_cap()
    (text, pair, target_text), cut = _cut([text, pair or "", target or ""], settings().max_text_chars)
    if cut:
        say("warning", cut)
    options = session_options(lm)
    key = lm.cache_key + (text, pair, target, cap, tuple(sorted(options.items())))

    def make():
        return prepared(lm, text, pair, target_text, cap, options)

    try:
        session, notes = session_cache().get_or_compute(key, make)
    except NormvizError as exc:
        say("error", shorten_error(exc, 600))
        return None
    except Exception as exc:  # anything unexpected still reads as a message, never a traceback
        say("error", f"The text could not be prepared: {type(exc).__name__}: {shorten_error(exc)}")
        return None
    server_memory().note_use(key, visitor_id(), session)
    for note in notes:
        say("warning", note)
    return session


def admitted(
    session, array_bytes: int = 0, long_layer: bool = False, what: str = "this text", records_here: bool = True
):
    """The server-wide memory budget's admission (:meth:`ServerMemory.admit`) for what ``session`` is about to
    compute: its recording if not made yet (and made in this process: ``records_here``), ``array_bytes`` of
    arrays, or one long layer's working set."""
    from .server_memory import need_bytes

    recorded = session.part.passes > 0 or not records_here
    need = need_bytes(session.lm, session.n_tokens, recorded, array_bytes, long_layer)
    return server_memory().admit(need, session, what)


def get_maps(session, keys: list[str]):
    """``session.get(keys, strict=False)`` with a progress bar while anything is computed; refusals per key
    in ``Analysis.refused``; keys the model does not know are skipped. None (after an error box) if the
    analysis itself failed. A rerun requested meanwhile waits until the computation is done
    (:mod:`normviz.ui.kit.interrupts`): a burst of reruns costs one computation, not one started per rerun."""
    known = set(known_keys(session.lm))
    keys = [k for k in dict.fromkeys(keys) if k in known]
    missing = [k for k in keys if k not in session.computed()]
    bar = st.empty() if missing else None
    held = contextlib.ExitStack()
    try:
        if bar is not None:
            held.enter_context(admitted(session, _whole_bytes(session, missing)))
            prog = bar.progress(0.0, text=f"Analysing ({', '.join(missing)})…")
            t0, deferred, how = time.perf_counter(), None, "done"
            try:
                with deferred_interrupts() as deferred:
                    analysis = session.get(
                        keys,
                        strict=False,
                        progress=deferred.wrap(
                            lambda f, m: prog.progress(min(1.0, max(0.0, f)), text=f"Analysing: {m}")
                        ),
                    )
            except BaseException:
                how = "failed"  # an error, or an interruption that was not deferred
                raise
            finally:
                how = "deferred" if deferred is not None and deferred.pending is not None else how
                timing.report("compute", ",".join(missing), how, f"{time.perf_counter() - t0:.4f}")
        else:
            analysis = session.get(keys, strict=False)
    except NormvizError as exc:
        say("error", shorten_error(exc, 600))
        return None
    except Exception as exc:  # never a traceback in the page
        say("error", f"The analysis failed: {type(exc).__name__}: {shorten_error(exc)}")
        return None
    finally:
        held.close()
        if bar is not None:
            bar.empty()
    notice_waited(analysis)
    return analysis


def _whole_bytes(session, keys: list[str]) -> int:
    """Bytes of the whole [L, …] arrays of ``keys`` for this input (known before computing)."""
    from normviz.core import memory

    total = 0
    for k in keys:
        try:
            total += memory.nbytes(session.array_shape(k), session.itemsize)
        except Exception:  # a key whose shape is not known up front: its own checks apply
            continue
    cap = memory.budget_mb(session.options)  # past the session's own budget, keys are refused, not computed
    return total if cap is None else min(total, int(cap * 2**20))


def notice_waited(analysis, at_least_s: float = 0.5) -> None:
    """Say how long this request waited for other visitors' analyses (``Analysis.waited_s``: the same text's
    shared session busy, or the heavy-methods worker busy with another visitor's job), when it did."""
    waited = float(getattr(analysis, "waited_s", 0.0) or 0.0)
    if waited >= at_least_s:
        st.info(
            f"This analysis waited {waited:.1f} s for other visitors' analyses before it could run "
            "(the server computes costly maps one visitor at a time)."
        )


def transformed_norms_of(session, layer: int):
    """``normviz.transformed_norms(session, layer)``, computed once per session and layer (ui.memo)."""
    from .memo import memoised

    return memoised(session, ("fx", layer), lambda: normviz.transformed_norms(session, layer))


def fx_norms(session, layer: int):
    """‖f^h(x_j)‖ of one layer ([H, n], ``normviz.transformed_norms``) from the session's records, or None
    (after a caption) when they cannot be had."""
    try:
        return transformed_norms_of(session, layer)
    except Exception as exc:  # never a traceback: the strip is an extra
        st.caption(plain(f"The ‖f(x)‖ strip is not available: {type(exc).__name__}: {shorten_error(exc)}", None))
        return None
