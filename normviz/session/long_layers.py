"""One layer of a long text's maps, wherever it is computed: the session decides, the UI asks for a layer.

Where the session has a worker that takes long texts' layers (the public app's
:class:`normviz.workers.process.HeavyWorker` with ``long_layers``), the layer is computed in the worker process
(the records live there) and the last layers are kept here in a bounded cache; otherwise by
:meth:`Session.maps` in this process. The worker is reached through its own methods (``takes_layers``,
``layer_maps``), so this module imports nothing above the session layer."""

from __future__ import annotations

import weakref

from ..core.errors import NormvizError

_REMOTE: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()  # session -> LayerCache of its layers' maps


def in_worker(session) -> bool:
    """Whether ``session``'s long-text layers are computed in its worker process."""
    worker = getattr(session, "worker", None)
    return worker is not None and bool(worker.takes_layers(session))


def remote_maps(session, keys: list[str], layer: int, head: int | None, progress=None) -> dict:
    """``session.maps(keys, layer, head)`` from the worker process (``HeavyWorker.layer_maps``: the records
    live there), the last layers kept here in a bounded cache (``memory.LONG_MAP_CACHE_MB`` per session, as the
    session's own): going back to a layer is no job at all."""
    from ..core.memory import LONG_MAP_CACHE_MB, LayerCache

    cache = _REMOTE.get(session)
    if cache is None:
        cache = _REMOTE.setdefault(session, LayerCache(LONG_MAP_CACHE_MB))
    n_layers = session.request.n_layers
    li = int(layer) % n_layers if -n_layers <= int(layer) < n_layers else int(layer)  # out of range: said there
    out = {k: cache.get((k, li, head)) for k in keys}
    todo = [k for k, v in out.items() if v is None]
    if todo:
        got = session.worker.layer_maps(session, todo, li, head, progress)
        for k in todo:
            got[k].setflags(write=False)
            cache.put((k, li, head), got[k])
            out[k] = got[k]
    return out


def layer_maps(session, keys: list[str], layer: int, head: int | None, progress=None) -> tuple[dict, dict]:
    """({key: [n, n] map of ``layer``} from :meth:`Session.maps`, {key: why refused}); a refused key (a cost
    check for one layer, a cross-layer map over its budget) does not stop the others. Where the session's worker
    takes long texts (:func:`in_worker`: the public app's) the layer is computed there (:func:`remote_maps`),
    never in the server's threads."""

    def maps(ks):
        return remote_maps(session, ks, layer, head, progress) if in_worker(session) else session.maps(ks, layer, head)

    try:
        return maps(keys), {}
    except NormvizError:
        got, refused = {}, {}
        for k in keys:
            try:
                got[k] = maps([k])[k]
            except NormvizError as exc:
                refused[k] = str(exc)
        return got, refused
