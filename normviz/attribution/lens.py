"""The logit lens (nostalgebraist 2020): every layer's residual state at one position read out by the model's
final norm and LM head, as log-probabilities [L+1, V].

Row 0 reads the embedding output x^0_i (the first layer's input), row l the residual stream after block l
(x^l_i, layer l's output), each through the final norm (the model's module) and the head; row L is the model's
own log-probabilities (its recorded final hidden state). All from the one recorded pass.
"""

from __future__ import annotations

import numpy as np
import torch

from .predict import final_state, position_index
from .readout import readout_of, stack_view


def residual_states(views, i: int) -> torch.Tensor:
    """[L+1, d]: x^0_i, then each layer's output at i."""
    device = views[-1].device  # a model sharded with device_map: where the final norm and head live
    return torch.stack([views[0].rec.x[i].to(device)] + [v.rec.out[i].to(device) for v in views])


@torch.no_grad()
def logit_lens(session, position: int = -1) -> np.ndarray:
    lm, stack = stack_view(session)
    readout = readout_of(lm)  # refused before the recording pass when there is no head
    views = session.layers(stack)
    i = position_index(position, len(views[0].rec.x))
    states = residual_states(views, i)
    logits = torch.cat([readout.from_residual(states[:-1]), readout.logits(final_state(views, i)[None])])
    return torch.log_softmax(logits.to(torch.float64), -1).to(logits.dtype).cpu().numpy()
