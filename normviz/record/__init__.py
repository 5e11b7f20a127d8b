"""The one recorded forward pass: hooks that record what every map needs per layer (``recorder``), the pass over
every stack of a model (``recording``), α written into pooled blocks (``alpha_into``), q and k captured for long
inputs (``attention_capture``, ``attention_interface``), and one layer's record seen through its parameters
(``decompose``); the teacher-forced pass of encoder–decoders (``encdec``).
"""

from .recorder import Hooks, LayerRecord, owner_only, record, records_qk, stack_records

__all__ = ["Hooks", "LayerRecord", "owner_only", "record", "records_qk", "stack_records"]
