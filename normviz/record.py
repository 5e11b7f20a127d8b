"""One forward pass that records what every map needs, per layer and per sequence.

For layer l the record holds
  x      [n, d]     layer input (residual stream)
  attn   [H, n, n]  attention weights α^h_ij of the same pass
  z_attn [n, d]     the real vector entering the norm after attention: post-LN: x + Attn(x) (LN1's input);
                    pre-LN: x + Attn(LN1 x) (LN2's input)
  z_ff   [n, d]     post-LN only: h + FF(h) (LN2's input)
  out    [n, d]     layer output
  v      [n, ·]     the value projection's own output (GPT-2: the fused q|k|v output)
Sequences of a batch are right-padded; records are cut back to each sequence's own length, so padded
positions never reach a map.
"""
from __future__ import annotations

import threading
from dataclasses import dataclass, fields, replace

import torch

from .models.loading import LoadedModel
from .models.params import get_path


@dataclass
class LayerRecord:
    x: torch.Tensor
    attn: torch.Tensor
    z_attn: torch.Tensor
    z_ff: torch.Tensor | None
    out: torch.Tensor
    v: torch.Tensor | None = None  # output of the value projection (fused qkv for GPT-2), biases included

    def to(self, device: torch.device) -> "LayerRecord":
        """The same record on `device` (layers of a model sharded with device_map live on several devices)."""
        if self.x.device == device:
            return self
        return replace(self, **{f.name: getattr(self, f.name).to(device) for f in fields(self)
                                if getattr(self, f.name) is not None})


def _first_tensor(args, kwargs, name="hidden_states"):
    if name in kwargs and kwargs[name] is not None:
        return kwargs[name]
    return args[0]


def _out_tensor(output):
    return output[0] if isinstance(output, (tuple, list)) else output


_LOCKS_GUARD = threading.Lock()


def model_lock(model: torch.nn.Module) -> threading.RLock:
    """One lock per torch model: recording installs hooks on the shared model, so two threads recording
    at once would read each other's activations."""
    with _LOCKS_GUARD:
        lock = model.__dict__.get("_normviz_lock")
        if lock is None:
            lock = threading.RLock()
            model.__dict__["_normviz_lock"] = lock
        return lock


@torch.no_grad()
def record(lm: LoadedModel, input_ids: torch.Tensor, attention_mask: torch.Tensor, extra: dict | None = None
           ) -> list[list[LayerRecord]]:
    """Run the model once on a right-padded batch; return records[b][layer] trimmed to each length."""
    with model_lock(lm.model):
        return _record(lm, input_ids, attention_mask, extra)


def _record(lm: LoadedModel, input_ids: torch.Tensor, attention_mask: torch.Tensor, extra: dict | None
            ) -> list[list[LayerRecord]]:
    spec = lm.spec
    layers = lm.layers
    store: dict[tuple[int, str], torch.Tensor] = {}
    handles = []

    def pre_hook(key):
        def fn(module, args, kwargs):
            store[key] = _first_tensor(args, kwargs)
        return fn

    def in_hook(key):
        def fn(module, args):
            store[key] = args[0]
        return fn

    def out_hook(key):
        def fn(module, args, output):
            store[key] = _out_tensor(output)
        return fn

    try:
        for i, layer in enumerate(layers):
            handles.append(layer.register_forward_pre_hook(pre_hook((i, "x")), with_kwargs=True))
            handles.append(layer.register_forward_hook(out_hook((i, "out"))))
            handles.append(get_path(layer, spec.value).register_forward_hook(out_hook((i, "v"))))
            if spec.placement == "post":
                handles.append(get_path(layer, spec.norm1).register_forward_pre_hook(in_hook((i, "z_attn"))))
                handles.append(get_path(layer, spec.norm2).register_forward_pre_hook(in_hook((i, "z_ff"))))
            else:
                handles.append(get_path(layer, spec.norm2).register_forward_pre_hook(in_hook((i, "z_attn"))))
        kwargs = dict(extra or {})
        out = lm.model(input_ids=input_ids.to(lm.device), attention_mask=attention_mask.to(lm.device),
                       output_attentions=True, **kwargs)
    finally:
        for h in handles:
            h.remove()
    attentions = out.attentions
    if attentions is None or len(attentions) != len(layers) or any(a is None for a in attentions):
        raise RuntimeError("the model returned no attention weights; it must run with attn_implementation='eager'")
    lengths = attention_mask.sum(-1).tolist()
    records = []
    for b, n in enumerate(lengths):
        n = int(n)
        seq = []
        for i in range(len(layers)):
            z_ff = store.get((i, "z_ff"))
            seq.append(LayerRecord(
                x=store[(i, "x")][b, :n],
                attn=attentions[i][b, :, :n, :n],
                z_attn=store[(i, "z_attn")][b, :n],
                z_ff=z_ff[b, :n] if z_ff is not None else None,
                out=store[(i, "out")][b, :n],
                v=store[(i, "v")][b, :n],
            ))
        records.append(seq)
    return records
