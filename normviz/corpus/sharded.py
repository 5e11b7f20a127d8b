"""Load a model sharded over the available devices with accelerate (``device_map="auto"``).

For a model too large for one GPU: accelerate places consecutive layers on GPU 0, GPU 1, … (and the CPU
when the GPUs are full). The corpus engine moves each layer's record to that layer's device before
decomposing it (:func:`normviz.corpus.engine.batch_maps`), so the maps are the same as unsharded. On a
machine without GPUs everything lands on the CPU and the result equals a plain load.
"""
from __future__ import annotations

import importlib.util

import torch

from ..backend import parse_dtype
from ..errors import HubUnreachableError, MissingPackageError, UnknownModelError
from ..models.loading import (LoadedModel, _hub_error, _in_local_cache, _max_length, _validated, check_supported,
                              load_config, resolve)
from ..models.params import get_path


def load_sharded(name: str, device_map: str | dict = "auto", dtype=None, progress=None) -> LoadedModel:
    """Like :func:`normviz.load`, with the weights spread by ``device_map`` (``"auto"``, ``"balanced"``, a dict)."""
    if importlib.util.find_spec("accelerate") is None:
        raise MissingPackageError("--device-map needs accelerate: pip install 'accelerate==1.15.0'.")
    from transformers import AutoModel, AutoTokenizer

    source, revision = resolve(name, progress)
    config = load_config(source, revision, name)
    spec = check_supported(config, name)
    dt = parse_dtype(dtype, torch.device("cuda" if torch.cuda.is_available() else "cpu"))
    offline = {"local_files_only": True} if revision == "hub" and _in_local_cache(source) else {}
    if progress:
        progress(f"Loading {name} with device_map={device_map!r}…")
    try:
        tokenizer = AutoTokenizer.from_pretrained(source, trust_remote_code=False, **offline)
        model = AutoModel.from_pretrained(source, config=config, attn_implementation="eager", trust_remote_code=False,
                                          dtype=dt, device_map=device_map, **offline)
    except OSError as exc:
        if revision == "hub":
            raise _hub_error(name, exc) from None
        raise UnknownModelError(f"Could not load {name!r}: {exc}") from None
    except HubUnreachableError:  # pragma: no cover - raised above already
        raise
    model.eval().requires_grad_(False)
    emb = model.get_input_embeddings()
    device = emb.weight.device if emb is not None else next(model.parameters()).device
    if get_path(model, spec.layers) is None:  # pragma: no cover - defensive
        raise UnknownModelError(f"{name!r}: could not find its layers at {spec.layers!r}.")
    return _validated(LoadedModel(
        name=name, model=model, tokenizer=tokenizer, spec=spec, source=source, revision=revision + f"|map:{device_map}",
        device=device, dtype=dt, max_length=_max_length(config, tokenizer),
    ))


def layer_devices(lm: LoadedModel) -> list[str]:
    """The device of each layer (to report how a model was sharded)."""
    return [str(next(layer.parameters()).device) for layer in lm.layers]
